"""A database in trouble is answered 503 with Retry-After — never a 500, never a hang — and the
store carries on once the trouble is over: PostgreSQL restarted under a running server, a lock
held by another session past ``--db-timeout``, SQLite's volume full. Real servers, real
databases, real HTTP on loopback; every wait bounded."""

from __future__ import annotations

import errno
import os
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from haggler.protocols.negotiate_v1.settings import StoreLimits
from tests.conftest import ci_requires
from tests.support.postgres import PostgresCluster
from tests.support.servers import ProcessServer

#: The --db-timeout of these stores, seconds.
BOUND = 1.0
#: No client waits longer than this: a hang fails the test instead of stalling it.
CLIENT_TIMEOUT = 60.0
#: How far past BOUND a refusal may come: the bound is a safety property, and this slack is for a
#: loaded machine (a request left waiting would reach CLIENT_TIMEOUT).
SLACK = 15.0
PRODUCT = "aerion-v12-cordless"
REQUIRE_MOUNT_ENV = "HAGGLER_REQUIRE_MOUNT"


def assert_unavailable(response: httpx.Response, *, envelope: bool = False) -> None:
    """503, when to retry, and the surface's JSON error with the request's id."""
    assert response.status_code == 503, response.text
    assert int(response.headers["retry-after"]) >= 1
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    assert body["request_id"] == response.headers["x-request-id"]
    assert (body.get("ok") is False) == envelope


# -- PostgreSQL restarted under a running server ------------------------------------------------


@dataclass
class Answer:
    started: float
    ended: float
    path: str
    response: httpx.Response | None  # None: the client gave up (a hang)


def _keep_asking(base: str, answers: list[Answer], stop: threading.Event) -> None:
    """A client that starts chats and agents.json sessions (both writes) until told to stop."""
    with httpx.Client(base_url=base, timeout=CLIENT_TIMEOUT) as http:
        while not stop.is_set():
            for path, send in (("/api/store/chat/start", lambda: http.get("/api/store/chat/start",
                                                                           params={"product_id": PRODUCT})),
                               ("/.well-known/agents/api/session", lambda: http.post(
                                   "/.well-known/agents/api/session", json={"agent_name": "restart-test"}))):
                started = time.monotonic()
                try:
                    response: httpx.Response | None = send()
                except httpx.TimeoutException:
                    response = None
                answers.append(Answer(started, time.monotonic(), path, response))
            time.sleep(0.02)


def _wait_for(condition, seconds: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.05)


