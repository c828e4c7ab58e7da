"""The agents.json cart: list-price lines, redeemed negotiate.v1 deals, checkout and orders.

Every method takes a session id the caller has already authenticated. Writes run in
:meth:`Database.write` and first lock the session's row, so two requests of one session never
interleave (SQLite's write transactions are exclusive anyway; on PostgreSQL the row lock does it).
Rules that span sessions rest on unique keys instead of locks: a deal is redeemed by inserting
its ``deal_redemptions`` row and an order by inserting its ``orders`` row, and the loser of a
race gets an IntegrityError that becomes a clean :class:`Conflict`.

Only public product facts (name, list price) ever reach a view or a page.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from sqlalchemy import Connection, and_, bindparam, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from haggler.catalog import Catalog, Product
from haggler.errors import Conflict, Gone, InvalidInput, NotFound
from haggler.money import decimal_string
from haggler.orders import (Buyer, Order, OrderLine, insert_order, lines_from_json, lines_json, new_order_id,
                            order_for, place_once, redeem, redemption_of, snapshot_json, total_cents)
from haggler.protocols.agents_json.capabilities import MAX_QUANTITY
from haggler.storage.chats import get_deal
from haggler.storage.database import Database
from haggler.storage.prepared import Prepared
from haggler.storage.rows import find_by_id, update_by_id
from haggler.storage.schema import (
    agent_sessions,
    cart_items,
    checkouts,
    orders,
)


# The statements of an agent's cart, redeem and checkout calls, each run once or more per call:
# compiled once and run on the driver (``storage/prepared.py``) rather than built and compiled
# through SQLAlchemy on every call.
_LOCK_SESSION = Prepared(select(agent_sessions.c.id).where(agent_sessions.c.id == bindparam("session_id"))
                         .with_for_update())
_LINES = Prepared(select(cart_items).where(cart_items.c.session_id == bindparam("session_id"))
                  .order_by(cart_items.c.added_at, cart_items.c.product_id))
_LINE = Prepared(select(cart_items).where(and_(cart_items.c.session_id == bindparam("session_id"),
                                               cart_items.c.product_id == bindparam("product_id"))))
_OTHER_CURRENCY = Prepared(select(cart_items.c.currency).where(and_(cart_items.c.session_id == bindparam("session_id"),
                                                                    cart_items.c.currency != bindparam("currency"))))
_INSERT_LINE = Prepared(insert(cart_items))
_CHECKOUT_OF_SESSION = Prepared(select(checkouts.c.id).where(checkouts.c.session_id == bindparam("session_id"))
                                .with_for_update())
_ORDER_OF_CHECKOUT = Prepared(select(orders.c.id).where(orders.c.checkout_id == bindparam("checkout_id")))
_INSERT_CHECKOUT = Prepared(insert(checkouts))


@dataclass(frozen=True, slots=True)
class CartView:
    session_id: str
    lines: tuple[OrderLine, ...]
    currency: str

    @property
    def total_cents(self) -> int:
        return total_cents(self.lines)

    @property
    def item_count(self) -> int:
        return sum(line.quantity for line in self.lines)

    def to_json(self) -> dict[str, Any]:
        return {"lines": [line.to_json() for line in self.lines], "item_count": self.item_count,
                "total_cents": self.total_cents, "total": decimal_string(self.total_cents),
                "currency": self.currency}


@dataclass(frozen=True, slots=True)
class Checkout:
    """The snapshot a human confirms; ``id`` is the unguessable part of ``url``."""

    id: str
    url: str
    session_id: str
    lines: tuple[OrderLine, ...]
    total_cents: int
    currency: str
    created_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"checkout_id": self.id, "url": self.url, **snapshot_json(self.lines, self.total_cents, self.currency),
                "created_at": self.created_at.isoformat()}


@dataclass(frozen=True, slots=True)
class CheckoutState:
    """A checkout as its human's page shows it: the snapshot, and the order once placed."""

    id: str
    lines: tuple[OrderLine, ...]
    total_cents: int
    currency: str
    order: Order | None


@dataclass(frozen=True, slots=True)
class Placed:
    """An order placed from a checkout; ``session_id`` lets the caller end the agent's session
    (checkout completion) when the order was ``created`` now."""

    order: Order
    session_id: str
    created: bool


