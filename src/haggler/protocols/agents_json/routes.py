"""HTTP for the agents.json surface: the manifest, sessions, the audit artifacts, the checkout
page, and one route per declared capability, each answering in the spec's envelope
(``{"ok": true, "data": ...}``; errors are ``{"ok": false, "error": "..."}``, made by the
app's error edge). What each call does is :class:`AgentsService`'s; this module only reads
requests and writes responses.

An agent's requests — a session, each capability call — are plain routes
(``server/plain_routes.py``): they read their requests themselves, so FastAPI's router walk and parameter solving were only overhead on them. Their
database work runs in the app's ``WriteLane`` (``server/write_lane.py``): on the event loop
unless the database is busy, rather than a hop to a worker thread and back for each. The rate
count is in the request's one transaction (``AgentsService``): the lane may run its work again
(in a thread), and a request must be counted once.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from haggler.errors import NotFound
from haggler.protocols.agents_json.capabilities import AUDIT_PATH, SESSION_PATH, Capability
from haggler.protocols.agents_json.service import AgentsService
from haggler.server.json_body import BodyWording, read_json_body
from haggler.server.plain_routes import PlainRoute
from haggler.server.responses import JSON
from haggler.server.write_lane import WriteLane
from haggler.web.checkout import cart_page, unknown_link_page
from haggler.web.checkout_routes import form_page, submit

__all__ = ["BODY_WORDING", "SESSION_HEADER", "build_router"]

SESSION_HEADER = "X-Agent-Session"
MANIFEST_PATH = "/.well-known/agents.json"
#: Where the human completes a checkout (the page the checkout capability hands off to).
CHECKOUT_PAGE_PATH = "/checkout/cart/{checkout_id}"
#: How this surface words a refused body (the request edge uses it for bodies over the size cap).
BODY_WORDING = BodyWording(too_large="the request body is too large (at most {limit} bytes)",
                           not_object="the request body must be a JSON object of parameters")
_SESSION_BODY = BODY_WORDING._replace(
    not_object="the session body must be a JSON object (agent_name, agent_version, purpose)")


def build_router(service: AgentsService, base_of: Callable[[Request], str],
                 client_of: Callable[[Request], str], in_writer: WriteLane) -> tuple[APIRouter, list[PlainRoute]]:
    """The surface's FastAPI routes, and its plain routes for the app to install
    (``install_plain_routes``)."""
    router = APIRouter()
    plain: list[PlainRoute] = []

    @router.get(MANIFEST_PATH)
    def manifest(request: Request) -> JSON:
        return JSON(service.manifest(client_of(request), base_of(request)))

    async def create_session(request: Request) -> JSON:
        body = await read_json_body(request, _SESSION_BODY)
        data = await in_writer(service.create_session, client_of(request), body)
        return JSON({"ok": True, "data": data}, status_code=201)
    plain.append(PlainRoute("POST", SESSION_PATH, create_session))

    @router.delete(SESSION_PATH)
    def end_session(request: Request) -> JSON:
        data = service.end_session(client_of(request), request.headers.get(SESSION_HEADER))
        return JSON({"ok": True, "data": data})

    @router.get(AUDIT_PATH + "/{session_id}")
    def audit_artifact(request: Request, session_id: str) -> JSON:
        """The signed artifact itself (not wrapped), so that it can be saved and verified as is."""
        return JSON(service.artifact(client_of(request), session_id))

    cart = service.cart
    if cart is not None:
        def page(checkout_id: str, values: dict[str, str] | None = None,
                 problems: dict[str, str] | None = None) -> HTMLResponse:
            try:
                state = cart.checkout_state(checkout_id)
            except NotFound:
                return HTMLResponse(unknown_link_page(cart.catalog), status_code=404)
            return form_page(cart_page(cart.catalog, state, values, problems), problems, state.order)

        @router.get(CHECKOUT_PAGE_PATH, response_class=HTMLResponse)
        def checkout_page(checkout_id: str) -> HTMLResponse:
            return page(checkout_id)

        # The placement runs in the write lane too: in a worker thread, it held SQLite's write lock
        # from there, and every agent's write that came meanwhile went to a thread as well.
        @router.post(CHECKOUT_PAGE_PATH, response_class=HTMLResponse)
        async def place_order(request: Request, checkout_id: str) -> Response:
            return await submit(request, cart.catalog, partial(in_writer, service.place_order, checkout_id),
                                partial(page, checkout_id), f"/checkout/cart/{checkout_id}")

    for capability in service.capabilities:
        route = PlainRoute(capability.method, capability.endpoint,
                           _route(service, capability, base_of, client_of, in_writer))
        route.name = capability.name  # the OpenAPI operationId FastAPI gave it: name, path, method
        plain.append(route)
    return router, plain


def _route(service: AgentsService, capability: Capability, base_of: Callable[[Request], str],
           client_of: Callable[[Request], str], in_writer: WriteLane) -> Callable[..., Any]:
    def serve(request: Request, raw: dict[str, Any], from_query: bool) -> Any:
        return service.call(capability, client=client_of(request), token=request.headers.get(SESSION_HEADER),
                            raw=raw, from_query=from_query, base=base_of(request))

    async def call(request: Request, raw: dict[str, Any], from_query: bool) -> JSON:
        data = await in_writer(serve, request, raw, from_query)
        return JSON({"ok": True, "data": data})

    if capability.params_in_query:
        async def in_query(request: Request) -> JSON:
            return await call(request, dict(request.query_params), True)
        return in_query

    async def in_body(request: Request) -> JSON:
        body = await read_json_body(request, BODY_WORDING)
        return await call(request, body, False)
    return in_body
