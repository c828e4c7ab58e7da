"""RFC 8785 (JSON Canonicalization Scheme) bytes for hashing and signing.

Audit event hashes must be reproducible by anyone, in any language, without our
code, so they are taken over JCS bytes rather than ``json.dumps`` output (whose
key order, escapes and float forms are Python's own).  JCS number and string
serialisation (ECMAScript number formatting, UTF-16 key ordering) is subtle, so
we use the tested ``rfc8785`` package; this module is the only place that
imports it, so swapping the implementation touches one function.
"""

from __future__ import annotations

from typing import Any

import rfc8785


class CanonicalizationError(ValueError):
    """A value has no RFC 8785 form (NaN, infinity, integers beyond 2**53, non-JSON types)."""


def canonical_json(value: Any) -> bytes:
    """Return the RFC 8785 canonical UTF-8 bytes of a JSON-compatible value."""
    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise CanonicalizationError(f"cannot canonicalise value as RFC 8785 JSON: {exc}") from exc
