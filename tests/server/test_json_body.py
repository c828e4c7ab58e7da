"""The one JSON body reader every surface uses, on its own: what it takes, what it refuses and in
whose words, and that its nesting scan is exact about strings and linear on hostile input."""

from __future__ import annotations

import json
import time

import pytest

from haggler.errors import InvalidInput
from haggler.server.json_body import MAX_DEPTH, BodyWording, parse_json_body

WORDING = BodyWording(not_json="not JSON ({reason})", not_object="want an object")


def refusal(raw: bytes) -> str:
    with pytest.raises(InvalidInput) as caught:
        parse_json_body(raw, WORDING)
    return caught.value.message


def test_an_empty_body_is_an_empty_object_and_an_object_is_read_as_is():
    assert parse_json_body(b"", WORDING) == {}
    assert parse_json_body(b" \r\n ", WORDING) == {}
    assert parse_json_body('{"m": "café \\ud83d\\ude00", "n": [1, {"k": null}]}'.encode(), WORDING) == {
        "m": "café \U0001f600", "n": [1, {"k": None}]}  # a surrogate pair is one character, not a lone one


@pytest.mark.parametrize(("raw", "expected"), [
    (b"[1, 2]", "want an object"),
    (b'"text"', "want an object"),
    (b"{nope", "not JSON (Expecting property name"),
    (b'{"n": NaN}', "not JSON (NaN is not JSON)"),
    (b'{"n": -Infinity}', "not JSON (-Infinity is not JSON)"),
    (b'{"m": "caf\xe9"}', "not JSON (not UTF-8 (byte 10))"),
    (b'{"m": "\xed\xa0\x80"}', "not JSON (not UTF-8"),  # a surrogate encoded raw is not UTF-8 either
])
def test_what_is_not_a_strict_json_object_is_refused_in_the_surfaces_words(raw, expected):
    assert refusal(raw).startswith(expected)


@pytest.mark.parametrize(("raw", "expected"), [
    ('{"m": "a\\u0000b"}', "the field 'm' contains a NUL character"),
    ('{"m": {"x": ["ok", "\\udc00"]}}', "the field 'm.x[1]' contains a lone surrogate (\\udc00)"),
    ('{"\\ud800": 1}', "a field name contains a lone surrogate (\\ud800)"),
    ('{"m": {"a\\u0000": 1}}', "a field name in 'm' contains a NUL character"),
])
def test_unstorable_text_is_refused_naming_where_it_is(raw, expected):
    assert refusal(raw.encode()).startswith(expected)


def test_an_escaped_backslash_before_u_is_no_escape():
    assert parse_json_body(b'{"m": "\\\\u0000"}', WORDING) == {"m": "\\u0000"}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_nesting_is_counted_outside_strings_only():
    fits = nested(MAX_DEPTH - 1)  # inside the body's object: MAX_DEPTH levels in all
    assert parse_json_body(('{"m": %s}' % fits).encode(), WORDING) == {"m": json.loads(fits)}
    assert "nested too deeply" in refusal(('{"m": %s}' % nested(MAX_DEPTH)).encode())
    # brackets in strings, after escaped quotes and escaped backslashes, are text
    quoted = json.dumps({"m": '\\"' + "[{" * 500, "n": "\\", "o": '"]' * 500})
    assert parse_json_body(quoted.encode(), WORDING)["n"] == "\\"
    # ... and a string's end is found after an escaped backslash: the brackets after it count
    assert "nested too deeply" in refusal(('{"m": "\\\\", "n": %s}' % nested(MAX_DEPTH)).encode())


def test_the_scan_is_linear_on_a_body_of_quotes_and_brackets():
    hostile = ('["' + '\\"' * 30_000 + "[" * 5_000).encode()  # an unterminated string full of escapes
    started = time.perf_counter()
    with pytest.raises(InvalidInput):
        parse_json_body(hostile, WORDING)
    brackets = ("[" * 60_000).encode()
    with pytest.raises(InvalidInput, match="nested too deeply"):
        parse_json_body(brackets, WORDING)
    # Linear: well under a second here. A quadratic scan of these 60,000 characters takes minutes,
    # so the bound is generous enough for a loaded machine and still catches it.
    assert time.perf_counter() - started < 20
