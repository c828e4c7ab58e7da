"""Assembling the store: one FastAPI app serving negotiate.v1 and the store's pages."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from typing import AsyncIterator, Callable, cast

from fastapi import FastAPI, Request
from fastapi.responses import Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from haggler import __version__
from haggler.agents.llm_merchant import LLMMerchant, MerchantMode
from haggler.protocols.agents_json import views as agents_json_views
from haggler.protocols.agents_json.cart import CartService
from haggler.protocols.agents_json.routes import BODY_WORDING as AGENTS_JSON_BODIES
from haggler.protocols.agents_json.routes import build_router as agents_json_router
from haggler.protocols.agents_json.service import AgentsService
from haggler.protocols.agents_json.sessions import RateLimiter, SessionService
from haggler.protocols.agents_json.trail import AuditTrail
from haggler.commerce.counter_offers import Caller, CounterOffers
from haggler.commerce.order_events import MAIL, Door, OrderEvents
from haggler.order_mail import OrderMail
from haggler.protocols.negotiate_v1 import views as negotiate_v1_views
from haggler.protocols.negotiate_v1.routes import BODY_WORDING as NEGOTIATE_V1_BODIES
from haggler.protocols.negotiate_v1.routes import build_routes as negotiate_v1_routes
from haggler.protocols.negotiate_v1.service import ChatService
from haggler.protocols.market import views as market_views
from haggler.protocols.market.routes import BODY_WORDING as MARKET_BODIES
from haggler.protocols.market.routes import PREFIX as MARKET_PREFIX
from haggler.protocols.market.routes import Market
from haggler.protocols.matching import mcp_tools
from haggler.protocols.matching import views as matching_views
from haggler.protocols.matching.routes import BODY_WORDING as MATCHING_BODIES
from haggler.protocols.matching.routes import PATH_PREFIXES as MATCHING_PATHS
from haggler.protocols.matching.routes import PREFIX as MATCHING_PREFIX
from haggler.protocols.matching.routes import Matching
from haggler.protocols.transactions import views as transactions_views
from haggler.protocols.transactions.routes import BODY_WORDING as EXCHANGE_BODIES
from haggler.protocols.transactions.routes import PREFIX as EXCHANGE_PREFIX
from haggler.protocols.transactions.routes import Exchange
from haggler.protocols.acp import views as acp_views
from haggler.protocols.acp.routes import BODY_WORDING as ACP_BODIES
from haggler.protocols.acp.routes import PATH_PREFIXES as ACP_PATHS
from haggler.protocols.acp.routes import build_router as acp_router
from haggler.protocols.acp.service import AcpService
from haggler.protocols.ucp import views as ucp_views
from haggler.protocols.ucp.routes import BODY_WORDING as UCP_BODIES
from haggler.protocols.ucp.routes import PATH_PREFIXES as UCP_PATHS
from haggler.protocols.ucp.routes import build_router as ucp_router
from haggler.protocols.ucp.service import UcpService
from haggler.payments.handler import PaymentHandler
from haggler.payments.simulated import SimulatedPaymentHandler
from haggler.server.clientip import resolved_client
from haggler.server.config import StoreConfig
from haggler.server.cors import OpenCORSMiddleware
from haggler.server.edge import RequestEdge, base_url
from haggler.server.errors import CLOSED_SHAPES_STATE, ENVELOPE_PREFIX, ERROR_SHAPES_STATE, ErrorShape
from haggler.server.errors import install_error_handlers
from haggler.server.hosts import AllowedHosts
from haggler.server.leader import Leadership, leadership_for
from haggler.server.limits import Limits
from haggler.server.metrics import METRICS_PATH, Metrics
from haggler.server.openapi import Operation, install_openapi
from haggler.server.plain_routes import install_plain_routes
from haggler.server.write_lane import WriteLane
from haggler.server.request_log import RequestLog
from haggler.server.responses import JSON
from haggler.storage.database import Database, open_database
from haggler.trust.keys import P256, SigningKeys
from haggler.web import api_docs, continue_page
from haggler.web import routes as storefront
from haggler.web.admin.routes import admin_router
from haggler.web.checkout_routes import build_router as deal_checkout_router
from haggler.web.checkout_routes import openapi_operations as checkout_views
from haggler.web.deal_checkout import DealCheckout

log = logging.getLogger("haggler")
OPENAPI_PATH = "/openapi.json"


class Health(BaseModel):
    ok: bool


def _merchant_model(config: StoreConfig) -> LLMMerchant | None:
    """The merchant's model for an ``llm-voice`` or ``llm`` store, None for the deterministic one."""
    settings = config.merchant
    if settings.mode == "deterministic":
        return None
    if config.merchant_model is None:
        raise ValueError(f"the {settings.mode} merchant needs a model (--llm-provider and --llm-model)")
    instructions = settings.skill.instructions if settings.skill else None
    return LLMMerchant(config.merchant_model, cast(MerchantMode, settings.mode), instructions=instructions)


