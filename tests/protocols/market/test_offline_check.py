"""spec 003: 8. Deal Confirmation, checked offline: deals signed by the market's own path
(``haggler.trust.messages.sign_deal``) are verified by ``offline_check``, which shares no code
with it; its canonical JSON must agree with ``haggler.trust.canonical`` byte for byte."""

from __future__ import annotations

import ast
import copy
import json
import struct
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from haggler.protocols.market import offline_check
from haggler.protocols.market.offline_check import (
    DealCheck,
    DealDocumentError,
    NotCanonical,
    canonicalize,
    check_deal,
    deal_signing_bytes,
    ecmascript_number,
    read_document,
)
from haggler.trust import messages as trusted
from haggler.trust.canonical import canonical_json
from support.market_messages import DELETE, Keys, examples, set_at

KEYS = Keys()
DEAL = examples(KEYS)["deal_confirmed"][0]


def hex_key(key: Ed25519PrivateKey) -> str:
    return trusted.encode_hex_public_key(key)


def owner_approval(owner: Ed25519PrivateKey, deal: dict[str, Any]) -> dict[str, str]:
    """An owner's approval: its signature over the deal's signing bytes, as the market makes it."""
    raw = owner.sign(trusted.deal_signing_bytes(deal))
    return {"publicKey": hex_key(owner), "signature": trusted.encode_hex_signature(raw)}


