"""Migration 0015 on a store that already has orders: a chat deal's order and an agents.json cart's
order get their door, keep every value, and the way back drops only what 0015 added (SQLite and
PostgreSQL)."""

from __future__ import annotations

from datetime import datetime, timezone

from alembic import command
from sqlalchemy import text

from haggler.orders import list_orders
from haggler.storage.database import alembic_config

try:
    from tests.support.databases import database_at, upgrade_to
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.databases import database_at, upgrade_to  # type: ignore[no-redef]

AT = datetime(2026, 11, 1, 12, 30, tzinfo=timezone.utc)
LINES = ('[{"item_id": "p", "name": "Thing", "quantity": 1, "unit_price_cents": 1000, "currency": "USD", '
         '"extras": [], "deal_id": null, "list_price_cents": 1000}]')


def test_orders_before_0015_get_their_door_and_the_way_back_keeps_them(db_url):
    with database_at(db_url, "0014") as db:
        with db.write() as conn:
            conn.execute(text("INSERT INTO chats (id, product_id, seed, client_ip, status, shopper_messages, "
                              "created_at, last_activity_at) VALUES ('c1', 'p', 1, '10.0.0.1', 'closed', 1, :t, :t)"),
                         {"t": AT})
            conn.execute(text("INSERT INTO deals (id, chat_id, product_id, price_cents, currency, extras, created_at) "
                              "VALUES ('d1', 'c1', 'p', 1000, 'USD', '[]', :t)"), {"t": AT})
            conn.execute(text("INSERT INTO agent_sessions (id, token_hash, client, created_at, expires_at) "
                              "VALUES ('s1', 'h', '127.0.0.1', :t, :t)"), {"t": AT})
            conn.execute(text("INSERT INTO checkouts (id, session_id, lines, total_cents, currency, created_at) "
                              "VALUES ('co1', 's1', :lines, 1000, 'USD', :t)"), {"lines": LINES, "t": AT})
            for order, key in (("ord_chat", "deal_id"), ("ord_cart", "checkout_id")):
                conn.execute(text(f"INSERT INTO orders (id, {key}, lines, total_cents, currency, placed_at) "
                                  f"VALUES (:id, :key, :lines, 1000, 'USD', :t)"),
                             {"id": order, "key": "d1" if key == "deal_id" else "co1", "lines": LINES, "t": AT})
        upgrade_to(db, "head")
        with db.read() as conn:
            found = {o.id: o for o in list_orders(conn)}
        assert (found["ord_chat"].door, found["ord_chat"].deal_id) == ("chat", "d1")
        assert (found["ord_cart"].door, found["ord_cart"].checkout_id) == ("cart", "co1")
        assert found["ord_cart"].payment_handler is None and found["ord_cart"].details is None
        with db.write() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.downgrade(config, "0014")
        with db.read() as conn:
            assert conn.execute(text("SELECT count(*) FROM orders")).scalar_one() == 2
