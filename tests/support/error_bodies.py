"""The exact error body a surface answers, for tests that hold an answer to its shape."""

from __future__ import annotations

from typing import Any, Protocol


class _Answer(Protocol):
    headers: Any


def error_body(answer: _Answer, message: str, envelope: bool) -> dict[str, Any]:
    """``message`` in agents.json's envelope (``envelope``) or the store's ``{"error"}``, with the
    request id the answer's ``X-Request-Id`` header carries (every error body holds it)."""
    shape: dict[str, Any] = {"ok": False, "error": message} if envelope else {"error": message}
    return {**shape, "request_id": answer.headers["x-request-id"]}