class CartService:
    def __init__(self, catalog: Catalog, db: Database, clock: Callable[[], datetime], *,
                 deal_ttl: timedelta = timedelta(hours=24), max_quantity: int = MAX_QUANTITY) -> None:
        self.catalog = catalog
        self.db = db
        self.clock = clock
        self.deal_ttl = deal_ttl
        self.max_quantity = max_quantity

    # -- helpers -------------------------------------------------------------------------------

    def _product(self, item_id: str) -> Product:
        product = self.catalog.product(item_id)
        if product is None:
            raise NotFound(f"unknown product: {item_id}")
        return product

    def _check_quantity(self, quantity: int, *, lowest: int) -> None:
        if isinstance(quantity, bool) or not isinstance(quantity, int) or not lowest <= quantity <= self.max_quantity:
            raise InvalidInput(f"quantity must be a whole number from {lowest} to {self.max_quantity}, got {quantity!r}")

    @staticmethod
    def _lock_session(conn: Connection, session_id: str) -> None:
        """Serialize this session's writes (a no-op FOR UPDATE on SQLite, whose writes are exclusive)."""
        found = _LOCK_SESSION.first(conn, {"session_id": session_id})
        if found is None:
            raise NotFound(f"unknown session: {session_id}")

    def _lines(self, conn: Connection, session_id: str) -> tuple[OrderLine, ...]:
        rows = _LINES.rows(conn, {"session_id": session_id})
        lines = []
        for r in rows:
            product = self.catalog.product(r.product_id)
            facts = product.facts if product else None  # public fields only, by construction
            lines.append(OrderLine(r.product_id, facts.name if facts else r.product_id, r.quantity,
                                  r.unit_price_cents, r.currency, tuple(json.loads(r.extras)), r.deal_id,
                                  facts.list_price_cents if facts else None))
        return tuple(lines)

    def _view(self, conn: Connection, session_id: str) -> CartView:
        lines = self._lines(conn, session_id)
        return CartView(session_id, lines, lines[0].currency if lines else self.catalog.store.currency)

    @staticmethod
    def _line_row(conn: Connection, session_id: str, item_id: str) -> Any:
        return _LINE.row(conn, {"session_id": session_id, "product_id": item_id})

    @staticmethod
    def _check_currency(conn: Connection, session_id: str, currency: str) -> None:
        """A cart holds one currency: totals across currencies mean nothing."""
        held = _OTHER_CURRENCY.row(conn, {"session_id": session_id, "currency": currency})
        if held is not None:
            raise Conflict(f"the cart holds {held.currency} items; it cannot also hold {currency} items")

    # -- the cart ------------------------------------------------------------------------------

    def view(self, session_id: str) -> CartView:
        with self.db.read() as conn:
            return self._view(conn, session_id)

    def add(self, session_id: str, item_id: str, quantity: int, deal_id: str | None = None) -> CartView:
        """Add ``quantity`` of a product at list price, or redeem a negotiate.v1 deal for one unit."""
        product = self._product(item_id)
        self._check_quantity(quantity, lowest=1)
        if deal_id is None:
            return self._add_at_list_price(session_id, product, quantity)
        try:
            return self._redeem(session_id, product, quantity, deal_id)
        except IntegrityError as exc:
            # Another session inserted this deal's redemption between our check and our insert.
            raise Conflict(f"deal {deal_id} has already been redeemed") from exc

    def _add_at_list_price(self, session_id: str, product: Product, quantity: int) -> CartView:
        facts = product.facts
        with self.db.write() as conn:
            self._lock_session(conn, session_id)
            now = self.clock()
            line = self._line_row(conn, session_id, facts.id)
            if line is not None and line.deal_id is not None:
                raise Conflict(f"{facts.id} is in the cart at the negotiated price of deal {line.deal_id}; "
                               "remove that line first to buy it at list price")
            self._check_currency(conn, session_id, facts.currency)
            if line is None:
                conn.execute(insert(cart_items).values(
                    session_id=session_id, product_id=facts.id, quantity=quantity,
                    unit_price_cents=facts.list_price_cents, currency=facts.currency, extras="[]",
                    deal_id=None, added_at=now))
            else:
                total = line.quantity + quantity
                if total > self.max_quantity:
                    raise InvalidInput(f"quantity: the cart already holds {line.quantity} of {facts.id}; "
                                       f"at most {self.max_quantity} fit in one line")
                conn.execute(update(cart_items).where(and_(cart_items.c.session_id == session_id,
                                                           cart_items.c.product_id == facts.id))
                             .values(quantity=total, unit_price_cents=facts.list_price_cents))
            return self._view(conn, session_id)

    def _redeem(self, session_id: str, product: Product, quantity: int, deal_id: str) -> CartView:
        with self.db.write() as conn:
            self._lock_session(conn, session_id)
            now = self.clock()
            deal = get_deal(conn, deal_id)
            if deal is None:
                raise NotFound(f"unknown deal: {deal_id}")
            if deal.product_id != product.id:
                raise InvalidInput(f"deal {deal_id} is for product {deal.product_id}, not {product.id}")
            if quantity != 1:
                raise InvalidInput(f"quantity must be 1 with a deal: deal {deal_id} prices exactly one unit; "
                                   "add further units without the deal, at list price")
            expires_at = deal.created_at + self.deal_ttl
            if expires_at <= now:
                raise Gone(f"deal {deal_id} expired at {expires_at.strftime('%Y-%m-%dT%H:%M:%SZ')}")
            redemption = redemption_of(conn, deal_id)
            if redemption is not None and redemption.session_id is None:
                raise Conflict(f"deal {deal_id} has already been bought at its checkout page or an agent's checkout")
            if redemption is not None and redemption.session_id != session_id:
                raise Conflict(f"deal {deal_id} has already been redeemed")
            line = self._line_row(conn, session_id, product.id)
            if line is not None:
                held = f"with deal {line.deal_id}" if line.deal_id else "at list price"
                raise Conflict(f"{product.id} is already in the cart {held}; remove it first to redeem deal {deal_id}")
            self._check_currency(conn, session_id, deal.currency)
            if redemption is None:  # re-adding a deal this session redeemed earlier reuses its redemption
                redeem(conn, deal_id, session_id, now)
            _INSERT_LINE.run(conn, dict(
                session_id=session_id, product_id=product.id, quantity=1, unit_price_cents=deal.price_cents,
                currency=deal.currency, extras=json.dumps(list(deal.extras), ensure_ascii=False),
                deal_id=deal_id, added_at=now))
            return self._view(conn, session_id)

    def update(self, session_id: str, item_id: str, quantity: int) -> CartView:
        """Set a line's quantity; 0 removes it. A deal line holds exactly one unit, so only 0 or 1."""
        self._check_quantity(quantity, lowest=0)
        with self.db.write() as conn:
            self._lock_session(conn, session_id)
            line = self._line_row(conn, session_id, item_id)
            if line is None:
                raise NotFound(f"{item_id} is not in the cart")
            if line.deal_id is not None and quantity > 1:
                raise InvalidInput(f"quantity must be 0 or 1 for {item_id}: its negotiated price (deal "
                                   f"{line.deal_id}) covers one unit; add more at list price after checkout")
            where = and_(cart_items.c.session_id == session_id, cart_items.c.product_id == item_id)
            if quantity == 0:
                conn.execute(delete(cart_items).where(where))
            else:
                conn.execute(update(cart_items).where(where).values(quantity=quantity))
            return self._view(conn, session_id)

    def remove(self, session_id: str, item_id: str) -> CartView:
        """Drop a line. A removed deal stays redeemed by this session, which may add it again."""
        return self.update(session_id, item_id, 0)

    # -- checkout and orders -------------------------------------------------------------------

    def checkout(self, session_id: str, base_url: str) -> Checkout:
        """Snapshot the cart into the session's one checkout; later calls refresh it until the order is placed."""
        with self.db.write() as conn:
            self._lock_session(conn, session_id)
            view = self._view(conn, session_id)
            if not view.lines:
                raise InvalidInput("the cart is empty: add items before checking out")
            now = self.clock()
            found = _CHECKOUT_OF_SESSION.row(conn, {"session_id": session_id})
            existing = found.id if found else None
            values = {"lines": lines_json(view.lines), "total_cents": view.total_cents,
                      "currency": view.currency, "created_at": now}
            if existing is None:
                checkout_id = secrets.token_urlsafe(24)
                _INSERT_CHECKOUT.run(conn, dict(id=checkout_id, session_id=session_id, **values))
            else:
                checkout_id = existing
                placed = _ORDER_OF_CHECKOUT.row(conn, {"checkout_id": checkout_id})
                if placed is not None:
                    raise Conflict(f"this session's order {placed.id} has already been placed; the checkout cannot change")
                update_by_id(conn, checkouts, checkout_id, **values)
        return Checkout(checkout_id, f"{base_url.rstrip('/')}/checkout/cart/{checkout_id}", session_id,
                        view.lines, view.total_cents, view.currency, now)

    def place_order(self, checkout_id: str, buyer: Buyer,
                    then: Callable[[Connection, Placed], None] | None = None) -> Placed:
        """Place the order for a checkout, once: a repeat (or a racing twin) gets the same order,
        whoever it was for, with ``created=False``. ``then(conn, placed)`` runs in the placement's
        transaction when the order was placed now, so that what follows from a placement (the
        agent's session ended) commits with it or not at all."""
        def place(conn: Connection) -> Placed:
            # The row lock orders a placement after (or before) any refresh of the same checkout.
            row = find_by_id(conn, checkouts, checkout_id, lock=True)
            if row is None:
                raise NotFound("unknown checkout")
            found = order_for(conn, checkout_id=checkout_id)
            if found is not None:
                return Placed(found, row.session_id, False)
            order = Order(new_order_id(), lines_from_json(row.lines), row.total_cents, row.currency, self.clock(),
                          buyer, checkout_id=checkout_id, door="cart")
            insert_order(conn, order)
            placed = Placed(order, row.session_id, True)
            if then is not None:
                then(conn, placed)
            return placed

        return place_once(self.db, place)

    def checkout_state(self, checkout_id: str) -> CheckoutState:
        """What the human's page shows: the cart as snapshotted, and the order once placed."""
        with self.db.read() as conn:
            row = conn.execute(select(checkouts).where(checkouts.c.id == checkout_id)).first()
            if row is None:
                raise NotFound("unknown checkout")
            order = order_for(conn, checkout_id=checkout_id)
        return CheckoutState(checkout_id, lines_from_json(row.lines), row.total_cents, row.currency, order)


__all__ = ["CartService", "CartView", "Checkout", "CheckoutState", "Placed"]
