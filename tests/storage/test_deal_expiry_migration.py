"""Migration 0013 on a market that already has deals: each gets an expiry a day after it opened
(the default), so a deal left pending before the upgrade does not wait forever either — SQLite
(whose naive timestamps the migration reads as UTC) and PostgreSQL."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import select, text

from haggler.storage.schema import market_deals

try:
    from tests.support.databases import database_at, upgrade_to
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.databases import database_at, upgrade_to  # type: ignore[no-redef]

OPENED = datetime(2026, 11, 1, 12, 30, tzinfo=timezone.utc)


def test_deals_opened_before_0013_expire_a_day_after_they_opened(db_url):
    with database_at(db_url, "0011") as db:
        with db.write() as conn:
            for agent in ("b", "s"):
                conn.execute(text("INSERT INTO market_agents (id, public_key, owner_public_key, token_hash, created_at) "
                                  "VALUES (:id, '0x', '0x', :id, :t)"), {"id": agent, "t": OPENED})
            conn.execute(text(
                "INSERT INTO market_deals (id, request_id, listing_id, buyer_id, seller_id, protocol, price_cents, "
                "currency, deal, approvals, needs_approval, status, created_at, updated_at) VALUES ('dl_old', 'r', "
                "'l', 'b', 's', 'instant_match', 100, 'EUR', '{}', '{}', '[]', 'awaiting_signatures', :t, :t)"),
                {"t": OPENED})
        upgrade_to(db, "head")
        with db.read() as conn:
            assert conn.execute(select(market_deals.c.expires_at)).scalar_one() == OPENED + timedelta(days=1)
