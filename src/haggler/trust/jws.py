"""JWS (RFC 7515) on ECDSA keys (RFC 7518: ``ES256``, ``ES384``, ``ES512``), as UCP uses it: the
store's word signed with its P-256 key, and others' words checked against a public key given as
a JWK (RFC 7517).

Signing, with the key whose JWK the store's UCP profile publishes (:func:`public_jwk`), in the two
detached forms UCP asks for (:func:`sign_detached`):

- ``encoded=False``: the payload unencoded (RFC 7797: ``"b64": false``, listed in ``crit``), so the
  signature covers the bytes as sent: the order webhooks' ``Request-Signature`` (order.md: "a
  detached JWT (RFC 7797)");
- ``encoded=True``: RFC 7515 Appendix F, the payload base64url-encoded in the signing input and
  left out of the compact form, header exactly ``{"alg", "kid"}``: AP2's ``merchant_authorization``.

Either way the compact form is ``header..signature``: the receiver has the payload already.

Verifying (a platform's mandate and its key binding, the store's own authorization coming back):
:func:`parse_compact` splits a compact JWS (:func:`attach` first puts a detached payload back) and
:func:`verify` checks it against a JWK. Only ES256, ES384 and ES512 are accepted (never ``none``,
an HMAC or RSA), the JWK must be an EC key on the algorithm's own curve, and a JWS with ``crit``
is refused (this module understands no extension on the verifying side). ``cryptography`` does
the ECDSA; this module only frames it.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from haggler.trust.canonical import canonical_json
from haggler.trust.keys import key_id
from haggler.trust.signatures import Signer


@dataclass(frozen=True)
class _Curve:
    jwk_name: str
    curve: ec.EllipticCurve
    hash: hashes.HashAlgorithm
    #: The bytes of a coordinate, of R and of S.
    size: int


#: The algorithms accepted, each with its curve (RFC 7518, 3.4 and 6.2.1.1).
CURVES = {"ES256": _Curve("P-256", ec.SECP256R1(), hashes.SHA256(), 32),
          "ES384": _Curve("P-384", ec.SECP384R1(), hashes.SHA384(), 48),
          "ES512": _Curve("P-521", ec.SECP521R1(), hashes.SHA512(), 66)}
_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class JwsError(ValueError):
    """A JWS or JWK that cannot be read or does not verify; the message says why."""


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515, 2)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def b64url_decode(text: str, what: str) -> bytes:
    """The bytes of unpadded base64url ``text``; JwsError naming ``what`` for anything else."""
    if not isinstance(text, str) or not _B64URL.fullmatch(text) or len(text) % 4 == 1:
        raise JwsError(f"{what} is not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise JwsError(f"{what} is not base64url") from None


def json_object(data: bytes, what: str) -> dict[str, Any]:
    """A JSON object from UTF-8 bytes; JwsError naming ``what`` for anything else."""
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise JwsError(f"{what} is not JSON") from None
    if not isinstance(value, dict):
        raise JwsError(f"{what} is not a JSON object")
    return value


# -- signing ---------------------------------------------------------------------------------------


def public_jwk(signer: Signer) -> dict[str, str]:
    """The JWK of ``signer``'s ECDSA public key (its uncompressed point, base64), its ``kid`` the
    key's fingerprint (``trust.keys.key_id``): what a verifier finds by the ``kid`` of a signature."""
    curve = CURVES[signer.algorithm]
    point = base64.b64decode(signer.public_key_b64)
    return {"kid": key_id(signer.public_key_b64), "kty": "EC", "crv": curve.jwk_name,
            "x": b64url(point[1:1 + curve.size]), "y": b64url(point[1 + curve.size:]), "use": "sig",
            "alg": signer.algorithm}


def sign_detached(signer: Signer, payload: bytes, *, encoded: bool) -> str:
    """``header..signature``: ``signer``'s signature of ``payload``, unencoded (RFC 7797) or
    base64url-encoded (RFC 7515 Appendix F) in the signing input; the header is canonical JSON."""
    header: dict[str, Any] = {"alg": signer.algorithm, "kid": key_id(signer.public_key_b64)}
    if not encoded:
        header |= {"b64": False, "crit": ["b64"]}
    encoded_header = b64url(canonical_json(header))
    signed = b64url(payload).encode("ascii") if encoded else payload
    signature = base64.b64decode(signer.sign(encoded_header.encode("ascii") + b"." + signed))
    return f"{encoded_header}..{b64url(signature)}"


