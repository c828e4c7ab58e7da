"""Migration 0011 on a store with messages: on SQLite the table becomes WITHOUT ROWID (one B-tree
a turn writes, not two) with every message kept, and its downgrade restores the rowid table with
them; on PostgreSQL it changes nothing."""

from __future__ import annotations

from datetime import datetime, timezone

from alembic import command
from sqlalchemy import text

from haggler.storage.database import Database, alembic_config

try:
    from tests.support.databases import database_at, upgrade_to
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.databases import database_at, upgrade_to  # type: ignore[no-redef]

AT = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


def _messages(db: Database) -> list[tuple[object, ...]]:
    with db.read() as conn:
        return [tuple(r) for r in conn.execute(text("SELECT chat_id, seq, speaker, text, price_cents, final "
                                                    "FROM messages ORDER BY chat_id, seq"))]


def _without_rowid(db: Database) -> bool:
    with db.read() as conn:
        sql = conn.execute(text("SELECT sql FROM sqlite_master WHERE name = 'messages'")).scalar_one()
    return "WITHOUT ROWID" in sql.upper()


def test_messages_survive_0011_both_ways(db_url):
    with database_at(db_url, "0010") as db:
        with db.write() as conn:
            for chat in ("chat_a", "chat_b"):
                conn.execute(text("INSERT INTO chats (id, product_id, seed, client_ip, status, shopper_messages, "
                                  "created_at, last_activity_at) VALUES (:id, 'p', 1, '10.0.0.1', 'open', 1, :t, :t)"),
                             {"id": chat, "t": AT})
                for seq in range(3):
                    conn.execute(text("INSERT INTO messages (chat_id, seq, speaker, text, action, price_cents, "
                                      "currency, extras, final, created_at) VALUES (:c, :s, 'shopper', :x, 'offer', "
                                      ":p, 'USD', '[]', :f, :t)"),
                                 {"c": chat, "s": seq, "x": f"offer {seq} — ✓", "p": 1000 + seq, "f": seq == 2, "t": AT})
        before = _messages(db)
        assert len(before) == 6
        upgrade_to(db, "head")
        assert _messages(db) == before
        if db.is_sqlite:
            assert _without_rowid(db)
        with db.write() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.downgrade(config, "0010")
        assert _messages(db) == before
        if db.is_sqlite:
            assert not _without_rowid(db)
