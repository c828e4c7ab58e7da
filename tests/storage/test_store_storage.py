"""Storage on both databases: migrations, serialized turns, durable deals, crash recovery."""

from __future__ import annotations

import sqlite3
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from haggler.storage.chats import list_deals
from haggler.storage.database import Database, DatabaseError, normalize_url, open_database
from haggler.storage.schema import metadata

try:
    from tests.support.servers import ProcessServer
except ImportError:  # pragma: no cover
    from support.servers import ProcessServer  # type: ignore[no-redef]


def test_migrations_create_exactly_the_schema(db_url):
    db = open_database(db_url)
    try:
        with db.read() as conn:
            assert compare_metadata(MigrationContext.configure(conn), metadata) == []
        db.migrate()  # idempotent
    finally:
        db.dispose()


def test_sqlite_runs_in_wal_mode(tmp_path):
    db = open_database(f"sqlite:///{tmp_path}/w.db")
    db.dispose()
    with sqlite3.connect(tmp_path / "w.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_bad_database_urls_fail_clearly(tmp_path):
    with pytest.raises(DatabaseError, match="unsupported database"):
        Database("mysql://x@localhost/db")
    with pytest.raises(DatabaseError, match="not a database URL"):
        Database("::::")
    with pytest.raises(DatabaseError, match="cannot open or migrate"):
        open_database("postgresql://nobody@127.0.0.1:1/nothing")


def test_normalize_url():
    assert normalize_url("postgres://u@h/d") == "postgresql+psycopg://u@h/d"
    assert normalize_url("postgresql://u@h/d") == "postgresql+psycopg://u@h/d"
    assert normalize_url("sqlite:///x.db") == "sqlite:///x.db"


def test_twenty_concurrent_turns_on_one_chat_are_serialized(make_store, db_url):
    store = make_store(db_url=db_url)
    started = store.start().json()
    sid, next_url = started["session_id"], started["next"]
    messages = [f"question {i}: what's the warranty on this?" for i in range(20)]

    def say(text: str) -> dict:
        with httpx.Client(timeout=60) as client:
            response = client.get(next_url.replace("{url_encoded_message}", httpx.QueryParams({"m": text})["m"]))
            assert response.status_code == 200, response.text
            return response.json()

    with ThreadPoolExecutor(max_workers=20) as pool:
        replies = dict(zip(messages, pool.map(say, messages)))
    history = store.http.get(f"/api/store/chat/{sid}").json()["history"]
    assert len(history) == 41
    assert [h["speaker"] for h in history] == ["merchant"] + ["shopper", "merchant"] * 20
    shopper_turns = [h["message"] for h in history[1::2]]
    assert sorted(shopper_turns) == sorted(messages)  # none lost, none duplicated
    for i in range(1, 41, 2):  # each reply directly follows the turn it answered
        assert history[i + 1]["message"] == replies[history[i]["message"]]["message"]


def test_deals_are_recorded_durably(make_store, db_url):
    store = make_store(db_url=db_url)
    product = store.catalog.products[0]
    started = store.start(product.id).json()
    body = store.say(started["next"], "deal").json()
    db = open_database(db_url)
    try:
        with db.read() as conn:
            deals = list_deals(conn)
    finally:
        db.dispose()
    assert len(deals) == 1
    deal = deals[0]
    assert deal.id == body["deal"]["id"]
    assert deal.product_id == product.id
    assert deal.price_cents == product.list_price_cents
    assert deal.currency == "USD"
    assert deal.chat_id == started["session_id"]
    assert deal.extras == ()


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_sigkill_mid_conversation_loses_no_acknowledged_turn(tmp_path: Path, request, backend):
    db_url = f"sqlite:///{tmp_path}/crash.db" if backend == "sqlite" else request.getfixturevalue("postgres_url")
    args = ["--db", db_url, "--seed", "7"]
    server = ProcessServer(*args, cwd=tmp_path).start()
    try:
        body = httpx.post(f"{server.base}/api/store/chat/start", json={"product_id": "aerion-v12-cordless"}).json()
        sid = body["session_id"]
        acknowledged = [("merchant", body["greeting"])]
        for text in ("hi, is it new?", "what's the warranty?", "how about $450?", "can you do $500?"):
            url = body["next"].replace("{url_encoded_message}", httpx.QueryParams({"m": text})["m"])
            body = httpx.get(url).json()
            acknowledged += [("shopper", text), ("merchant", body["message"])]
        next_url = body["next"]
        server.kill()
    finally:
        server.stop()
    restarted = ProcessServer(*args, cwd=tmp_path, port=server.port).start()
    try:
        history = httpx.get(f"{restarted.base}/api/store/chat/{sid}").json()["history"]
        assert [(h["speaker"], h["message"]) for h in history] == acknowledged
        body = httpx.get(next_url.replace("{url_encoded_message}", "deal")).json()
        assert body["closed"] is True and body["deal"]["price"] >= 500
        assert len(httpx.get(f"{restarted.base}/api/store/chat/{sid}").json()["history"]) == len(acknowledged) + 2
    finally:
        restarted.stop()


def test_postgresql_without_its_driver_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    with pytest.raises(DatabaseError, match=r"haggler\[postgres\]"):
        Database("postgresql://someone@127.0.0.1/somewhere")


def test_a_nested_write_joins_the_open_transaction_and_rolls_back_with_it(db_url):
    """A write() inside a write() of the same context is the same transaction, so a service's
    own write and its caller's audit record commit together or not at all; other threads still
    get transactions of their own."""
    from sqlalchemy import text

    db = open_database(db_url)
    with db.write() as conn:
        conn.execute(text("CREATE TABLE probe (v INTEGER)"))
    with pytest.raises(RuntimeError), db.write() as outer:
        with db.write() as inner:
            assert inner is outer
            inner.execute(text("INSERT INTO probe VALUES (1)"))
        raise RuntimeError("the caller fails after the service's write")
    with db.write() as outer:
        outer.execute(text("INSERT INTO probe VALUES (2)"))
        with ThreadPoolExecutor(1) as pool:  # another thread: not joined, waits its turn
            other = pool.submit(lambda: db._open_write.get())
            assert other.result() is None
    with db.read() as conn:
        assert [r[0] for r in conn.execute(text("SELECT v FROM probe"))] == [2]


def test_a_store_secret_is_drawn_once_and_shared_by_every_worker(db_url):
    """Eight workers asking at once all get the secret the first insert kept, and so does a
    worker that starts later; another name is another secret."""
    from haggler.storage.secrets import store_secret

    workers = [open_database(db_url) for _ in range(8)]
    try:
        with ThreadPoolExecutor(len(workers)) as pool:
            drawn = list(pool.map(lambda db: store_secret(db, "floor_margin"), workers))
        assert len(set(drawn)) == 1 and len(drawn[0]) == 32
        later = open_database(db_url)
        try:
            assert store_secret(later, "floor_margin") == drawn[0]
            assert store_secret(later, "another") != drawn[0]
        finally:
            later.dispose()
    finally:
        for db in workers:
            db.dispose()
