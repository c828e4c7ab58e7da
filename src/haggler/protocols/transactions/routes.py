"""The exchange's JSON API under ``/v1``: agents, wallets, services, transactions.

Each request is one database transaction: its effect, the money it moves and (with an
``Idempotency-Key``) its stored response commit together. Errors use the store's shape,
``{"error": "..."}``, with the status codes of :func:`haggler.server.errors.status_for`.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Any, Callable

from fastapi import APIRouter, Request
from sqlalchemy import Connection
from starlette.concurrency import run_in_threadpool

from haggler.errors import Forbidden, HagglerError, InvalidInput
from haggler.protocols.transactions import accounts, ledger, service
from haggler.protocols.transactions.views import MAX_ENTRY_ID, MAX_OFFSET, MAX_PAGE
from haggler.protocols.transactions.accounts import Agent
from haggler.protocols.fields import integer, only, query_integer
from haggler.protocols.transactions.idempotency import HEADER, Idempotency, Overtaken, request_hash
from haggler.protocols.transactions.settings import ExchangeSettings
from haggler.server.errors import status_for
from haggler.server.json_body import BodyWording, parse_json_body
from haggler.server.limits import Limits
from haggler.server.plain_routes import PlainRoute
from haggler.server.request_log import request_id
from haggler.server.responses import JSON
from haggler.server.write_lane import WriteLane
from haggler.storage.database import Database

PREFIX = "/v1"
#: How the exchange words a refused body (the request edge uses it for bodies over the size cap).
BODY_WORDING = BodyWording()
#: Registration has no agent to scope its keys by, so its keys must be as unguessable as a secret.
ANONYMOUS_SCOPE, MIN_ANONYMOUS_KEY = "-", 32
ANONYMOUS_REPLAY = timedelta(minutes=10)

#: A POST handler: (connection, caller or None, body) -> (status, response body).
Handler = Callable[[Connection, "Agent | None", dict[str, Any]], tuple[int, Any]]


class Exchange:
    def __init__(self, db: Database, clock: Callable[[], datetime], limits: Limits,
                 settings: ExchangeSettings | None = None) -> None:
        self.db = db
        self.clock = clock
        self.limits = limits
        self.settings = settings or ExchangeSettings()
        self.idempotency = Idempotency(db, clock)

    def sweep(self) -> int:
        """Cancel transactions whose offer expired unanswered (returns how many) and forget
        idempotency keys past their time."""
        now = self.clock()
        cancelled = self.db.in_batches(lambda conn: service.expire_due(conn, now), service.EXPIRY_BATCH)
        self.idempotency.prune(now)
        return cancelled

    # -- request plumbing ---------------------------------------------------------------------------

    def _caller(self, request: Request) -> Agent:
        """The agent whose API key the request carries; 401 otherwise, a wrong key counted toward
        the store's wrong-token limit (429 past it: ``server/limits.py``)."""
        authorization = request.headers.get("authorization")

        def authenticate() -> Agent:
            with self.db.read() as conn:
                return accounts.authenticate(conn, authorization)
        return self.limits.authenticated(request, authorization, authenticate)

    def _post(self, request: Request, raw: bytes, handler: Handler, *, anonymous: bool = False,
              prepare: Callable[[], None] | None = None) -> JSON:
        """``prepare`` runs after authentication in a transaction of its own, for upkeep that must
        stick even when the request itself is then refused (an offer's expiry)."""
        if anonymous:
            self.limits.registration(request)
        caller = None if anonymous else self._caller(request)
        body = parse_json_body(raw, BODY_WORDING)
        if prepare is not None:
            prepare()
        key = request.headers.get(HEADER)
        if key is None:
            with self.db.write() as conn:
                status, data = handler(conn, caller, body)
            return JSON(data, status_code=status)
        if anonymous and len(key) < MIN_ANONYMOUS_KEY:
            raise InvalidInput(f"{HEADER} on registration must be at least {MIN_ANONYMOUS_KEY} characters "
                               "(its response holds your API key)")
        scope = caller.id if caller else ANONYMOUS_SCOPE
        # A registration's response holds an API key: replay it only to a prompt retry.
        claim, stored = self.idempotency.begin(scope, key, request_hash("POST", request.url.path, raw),
                                               replay_for=ANONYMOUS_REPLAY if anonymous else None)
        if stored is not None:
            return JSON(stored.body, status_code=stored.status, headers={"Idempotent-Replayed": "true"})
        try:
            with self.db.write() as conn:
                status, data = handler(conn, caller, body)
                self.idempotency.finish(conn, claim, status, data)
        except Overtaken:
            raise
        except HagglerError as exc:
            # A refusal is the answer to this request: a retry with the key gets it again, as it
            # was sent (the first request's id included: the replay is that request's answer).
            self.idempotency.finish_now(claim, status_for(exc), {"error": exc.message,
                                                                 "request_id": request_id(request.scope)})
            raise
        except BaseException:
            self.idempotency.forget(claim)
            raise
        return JSON(data, status_code=status)

    def _get(self, request: Request, view: Callable[[Connection, Agent, bool], Any]) -> JSON:
        caller = self._caller(request)
        with self.db.read() as conn:
            data = view(conn, caller, False)
        if _expiry_due(data, self.clock()):
            with self.db.write() as conn:  # enforcing an expiry is a change: redo it writably
                data = view(conn, caller, True)
        return JSON(data)

    # -- handlers ------------------------------------------------------------------------------------

    def _register(self, conn: Connection, _: Agent | None, body: dict[str, Any]) -> tuple[int, Any]:
        only(body, ("name",))
        agent, api_key = accounts.register(conn, body.get("name"), self.clock())
        return 201, {"id": agent.id, "name": agent.name, "apiKey": api_key}

    def _deposit(self, conn: Connection, caller: Agent | None, body: dict[str, Any]) -> tuple[int, Any]:
        assert caller is not None
        if not self.settings.allow_deposits:
            raise Forbidden("deposits are switched off on this exchange: they are a sandbox feature, which "
                            "haggler serve --sandbox-deposits turns on")
        only(body, ("amountCents",))
        amount = integer(body.get("amountCents"), "amountCents", low=1, high=ledger.MAX_AMOUNT_CENTS)
        return 200, ledger.deposit(conn, caller.id, amount, self.clock()).to_json()

    def router(self) -> APIRouter:
        router = APIRouter(prefix=PREFIX)
        now = self.clock

        def post(path: str, handler: Handler, *, anonymous: bool = False) -> None:
            async def endpoint(request: Request) -> JSON:
                raw = await request.body()
                return await run_in_threadpool(self._post, request, raw, handler, anonymous=anonymous)
            router.add_api_route(path, endpoint, methods=["POST"])

        def get(path: str, view: Callable[..., Any]) -> None:
            def endpoint(request: Request) -> JSON:
                return self._get(request, lambda conn, caller, writable: view(conn, caller, request, writable))
            router.add_api_route(path, endpoint, methods=["GET"])

        post("/agents", self._register, anonymous=True)
        post("/wallets/me/deposit", self._deposit)
        post("/services", lambda conn, caller, body: (201, accounts.create_service(conn, _agent(caller), body, now())))

        get("/wallets/me", lambda conn, caller, *_: ledger.balance(conn, caller.id).to_json())
        get("/wallets/me/ledger", lambda conn, caller, request, _: {"entries": ledger.entries(
            conn, caller.id, limit=_page_limit(request), before_id=_optional_int(request, "before", MAX_ENTRY_ID))})
        get("/services", lambda conn, caller, request, _: {"services": accounts.list_services(
            conn, limit=_page_limit(request), offset=_optional_int(request, "offset", MAX_OFFSET) or 0)})
        get("/services/{service_id}", lambda conn, caller, request, _: accounts.get_service(
            conn, request.path_params["service_id"]))
        get("/transactions/{transaction_id}", lambda conn, caller, request, writable: service.read(
            conn, caller, request.path_params["transaction_id"], now(), enforce=writable))
        get("/transactions/{transaction_id}/negotiations", lambda conn, caller, request, _: {
            "messages": service.messages(conn, caller, request.path_params["transaction_id"])})
        return router

    def plain_routes(self, in_writer: WriteLane) -> list[PlainRoute]:
        """A transaction's negotiation — opening it, its messages, completing or cancelling it —
        as plain routes (``server/plain_routes.py``): FastAPI's routing and parameter solving were
        a good part of such a request's CPU. Without an ``Idempotency-Key`` a request runs in
        ``in_writer`` (``server/write_lane.py``: on the event loop unless the database is busy,
        then again from the start in a thread); with one, in a thread, since its claim on the key
        is a write of its own that must not run twice."""

        async def serve(request: Request, handler: Handler, prepare: Callable[[], None] | None = None) -> JSON:
            raw = await request.body()
            if HEADER in request.headers:
                return await run_in_threadpool(self._post, request, raw, handler, prepare=prepare)
            return await in_writer(partial(self._post, prepare=prepare), request, raw, handler)

        async def open_transaction(request: Request) -> JSON:
            return await serve(request, lambda conn, caller, body: (
                201, service.create(conn, _agent(caller), body, self.clock())))

        def on_transaction(action: str) -> Callable[[Request], Any]:
            #: service.negotiate, .complete or .cancel: (conn, caller, transaction id, body, now).
            operation = getattr(service, action)

            async def endpoint(request: Request) -> JSON:
                transaction_id = request.path_params["transaction_id"]

                def handle(conn: Connection, caller: Agent | None, body: dict[str, Any]) -> tuple[int, Any]:
                    return 200, operation(conn, _agent(caller), transaction_id, body, self.clock())
                return await serve(request, handle, partial(self._expire, transaction_id) if action == "negotiate" else None)
            return endpoint

        return [PlainRoute("POST", f"{PREFIX}/transactions", open_transaction),
                *(PlainRoute("POST", f"{PREFIX}/transactions/{{transaction_id}}/{action}", on_transaction(action))
                  for action in ("negotiate", "complete", "cancel"))]

    def _expire(self, transaction_id: str) -> None:
        """Cancel the transaction if its offer expired, in a write of its own (kept when the message
        is then refused), and only when it did: a read tells first."""
        now = self.clock()
        with self.db.read() as conn:
            due = service.expiry_due(conn, transaction_id, now)
        if due:
            with self.db.write() as conn:
                service.enforce_expiry(conn, transaction_id, now)


def _agent(caller: Agent | None) -> Agent:
    assert caller is not None  # authenticated routes only
    return caller


def _expiry_due(data: Any, now: datetime) -> bool:
    """A transaction view whose offer has expired but is still shown as negotiating."""
    if not isinstance(data, dict) or data.get("status") != service.NEGOTIATING:
        return False
    expires = data.get("offerExpiresAt")
    return expires is not None and datetime.fromisoformat(expires) <= now


def _page_limit(request: Request) -> int:
    value = query_integer(request.query_params.get("limit"), "limit", low=1, high=MAX_PAGE)
    return 50 if value is None else value


def _optional_int(request: Request, name: str, high: int) -> int | None:
    return query_integer(request.query_params.get(name), name, low=0, high=high)
