"""SD-JWT with Key Binding (RFC 9901, "Selective Disclosure for JSON Web Tokens"), verified as its
holder presents it: the form of an AP2 checkout mandate (``protocols/ucp/ap2.py``).

A presentation is ``<issuer-signed JWT>~<disclosure>~...~<disclosure>~<KB-JWT>``.
:func:`verify_presentation` checks it in RFC 9901's order and refuses it at the first failure,
naming it:

1. (7.1) The issuer-signed JWT: ES256, ES384 or ES512 (``trust/jws.py``), signed by the issuer key
   its header's ``kid`` names among the keys given (:class:`UnknownKey` when none is named or
   none matches); ``_sd_alg`` absent or ``sha-256``, the only hash supported.
2. (4.2, 7.1) Each disclosure: base64url of a JSON array ``[salt, name, value]`` (an object's
   property) or ``[salt, value]`` (an array element), its digest the base64url SHA-256 of its
   ASCII text as presented. Each digest in an ``_sd`` array or an ``{"...": digest}`` element is
   replaced by what its disclosure discloses, recursively, and dropped when no disclosure matches
   (a decoy or an undisclosed claim). Refused: a digest met twice, a disclosure sent twice, one
   that no digest references, one of the wrong shape for where it is referenced, a disclosed name
   ``_sd`` or ``...``, or one that is already a claim there.
3. (7.1 step 5) The claims so disclosed: ``exp`` is required, and the present must be before it
   (:class:`Expired`); ``iat`` and ``nbf``, when present, must not be later than now plus
   :data:`CLOCK_SKEW`.
4. (7.3) The key binding: the holder's key is the ``cnf.jwk`` claim (RFC 7800); the KB-JWT's
   header ``typ`` is ``kb+jwt`` and it is signed by that key (ES256/384/512); its ``aud`` is the
   ``audience`` given (a string, or an array holding it); it has a ``nonce``; its ``iat`` is within
   :data:`KEY_BINDING_MAX_AGE` before now (and no later than now plus :data:`CLOCK_SKEW`); its
   ``sd_hash`` is the base64url SHA-256 of the presentation up to and including the ``~`` before
   the KB-JWT, so no disclosure can be added, dropped or changed after the holder signed.

An SD-JWT without a key binding (ending in ``~``) is refused: AP2 asks for ``SD-JWT+kb``. The
verifier issues no nonce (UCP 2026-01-11 gives the business no step to send one), so a nonce is
only required to be there; the binding's freshness rests on its ``iat``. The ``typ`` of the
issuer-signed JWT is not checked.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from haggler.trust.jws import JwsError, b64url, b64url_decode, find_key, json_object, parse_compact, verify

#: How far ahead of our clock another party's clock may run (an ``iat`` or ``nbf`` that far in the
#: future is taken as now).
CLOCK_SKEW = timedelta(seconds=60)
#: How old a key binding may be: it is made when the holder presents the SD-JWT, just before.
KEY_BINDING_MAX_AGE = timedelta(minutes=10)
_HASH = "sha-256"


class SdJwtError(ValueError):
    """The presentation does not verify; the message says what failed."""


class UnknownKey(SdJwtError):
    """The issuer-signed JWT names no key among those given to verify it with."""


class Expired(SdJwtError):
    """The SD-JWT's ``exp`` has passed, or it has none."""


def _digest(text: str) -> str:
    return b64url(hashlib.sha256(text.encode("ascii")).digest())


