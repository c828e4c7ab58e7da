"""Offline verification of a market deal (spec 003: 8. Deal Confirmation), by code that shares
nothing with the signing path; the engine of ``haggler market verify``.

A deal is proven by two Ed25519 signatures over the same bytes: the RFC 8785 canonical JSON of
the ``deal_confirmed`` message without ``buyer.signature`` and ``seller.signature``. The market
signs and verifies those bytes with ``haggler.trust`` (canonical JSON from the ``rfc8785``
package, ``0x`` hex in ``trust.messages``). If this check reused that code, a bug there (a key
sorted by code point instead of UTF-16 unit, ``170.0`` spelled differently from ``170``, a hex
digit case accepted) would sign and then "verify" the same wrong bytes, and the check would
vouch for it. So this module deliberately imports neither ``haggler.trust`` nor ``rfc8785``: it
has its own canonicalization (written from RFC 8785 and ECMAScript's Number::toString), its own
hex decoding and its own reading of the deal; only the Ed25519 arithmetic comes from
``cryptography``. The test suite checks both paths produce the same bytes, so a disagreement
shows up as a failing test, not as a silently accepted deal.

Two inputs are accepted: the document ``GET /market/deals/{dealId}`` serves (``deal``,
``publicKeys``, optional ``ownerApprovals``) or a bare ``deal_confirmed`` message, whose keys
must then be given (``--buyer-key`` / ``--seller-key``). Given keys override the document's:
someone who knows the parties' keys from elsewhere should not have to trust the document's.
An owner approval is the owner's signature over the same signing bytes; it is checked against
the ``publicKey`` it names, so it proves that key approved these terms, and whether that key is
the owner's is for the reader to compare (e.g. with the owner mandate's ``publicKey``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

PARTIES = ("buyer", "seller")
KEY_BYTES = 32
SIGNATURE_BYTES = 64
#: JSON numbers are IEEE doubles (RFC 8785 §3.2.2.3): beyond this, integers lose precision.
MAX_SAFE_INTEGER = 2**53 - 1
_HEX_DIGITS = frozenset("0123456789abcdef")
#: JSON.stringify's short escapes; other characters below U+0020 become \u00xx (lowercase hex).
_SHORT_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


class NotCanonical(ValueError):
    """A value has no RFC 8785 form (NaN, infinity, an unsafe integer, a lone surrogate, a non-JSON type)."""


class DealDocumentError(ValueError):
    """The input cannot be checked at all: unreadable, not JSON, not a deal document, or a missing
    or malformed key given by the caller. (A deal that is checked and fails is a :class:`DealCheck`.)"""


@dataclass(frozen=True)
class Check:
    """One verified item: ``name`` is where it lives in the document (``buyer.signature``)."""

    name: str
    valid: bool
    reason: str


@dataclass(frozen=True)
class DealCheck:
    """Every check made on one deal, in a fixed order; the deal is valid only if all pass."""

    checks: tuple[Check, ...]
    deal_id: str | None = None
    status: str | None = None

    @property
    def valid(self) -> bool:
        return all(check.valid for check in self.checks)

    @property
    def failures(self) -> tuple[Check, ...]:
        return tuple(check for check in self.checks if not check.valid)

    def to_json(self) -> dict[str, Any]:
        """The result for scripts: ``valid``, the served ``dealId``/``status`` and each check."""
        return {"valid": self.valid, "dealId": self.deal_id, "status": self.status,
                "checks": [{"check": c.name, "valid": c.valid, "reason": c.reason} for c in self.checks]}


# -- RFC 8785 canonical JSON ----------------------------------------------------------------------

def canonicalize(value: object) -> bytes:
    """The RFC 8785 canonical UTF-8 bytes of a JSON value (dict, list, str, int, float, bool, None)."""
    parts: list[str] = []
    try:
        _write(value, parts)
    except RecursionError:
        raise NotCanonical("nested too deeply") from None
    try:
        return "".join(parts).encode("utf-8")
    except UnicodeEncodeError:  # RFC 8785 §3.2.2.2: strings must be valid Unicode (I-JSON)
        raise NotCanonical("a string contains a lone surrogate (not Unicode)") from None


def _write(value: object, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise NotCanonical(f"integer {value} is beyond 2**53 - 1: a JSON reader would round it")
        out.append(str(int(value)))
    elif isinstance(value, float):
        out.append(ecmascript_number(value))
    elif isinstance(value, str):
        out.append(_quote(value))
    elif isinstance(value, list):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _write(item, out)
        out.append("]")
    elif isinstance(value, dict):
        if not all(isinstance(key, str) for key in value):
            raise NotCanonical("object keys must be strings")
        out.append("{")
        # RFC 8785 §3.2.3: keys sorted by their UTF-16 code units; big-endian UTF-16 bytes
        # compare in that order (an astral character's surrogates sort below U+E000..U+FFFF).
        for i, key in enumerate(sorted(value, key=_utf16_units)):
            if i:
                out.append(",")
            out.append(_quote(key))
            out.append(":")
            _write(value[key], out)
        out.append("}")
    else:
        raise NotCanonical(f"{type(value).__name__} is not a JSON type")


def _utf16_units(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _quote(text: str) -> str:
    """The string as ECMAScript's JSON.stringify writes it (RFC 8785 §3.2.2.2): only ``"``, ``\\``
    and control characters are escaped; everything else, non-ASCII included, stays literal."""
    escaped = []
    for char in text:
        if char in _SHORT_ESCAPES:
            escaped.append(_SHORT_ESCAPES[char])
        elif char < " ":
            escaped.append(f"\\u{ord(char):04x}")
        else:
            escaped.append(char)
    return '"' + "".join(escaped) + '"'


def ecmascript_number(number: float) -> str:
    """ECMAScript's Number::toString for a finite double (RFC 8785 §3.2.2.3).

    The digits are the shortest that read back as the same double (Python's ``repr`` finds the
    same ones); the layout is ECMAScript's: plain up to 1e21, ``0.000001`` down to 1e-6,
    exponent form (``1e+21``, ``1.5e-7``) outside, no ``.0`` on integers, and -0 is ``0``."""
    if not math.isfinite(number):
        raise NotCanonical(f"{number} is not a JSON number")
    if number == 0:
        return "0"
    sign = "-" if number < 0 else ""
    digits, point = _shortest_digits(abs(number))  # number = 0.<digits> * 10**point
    k = len(digits)
    if k <= point <= 21:
        body = digits + "0" * (point - k)
    elif 0 < point <= 21:
        body = digits[:point] + "." + digits[point:]
    elif -6 < point <= 0:
        body = "0." + "0" * -point + digits
    else:
        exponent = point - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        body = f"{mantissa}e{'+' if exponent > 0 else '-'}{abs(exponent)}"
    return sign + body


def _shortest_digits(number: float) -> tuple[str, int]:
    """For a positive finite double: its shortest round-trip decimal digits (no leading or
    trailing zeros) and ``point`` such that the double is ``0.<digits> * 10**point``."""
    text = repr(number)  # e.g. "123.45", "1e-07", "1.5e+300", "0.0001"
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    return stripped.rstrip("0"), point


def deal_signing_bytes(deal: Mapping[str, Any]) -> bytes:
    """What both parties sign: the canonical JSON of the deal without ``buyer.signature`` and
    ``seller.signature`` (every other field, the agentIds included)."""
    unsigned = dict(deal)
    for party in PARTIES:
        side = unsigned.get(party)
        if isinstance(side, dict):
            unsigned[party] = {field: value for field, value in side.items() if field != "signature"}
    return canonicalize(unsigned)


# -- the "0x" hex form ----------------------------------------------------------------------------

def _decode_hex(value: object, size: int, what: str) -> bytes:
    """``value`` as ``0x`` + exactly ``2 * size`` lowercase hex digits; one spelling only, so an
    uppercase or unprefixed value is refused rather than normalised."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be a string, \"0x\" + {2 * size} lowercase hex digits")
    if not value.startswith("0x"):
        raise ValueError(f"{what} must start with \"0x\"")
    body = value[2:]
    if not set(body) <= _HEX_DIGITS:
        uppercase = set(body) <= _HEX_DIGITS | set("ABCDEF")
        raise ValueError(f"{what} must be lowercase hex" if uppercase else f"{what} has a non-hex character")
    if len(body) != 2 * size:
        raise ValueError(f"{what} must be \"0x\" + {2 * size} hex digits, found {len(body)}")
    return bytes.fromhex(body)