def create_app(config: StoreConfig, database: Database | None = None) -> FastAPI:
    """Build the store app. The database is opened (and migrated) here unless given."""
    db = database or open_database(config.db_url, background_checkpoints=True, timeout=config.db_timeout_seconds)
    service = ChatService(config.catalog, db, config.limits, config.clock, seed=config.seed,
                          merchant=config.merchant, model=_merchant_model(config))
    trusted = config.trusted_proxies
    hosts = AllowedHosts.for_store(config.allowed_hosts, config.public_url)

    # Resolved once per request (a market message asks up to three times), kept in its scope.
    def client_of(request: HTTPConnection) -> str:
        return resolved_client(request.scope, trusted)[0]

    def is_local(request: HTTPConnection) -> bool:
        return resolved_client(request.scope, trusted)[1]

    limits = Limits(db, config.clock, config.client_limits, client_of=client_of, is_local=is_local,
                    limit_loopback=config.limits.limit_loopback)
    # The store's signing keys, each loaded (or created, and checked for safe permissions) at start-up
    # by whoever signs with it, so that a bad key file stops the store here rather than at the first
    # artifact or webhook: Ed25519 for the agents.json audit trail, P-256 (ES256) for UCP's order
    # webhooks and AP2 merchant authorizations.
    keys = SigningKeys(config.data_dir)
    agents = _agents_service(config, db, keys)
    exchange = Exchange(db, config.clock, limits, config.exchange)
    matching = Matching(db, config.clock, config.matching, limits)
    matching_mcp = mcp_tools.build_server(matching)
    market = Market(db, config.clock, limits, config.market, operator_token=config.matching.operator_token)
    handlers = _payment_handlers(config)  # one registry for every checkout protocol
    counter_offers = CounterOffers(service, config.catalog, negotiate_v1_views.checkout_url,
                                   deal_ttl=config.agents.deal_ttl, max_turns=config.limits.max_messages_per_chat,
                                   enabled=config.checkout_counter_offers)
    ucp_keys = SigningKeys(config.data_dir, P256)
    ucp = UcpService(db, config.clock, config.ucp, handlers, signer=ucp_keys, catalog=config.catalog,
                     deal_ttl=config.agents.deal_ttl, counter_offers=counter_offers) if config.ucp.enabled else None
    if ucp is not None:
        ucp_keys.public_key_b64  # loads (or creates) it now, see above
    acp = AcpService(db, config.clock, config.acp, handlers, catalog=config.catalog, deal_ttl=config.agents.deal_ttl,
                     counter_offers=counter_offers) if config.acp.enabled else None

    # One sender of every door's order events left unsent (order_events.py), run by the sweep: the
    # platforms' webhooks, and the buyers' confirmation mails when the store has an SMTP server.
    doors: dict[str, Door] = {**(ucp.events.doors if ucp else {}), **(acp.events.doors if acp else {})}
    if config.mail.enabled:
        doors[MAIL] = OrderMail(config.mail, db, config.catalog.store.name)
    order_events = OrderEvents(db, config.clock, doors, default_base=config.public_url) if doors else None

    def caller_of(request: HTTPConnection) -> Caller:
        return Caller(client_of(request), is_local(request))

    leadership = leadership_for(db)
    metrics = Metrics(db, config.matching.operator_token, leadership)

    def sweep() -> None:
        # Each job on its own: one failing must not starve the others.
        for name, job, done in (("chats", service.sweep, "closed %d idle chats"),
                                ("agent_sessions", agents.sweep, "ended %d expired agent sessions"),
                                ("exchange", exchange.sweep, "cancelled %d transactions whose offer expired"),
                                ("matching", matching.sweep, "applied deadlines to %d match negotiations"),
                                ("market", market.sweep, "expired %d market deals left unsigned"),
                                *((("ucp", ucp.sweep, "forgot %d answered UCP idempotency keys"),) if ucp else ()),
                                *((("acp", acp.sweep, "forgot %d answered ACP idempotency keys"),) if acp else ()),
                                *((("order_events", order_events.deliver_due, "sent %d order events that were due"),)
                                  if order_events else ())):
            try:
                count = job()
            except Exception:
                metrics.sweeps.labels(name, "failed").inc()
                log.exception("sweep job failed: %s", done.split(" %d ")[0])
                continue
            metrics.sweeps.labels(name, "ok").inc()
            if count:
                log.info(done, count)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # Everything built so far (framework, catalog, engines) lives as long as the process:
        # moving it out of the collector's reach keeps full GC passes short on the turn path.
        gc.collect()
        gc.freeze()
        # The WAL checkpoint is this process's own; the store-wide jobs run in the leader only.
        tasks = [asyncio.create_task(_every(1.0, db.checkpoint, "WAL checkpoint"))] if db.is_sqlite else []
        if config.sweep_interval_seconds:
            tasks.append(asyncio.create_task(_every(config.sweep_interval_seconds, _led(leadership, sweep),
                                                    "idle sweep")))
        if config.market.clear_interval_seconds:
            tasks.append(asyncio.create_task(_every(config.market.clear_interval_seconds,
                                                    _led(leadership, market.clear_all), "scheduled market clearing")))
        try:
            # The MCP transport's task group: stateless requests each run in it.
            async with matching_mcp.session_manager.run():
                yield
        finally:
            for task in tasks:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            leadership.close()
            await db.dispose_on_loop()

    # /docs is the store's own page (web/api_docs.py), not FastAPI's, which loads Swagger UI from a CDN.
    app = FastAPI(title=config.catalog.store.name, version=__version__, docs_url=None, redoc_url=None,
                  openapi_url=OPENAPI_PATH, lifespan=lifespan,
                  description="A haggler store: negotiate.v1 chat, the agents.json surface, the /v1 "
                              "transactions exchange, /api match negotiation and the /market agent-native market.")
    app.state.service = service
    app.state.agents = agents
    app.state.exchange = exchange
    app.state.matching = matching
    app.state.market = market
    # SQLite takes one writer at a time: two slots keep one thread ready while another
    # commits (PostgreSQL's turns run on the event loop: storage/database.py, run_on_loop).
    # First: the lane that serves them is the innermost middleware.
    writes = WriteLane(db, slots=2)
    market_router, market_writes = market.routes(writes)
    agents_router, agents_plain = agents_json_router(agents, base_url, client_of, writes)
    install_plain_routes(app, [*negotiate_v1_routes(service, base_url, client_of, is_local, writes),
                               *matching.plain_routes(writes), *exchange.plain_routes(writes), *market_writes,
                               *agents_plain])
    # Inside the error edge's catch-all (added next), outside the routes whose errors it shapes.
    app.add_middleware(RequestEdge, hosts=hosts, trusted_proxies=trusted, public_url=config.public_url,
                       wordings=((ENVELOPE_PREFIX, AGENTS_JSON_BODIES), (EXCHANGE_PREFIX, EXCHANGE_BODIES),
                                *((prefix, MATCHING_BODIES) for prefix in MATCHING_PATHS), (MARKET_PREFIX, MARKET_BODIES),
                                *((prefix, UCP_BODIES) for prefix in UCP_PATHS),
                                *((prefix, ACP_BODIES) for prefix in ACP_PATHS)),
                       default_wording=NEGOTIATE_V1_BODIES, max_body_bytes=config.max_body_bytes)
    install_error_handlers(app)
    app.include_router(storefront.build_router(config.catalog, base_url))
    app.include_router(agents_router)
    app.include_router(deal_checkout_router(DealCheckout(config.catalog, db, config.clock,
                                                         deal_ttl=config.agents.deal_ttl), writes))
    app.include_router(exchange.router())
    app.include_router(matching.router())
    app.include_router(market_router)
    app.include_router(admin_router(config, db, limits))
    shapes: list[tuple[tuple[str, ...], ErrorShape]] = []
    app.state.order_events = order_events
    if ucp is not None:
        app.state.ucp = ucp
        app.include_router(ucp_router(ucp, base_url, caller_of))
        app.include_router(continue_page.build_router(ucp, config.catalog))
        shapes.append((UCP_PATHS, ucp_views.error))
    if acp is not None:
        app.state.acp = acp
        app.include_router(acp_router(acp, base_url, caller_of))
        shapes.append((ACP_PATHS, acp_views.error))
        # ACP's Error allows no field of its own: no request_id in the body (X-Request-Id has it).
        setattr(app.state, CLOSED_SHAPES_STATE, ACP_PATHS)
    # Each protocol's paths answer errors in its own shape, wherever they are raised (server/errors.py).
    setattr(app.state, ERROR_SHAPES_STATE, tuple(shapes))
    app.include_router(api_docs.build_router(app.title, OPENAPI_PATH))
    # Spec 002 "MCP Tools": a plain route (not a Mount), so /mcp has no redirect and other paths
    # keep the app's own 404; it still passes the request edge and CORS like every route.
    app.router.routes.extend(mcp_tools.mount(matching_mcp))

    @app.get("/healthz")
    def healthz() -> JSON:
        return JSON({"ok": True})

    @app.get(METRICS_PATH, include_in_schema=False)
    def metrics_text(request: Request) -> Response:
        return metrics.endpoint(request, limits)

    install_openapi(app, [
        negotiate_v1_views.openapi_operations(),
        storefront.openapi_operations(),
        agents_json_views.openapi_operations(agents.capabilities, checkout_page=agents.cart is not None),
        checkout_views(),
        transactions_views.openapi_operations(EXCHANGE_PREFIX),
        matching_views.openapi_operations(MATCHING_PREFIX),
        market_views.openapi_operations(MARKET_PREFIX),
        {("get", "/healthz"): Operation("Liveness", {200: Health})},
    ])

    app.add_middleware(OpenCORSMiddleware)
    # Outermost: every answer gets its id, is counted and logged, the edge's refusals and CORS
    # preflights included.
    app.add_middleware(RequestLog, metrics=metrics, access_log=config.access_log, trusted_proxies=trusted)
    app.state.metrics = metrics
    return app


