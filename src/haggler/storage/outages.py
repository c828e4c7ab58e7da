"""Which database failures are the database's trouble, not the store's bug.

The error edge answers these 503 with ``Retry-After`` (the request may well succeed in a moment)
and everything else unexpected 500 (a bug: retrying the same request will not help). The line is
drawn by what the driver says happened, not by SQLAlchemy's class alone: SQLite reports a missing
table as an ``OperationalError`` too, and that is a bug.

- unreachable: the connection was refused, reset or lost (PostgreSQL down or restarting), the
  server is shutting down or starting up, the pool had no connection to hand out in time;
- too slow: a lock was not granted, or a statement not finished, within ``--db-timeout``
  (PostgreSQL's ``lock_timeout``/``statement_timeout``, SQLite's busy timeout, the in-process
  write lock), or two transactions deadlocked or failed to serialize;
- full: SQLite's "database or disk is full", PostgreSQL's insufficient resources (disk full, out
  of memory, too many connections), an I/O error.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import exc as sa

#: SQLite primary result codes of a database in trouble: BUSY, LOCKED, IOERR, FULL, CANTOPEN, PROTOCOL.
_SQLITE_TROUBLE = frozenset({5, 6, 10, 13, 14, 15})
#: PostgreSQL SQLSTATE classes of a database in trouble: connection exception, insufficient
#: resources, operator intervention (shutdown, query cancelled by statement_timeout), system error.
_PG_TROUBLE_CLASSES = frozenset({"08", "53", "57", "58"})
#: Single PostgreSQL SQLSTATEs: lock_not_available (lock_timeout), serialization failure, deadlock.
_PG_TROUBLE_STATES = frozenset({"55P03", "40001", "40P01"})


class WriteLockTimeout(sa.TimeoutError):
    """The in-process SQLite write lock was not free within the database timeout."""


def is_outage(exc: BaseException) -> bool:
    """Whether ``exc`` says the database is unreachable, too slow or full (answer 503), rather
    than that the store did something wrong (answer 500)."""
    if isinstance(exc, (sa.TimeoutError, sa.DisconnectionError)):  # pool checkout, the write lock
        return True
    if not isinstance(exc, sa.DBAPIError) or isinstance(exc, (sa.IntegrityError, sa.ProgrammingError)):
        return False
    if exc.connection_invalidated:
        return True
    original = exc.orig
    if isinstance(original, sqlite3.Error):
        return getattr(original, "sqlite_errorcode", 0) & 0xFF in _SQLITE_TROUBLE
    state = getattr(original, "sqlstate", None)
    if state is None:  # psycopg: no answer from a server at all (refused, reset, closed)
        return isinstance(exc, (sa.OperationalError, sa.InterfaceError))
    return state[:2] in _PG_TROUBLE_CLASSES or state in _PG_TROUBLE_STATES


__all__ = ["WriteLockTimeout", "is_outage"]