# -- verifying -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Compact:
    """A compact JWS taken apart, not yet verified."""

    header: dict[str, Any]
    payload: bytes
    signing_input: bytes
    signature: bytes


def attach(detached: str, payload: bytes, what: str = "the JWS") -> str:
    """The compact JWS of a detached one (``header..signature``, RFC 7515 Appendix F) with its
    ``payload`` put back, base64url-encoded."""
    parts = detached.split(".") if isinstance(detached, str) else []
    if len(parts) != 3 or parts[1] != "":
        raise JwsError(f"{what} is not a detached JWS (header..signature)")
    return f"{parts[0]}.{b64url(payload)}.{parts[2]}"


def parse_compact(token: str, what: str = "the JWS") -> Compact:
    """``token`` (``header.payload.signature``) taken apart; JwsError says what is malformed."""
    parts = token.split(".") if isinstance(token, str) else []
    if len(parts) != 3:
        raise JwsError(f"{what} is not a compact JWS (header.payload.signature)")
    header = json_object(b64url_decode(parts[0], f"{what}'s header"), f"{what}'s header")
    if "crit" in header:
        raise JwsError(f"{what}'s header lists critical extensions ({header['crit']!r}), which are not supported")
    return Compact(header, b64url_decode(parts[1], f"{what}'s payload"), f"{parts[0]}.{parts[1]}".encode("ascii"),
                   b64url_decode(parts[2], f"{what}'s signature"))


def ec_public_key(jwk: Mapping[str, Any]) -> ec.EllipticCurvePublicKey:
    """The ECDSA public key a JWK describes (``kty`` EC, ``crv`` P-256, P-384 or P-521, ``x`` and
    ``y`` full-length coordinates of a point on the curve); JwsError says what is wrong."""
    if not isinstance(jwk, Mapping) or jwk.get("kty") != "EC":
        raise JwsError("the key is not an EC JWK")
    curve = next((c for c in CURVES.values() if c.jwk_name == jwk.get("crv")), None)
    if curve is None:
        raise JwsError(f"the key's curve {jwk.get('crv')!r} is not P-256, P-384 or P-521")
    x, y = (b64url_decode(jwk.get(name), f"the key's {name}") for name in ("x", "y"))
    if len(x) != curve.size or len(y) != curve.size:
        raise JwsError(f"the key's coordinates are not {curve.size} bytes each, as {curve.jwk_name} needs")
    try:
        return ec.EllipticCurvePublicNumbers(int.from_bytes(x, "big"), int.from_bytes(y, "big"),
                                             curve.curve).public_key()
    except ValueError:
        raise JwsError(f"the key is not a point on {curve.jwk_name}") from None


def verify(jws: Compact, jwk: Mapping[str, Any], what: str = "the JWS") -> None:
    """Check that ``jws`` is signed by the key ``jwk`` describes, with the algorithm its header
    names; JwsError says what failed."""
    alg = jws.header.get("alg")
    curve = CURVES.get(alg) if isinstance(alg, str) else None
    if curve is None:
        raise JwsError(f"{what}'s alg {alg!r} is not one of {', '.join(CURVES)}")
    key = ec_public_key(jwk)
    if key.curve.name != curve.curve.name or jwk.get("alg", alg) != alg:
        raise JwsError(f"{what} is {alg} but the key {jwk.get('kid')!r} is for "
                       f"{jwk.get('alg') or jwk.get('crv')}")
    if len(jws.signature) != 2 * curve.size:
        raise JwsError(f"{what}'s signature is not the {2 * curve.size} bytes of an {alg} signature")
    r, s = (int.from_bytes(jws.signature[i:i + curve.size], "big") for i in (0, curve.size))
    try:
        key.verify(encode_dss_signature(r, s), jws.signing_input, ec.ECDSA(curve.hash))
    except InvalidSignature:
        raise JwsError(f"{what}'s signature does not verify with the key {jwk.get('kid')!r}") from None


def find_key(jwks: Iterable[Mapping[str, Any]], kid: object) -> Mapping[str, Any] | None:
    """The JWK whose ``kid`` is ``kid`` (a string), or None."""
    if not isinstance(kid, str):
        return None
    return next((k for k in jwks if isinstance(k, Mapping) and k.get("kid") == kid), None)
