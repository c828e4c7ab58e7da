"""HTTP for the agents.json surface: the manifest, sessions, and one route per declared
capability, each answering in the spec's envelope (``{"ok": true, "data": ...}``; errors are
``{"ok": false, "error": "..."}``, made by the app's error edge).

Every route goes through :meth:`AgentsSurface.call`: count the request against the client's
per-minute limit, check the parameters against the capability's declaration, authenticate
the session when one is required (or offered), run the capability.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from haggler.catalog import Catalog
from haggler.errors import HagglerError, InvalidInput, NotFound
from haggler.protocols.agents_json import shelf
from haggler.protocols.agents_json.capabilities import (
    AUDIT_PATH,
    SESSION_PATH,
    Capability,
    parse_params,
    store_capabilities,
)
from haggler.protocols.agents_json.cart import CartService
from haggler.protocols.agents_json.sessions import AgentSession, RateLimiter, SessionService, end_session
from haggler.protocols.agents_json.trail import AuditTrail
from haggler.protocols.agents_json.views import AgentsSettings, build_manifest
from haggler.server.errors import status_for
from haggler.server.responses import JSON

__all__ = ["AgentsSurface", "Call", "SESSION_HEADER"]

SESSION_HEADER = "X-Agent-Session"
MANIFEST_PATH = "/.well-known/agents.json"
#: Where the human completes a checkout (the page the checkout capability hands off to).
CHECKOUT_PAGE_PATH = "/checkout/cart/{checkout_id}"
_MAX_BODY = 64 * 1024


@dataclass(frozen=True)
class Call:
    """One capability call, as its implementation sees it."""

    capability: Capability
    params: dict[str, Any]
    session: AgentSession | None
    base: str


#: A capability's implementation: the call → the ``data`` of the envelope.
Handler = Callable[[Call], Any]


class AgentsSurface:
    def __init__(self, catalog: Catalog, sessions: SessionService, limiter: RateLimiter, settings: AgentsSettings,
                 *, base_of: Callable[[Request], str], client_of: Callable[[Request], str],
                 public_key: str | None = None, trail: AuditTrail | None = None,
                 cart: CartService | None = None) -> None:
        self.catalog = catalog
        self.sessions = sessions
        self.limiter = limiter
        self.settings = settings
        self.base_of = base_of
        self.client_of = client_of
        self.public_key = public_key
        #: With audit on, every capability call in a session is recorded here.
        self.trail = trail
        self.handlers: dict[str, Handler] = {
            "search": lambda c: shelf.search(catalog, c.params["q"], c.params["page"], c.params["limit"], c.base),
            "browse": lambda c: shelf.browse(catalog, c.params["category"], c.params["sort"], c.params["page"],
                                             c.params["limit"], c.base),
            "detail": lambda c: shelf.detail(catalog, c.params["id"], c.base),
            "negotiate": lambda c: shelf.negotiation_pointer(catalog, c.params["id"], c.base),
        }
        if cart is not None:
            self.cart = cart
            self.handlers.update({
                "cart.add": lambda c: cart.add(_sid(c), c.params["item_id"], c.params["quantity"],
                                               c.params["deal_id"]).to_json(),
                "cart.view": lambda c: cart.view(_sid(c)).to_json(),
                "cart.update": lambda c: cart.update(_sid(c), c.params["item_id"], c.params["quantity"]).to_json(),
                "cart.remove": lambda c: cart.remove(_sid(c), c.params["item_id"]).to_json(),
                "checkout": lambda c: cart.checkout(_sid(c), c.base).to_json(),
            })
        self._declared = store_capabilities(shelf.categories(catalog))

    @property
    def capabilities(self) -> tuple[Capability, ...]:
        """The declared capabilities that have an implementation: exactly what the manifest lists."""
        return tuple(c for c in self._declared if c.name in self.handlers)

    def manifest(self, base: str) -> dict[str, Any]:
        store = self.catalog.store
        return build_manifest(site_name=store.name, site_url=base, description=store.tagline,
                              capabilities=self.capabilities, settings=self.settings, public_key=self.public_key)

    def sweep(self) -> int:
        """Background upkeep: end (and sign the trails of) expired sessions, forget old rate
        windows and artifacts past their retention. Returns how many sessions it ended."""
        now = self.sessions.clock()
        self.limiter.prune(now - 2 * RateLimiter.WINDOW)
        if self.trail is None:
            return 0
        ended = self.trail.finalize_expired(now)
        self.trail.prune(now)
        return ended

    # -- the call path ---------------------------------------------------------------------------

    def call(self, capability: Capability, request: Request, raw: dict[str, Any], from_query: bool) -> JSON:
        self.limiter.hit(self.client_of(request))
        token = request.headers.get(SESSION_HEADER)
        session = self.sessions.authenticate(token) if capability.requires_session or token else None
        params = parse_params(capability, raw, from_query=from_query)
        call = Call(capability, params, session, self.base_of(request))
        handler = self.handlers[capability.name]
        trail = self.trail
        if trail is None or session is None:
            return JSON({"ok": True, "data": handler(call)})
        try:
            # The call's effect (a cart change, a redeemed deal) and its audit event commit in
            # one transaction: a crash between them can never leave an unaudited change.
            with trail.db.write():
                data = handler(call)
                trail.record(session.id, **_event(call), policy_result="allowed", response_status=200)
        except HagglerError as exc:
            # The effect rolled back; the refusal is still part of what the agent did.
            trail.record(session.id, **_event(call), policy_result=f"refused: {exc.message}",
                         response_status=status_for(exc))
            raise
        return JSON({"ok": True, "data": data})

    def router(self) -> APIRouter:
        router = APIRouter()

        @router.get(MANIFEST_PATH)
        def manifest(request: Request) -> JSON:
            self.limiter.hit(self.client_of(request))
            return JSON(self.manifest(self.base_of(request)))

        @router.post(SESSION_PATH, status_code=201)
        async def create_session(request: Request) -> JSON:
            body = await _json_body(request)
            return await run_in_threadpool(self._create_session, request, body)

        @router.delete(SESSION_PATH)
        def end_session(request: Request) -> JSON:
            self.limiter.hit(self.client_of(request))
            session = self.sessions.authenticate(request.headers.get(SESSION_HEADER))
            self._end(session.id, "deleted")
            return JSON({"ok": True, "data": {"session_id": session.id, "ended": True}})

        @router.get(AUDIT_PATH + "/{session_id}")
        def audit_artifact(request: Request, session_id: str) -> JSON:
            """The signed artifact itself (not wrapped), so that it can be saved and verified as is."""
            self.limiter.hit(self.client_of(request))
            if self.trail is None:
                raise NotFound("audit trails are not enabled on this store")
            return JSON(self.trail.artifact(session_id))

        if self.handlers.get("checkout"):
            @router.get(CHECKOUT_PAGE_PATH, response_class=HTMLResponse)
            def checkout_page(checkout_id: str) -> HTMLResponse:
                return HTMLResponse(self.cart.checkout_page(checkout_id))

            @router.post(CHECKOUT_PAGE_PATH, response_class=HTMLResponse)
            def place_order(checkout_id: str) -> HTMLResponse:
                """The human's button: place the order once, and end the agent's session
                (checkout completion), signing its audit trail."""
                order, created = self.cart.place_order(checkout_id)
                if created:
                    self._end(order.session_id, "checkout")
                return HTMLResponse(self.cart.checkout_page(checkout_id))

        for capability in self.capabilities:
            router.add_api_route(capability.endpoint, self._route(capability), methods=[capability.method],
                                 name=capability.name)
        return router

    def _end(self, session_id: str, reason: str) -> None:
        with self.sessions.db.write() as conn:
            now = self.sessions.clock()
            if self.trail is not None:  # ends the session and signs its trail in one transaction
                self.trail.finalize(conn, session_id, ended_at=now, end_reason=reason)
            else:
                end_session(conn, session_id, reason, now)

    def _create_session(self, request: Request, body: object) -> JSON:
        client = self.client_of(request)
        self.limiter.hit(client)
        created = self.sessions.create(client, body)
        data = {"session_token": created.token, "session_id": created.session.id,
                "expires_at": created.session.expires_at.isoformat().replace("+00:00", "Z"),
                "capabilities": [c.name for c in self.capabilities]}
        return JSON({"ok": True, "data": data}, status_code=201)

    def _route(self, capability: Capability) -> Callable[..., Any]:
        if capability.params_in_query:
            def in_query(request: Request) -> JSON:
                return self.call(capability, request, dict(request.query_params), from_query=True)
            return in_query

        async def in_body(request: Request) -> JSON:
            body = await _json_body(request)
            if body is not None and not isinstance(body, dict):
                raise InvalidInput("the request body must be a JSON object of parameters")
            return await run_in_threadpool(self.call, capability, request, body or {}, False)
        return in_body


def _event(call: Call) -> dict[str, Any]:
    """The audit event fields that describe a capability call (unset optional params left out)."""
    capability = call.capability
    return {"capability": capability.name, "method": capability.method,
            "params": {k: v for k, v in call.params.items() if v is not None}}


def _sid(call: Call) -> str:
    assert call.session is not None  # cart capabilities require a session: checked before the call
    return call.session.id


async def _json_body(request: Request) -> object:
    """The request's JSON body, or None when it has none."""
    raw = await request.body()
    if not raw.strip():
        return None
    if len(raw) > _MAX_BODY:
        raise InvalidInput(f"the request body is too large (at most {_MAX_BODY} bytes)")
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"the request body is not valid JSON: {exc}") from None
