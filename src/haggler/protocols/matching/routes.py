"""The matching service's JSON API under ``/api`` (spec 002): operator, users, agents, polling.

Each request is one database transaction. Deadlines that have passed are applied first, in
transactions of their own, so that their effect sticks even when the request is then refused
(a respond whose claim expired is a 409, and the turn is back in the queue). A new opportunity's
negotiation runs after its 201 has been sent (the opportunity is visible as ``negotiating``
first, as the spec asks); the sweep runs any negotiation a crash left ``submitted``.
"""

from __future__ import annotations

import logging
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import Any, Callable, Iterator

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy import Connection
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from haggler.errors import Forbidden, InvalidInput, Unauthorized
from haggler.protocols.matching import insights, negotiations, opportunities, participants
from haggler.protocols.matching.participants import Principal
from haggler.protocols.matching.settings import MatchingSettings
from haggler.server.json_body import BodyWording, parse_json_body
from haggler.server.limits import Limits
from haggler.server.plain_routes import PlainRoute
from haggler.server.write_lane import WriteLane
from haggler.server.responses import JSON
from haggler.storage.database import Database

log = logging.getLogger("haggler")

PREFIX = "/api"
#: The matching API's own paths (``/api/store`` is negotiate.v1's), for the request edge's wordings.
PATH_PREFIXES = tuple(PREFIX + part for part in ("/users", "/agents", "/opportunities", "/negotiations"))
#: How the matching API words a refused body (the request edge uses it for bodies over the size cap).
BODY_WORDING = BodyWording()
WAITING_FILTER = negotiations.WAITING


class Credential:
    """The key a request presents, checked inside the transaction its operation opens anyway (a
    polling agent's turn reads its key, its agent and its deadlines in its one write). Checked as
    ``Limits.authenticated`` checks one (``server/limits.py``): paced first when its address is
    blocked, and a wrong key or operator token counted toward the store's wrong-token limit (429
    past it), but counted by :meth:`counted` once the operation's transaction is over — counted
    inside a write, the count would be rolled back with the refused request. The right one is
    always let through."""

    def __init__(self, request: HTTPConnection | None, limits: Limits | None, operator_token: str | None) -> None:
        self.request = request
        self.limits = limits if request is not None else None
        self.operator_token = operator_token
        self.authorization = request.headers.get("authorization") if request is not None else None
        self._refused = False

    def check(self, conn: Connection) -> tuple[Principal, Any | None]:
        """The caller, and its agent's row when the key is an agent's
        (``participants.authenticate_with_row``); Unauthorized, not yet counted, otherwise."""
        if self.limits is not None and self.request is not None and self.authorization:
            self.limits.pace(self.request)
        try:
            return participants.authenticate_with_row(conn, self.authorization, self.operator_token)
        except Unauthorized:
            self._refused = True
            raise

    @contextmanager
    def counted(self) -> Iterator[None]:
        """Around the transactions that :meth:`check` the key: a key they refused is counted as
        they end (which may answer 429 instead of 401)."""
        try:
            yield
        except Unauthorized:
            if self._refused and self.limits is not None and self.request is not None and self.authorization:
                self.limits.wrong_credential(self.request)
            raise


def _calling_agent(conn: Connection, caller: Principal | Credential, agent_id: str) -> tuple[Principal, Any]:
    """The caller — already known (an MCP tool's), or told by its key in ``conn`` (a route's
    request, with its agent's row read once) — and the polling agent it calls as."""
    if isinstance(caller, Principal):
        return caller, participants.calling_agent(conn, caller, agent_id)
    principal, key_row = caller.check(conn)
    return principal, participants.calling_agent(conn, principal, agent_id, key_row)


def _counted(caller: Principal | Credential) -> AbstractContextManager[None]:
    return caller.counted() if isinstance(caller, Credential) else nullcontext()


