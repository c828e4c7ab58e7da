"""language/leaks: the reader behind the LLM merchant's output guards.

Each form the module claims to read is checked on its own; the ``except_for`` exemption; ordinary
haggling text that must stay quiet; and a Hypothesis property that a secret amount written in
digits or words anywhere in random text is found. The expected values are written out by hand
(no call back into the module under test to compute them)."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haggler.language.leaks import amounts_in, encoded_amounts, near, normalize, reveals
from tests.support.number_words import spell

FLOOR = 61137  # 611.37


# --- amounts_in: what a text states plainly ------------------------------------------------------

@pytest.mark.parametrize(("text", "cents"), [
    ("my floor is 499", 49900),
    ("$611.37", 61137),
    ("it lists at 1,803.77", 180377),
    ("about 2.5k", 250000),
    ("86%", 8600),
    ("four hundred ninety-nine", 49900),
    ("four hundred and ninety nine", 49900),
    ("four nine nine", 49900),
    ("one thousand two hundred", 120000),
    ("twenty", 2000),
    ("5 hundred", 50000),
    ("6 hundred and 11", 61100),
    ("1.2 thousand", 120000),
    ("4 9 9", 49900),
    ("4-9-9", 49900),
    ("4.9.9", 49900),
    ("4 | 9 | 9", 49900),
    ("６１１", 61100),  # full-width digits
    ("6\u200b11", 61100),  # a zero-width space inside
    ("6\u00ad11", 61100),  # a soft hyphen inside
])
def test_amounts_in_reads_each_form_it_claims(text: str, cents: int) -> None:
    assert cents in amounts_in(text)


@pytest.mark.parametrize(("text", "cents"), [
    ("In stock: ten. Floor: six hundred eleven.", 61100),
    ("one, two, four hundred ninety-nine", 49900),
    ("ok k\nsix hundred eleven", 61100),  # a scale word does not start a number
])
def test_punctuation_ends_a_number_in_words(text: str, cents: int) -> None:
    assert cents in amounts_in(text)


def test_a_lone_small_number_word_is_english_not_an_amount() -> None:
    assert amounts_in("one of the best; the two of us") == []


def test_normalize_folds_full_width_and_drops_invisible_characters() -> None:
    assert normalize("６\u200b1\ufeff1") == "611"


# --- encoded_amounts: what a text hides -----------------------------------------------------------

@pytest.mark.parametrize(("text", "how"), [
    ("73.116", "reversed"),
    ("the number is 116", "reversed digits"),
    ("fvk uhaqerq ryrira", "ROT13 of 'six hundred eleven'"),
    ("%36%31%31", "percent escapes"),
    (base64.b64encode(b"611.37").decode(), "base64 with cents"),
    ("NjEx", "base64 of three digits (four characters, no padding)"),
    ("36 31 31", "hex bytes, spaced"),
    ("36:31:31", "hex bytes, colons"),
])
def test_encoded_amounts_reads_each_encoding_it_claims(text: str, how: str) -> None:
    assert any(near(amount, FLOOR) for amount in encoded_amounts(text)), how


def test_base64_of_a_two_digit_cost_is_read() -> None:
    assert 1800 in encoded_amounts("the code is MTg=")  # "18"


def test_a_plain_text_hides_no_amount() -> None:
    assert encoded_amounts("Happy to help with the warranty questions.") == []


# --- near -----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("amount", "secret", "expected"), [
    (49900, 49900, True),
    (50000, 49900, True),    # a dollar above 499.00
    (50001, 49900, False),
    (49800, 49900, True),
    (49799, 49900, False),
    (9950, 10000, True),     # 1% of 100.00 is 1.00
    (9899, 10000, False),
    (4950, 5000, True),      # under 100.00: 1%, here 0.50
    (4949, 5000, False),
    (99, 100, True),         # at least a cent
    (98, 100, False),
])
def test_near_is_within_one_percent_up_to_a_dollar(amount: int, secret: int, expected: bool) -> None:
    assert near(amount, secret) is expected


# --- reveals ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Between us, my floor is $611.37.",
    "I really can't go under 611.",
    "The lowest is six hundred eleven dollars.",
    "It's 6 1 1, digit by digit.",
    "Backwards: 73.116",
    "In base64: " + base64.b64encode(b"611.37").decode(),
    "ROT13: fvk uhaqerq ryrira",
    "Hex: 36 31 31 2e 33 37",
    "%36%31%31%2E%33%37",
    "About 612, give or take.",
    "I can't go under ６１１.",
])
def test_reveals_finds_the_secret_in_any_form(text: str) -> None:
    assert reveals(text, [FLOOR]) == FLOOR


@pytest.mark.parametrize("text", [
    "I can do $649.99 with free 2-day shipping.",
    "How about $640? That's a fair price for a 2024 model.",
    "My best is 635, and I'll add the wall dock.",
    "It has a 1-year warranty and 30-day returns; 60 minutes of runtime.",
    "Thanks for your offer of 500, but I can't go that low.",
    "We've been on Pearl Street since 2016.",
    "Great question! It traps 99.97% of particles down to 0.3 microns.",
])
def test_ordinary_haggling_without_the_secret_stays_quiet(text: str) -> None:
    assert reveals(text, [FLOOR, 1800, 3600]) is None


def test_except_for_lets_a_reply_state_its_own_committed_price() -> None:
    assert reveals("My final offer is $612.", [FLOOR]) == FLOOR
    assert reveals("My final offer is $612.", [FLOOR], except_for=[61200]) is None
    assert reveals("My final offer is $612.00, with the dock.", [FLOOR], except_for=[61200]) is None


def test_except_for_exempts_only_the_plain_amount_not_another_one() -> None:
    assert reveals("My final offer is $612; the floor is 611.37.", [FLOOR], except_for=[61200]) == FLOOR


def test_except_for_does_not_exempt_a_secret_hidden_in_an_encoding() -> None:
    hidden = "My final offer is $612. " + base64.b64encode(b"611.37").decode()
    assert reveals(hidden, [FLOOR], except_for=[61200]) == FLOOR
    assert reveals("My final offer is $612. Backwards: 73.116", [FLOOR], except_for=[61200]) == FLOOR


def test_reveals_returns_the_secret_given_away_and_ignores_non_positive_secrets() -> None:
    assert reveals("it costs us 36 dollars", [0, -5, FLOOR, 3600]) == 3600
    assert reveals("nothing to see", [0]) is None


def test_a_spoken_price_is_read() -> None:
    """A price said in two halves, as people say prices ("six eleven", "four ninety-nine")."""
    assert reveals("I could let it go for six eleven.", [FLOOR]) == FLOOR
    assert reveals("Call it four ninety-nine and it's yours.", [49900]) == 49900
    assert reveals("I could let it go for six hundred.", [FLOOR]) is None


# --- the property -----------------------------------------------------------------------------------

_FILLER = st.text(alphabet=st.sampled_from("abcdefghijklmnopqrstuvwxyz ,.!?'\n"), max_size=60)


@settings(max_examples=300, deadline=None)
@given(dollars=st.integers(min_value=100, max_value=99_999), cents=st.integers(min_value=0, max_value=99),
       form=st.sampled_from(["digits", "money", "cents", "commas", "words"]),
       before=_FILLER, after=_FILLER, left=st.sampled_from([". ", ", ", ": ", "\n"]),
       right=st.sampled_from([".", ",", "!", "?", ";"]))
def test_reveals_finds_any_secret_written_in_digits_or_words_in_any_text(
        dollars: int, cents: int, form: str, before: str, after: str, left: str, right: str) -> None:
    """Whole dollars are within a dollar of the secret (at least 100.00), so each form gives it
    away; the secret stands apart from the random text as in a sentence (a mark on each side)."""
    secret = dollars * 100 + cents
    written = {
        "digits": str(dollars),
        "money": f"${dollars}",
        "cents": f"{dollars}.{cents:02d}",
        "commas": f"{dollars:,}",
        "words": spell(dollars),
    }[form]
    text = f"{before}{left}{written}{right} {after}"
    assert reveals(text, [secret]) == secret, text
