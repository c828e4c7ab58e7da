"""Helpers for the match negotiation's polling tests (spec 002, "Turn Delivery (Polling)"):
users, agents and opportunities over HTTP on a store with a FakeClock, and the same set up at
function level for races that need two clocks at once.

People come from the labelled match pairs (``tests/agents/match_pairs.json``)."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

import httpx

from haggler.protocols.matching import negotiations, opportunities, participants
from haggler.protocols.matching.settings import MatchingSettings
from haggler.storage.database import Database

try:
    from tests.support.match_pairs import PAIRS
except ImportError:  # pragma: no cover - rootdir-less invocation, as in tests/conftest.py
    from support.match_pairs import PAIRS  # type: ignore[no-redef]

OPERATOR_TOKEN = "operator-token-for-the-polling-tests"
T = TypeVar("T")


def pair(pair_id: str) -> dict[str, Any]:
    """A labelled pair by id (a deep copy: tests may extend a person)."""
    for found in PAIRS:
        if found["id"] == pair_id:
            return copy.deepcopy(found)
    raise KeyError(pair_id)


def turn(action: str, message: str | None = None, *, own: str = "peer", other: str = "peer") -> dict[str, Any]:
    """A respond body (spec: "Turn structure")."""
    body: dict[str, Any] = {"action": action, "assessment": {
        "reasoning": f"The agent chose {action}.", "suggestedRoles": {"ownUser": own, "otherUser": other}}}
    if message is not None:
        body["message"] = message
    return body


def iso(at: datetime) -> str:
    return at.isoformat()


def race(calls: Sequence[Callable[[], T]]) -> list[T]:
    """Run every call at once, each on its own thread, released together by a barrier."""
    barrier = threading.Barrier(len(calls))

    def run(call: Callable[[], T]) -> T:
        barrier.wait()
        return call()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


# -- over HTTP ------------------------------------------------------------------------------------

@dataclass
class Agent:
    """A personal agent: its id, its key, its user."""

    base: str
    http: httpx.Client
    id: str
    key: str
    user_id: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def pickup(self, client: httpx.Client | None = None) -> httpx.Response:
        return (client or self.http).post(f"/api/agents/{self.id}/negotiations/pickup", headers=self.auth)

    def claim(self) -> dict[str, Any]:
        """Pick up, expecting a turn."""
        response = self.pickup()
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def respond(self, negotiation_id: str, body: dict[str, Any], client: httpx.Client | None = None) -> httpx.Response:
        return (client or self.http).post(f"/api/agents/{self.id}/negotiations/{negotiation_id}/respond",
                                          json=body, headers=self.auth)

    def take(self, negotiation_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Pick up the turn of ``negotiation_id`` and answer it; the negotiation's view."""
        claim = self.claim()
        assert claim["negotiationId"] == negotiation_id, claim
        response = self.respond(negotiation_id, body)
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def client(self) -> httpx.Client:
        return httpx.Client(base_url=self.base, timeout=60)


class Api:
    """The operator's side of a store's matching API, and the store's clock."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.http: httpx.Client = store.http
        self.clock = store.clock
        self.auth = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}

    def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post(path, json=body, headers=self.auth)
        assert response.status_code == 201, (path, response.status_code, response.text)
        return response.json()

    def user(self, person: dict[str, Any]) -> str:
        """A user made from one side of a labelled pair."""
        return self.post("/api/users", {"name": person["profile"]["name"], "profile": person["profile"],
                                        "intents": person["intents"]})["id"]

    def agent(self, user_id: str, name: str = "poller") -> Agent:
        data = self.post(f"/api/users/{user_id}/agents", {"name": name})
        return Agent(self.store.base, self.http, data["id"], data["apiKey"], user_id)

    def open(self, source: str, candidate: str, seed: dict[str, Any]) -> str:
        """A negotiating opportunity; returns its negotiation id once the negotiation has run up
        to its first parked turn (or its end)."""
        data = self.post("/api/opportunities", {"sourceUserId": source, "candidateUserId": candidate,
                                                "seedAssessment": seed})
        assert data["status"] == "negotiating", data
        # A GET applies what is due, a negotiation still submitted included: it waits for the
        # background run (row lock) or runs the negotiation itself.
        assert self.negotiation(data["negotiationId"])["state"] != "submitted"
        return data["negotiationId"]

    def negotiation(self, negotiation_id: str) -> dict[str, Any]:
        response = self.http.get(f"/api/negotiations/{negotiation_id}", headers=self.auth)
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def opportunity(self, opportunity_id: str) -> dict[str, Any]:
        response = self.http.get(f"/api/opportunities/{opportunity_id}", headers=self.auth)
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def sweep(self) -> int:
        """What the server's periodic sweep runs (the tests' stores run no sweep of their own)."""
        return self.store.app.state.matching.sweep()

    def at(self, when: datetime) -> None:
        """Move the store's clock to ``when`` (forward only)."""
        now = self.clock()
        assert when >= now, (when, now)
        self.clock.advance(seconds=(when - now).total_seconds())


def summary(view: dict[str, Any]) -> list[tuple[int, str, str]]:
    """A negotiation's turns as (number, action, takenBy)."""
    return [(t["turnNumber"], t["action"], t["takenBy"]) for t in view["turns"]]


# -- at function level ----------------------------------------------------------------------------

@dataclass
class Parties:
    """Two users of a pair at function level, each with its personal agents (rows)."""

    source: str
    candidate: str
    agents: dict[str, list[Any]]


def make_parties(db: Database, the_pair: dict[str, Any], now: datetime, *, source_agents: int = 1,
                 candidate_agents: int = 1) -> Parties:
    with db.write() as conn:
        ids = {}
        for side in ("a", "b"):
            person = the_pair[side]
            user, _ = participants.create_user(conn, {"name": person["profile"]["name"], "profile": person["profile"],
                                                      "intents": person["intents"]}, now)
            ids[side] = user["id"]
        agents: dict[str, list[Any]] = {ids["a"]: [], ids["b"]: []}
        for side, count in (("a", source_agents), ("b", candidate_agents)):
            for k in range(count):
                made, _ = participants.create_agent(conn, participants.OPERATOR, ids[side], {"name": f"{side}{k}"}, now)
                agents[ids[side]].append(participants.agent_row(conn, made["id"]))
    return Parties(ids["a"], ids["b"], agents)


def open_negotiation(db: Database, parties: Parties, seed: dict[str, Any], settings: MatchingSettings,
                     now: datetime) -> str:
    """Open the opportunity and run its negotiation up to the first parked turn."""
    with db.write() as conn:
        created = opportunities.create(conn, {"sourceUserId": parties.source, "candidateUserId": parties.candidate,
                                              "seedAssessment": seed}, settings, now)
    with db.write() as conn:
        negotiations.advance(conn, created["negotiationId"], settings, now)
    return created["negotiationId"]


def task_state(db: Database, task_id: str) -> tuple[Any, list[negotiations.StoredTurn]]:
    with db.read() as conn:
        return negotiations.task_row(conn, task_id), negotiations.stored_turns(conn, task_id)


def seconds(n: float) -> timedelta:
    return timedelta(seconds=n)