class Matching:
    def __init__(self, db: Database, clock: Callable[[], datetime], settings: MatchingSettings | None = None,
                 limits: Limits | None = None) -> None:
        """``limits``: the store's, which count the wrong keys callers present (None: nothing is
        counted, for a Matching driven directly rather than over HTTP)."""
        self.db = db
        self.clock = clock
        self.settings = settings or MatchingSettings()
        self.limits = limits

    # -- upkeep ---------------------------------------------------------------------------------------

    def sweep(self) -> int:
        """Apply every passed deadline and run negotiations left ``submitted``; returns how many
        negotiations it touched."""
        touched = 0
        while True:
            now = self.clock()
            with self.db.read() as conn:
                due = negotiations.due_tasks(conn, now)
            failed = self._enforce_all(due, now)
            touched += len(due) - failed
            if len(due) < negotiations.SWEEP_BATCH or failed == len(due):
                return touched

    def _enforce_all(self, task_ids: list[str], now: datetime) -> int:
        """Apply the deadlines of each task in a transaction of its own; returns how many failed.
        One broken negotiation is logged and passed over, never left to stop the others (the
        sweep's, or a user's pickups)."""
        failed = 0
        for task_id in task_ids:
            try:
                self._enforce(task_id, now)
            except Exception:  # noqa: BLE001 - see the docstring
                log.exception("could not apply the deadlines of negotiation %s", task_id)
                failed += 1
        return failed

    def _enforce(self, task_id: str, now: datetime) -> None:
        with self.db.write() as conn:
            negotiations.enforce(conn, task_id, self.settings, now)

    def enforce_for_user(self, user_id: str) -> None:
        now = self.clock()
        with self.db.read() as conn:
            due = negotiations.due_tasks(conn, now, user_id=user_id)
        self._enforce_all(due, now)

    def run_negotiation(self, task_id: str) -> None:
        """Run a new negotiation's system turns, up to its end or its first parked turn."""
        with self.db.write() as conn:
            negotiations.advance(conn, task_id, self.settings, self.clock())

    # -- operations, shared by the routes and the MCP tools ------------------------------------------

    def caller(self, request: HTTPConnection | None) -> Principal:
        """Who sent ``request`` (None: a call with no HTTP request, which carries no key)."""
        credential = self.credential(request)
        with credential.counted(), self.db.read() as conn:
            return credential.check(conn)[0]

    def credential(self, request: HTTPConnection | None) -> Credential:
        """The key ``request`` presents, to check inside the transaction an operation opens."""
        return Credential(request, self.limits, self.settings.operator_token)

    def pickup(self, caller: Principal | Credential, agent_id: str) -> dict[str, Any] | None:
        """The agent's next parked turn, claimed (None: nothing waits). One write finds the
        caller, its agent and the deadlines due for its user and, when none is, claims: in one
        statement when the agent holds no claim and a turn waits (``negotiations.claim_if_clear``),
        else as :func:`negotiations.pickup` finds. Due deadlines are applied first, each in a
        transaction of its own (their effect sticks whatever the pickup finds), and then a
        second write claims."""
        now = self.clock()
        with _counted(caller), self.db.write() as conn:
            _, agent = _calling_agent(conn, caller, agent_id)
            negotiations.lock_pickups(conn, agent)
            claimed_at = self.clock()
            found = negotiations.claim_if_clear(conn, agent, self.settings, claimed_at, due_at=now)
            if found is not None:
                return found
            due = negotiations.due_tasks(conn, now, user_id=agent.user_id)
            if not due:
                return negotiations.pickup(conn, agent, self.settings, claimed_at)
        self._enforce_all(due, now)
        with self.db.write() as conn:
            negotiations.lock_pickups(conn, agent)
            return negotiations.pickup(conn, agent, self.settings, self.clock())

    def respond(self, caller: Principal | Credential, agent_id: str, negotiation_id: str,
                body: dict[str, Any]) -> dict[str, Any]:
        """Take the agent's claimed turn; the negotiation's view after it (and the system's turns).
        One write finds the caller, its agent and the task (locked: 404 before anything else) and,
        when no deadline of the task is due, takes the turn. A due one is applied first in a
        transaction of its own, so that it sticks even when the respond is then refused (a claim
        that expired is a 409, and the turn is back in the queue), and a second write takes it."""
        with _counted(caller), self.db.write() as conn:
            principal, agent = _calling_agent(conn, caller, agent_id)
            task = negotiations.task_row(conn, negotiation_id, lock=True)
            now = self.clock()
            if not negotiations.is_due(task, now):
                return self._take(conn, principal, agent, task, body)
        self._enforce(task.id, now)
        with self.db.write() as conn:
            return self._take(conn, principal, agent, negotiations.task_row(conn, negotiation_id, lock=True), body)

    def _take(self, conn: Connection, principal: Principal, agent: Any, task: Any,
              body: dict[str, Any]) -> dict[str, Any]:
        """:meth:`respond`'s write, with the task's row as locked and read in it."""
        stored = negotiations.respond(conn, agent, task.id, body, self.settings, self.clock(), task=task)
        return opportunities.negotiation_view(conn, principal, task.id, stored)

    def answer(self, caller: Principal, negotiation_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """A user's answer to its side's ask_user (Negotiations v2); the negotiation's view."""
        with self.db.read() as conn:
            task = negotiations.task_row(conn, negotiation_id)  # 404 before anything else
        self._enforce_if_due(task)
        with self.db.write() as conn:
            negotiations.answer(conn, caller, negotiation_id, body, self.settings, self.clock())
            return opportunities.negotiation_view(conn, caller, negotiation_id)

    def task(self, caller: Principal, negotiation_id: str) -> Any:
        """The negotiation's task row as its deadlines make it now, for one of its parties (404 /
        403 otherwise): what a caller needs that does not need the whole view."""
        with self.db.read() as conn:
            task = negotiations.task_row(conn, negotiation_id)
        negotiations.require_party(task, caller)
        if not self._enforce_if_due(task):
            return task
        with self.db.read() as conn:
            return negotiations.task_row(conn, negotiation_id)

    def negotiation(self, caller: Principal, negotiation_id: str) -> dict[str, Any]:
        self.task(caller, negotiation_id)
        with self.db.read() as conn:
            return opportunities.negotiation_view(conn, caller, negotiation_id)

    def opportunity(self, caller: Principal, opportunity_id: str) -> dict[str, Any]:
        with self.db.read() as conn:
            row = opportunities.visible_row(conn, caller, opportunity_id)
            task = negotiations.task_row(conn, row.negotiation_id)
        if not self._enforce_if_due(task):
            return opportunities.view(row)
        with self.db.read() as conn:
            return opportunities.get(conn, caller, opportunity_id)

    def _enforce_if_due(self, task: Any) -> bool:
        """A read shows the negotiation as its deadlines make it now: a passed deadline, or a
        negotiation whose start has not run yet, is applied first (a write only when one is due).
        Returns whether it was."""
        now = self.clock()
        due = negotiations.is_due(task, now)
        if due:
            self._enforce(task.id, now)
        return due

    def waiting(self, caller: Principal, agent_id: str) -> list[dict[str, Any]]:
        """The negotiations whose turn is this agent's user's (waiting or claimed)."""
        with self.db.read() as conn:
            agent = participants.calling_agent(conn, caller, agent_id)
        self.enforce_for_user(agent.user_id)
        with self.db.read() as conn:
            return [_waiting_entry(task) for task in negotiations.waiting_for(conn, agent.user_id)]

    # -- routes ---------------------------------------------------------------------------------------

    def router(self) -> APIRouter:
        router = APIRouter(prefix=PREFIX)
        now = self.clock
        settings = self.settings

        def post(path: str, handler: Callable[..., tuple[int, Any]], *, operator: bool = False,
                 after: Callable[[Any], Callable[[], None] | None] | None = None) -> None:
            """``handler(conn, caller, body, **path_params)`` runs in one write transaction;
            ``after(data)`` may name work to run once the response is sent."""
            async def endpoint(request: Request) -> Response:
                raw = await request.body()

                def handle() -> Response:
                    caller = self._caller_of(request, operator=operator)
                    body = parse_json_body(raw, BODY_WORDING) if raw.strip() else {}
                    with self.db.write() as conn:
                        status, data = handler(conn, caller, body, **request.path_params)
                    job = after(data) if after else None
                    return JSON(data, status_code=status, background=BackgroundTask(job) if job else None)
                return await run_in_threadpool(handle)
            router.add_api_route(path, endpoint, methods=["POST"])

        def get(path: str, view: Callable[..., Any], *, operator: bool = False) -> None:
            def endpoint(request: Request) -> JSON:
                caller = self._caller_of(request, operator=operator)
                return JSON(view(caller, request, **request.path_params))
            router.add_api_route(path, endpoint, methods=["GET"])

        def read(fn: Callable[[Connection], Any]) -> Any:
            with self.db.read() as conn:
                return fn(conn)

        def create_user(conn: Connection, caller: Principal, body: dict[str, Any]) -> tuple[int, Any]:
            user, api_key = participants.create_user(conn, body, now())
            return 201, {**user, "apiKey": api_key}

        def create_agent(conn: Connection, caller: Principal, body: dict[str, Any], user_id: str) -> tuple[int, Any]:
            agent, api_key = participants.create_agent(conn, caller, user_id, body, now())
            return 201, {**agent, "apiKey": api_key}

        def create_opportunity(conn: Connection, caller: Principal, body: dict[str, Any]) -> tuple[int, Any]:
            return 201, opportunities.create(conn, body, settings, now())

        def discover(conn: Connection, caller: Principal, body: dict[str, Any], user_id: str) -> tuple[int, Any]:
            return 200, opportunities.discover_for(conn, user_id, body, settings, now())

        def answer(accept: bool) -> Callable[..., tuple[int, Any]]:
            def handler(conn: Connection, caller: Principal, body: dict[str, Any], opportunity_id: str) -> tuple[int, Any]:
                if body:
                    raise InvalidInput("this request takes no body")
                return 200, opportunities.answer(conn, caller, opportunity_id, accept, now())
            return handler

        def run_all(opened: list[dict[str, Any]]) -> Callable[[], None] | None:
            ids = [o["negotiationId"] for o in opened]

            def run() -> None:
                for task_id in ids:
                    self._run_quietly(task_id)
            return run if ids else None

        post("/users", create_user, operator=True)
        post("/users/{user_id}/agents", create_agent)
        post("/users/{user_id}/discover", discover, operator=True, after=lambda data: run_all(data["opportunities"]))
        post("/opportunities", create_opportunity, operator=True, after=lambda data: run_all([data]))
        post("/opportunities/{opportunity_id}/accept", answer(True))
        post("/opportunities/{opportunity_id}/decline", answer(False))

        def user_view(caller: Principal, _: Request, user_id: str) -> Any:
            if not caller.may_see(user_id):
                raise Forbidden("only the operator and the user themself see a user")
            return read(lambda conn: participants.user_view(participants.user_row(conn, user_id)))

        def agent_view(caller: Principal, _: Request, agent_id: str) -> Any:
            row = read(lambda conn: participants.agent_row(conn, agent_id))
            if not caller.may_see(row.user_id):
                raise Forbidden("only the operator, the user and the user's agents see an agent")
            return participants.agent_view(row)

        def insights_view(caller: Principal, _: Request) -> Any:
            return read(insights.insights)

        def list_view(caller: Principal, request: Request, agent_id: str) -> Any:
            status = request.query_params.get("status", WAITING_FILTER)
            if status != WAITING_FILTER:
                raise InvalidInput(f"status must be {WAITING_FILTER}")
            return {"negotiations": self.waiting(caller, agent_id)}

        get("/users/{user_id}", user_view)
        get("/agents/{agent_id}", agent_view)
        get("/opportunities/{opportunity_id}", lambda caller, _, opportunity_id: self.opportunity(caller, opportunity_id))
        get("/negotiations/insights", insights_view, operator=True)
        get("/negotiations/{negotiation_id}", lambda caller, _, negotiation_id: self.negotiation(caller, negotiation_id))
        get("/agents/{agent_id}/negotiations", list_view)

        async def answer(request: Request, negotiation_id: str) -> JSON:
            raw = await request.body()

            def handle() -> JSON:
                caller = self.caller(request)
                return JSON(self.answer(caller, negotiation_id, parse_json_body(raw, BODY_WORDING)))
            return await run_in_threadpool(handle)

        router.add_api_route("/negotiations/{negotiation_id}/answer", answer, methods=["POST"])
        return router

    def plain_routes(self, in_writer: WriteLane) -> list[PlainRoute]:
        """A polling agent's turn — pickup, then respond — as plain routes (``server/plain_routes.py``):
        they read their requests themselves, so FastAPI's routing and parameter solving, a good
        part of a turn's server CPU, are skipped, and they run in ``in_writer``
        (``server/write_lane.py``): on the event loop unless the database is busy. Both may run
        again from the start in a thread: what they do before their write (a read, deadlines
        applied) comes out the same. :func:`views.openapi_operations` documents them."""
        agent = PREFIX + "/agents/{agent_id}/negotiations"

        def claim(request: Request, agent_id: str) -> Response:
            found = self.pickup(self.credential(request), agent_id)
            return Response(status_code=204) if found is None else JSON(found)

        def take(request: Request, agent_id: str, negotiation_id: str, body: dict[str, Any]) -> Response:
            return JSON(self.respond(self.credential(request), agent_id, negotiation_id, body))

        async def pickup(request: Request) -> Response:
            return await in_writer(claim, request, request.path_params["agent_id"])

        async def respond(request: Request) -> Response:
            body = parse_json_body(await request.body(), BODY_WORDING)
            return await in_writer(take, request, request.path_params["agent_id"],
                                   request.path_params["negotiation_id"], body)

        return [PlainRoute("POST", f"{agent}/pickup", pickup),
                PlainRoute("POST", agent + "/{negotiation_id}/respond", respond)]

    def _caller_of(self, request: Request, *, operator: bool) -> Principal:
        """The caller; on an operator-only route, refused (403) up front when the server has no
        operator token, whatever the key — the routes are off, not merely locked."""
        if operator and self.settings.operator_token is None:
            raise Forbidden("the operator routes are off: start the server with --operator-token "
                            "(or HAGGLER_OPERATOR_TOKEN)")
        caller = self.caller(request)
        if operator:
            caller.require_operator()
        return caller

    def _run_quietly(self, task_id: str) -> None:
        """Run a negotiation after its 201; a failure leaves it ``submitted`` for the sweep."""
        try:
            self.run_negotiation(task_id)
        except Exception:  # noqa: BLE001 - the sweep retries it; the client already has its 201
            log.exception("negotiation %s did not start; the sweep will retry it", task_id)


def _waiting_entry(task: Any) -> dict[str, Any]:
    return {"negotiationId": task.id, "opportunityId": task.opportunity_id, "state": task.state,
            "parkedAt": task.parked_at.isoformat(), "parkDeadline": task.park_deadline.isoformat()}
