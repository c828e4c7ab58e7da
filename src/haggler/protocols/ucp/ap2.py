"""UCP's AP2 mandates extension (``dev.ucp.shopping.ap2_mandate``, ap2-mandates.md at v2026-01-11),
business side: the store's signature on every checkout it answers, and the platform's mandate
checked before a completion charges anything.

It is negotiated once per checkout, at create, from the profile the creator's ``UCP-Agent`` names
(``webhooks.py`` reads it, ``views.negotiated`` intersects): when both sides list it, the session
keeps the platform's ``signing_keys`` then (``Session.mandate_keys``) and is locked into the
mandate flow ("Activation and Session Locking"): no later request can take it out.

- :func:`sign_checkout`: ``ap2.merchant_authorization``, a detached JWS (RFC 7515 Appendix F) over
  the RFC 8785 canonical checkout without its ``ap2``, header ``{"alg": "ES256", "kid"}``, made with
  the store's P-256 key ("Business Authorization").
- :func:`check_mandate`: a completion's ``ap2.checkout_mandate`` ("Business Verification"), each
  refusal a :class:`MandateRefused` with the extension's error code, before any charge:

  1. present, else ``mandate_required``;
  2. an SD-JWT+kb (``trust/sd_jwt.py``, RFC 9901) signed by a key of the creator's
     ``signing_keys`` (the trusted platform provider flow; none named: ``agent_missing_key``),
     its key binding for this store (``aud`` the store's profile URL) and fresh
     (else ``mandate_invalid_signature``), unexpired (else ``mandate_expired``);
  3. its ``checkout`` claim, the checkout as the platform was answered, carrying
     ``ap2.merchant_authorization`` (else ``merchant_authorization_missing``) that verifies with
     this store's own key over that checkout (else ``merchant_authorization_invalid``);
  4. that checkout's :data:`TERMS` equal to the session's now (else ``mandate_scope_mismatch``).

The user credential flow (a key bound to the payment credential) is not supported: a mandate
must be signed by a key the platform's profile publishes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from haggler.errors import Forbidden
from haggler.trust.canonical import CanonicalizationError, canonical_json
from haggler.trust.jws import JwsError, attach, find_key, parse_compact, public_jwk, sign_detached, verify
from haggler.trust.sd_jwt import Expired, SdJwtError, UnknownKey, verify_presentation
from haggler.trust.signatures import Signer

#: The checkout's fields a mandate must have authorized as they stand: the spec's id, totals and
#: line items, and the currency and fulfillment (where it ships and how) besides.
TERMS = ("id", "currency", "line_items", "totals", "fulfillment")


class MandateRefused(Forbidden):
    """A completion the AP2 extension refuses, nothing charged: ``code`` is the extension's error
    code (``ap2_mandate.json#/$defs/error_code``), the message says what failed, and that nothing
    was charged."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message}; nothing was charged")
        self.code = code

    def fields(self) -> dict[str, Any]:
        return {"error": self.message, "code": self.code}


def _unsigned(checkout: Mapping[str, Any]) -> bytes:
    """What ``merchant_authorization`` signs: the checkout without ``ap2``, RFC 8785 canonical."""
    return canonical_json({name: value for name, value in checkout.items() if name != "ap2"})


def sign_checkout(checkout: dict[str, Any], signer: Signer) -> None:
    """Set ``checkout["ap2"]`` to the store's ``merchant_authorization`` of the checkout as it
    stands: call it last, once nothing else will change the body."""
    checkout["ap2"] = {"merchant_authorization": sign_detached(signer, _unsigned(checkout), encoded=True)}


def _verify_authorization(authorization: str, checkout: Mapping[str, Any], keys: Sequence[Mapping[str, Any]]) -> None:
    """ap2-mandates.md, "Verify Business Authorization": JwsError says what failed."""
    what = "merchant_authorization"
    try:
        signed = parse_compact(attach(authorization, _unsigned(checkout), what), what)
    except (CanonicalizationError, RecursionError) as exc:
        raise JwsError(f"the checkout has no canonical form: {exc}") from None
    key = find_key(keys, signed.header.get("kid"))
    if key is None:
        raise JwsError(f"{what}'s kid {signed.header.get('kid')!r} names no key of this store")
    verify(signed, key, "merchant_authorization")


def check_mandate(mandate: str | None, current: Mapping[str, Any], *, platform_keys: Sequence[Mapping[str, Any]],
                  signer: Signer, audience: str, now: datetime) -> None:
    """Refuse (:class:`MandateRefused`) a completion whose mandate does not authorize ``current``,
    the checkout as UCP shows it now, as the module's docstring lists; ``audience``: the store's
    profile URL, which the key binding must name."""
    if mandate is None:
        raise MandateRefused("mandate_required", "AP2 was negotiated for this checkout: its completion must carry "
                                                 "ap2.checkout_mandate")
    try:
        claims = verify_presentation(mandate, platform_keys, audience=audience, now=now)
    except UnknownKey as exc:
        raise MandateRefused("agent_missing_key", f"the checkout mandate cannot be verified: {exc}") from None
    except Expired as exc:
        raise MandateRefused("mandate_expired", f"the checkout mandate {exc}") from None
    except SdJwtError as exc:
        raise MandateRefused("mandate_invalid_signature", f"the checkout mandate does not verify: {exc}") from None
    embedded = claims.get("checkout")
    if not isinstance(embedded, dict):
        raise MandateRefused("mandate_scope_mismatch", "the checkout mandate discloses no checkout claim, the "
                                                       "checkout it authorizes")
    ap2 = embedded.get("ap2")
    authorization = ap2.get("merchant_authorization") if isinstance(ap2, dict) else None
    if not isinstance(authorization, str):
        raise MandateRefused("merchant_authorization_missing", "the checkout in the mandate carries no "
                                                               "ap2.merchant_authorization")
    try:
        _verify_authorization(authorization, embedded, [public_jwk(signer)])
    except JwsError as exc:
        raise MandateRefused("merchant_authorization_invalid",
                             f"the checkout in the mandate is not one this store signed: {exc}") from None
    changed = [name for name in TERMS if embedded.get(name) != current.get(name)]
    if changed:
        raise MandateRefused("mandate_scope_mismatch", f"the checkout mandate authorizes another {', '.join(changed)} "
                                                       f"than checkout {current.get('id')}'s now")
