"""RFC 8785 (JSON Canonicalization Scheme) bytes for hashing and signing.

Audit event hashes must be reproducible by anyone, in any language, without our
code, so they are taken over JCS bytes rather than ``json.dumps`` output (whose
key order, escapes and float forms are Python's own).  JCS number and string
serialisation (ECMAScript number formatting, UTF-16 key ordering) is subtle, so
we use the tested ``rfc8785`` package; this module is the only place that
imports it, so swapping the implementation touches one function.
"""

from __future__ import annotations

import json
from typing import Any

import rfc8785

#: The integers RFC 8785 serialises (those a double holds exactly).
_SAFE_INTEGER = 2**53 - 1
_PLAIN_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), sort_keys=True,
                                allow_nan=False).encode


class CanonicalizationError(ValueError):
    """A value has no RFC 8785 form (NaN, infinity, integers beyond 2**53, non-JSON types)."""


def canonical_json(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON-compatible value.

    A value made only of dicts with ASCII keys, lists, strings, integers a double holds, bools
    and None — every signed market message and deal — is written by ``json`` (in C): for it, the
    two write the same bytes (keys sorted by code point, which for ASCII is RFC 8785's UTF-16
    order; the same escapes, ``json``'s table being the one ``rfc8785`` adapted; integers in
    decimal), at a fraction of ``rfc8785``'s cost. Anything else (a float, a non-ASCII key, a
    subclass, a lone surrogate) goes to ``rfc8785``, which also words every refusal."""
    if _plain(value):
        try:
            return _PLAIN_DUMPS(value).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: rfc8785 refuses it in its own words
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalizationError(f"cannot canonicalise value as RFC 8785 JSON: {exc}") from exc


def _plain(value: Any) -> bool:
    """Whether ``value`` is made only of what :func:`canonical_json` lets ``json`` write."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is int:
        return -_SAFE_INTEGER <= value <= _SAFE_INTEGER
    if kind is dict:
        return all(type(key) is str and key.isascii() and _plain(item) for key, item in value.items())
    if kind is list:
        return all(_plain(item) for item in value)
    return False
