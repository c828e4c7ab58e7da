"""HTTP for UCP: the profile at ``/.well-known/ucp``, the REST binding's checkout sessions at the
store's root (the profile's ``rest.endpoint``), orders, and, only when the store runs with a
simulation secret, ``POST /testing/simulate-shipping/{order_id}``. What each call does is
:class:`UcpService`'s; this module only reads requests and writes responses. Errors on these paths
come out in UCP's shape (``views.error``) from the app's error edge.

The routes are left out of the store's ``/openapi.json``: UCP's own OpenAPI document, which the
profile names (``rest.schema``), is what describes them to a platform."""

from __future__ import annotations

from typing import Callable

from fastapi import APIRouter, Request
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from haggler.commerce.counter_offers import Caller
from haggler.commerce.idempotency import Kept
from haggler.protocols.ucp.service import UcpService
from haggler.protocols.ucp.views import PROFILE_PATH
from haggler.server.json_body import BodyWording, read_json_body
from haggler.server.responses import JSON

__all__ = ["BODY_WORDING", "PATH_PREFIXES", "PROFILE_PATH", "build_router"]

SESSIONS_PATH = "/checkout-sessions"
ORDERS_PATH = "/orders"
SIMULATE_SHIPPING_PATH = "/testing/simulate-shipping"
#: The paths whose errors are UCP's shape.
PATH_PREFIXES = (PROFILE_PATH, SESSIONS_PATH, ORDERS_PATH + "/", "/testing/")
BODY_WORDING = BodyWording(too_large="the request body is too large (at most {limit} bytes)",
                           not_object="the request body must be a JSON object")
_AGENT = "UCP-Agent"
_KEY = "idempotency-key"
_SECRET = "Simulation-Secret"


def _send(answer: Kept) -> JSON:
    return JSON(answer.body, status_code=answer.status,
                background=BackgroundTask(answer.after) if answer.after is not None else None)


def build_router(service: UcpService, base_of: Callable[[Request], str],
                 caller_of: Callable[[Request], Caller]) -> APIRouter:
    """The UCP routes; ``base_of`` gives the base of every absolute link (``rest.endpoint``,
    permalinks), ``caller_of`` who is calling (a cancel's counter-offer counts against the caller's
    chat starts)."""
    router = APIRouter()

    async def _write(request: Request, operation: Callable[..., Kept], target: str, **more: object) -> JSON:
        """A write on a session or an order: the body read at the edge, the work (which may wait on
        the payment handler) off the event loop, under the request's idempotency key."""
        body = await read_json_body(request, BODY_WORDING)
        h = request.headers
        return _send(await run_in_threadpool(operation, h.get(_AGENT), h.get(_KEY), target, body, base_of(request),
                                             **more))

    @router.get(PROFILE_PATH, include_in_schema=False)
    def profile(request: Request) -> JSON:
        return JSON(service.profile(base_of(request)))

    @router.post(SESSIONS_PATH, status_code=201, include_in_schema=False)
    async def create(request: Request) -> JSON:
        body = await read_json_body(request, BODY_WORDING)
        h = request.headers
        return _send(await run_in_threadpool(service.create, h.get(_AGENT), h.get(_KEY), body, base_of(request)))

    @router.get(SESSIONS_PATH + "/{session_id}", include_in_schema=False)
    def get(request: Request, session_id: str) -> JSON:
        return _send(service.get(request.headers.get(_AGENT), session_id, base_of(request)))

    @router.put(SESSIONS_PATH + "/{session_id}", include_in_schema=False)
    async def update(request: Request, session_id: str) -> JSON:
        return await _write(request, service.update, session_id)

    @router.post(SESSIONS_PATH + "/{session_id}/complete", include_in_schema=False)
    async def complete(request: Request, session_id: str) -> JSON:
        return await _write(request, service.complete, session_id)

    @router.post(SESSIONS_PATH + "/{session_id}/cancel", include_in_schema=False)
    async def cancel(request: Request, session_id: str) -> JSON:
        return await _write(request, service.cancel, session_id, caller=caller_of(request))

    @router.get(ORDERS_PATH + "/{order_id}", include_in_schema=False)
    def get_order(request: Request, order_id: str) -> JSON:
        return _send(service.get_order(request.headers.get(_AGENT), order_id, base_of(request)))

    @router.put(ORDERS_PATH + "/{order_id}", include_in_schema=False)
    async def update_order(request: Request, order_id: str) -> JSON:
        return await _write(request, service.update_order, order_id)

    if service.settings.simulation_secret is not None:
        @router.post(SIMULATE_SHIPPING_PATH + "/{order_id}", include_in_schema=False)
        def simulate_shipping(request: Request, order_id: str) -> JSON:
            return _send(service.simulate_shipping(request.headers.get(_SECRET), order_id, base_of(request)))

    return router
