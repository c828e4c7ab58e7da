"""Migration 0009 on a store with chats under way: a chat stored before it has no snapshot, and
its next turn replays its messages, answers, and stores one — SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import text

from haggler.catalog import load_catalog
from haggler.protocols.negotiate_v1.service import ChatService
from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.storage import chats as repo
from haggler.storage.database import Database

try:
    from tests.support.databases import upgrade_to
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.databases import upgrade_to  # type: ignore[no-redef]

CATALOG = load_catalog(None)
STARTED = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)


def test_a_chat_started_before_0009_continues_after_it(db_url):
    product = CATALOG.products[0]
    db = Database(db_url)
    try:
        upgrade_to(db, "0008")
        with db.write() as conn:
            conn.execute(text("INSERT INTO chats (id, product_id, seed, client_ip, status, shopper_messages, "
                              "created_at, last_activity_at) VALUES ('old_chat_0000000001', :p, 5, '10.0.0.1', "
                              "'open', 0, :t, :t)"), {"p": product.id, "t": STARTED})
            conn.execute(text("INSERT INTO messages (chat_id, seq, speaker, text, action, price_cents, currency, "
                              "extras, final, created_at) VALUES ('old_chat_0000000001', 0, 'merchant', 'Hello!', "
                              "'offer', :price, 'USD', '[]', false, :t)"), {"price": product.list_price_cents,
                                                                          "t": STARTED})
        upgrade_to(db, "head")
        service = ChatService(CATALOG, db, StoreLimits(), lambda: STARTED, seed=5)
        reply = service.say("old_chat_0000000001", "would you take $10?", checkout_url=str)
        assert reply.offer is not None and reply.offer.price_cents <= product.list_price_cents
        with db.read() as conn:
            chat = repo.get_chat(conn, "old_chat_0000000001")
            assert chat is not None and chat.state is not None and chat.shopper_messages == 1
            assert [m.seq for m in repo.list_messages(conn, chat.id)] == [0, 1, 2]
    finally:
        db.dispose()