def _payment_handlers(config: StoreConfig) -> dict[str, PaymentHandler]:
    """The handlers the checkout protocols charge through, by id: the configured ones, and the
    simulated one (it takes no money) only on a store run with a simulation secret."""
    handlers: dict[str, PaymentHandler] = {h.id: h for h in config.payment_handlers}
    if config.ucp.simulation_secret is not None:
        simulated = SimulatedPaymentHandler()
        handlers.setdefault(simulated.id, simulated)
    return handlers


def _agents_service(config: StoreConfig, db: Database, keys: SigningKeys) -> AgentsService:
    settings = config.agents
    sessions = SessionService(db, config.clock, ttl_seconds=settings.session_ttl_seconds,
                              max_sessions=settings.max_sessions)
    limiter = RateLimiter(db, config.clock, settings.requests_per_minute)
    trail = None
    if settings.audit_enabled:
        site = {"name": config.catalog.store.name, "url": config.public_url} if config.public_url else \
            config.catalog.store.name
        trail = AuditTrail(db, keys, site, config.clock)
    cart = CartService(config.catalog, db, config.clock, deal_ttl=settings.deal_ttl)
    return AgentsService(config.catalog, sessions, limiter, settings,
                         public_key=trail.keys.public_key_b64 if trail else None, trail=trail, cart=cart)


def _led(leadership: Leadership, job: Callable[[], object]) -> Callable[[], object]:
    """``job``, run only while this process leads the store's workers (``server/leader.py``)."""
    def run() -> object:
        return job() if leadership.leads() else None
    return run


async def _every(interval: float, job: Callable[[], object], what: str) -> None:
    """Run ``job`` in a worker thread every ``interval`` seconds until cancelled. Deadlines
    do not depend on it: the idle TTL is also enforced whenever a chat is touched."""
    while True:
        await asyncio.sleep(interval)
        try:
            await run_in_threadpool(job)
        except Exception:  # keep going; the next round retries
            log.exception("%s failed", what)
