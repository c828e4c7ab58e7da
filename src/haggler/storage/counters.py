"""Counts per key and instant in ``rate_windows``, kept in the database so that every worker
counts the same: agents.json's requests per client and minute (fixed windows, :func:`count_one`)
and every sliding-window limit (:class:`SlidingWindow`: wrong credentials, registrations,
agent messages)."""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from functools import cache

from sqlalchemy import Connection, bindparam, select
from sqlalchemy.dialects import postgresql, sqlite

from haggler.storage.database import lock_key
from haggler.storage.prepared import Prepared
from haggler.storage.schema import rate_windows

#: The longest key ``rate_windows`` holds (its ``client`` column).
MAX_KEY = 64
#: A key's events still in its window, oldest first: read by every limited request (each market
#: message), so compiled once (``storage/prepared.py``).
_IN_WINDOW = Prepared(select(rate_windows.c.window_start, rate_windows.c.count)
                      .where(rate_windows.c.client == bindparam("key"), rate_windows.c.window_start > bindparam("now"))
                      .order_by(rate_windows.c.window_start))


@cache
def _upsert(dialect: str) -> Prepared:
    # Built and compiled once per dialect, run on the driver (``storage/prepared.py``): every
    # limited request counts, and SQLAlchemy's execute cost more than the upsert itself.
    insert = (postgresql if dialect == "postgresql" else sqlite).insert(rate_windows)
    return Prepared(insert.on_conflict_do_update(
        index_elements=[rate_windows.c.client, rate_windows.c.window_start],
        set_={"count": rate_windows.c.count + 1}).returning(rate_windows.c.count))


def count_one(conn: Connection, key: str, at: datetime) -> int:
    """Add one to the count of (``key``, ``at``) and return it, in one atomic upsert: two workers
    counting at once both land."""
    row = _upsert(conn.dialect.name).first(conn, {"client": key, "window_start": at, "count": 1})
    assert row is not None  # an upsert's RETURNING gives its row
    return int(row[0])


def window_key(prefix: str, subject: str) -> str:
    """The ``rate_windows`` key of ``subject`` (a client address, an agent id) under ``prefix``:
    the two joined, or the prefix and a digest of the subject when that would not fit the column
    (an agent id may be 128 characters)."""
    key = prefix + subject
    if len(key) <= MAX_KEY:
        return key
    return prefix + hashlib.sha256(subject.encode()).hexdigest()[:MAX_KEY - len(prefix)]


class SlidingWindow:
    """At most ``limit`` events per key within any ``window``: once a key has that many, it waits
    until the oldest of them leaves the window.

    Each event is a row of ``rate_windows`` stamped with when it leaves the window rather than
    when it happened: the agents.json sweep, which forgets the rows whose time passed two minutes
    ago, then forgets an event only once it no longer counts. Judging an event and counting it is
    one transaction that holds the key (:meth:`take`), so events racing on several workers cannot
    all squeeze under the limit."""

    def __init__(self, limit: int, window: timedelta) -> None:
        self.limit = limit
        self.window = window

    def take(self, conn: Connection, key: str, now: datetime) -> int | None:
        """Count one event of ``key`` in the caller's transaction, unless the key is at its limit:
        then the seconds until it may have another (and nothing is counted)."""
        lock_key(conn, key)
        wait = self.wait(conn, key, now)
        if wait is None:
            count_one(conn, key, now + self.window)
        return wait

    def wait(self, conn: Connection, key: str, now: datetime) -> int | None:
        """The seconds until ``key`` may have another event, or None when it may now."""
        rows = _IN_WINDOW.rows(conn, {"key": key, "now": now})
        total = sum(count for _, count in rows)
        if total < self.limit:
            return None
        # The oldest events leave first: the key may go on once enough of them have left to bring
        # it under the limit (more than one when the limit was lowered since they were counted).
        over = total - self.limit
        for leaves, count in rows:
            over -= count
            if over < 0:
                break
        return max(1, int((leaves - now).total_seconds()) + 1)
