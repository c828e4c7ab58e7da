"""The agent-native market's JSON API under ``/market`` (spec 003), served by ``haggler serve``
from the same app and database as the other protocols.

Every request is one database transaction. Signed messages authenticate themselves (the
signature is checked against the key of the agent the message names); what carries no signed
message — the inbox, an agent's own views, cancelling an order — takes the agent token from
registration as ``Authorization: Bearer mkt_…``. Audit events a request raised are written even
when the request is refused: in its own transaction, after the refused one rolled back.
"""

from __future__ import annotations

import logging
from datetime import datetime
from functools import partial
from typing import Any, Callable, TypeVar

from fastapi import APIRouter, Request
from fastapi.responses import Response
from sqlalchemy import Connection
from starlette.concurrency import run_in_threadpool

from haggler.errors import Forbidden, NotFound, RateLimited
from haggler.protocols.fields import bearer_credential, query_integer
from haggler.protocols.market import audit, books, deals, identity, inbox, listings, requests, text_ads
from haggler.protocols.market.audit import AuditEvents
from haggler.protocols.market.identity import Agent
from haggler.protocols.market.messages import schema, schema_names
from haggler.protocols.market.settings import MarketSettings
from haggler.server.json_body import BodyWording, parse_json_body
from haggler.server.limits import Limits
from haggler.server.plain_routes import PlainRoute
from haggler.server.write_lane import WriteLane
from haggler.server.responses import JSON
from haggler.storage.database import Database
from haggler.storage.rows import row_by_id
from haggler.storage.schema import market_requests
from haggler.trust.hashing import is_secret

log = logging.getLogger("haggler")

PREFIX = "/market"
BODY_WORDING = BodyWording()
SCHEMA_TYPE = "application/schema+json"
#: The highest ``after`` cursor of the inbox and the audit log: their sequence numbers are
#: PostgreSQL ``integer``s, so a larger one is a 400 rather than a failed query.
MAX_CURSOR = 2**31 - 1
#: The most audit entries one page holds.
AUDIT_PAGE = 500

Handler = Callable[..., tuple[int, Any]]
T = TypeVar("T")
#: A check run in a write route's transaction once its handler succeeded: (conn, request, body, result).
After = Callable[[Connection, Request, Any, Any], None]


