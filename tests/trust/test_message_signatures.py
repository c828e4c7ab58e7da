"""Signed market messages (spec 003: Message Types, Owner Mandate Format): 0x hex keys and
signatures, signing over RFC 8785 canonical JSON without ``signature``, and deal confirmations
that both parties sign."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from haggler.trust.canonical import canonical_json
from haggler.trust.keys import PublicKeyError
from haggler.trust.messages import (
    SignatureFormatError,
    deal_signing_bytes,
    decode_hex_public_key,
    decode_hex_signature,
    encode_hex_public_key,
    encode_hex_signature,
    sign_deal,
    sign_message,
    signing_bytes,
    verify_deal,
    verify_message,
)
from support.market_messages import Keys, examples, set_at, signer_of, unsigned_examples

KEYS = Keys()
SIGNED = examples(KEYS)
CASES = [(name, i) for name, messages in SIGNED.items() if name != "deal_confirmed" for i in range(len(messages))]


def _leaves(node: Any, pointer: str = "") -> list[tuple[str, Any]]:
    if isinstance(node, dict):
        return [leaf for key, value in node.items() for leaf in _leaves(value, f"{pointer}/{key}")]
    if isinstance(node, list):
        return [leaf for i, value in enumerate(node) for leaf in _leaves(value, f"{pointer}/{i}")]
    return [(pointer, node)]


def _changed(value: Any) -> Any:
    """A value one byte away in the canonical JSON (or as near as a type allows)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str) and value:
        return value[:-1] + ("0" if value[-1] != "0" else "1")
    return "x"


def _reordered(node: Any) -> Any:
    if isinstance(node, dict):
        return {key: _reordered(node[key]) for key in reversed(list(node))}
    if isinstance(node, list):
        return [_reordered(value) for value in node]
    return node


# -- the 0x hex forms ---------------------------------------------------------------------------

def test_public_key_round_trip_is_0x_and_64_lowercase_hex_digits() -> None:
    key = Ed25519PrivateKey.generate()
    text = encode_hex_public_key(key)
    assert text.startswith("0x") and len(text) == 66 and text == text.lower()
    assert encode_hex_public_key(decode_hex_public_key(text)) == text
    assert encode_hex_public_key(key.public_key()) == text


def test_signature_round_trip_is_0x_and_128_lowercase_hex_digits() -> None:
    raw = Ed25519PrivateKey.generate().sign(b"x")
    text = encode_hex_signature(raw)
    assert len(text) == 130 and decode_hex_signature(text) == raw
    with pytest.raises(SignatureFormatError, match="64 bytes, not 63"):
        encode_hex_signature(raw[:-1])


KEY = encode_hex_public_key(Ed25519PrivateKey.generate())
SIG = encode_hex_signature(Ed25519PrivateKey.generate().sign(b"x"))


