"""Signed JSON messages of the agent-native market (spec 003: Message Types, Owner Mandate Format).

The market's wire form for keys and signatures is ``"0x"`` + lowercase hex of the raw bytes:
an Ed25519 public key is ``0x`` + 64 hex digits (32 bytes), a signature ``0x`` + 128 (64 bytes).
Anything else (uppercase, a missing ``0x``, the wrong length) is refused, never normalised, so
one key or signature has exactly one spelling. (The audit trail's base64 forms are in ``keys``
and ``signatures``; this module is the only home of the hex form.)

What is signed is the RFC 8785 canonical JSON (``trust.canonical``) of the message without its
top-level ``signature`` field, so key order and number spelling (``170`` or ``170.0``) do not
change the bytes, and every other byte does. Nested objects keep their own fields: a listing's
``ownerMandate`` (signed by the owner, ``publicKey`` included) is inside the bytes the seller
agent signs.

A deal confirmation (spec 003: 8. Deal Confirmation) carries two signatures, at
``buyer.signature`` and ``seller.signature``; both parties sign :func:`deal_signing_bytes`,
the deal without either signature, so each signs the same bytes and neither signature covers
the other.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any, Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from haggler.trust.canonical import CanonicalizationError, canonical_json
from haggler.trust.keys import PublicKeyError, raw_public_key

PUBLIC_KEY_BYTES = 32
SIGNATURE_BYTES = 64

Party = Literal["buyer", "seller"]
PARTIES: tuple[Party, ...] = ("buyer", "seller")


class SignatureFormatError(ValueError):
    """A value is not a signature in the market's form (``0x`` + 128 lowercase hex digits); the message says why."""


def _decode_hex(value: object, size: int, what: str, error: type[ValueError]) -> bytes:
    digits = 2 * size
    if not isinstance(value, str):
        raise error(f"{what} must be a string, \"0x\" + {digits} lowercase hex digits")
    if not value.startswith("0x"):
        hint = " (found \"0X\": the prefix is lowercase)" if value.startswith("0X") else ""
        raise error(f"{what} must start with \"0x\"{hint}")
    body = value[2:]
    if re.fullmatch(r"[0-9a-fA-F]*", body) is None:
        raise error(f"{what} must be \"0x\" + hex digits, found a character that is not one")
    if body != body.lower():
        raise error(f"{what} must be lowercase hex")
    if len(body) != digits:
        raise error(f"{what} must be \"0x\" + {digits} hex digits ({size} bytes), found {len(body)} digits")
    return bytes.fromhex(body)


def encode_hex_public_key(key: Ed25519PrivateKey | Ed25519PublicKey) -> str:
    """``0x`` + lowercase hex of the raw 32-byte public key (of a private key: its public key)."""
    return "0x" + raw_public_key(key).hex()


def decode_hex_public_key(value: object) -> Ed25519PublicKey:
    """The key :func:`encode_hex_public_key` wrote; PublicKeyError says what is wrong with anything else."""
    return Ed25519PublicKey.from_public_bytes(_decode_hex(value, PUBLIC_KEY_BYTES, "public key", PublicKeyError))


@lru_cache(maxsize=4096)
def _parsed_key(value: str) -> Ed25519PublicKey:
    """:func:`decode_hex_public_key` of a key given as text, kept: the market checks each message
    against its agent's stored key, and the same keys sign message after message (parsing one
    again each time showed in its profile). A malformed key raises and is not kept."""
    return decode_hex_public_key(value)


def encode_hex_signature(raw: bytes) -> str:
    """``0x`` + lowercase hex of a raw 64-byte Ed25519 signature."""
    if len(raw) != SIGNATURE_BYTES:
        raise SignatureFormatError(f"an Ed25519 signature is {SIGNATURE_BYTES} bytes, not {len(raw)}")
    return "0x" + raw.hex()


def decode_hex_signature(value: object) -> bytes:
    """The raw 64 bytes of a ``0x`` hex signature; SignatureFormatError says what is wrong otherwise."""
    return _decode_hex(value, SIGNATURE_BYTES, "signature", SignatureFormatError)


def signing_bytes(message: Mapping[str, Any]) -> bytes:
    """What a message's ``signature`` signs: the canonical JSON of the message without ``signature``."""
    return canonical_json({field: value for field, value in message.items() if field != "signature"})


def sign_message(private_key: Ed25519PrivateKey, message: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of ``message`` with ``signature`` set (replacing any) to the key's signature of
    :func:`signing_bytes`. Used for every signed market message and for the owner mandate
    (whose ``publicKey`` stays in the signed bytes)."""
    signed = copy.deepcopy(dict(message))
    signed["signature"] = encode_hex_signature(private_key.sign(signing_bytes(signed)))
    return signed


def verify_message(public_key: Ed25519PublicKey | str, message: Mapping[str, Any]) -> bool:
    """Whether ``message["signature"]`` is ``public_key``'s signature of :func:`signing_bytes`.

    A missing or malformed signature is False (the message does not verify); a malformed
    ``public_key`` (given as ``0x`` hex) raises PublicKeyError, since that is the caller's error.
    """
    key = _parsed_key(public_key) if isinstance(public_key, str) else public_key
    return _valid(key, message.get("signature"), lambda: signing_bytes(message))


def deal_signing_bytes(deal: Mapping[str, Any]) -> bytes:
    """What both parties of a ``deal_confirmed`` sign: its canonical JSON without
    ``buyer.signature`` and ``seller.signature`` (every other field, the agentIds included)."""
    unsigned = dict(deal)  # only read, and each party's object is replaced, not changed: no deep copy
    for party in PARTIES:
        if isinstance(unsigned.get(party), Mapping):
            unsigned[party] = {field: value for field, value in unsigned[party].items() if field != "signature"}
    return canonical_json(unsigned)


def sign_deal(private_key: Ed25519PrivateKey, deal: Mapping[str, Any], party: Party) -> dict[str, Any]:
    """A copy of ``deal`` with ``<party>.signature`` set to the key's signature of :func:`deal_signing_bytes`."""
    _check_party(party)
    signed = copy.deepcopy(dict(deal))
    if not isinstance(signed.get(party), dict):
        raise ValueError(f"the deal has no {party} object to sign")
    signed[party]["signature"] = encode_hex_signature(private_key.sign(deal_signing_bytes(signed)))
    return signed


def verify_deal(public_key: Ed25519PublicKey | str, deal: Mapping[str, Any], party: Party) -> bool:
    """Whether ``<party>.signature`` is ``public_key``'s signature of :func:`deal_signing_bytes`."""
    _check_party(party)
    key = _parsed_key(public_key) if isinstance(public_key, str) else public_key
    side = deal.get(party)
    signature = side.get("signature") if isinstance(side, Mapping) else None
    return _valid(key, signature, lambda: deal_signing_bytes(deal))


def _check_party(party: object) -> None:
    if party not in PARTIES:
        raise ValueError(f"party must be buyer or seller, not {party!r}")


def _valid(key: Ed25519PublicKey, signature: object, data: Callable[[], bytes]) -> bool:
    """False for a malformed signature, a message with no canonical form (nobody signed it), or a bad signature."""
    try:
        key.verify(decode_hex_signature(signature), data())
    except (SignatureFormatError, CanonicalizationError, InvalidSignature):
        return False
    return True