def served(deal: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    """The document GET /market/deals/{dealId} serves for ``deal`` (default: the signed example)."""
    return {"dealId": "dl_1", "status": "confirmed", "deal": copy.deepcopy(deal or DEAL),
            "publicKeys": {"buyer": hex_key(KEYS.buyer), "seller": hex_key(KEYS.seller)}, **extra}


def verdicts(result: DealCheck) -> dict[str, bool]:
    return {check.name: check.valid for check in result.checks}


def reason(result: DealCheck, name: str) -> str:
    return next(check.reason for check in result.checks if check.name == name)


# -- a signed deal verifies ---------------------------------------------------------------------

def test_spec_003_deal_confirmation_signed_by_both_parties_verifies() -> None:
    result = check_deal(served())
    assert result.valid and not result.failures
    assert verdicts(result) == {"shape": True, "buyer.signature": True, "seller.signature": True}
    assert (result.deal_id, result.status) == ("dl_1", "confirmed")
    assert reason(result, "buyer.signature").startswith("verifies with publicKeys.buyer 0x")


def test_spec_003_deal_confirmation_owner_approvals_verify_over_the_same_bytes() -> None:
    approvals = {"buyer": owner_approval(KEYS.buyer_owner, DEAL), "seller": owner_approval(KEYS.seller_owner, DEAL)}
    result = check_deal(served(ownerApprovals=approvals))
    assert result.valid
    assert verdicts(result)["ownerApprovals.buyer"] and verdicts(result)["ownerApprovals.seller"]


def test_spec_003_deal_confirmation_an_owner_approval_of_other_terms_fails() -> None:
    other = set_at(copy.deepcopy(DEAL), "/finalPrice", 160)
    approvals = {"buyer": owner_approval(KEYS.buyer_owner, other),
                 "seller": {**owner_approval(KEYS.seller_owner, DEAL), "publicKey": hex_key(KEYS.buyer_owner)}}
    result = check_deal(served(ownerApprovals=approvals))
    assert not result.valid
    assert verdicts(result) == {"shape": True, "buyer.signature": True, "seller.signature": True,
                                "ownerApprovals.buyer": False, "ownerApprovals.seller": False}


def test_spec_003_deal_confirmation_a_malformed_owner_approval_fails_with_the_reason() -> None:
    result = check_deal(served(ownerApprovals={"buyer": "yes", "seller": {"publicKey": hex_key(KEYS.seller_owner)}}))
    assert reason(result, "ownerApprovals.buyer") == "not an object with publicKey and signature"
    assert "must be a string" in reason(result, "ownerApprovals.seller")


def test_spec_003_deal_confirmation_bare_deal_verifies_with_keys_given() -> None:
    result = check_deal(DEAL, buyer_key=hex_key(KEYS.buyer), seller_key=hex_key(KEYS.seller))
    assert result.valid and (result.deal_id, result.status) == (None, None)
    assert "--seller-key" in reason(result, "seller.signature")


@pytest.mark.parametrize(("given", "missing"), [({}, "--buyer-key"), ({"buyer_key": hex_key(KEYS.buyer)}, "--seller-key")])
def test_spec_003_deal_confirmation_bare_deal_without_a_key_names_the_missing_option(
        given: dict[str, str], missing: str) -> None:
    with pytest.raises(DealDocumentError, match=missing):
        check_deal(DEAL, **given)


def test_spec_003_deal_confirmation_given_keys_override_the_document() -> None:
    wrong = served()
    wrong["publicKeys"] = {"buyer": hex_key(KEYS.seller), "seller": hex_key(KEYS.buyer)}
    assert not check_deal(wrong).valid
    assert check_deal(wrong, buyer_key=hex_key(KEYS.buyer), seller_key=hex_key(KEYS.seller)).valid
    other = hex_key(Ed25519PrivateKey.generate())
    assert verdicts(check_deal(served(), seller_key=other)) == {
        "shape": True, "buyer.signature": True, "seller.signature": False}


def test_spec_003_deal_confirmation_awaiting_a_signature_is_not_valid() -> None:
    half = trusted.sign_deal(KEYS.buyer, examples(KEYS)["deal_confirmed"][0] | {"seller": {"agentId": "s"}}, "buyer")
    result = check_deal(served(half, status="awaiting_signatures"))
    assert verdicts(result) == {"shape": True, "buyer.signature": True, "seller.signature": False}
    assert reason(result, "seller.signature") == "not signed: the deal has no seller.signature"


def test_spec_003_deal_confirmation_number_spelling_and_key_order_do_not_matter() -> None:
    respelled = json.loads(json.dumps(DEAL).replace('"finalPrice": 170', '"finalPrice": 170.0'))
    assert respelled["finalPrice"] == 170.0 and isinstance(respelled["finalPrice"], float)
    reordered = {key: respelled[key] for key in reversed(list(respelled))}
    assert check_deal(served(reordered)).valid


# -- anything changed fails ---------------------------------------------------------------------

@pytest.mark.parametrize(("pointer", "value"), [
    ("/finalPrice", 171), ("/finalPrice", 170.01), ("/listingId", "lst_abc124"), ("/requestId", "req_124"),
    ("/buyer/agentId", "buyer_switch_002"), ("/seller/agentId", "seller_switch_002"),
    ("/logistics/meetingPlace", "Gare de Lyon, Paris"), ("/logistics/meetingTime", "2026-02-08T15:00:00Z"),
    ("/logistics", DELETE), ("/protocol", "instant_match"), ("/timestamp", "2026-02-07T23:15:01Z"),
    ("/version", "0.1.1"), ("/extra", "field"),
])
def test_spec_003_deal_confirmation_tampering_any_field_fails_both_signatures(pointer: str, value: Any) -> None:
    result = check_deal(served(set_at(copy.deepcopy(DEAL), pointer, value)))
    assert not result.valid
    assert not verdicts(result)["buyer.signature"] and not verdicts(result)["seller.signature"]
    assert "does not verify" in reason(result, "buyer.signature")


def test_spec_003_deal_confirmation_swapped_keys_fail() -> None:
    result = check_deal(served(), buyer_key=hex_key(KEYS.seller), seller_key=hex_key(KEYS.buyer))
    assert [check.name for check in result.failures] == ["buyer.signature", "seller.signature"]


def test_spec_003_deal_confirmation_swapped_signatures_fail() -> None:
    deal = copy.deepcopy(DEAL)
    deal["buyer"]["signature"], deal["seller"]["signature"] = deal["seller"]["signature"], deal["buyer"]["signature"]
    assert [check.name for check in check_deal(served(deal)).failures] == ["buyer.signature", "seller.signature"]


def test_spec_003_deal_confirmation_an_uppercase_hex_signature_fails() -> None:
    deal = copy.deepcopy(DEAL)
    deal["buyer"]["signature"] = "0x" + deal["buyer"]["signature"][2:].upper()
    result = check_deal(served(deal))
    assert verdicts(result) == {"shape": True, "buyer.signature": False, "seller.signature": True}
    assert reason(result, "buyer.signature") == "buyer.signature must be lowercase hex"


@pytest.mark.parametrize(("signature", "complaint"), [
    (None, "not signed"), (42, "must be a string"), ("0X" + "ab" * 64, "must start with \"0x\""),
    ("0x" + "ab" * 63, "found 126"), ("0x" + "zz" * 64, "non-hex character"),
])
def test_spec_003_deal_confirmation_malformed_signatures_fail_with_the_reason(signature: Any, complaint: str) -> None:
    deal = copy.deepcopy(DEAL)
    deal["seller"]["signature"] = signature
    assert complaint in reason(check_deal(served(deal)), "seller.signature")


def test_spec_003_deal_confirmation_a_malformed_key_in_the_document_fails_that_signature() -> None:
    document = served()
    document["publicKeys"]["seller"] = document["publicKeys"]["seller"].upper().replace("0X", "0x")
    result = check_deal(document)
    assert verdicts(result) == {"shape": True, "buyer.signature": True, "seller.signature": False}
    assert reason(result, "seller.signature") == "publicKeys.seller must be lowercase hex"


@pytest.mark.parametrize("key", ["0x" + "AB" * 32, "ab" * 32, "0x" + "ab" * 31])
def test_spec_003_deal_confirmation_a_malformed_given_key_is_the_callers_error(key: str) -> None:
    with pytest.raises(DealDocumentError, match="--buyer-key"):
        check_deal(served(), buyer_key=key)


def test_spec_003_deal_confirmation_shape_names_a_wrong_type_and_missing_parties() -> None:
    deal = copy.deepcopy(DEAL) | {"type": "offer"}
    del deal["seller"]
    result = check_deal(served(deal))
    assert reason(result, "shape") == "type is 'offer', not 'deal_confirmed'; no seller object"
    assert reason(result, "seller.signature") == "the deal has no seller object"


def test_spec_003_deal_confirmation_a_deal_without_canonical_json_fails() -> None:
    deal = set_at(copy.deepcopy(DEAL), "/finalPrice", 2**60)
    assert "no canonical JSON" in reason(check_deal(served(deal)), "buyer.signature")


@pytest.mark.parametrize(("document", "complaint"), [
    ([DEAL], "not an object"),
    ({"dealId": "dl_1"}, "neither a served deal document"),
    ({"deal": "signed"}, "\"deal\" is not an object"),
    ({"deal": DEAL, "publicKeys": ["0x"]}, "\"publicKeys\" is not an object"),
    ({"deal": DEAL, "publicKeys": {"buyer": "0x"}}, "--seller-key"),
    (served(ownerApprovals=[]), "\"ownerApprovals\" is not an object"),
    (served(ownerApprovals={"broker": {}}), "'broker'"),
])
def test_spec_003_deal_confirmation_a_document_of_the_wrong_shape_cannot_be_checked(
        document: Any, complaint: str) -> None:
    with pytest.raises(DealDocumentError, match=complaint):
        check_deal(document)


# -- reading the file ---------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "complaint"), [
    (b'{"a": NaN}', "NaN is not a JSON value"), (b'{"a": 1, "a": 2}', "duplicate key 'a'"),
    (b"{", "not JSON"), (b"\xff\xfe", "not UTF-8"),
])
def test_read_document_is_strict(tmp_path: Path, content: bytes, complaint: str) -> None:
    path = tmp_path / "deal.json"
    path.write_bytes(content)
    with pytest.raises(DealDocumentError, match=complaint):
        read_document(path)