@pytest.mark.postgres
@pytest.mark.slow
def test_a_postgres_restart_is_503_while_it_lasts_and_service_resumes_without_restarting_haggler(
        own_postgres_cluster: PostgresCluster, tmp_path: Path) -> None:
    url = own_postgres_cluster.create_database("faults")
    server = ProcessServer("--db", url, "--db-timeout", str(BOUND), "--max-chat-starts-per-hour", "1000000",
                           "--max-sessions", "1000000", "--requests-per-minute", "1000000",
                           "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    answers: list[Answer] = []
    stop = threading.Event()
    with server:
        clients = [threading.Thread(target=_keep_asking, args=(server.base, answers, stop)) for _ in range(3)]
        for client in clients:
            client.start()
        try:
            _wait_for(lambda: sum(a.response is not None and a.response.is_success for a in answers) >= 6, 60,
                      "answers before the restart")
            own_postgres_cluster.halt()
            halted = time.monotonic()
            # Clients keep asking while the database is down: six answers, on both paths.
            _wait_for(lambda: len(down := [a for a in answers if a.started > halted]) >= 6
                      and {a.path for a in down} == {"/api/store/chat/start", "/.well-known/agents/api/session"},
                      60, "answers while the database is down")
            resuming = time.monotonic()
            own_postgres_cluster.resume()
            resumed = time.monotonic()
            _wait_for(lambda: {a.path for a in answers if a.started > resumed and a.response is not None
                               and a.response.is_success} == {"/api/store/chat/start",
                                                              "/.well-known/agents/api/session"},
                      60, "success after the restart")
        finally:
            stop.set()
            for client in clients:
                client.join(timeout=CLIENT_TIMEOUT + 5)
        assert server.proc is not None and server.proc.poll() is None  # the same haggler process throughout

    hung = [a for a in answers if a.response is None]
    assert not hung, f"{len(hung)} requests waited past {CLIENT_TIMEOUT} s"
    statuses = {a.response.status_code for a in answers if a.response is not None}
    assert statuses <= {200, 201, 503}, statuses  # never a 500
    during = [a for a in answers if a.started > halted and a.ended < resuming]
    assert len(during) >= 6
    for answer in during:
        assert answer.response is not None
        assert_unavailable(answer.response, envelope=answer.path.startswith("/.well-known"))
    assert {a.path for a in during} == {"/api/store/chat/start", "/.well-known/agents/api/session"}
    for answer in answers:
        if answer.response is not None and answer.response.status_code == 503:
            assert_unavailable(answer.response, envelope=answer.path.startswith("/.well-known"))
            assert answer.ended - answer.started < BOUND + SLACK  # refused, not left waiting


# -- a lock held by another session -------------------------------------------------------------


@contextmanager
def lock_held(db_url: str, chat_id: str) -> Iterator[None]:
    """Another session holds what a turn on ``chat_id`` needs: SQLite's write lock (a held ``BEGIN
    IMMEDIATE``), or on PostgreSQL the chat's row (``SELECT ... FOR UPDATE``). Released on exit."""
    if db_url.startswith("sqlite"):
        conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        finally:
            conn.rollback()
            conn.close()
        return
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn, conn.begin():
            conn.execute(text("SELECT id FROM chats WHERE id = :id FOR UPDATE"), {"id": chat_id})
            yield
    finally:
        engine.dispose()


def stored_turns(db_url: str, chat_id: str) -> list[tuple[str, str]]:
    """The chat's messages as stored, read from a session of the test's own."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return [tuple(row) for row in conn.execute(  # type: ignore[misc]
                text("SELECT speaker, text FROM messages WHERE chat_id = :id ORDER BY seq"), {"id": chat_id})]
    finally:
        engine.dispose()


def test_a_turn_waiting_past_the_bound_on_a_held_lock_is_503_with_nothing_half_written(make_store,
                                                                                        db_url: str) -> None:
    store = make_store(db_url=db_url, db_timeout_seconds=BOUND)
    chat = store.start().json()
    first = store.say(chat["next"], "hello, what can you tell me about it?")
    assert first.status_code == 200, first.text
    before = stored_turns(db_url, chat["session_id"])

    with lock_held(db_url, chat["session_id"]):
        started = time.monotonic()
        refused = store.say(first.json()["next"], "would you take 100?")
        waited = time.monotonic() - started
        assert_unavailable(refused)
        assert BOUND * 0.9 <= waited < BOUND + SLACK, waited  # answered at the bound, not before, not left waiting
        assert stored_turns(db_url, chat["session_id"]) == before  # no shopper turn without its reply

    taken = store.say(first.json()["next"], "would you take 100?")  # the lock is gone: the turn goes through
    assert taken.status_code == 200, taken.text
    after = stored_turns(db_url, chat["session_id"])
    assert after[:len(before)] == before
    assert after[len(before):] == [("shopper", "would you take 100?"), ("merchant", taken.json()["message"])]


# -- SQLite's volume full -------------------------------------------------------------------------


@pytest.fixture
def small_volume(tmp_path: Path) -> Iterator[Path]:
    """A tmpfs of 8 MB mounted for the test (root only), unmounted afterwards. Skipped where it
    cannot be mounted, unless ``HAGGLER_REQUIRE_MOUNT=1`` (as ``.ci/run`` sets): then it fails."""
    volume = tmp_path / "volume"
    volume.mkdir()
    problem = "mounting a tmpfs needs root" if os.geteuid() != 0 else None
    if problem is None:
        mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(volume)],
                                 capture_output=True, text=True, timeout=30, check=False)
        problem = f"mount failed: {mounted.stderr.strip()}" if mounted.returncode else None
    if problem is not None:
        if ci_requires(REQUIRE_MOUNT_ENV):
            pytest.fail(f"{problem}; {REQUIRE_MOUNT_ENV}=1 is set", pytrace=False)
        pytest.skip(problem)
    try:
        yield volume
    finally:
        if subprocess.run(["umount", str(volume)], capture_output=True, timeout=30, check=False).returncode:
            subprocess.run(["umount", "-l", str(volume)], capture_output=True, timeout=30, check=False)


def fill(volume: Path) -> Path:
    """Write zeros into a file on ``volume`` until no byte more fits; returns the file."""
    filler = volume / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    try:
        while True:  # the last few bytes too
            os.write(fd, b"\0")
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    finally:
        os.close(fd)
    return filler


def test_a_full_disk_refuses_writes_with_503_keeps_reads_and_loses_no_acknowledged_turn(
        make_store, small_volume: Path) -> None:
    store = make_store(db_url=f"sqlite:///{small_volume}/store.db",
                       limits=StoreLimits(max_chat_starts_per_hour_per_ip=10**6, max_messages_per_chat=10**6))
    chat = store.start().json()
    acknowledged: dict[str, list[str]] = {chat["session_id"]: [chat["greeting"]]}  # the merchant's words
    next_url = chat["next"]
    filler = None

    refused = None
    for turn in range(400):  # once the volume is full, the WAL's slack lasts a few dozen turns at most
        if turn == 10:  # ten turns acknowledged on a volume with room, then it fills up
            filler = fill(small_volume)
        answer = store.say(next_url, f"tell me more about it, question {turn}")
        if answer.status_code == 503:
            refused = answer
            break
        assert answer.status_code == 200, answer.text
        acknowledged[chat["session_id"]].append(answer.json()["message"])
        next_url = answer.json()["next"]
        if answer.json()["closed"]:
            chat = store.start().json()
            assert chat.get("session_id"), chat
            acknowledged[chat["session_id"]] = [chat["greeting"]]
            next_url = chat["next"]
    assert refused is not None and filler is not None, "the full volume never refused a write"
    assert_unavailable(refused)
    assert_unavailable(store.start())  # any write
    assert merchant_words(store, acknowledged) == acknowledged  # reads keep working, every acknowledged turn there

    filler.unlink()
    again = store.say(next_url, "and now?")
    assert again.status_code == 200, again.text  # writes work again once there is room
    acknowledged[chat["session_id"]].append(again.json()["message"])
    assert merchant_words(store, acknowledged) == acknowledged


def merchant_words(store, chats: dict[str, list[str]]) -> dict[str, list[str]]:  # type: ignore[no-untyped-def]
    """What the merchant said in each chat, as the store reads it back over HTTP."""
    said = {}
    for session_id in chats:
        history = store.http.get(f"/api/store/chat/{session_id}")
        assert history.status_code == 200, history.text
        said[session_id] = [m["message"] for m in history.json()["history"] if m["speaker"] == "merchant"]
    return said
