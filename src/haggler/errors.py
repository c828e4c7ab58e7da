"""One error vocabulary for every protocol.

Domain code raises these; each wire protocol maps them to its own status codes and error
shape at the edge (negotiate.v1: ``{"error": "..."}``).
"""

from __future__ import annotations

from typing import Any


class HagglerError(Exception):
    """Base class. ``message`` is safe to show to the caller."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def fields(self) -> dict[str, Any]:
        """The JSON error body: ``{"error": message}``; an error that names more (the failing
        field's pointer, the broken mandate constraint) adds its own fields."""
        return {"error": self.message}


class InvalidInput(HagglerError):
    """The request is malformed: a missing or bad parameter, a message too long."""


class NotFound(HagglerError):
    """The thing named does not exist (unknown product, unknown session)."""


class Closed(HagglerError):
    """The negotiation is over and takes no more turns."""


class TooEarly(HagglerError):
    """The thing exists but is not ready yet (an audit artifact while its session is still active)."""


class RateLimited(HagglerError):
    """A per-client limit was hit (HTTP 429 with Retry-After). Its message ends with
    :func:`limit_words`."""

    def __init__(self, message: str, retry_after_seconds: int) -> None:
        super().__init__(message)
        self.retry_after_seconds = max(1, retry_after_seconds)


def limit_words(limit: str, option: str) -> str:
    """How every 429 names the limit it hit and what changes it: ``limit`` in words ("8 chat
    starts per hour per client address") and the ``haggler serve`` option that sets it. The client
    learns what to expect, and the operator — often the same developer, on loopback — which
    setting to change, without reading the source."""
    return f"the limit is {limit}, set with haggler serve {option}"


class Unauthorized(HagglerError):
    """A missing, unknown or expired credential (agents.json: the session token)."""


class Conflict(HagglerError):
    """The request clashes with the current state (a deal already redeemed, an order already
    placed): retrying the same request will not help until the state changes. HTTP 409."""


class Gone(HagglerError):
    """The thing named existed but is no longer usable (an expired deal). HTTP 410."""


class Forbidden(HagglerError):
    """The caller is authenticated but not allowed to touch this thing (not a party to the
    transaction). HTTP 403."""


class InsufficientFunds(HagglerError):
    """A wallet cannot cover a hold; nothing was changed. HTTP 402."""


class PaymentDeclined(HagglerError):
    """A payment handler refused the charge, or the buyer must act before it can go through; no
    order was placed. HTTP 402."""


class Unavailable(HagglerError):
    """Something the request needs beyond the database (a payment processor) did not answer in
    time: whether it acted is unknown, and the same request may be retried. HTTP 503 with Retry-After."""

    def __init__(self, message: str, retry_after_seconds: int = 1) -> None:
        super().__init__(message)
        self.retry_after_seconds = max(1, retry_after_seconds)


class Unprocessable(HagglerError):
    """Well-formed but unusable: an Idempotency-Key reused with a different request. HTTP 422."""


class InFlight(Conflict):
    """The first request with this Idempotency-Key is still being processed: retry after a moment."""

    def __init__(self, message: str, retry_after_seconds: int = 1) -> None:
        super().__init__(message)
        self.retry_after_seconds = max(1, retry_after_seconds)
