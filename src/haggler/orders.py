"""Orders: what a person buys, from an agent's cart checkout (agents.json), a deal closed in chat
(negotiate.v1) or an agentic checkout session (UCP) — one order code for every door.

An order is a snapshot: its priced lines, total and currency as the buyer confirmed them, and the
buyer's details from the checkout form. Placing is idempotent by unique keys, not locks: one order
per checkout, per deal and per checkout session, so a repeated or racing submission finds the order already placed
(``created=False``) on any worker. Only public product facts (name, list price) ever reach a line.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy import Connection, bindparam, delete, func, insert, select
from sqlalchemy.exc import IntegrityError

from haggler.commerce import order_events
from haggler.errors import InvalidInput
from haggler.money import decimal_string
from haggler.storage.database import Database
from haggler.storage.prepared import Prepared
from haggler.storage.schema import deal_redemptions, orders
from haggler.timestamps import utc_z

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class OrderLine:
    """One product in a cart or an order. A negotiated line carries a deal's price for exactly one unit."""

    item_id: str
    name: str
    quantity: int
    unit_price_cents: int
    currency: str
    extras: tuple[str, ...]
    deal_id: str | None
    list_price_cents: int | None  # None only if the product has left the catalog since

    @property
    def negotiated(self) -> bool:
        return self.deal_id is not None

    @property
    def line_total_cents(self) -> int:
        return self.unit_price_cents * self.quantity

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: amounts in cents and as decimal strings."""
        return {
            "item_id": self.item_id, "name": self.name, "quantity": self.quantity,
            "unit_price_cents": self.unit_price_cents, "unit_price": decimal_string(self.unit_price_cents),
            "line_total_cents": self.line_total_cents, "line_total": decimal_string(self.line_total_cents),
            "list_price_cents": self.list_price_cents,
            "list_price": None if self.list_price_cents is None else decimal_string(self.list_price_cents),
            "currency": self.currency, "extras": list(self.extras), "deal_id": self.deal_id,
            "negotiated": self.negotiated,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OrderLine:
        """Read a line back from a checkout or order snapshot (see :meth:`to_json`)."""
        return cls(data["item_id"], data["name"], data["quantity"], data["unit_price_cents"], data["currency"],
                   tuple(data["extras"]), data["deal_id"], data["list_price_cents"])


def total_cents(lines: tuple[OrderLine, ...]) -> int:
    return sum(line.line_total_cents for line in lines)


def lines_json(lines: tuple[OrderLine, ...]) -> str:
    return json.dumps([line.to_json() for line in lines], ensure_ascii=False)


def lines_from_json(text: str) -> tuple[OrderLine, ...]:
    return tuple(OrderLine.from_json(d) for d in json.loads(text))


def snapshot_json(lines: tuple[OrderLine, ...], total: int, currency: str) -> dict[str, Any]:
    """The priced lines of a checkout or an order, JSON-ready."""
    return {"lines": [line.to_json() for line in lines], "total_cents": total,
            "total": decimal_string(total), "currency": currency}


# -- the buyer -------------------------------------------------------------------------------------

#: The checkout form's fields, in order, with their longest accepted value.
BUYER_FIELDS = {"name": 200, "email": 254, "address": 1000}
_EMAIL = re.compile(r"[^@\s]+@[^@\s.]+(?:\.[^@\s.]+)+")
# Control characters other than the line breaks and tabs an address may hold; PostgreSQL refuses
# NUL, and no reader wants the rest.
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")


class BuyerInvalid(InvalidInput):
    """The checkout form is not filled in right; ``problems`` maps each bad field to why."""

    def __init__(self, problems: Mapping[str, str]) -> None:
        super().__init__("; ".join(f"{name}: {why}" for name, why in problems.items()))
        self.problems = dict(problems)


@dataclass(frozen=True, slots=True)
class Buyer:
    """Who buys and where it goes."""

    name: str
    email: str
    address: str

    @property
    def masked_email(self) -> str:
        """The email as a confirmation page may show it to whoever holds the page's link."""
        local, _, domain = self.email.partition("@")
        return f"{local[:1]}•••@{domain}"

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "email": self.email, "address": self.address}


