"""Counts per key and instant in ``rate_windows``, kept in the database so that every worker
counts the same: agents.json's requests per client and minute, the dashboard's failed logins."""

from __future__ import annotations

from datetime import datetime
from functools import cache

from sqlalchemy import Connection
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql.dml import ReturningInsert

from haggler.storage.schema import rate_windows


@cache
def _upsert(dialect: str) -> ReturningInsert[tuple[int]]:
    # Built once per dialect: compiling it again on every request would show on the request path.
    insert = (postgresql if dialect == "postgresql" else sqlite).insert(rate_windows)
    return insert.on_conflict_do_update(
        index_elements=[rate_windows.c.client, rate_windows.c.window_start],
        set_={"count": rate_windows.c.count + 1}).returning(rate_windows.c.count)


def count_one(conn: Connection, key: str, at: datetime) -> int:
    """Add one to the count of (``key``, ``at``) and return it, in one atomic upsert: two workers
    counting at once both land."""
    return conn.execute(_upsert(conn.dialect.name), {"client": key, "window_start": at, "count": 1}).scalar_one()
