"""Checks for request fields (every protocol with a JSON body, and the bearer header): each names the field it refuses, so that an
agent reading the 400 knows exactly what to fix. The body itself (size, strict JSON, nesting, text
that can be stored) was checked by the request edge and its JSON reader (``server/json_body.py``)."""

from __future__ import annotations

import json
from typing import Any

from haggler.errors import InvalidInput, Unauthorized

#: The largest free-form JSON value (input, scope modifications, output) kept, serialized.
MAX_JSON_BYTES = 16 * 1024


def integer(value: object, name: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"{name} must be an integer" + (" (whole cents)" if name.endswith("Cents") else "")
                           + ("" if value is None else f", not {json.dumps(value)[:40]}"))
    if not low <= value <= high:
        raise InvalidInput(f"{name} must be between {low} and {high}, not {value}")
    return value


def text(value: object, name: str, *, max_length: int, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be a string")
    value = value.strip()
    if not value and not allow_empty:
        raise InvalidInput(f"{name} must not be empty")
    if len(value) > max_length:
        raise InvalidInput(f"{name} is longer than {max_length} characters")
    return value


def one_of(value: object, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise InvalidInput(f"{name} must be one of {', '.join(choices)}, not {json.dumps(value)[:40]}")
    return value  # type: ignore[return-value]


def json_object(value: object, name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidInput(f"{name} must be a JSON object")
    return value


def free_json(value: object, name: str) -> str:
    """Any JSON value the exchange stores but does not interpret, serialized, within the size limit."""
    encoded = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(encoded.encode("utf-8")) > MAX_JSON_BYTES:
        raise InvalidInput(f"{name} is larger than {MAX_JSON_BYTES} bytes")
    return encoded


def query_integer(raw: str | None, name: str, *, low: int, high: int) -> int | None:
    """An optional non-negative integer query parameter, digits only."""
    if raw is None:
        return None
    if not raw.isascii() or not raw.isdigit() or len(raw) > 19:
        raise InvalidInput(f"{name} must be a whole number, not {raw[:40]!r}")
    return integer(int(raw), name, low=low, high=high)


def only(body: dict[str, Any], allowed: tuple[str, ...], *, where: str | None = None) -> None:
    """Refuse unknown fields: a typo ("maxPriceCent") must not be silently ignored. ``where``
    names the enclosing object when the fields are nested."""
    unknown = sorted(set(body) - set(allowed))
    if unknown:
        field = f"{where}.{unknown[0]}" if where else unknown[0]
        raise InvalidInput(f"unknown field {field!r}; allowed: {', '.join(allowed)}")


def bearer_credential(authorization: str | None, what: str) -> str:
    """The credential of an ``Authorization: Bearer <credential>`` header; Unauthorized, naming
    ``what`` to send ("your API key"), when the header is missing or not a bearer one."""
    scheme, _, credential = (authorization or "").partition(" ")
    credential = credential.strip()
    if scheme.lower() != "bearer" or not credential:
        raise Unauthorized(f"send {what} as 'Authorization: Bearer <key>'")
    return credential
