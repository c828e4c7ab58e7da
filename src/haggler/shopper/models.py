"""Typed views of what a nash.v1 or negotiate.v1 store says, as a shopper sees it.

Amounts stay in the store's decimal wire form here *and* in integer cents: cents for
decisions, the decimal for display and for echoing back what the store said.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from haggler.money import cents_or_none, to_decimal_number


@dataclass(frozen=True, slots=True)
class Limits:
    max_chat_starts_per_hour_per_ip: int | None
    max_messages_per_chat: int | None
    session_idle_ttl_seconds: int | None
    max_message_length_chars: int | None
    currency: str | None


@dataclass(frozen=True, slots=True)
class Listing:
    """A product as a store lists it."""

    id: str
    name: str
    list_price_cents: int | None
    currency: str
    subtitle: str = ""
    kind: str | None = None
    page_url: str | None = None
    start_chat_url: str | None = None
    description: str | None = None


@dataclass(frozen=True, slots=True)
class Endpoints:
    start_chat: str      # template with {product_id}
    send_message: str    # template with {session_id} and {url_encoded_message}
    read_history: str    # template with {session_id}
    catalog: str | None


@dataclass(frozen=True, slots=True)
class StoreInfo:
    """A discovered store: its descriptor, parsed."""

    discovery_url: str
    #: The version the descriptor names: "nash.v1" or "negotiate.v1".
    protocol: str
    name: str
    rep_name: str | None
    policy: str | None
    endpoints: Endpoints
    products: tuple[Listing, ...]
    limits: Limits
    raw: dict[str, Any] = field(repr=False, compare=False)

    def product(self, product_id: str) -> Listing | None:
        return next((p for p in self.products if p.id == product_id), None)


@dataclass(frozen=True, slots=True)
class Offer:
    """The merchant's terms on the table (the structured extension, when a store sends it)."""

    price_cents: int
    currency: str
    extras: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Deal:
    id: str
    price_cents: int
    currency: str
    extras: tuple[str, ...]
    checkout_url: str | None


@dataclass(frozen=True, slots=True)
class ChatStarted:
    session_id: str
    greeting: str
    next_url: str
    offer: Offer | None = None


@dataclass(frozen=True, slots=True)
class Reply:
    message: str
    closed: bool
    next_url: str | None
    offer: Offer | None = None
    deal: Deal | None = None
    #: The top-level ``checkout_url`` a nash.v1 store puts on the reply that closes with a deal
    #: (a store may send it without the structured ``deal``).
    checkout_url: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    speaker: str
    message: str


@dataclass(frozen=True, slots=True)
class History:
    session_id: str
    entries: tuple[HistoryEntry, ...]
    #: Known only from stores that say so (haggler's `closed` field); None otherwise.
    closed: bool | None = None
    deal: Deal | None = None


def wire_view(offer: Offer | Deal | None) -> dict[str, Any] | None:
    """An offer or deal back in the store's wire form (decimal prices), e.g. for tools or for
    :func:`haggler.language.merchant_reading.read_merchant_reply`."""
    if offer is None:
        return None
    view: dict[str, Any] = {"price": to_decimal_number(offer.price_cents), "currency": offer.currency,
                            "extras": list(offer.extras)}
    if isinstance(offer, Deal):
        view.update(id=offer.id, checkout_url=offer.checkout_url)
    return view


def parse_offer(raw: Any, default_currency: str) -> Offer | None:
    if not isinstance(raw, dict):
        return None
    price = cents_or_none(raw.get("price"))
    if price is None:
        return None
    extras = raw.get("extras") if isinstance(raw.get("extras"), list) else []
    return Offer(price, str(raw.get("currency") or default_currency), tuple(str(e) for e in extras))


def parse_deal(raw: Any, default_currency: str) -> Deal | None:
    offer = parse_offer(raw, default_currency)
    if offer is None:
        return None
    checkout = raw.get("checkout_url")
    return Deal(str(raw.get("id", "")), offer.price_cents, offer.currency, offer.extras,
                checkout if isinstance(checkout, str) else None)
