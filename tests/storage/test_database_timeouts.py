"""The database's trouble told from the store's bugs (``storage/outages.py``), on real databases,
and the in-process write lock waited for no longer than the timeout."""

from __future__ import annotations

import sqlite3
import threading
import time

import pytest
from sqlalchemy import Column, Integer, MetaData, Table, text
from sqlalchemy.exc import SQLAlchemyError

from haggler.server.threaded import free_port
from haggler.storage.database import Database, DatabaseError
from haggler.storage.outages import WriteLockTimeout, is_outage

try:
    from tests.support.databases import write_held
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.databases import write_held  # type: ignore[no-redef]

_things = Table("things", MetaData(), Column("id", Integer, primary_key=True))


def raised(db: Database, statement: str) -> SQLAlchemyError:
    with pytest.raises(SQLAlchemyError) as caught:
        with db.write() as conn:
            conn.execute(text(statement))
    return caught.value


def test_a_bug_is_not_an_outage(db_url: str) -> None:
    """A duplicate key and a missing table are the store's mistakes: 500, not 503 (SQLite reports
    the missing table as an OperationalError, like its real outages)."""
    db = Database(db_url)
    try:
        with db.write() as conn:
            _things.create(conn)
            conn.execute(_things.insert().values(id=1))
        assert not is_outage(raised(db, "INSERT INTO things (id) VALUES (1)"))
        assert not is_outage(raised(db, "SELECT * FROM no_such_table"))
    finally:
        db.dispose()


@pytest.mark.postgres
def test_a_postgres_server_that_is_not_there_is_an_outage_answered_within_the_timeout() -> None:
    db = Database(f"postgresql://postgres@127.0.0.1:{free_port()}/nothing", timeout=1)
    try:
        started = time.monotonic()
        with pytest.raises(SQLAlchemyError) as caught:
            with db.read() as conn:
                conn.execute(text("SELECT 1"))
        assert is_outage(caught.value)
        assert time.monotonic() - started < 30  # a safety bound, not a speed goal: slack for a loaded machine
    finally:
        db.dispose()


def test_a_write_waiting_on_the_in_process_lock_gives_up_at_the_timeout(tmp_path) -> None:  # type: ignore[no-untyped-def]
    db = Database(f"sqlite:///{tmp_path}/locks.db", timeout=0.5)
    with write_held(db):
        started = time.monotonic()
        with pytest.raises(WriteLockTimeout) as caught:
            with db.write():
                pass
        # Not before the timeout; after it, only a loaded machine's delay (write_held never lets go).
        assert 0.45 <= time.monotonic() - started < 30
        assert is_outage(caught.value)
    with db.write() as conn:  # the lock was released by its holder, and not taken by the refused write
        conn.execute(text("SELECT 1"))
    db.dispose()


#: The shared bound, and how much later the second write starts: wide enough apart (one bound vs
#: 7 s for both waits in full) that a loaded machine's delays cannot blur them.
BOUND, LATER = 4.0, 1.0


def test_the_write_lock_and_sqlites_busy_wait_share_one_bound(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Another process holds SQLite's write lock throughout. The first write waits for it in
    SQLite's busy handler, holding the in-process lock; the second waits for that lock first,
    then only for what is left of the same bound — not the bound twice over."""
    path = tmp_path / "shared.db"
    db = Database(f"sqlite:///{path}", timeout=BOUND)
    with db.write() as conn:
        conn.execute(text("SELECT 1"))
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    failures: list[BaseException] = []

    def write() -> None:
        try:
            with db.write() as conn:
                conn.execute(text("SELECT 1"))
        except SQLAlchemyError as exc:
            failures.append(exc)

    first = threading.Thread(target=write)
    try:
        first.start()
        time.sleep(LATER)  # the first write waits by now (were it later, the two swap: still one bound)
        started = time.monotonic()
        write()
        waited = time.monotonic() - started
        first.join(60)
    finally:
        other.rollback()
        other.close()
    assert len(failures) == 2 and all(is_outage(exc) for exc in failures), failures
    # The bound in all; each wait in full would be 2 * BOUND - LATER. Half the gap is the slack.
    assert BOUND - 0.1 <= waited < BOUND + (BOUND - LATER) / 2, waited
    with db.write() as conn:  # once the other process lets go, writes go through at once
        conn.execute(text("SELECT 1"))
    db.dispose()


def test_a_timeout_must_be_positive(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(DatabaseError, match="positive"):
        Database(f"sqlite:///{tmp_path}/x.db", timeout=0)
