"""Database.run_on_loop (PostgreSQL): plain synchronous database code runs on the event loop, its
round trips awaited there: the loop's thread does the work, and a transaction waiting on a lock
another holds leaves the loop free for everything else."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime, timezone

import pytest
from sqlalchemy import insert, select, text
from sqlalchemy.util import await_

from haggler.storage import chats as repo
from haggler.storage.database import open_database
from haggler.storage.schema import chats

AT = datetime(2026, 11, 26, 12, 0, tzinfo=timezone.utc)


@pytest.mark.postgres
def test_a_transaction_runs_on_the_loops_thread_and_a_lock_wait_does_not_block_the_loop(postgres_url):
    db = open_database(postgres_url)
    with db.write() as conn:
        repo.create_chat(conn, chat_id="locked", product_id="p", seed=1, client_ip="10.0.0.1", now=AT)

    async def scenario() -> None:
        loop_thread = threading.get_ident()
        holding, release = asyncio.Event(), asyncio.Event()
        order: list[str] = []

        def hold_row() -> int:
            with db.write() as conn:
                repo.get_chat(conn, "locked", for_update=True)
                order.append("locked")
                # Back on the loop while this transaction holds the row: the other turn must wait.
                holding.set()
                await_(release.wait())
                conn.execute(text("UPDATE chats SET shopper_messages = 7 WHERE id = 'locked'"))
            return threading.get_ident()

        def wait_for_row() -> int:
            with db.write() as conn:
                chat = repo.get_chat(conn, "locked", for_update=True)
                order.append(f"second saw {chat.shopper_messages if chat else None}")
            return threading.get_ident()

        first = asyncio.ensure_future(db.run_on_loop(hold_row))
        await holding.wait()
        second = asyncio.ensure_future(db.run_on_loop(wait_for_row))
        ticks = 0
        for _ in range(20):  # the loop keeps turning while the second transaction waits on the lock
            await asyncio.sleep(0.01)
            ticks += 1
        assert not second.done() and ticks == 20
        release.set()
        threads = await asyncio.gather(first, second)
        assert threads == [loop_thread, loop_thread]
        assert order == ["locked", "second saw 7"]
        await db.dispose_on_loop()

    try:
        asyncio.run(scenario())
    finally:
        db.dispose()


@pytest.mark.postgres
def test_a_failure_on_the_loop_rolls_back_and_the_connection_serves_the_next_call(postgres_url):
    db = open_database(postgres_url)

    def add_then_fail() -> None:
        with db.write() as conn:
            conn.execute(insert(chats), {"id": "rolled_back", "product_id": "p", "seed": 1, "client_ip": "x",
                                         "status": "open", "outcome": None, "shopper_messages": 0,
                                         "created_at": AT, "last_activity_at": AT, "closed_at": None, "state": None})
            raise ValueError("the turn went wrong")

    def ids() -> set[str]:
        with db.read() as conn:
            return {row.id for row in conn.execute(select(chats.c.id))}

    async def scenario() -> set[str]:
        with pytest.raises(ValueError):
            await db.run_on_loop(add_then_fail)
        found = await db.run_on_loop(ids)
        await db.dispose_on_loop()
        return found

    try:
        assert "rolled_back" not in asyncio.run(scenario())
    finally:
        db.dispose()


def test_sqlite_has_no_loop_path(tmp_path):
    db = open_database(f"sqlite:///{tmp_path}/s.db")
    try:
        assert not db.runs_on_loop
        with pytest.raises(RuntimeError):
            asyncio.run(db.run_on_loop(lambda: None))
    finally:
        db.dispose()