def test_read_document_names_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DealDocumentError, match="cannot read .*nope.json"):
        read_document(tmp_path / "nope.json")


# -- independence -------------------------------------------------------------------------------

def test_the_checker_imports_neither_the_signing_path_nor_rfc8785() -> None:
    """The point of the module: a bug in haggler.trust or rfc8785 must not be able to vouch for itself."""
    tree = ast.parse(Path(offline_check.__file__).read_text("utf-8"))
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    imported |= {node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert not {name for name in imported if name.startswith(("haggler", "rfc8785"))}


# -- the independent canonical JSON -------------------------------------------------------------

#: RFC 8785 Appendix B: IEEE 754 doubles (as hex) and their canonical text.
RFC8785_NUMBERS = [
    ("0000000000000000", "0"), ("8000000000000000", "0"), ("0000000000000001", "5e-324"),
    ("8000000000000001", "-5e-324"), ("7fefffffffffffff", "1.7976931348623157e+308"),
    ("ffefffffffffffff", "-1.7976931348623157e+308"), ("4340000000000000", "9007199254740992"),
    ("c340000000000000", "-9007199254740992"), ("4430000000000000", "295147905179352830000"),
    ("44b52d02c7e14af5", "9.999999999999997e+22"), ("44b52d02c7e14af6", "1e+23"),
    ("44b52d02c7e14af7", "1.0000000000000001e+23"), ("444b1ae4d6e2ef4e", "999999999999999700000"),
    ("444b1ae4d6e2ef4f", "999999999999999900000"), ("444b1ae4d6e2ef50", "1e+21"),
    ("3eb0c6f7a0b5ed8c", "9.999999999999997e-7"), ("3eb0c6f7a0b5ed8d", "0.000001"),
    ("41b3de4355555553", "333333333.3333332"), ("41b3de4355555554", "333333333.33333325"),
    ("41b3de4355555555", "333333333.3333333"), ("41b3de4355555556", "333333333.3333334"),
    ("41b3de4355555557", "333333333.33333343"), ("becbf647612f3696", "-0.0000033333333333333333"),
    ("43143ff3c1cb0959", "1424953923781206.2"),
]


@pytest.mark.parametrize(("bits", "text"), RFC8785_NUMBERS)
def test_numbers_follow_rfc8785_appendix_b(bits: str, text: str) -> None:
    number = struct.unpack(">d", bytes.fromhex(bits))[0]
    assert ecmascript_number(number) == text
    assert canonicalize(number) == text.encode()


def test_rfc8785_section_3_2_2_example() -> None:
    source = ('{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
              ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
              ' "literals": [null, true, false]}')
    expected = ('{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
                '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}').encode()
    assert canonicalize(json.loads(source)) == expected


def test_rfc8785_section_3_2_3_keys_sort_by_utf16_code_units() -> None:
    keys = ["\u20ac", "\r", "\ufb33", "1", "\U0001f600", "\u0080", "\u00f6"]
    ordered = list(json.loads(canonicalize({key: 0 for key in keys})))
    assert ordered == ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 2**53, -(2**53), {1: "x"},
                                   "\ud800", {"\udc00": 1}, (1, 2), b"bytes"])
