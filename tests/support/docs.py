"""The worked examples in ``docs/``: find them, and run the HTTP ones against a live server.

Each API reference carries one worked example that a test runs verbatim, so the reference cannot
drift from the server. ``docs/exchange-api.md`` writes its example as a Python block
(:func:`fenced_blocks`, then ``exec``); ``docs/matching-api.md`` writes its as HTTP exchanges,
one fenced ``http`` block each, which :func:`run_exchanges` sends and checks:

    POST /api/users HTTP/1.1
    Authorization: Bearer {{operatorToken}}
    Content-Type: application/json

    {"name": "Maya"}

    HTTP/1.1 201 Created

    {"id": "{{maya.id}}", "name": "Maya"}

The request (method, path, headers, body) is sent as written, each ``{{name}}`` replaced by its
value. The response must have the status shown, every header shown, and a body that matches
the one shown: an object matches when each field shown matches (fields not shown are not
checked), a list when it has as many items and each matches, ``"…"`` matches any value, and a
string with ``{{name}}`` in it matches when the rest is equal — a name not yet bound takes the
value found there, a bound one must be equal. A response with no body shown must have none.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

DOCS = Path(__file__).resolve().parents[2] / "docs"
#: A value the example does not pin down (long generated text, say).
ANY = "…"
_PLACEHOLDER = re.compile(r"{{([A-Za-z_][A-Za-z0-9_.]*)}}")
_STATUS_LINE = re.compile(r"^HTTP/1\.1 (\d{3})\b.*$", re.M)


def fenced_blocks(doc: str, lang: str) -> list[str]:
    """The contents of the ```` ```lang ```` blocks of ``docs/<doc>``, in order."""
    text = (DOCS / doc).read_text(encoding="utf-8")
    return re.findall(rf"^```{re.escape(lang)}\n(.*?)^```", text, re.S | re.M)


@dataclass
class Exchange:
    method: str
    path: str
    headers: list[tuple[str, str]]
    body: str
    status: int
    response_headers: list[tuple[str, str]]
    response_body: str

    @property
    def title(self) -> str:
        return f"{self.method} {self.path}"


def _head_and_body(part: str) -> tuple[str, list[tuple[str, str]], str]:
    head, _, body = part.strip("\n").partition("\n\n")
    first, *lines = head.splitlines()
    headers = []
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep:
            raise ValueError(f"not a header line: {line!r}")
        headers.append((name.strip(), value.strip()))
    return first.strip(), headers, body.strip()


def parse_exchange(block: str) -> Exchange:
    """One ``http`` block: a request, then the response from its ``HTTP/1.1 <status>`` line on."""
    found = _STATUS_LINE.search(block)
    if found is None:
        raise ValueError(f"no 'HTTP/1.1 <status>' response line in:\n{block}")
    request_line, headers, body = _head_and_body(block[:found.start()])
    _, response_headers, response_body = _head_and_body(block[found.start():])
    method, path, *_ = request_line.split()
    return Exchange(method, path, headers, body, int(found.group(1)), response_headers, response_body)


def fill(text: str, values: dict[str, str]) -> str:
    """``text`` with every ``{{name}}`` replaced by its value (each must be bound already)."""
    def value(match: re.Match[str]) -> str:
        if match.group(1) not in values:
            raise AssertionError(f"{{{{{match.group(1)}}}}} is used before any response gave it a value")
        return values[match.group(1)]
    return _PLACEHOLDER.sub(value, text)


def _match_text(pattern: str, actual: Any, values: dict[str, str], where: str) -> None:
    if pattern == ANY:
        return
    assert isinstance(actual, str), f"{where}: expected text like {pattern!r}, got {actual!r}"
    names: list[str] = []
    regex, at = "", 0
    for found in _PLACEHOLDER.finditer(pattern):
        regex += re.escape(pattern[at:found.start()])
        name = found.group(1)
        if name in values:
            regex += re.escape(values[name])
        elif name in names:
            regex += f"(?P={_group(name)})"
        else:
            names.append(name)
            regex += f"(?P<{_group(name)}>.+?)"
        at = found.end()
    regex += re.escape(pattern[at:])
    matched = re.fullmatch(regex, actual, re.S)
    assert matched is not None, f"{where}: expected {pattern!r}, got {actual!r}"
    for name in names:
        values[name] = matched.group(_group(name))


def _group(name: str) -> str:
    return "v_" + name.replace(".", "__")


def match(pattern: Any, actual: Any, values: dict[str, str], where: str = "body") -> None:
    """Check ``actual`` against the documented ``pattern`` (see the module docstring), binding
    the placeholders it meets for the first time."""
    if isinstance(pattern, str):
        _match_text(pattern, actual, values, where)
    elif isinstance(pattern, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        for key, item in pattern.items():
            assert key in actual, f"{where}: no field {key!r} (it has {', '.join(actual)})"
            match(item, actual[key], values, f"{where}.{key}")
    elif isinstance(pattern, list):
        assert isinstance(actual, list), f"{where}: expected a list, got {actual!r}"
        assert len(actual) == len(pattern), f"{where}: expected {len(pattern)} items, got {len(actual)}: {actual!r}"
        for i, (item, got) in enumerate(zip(pattern, actual)):
            match(item, got, values, f"{where}[{i}]")
    else:
        assert type(actual) is type(pattern) and actual == pattern, f"{where}: expected {pattern!r}, got {actual!r}"


def run_exchange(http: httpx.Client, exchange: Exchange, values: dict[str, str]) -> httpx.Response:
    """Send one documented request and check the response against the documented one."""
    headers = [(name, fill(value, values)) for name, value in exchange.headers]
    body = fill(exchange.body, values)
    response = http.request(exchange.method, fill(exchange.path, values), headers=headers,
                            content=body.encode() if body else None)
    title = exchange.title
    assert response.status_code == exchange.status, (
        f"{title}: expected {exchange.status}, got {response.status_code}: {response.text[:500]}")
    for name, value in exchange.response_headers:
        _match_text(value, response.headers.get(name), values, f"{title} header {name}")
    if not exchange.response_body:
        assert not response.content, f"{title}: expected no body, got {response.text[:500]!r}"
    else:
        match(json.loads(exchange.response_body), response.json(), values, f"{title} body")
    return response


def run_exchanges(http: httpx.Client, blocks: list[str], values: dict[str, str] | None = None) -> dict[str, str]:
    """Run the documented exchanges in order; returns every placeholder's value."""
    bound = dict(values or {})
    for block in blocks:
        run_exchange(http, parse_exchange(block), bound)
    return bound
