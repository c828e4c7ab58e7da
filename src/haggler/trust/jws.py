"""Detached JWS with an unencoded payload (RFC 7515 Appendix F, RFC 7797), signed with an Ed25519
key (RFC 8037, ``EdDSA``), and that key's public half as a JWK.

This is how a party that reads JOSE rather than haggler's own base64 signatures checks the store's
word: UCP's order webhooks carry such a signature of the exact request body in ``Request-Signature``
and the store's profile publishes the key under ``signing_keys`` (``protocols/ucp``). The payload
is not base64url-encoded (``"b64": false``, listed in ``crit`` as RFC 7797 requires), so the
signature covers the body's bytes as sent, and it is left out of the compact form
(``header..signature``): the receiver has it already.
"""

from __future__ import annotations

import base64

from haggler.trust.canonical import canonical_json
from haggler.trust.keys import key_id
from haggler.trust.signatures import Signer

#: The JWS ``alg`` of an Ed25519 signature (RFC 8037).
ALGORITHM = "EdDSA"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def public_jwk(public_key_b64: str) -> dict[str, str]:
    """The JWK of an Ed25519 public key in haggler's form (base64 of its raw 32 bytes), its ``kid``
    the key's fingerprint (``trust.keys.key_id``)."""
    return {"kid": key_id(public_key_b64), "kty": "OKP", "crv": "Ed25519",
            "x": _b64url(base64.b64decode(public_key_b64)), "use": "sig", "alg": ALGORITHM}


def sign_detached(signer: Signer, payload: bytes) -> str:
    """``header..signature``: ``signer``'s signature of ``payload`` exactly as it is sent."""
    header = {"alg": ALGORITHM, "b64": False, "crit": ["b64"], "kid": key_id(signer.public_key_b64)}
    encoded_header = _b64url(canonical_json(header))
    signature = base64.b64decode(signer.sign(encoded_header.encode("ascii") + b"." + payload))
    return f"{encoded_header}..{_b64url(signature)}"