def read_buyer(form: Mapping[str, str]) -> Buyer:
    """The buyer from the checkout form's fields; :class:`BuyerInvalid` names every bad field."""
    # Browsers send a textarea's line breaks as CRLF; the store keeps one kind.
    values = {name: form.get(name, "").replace("\r\n", "\n").replace("\r", "\n").strip() for name in BUYER_FIELDS}
    problems: dict[str, str] = {}
    for name, longest in BUYER_FIELDS.items():
        value = values[name]
        if not value:
            problems[name] = "required"
        elif len(value) > longest:
            problems[name] = f"at most {longest} characters"
        elif _CONTROL.search(value if name == "address" else value.replace("\n", "\x00")):
            problems[name] = "contains characters that cannot be stored" if name == "address" else \
                "must be one line of text"
    if "email" not in problems and not _EMAIL.fullmatch(values["email"]):
        problems["email"] = "not an email address (name@example.com)"
    if problems:
        raise BuyerInvalid(problems)
    return Buyer(values["name"], values["email"], values["address"])


# -- orders --------------------------------------------------------------------------------------


#: The doors an order comes through: a chat deal's checkout page, an agents.json cart, UCP, ACP.
DOORS = ("chat", "cart", "ucp", "acp")


@dataclass(frozen=True, slots=True)
class Order:
    """A placed order: from a cart checkout (``checkout_id``), a chat deal (``deal_id``) or an
    agentic checkout session (``session_id``); ``door`` names which."""

    id: str
    lines: tuple[OrderLine, ...]
    total_cents: int
    currency: str
    placed_at: datetime  # UTC
    buyer: Buyer | None  # None only on orders placed before the checkout form existed
    checkout_id: str | None = None
    deal_id: str | None = None
    session_id: str | None = None
    door: str = field(kw_only=True)  # one of DOORS, always named where an order is made
    payment_handler: str | None = None  # None: no payment was taken at the door
    payment_reference: str | None = None
    #: What a checkout protocol records beyond the lines (haggler/commerce/sessions.py).
    details: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"order_id": self.id, "source": self.door, "checkout_id": self.checkout_id, "deal_id": self.deal_id,
                "session_id": self.session_id,
                **snapshot_json(self.lines, self.total_cents, self.currency),
                "buyer": self.buyer.to_json() if self.buyer else None, "placed_at": utc_z(self.placed_at)}


def _order(row: Any) -> Order:
    buyer = Buyer(row.buyer_name, row.buyer_email, row.ship_to) if row.buyer_name is not None else None
    return Order(row.id, lines_from_json(row.lines), row.total_cents, row.currency, row.placed_at, buyer,
                 row.checkout_id, row.deal_id, row.session_id, door=row.door, payment_handler=row.payment_handler,
                 payment_reference=row.payment_reference,
                 details=json.loads(row.details) if row.details is not None else None)


#: An order by each of its keys, and its insert: every order placed reads one and runs the other,
#: so both are compiled once and run on the driver (``storage/prepared.py``); likewise a deal's
#: redemption, read and taken by every deal added to a cart or bought.
_ORDER_BY = {key: Prepared(select(orders).where(orders.c[key] == bindparam("key")))
             for key in ("id", "session_id", "checkout_id", "deal_id")}
_INSERT_ORDER = Prepared(insert(orders))
_REDEMPTION = Prepared(select(deal_redemptions.c.session_id).where(deal_redemptions.c.deal_id == bindparam("deal_id")))
_REDEEM = Prepared(insert(deal_redemptions))


def order_for(conn: Connection, *, checkout_id: str | None = None, deal_id: str | None = None,
              session_id: str | None = None, order_id: str | None = None) -> Order | None:
    """The order placed for a checkout, a deal or a checkout session, or the one with this id, if any."""
    if order_id is not None:
        column, value = "id", order_id
    elif session_id is not None:
        column, value = "session_id", session_id
    else:
        column, value = ("checkout_id", checkout_id) if checkout_id is not None else ("deal_id", deal_id)
    row = _ORDER_BY[column].row(conn, {"key": value})
    return _order(row) if row else None