def test_values_without_a_canonical_form_are_refused(value: object) -> None:
    with pytest.raises(NotCanonical):
        canonicalize(value)


SAFE_INTEGERS = st.integers(min_value=-(2**53 - 1), max_value=2**53 - 1)
EDGE_FLOATS = st.sampled_from([0.0, -0.0, 1e21, 1e-6, 1e-7, 9.999999999999999e20, 5e-324, 1.7976931348623157e308,
                               0.1 + 0.2, 170.1, 1e16, 123456789012345680000.0, 2.0**53])
FLOATS = st.floats(allow_nan=False, allow_infinity=False) | EDGE_FLOATS
#: Characters around the UTF-16 orderings that differ from code point order: the top of the BMP
#: (U+E000..U+FFFF) sorts after astral characters, whose surrogates are U+D800..U+DFFF.
ORDERING_CHARS = st.sampled_from(["\ud7ff", "\ue000", "\ufb33", "\uffff", "\U00010000", "\U0001f600", "\U0010ffff"])
KEY_CHARS = ORDERING_CHARS | st.characters(codec="utf-8")
TEXT = st.text(st.characters(codec="utf-8") | st.sampled_from(['"', "\\", "\x1f", "\x7f", "\u2028", "\U0001f600"]))
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | SAFE_INTEGERS | FLOATS | TEXT,
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(KEY_CHARS, max_size=4), children,
                                                                       max_size=6),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(JSON_VALUES)
def test_independent_canonicalization_matches_the_signing_path(value: Any) -> None:
    assert canonicalize(value) == canonical_json(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(ORDERING_CHARS | st.sampled_from("aA0\r\x00\u00f6\u20ac"), min_size=1, max_size=3),
                       st.none(), min_size=2, max_size=8))
def test_independent_key_order_is_utf16_order_not_code_point_order(value: dict[str, None]) -> None:
    assert canonicalize(value) == canonical_json(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(KEY_CHARS, max_size=4), JSON_VALUES, max_size=4),
       st.dictionaries(st.sampled_from(["agentId", "signature", "x"]), JSON_VALUES),
       st.dictionaries(st.sampled_from(["agentId", "signature", "x"]), JSON_VALUES))
def test_independent_deal_signing_bytes_match_the_signing_path(
        fields: dict[str, Any], buyer: dict[str, Any], seller: dict[str, Any]) -> None:
    deal = {**fields, "buyer": buyer, "seller": seller}
    assert deal_signing_bytes(deal) == trusted.deal_signing_bytes(deal)