def _public_key(value: object, what: str) -> Ed25519PublicKey:
    raw = _decode_hex(value, KEY_BYTES, what)
    try:
        return Ed25519PublicKey.from_public_bytes(raw)
    except ValueError as exc:
        raise ValueError(f"{what} is not an Ed25519 public key: {exc}") from None


# -- reading and checking a deal ------------------------------------------------------------------

def read_document(path: Path) -> Any:
    """The JSON in ``path``, read strictly: UTF-8, no NaN/Infinity, no duplicate keys (two
    readers could each believe a different copy). Any problem is a DealDocumentError."""
    try:
        text = path.read_bytes().decode("utf-8")
    except OSError as exc:
        raise DealDocumentError(f"cannot read {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise DealDocumentError(f"{path} is not UTF-8 text") from None
    try:
        return json.loads(text, parse_constant=_refuse_constant, object_pairs_hook=_unique_keys)
    except ValueError as exc:  # JSONDecodeError, NaN/Infinity, a duplicate key
        raise DealDocumentError(f"{path} is not JSON: {exc}") from None
    except RecursionError:
        raise DealDocumentError(f"{path} is nested too deeply to read") from None


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def check_deal(document: object, buyer_key: str | None = None, seller_key: str | None = None) -> DealCheck:
    """Check a deal offline: its shape, both parties' signatures and each owner approval given.

    ``document`` is a served deal document or a bare ``deal_confirmed``; ``buyer_key`` and
    ``seller_key`` (``0x`` hex, as ``--buyer-key``/``--seller-key``) override its ``publicKeys``.
    Raises DealDocumentError when the deal cannot be checked (wrong shape, a key missing, a
    given key malformed); everything else, a malformed key inside the document included, is a
    failed check in the result.
    """
    if not isinstance(document, dict):
        raise DealDocumentError("not a deal: the JSON is not an object")
    if "deal" in document:
        deal = document["deal"]
        if not isinstance(deal, dict):
            raise DealDocumentError("not a deal document: \"deal\" is not an object")
        served_keys = _object_field(document, "publicKeys")
        approvals = _object_field(document, "ownerApprovals")
        deal_id, status = document.get("dealId"), document.get("status")
    elif "type" in document:
        deal, served_keys, approvals, deal_id, status = document, {}, {}, None, None
    else:
        raise DealDocumentError("not a deal: neither a served deal document (\"deal\", \"publicKeys\") "
                                "nor a deal_confirmed message (\"type\")")
    keys = {party: _party_key(party, given, served_keys)
            for party, given in (("buyer", buyer_key), ("seller", seller_key))}
    unknown = sorted(set(approvals) - set(PARTIES))
    if unknown:
        raise DealDocumentError(f"ownerApprovals names {unknown[0]!r}, which is not buyer or seller")
    signed: bytes | NotCanonical
    try:
        signed = deal_signing_bytes(deal)
    except NotCanonical as exc:
        signed = exc
    checks = [_shape(deal)]
    for party in PARTIES:
        side = deal.get(party)
        signature = side.get("signature") if isinstance(side, dict) else None
        if not isinstance(side, dict):
            checks.append(Check(f"{party}.signature", False, f"the deal has no {party} object"))
        elif signature is None:
            checks.append(Check(f"{party}.signature", False, f"not signed: the deal has no {party}.signature"))
        else:
            checks.append(_signature(f"{party}.signature", keys[party], signature, signed))
    for party in PARTIES:
        if party in approvals:
            checks.append(_approval(party, approvals[party], signed))
    return DealCheck(tuple(checks), deal_id if isinstance(deal_id, str) else None,
                     status if isinstance(status, str) else None)


def _object_field(document: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = document.get(name, {})
    if not isinstance(value, dict):
        raise DealDocumentError(f"not a deal document: \"{name}\" is not an object")
    return value


def _party_key(party: str, given: str | None, served: Mapping[str, Any]) -> tuple[str, object]:
    """``(where the key comes from, the key)``: the given one (checked now: the caller's error),
    else the document's (checked with the signature: the document's fault)."""
    option = f"--{party}-key"
    if given is not None:
        try:
            _public_key(given, option)
        except ValueError as exc:
            raise DealDocumentError(str(exc)) from None
        return option, given
    if party not in served:
        raise DealDocumentError(f"no {party} public key: the input carries no publicKeys.{party}; give {option} 0x...")
    return f"publicKeys.{party}", served[party]


def _shape(deal: Mapping[str, Any]) -> Check:
    problems = [] if deal.get("type") == "deal_confirmed" else [f"type is {deal.get('type')!r}, not 'deal_confirmed'"]
    problems += [f"no {party} object" for party in PARTIES if not isinstance(deal.get(party), dict)]
    return Check("shape", not problems, "; ".join(problems) or "a deal_confirmed with buyer and seller")


def _signature(name: str, key: tuple[str, object], signature: object, signed: bytes | NotCanonical) -> Check:
    """Whether ``signature`` is the key's Ed25519 signature of the signing bytes (or why the deal
    has none), and why not."""
    source, value = key
    if isinstance(signed, NotCanonical):
        return Check(name, False, f"the deal has no canonical JSON, so nobody can have signed it: {signed}")
    try:
        public_key = _public_key(value, source)
        raw = _decode_hex(signature, SIGNATURE_BYTES, name)
    except ValueError as exc:
        return Check(name, False, str(exc))
    try:
        public_key.verify(raw, signed)
    except InvalidSignature:
        return Check(name, False, f"does not verify with {source} {_short(value)} (other terms or another key)")
    return Check(name, True, f"verifies with {source} {_short(value)}")


def _approval(party: str, approval: object, signed: bytes | NotCanonical) -> Check:
    name = f"ownerApprovals.{party}"
    if not isinstance(approval, dict):
        return Check(name, False, "not an object with publicKey and signature")
    return _signature(name, (f"{name}.publicKey", approval.get("publicKey")), approval.get("signature"), signed)


def _short(key: object) -> str:
    """A key as a reader compares it by eye: ``0x1234abcd…89ef``."""
    return f"{key[:10]}…{key[-4:]}" if isinstance(key, str) else repr(key)
