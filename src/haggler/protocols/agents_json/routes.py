"""HTTP for the agents.json surface: the manifest, sessions, the audit artifacts, the checkout
page, and one route per declared capability, each answering in the spec's envelope
(``{"ok": true, "data": ...}``; errors are ``{"ok": false, "error": "..."}``, made by the
app's error edge). What each call does is :class:`AgentsService`'s; this module only reads
requests and writes responses.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from starlette.concurrency import run_in_threadpool

from haggler.errors import InvalidInput
from haggler.protocols.agents_json.capabilities import AUDIT_PATH, SESSION_PATH, Capability
from haggler.protocols.agents_json.service import AgentsService
from haggler.server.responses import JSON

__all__ = ["SESSION_HEADER", "build_router"]

SESSION_HEADER = "X-Agent-Session"
MANIFEST_PATH = "/.well-known/agents.json"
#: Where the human completes a checkout (the page the checkout capability hands off to).
CHECKOUT_PAGE_PATH = "/checkout/cart/{checkout_id}"
_MAX_BODY = 64 * 1024


def build_router(service: AgentsService, base_of: Callable[[Request], str],
                 client_of: Callable[[Request], str]) -> APIRouter:
    router = APIRouter()

    @router.get(MANIFEST_PATH)
    def manifest(request: Request) -> JSON:
        return JSON(service.manifest(client_of(request), base_of(request)))

    @router.post(SESSION_PATH, status_code=201)
    async def create_session(request: Request) -> JSON:
        body = await _json_body(request)
        data = await run_in_threadpool(lambda: service.create_session(client_of(request), body))
        return JSON({"ok": True, "data": data}, status_code=201)

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
        @router.get(CHECKOUT_PAGE_PATH, response_class=HTMLResponse)
        def checkout_page(checkout_id: str) -> HTMLResponse:
            return HTMLResponse(cart.checkout_page(checkout_id))

        @router.post(CHECKOUT_PAGE_PATH, response_class=HTMLResponse)
        def place_order(checkout_id: str) -> HTMLResponse:
            service.place_order(checkout_id)
            return HTMLResponse(cart.checkout_page(checkout_id))

    for capability in service.capabilities:
        router.add_api_route(capability.endpoint, _route(service, capability, base_of, client_of),
                             methods=[capability.method], name=capability.name)
    return router


def _route(service: AgentsService, capability: Capability, base_of: Callable[[Request], str],
           client_of: Callable[[Request], str]) -> Callable[..., Any]:
    def call(request: Request, raw: dict[str, Any], from_query: bool) -> JSON:
        data = service.call(capability, client=client_of(request), token=request.headers.get(SESSION_HEADER),
                            raw=raw, from_query=from_query, base=base_of(request))
        return JSON({"ok": True, "data": data})

    if capability.params_in_query:
        def in_query(request: Request) -> JSON:
            return call(request, dict(request.query_params), True)
        return in_query

    async def in_body(request: Request) -> JSON:
        body = await _json_body(request)
        if body is not None and not isinstance(body, dict):
            raise InvalidInput("the request body must be a JSON object of parameters")
        return await run_in_threadpool(call, request, body or {}, False)
    return in_body


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
