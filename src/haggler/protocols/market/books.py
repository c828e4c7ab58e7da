"""Order books of the double auction (spec 003: Protocol 4: Double Auction), stored, and cleared
by the pure :func:`~haggler.protocols.market.auction.clear`.

One book per item (``category.subcategory.name``) and currency. An order is a signed ``order``
message, held to its agent's mandate when it is placed (a seller never asks below its floor, a
buyer never bids above its budget) and again when the book clears: an order whose mandate no
longer allows it (a newer mandate, a passed ``dealMustCloseBy``) is cancelled and audit-logged
instead of traded. Every fill of a clearing becomes a deal at the one uniform price, all in one
transaction ("all compatible deals close simultaneously").

A book is public only as depth by price level: no agent ids, no order ids. An agent does not
trade with itself: it may not rest orders on both sides of one book.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from haggler.errors import Conflict, Forbidden, InvalidInput, NotFound
from haggler.money import amount_cents, to_decimal_number
from haggler.protocols.market import deals, identity
from haggler.protocols.market.audit import AuditEvents
from haggler.protocols.market.auction import Order, Side, clear as clear_book
from haggler.protocols.market.identity import Agent
from haggler.protocols.market.listings import stored
from haggler.protocols.market.mandates import Mandate, MandateViolation, check, enforce, order
from haggler.protocols.market.messages import InvalidMessage, validate
from haggler.storage.database import lock_key
from haggler.storage.rows import row_by_id
from haggler.storage.schema import market_orders
from haggler.timestamps import utc_z

OPEN, FILLED, CANCELLED = "open", "filled", "cancelled"
_ITEM_CHARS = frozenset("abcdefghijklmnopqrstuvwxyz0123456789_.")


def _role(side: str) -> str:
    return "buyer" if side == Side.BUY else "seller"


def check_item(item: str) -> str:
    parts = item.split(".")
    if len(parts) != 3 or not all(parts) or not set(item) <= _ITEM_CHARS or len(item) > 194:
        raise InvalidInput("the book is category.subcategory.name (lowercase letters, digits, underscores)")
    return item


def _lock(conn: Connection, item: str) -> None:
    lock_key(conn, f"market-book:{item}")


def place(conn: Connection, item: str, message: object, audit: AuditEvents, now: datetime) -> dict[str, Any]:
    """``POST /market/books/{item}/orders``: rest a signed order in the book."""
    validate(message)
    assert isinstance(message, dict)
    if message["item"] != item:
        raise InvalidMessage("/item", f"must be the book in the path, {item}")
    agent = identity.sender(conn, message["agentId"], message)
    amount, side, currency = amount_cents(message["price"]), message["side"], message["currency"]
    if amount <= 0:
        raise InvalidMessage("/price", "must be greater than 0")
    role = _role(side)
    try:
        mandate = identity.mandate_of(conn, agent.id)
        enforce(mandate, role, order(agent.id, amount, currency, now, quantity=message["quantity"]),
                spent=deals.spend(conn, mandate, agent.id, role, currency, now))
    except MandateViolation as exc:
        audit.violation(agent.id, "order", exc.constraint, orderId=message["orderId"])
        raise
    _lock(conn, item)
    if conn.execute(select(market_orders.c.id).where(market_orders.c.id == message["orderId"])).first() is not None:
        raise Conflict(f"orderId {message['orderId']} is already taken")
    other_side = Side.SELL if side == Side.BUY else Side.BUY
    if conn.execute(select(market_orders.c.id).where(
            market_orders.c.item == item, market_orders.c.agent_id == agent.id, market_orders.c.side == other_side,
            market_orders.c.status == OPEN)).first() is not None:
        raise Conflict("this agent has an open order on the other side of this book: an agent does not trade with itself")
    seq = (conn.execute(select(func.max(market_orders.c.seq)).where(market_orders.c.item == item)).scalar() or 0) + 1
    conn.execute(insert(market_orders).values(
        id=message["orderId"], agent_id=agent.id, item=item, side=side, price_cents=amount,
        quantity=message["quantity"], remaining=message["quantity"], seq=seq, status=OPEN, currency=currency,
        message=stored(message), created_at=now))
    return {"orderId": message["orderId"], "item": item, "status": OPEN, "remaining": message["quantity"]}


def cancel(conn: Connection, item: str, order_id: str, caller: Agent) -> dict[str, Any]:
    """``DELETE /market/books/{item}/orders/{orderId}``: the order's own agent takes what remains
    of it out of the book (409 once it has filled or was cancelled)."""
    _lock(conn, item)
    row = row_by_id(conn, market_orders, order_id, "order")
    if row.item != item:
        raise NotFound(f"no order {order_id} in book {item}")
    if row.agent_id != caller.id:
        raise Forbidden("only the agent that placed an order may cancel it")
    if row.status != OPEN:
        raise Conflict(f"order {order_id} is {row.status}")
    conn.execute(update(market_orders).where(market_orders.c.id == order_id).values(status=CANCELLED))
    return {"orderId": order_id, "item": item, "status": CANCELLED, "remaining": row.remaining}


def depth(conn: Connection, item: str) -> dict[str, Any]:
    """``GET /market/books/{item}``: open quantity by price level and currency, best first."""
    rows = conn.execute(select(market_orders.c.currency, market_orders.c.side, market_orders.c.price_cents,
                               func.sum(market_orders.c.remaining).label("quantity"))
                        .where(market_orders.c.item == item, market_orders.c.status == OPEN)
                        .group_by(market_orders.c.currency, market_orders.c.side, market_orders.c.price_cents)).all()
    books: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for row in rows:
        book = books.setdefault(row.currency, {"bids": [], "asks": []})
        book["bids" if row.side == Side.BUY else "asks"].append({"price": row.price_cents, "quantity": int(row.quantity)})
    for book in books.values():
        book["bids"].sort(key=lambda level: -level["price"])
        book["asks"].sort(key=lambda level: level["price"])
        for level in book["bids"] + book["asks"]:
            level["price"] = to_decimal_number(level["price"])
    return {"item": item, "books": [{"currency": currency, **book} for currency, book in sorted(books.items())]}


def clear(conn: Connection, item: str, audit: AuditEvents, now: datetime, deal_expiry: timedelta) -> dict[str, Any]:
    """``POST /market/books/{item}/clear``: run the call auction of each currency's book; its
    deals expire ``deal_expiry`` from now unless signed."""
    _lock(conn, item)
    rows = conn.execute(select(market_orders).where(market_orders.c.item == item, market_orders.c.status == OPEN)
                        .order_by(market_orders.c.seq)).all()
    deals.lock_spend(conn, *{row.agent_id for row in rows})  # before their mandates: none is refiled meanwhile
    mandates = identity.mandates_of(conn, {row.agent_id for row in rows})  # once per agent, not per order or trade
    rows = [row for row in rows if _still_allowed(conn, row, mandates.get(row.agent_id), audit, now)]
    results = []
    for currency in sorted({row.currency for row in rows}):
        same = [row for row in rows if row.currency == currency]
        caps = _caps(conn, same, mandates, currency, now)
        results.append(_clear_currency(conn, item, currency, same, caps, mandates, now, now + deal_expiry))
    return {"item": item, "clearedAt": utc_z(now), "clearings": results}


def _caps(conn: Connection, rows: list[Any], mandates: dict[str, Mandate], currency: str,
          now: datetime) -> dict[str, int]:
    """How many units of each order (by id) may trade now: what remains of it, capped by what its
    agent may still commit — a buy order by ``min(maxSpend, budget left) // its limit`` (the
    limit is at least the clearing price, so a fill's total stays within both), a sell order by
    the seller's ``quantityOnHand`` left. An agent's orders share its allowance in arrival order.
    A fill is capped; the mandate never is."""
    left: dict[str, int | None] = {}
    caps = {}
    for row in rows:  # in arrival order
        mandate = mandates[row.agent_id]
        role = _role(row.side)
        if row.agent_id not in left:
            limit = mandate.budget if role == "buyer" else mandate.quantity_on_hand
            left[row.agent_id] = None if limit is None else \
                max(0, limit - deals.committed(conn, row.agent_id, role, currency, now))
        allowance = left[row.agent_id]
        if role == "buyer":
            assert mandate.max_spend is not None  # _still_allowed checked the order against it
            cents = mandate.max_spend if allowance is None else min(mandate.max_spend, allowance)
            units = min(row.remaining, cents // row.price_cents)
            spent = units * row.price_cents
        else:
            units = row.remaining if allowance is None else min(row.remaining, allowance)
            spent = units
        if allowance is not None:
            left[row.agent_id] = allowance - spent
        caps[row.id] = units
    return caps


def _still_allowed(conn: Connection, row: Any, mandate: Mandate | None, audit: AuditEvents, now: datetime) -> bool:
    """Whether the order's agent's mandate (None: none on file) still allows it; if not, the
    order is cancelled."""
    violation = identity.NO_MANDATE if mandate is None else \
        check(mandate, _role(row.side), order(row.agent_id, row.price_cents, row.currency, now))  # a unit's price
    if violation is None:
        return True
    conn.execute(update(market_orders).where(market_orders.c.id == row.id).values(status=CANCELLED))
    audit.violation(row.agent_id, "order at clearing", violation.constraint, orderId=row.id)
    return False


def _clear_currency(conn: Connection, item: str, currency: str, rows: list[Any], caps: dict[str, int],
                    mandates: dict[str, Mandate], now: datetime, expires_at: datetime) -> dict[str, Any]:
    by_id = {row.id: row for row in rows}
    clearing = clear_book(Order(row.id, Side(row.side), row.price_cents, caps[row.id], row.seq)
                          for row in rows if caps[row.id])
    clearing_id = "clr_" + secrets.token_hex(8)
    filled: dict[str, int] = {}
    opened = []
    for n, (buy_id, sell_id, quantity, unit_price) in enumerate(clearing.trades, 1):
        filled[buy_id] = filled.get(buy_id, 0) + quantity
        filled[sell_id] = filled.get(sell_id, 0) + quantity
        opened.append(deals.open_deal(
            conn, request_id=f"{clearing_id}:{n}", listing_id=deals.BOOK_PREFIX + item,
            buyer_id=by_id[buy_id].agent_id, seller_id=by_id[sell_id].agent_id, protocol=deals.AUCTION,
            price_cents=unit_price, currency=currency, now=now, expires_at=expires_at, quantity=quantity,
            mandates=mandates)["dealId"])
    for order_id, quantity in filled.items():
        left = by_id[order_id].remaining - quantity
        conn.execute(update(market_orders).where(market_orders.c.id == order_id)
                     .values(remaining=left, status=OPEN if left else FILLED))
    return {"currency": currency, "clearingId": clearing_id,
            "price": None if clearing.price is None else to_decimal_number(clearing.price), "volume": clearing.volume,
            "trades": len(clearing.trades), "dealIds": opened}


def books_to_clear(conn: Connection) -> list[str]:
    """The items whose books have open orders on both sides (the scheduled clearing's work)."""
    rows = conn.execute(select(market_orders.c.item).where(market_orders.c.status == OPEN)
                        .group_by(market_orders.c.item)
                        .having(func.count(func.distinct(market_orders.c.side)) == 2)).all()
    return [row.item for row in rows]
