"""Migration 0008 on a store that already has orders: the cart orders placed before it keep every
value (with no buyer, as they had none), and the new columns and keys work — SQLite (whose tables
Alembic rebuilds to change a column) and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from sqlalchemy import insert, text
from sqlalchemy.exc import IntegrityError

from haggler.orders import list_orders
from haggler.storage.database import Database

try:
    from tests.support.databases import upgrade_to
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.databases import upgrade_to  # type: ignore[no-redef]
from haggler.storage.schema import orders

PLACED = datetime(2026, 11, 1, 12, 30, tzinfo=timezone.utc)
LINES = ('[{"item_id": "p", "name": "Thing", "quantity": 2, "unit_price_cents": 1000, "currency": "USD", '
         '"extras": [], "deal_id": null, "list_price_cents": 1000}]')


def test_orders_placed_before_0008_survive_it(db_url):
    db = Database(db_url)
    try:
        upgrade_to(db, "0007")
        with db.write() as conn:
            conn.execute(text("INSERT INTO agent_sessions (id, token_hash, client, created_at, expires_at) "
                              "VALUES ('s1', 'h', '127.0.0.1', :t, :t)"), {"t": PLACED})
            conn.execute(text("INSERT INTO checkouts (id, session_id, lines, total_cents, currency, created_at) "
                              "VALUES ('co1', 's1', :lines, 2000, 'USD', :t)"), {"lines": LINES, "t": PLACED})
            conn.execute(text("INSERT INTO orders (id, checkout_id, lines, total_cents, currency, placed_at) "
                              "VALUES ('ord_old', 'co1', :lines, 2000, 'USD', :t)"), {"lines": LINES, "t": PLACED})
        upgrade_to(db, "head")
        with db.read() as conn:
            [order] = list_orders(conn)
        assert (order.id, order.checkout_id, order.deal_id, order.total_cents, order.currency) == \
            ("ord_old", "co1", None, 2000, "USD")
        assert order.buyer is None and order.door == "cart" and order.placed_at == PLACED
        assert order.lines[0].quantity == 2 and order.lines[0].name == "Thing"
        with pytest.raises(IntegrityError), db.write() as conn:  # the kept unique key on checkout_id
            conn.execute(insert(orders).values(id="ord_twin", checkout_id="co1", door="cart", lines=LINES,
                                               total_cents=1, currency="USD", placed_at=PLACED))
    finally:
        db.dispose()
