"""``haggler serve --workers 2`` on PostgreSQL, as deployed: a real supervisor and its worker
processes, real HTTP on loopback, a real PostgreSQL cluster.

Which worker answered is read from ``/metrics``, where ``haggler_sweep_leader{pid}`` names the
process that served the scrape; every request here is on a connection of its own, so the kernel
spreads them over both workers.
"""

from __future__ import annotations

import os
import signal
import threading
import time
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterator
from urllib.parse import quote

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

try:
    from tests.support.postgres import PostgresCluster
    from tests.support.servers import ProcessServer
except ImportError:  # pragma: no cover
    from support.postgres import PostgresCluster  # type: ignore[no-redef]
    from support.servers import ProcessServer  # type: ignore[no-redef]

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

TOKEN = "workers-operator-token-0123456789"
PRODUCT = "aerion-v12-cordless"
#: Limits low enough to cross with a dozen requests.
LIMIT = 5
ATTEMPTS = 12


@dataclass(frozen=True)
class Scrape:
    """One worker's ``/metrics`` as it answered one scrape."""

    pid: int
    leading: bool
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    def total(self, name: str, **labels: str) -> float:
        wanted = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and wanted <= ls)


def scrape(base: str) -> Scrape:
    """One scrape. A 429 is waited out: once the wrong-token test has blocked this address, each
    worker compares one token a second from it, the right one included."""
    for _ in range(30):
        response = httpx.get(f"{base}/metrics", headers={"authorization": f"Bearer {TOKEN}"}, timeout=30)
        if response.status_code != 429:
            break
        time.sleep(int(response.headers["retry-after"]))
    assert response.status_code == 200, response.text
    samples = {(s.name, frozenset(s.labels.items())): s.value
               for family in text_string_to_metric_families(response.text) for s in family.samples}
    (pid, leading), = [(int(dict(ls)["pid"]), v == 1.0) for (n, ls), v in samples.items()
                       if n == "haggler_sweep_leader"]
    return Scrape(pid, leading, samples)


def latest_per_worker(base: str, workers: set[int], deadline: float = 60.0) -> dict[int, Scrape]:
    """A fresh scrape of each of ``workers``, scraping until every one has answered."""
    seen: dict[int, Scrape] = {}
    give_up = time.monotonic() + deadline
    with ThreadPoolExecutor(8) as pool:
        while set(seen) != workers:
            assert time.monotonic() < give_up, f"only {sorted(seen)} of {sorted(workers)} answered"
            for found in pool.map(lambda _: scrape(base), range(8)):
                assert found.pid in workers, f"pid {found.pid} is not one of the workers {sorted(workers)}"
                seen[found.pid] = found
    return seen


def worker_pids(server: ProcessServer) -> set[int]:
    assert server.proc is not None
    children = Path(f"/proc/{server.proc.pid}/task/{server.proc.pid}/children").read_text().split()
    return {int(pid) for pid in children}


def wait_for_workers(server: ProcessServer, count: int, timeout: float = 120.0) -> set[int]:
    """The supervisor's workers once there are ``count`` of them and each answers."""
    deadline = time.monotonic() + timeout
    while len(pids := worker_pids(server)) != count:
        assert time.monotonic() < deadline, f"workers: {pids}"
        time.sleep(0.1)
    latest_per_worker(server.base, pids, deadline=timeout)
    return pids


def fresh_connections(count: int, request: Callable[[], httpx.Response]) -> list[httpx.Response]:
    """``request()`` ``count`` times at once, each on a connection of its own."""
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: request(), range(count)))


@pytest.fixture(scope="module")
def database(postgres_cluster: PostgresCluster) -> Iterator[str]:
    name = f"t_workers_{uuid.uuid4().hex[:12]}"
    url = postgres_cluster.create_database(name)
    yield url
    postgres_cluster.drop_database(name)


@pytest.fixture(scope="module")
def two_workers(database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessServer]:
    """Two workers with low limits; an idle TTL of 4 s sweeps every second."""
    folder = tmp_path_factory.mktemp("two-workers")
    server = ProcessServer("--db", database, "--workers", "2", "--operator-token", TOKEN, "--idle-ttl", "4",
                           "--max-chat-starts-per-hour", str(LIMIT), "--limit-loopback", "--requests-per-minute", str(LIMIT),
                           "--max-wrong-tokens", str(LIMIT), "--max-registrations-per-hour", str(LIMIT),
                           "--data-dir", str(folder / "data"), cwd=folder)
    with server:
        wait_for_workers(server, 2)
        yield server


def counted_per_worker(server: ProcessServer, route: str) -> dict[int, float]:
    scrapes = latest_per_worker(server.base, worker_pids(server))
    return {pid: found.total("haggler_http_requests_total", route=route) for pid, found in scrapes.items()}


