"""Typed errors for talking to a store. Each carries the store's own ``{"error": ...}`` text
when the store sent one."""

from __future__ import annotations


class ShopperError(Exception):
    """Base class for everything the client raises."""

    def __init__(self, message: str, *, status: int | None = None, store_error: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.store_error = store_error


class NotNegotiable(ShopperError):
    """No nash.v1 or negotiate.v1 descriptor was found at the store."""


class UnsupportedProtocol(ShopperError):
    """The store names a protocol version this client does not understand (§8), or none."""

    def __init__(self, version: object) -> None:
        said = "names no protocol version (no nash_protocol or negotiate_protocol)" if version is None \
            else f"speaks {version!r}"
        super().__init__(f"the store's descriptor {said}; this client understands only 'nash.v1' and 'negotiate.v1'")
        self.version = version


class StoreError(ShopperError):
    """The store answered with an error status."""


class NotFound(StoreError):
    """Unknown product or session (404)."""


class ChatClosed(StoreError):
    """The chat is closed and takes no more turns."""


class RateLimited(StoreError):
    """429 that did not clear within the client's retry budget."""

    def __init__(self, message: str, *, retry_after: float | None, store_error: str | None = None) -> None:
        super().__init__(message, status=429, store_error=store_error)
        self.retry_after = retry_after


class MessageTooLong(ShopperError):
    """The message exceeds the store's published limit; it was not sent."""


class StoreUnavailable(ShopperError):
    """A timeout or a connection failure."""


class BadResponse(ShopperError):
    """The store's answer is not what negotiate.v1 promises (not JSON, missing fields)."""


class BlockedURL(ShopperError):
    """A URL the client was asked to follow is not allowed by its URL policy."""
