"""Buying a deal closed in chat: the checkout behind the ``checkout_url`` the merchant hands out.

A deal is bought once. Buying it redeems it the way an agent's cart does (``deal_redemptions``,
with no session), so a deal in an agent's cart cannot also be bought here, nor the other way
round, whichever comes first on whichever worker; and its order is unique per deal, so however
often the form is submitted there is one order. A deal can be bought until it expires (the same
lifetime an agent's cart honours).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection

from haggler.catalog import Catalog
from haggler.errors import Conflict, Gone, NotFound
from haggler.orders import (Buyer, Order, OrderLine, insert_order, new_order_id, order_for, place_once, redeem,
                            redemption_of)
from haggler.storage.chats import DealRow, get_deal
from haggler.storage.database import Database

#: The door orders placed at a deal's page come through (orders.door).
DOOR = "chat"


@dataclass(frozen=True, slots=True)
class DealCheckoutState:
    """Where a deal's checkout stands: ``order`` once bought here; ``bought_through`` the door of an
    order placed for it elsewhere (an agent's UCP or ACP checkout), whose buyer this page never
    shows; ``in_cart`` when an agent holds it (in its cart, or in a checkout it is completing)."""

    deal: DealRow
    line: OrderLine
    expires_at: datetime
    order: Order | None
    in_cart: bool
    bought_through: str | None = None


class DealCheckout:
    def __init__(self, catalog: Catalog, db: Database, clock: Callable[[], datetime], *, deal_ttl: timedelta) -> None:
        self.catalog = catalog
        self.db = db
        self.clock = clock
        self.deal_ttl = deal_ttl

    def _line(self, deal: DealRow) -> OrderLine:
        product = self.catalog.product(deal.product_id)
        facts = product.facts if product else None  # public fields only, by construction
        return OrderLine(deal.product_id, facts.name if facts else deal.product_id, 1, deal.price_cents,
                         deal.currency, deal.extras, deal.id, facts.list_price_cents if facts else None)

    def _state(self, conn: Connection, deal_id: str) -> DealCheckoutState:
        deal = get_deal(conn, deal_id)
        if deal is None:
            raise NotFound(f"unknown deal: {deal_id}")
        # The redemption before the order: a racing purchase commits both at once, so a redemption
        # seen here comes with its order, if it has one, in the read after it (read committed).
        redemption = redemption_of(conn, deal_id)
        order = order_for(conn, deal_id=deal_id)
        elsewhere = order.door if order is not None and order.door != DOOR else None
        # Held by an agent: in its cart, or taken by a checkout it is completing (UCP, ACP) and not yet ordered.
        in_cart = redemption is not None and (redemption.session_id is not None or order is None)
        return DealCheckoutState(deal, self._line(deal), deal.created_at + self.deal_ttl,
                                 None if elsewhere else order, in_cart, elsewhere)

    def state(self, deal_id: str) -> DealCheckoutState:
        with self.db.read() as conn:
            return self._state(conn, deal_id)

    def place(self, deal_id: str, buyer: Buyer) -> tuple[Order, bool]:
        """Buy the deal for ``buyer``; a repeat finds the first order placed here (``created=False``)
        whoever it was for. Conflict when an agent's cart holds the deal or an agent's checkout bought
        it, Gone once it has expired."""
        def place(conn: Connection) -> tuple[Order, bool]:
            state = self._state(conn, deal_id)
            if state.bought_through is not None:
                raise Conflict(f"deal {deal_id} was already bought through a shopping agent's checkout "
                               f"({state.bought_through.upper()})")
            if state.order is not None:
                return state.order, False
            if state.in_cart:
                raise Conflict(f"deal {deal_id} is in a shopping agent's cart: complete the purchase at that "
                               "cart's checkout")
            now = self.clock()
            if state.expires_at <= now:
                raise Gone(f"deal {deal_id} expired at {state.expires_at.strftime('%Y-%m-%d %H:%M UTC')}")
            redeem(conn, deal_id, None, now)
            order = Order(new_order_id(), (state.line,), state.line.line_total_cents, state.deal.currency, now,
                          buyer, deal_id=deal_id, door=DOOR)
            insert_order(conn, order)
            return order, True

        return place_once(self.db, place)
