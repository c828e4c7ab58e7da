"""Ed25519 signatures as haggler writes them: base64 of the 64-byte signature over exact bytes.

Signing needs a private key and so lives with the key (``SigningKeys.sign``); anything that
signs is a :class:`Signer`. Checking needs only public keys, so it is here, for the store
and for anyone verifying offline.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from typing import Protocol

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from haggler.trust.keys import PublicKeyError, decode_public_key


class Signer(Protocol):
    """A key that signs: ``SigningKeys`` is one. ``algorithm`` is the JWS ``alg`` its signatures
    are made for (``EdDSA``, ``ES256``), ``sign`` gives them in that form, base64."""

    @property
    def algorithm(self) -> str: ...

    @property
    def public_key_b64(self) -> str: ...

    def sign(self, data: bytes) -> str: ...


def signature_valid(public_key: Ed25519PublicKey, signature_b64: str, data: bytes) -> bool:
    """Whether ``signature_b64`` is a valid signature of ``data`` under ``public_key`` (False for malformed base64)."""
    try:
        public_key.verify(base64.b64decode(signature_b64, validate=True), data)
    except (InvalidSignature, binascii.Error, ValueError):
        return False
    return True


def signer_among(public_keys_b64: Iterable[str], signature_b64: str, data: bytes) -> str | None:
    """The first of the encoded public keys under which the signature verifies, or None."""
    for candidate in public_keys_b64:
        try:
            key = decode_public_key(candidate)
        except PublicKeyError:
            continue
        if signature_valid(key, signature_b64, data):
            return candidate
    return None