@pytest.mark.parametrize(("value", "complaint"), [
    (KEY.upper().replace("0X", "0x"), "lowercase"),
    ("0X" + KEY[2:], "the prefix is lowercase"),
    (KEY[2:], "must start with \"0x\""),
    (KEY[:-2], "64 hex digits (32 bytes), found 62"),
    (KEY + "00", "found 66"),
    ("0x" + "g" * 64, "not one"),
    (" " + KEY, "must start with \"0x\""),
    (None, "must be a string"),
])
def test_malformed_public_keys_are_refused_with_the_reason(value: Any, complaint: str) -> None:
    with pytest.raises(PublicKeyError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        decode_hex_public_key(value)


@pytest.mark.parametrize(("value", "complaint"), [
    ("0x" + SIG[2:].upper(), "lowercase"),
    (SIG[2:], "must start with \"0x\""),
    (SIG[:-1], "found 127"),
    (SIG[:66], "128 hex digits"),
    (42, "must be a string"),
])
def test_malformed_signatures_are_refused_with_the_reason(value: Any, complaint: str) -> None:
    with pytest.raises(SignatureFormatError, match=complaint):
        decode_hex_signature(value)


# -- sign and verify a message ------------------------------------------------------------------

@pytest.mark.parametrize(("name", "index"), CASES)
def test_every_signed_example_verifies(name: str, index: int) -> None:
    message = SIGNED[name][index]
    key = signer_of(KEYS, name, message)
    assert verify_message(key.public_key(), message)
    assert verify_message(encode_hex_public_key(key), message)


def test_the_signature_covers_the_canonical_json_without_the_signature() -> None:
    message = unsigned_examples(KEYS)["offer"][0]
    signed = sign_message(KEYS.buyer, message)
    assert "signature" not in message  # the input is not changed
    assert signing_bytes(signed) == canonical_json(message)
    assert decode_hex_signature(signed["signature"]) == KEYS.buyer.sign(canonical_json(message))
    # Signing again replaces the signature rather than signing it.
    assert sign_message(KEYS.buyer, signed) == signed


@pytest.mark.parametrize(("name", "index"), CASES)
def test_any_changed_byte_breaks_verification(name: str, index: int) -> None:
    message = SIGNED[name][index]
    key = signer_of(KEYS, name, message).public_key()
    leaves = [(p, v) for p, v in _leaves(message) if p != "/signature"]
    assert len(leaves) > 3
    for pointer, value in leaves:
        assert not verify_message(key, set_at(copy.deepcopy(message), pointer, _changed(value))), pointer
    assert not verify_message(key, {**message, "extra": 1})
    for field in message:
        if field != "signature":
            assert not verify_message(key, {k: v for k, v in message.items() if k != field}), field
    flipped = message["signature"][:-1] + ("0" if message["signature"][-1] != "0" else "1")
    assert not verify_message(key, {**message, "signature": flipped})


@pytest.mark.parametrize(("name", "index"), CASES)
def test_key_order_and_number_spelling_do_not_matter(name: str, index: int) -> None:
    message = SIGNED[name][index]
    key = signer_of(KEYS, name, message).public_key()
    reordered = _reordered(message)
    assert list(reordered) != list(message)
    assert verify_message(key, reordered)
    assert verify_message(key, json.loads(json.dumps(message, indent=3, sort_keys=True)))
    as_floats = json.loads(json.dumps(message), parse_int=float)  # 180 -> 180.0: the same JSON number
    assert verify_message(key, as_floats)


@pytest.mark.parametrize(("name", "index"), CASES)
def test_another_key_does_not_verify(name: str, index: int) -> None:
    assert not verify_message(Ed25519PrivateKey.generate().public_key(), SIGNED[name][index])


def test_missing_or_malformed_signatures_do_not_verify_and_a_malformed_key_is_an_error() -> None:
    message = SIGNED["offer"][0]
    key = KEYS.buyer.public_key()
    assert not verify_message(key, {k: v for k, v in message.items() if k != "signature"})
    assert not verify_message(key, {**message, "signature": message["signature"].upper()})
    assert not verify_message(key, {**message, "signature": message["signature"][:-2]})
    assert not verify_message(key, {**message, "signature": None})
    assert not verify_message(key, {**message, "offerPrice": float("nan")})  # no canonical form: nobody signed it
    with pytest.raises(PublicKeyError, match="lowercase"):
        verify_message(encode_hex_public_key(key).upper().replace("0X", "0x"), message)


# -- mandates -----------------------------------------------------------------------------------

def test_the_mandate_is_signed_by_the_owner_with_its_public_key_in_the_signed_bytes() -> None:
    mandate = SIGNED["mandate"][0]
    assert verify_message(decode_hex_public_key(mandate["publicKey"]), mandate)
    assert not verify_message(KEYS.buyer.public_key(), mandate)  # the agent cannot sign its own mandate
    swapped_key = {**mandate, "publicKey": encode_hex_public_key(KEYS.buyer)}
    assert not verify_message(KEYS.buyer_owner.public_key(), swapped_key)
    raised = set_at(copy.deepcopy(mandate), "/constraints/maxSpend", 250)
    assert not verify_message(KEYS.buyer_owner.public_key(), raised)


def test_an_embedded_owner_mandate_verifies_on_its_own_and_is_covered_by_the_agent_signature() -> None:
    listing = SIGNED["listing"][0]
    assert verify_message(KEYS.seller_owner.public_key(), listing["ownerMandate"])
    lowered = set_at(copy.deepcopy(listing), "/ownerMandate/minAcceptablePrice", 100)
    assert not verify_message(KEYS.seller_owner.public_key(), lowered["ownerMandate"])
    assert not verify_message(KEYS.seller.public_key(), lowered)


# -- deal confirmations -------------------------------------------------------------------------

def test_both_parties_sign_the_same_bytes_and_neither_signature_covers_the_other() -> None:
    deal = SIGNED["deal_confirmed"][0]
    unsigned = unsigned_examples(KEYS)["deal_confirmed"][0]
    assert deal_signing_bytes(deal) == deal_signing_bytes(unsigned) == canonical_json(unsigned)
    assert b"buyer_switch_001" in deal_signing_bytes(deal)  # the agentIds are signed
    assert verify_deal(KEYS.buyer.public_key(), deal, "buyer")
    assert verify_deal(encode_hex_public_key(KEYS.seller), deal, "seller")
    # The order of signing does not matter.
    assert sign_deal(KEYS.buyer, sign_deal(KEYS.seller, unsigned, "seller"), "buyer") == deal
    # Each signature is its own party's.
    assert not verify_deal(KEYS.seller.public_key(), deal, "buyer")
    assert not verify_deal(KEYS.buyer.public_key(), deal, "seller")
    swapped = copy.deepcopy(deal)
    swapped["buyer"]["signature"], swapped["seller"]["signature"] = deal["seller"]["signature"], deal["buyer"]["signature"]
    assert not verify_deal(KEYS.buyer.public_key(), swapped, "buyer")


def test_any_change_to_a_deal_breaks_both_signatures() -> None:
    deal = SIGNED["deal_confirmed"][0]
    for pointer, value in _leaves(deal):
        if pointer.endswith("/signature"):
            continue
        changed = set_at(copy.deepcopy(deal), pointer, _changed(value))
        assert not verify_deal(KEYS.buyer.public_key(), changed, "buyer"), pointer
        assert not verify_deal(KEYS.seller.public_key(), changed, "seller"), pointer
    assert verify_deal(KEYS.buyer.public_key(), _reordered(deal), "buyer")
    unsigned_buyer = copy.deepcopy(deal)
    del unsigned_buyer["buyer"]["signature"]
    assert not verify_deal(KEYS.buyer.public_key(), unsigned_buyer, "buyer")
    assert verify_deal(KEYS.seller.public_key(), unsigned_buyer, "seller")
    with pytest.raises(ValueError, match="buyer or seller"):
        sign_deal(KEYS.buyer, deal, "broker")  # type: ignore[arg-type]