def _time(claims: Mapping[str, Any], name: str, where: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SdJwtError(f"{where}'s {name} is not a NumericDate")
    return float(value)


class _Disclosed:
    """The disclosures of one presentation, by digest, and the digests met while resolving."""

    def __init__(self, encoded: Sequence[str]) -> None:
        self.by_digest: dict[str, list[Any]] = {}
        self.seen: set[str] = set()
        for number, text in enumerate(encoded, 1):
            where = f"disclosure {number}"
            try:
                value = json.loads(b64url_decode(text, where).decode("utf-8"))
            except (JwsError, UnicodeDecodeError, ValueError, RecursionError) as exc:
                raise SdJwtError(f"{where} is not base64url JSON: {exc}") from None
            if not isinstance(value, list) or len(value) not in (2, 3) or not isinstance(value[0], str):
                raise SdJwtError(f"{where} is not an array [salt, name, value] or [salt, value]")
            digest = _digest(text)
            if digest in self.by_digest:
                raise SdJwtError(f"{where} is sent twice")
            self.by_digest[digest] = value

    def _take(self, digest: object) -> list[Any] | None:
        if not isinstance(digest, str):
            raise SdJwtError(f"a digest {digest!r} is not a string")
        if digest in self.seen:
            raise SdJwtError(f"the digest {digest} appears more than once")
        self.seen.add(digest)
        return self.by_digest.get(digest)

    def resolve(self, value: Any) -> Any:
        """``value`` with every digest it holds replaced by what its disclosure discloses (RFC
        9901, 7.1 step 3), recursively; an undisclosed one dropped."""
        if isinstance(value, dict):
            resolved = {name: self.resolve(member) for name, member in value.items() if name != "_sd"}
            digests = value.get("_sd", [])
            if not isinstance(digests, list):
                raise SdJwtError("an _sd claim is not an array")
            for digest in digests:
                disclosure = self._take(digest)
                if disclosure is None:
                    continue
                if len(disclosure) != 3 or not isinstance(disclosure[1], str):
                    raise SdJwtError(f"the disclosure for {digest} is referenced as a property but is not "
                                     "[salt, name, value]")
                name = disclosure[1]
                if name in ("_sd", "...") or name in resolved:
                    raise SdJwtError(f"the disclosure for {digest} discloses {name!r}, which is reserved or "
                                     "already a claim there")
                resolved[name] = self.resolve(disclosure[2])
            return resolved
        if isinstance(value, list):
            out = []
            for element in value:
                if isinstance(element, dict) and set(element) == {"..."}:
                    disclosure = self._take(element["..."])
                    if disclosure is None:
                        continue
                    if len(disclosure) != 2:
                        raise SdJwtError(f"the disclosure for {element['...']} is referenced as an array "
                                         "element but is not [salt, value]")
                    out.append(self.resolve(disclosure[1]))
                else:
                    out.append(self.resolve(element))
            return out
        return value


def verify_presentation(token: str, issuer_keys: Sequence[Mapping[str, Any]], *, audience: str,
                        now: datetime) -> dict[str, Any]:
    """The disclosed claims of an SD-JWT+KB presentation, verified as the module's docstring
    lists, ``_sd_alg`` removed; SdJwtError (or its :class:`UnknownKey`, :class:`Expired`) names
    what failed."""
    if not isinstance(token, str) or "~" not in token:
        raise SdJwtError("is not an SD-JWT (issuer-signed JWT~disclosures~key binding JWT)")
    parts = token.split("~")
    issuer_jwt, disclosures, kb_jwt = parts[0], parts[1:-1], parts[-1]
    if not kb_jwt:
        raise SdJwtError("has no key binding JWT after its last ~ (an SD-JWT+kb is required)")
    try:
        issued = parse_compact(issuer_jwt, "the issuer-signed JWT")
        if not issuer_keys:
            raise UnknownKey("the platform's profile publishes no signing_keys")
        key = find_key(issuer_keys, issued.header.get("kid"))
        if key is None:
            raise UnknownKey(f"the issuer-signed JWT's kid {issued.header.get('kid')!r} names none of the "
                             "signing_keys of the platform's profile")
        verify(issued, key, "the issuer-signed JWT")
        payload = json_object(issued.payload, "the issuer-signed JWT's payload")
    except JwsError as exc:
        raise SdJwtError(str(exc)) from None
    algorithm = payload.pop("_sd_alg", _HASH)
    if algorithm != _HASH:
        raise SdJwtError(f"_sd_alg {algorithm!r} is not supported (only {_HASH})")
    disclosed = _Disclosed(disclosures)
    try:
        claims = disclosed.resolve(payload)
    except RecursionError:
        raise SdJwtError("its claims are nested too deeply") from None
    unreferenced = set(disclosed.by_digest) - disclosed.seen
    if unreferenced:
        raise SdJwtError(f"{len(unreferenced)} disclosure(s) are referenced by no digest")
    _check_times(claims, now)
    _check_binding(token[:len(token) - len(kb_jwt)], kb_jwt, claims, audience, now)
    return claims


def _check_times(claims: Mapping[str, Any], now: datetime) -> None:
    moment = now.timestamp()
    expires = _time(claims, "exp", "the SD-JWT")
    if expires is None:
        raise Expired("has no exp: a mandate that never expires is not accepted")
    if moment >= expires:
        raise Expired(f"expired at {datetime.fromtimestamp(expires, now.tzinfo).isoformat()}")
    for name in ("iat", "nbf"):
        at = _time(claims, name, "the SD-JWT")
        if at is not None and at > moment + CLOCK_SKEW.total_seconds():
            raise SdJwtError(f"its {name} is in the future")


def _check_binding(presented: str, kb_jwt: str, claims: Mapping[str, Any], audience: str, now: datetime) -> None:
    """RFC 9901, 7.3: the KB-JWT signed by the ``cnf`` key, for us, fresh, over this presentation."""
    confirmation = claims.get("cnf")
    holder = confirmation.get("jwk") if isinstance(confirmation, dict) else None
    if not isinstance(holder, dict):
        raise SdJwtError("has no cnf.jwk, the holder key its key binding must be signed with")
    try:
        binding = parse_compact(kb_jwt, "the key binding JWT")
        if binding.header.get("typ") != "kb+jwt":
            raise SdJwtError(f"the key binding JWT's typ is {binding.header.get('typ')!r}, not 'kb+jwt'")
        verify(binding, holder, "the key binding JWT")
        bound = json_object(binding.payload, "the key binding JWT's payload")
    except JwsError as exc:
        raise SdJwtError(str(exc)) from None
    aud = bound.get("aud")
    if aud != audience and not (isinstance(aud, list) and audience in aud):
        raise SdJwtError(f"the key binding JWT's aud {aud!r} is not this store ({audience})")
    if not isinstance(bound.get("nonce"), str) or not bound["nonce"]:
        raise SdJwtError("the key binding JWT has no nonce")
    issued = _time(bound, "iat", "the key binding JWT")
    moment = now.timestamp()
    if issued is None or issued > moment + CLOCK_SKEW.total_seconds() or \
            issued < moment - KEY_BINDING_MAX_AGE.total_seconds():
        raise SdJwtError(f"the key binding JWT's iat is missing or not within the "
                         f"{int(KEY_BINDING_MAX_AGE.total_seconds() // 60)} minutes before now")
    if bound.get("sd_hash") != _digest(presented):
        raise SdJwtError("the key binding JWT's sd_hash is not the hash of the SD-JWT presented with it")
