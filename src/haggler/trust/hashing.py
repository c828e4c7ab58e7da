"""How haggler stores secrets it must recognise but never reveal (session tokens, API keys)."""

from __future__ import annotations

import hashlib
import hmac


def secret_hash(secret: str) -> str:
    """SHA-256 hex of a high-entropy secret: enough to look it up, useless to anyone who reads the database."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def is_secret(given: str, expected: str | None) -> bool:
    """Whether ``given`` is the configured secret ``expected`` (the operator token), compared in
    constant time; never when none is configured."""
    return expected is not None and hmac.compare_digest(given.encode("utf-8"), expected.encode("utf-8"))
