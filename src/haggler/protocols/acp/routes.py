"""HTTP for ACP: the discovery document at ``/.well-known/acp.json`` (public, as rfc.discovery.md
requires) and the checkout sessions at the store's root, for callers with the store's ACP key.
What each call does is :class:`AcpService`'s; this module reads headers and bodies and writes
answers. A caller without the key is answered 401 here (with ``WWW-Authenticate``); other errors
raised before the service answers (a missing header, a body that is not JSON) come out in ACP's
shape from the app's error edge (``views.error``).

The routes are left out of the store's ``/openapi.json``: ACP's own OpenAPI document describes them.
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import APIRouter, Request
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from haggler.commerce.idempotency import Kept
from haggler.errors import Unauthorized
from haggler.protocols.acp import views
from haggler.commerce.counter_offers import Caller
from haggler.protocols.acp.service import AcpService
from haggler.server.json_body import BodyWording, read_json_body
from haggler.server.responses import JSON

__all__ = ["BODY_WORDING", "DISCOVERY_PATH", "PATH_PREFIXES", "build_router"]

DISCOVERY_PATH = "/.well-known/acp.json"
SESSIONS_PATH = "/checkout_sessions"
#: The paths whose errors are ACP's shape.
PATH_PREFIXES = (SESSIONS_PATH, DISCOVERY_PATH)
BODY_WORDING = BodyWording(too_large="the request body is too large (at most {limit} bytes)",
                           not_object="the request body must be a JSON object")
#: How long agents may cache the discovery document (rfc.discovery.md §4.1: at least an hour).
_DISCOVERY_CACHE = "public, max-age=3600"


def _send(request: Request, kept: Kept, *, post: bool) -> JSON:
    """The answer with ACP's response headers: the request's ``Idempotency-Key`` and ``Request-Id``
    echoed, ``Idempotent-Replayed: true`` on a replay (rfc.agentic_checkout.md §3.1, §6.3); the
    work due after it (an order webhook) runs once it is sent."""
    headers = {}
    if post and request.headers.get("Idempotency-Key"):
        headers["Idempotency-Key"] = request.headers["Idempotency-Key"]
    if request.headers.get("Request-Id"):
        headers["Request-Id"] = request.headers["Request-Id"]
    if kept.replayed:
        headers["Idempotent-Replayed"] = "true"
    return JSON(kept.body, status_code=kept.status, headers=headers,
                background=BackgroundTask(kept.after) if kept.after is not None else None)


def build_router(service: AcpService, base_of: Callable[[Request], str],
                 caller_of: Callable[[Request], Caller]) -> APIRouter:
    """The ACP routes; ``base_of`` gives the base of every absolute link, ``caller_of`` who is
    calling (a cancel's counter-offer counts against the caller's chat starts)."""
    router = APIRouter()

    def refused(request: Request) -> JSON | None:
        """The refusal of a caller without the key (401 with ``WWW-Authenticate: Bearer``, RFC 6750
        §3) or without a supported ``API-Version`` (400, raised to the error edge); None: go on."""
        try:
            service.authorize(request.headers.get("Authorization"), request.headers.get("API-Version"))
        except Unauthorized as exc:
            return JSON(views.error(401, exc.message, exc.fields()), status_code=401,
                        headers={"WWW-Authenticate": 'Bearer realm="acp"'})
        return None

    async def _write(request: Request, operation: Callable[..., Kept], session_id: str, **more: object) -> JSON:
        """A POST on a session: the key holder checked, the body read at the edge, the work (which
        may wait on the payment handler) off the event loop, under the request's idempotency key."""
        if (refusal := refused(request)) is not None:
            return refusal
        body = await read_json_body(request, BODY_WORDING)
        key = request.headers.get("Idempotency-Key")
        return _send(request, await run_in_threadpool(operation, key, session_id, body, base_of(request), **more),
                     post=True)

    @router.get(DISCOVERY_PATH, include_in_schema=False)
    def discovery(request: Request) -> JSON:
        return JSON(service.discovery(base_of(request)), headers={"Cache-Control": _DISCOVERY_CACHE})

    @router.post(SESSIONS_PATH, include_in_schema=False)
    async def create(request: Request) -> JSON:
        if (refusal := refused(request)) is not None:
            return refusal
        body = await read_json_body(request, BODY_WORDING)
        key = request.headers.get("Idempotency-Key")
        return _send(request, await run_in_threadpool(service.create, key, body, base_of(request)), post=True)

    @router.get(SESSIONS_PATH + "/{session_id}", include_in_schema=False)
    def get(request: Request, session_id: str) -> JSON:
        if (refusal := refused(request)) is not None:
            return refusal
        return _send(request, service.get(session_id, base_of(request)), post=False)

    @router.post(SESSIONS_PATH + "/{session_id}", include_in_schema=False)
    async def update(request: Request, session_id: str) -> JSON:
        return await _write(request, service.update, session_id)

    @router.post(SESSIONS_PATH + "/{session_id}/complete", include_in_schema=False)
    async def complete(request: Request, session_id: str) -> JSON:
        return await _write(request, service.complete, session_id)

    @router.post(SESSIONS_PATH + "/{session_id}/cancel", include_in_schema=False)
    async def cancel(request: Request, session_id: str) -> JSON:
        return await _write(request, service.cancel, session_id, caller=caller_of(request))

    return router
