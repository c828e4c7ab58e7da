"""Helpers for the match negotiation tests (spec 002): an operator, users and agents talking to a
real store over HTTP (with its FakeClock), and the same set up at function level for races that
need two clocks at once. People come from the labelled match pairs (``tests/agents/match_pairs.json``)."""

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

TOKEN = "operator-token-for-tests-0123456789"
SETTINGS = MatchingSettings(operator_token=TOKEN)
T = TypeVar("T")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def pair(name: str, index: int = 0) -> dict[str, Any]:
    """A labelled pair (a deep copy: tests may extend a person): the one whose id is ``name``, or
    the ``index``-th of the category ``name`` (good, superficial, one_sided)."""
    found = [p for p in PAIRS if p["id"] == name] or [p for p in PAIRS if p["category"] == name][index:index + 1]
    if not found:
        raise KeyError(name)
    return copy.deepcopy(found[0])


def turn(action: str, message: Any = None, *, own: Any = "peer", other: Any = "peer", reasoning: Any = None,
         **extra: Any) -> dict[str, Any]:
    """A respond body (spec: "Turn structure"); any part may be made malformed on purpose."""
    body: dict[str, Any] = {"action": action, "assessment": {
        "reasoning": f"The agent chose {action}." if reasoning is None else reasoning,
        "suggestedRoles": {"ownUser": own, "otherUser": other}}, **extra}
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
class Caller:
    """A user or an agent, with its key (``user_id``: an agent's user)."""

    http: httpx.Client
    id: str
    key: str
    user_id: str | None = None

    @property
    def auth(self) -> dict[str, str]:
        return bearer(self.key)

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return self.http.post(path, json=body, headers=self.auth)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path, params=params, headers=self.auth)

    def pickup(self, client: httpx.Client | None = None) -> httpx.Response:
        return (client or self.http).post(f"/api/agents/{self.id}/negotiations/pickup", headers=self.auth)

    def claim(self) -> dict[str, Any]:
        """Pick up, expecting a turn."""
        response = self.pickup()
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def respond(self, negotiation_id: str, body: Any, client: httpx.Client | None = None) -> httpx.Response:
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
        """A client of its own (for racing threads)."""
        return httpx.Client(base_url=self.http.base_url, timeout=60)


def _id(who: Caller | str) -> str:
    return who if isinstance(who, str) else who.id


class Operator:
    """The operator's side of a store's matching API, and the store's clock."""

    def __init__(self, store: Any, token: str = TOKEN) -> None:
        self.store = store
        self.http: httpx.Client = store.http
        self.clock = store.clock
        self.auth = bearer(token)

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return self.http.post(path, json=body, headers=self.auth)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path, params=params, headers=self.auth)

    def created(self, path: str, body: dict[str, Any], by: Caller | None = None) -> dict[str, Any]:
        response = (by or self).post(path, body)
        assert response.status_code == 201, (path, response.status_code, response.text)
        return response.json()

    def user(self, person: dict[str, Any]) -> Caller:
        """A user made from one side of a labelled pair (or any ``{name?, profile, intents?}``),
        with the user's own key."""
        data = self.created("/api/users", {"name": person.get("name") or person["profile"]["name"],
                                           "profile": person["profile"], "intents": person.get("intents", [])})
        return Caller(self.http, data["id"], data["apiKey"])

    def user_id(self, person: dict[str, Any]) -> str:
        return self.user(person).id

    def users(self, labelled: dict[str, Any]) -> tuple[Caller, Caller]:
        return self.user(labelled["a"]), self.user(labelled["b"])

    def agent(self, user: Caller | str, mode: str = "enabled", name: str = "poller") -> Caller:
        """An agent added by the user itself when given with its key, else by the operator."""
        data = self.created(f"/api/users/{_id(user)}/agents", {"name": name, "negotiationMode": mode},
                            by=user if isinstance(user, Caller) else None)
        return Caller(self.http, data["id"], data["apiKey"], user_id=_id(user))

    def open(self, source: Caller | str, candidate: Caller | str, seed: dict[str, Any] | None = None,
             **extra: Any) -> dict[str, Any]:
        """A negotiating opportunity, as POST /api/opportunities answers it."""
        seed = seed or {"score": 70, "reasoning": "They might help each other.", "valencyRole": "peer"}
        opened = self.created("/api/opportunities", {"sourceUserId": _id(source), "candidateUserId": _id(candidate),
                                                     "seedAssessment": seed, **extra})
        assert opened["status"] == "negotiating", opened
        return opened

    def open_negotiation(self, source: Caller | str, candidate: Caller | str, seed: dict[str, Any]) -> str:
        """Open an opportunity; its negotiation id once the negotiation has run up to its first
        parked turn (or its end)."""
        negotiation_id = self.open(source, candidate, seed)["negotiationId"]
        # A GET applies what is due, a negotiation still submitted included: it waits for the
        # background run (row lock) or runs the negotiation itself.
        assert self.negotiation(negotiation_id)["state"] != "submitted"
        return negotiation_id

    def negotiation(self, negotiation_id: str) -> dict[str, Any]:
        response = self.get(f"/api/negotiations/{negotiation_id}")
        assert response.status_code == 200, (response.status_code, response.text)
        return response.json()

    def opportunity(self, opportunity_id: str) -> dict[str, Any]:
        response = self.get(f"/api/opportunities/{opportunity_id}")
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


def open_in_db(db: Database, parties: Parties, seed: dict[str, Any], settings: MatchingSettings,
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


#: Two users whose match serves both (he builds, she sells), and the seed the evaluator gives it:
#: the personal-agent tests' pair.
JONAS = {"name": "Jonas", "profile": {
    "role": "Full-stack developer", "bio": "Shipped a scheduling SaaS used by 30 clinics, no sales motion yet.",
    "offers": ["full-stack development", "a working SaaS product"], "seeks": ["a co-founder to run sales"]},
    "intents": [{"description": "Find someone to own go-to-market and sales", "tags": ["gtm"]}]}
RACHEL = {"name": "Rachel", "profile": {
    "role": "Head of sales", "bio": "Built the first sales team at a vertical SaaS company.",
    "offers": ["B2B sales", "go-to-market"], "seeks": ["a technical co-founder with a product"]},
    "intents": [{"description": "Join a developer who has built something customers use"}]}
SEED = {"score": 79, "reasoning": "Jonas builds, Rachel sells SaaS.", "valencyRole": "peer"}
