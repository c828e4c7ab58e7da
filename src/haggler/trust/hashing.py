"""How haggler stores secrets it must recognise but never reveal (session tokens, API keys)."""

from __future__ import annotations

import hashlib


def secret_hash(secret: str) -> str:
    """SHA-256 hex of a high-entropy secret: enough to look it up, useless to anyone who reads the database."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()