def list_orders(conn: Connection, *, limit: int | None = None, offset: int = 0) -> list[Order]:
    """Orders, newest first."""
    query = select(orders).order_by(orders.c.placed_at.desc(), orders.c.id).offset(offset)
    if limit is not None:
        query = query.limit(limit)
    return [_order(r) for r in conn.execute(query)]


def count_orders(conn: Connection) -> int:
    return conn.execute(select(func.count()).select_from(orders)).scalar_one()


def insert_order(conn: Connection, order: Order) -> None:
    buyer = order.buyer
    _INSERT_ORDER.run(conn, dict(
        id=order.id, checkout_id=order.checkout_id, deal_id=order.deal_id, session_id=order.session_id,
        door=order.door, lines=lines_json(order.lines),
        total_cents=order.total_cents, currency=order.currency, placed_at=order.placed_at,
        buyer_name=buyer.name if buyer else None, buyer_email=buyer.email if buyer else None,
        ship_to=buyer.address if buyer else None, payment_handler=order.payment_handler,
        payment_reference=order.payment_reference, details=_details_json(order.details)))
    if buyer is not None and buyer.email:
        # The buyer's confirmation is owed with the order, whatever its door (haggler/order_mail.py).
        order_events.record(conn, order_events.MAIL, order.id, order_events.PLACED, None, order.placed_at,
                            sent_after_answer=False)


def update_details(conn: Connection, order_id: str, details: dict[str, Any]) -> None:
    """Replace what the order's protocol records beyond its lines (its fulfillment events, its
    adjustments); the lines, total and payment of a placed order never change."""
    conn.execute(orders.update().where(orders.c.id == order_id).values(details=_details_json(details)))


def _details_json(details: dict[str, Any] | None) -> str | None:
    return None if details is None else json.dumps(details, ensure_ascii=False, sort_keys=True)


def redemption_of(conn: Connection, deal_id: str) -> Any:
    """The deal's redemption row (``session_id``: the agent session whose cart holds it, None when
    it was bought at its own checkout page), or None while nobody has it."""
    return _REDEMPTION.row(conn, {"deal_id": deal_id})


def redeem(conn: Connection, deal_id: str, session_id: str | None, at: datetime) -> None:
    """Take the deal, for an agent session's cart or (None) for its own checkout page: the primary
    key lets one taker win on any worker, the other getting an IntegrityError."""
    _REDEEM.run(conn, {"deal_id": deal_id, "session_id": session_id, "redeemed_at": at})


def release(conn: Connection, deal_id: str) -> None:
    """Give back a deal a checkout protocol redeemed for a payment that did not go through; a
    redemption for an agent's cart, or one an order was placed for, is never released."""
    conn.execute(delete(deal_redemptions).where(
        deal_redemptions.c.deal_id == deal_id, deal_redemptions.c.session_id.is_(None),
        ~select(orders.c.id).where(orders.c.deal_id == deal_id).exists()))


def new_order_id() -> str:
    return "ord_" + secrets.token_urlsafe(12)


def place_once(db: Database, place: Callable[[Connection], T]) -> T:
    """Run ``place`` — which returns the order already placed (``created=False``), refuses, or
    inserts a new one (``True``) — in a write transaction. When a racing twin commits first, our
    insert breaks a unique key; ``place`` then runs once more and finds what the winner left (its
    order, or the redemption that refuses ours). The one way every order is placed."""
    try:
        with db.write() as conn:
            return place(conn)
    except IntegrityError:
        with db.write() as conn:
            return place(conn)


__all__ = ["BUYER_FIELDS", "DOORS", "Buyer", "BuyerInvalid", "Order", "OrderLine", "count_orders", "insert_order",
           "lines_from_json", "lines_json", "list_orders", "new_order_id", "order_for", "place_once",
           "read_buyer", "redeem", "redemption_of", "release", "snapshot_json", "total_cents", "update_details"]
