"""RFC 8785 canonical JSON: the examples from the RFC itself, byte for byte."""

from __future__ import annotations

import json

import pytest

from haggler.trust.canonical import CanonicalizationError, canonical_json


def test_rfc8785_section_3_2_2_example() -> None:
    # RFC 8785 §3.2.2: number forms, string escapes and literals.
    source = (
        '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
        ' "literals": [null, true, false]}'
    )
    expected = (
        '{"literals":[null,true,false],'
        '"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
        '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
    ).encode()
    assert canonical_json(json.loads(source)) == expected


def test_rfc8785_section_3_2_3_keys_sort_by_utf16_code_units() -> None:
    # RFC 8785 §3.2.3: U+1F600 is the surrogate pair D83D DE00, so it sorts
    # before U+FB33 although its code point is larger.
    source = {
        "\u20ac": "Euro Sign",
        "\r": "Carriage Return",
        "\ufb33": "Hebrew Letter Dalet With Dagesh",
        "1": "One",
        "\U0001f600": "Emoji: Grinning Face",
        "\u0080": "Control",
        "\u00f6": "Latin Small Letter O With Diaeresis",
    }
    values = [v for v in json.loads(canonical_json(source)).values()]
    assert values == [
        "Carriage Return",
        "One",
        "Control",
        "Latin Small Letter O With Diaeresis",
        "Euro Sign",
        "Emoji: Grinning Face",
        "Hebrew Letter Dalet With Dagesh",
    ]


@pytest.mark.parametrize(
    ("number", "text"),
    [(1e21, b"1e+21"), (1e20, b"100000000000000000000"), (4.50, b"4.5"), (-0.0, b"0"), (1e-7, b"1e-7")],
)
def test_number_forms_follow_ecmascript(number: float, text: bytes) -> None:
    assert canonical_json(number) == text


def test_no_whitespace_and_nested_keys_sorted() -> None:
    assert canonical_json({"b": [1, {"z": 1, "a": 2}], "a": "x"}) == b'{"a":"x","b":[1,{"a":2,"z":1}]}'


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 2**60, {1: "int key"}])
def test_values_without_a_canonical_form_are_refused(value: object) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(value)
