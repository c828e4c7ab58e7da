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


# -- the json fast path writes rfc8785's bytes ------------------------------------------------------

_STRINGS = ["", "plain", "".join(chr(c) for c in range(0x20)) + "\x7f", 'quote " and \\ backslash /',
            "\u2028\u2029 line separators", "caf\u00e9 \u20ac \U0001f600 \ufb33", "0x" + "ab" * 64]
_SCALARS: list[object] = [*_STRINGS, None, True, False, 0, -1, 2**53 - 1, -(2**53 - 1), 170]


def _values() -> list[object]:
    """Scalars, and objects and lists nesting them under every kind of key."""
    keys = ["a", "B", "_", "type", "z9", "", "\r", "\u00f6", "\U0001f600", "\ufb33"]
    nested: list[object] = [[], {}, list(_SCALARS), {key: value for key, value in zip(keys, _SCALARS)}]
    nested.append({"outer": nested[-1], "list": [nested[-1], [1, [2, {"x": "y"}]]], "n": None})
    nested.append({key: {key: [key, 1]} for key in keys})
    nested.append({"price": 170.1, "when": "2026-02-07T23:00:00Z"})  # a float: rfc8785's number form
    nested.append([True, 1, 1.0, 1e21, 0.000001])
    return [*_SCALARS, *nested]


@pytest.mark.parametrize("value", _values())
def test_the_same_bytes_as_the_rfc8785_package(value: object) -> None:
    import rfc8785

    assert canonical_json(value) == rfc8785.dumps(value)


@pytest.mark.parametrize("value", [2**53, -(2**53), {"a": 2**60}, ["\ud800"], {"k": "\udfff"}, {"a": float("nan")},
                                   {1: "non-string key"}, {"a": object()}])
def test_what_rfc8785_refuses_is_refused(value: object) -> None:
    with pytest.raises(CanonicalizationError):
        canonical_json(value)
