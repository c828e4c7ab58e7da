"""Which worker runs the background jobs: one leader among all of a store's processes.

The sweeps (idle chats, agents.json sessions and rate windows, exchange offer expiry, matching
deadlines) and the market's scheduled clearing change rows every worker shares. Run by each of N
workers they would do the same work N times and queue on the same row locks, so one worker leads
and the others stand by:

- On PostgreSQL the leader holds a session-level advisory lock (``pg_try_advisory_lock``) on a
  connection of its own, outside the pool. Every worker asks for the lock before each round and only
  the holder gets it. When the leader's process dies its connection closes, PostgreSQL releases the
  lock, and the next worker to ask leads: a survivor takes over within one interval. The leader
  checks its connection before each round; when it broke (the server restarted, the network
  dropped) the lock went with it, so the worker stops believing it leads and asks again like the
  others. The connection is named ``haggler worker <pid>`` (``application_name``), so an operator
  can see in ``pg_stat_activity`` and ``pg_locks`` which process leads.
- On SQLite a store runs in one process (``haggler serve`` refuses several workers on it), which
  always leads.

Two workers believe they lead at once only between a leader's connection breaking and its next
round. Each job acts in transactions on what is still due when it runs (a request may apply the same
deadline first), so such an overlap repeats work, not effects.
"""

from __future__ import annotations

import logging
import os
import threading
from abc import ABC, abstractmethod

from sqlalchemy import Connection, create_engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from haggler.storage.database import Database

log = logging.getLogger("haggler")

#: The advisory lock the leader holds (``Database.migrate`` takes 7240315 while it migrates).
LEADER_LOCK_KEY = 7240316
#: libpq settings of the leader's connection: a dead server or network is noticed in about
#: half a minute instead of the operating system's two hours.
_CONNECT_ARGS = {"connect_timeout": 10, "keepalives": 1, "keepalives_idle": 10, "keepalives_interval": 5,
                 "keepalives_count": 3}


class Leadership(ABC):
    """Whether this process runs the store-wide background jobs; ``leads()`` asks again each round."""

    @abstractmethod
    def leads(self) -> bool:
        """Ask whether this process leads now (taking the lead when it is free)."""

    @property
    @abstractmethod
    def leading(self) -> bool:
        """What the last ``leads()`` found (for the metric), without asking again."""

    def close(self) -> None:
        """Give up the lead (a shutting-down worker hands it to the next to ask)."""


class SoleProcess(Leadership):
    """The only process of its store (SQLite): it always leads."""

    def leads(self) -> bool:
        return True

    @property
    def leading(self) -> bool:
        return True


class AdvisoryLock(Leadership):
    """Leads while it holds a PostgreSQL session-level advisory lock on a connection of its own."""

    def __init__(self, url: str, key: int = LEADER_LOCK_KEY) -> None:
        self.key = key
        self._engine = create_engine(url, poolclass=NullPool, connect_args={
            **_CONNECT_ARGS, "application_name": f"haggler worker {os.getpid()}"})
        self._conn: Connection | None = None
        self._leading = False
        # The sweep and the market's clearing ask from their own threads.
        self._lock = threading.Lock()

    @property
    def leading(self) -> bool:
        return self._leading

    def leads(self) -> bool:
        with self._lock:
            try:
                if self._conn is None:
                    self._conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
                if self._leading:
                    self._conn.exec_driver_sql("SELECT 1")  # the session, and so its lock, is still there
                else:
                    self._leading = bool(self._conn.exec_driver_sql(
                        "SELECT pg_try_advisory_lock(%s)", (self.key,)).scalar())
                    if self._leading:
                        log.info("worker %d runs the background jobs", os.getpid())
            except SQLAlchemyError as exc:
                if self._leading:
                    log.warning("worker %d lost the lead of the background jobs: %s", os.getpid(), exc)
                self._drop()
            return self._leading

    def close(self) -> None:
        with self._lock:
            if self._leading and self._conn is not None:
                # Released here, not left to the session's end: PostgreSQL frees a closed
                # session's locks only once its backend has exited, a moment later, and the
                # next worker to ask must find the lead free at once.
                try:
                    self._conn.exec_driver_sql("SELECT pg_advisory_unlock(%s)", (self.key,))
                except SQLAlchemyError:
                    pass  # already broken: PostgreSQL released the lock with the session
            self._drop()
            self._engine.dispose()

    def _drop(self) -> None:
        self._leading = False
        conn, self._conn = self._conn, None
        if conn is not None:
            try:
                conn.close()
            except SQLAlchemyError:
                pass  # already broken: PostgreSQL released the lock with the session


def leadership_for(db: Database) -> Leadership:
    """How ``db``'s store picks the process that runs its background jobs."""
    return SoleProcess() if db.is_sqlite else AdvisoryLock(db.url)