def test_two_workers_serve_one_port_and_share_its_requests(two_workers):
    pids = worker_pids(two_workers)
    assert len(pids) == 2 and two_workers.proc is not None and two_workers.proc.pid not in pids
    responses = fresh_connections(40, lambda: httpx.get(f"{two_workers.base}/negotiate.json", timeout=30))
    assert all(r.status_code == 200 for r in responses)
    served = counted_per_worker(two_workers, "/negotiate.json")
    assert sum(served.values()) == 40 and all(served.values()), served


def test_chat_starts_per_hour_are_counted_across_workers(two_workers):
    statuses = Counter(r.status_code for r in fresh_connections(ATTEMPTS, lambda: httpx.get(
        f"{two_workers.base}/api/store/chat/start", params={"product_id": PRODUCT}, timeout=30)))
    assert statuses == {201: LIMIT, 429: ATTEMPTS - LIMIT}
    served = counted_per_worker(two_workers, "/api/store/chat/start")
    assert sum(served.values()) == ATTEMPTS and all(served.values()), served


def test_agents_json_requests_per_minute_are_counted_across_workers(two_workers):
    if datetime.now(timezone.utc).second >= 50:  # the window is a clock minute: stay inside one
        time.sleep(61 - datetime.now(timezone.utc).second)
    statuses = Counter(r.status_code for r in fresh_connections(ATTEMPTS, lambda: httpx.get(
        f"{two_workers.base}/.well-known/agents.json", timeout=30)))
    assert statuses == {200: LIMIT, 429: ATTEMPTS - LIMIT}
    served = counted_per_worker(two_workers, "/.well-known/agents.json")
    assert sum(served.values()) == ATTEMPTS and all(served.values()), served


def test_wrong_tokens_are_counted_across_workers_and_the_right_one_still_served(two_workers):
    def guess(token: str) -> httpx.Response:
        return httpx.get(f"{two_workers.base}/admin", headers={"authorization": f"Bearer {token}"}, timeout=30)

    statuses = Counter(r.status_code for r in fresh_connections(ATTEMPTS, lambda: guess("a-wrong-guess-0123456789")))
    assert statuses == {401: LIMIT, 429: ATTEMPTS - LIMIT}  # 5 failures in 15 minutes, as with one worker
    # the right token is never locked out: from this blocked address, each worker compares one a second
    answers = []
    for _ in range(4):
        time.sleep(1.1)
        answers.append(guess(TOKEN).status_code)
    assert set(answers) == {200}
    served = counted_per_worker(two_workers, "/admin")
    assert sum(served.values()) == ATTEMPTS + 4 and all(served.values()), served


def test_registrations_are_counted_across_workers(two_workers):
    statuses = Counter(r.status_code for r in fresh_connections(ATTEMPTS, lambda: httpx.post(
        f"{two_workers.base}/v1/agents", json={"name": "spam"}, timeout=30)))
    assert statuses == {201: LIMIT, 429: ATTEMPTS - LIMIT}


