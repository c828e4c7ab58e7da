"""Reading a JSON request body, the same way on every surface.

A body reaches this code already capped in size by the request edge (``server/edge.py``). Here it
must be UTF-8, strict JSON (no ``NaN`` or ``Infinity``, which could not be sent back as JSON),
nested no deeper than :data:`MAX_DEPTH` — checked by scanning the text before parsing, so a
100,000-deep body costs a scan instead of a ``RecursionError`` — and a JSON object whose strings,
values and field names alike, hold no NUL character and no lone surrogate: PostgreSQL refuses the
first, no UTF-8 encoder takes the second, so either would otherwise surface as a 500 when written.
Each surface keeps its own words for these refusals (:class:`BodyWording`); what is checked is the
same everywhere.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate
from typing import Any, NamedTuple

from starlette.requests import Request

from haggler.errors import InvalidInput

#: The deepest nesting of arrays and objects a body may have.
MAX_DEPTH = 64

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
# A JSON string, possessive so that a body full of quotes cannot make the scan backtrack; an
# unterminated one runs to the end (json.loads refuses such a body anyway).
_STRING = re.compile(r'"(?:[^"\\]|\\.)*+"?', re.S)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class BodyWording(NamedTuple):
    """How a surface words the refusal of a body; ``{limit}`` and ``{reason}`` are filled in."""

    too_large: str = "the request body is larger than {limit} bytes"
    not_json: str = "the request body is not valid JSON: {reason}"
    not_object: str = "the request body must be a JSON object"


def text_problem(text: str) -> str | None:
    """What keeps ``text`` from being stored (a NUL character, a lone surrogate), or None."""
    found = _UNSTORABLE.search(text)
    if found is None:
        return None
    if found.group() == "\x00":
        return "contains a NUL character (\\u0000)"
    return f"contains a lone surrogate (\\u{ord(found.group()):04x}), which is not valid Unicode text"


async def read_json_body(request: Request, wording: BodyWording) -> dict[str, Any]:
    """The request's body as a JSON object (``{}`` when it is empty); InvalidInput otherwise."""
    return parse_json_body(await request.body(), wording)


def parse_json_body(raw: bytes, wording: BodyWording) -> dict[str, Any]:
    """A body's bytes as a JSON object (``{}`` when empty); InvalidInput saying what is wrong."""
    if not raw.strip():
        return {}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(wording.not_json.format(reason=f"not UTF-8 (byte {exc.start})")) from None
    if _nested_too_deeply(text):
        raise InvalidInput(f"the request body is nested too deeply: at most {MAX_DEPTH} levels of arrays "
                           "and objects")
    try:
        body = json.loads(text, parse_constant=_no_constants)
    except ValueError as exc:
        raise InvalidInput(wording.not_json.format(reason=exc)) from None
    if not isinstance(body, dict):
        raise InvalidInput(wording.not_object)
    # NUL and surrogates can only come from \u escapes: the text was strict UTF-8, and json.loads
    # refuses raw control characters in strings.
    problem = _bad_text(body, "") if "\\u" in text else None
    if problem:
        raise InvalidInput(problem)
    return body


def _no_constants(name: str) -> float:
    raise ValueError(f"{name} is not JSON")


def _nested_too_deeply(text: str) -> bool:
    """Whether arrays and objects nest deeper than MAX_DEPTH in ``text`` (brackets inside strings
    do not count), found without parsing: a scan never recurses."""
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return False  # too few brackets to nest deeper: not worth the scan
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text))
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > MAX_DEPTH


def _bad_text(value: object, path: str) -> str | None:
    """The refusal for the first string in ``value`` that cannot be stored, naming where it is."""
    if isinstance(value, str):
        problem = text_problem(value)
        return f"the field {path!r} {problem}" if problem else None
    if isinstance(value, dict):
        for key, item in value.items():
            problem = text_problem(key)
            if problem:
                return f"a field name{f' in {path!r}' if path else ''} {problem}"
            found = _bad_text(item, f"{path}.{key}" if path else key)
            if found:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = _bad_text(item, f"{path}[{index}]")
            if found:
                return found
    return None
