#!/usr/bin/env python3
"""What a negotiate.v1 turn costs by its place in the chat: turn 1 against turn 30.

Each turn resumes the chat from the snapshot stored with it (``negotiate_v1/snapshot.py``), so a
long chat should cost no more per turn than a short one. In process (no HTTP: the stack around a
turn does not depend on the chat's length), on a fresh SQLite file unless ``--db`` names one,
``--chats`` chats of 30 shopper turns each are played through ``ChatService.say`` and every turn is
timed; the median of each turn's place is reported. Beside it, in the same run, the two ways of
reading a 30-turn chat back: loading its snapshot against reading and replaying its messages (what
every turn did before snapshots).

Goal (informational): turn 30 within 10% of turn 1 (``turn30_over_turn1 <= 1.10``). Ends with::

    RESULT chats=... turn1_ms=... turn10_ms=... turn30_ms=... turn30_over_turn1=...
           snapshot_load_us=... replay_us=... db=sqlite

Usage: ``.venv/bin/python benchmarks/turn_cost.py [--chats 300] [--db URL]``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone

from haggler.catalog import Product, load_catalog
from haggler.protocols.negotiate_v1.service import ChatService
from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.protocols.negotiate_v1.snapshot import ChatState
from haggler.storage import chats as repo
from haggler.storage.database import open_database

TURNS = 30
def play(service: ChatService, product: Product) -> tuple[str, list[float]]:
    """A chat of 30 offers rising from 30% of the list price by half a percent of it each time:
    below any floor and always improving, so the merchant counters, holds and concedes (its
    history grows with every turn), never closes the chat early, and does the same kind of work
    at turn 30 as at turn 1."""
    session_id = service.start(product.id, "10.9.8.7").session_id
    script = [f"would you take ${product.list_price_cents * (600 + 10 * turn) / 200_000:.2f}?" for turn in range(TURNS)]
    times = []
    for turn in range(TURNS):
        started = time.perf_counter()
        service.say(session_id, script[turn], checkout_url=str)
        times.append(time.perf_counter() - started)
    return session_id, times


def read_back(service: ChatService, session_id: str, repeat: int) -> tuple[float, float]:
    """Seconds to load the chat's snapshot, and to read and replay its messages, each once."""
    with service.db.read() as conn:
        chat = repo.get_chat(conn, session_id)
        assert chat is not None and chat.state is not None
        agent = service._agents[chat.product_id]
        started = time.perf_counter()
        for _ in range(repeat):
            ChatState.load(service.rules, chat.state)
        loaded = (time.perf_counter() - started) / repeat
        started = time.perf_counter()
        for _ in range(repeat):
            ChatState.replayed(service.rules, agent, repo.list_messages(conn, session_id))
        replayed = (time.perf_counter() - started) / repeat
    return loaded, replayed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=300, help="chats of 30 turns to time (after 20 to warm up)")
    parser.add_argument("--db", default=None, metavar="URL", help="database URL (default: a fresh SQLite file)")
    args = parser.parse_args(argv)
    if not 10 <= args.chats <= 100_000:
        parser.error("--chats must be 10-100000")
    catalog = load_catalog(None)
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with tempfile.TemporaryDirectory(prefix="haggler-turns-") as tmp:
        db = open_database(args.db or f"sqlite:///{tmp}/store.db")
        limits = StoreLimits(max_chat_starts_per_hour_per_ip=10**9, max_messages_per_chat=TURNS + 1)
        service = ChatService(catalog, db, limits, lambda: now, seed=1)
        products = catalog.products
        try:
            for i in range(20):
                play(service, products[i % len(products)])
            by_turn: list[list[float]] = [[] for _ in range(TURNS)]
            last = ""
            for i in range(args.chats):
                last, times = play(service, products[i % len(products)])
                for place, seconds in enumerate(times):
                    by_turn[place].append(seconds)
            loaded, replayed = read_back(service, last, 500)
        finally:
            db.dispose()
    medians = [statistics.median(times) * 1000 for times in by_turn]
    ratio = medians[TURNS - 1] / medians[0]
    print("median turn cost (ms) by place: " + " ".join(f"{m:.3f}" for m in medians))
    print(f"turn 1 {medians[0]:.3f} ms, turn 10 {medians[9]:.3f} ms, turn 30 {medians[TURNS - 1]:.3f} ms "
          f"(turn 30 / turn 1 = {ratio:.2f}; goal <= 1.10: {'met' if ratio <= 1.10 else 'not met'})")
    print(f"reading a 30-turn chat back: snapshot {loaded * 1e6:.1f} us, messages replayed {replayed * 1e6:.1f} us")
    dialect = "sqlite" if (args.db or "sqlite").startswith("sqlite") else "postgresql"
    print(f"RESULT chats={args.chats} turn1_ms={medians[0]:.3f} turn10_ms={medians[9]:.3f} "
          f"turn30_ms={medians[TURNS - 1]:.3f} turn30_over_turn1={ratio:.3f} snapshot_load_us={loaded * 1e6:.1f} "
          f"replay_us={replayed * 1e6:.1f} db={dialect}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