class Market:
    def __init__(self, db: Database, clock: Callable[[], datetime], limits: Limits,
                 settings: MarketSettings | None = None, operator_token: str | None = None) -> None:
        self.db = db
        self.clock = clock
        self.limits = limits
        self.settings = settings or MarketSettings()
        self.operator_token = operator_token

    # -- upkeep ---------------------------------------------------------------------------------------

    def clear_all(self) -> int:
        """The scheduled call auction: clear every book with orders on both sides; returns how
        many trades it made."""
        with self.db.read() as conn:
            items = books.books_to_clear(conn)
        trades = 0
        for item in items:
            try:
                events = AuditEvents()
                with self.db.write() as conn:
                    result = books.clear(conn, item, events, self.clock(), self.settings.deal_expiry)
                    events.write(conn, self.clock())
                trades += sum(c["trades"] for c in result["clearings"])
            except Exception:  # noqa: BLE001 - one broken book must not stop the others
                log.exception("could not clear book %s", item)
        return trades

    def sweep(self) -> int:
        """Expire every deal still pending past its expiry, a batch per transaction (the app's
        sweep loop); returns how many it expired."""
        now = self.clock()
        return self.db.in_batches(lambda conn: deals.expire_due(conn, now), deals.EXPIRY_BATCH)

    def _expire_deal(self, deal_id: str) -> None:
        """Expire the deal if it is due, in a transaction of its own, before a read or an action
        on it: so the read shows it expired, and the action's refusal does not roll the expiry back.
        Writes only when there is something to expire."""
        now = self.clock()
        with self.db.read() as conn:
            due = deals.is_due(conn, deal_id, now)
        if due:
            with self.db.write() as conn:
                deals.expire_if_due(conn, deal_id, now)

    # -- one action, whichever door it came through ------------------------------------------------------

    def act(self, action: Callable[[Connection, AuditEvents], T], count: Callable[[], None] | None = None) -> T:
        """Run ``action(conn, events)`` in one write transaction and keep the audit events it
        raised whatever happens: with its result when it succeeds, in a transaction of their own
        after the refused one rolled back when it fails (a signature that does not verify is
        logged for the agent it claimed to be). The HTTP routes and the Matrix door both act
        through here, so that a refusal leaves the same trace on either.

        ``count()``: a rate limit's count of the request (``server/limits.py``, whose write joins
        the open one), run first in the action's transaction, as one write rather than two; its
        refusal (429) is the action's. A refused or failed action's count must stick all the
        same — a client must not escape the limit by sending messages the market refuses — so it
        is counted again beside the audit events once the action's transaction rolled back."""
        events = AuditEvents()
        # The count, once it ran in the action's transaction: undone if that rolls back.
        counted: Callable[[], None] | None = None
        try:
            with self.db.write() as conn:
                if count is not None:
                    count()
                    counted = count
                result = action(conn, events)
                events.write(conn, self.clock())
        except Exception as exc:
            if isinstance(exc, identity.BadSignature):
                events.add(exc.agent_id, audit.BAD_SIGNATURE, {"signed": exc.signed})
            if counted is not None or events.events:
                with self.db.write() as conn:
                    if counted is not None:
                        _count_again(counted)
                    events.write(conn, self.clock())
            raise
        return result

    # -- who is calling -------------------------------------------------------------------------------

    def _agent(self, request: Request) -> Agent:
        with self.db.read() as conn:
            return self._caller(conn, request)

    def _caller(self, conn: Connection, request: Request) -> Agent:
        """The agent whose token the request carries; 401 otherwise, a wrong token counted toward
        the store's wrong-token limit (429 past it: ``server/limits.py``)."""
        authorization = request.headers.get("authorization")
        return self.limits.authenticated(request, authorization, lambda: identity.authenticate(conn, authorization))

    def _is_operator(self, request: Request) -> bool:
        """Whether the request carries the operator token. A wrong one is not counted here: the
        route then asks for an agent token, and that failing counts (once)."""
        header = request.headers.get("authorization")
        if self.operator_token is None or not header:
            return False
        credential = bearer_credential(header, "your agent token or the operator token")
        self.limits.pace(request)
        return is_secret(credential, self.operator_token)

    # -- routes ---------------------------------------------------------------------------------------

    def routes(self, in_writer: WriteLane) -> tuple[APIRouter, list[PlainRoute]]:
        """The market's routes: its reads under an ``APIRouter``, and its writes as plain routes
        (``server/plain_routes.py``) for the app to install: every write reads its body and path
        itself, so FastAPI's routing and parameter solving, a tenth of a negotiation message's
        server CPU, bought nothing. A write runs in ``in_writer`` (``server/write_lane.py``): on
        the event loop unless the database is busy, sparing most messages the hop to a worker
        thread and back."""
        router = APIRouter(prefix=PREFIX)
        plain: list[PlainRoute] = []
        now = self.clock
        settings = self.settings
        message = self.limits.agent_message

        def write(path: str, handler: Handler, *, method: str = "POST", body: bool = True,
                  caller: bool = False, limit: Callable[[Request], None] | None = None,
                  after: After | None = None, expires_deal: bool = False) -> None:
            """``handler(conn, [caller,] [body,] audit, **path_params) -> (status, data)`` runs in
            one write transaction; its audit events are kept whatever happens. ``limit(request)``
            counts the request in that transaction, first, and the count sticks even when the
            request is refused (:meth:`Market.act`); ``after`` checks a success in its transaction,
            so that its refusal rolls the success back. The body is parsed inside the action, so
            that a malformed one is counted too.

            ``expires_deal``: the route acts on the deal ``{deal_id}``, which is expired first when
            it is due, in a transaction of its own (after authentication), so that the expiry
            sticks even if the request is refused. The action's transaction looks first: a due
            deal rolls it back before it did anything, the expiry is written, and the action runs
            again — rather than a read transaction of its own before every action, for the rare
            deal that is due.

            Safe to run again from the start, as the lane may: what it writes before its action (a
            due deal's expiry) is the same when done twice, and the count is in the action's
            transaction."""
            # What ran before the action would escape the count: a limited route has none of it.
            if limit is not None and (caller or expires_deal):
                raise ValueError(f"{path}: a rate-limited route counts in its action, so it can have no caller "
                                 "check or deal expiry running before it")

            async def endpoint(request: Request) -> Response:
                raw = await request.body()

                def handle() -> Response:
                    who = self._agent(request) if caller else None

                    def run(conn: Connection, events: AuditEvents, *, expired: bool = False) -> tuple[int, Any]:
                        if expires_deal and not expired and deals.is_due(conn, request.path_params["deal_id"], now()):
                            raise _DueDeal
                        args: list[Any] = [who] if caller else []
                        parsed = parse_json_body(raw, BODY_WORDING) if body else None
                        if body:
                            args.append(parsed)
                        status, data = handler(conn, *args, events, **request.path_params)
                        if after is not None:
                            after(conn, request, parsed, data)
                        return status, data
                    count = None if limit is None else partial(limit, request)
                    try:
                        status, data = self.act(run, count)
                    except _DueDeal:
                        self._expire_deal(request.path_params["deal_id"])
                        status, data = self.act(partial(run, expired=True), count)
                    return JSON(data, status_code=status)
                return await in_writer(handle)
            plain.append(PlainRoute(method, PREFIX + path, endpoint))

        def get(path: str, view: Callable[..., Any]) -> None:
            def endpoint(request: Request) -> Response:
                with self.db.read() as conn:
                    return view(conn, request, **request.path_params)
            router.add_api_route(path, endpoint, methods=["GET"])

        # schemas and identity
        get("/schemas", lambda conn, request: JSON({"schemas": [
            {"type": name, "title": schema(name)["title"], "url": f"{PREFIX}/schemas/{name}.json"}
            for name in schema_names()]}))

        def schema_file(conn: Connection, request: Request, name: str) -> Response:
            if name not in schema_names():
                raise NotFound(f"no schema {name!r}; GET {PREFIX}/schemas lists them")
            return JSON(schema(name), media_type=SCHEMA_TYPE)
        get("/schemas/{name}.json", schema_file)

        def register(conn: Connection, body: Any, events: AuditEvents) -> tuple[int, Any]:
            agent, token = identity.register(conn, body, now())
            return 201, {**agent.view(), "token": token}
        write("/agents", register, limit=self.limits.registration)
        get("/agents/{agent_id}", lambda conn, request, agent_id: JSON(_known_agent(conn, agent_id).view()))

        write("/mandates", lambda conn, body, events: deals.file_mandate(conn, body, events, now()))

        def own_mandate(conn: Connection, request: Request, agent_id: str) -> Response:
            caller = self._caller(conn, request)
            if caller.id != agent_id:
                raise Forbidden("a mandate's constraints are shown to its own agent only")
            document = identity.mandate_document(conn, agent_id)
            if document is None:
                raise NotFound(f"no mandate on file for {agent_id}")
            return JSON(document)
        get("/mandates/{agent_id}", own_mandate)

        # listings and wanted ads
        write("/listings", lambda conn, body, events: listings.post_listing(conn, body, events, now()), limit=message)
        get("/listings", lambda conn, request: JSON(text_ads.search_with_unsigned(
            conn, text_ads.SELLING, dict(request.query_params), now())))

        def one_listing(conn: Connection, request: Request, listing_id: str) -> Response:
            viewer = self._caller(conn, request) \
                if request.headers.get("authorization") else None
            return JSON(listings.view_for(conn, listing_id, viewer, now()))
        get("/listings/{listing_id}", one_listing)
        write("/listings/{listing_id}/instant_match",
              lambda conn, body, events, listing_id: (201, requests.instant(conn, listing_id, body, events, now(),
                                                                            settings.deal_expiry)),
              limit=message)
        write("/wanted", lambda conn, body, events: (201, listings.post_wanted(conn, body, events, now())),
              limit=message)
        get("/wanted", lambda conn, request: JSON(text_ads.search_with_unsigned(
            conn, text_ads.BUYING, dict(request.query_params), now())))

        # unsigned plain-text ads from the Matrix market room (posted by the market bot, not here)
        get("/ads/{ad_id}", lambda conn, request, ad_id: JSON(text_ads.view(conn, ad_id)))

        # the inbox
        def read_inbox(conn: Connection, request: Request) -> Response:
            agent = self._caller(conn, request)
            after, limit = _page(request, inbox.MAX_PAGE)
            return JSON(inbox.read(conn, agent.id, after, limit))
        get("/inbox", read_inbox)

        # contact, agreement, sealed bids, offers
        def contact_bound(conn: Connection, request: Request, message: Any, data: Any) -> None:
            # The handler verified the buyer's signature: the message names its real sender.
            seller = row_by_id(conn, market_requests, data["requestId"], "request").seller_id
            self.limits.contact(conn, request, message["buyer"]["agentId"], seller)
        write("/contact", lambda conn, body, events: (201, requests.contact(conn, body, events, now())),
              limit=message, after=contact_bound)

        def one_request(conn: Connection, request: Request, request_id: str) -> Response:
            return JSON(requests.view(conn, request_id, self._caller(conn, request)))
        get("/contact/{request_id}", one_request)
        write("/contact/{request_id}/agreement",
              lambda conn, body, events, request_id: (200, requests.agree(conn, request_id, body, events, now())),
              limit=message)
        write("/contact/{request_id}/bids",
              lambda conn, body, events, request_id: requests.bid(conn, request_id, body, events, now(),
                                                                 settings.deal_expiry), limit=message)
        write("/contact/{request_id}/offers",
              lambda conn, body, events, request_id: requests.make_offer(conn, request_id, body, events, now(),
                                                                        settings.offer_turn_cap, settings.deal_expiry),
              limit=message)

        # deals: each route expires a due deal first
        def read_deal(request: Request, deal_id: str) -> Response:
            # A deal that is not due (nearly every one) is served from the read that finds the
            # caller and checks it: one transaction, not three.
            with self.db.read() as conn:
                caller = self._caller(conn, request)
                if not deals.is_due(conn, deal_id, now()):
                    return JSON(deals.view(conn, deal_id, caller))
            self._expire_deal(deal_id)
            with self.db.read() as conn:
                return JSON(deals.view(conn, deal_id, caller))

        async def one_deal(request: Request, deal_id: str) -> Response:
            # In the write lane, as the writes: on the event loop unless a due deal's expiry
            # would wait, rather than a worker thread each time (the hop there and back cost
            # more than the read). Safe to run again: a read, and an expiry done twice is one.
            return await in_writer(read_deal, request, deal_id)
        router.add_api_route("/deals/{deal_id}", one_deal, methods=["GET"])
        write("/deals/{deal_id}/signatures",
              lambda conn, body, events, deal_id: (200, deals.sign(conn, deal_id, body, events, now)),
              expires_deal=True)
        write("/deals/{deal_id}/approvals",
              lambda conn, body, events, deal_id: (200, deals.approve(conn, deal_id, body, events, now)),
              expires_deal=True)
        write("/deals/{deal_id}/cancel",
              lambda conn, caller, events, deal_id: (200, deals.cancel(conn, deal_id, caller, now())),
              body=False, caller=True, expires_deal=True)

        # the double auction
        write("/books/{item}/orders",
              lambda conn, body, events, item: (201, books.place(conn, books.check_item(item), body, events, now())))
        write("/books/{item}/orders/{order_id}", lambda conn, caller, events, item, order_id:
              (200, books.cancel(conn, books.check_item(item), order_id, caller)), method="DELETE", body=False,
              caller=True)
        get("/books/{item}", lambda conn, request, item: JSON(books.depth(conn, books.check_item(item))))

        async def clear_book(request: Request, item: str) -> Response:
            def handle() -> Response:
                if not self._is_operator(request):
                    self._agent(request)  # any registered agent may call the auction
                books.check_item(item)
                return JSON(self.act(lambda conn, events: books.clear(conn, item, events, now(),
                                                                      settings.deal_expiry)))
            return await run_in_threadpool(handle)
        router.add_api_route("/books/{item}/clear", clear_book, methods=["POST"])

        # the audit log
        def read_audit(conn: Connection, request: Request) -> Response:
            after, limit = _page(request, AUDIT_PAGE)
            agent_id = None if self._is_operator(request) else \
                self._caller(conn, request).id
            return JSON({"entries": audit.entries(conn, agent_id, after=after, limit=limit)})
        get("/audit", read_audit)
        return router, plain


class _DueDeal(Exception):
    """The deal a route acts on is due to expire: its action's transaction rolls back, having
    done nothing, for the expiry to be written in a transaction of its own."""


def _count_again(count: Callable[[], None]) -> None:
    """Count a refused request after its action's transaction rolled back. A refusal now (429:
    the limit filled meanwhile) counts nothing and changes nothing: the request was already
    answered, and the client is at its limit anyway."""
    try:
        count()
    except RateLimited:
        pass


def _known_agent(conn: Connection, agent_id: str) -> Agent:
    agent = identity.find(conn, agent_id)
    if agent is None:
        raise NotFound(f"unknown agent: {agent_id}")
    return agent


def _page(request: Request, most: int) -> tuple[int, int]:
    """A cursor page's ``?after=`` (default 0) and ``?limit=`` (default 100, at most ``most``)."""
    params = request.query_params
    _only_params(params, ("after", "limit"))
    after = query_integer(params.get("after"), "after", low=0, high=MAX_CURSOR) or 0
    return after, query_integer(params.get("limit"), "limit", low=1, high=most) or 100


def _only_params(params: Any, allowed: tuple[str, ...]) -> None:
    listings.only_params(dict(params), allowed)
