"""``dump_json``, every JSON answer's bytes (server/responses.py): json's compact UTF-8 form,
written by orjson, and json's own answer for whatever orjson would write differently or not at all."""

from __future__ import annotations

import dataclasses
import json
import random
from datetime import datetime, timezone
from typing import Any

import pytest

from haggler.server.responses import dump_json


def json_bytes(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


#: Characters a body may carry: ASCII, controls json escapes, quotes and backslashes, Latin-1,
#: the line separators JavaScript once choked on, CJK, and astral ones (emoji).
ALPHABET = "aZ09 _-\"\\/\n\t\r\b\f\x00\x01\x1f\x7f é£ \u2028\u2029 中文 😀🧾"


def a_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(9 if depth < 4 else 6)
    if kind == 0:
        return "".join(rng.choice(ALPHABET) for _ in range(rng.randrange(12)))
    if kind == 1:
        return rng.choice([0, 1, -1, 2**31, -(2**53), 2**63 - 1, -(2**63), rng.randrange(-10**9, 10**9)])
    if kind == 2:  # floats json writes without an exponent
        return rng.choice([0.0, -0.0, 0.5, 1.1, 100.0, 19.99, 0.1 + 0.2, 1e15, 123456.789, 0.0001])
    if kind == 3:
        return rng.choice([True, False, None])
    if kind == 4:
        return round(rng.uniform(-1e6, 1e6), rng.randrange(6))
    if kind == 5:
        return rng.random()
    if kind in (6, 7):
        return {"".join(rng.choice(ALPHABET) for _ in range(rng.randrange(6))): a_value(rng, depth + 1)
                for _ in range(rng.randrange(5))}
    return [a_value(rng, depth + 1) for _ in range(rng.randrange(5))]


@pytest.mark.parametrize("seed", range(40))
def test_the_bytes_are_jsons_for_what_the_store_answers(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(50):
        value = a_value(rng)
        assert dump_json(value) == json_bytes(value), value


def test_a_float_in_exponent_form_is_the_same_number() -> None:
    for number in (5e-05, 1.5e-07, 1e16, -2.5e+300, 5e-324):
        value = {"n": number, "list": [number]}
        assert json.loads(dump_json(value)) == value


def test_not_a_number_is_null_where_json_wrote_invalid_json() -> None:
    assert dump_json([float("nan"), float("inf"), float("-inf")]) == b"[null,null,null]"


def test_what_orjson_would_not_write_is_jsons_to_write_or_refuse() -> None:
    assert dump_json({1: "a", None: "b", True: "c"}) == json_bytes({1: "a", None: "b", True: "c"})
    assert dump_json([2**64, -(2**70)]) == json_bytes([2**64, -(2**70)])

    @dataclasses.dataclass
    class Point:
        x: int

    for refused in (datetime(2026, 11, 29, tzinfo=timezone.utc), Point(1), {"a": {1, 2}}):
        with pytest.raises(TypeError):
            json_bytes(refused)
        with pytest.raises(TypeError):
            dump_json(refused)


def test_a_lone_surrogate_is_refused_as_before() -> None:
    with pytest.raises(UnicodeEncodeError):
        json_bytes("\ud800")
    with pytest.raises(UnicodeEncodeError):
        dump_json("\ud800")
