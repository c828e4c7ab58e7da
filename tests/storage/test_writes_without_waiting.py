"""``Database.without_waiting``: a SQLite write that would wait for a lock gives up at once with
``WouldBlock`` and does nothing, so that the store can run its short writes on the event loop and
send only the busy ones to a thread; and the store's chat turns still land when the database is busy.
Writes run on one connection kept checked out from one write to the next: a failed write gives it
back (the pool rolls it back), and ``dispose`` never closes it under a write running in another thread."""

from __future__ import annotations

import sqlite3
import threading
import time

import httpx
import pytest
from sqlalchemy import text

from haggler.storage.database import Database, WouldBlock, open_database

try:
    from tests.support.databases import locked_by_another_process, write_held
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.databases import locked_by_another_process, write_held  # type: ignore[no-redef]


#: The database's lock timeout: a write that waited would take this long, so "at once" can be
#: told from waiting by a bound (WAIT / 4) that a loaded machine does not reach.
WAIT = 120


@pytest.fixture
def sqlite_db(tmp_path):
    db = open_database(f"sqlite:///{tmp_path}/w.db", timeout=WAIT)
    with db.write() as conn:
        conn.exec_driver_sql("CREATE TABLE notes (n INTEGER)")
    yield db
    db.dispose()


def _notes(db: Database) -> list[int]:
    with db.read() as conn:
        return [row[0] for row in conn.execute(text("SELECT n FROM notes ORDER BY n"))]


def test_a_write_without_waiting_commits_like_any_write(sqlite_db):
    with sqlite_db.without_waiting(), sqlite_db.write() as conn:
        conn.execute(text("INSERT INTO notes VALUES (1)"))
    assert _notes(sqlite_db) == [1]


def test_it_gives_up_at_once_while_another_write_of_this_process_is_open(sqlite_db):
    with write_held(sqlite_db, lambda conn: conn.execute(text("INSERT INTO notes VALUES (1)"))):
        started = time.monotonic()
        with pytest.raises(WouldBlock), sqlite_db.without_waiting(), sqlite_db.write() as conn:
            conn.execute(text("INSERT INTO notes VALUES (2)"))
        assert time.monotonic() - started < WAIT / 4
    assert _notes(sqlite_db) == [1]


def test_it_gives_up_at_once_while_another_process_holds_the_write_lock(sqlite_db, tmp_path):
    other = sqlite3.connect(tmp_path / "w.db", isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(WouldBlock), sqlite_db.without_waiting(), sqlite_db.write() as conn:
            conn.execute(text("INSERT INTO notes VALUES (2)"))
        assert time.monotonic() - started < WAIT / 4
        # The lock of this process was given back: a write that may wait goes through once the other ends.
        other.execute("ROLLBACK")
        with sqlite_db.write() as conn:
            conn.execute(text("INSERT INTO notes VALUES (3)"))
    finally:
        other.close()
    assert _notes(sqlite_db) == [3]


def test_an_error_inside_rolls_back_and_frees_the_lock(sqlite_db):
    with pytest.raises(RuntimeError), sqlite_db.without_waiting(), sqlite_db.write() as conn:
        conn.execute(text("INSERT INTO notes VALUES (1)"))
        raise RuntimeError("the caller failed")
    with sqlite_db.without_waiting(), sqlite_db.write() as conn:
        conn.execute(text("INSERT INTO notes VALUES (2)"))
    assert _notes(sqlite_db) == [2]


def test_postgresql_writes_never_run_without_waiting(postgres_url):
    db = Database(postgres_url)
    try:
        with pytest.raises(WouldBlock), db.without_waiting():
            pass
    finally:
        db.dispose()


def test_turns_land_while_another_process_holds_the_lock(make_store, tmp_path):
    """A turn that finds the database locked by another process goes to a thread, waits there for
    the lock, and is answered once the lock is released; meanwhile the store answers other requests."""
    db_path = tmp_path / "busy.db"
    store = make_store(db_url=f"sqlite:///{db_path}")
    started = store.start().json()
    result: dict[str, httpx.Response] = {}

    def say() -> None:
        with httpx.Client(timeout=30) as client:
            result["reply"] = client.get(started["next"].replace("{url_encoded_message}", "hello"))

    turn = threading.Thread(target=say)
    with locked_by_another_process(db_path):
        turn.start()
        time.sleep(0.5)
        assert turn.is_alive()  # waiting for the lock, in a thread
        assert store.http.get("/negotiate.json").status_code == 200  # the event loop is free
    turn.join(30)
    assert result["reply"].status_code == 200, result["reply"].text
    history = store.http.get(f"/api/store/chat/{started['session_id']}").json()["history"]
    assert [h["speaker"] for h in history] == ["merchant", "shopper", "merchant"]


# -- the connection writes are kept on (Database._kept_transaction) --------------------------------

def _driver(conn) -> object:  # type: ignore[no-untyped-def]
    return conn.connection.driver_connection


def test_writes_share_one_connection(sqlite_db):
    with sqlite_db.write() as conn:
        first = _driver(conn)
        conn.execute(text("INSERT INTO notes VALUES (1)"))
    with sqlite_db.without_waiting(), sqlite_db.write() as conn:
        assert _driver(conn) is first
        conn.execute(text("INSERT INTO notes VALUES (2)"))
    assert _notes(sqlite_db) == [1, 2]


def test_a_failed_write_rolls_back_and_the_next_one_writes(sqlite_db):
    with pytest.raises(RuntimeError), sqlite_db.write() as conn:
        conn.execute(text("INSERT INTO notes VALUES (1)"))
        raise RuntimeError("the caller failed")
    with sqlite_db.write() as conn:
        conn.execute(text("INSERT INTO notes VALUES (2)"))
    assert _notes(sqlite_db) == [2]


def test_dispose_waits_for_a_write_under_way_in_another_thread(tmp_path):
    db = open_database(f"sqlite:///{tmp_path}/d.db", timeout=30)
    with db.write() as conn:
        conn.exec_driver_sql("CREATE TABLE notes (n INTEGER)")
    inside = threading.Event()
    failures: list[BaseException] = []

    def slow_write() -> None:
        try:
            with db.write() as conn:
                conn.execute(text("INSERT INTO notes VALUES (1)"))
                inside.set()
                time.sleep(0.5)  # dispose() is called meanwhile
                conn.execute(text("INSERT INTO notes VALUES (2)"))
        except BaseException as exc:  # pragma: no cover - the failure this test is about
            failures.append(exc)

    writer = threading.Thread(target=slow_write)
    writer.start()
    assert inside.wait(10)
    db.dispose()
    writer.join(10)
    assert failures == []
    assert _notes(db) == [1, 2]
    db.dispose()
