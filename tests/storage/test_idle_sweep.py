"""storage/chats.close_idle_chats: exactly the open chats idle since the cutoff close, whatever
their age (an old chat still talking stays open), found through the open chats' index by start
(schema.py: no index on the last activity, which every turn would rewrite)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import select, text

from haggler.storage import chats as repo
from haggler.storage.database import open_database
from haggler.storage.schema import chats

T0 = datetime(2026, 11, 26, 9, 0, tzinfo=timezone.utc)


def test_exactly_the_chats_idle_since_the_cutoff_close(db_url):
    db = open_database(db_url)
    cutoff = T0 + timedelta(hours=2)
    # (id, started, last active): started long before the cutoff or just before it; idle or not.
    cases = {"old_idle": (T0, T0 + timedelta(minutes=5)),
             "old_still_talking": (T0, cutoff + timedelta(seconds=1)),
             "idle_exactly_at_cutoff": (cutoff - timedelta(minutes=1), cutoff),
             "new": (cutoff + timedelta(minutes=1), cutoff + timedelta(minutes=2)),
             "closed_already": (T0, T0)}
    try:
        with db.write() as conn:
            for chat_id, (started, active) in cases.items():
                repo.create_chat(conn, chat_id=chat_id, product_id="p", seed=1, client_ip="10.0.0.1", now=started)
                repo.update_chat(conn, chat_id, now=active, shopper_messages=1,
                                 outcome="rejected" if chat_id == "closed_already" else None, state="{}")
            closed = repo.close_idle_chats(conn, idle_before=cutoff, now=cutoff + timedelta(hours=1))
        assert closed == 2
        with db.read() as conn:
            rows = {r.id: (r.status, r.outcome) for r in conn.execute(select(chats.c.id, chats.c.status, chats.c.outcome))}
        assert rows == {"old_idle": ("closed", "expired"), "old_still_talking": ("open", None),
                        "idle_exactly_at_cutoff": ("closed", "expired"), "new": ("open", None),
                        "closed_already": ("closed", "rejected")}
    finally:
        db.dispose()


def test_sqlite_finds_the_sweeps_candidates_through_the_open_chats_index(tmp_path):
    db = open_database(f"sqlite:///{tmp_path}/s.db")
    try:
        with db.read() as conn:
            indexes = {row[1] for row in conn.exec_driver_sql("PRAGMA index_list(chats)")}
            plan = " ".join(str(row[-1]) for row in conn.execute(text(
                "EXPLAIN QUERY PLAN UPDATE chats SET status = 'closed' WHERE status = 'open' "
                "AND created_at <= :cutoff AND last_activity_at <= :cutoff"), {"cutoff": "2026-11-26 11:00:00"}))
        assert "ix_chats_open_created" in indexes
        assert not any("activity" in name for name in indexes)  # nothing a turn's update must rewrite
        assert "USING INDEX ix_chats_open_created" in plan
    finally:
        db.dispose()