def advisory_lock_holders(database: str) -> list[str]:
    """The application names of the sessions holding the leader's lock, seen from PostgreSQL."""
    from haggler.server.leader import LEADER_LOCK_KEY

    engine = create_engine(database)
    try:
        with engine.connect() as conn:
            return list(conn.execute(text(
                "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                "WHERE l.locktype = 'advisory' AND l.objid = :key AND l.granted"), {"key": LEADER_LOCK_KEY}).scalars())
    finally:
        engine.dispose()


def sweeps(found: Scrape) -> float:
    return found.total("haggler_sweeps_total")


def scrapes_when(base: str, workers: set[int], done: Callable[[dict[int, Scrape]], bool]) -> dict[int, Scrape]:
    """Fresh scrapes of ``workers`` once ``done`` holds for them: sweeps run once a second on an
    idle machine, a loaded one only takes longer (up to a minute)."""
    deadline = time.monotonic() + 60
    while not done(scrapes := latest_per_worker(base, workers)):
        assert time.monotonic() < deadline, f"not within 60 s: {scrapes}"
        time.sleep(0.5)
    return scrapes


def test_sweeps_run_in_one_worker_and_a_survivor_takes_over_when_it_dies(two_workers, database):
    # A few rounds: every job twice in the leader.
    scrapes = scrapes_when(two_workers.base, worker_pids(two_workers),
                           lambda found: any(f.leading and sweeps(f) >= 2 * 4 for f in found.values()))
    (leader,) = [pid for pid, found in scrapes.items() if found.leading]
    (follower,) = set(scrapes) - {leader}
    assert sweeps(scrapes[leader]) >= 2 * 4  # every job, every round
    assert sweeps(scrapes[follower]) == 0  # it never swept: the leader did it for both
    assert advisory_lock_holders(database) == [f"haggler worker {leader}"]

    os.kill(leader, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while True:  # the survivor (or the worker started in the dead one's place) leads within a round or two
        assert time.monotonic() < deadline, "no worker took over the sweeps"
        pids = worker_pids(two_workers)
        if len(pids) == 2 and leader not in pids:
            scrapes = latest_per_worker(two_workers.base, pids)
            leaders = [pid for pid, found in scrapes.items() if found.leading]
            if leaders:
                break
        time.sleep(0.5)
    (new_leader,) = leaders
    assert follower in pids
    before = sweeps(scrapes[new_leader])
    after = scrapes_when(two_workers.base, pids, lambda found: sweeps(found[new_leader]) > before)
    (other,) = pids - {new_leader}
    assert not after[other].leading and sweeps(after[other]) == sweeps(scrapes[other])
    assert advisory_lock_holders(database) == [f"haggler worker {new_leader}"]


# -- a worker killed while shoppers haggle --------------------------------------------------------

CLIENTS = 32
TURNS = 8
QUESTIONS = ("hi, is it new?", "what's the warranty?", "how about $150?", "does it come with a charger?",
             "could you do $200?", "what colours are there?", "is shipping free?", "how about $220?")


@dataclass
class Haggle:
    """One shopper's chat as the shopper saw it: the turns it got a 200 for."""

    chat_id: str = ""
    acknowledged: list[tuple[str, str]] | None = None
    failed_after: int | None = None  # acknowledged turns when a request of this chat first failed
    failures: int = 0
    continued: bool = False  # a 200 came after that failure


def haggle(base: str, killed: threading.Event, enough: threading.Event, turns_done: Counter) -> Haggle:
    chat = Haggle(acknowledged=[])
    with httpx.Client(timeout=30) as http:  # keep-alive: a chat stays on its worker until that dies
        body = http.get(f"{base}/api/store/chat/start", params={"product_id": PRODUCT}).json()
        chat.chat_id, next_url = body["session_id"], body["next"]
        chat.acknowledged.append(("merchant", body["greeting"]))
        for turn in range(TURNS):
            if turn == 2:
                enough.wait(30)  # every chat is under way before one worker dies
            message = QUESTIONS[turn]
            try:
                response = http.get(next_url.replace("{url_encoded_message}", quote(message, safe="")))
            except httpx.TransportError:
                assert killed.is_set(), "a request failed before any worker was killed"
                if chat.failed_after is None:
                    chat.failed_after = len(chat.acknowledged)
                chat.failures += 1
                continue
            assert response.status_code == 200, response.text
            body = response.json()
            chat.acknowledged += [("shopper", message), ("merchant", body["message"])]
            chat.continued = chat.continued or chat.failed_after is not None
            turns_done["turns"] += 1
            if body.get("closed"):
                break
            next_url = body["next"]
    return chat


def stored_histories(database: str) -> dict[str, list[tuple[str, str]]]:
    """Every chat's messages, read from the database after the store has stopped."""
    histories: dict[str, list[tuple[str, str]]] = {}
    engine = create_engine(database)
    try:
        with engine.connect() as conn:
            for chat_id, speaker, said in conn.execute(text(
                    "SELECT chat_id, speaker, text FROM messages ORDER BY chat_id, seq")):
                histories.setdefault(chat_id, []).append((speaker, said))
    finally:
        engine.dispose()
    return histories


def is_subsequence(part: list[tuple[str, str]], whole: list[tuple[str, str]]) -> bool:
    rest = iter(whole)
    return all(item in rest for item in part)


def test_sigkill_of_a_worker_while_32_shoppers_haggle_loses_no_acknowledged_turn(postgres_url, tmp_path):
    server = ProcessServer("--db", postgres_url, "--workers", "2", "--operator-token", TOKEN, "--seed", "7",
                           "--max-chat-starts-per-hour", "1000", "--data-dir", str(tmp_path / "data"), cwd=tmp_path)
    killed, enough = threading.Event(), threading.Event()
    turns_done: Counter = Counter()
    with server:
        victim = min(wait_for_workers(server, 2))
        with ThreadPoolExecutor(CLIENTS) as pool:
            futures = [pool.submit(haggle, server.base, killed, enough, turns_done) for _ in range(CLIENTS)]
            deadline = time.monotonic() + 60
            while turns_done["turns"] < CLIENTS * 2 and time.monotonic() < deadline:
                time.sleep(0.01)
            enough.set()
            time.sleep(0.05)  # turns in flight on both workers
            killed.set()
            os.kill(victim, signal.SIGKILL)
            chats = [future.result(timeout=300) for future in futures]  # no chat hangs (however slowly it ends)
        workers = wait_for_workers(server, 2)
        assert victim not in workers  # the dead one replaced by a new worker
    assert server.proc is not None and server.proc.returncode == 0  # SIGTERM: the supervisor stopped them all
    assert not any(Path(f"/proc/{pid}").exists() for pid in workers)

    broken = [chat for chat in chats if chat.failed_after is not None]
    assert broken, "no chat was on the killed worker"
    assert len(broken) < CLIENTS  # the other worker kept answering its chats
    assert all(chat.continued for chat in broken if chat.failed_after < 1 + 2 * (TURNS - 1))
    histories = stored_histories(postgres_url)
    for chat in chats:
        history = histories[chat.chat_id]
        assert is_subsequence(chat.acknowledged, history), (chat, history)
        # Besides them, at most the turns in flight when their worker died were stored.
        assert len(history) - len(chat.acknowledged) <= 2 * chat.failures
