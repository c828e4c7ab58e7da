"""The market (``/market``) as its operator sees it: every order book's depth and the deals.

Book depth is what ``GET /market/books/{item}`` shows anyone (open quantity at the best prices);
the operator's view adds the order counts and lists every book at once. Prices are numbers, as
on the market's wire.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select

from haggler.money import to_decimal_number
from haggler.protocols.market.books import OPEN
from haggler.protocols.market.deals import STATUSES as DEAL_STATUSES
from haggler.storage.schema import market_deals, market_orders
from haggler.web.admin.paging import EVERYTHING, Page, Window


@dataclass(frozen=True, slots=True)
class Side:
    orders: int
    quantity: int
    #: The best price: the highest bid, the lowest ask (None when the side is empty).
    best_cents: int | None

    def to_json(self) -> dict[str, Any]:
        return {"orders": self.orders, "quantity": self.quantity,
                "best": None if self.best_cents is None else to_decimal_number(self.best_cents)}


@dataclass(frozen=True, slots=True)
class Book:
    item: str
    currency: str
    bids: Side
    asks: Side

    @property
    def spread_cents(self) -> int | None:
        if self.bids.best_cents is None or self.asks.best_cents is None:
            return None
        return self.asks.best_cents - self.bids.best_cents

    def to_json(self) -> dict[str, Any]:
        spread = self.spread_cents
        return {"item": self.item, "currency": self.currency, "bids": self.bids.to_json(), "asks": self.asks.to_json(),
                "spread": None if spread is None else to_decimal_number(spread)}


_EMPTY = Side(0, 0, None)


def books_page(conn: Connection, window: Window = EVERYTHING) -> Page[Book]:
    """Every book with open orders, by item then currency."""
    o = market_orders.c
    sides: dict[tuple[str, str], dict[str, Side]] = {}
    for item, currency, side, n, quantity, high, low in conn.execute(
            select(o.item, o.currency, o.side, func.count(), func.sum(o.remaining), func.max(o.price_cents),
                   func.min(o.price_cents)).where(o.status == OPEN).group_by(o.item, o.currency, o.side)):
        sides.setdefault((item, currency), {})[side] = Side(n, int(quantity), high if side == "buy" else low)
    books = [Book(item, currency, found.get("buy", _EMPTY), found.get("sell", _EMPTY))
             for (item, currency), found in sorted(sides.items())]
    return Page.of(books, window)


@dataclass(frozen=True, slots=True)
class MarketDeal:
    id: str
    listing_id: str
    buyer_id: str
    seller_id: str
    protocol: str
    price_cents: int
    currency: str
    status: str
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "listing_id": self.listing_id, "buyer_id": self.buyer_id, "seller_id": self.seller_id,
                "protocol": self.protocol, "price": to_decimal_number(self.price_cents), "currency": self.currency,
                "status": self.status, "created_at": self.created_at.isoformat()}


def deals_page(conn: Connection, window: Window = EVERYTHING) -> Page[MarketDeal]:
    """The market's deals, newest first."""
    d = market_deals.c
    query = (select(d.id, d.listing_id, d.buyer_id, d.seller_id, d.protocol, d.price_cents, d.currency, d.status,
                    d.created_at).order_by(d.created_at.desc(), d.id).offset(window.offset or None).limit(window.limit))
    rows = [MarketDeal(*row) for row in conn.execute(query)]
    return Page(rows, conn.execute(select(func.count()).select_from(market_deals)).scalar_one(), window)


def deals_by_status(conn: Connection) -> dict[str, int]:
    counts = dict.fromkeys(DEAL_STATUSES, 0)
    for status, n in conn.execute(select(market_deals.c.status, func.count()).group_by(market_deals.c.status)):
        counts[status] = n
    return counts
