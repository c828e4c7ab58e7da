"""negotiate.v1 (and its successor name, nash.v1) over HTTP: discovery, catalog, chat (GET, plus
the optional POSTs of §5). The pages for people — the storefront, its widget, a deal's checkout —
are ``haggler.web``'s."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Awaitable, Callable

import anyio.to_thread
from starlette.requests import Request

from haggler.catalog import PRODUCT_ID_PATTERN
from haggler.errors import InvalidInput, NotFound
from haggler.protocols.negotiate_v1 import views
from haggler.protocols.negotiate_v1.service import ChatService, Plan
from haggler.server.json_body import BodyWording, read_json_body
from haggler.server.plain_routes import PlainRoute
from haggler.server.responses import JSON, dump_json
from haggler.server.write_lane import WriteLane

_SESSION_ID = PRODUCT_ID_PATTERN  # tokens are URL-safe base64: the same alphabet
#: How the store words a refused body (the request edge uses it for bodies over the size cap).
BODY_WORDING = BodyWording(not_json="the request body is not valid JSON")


def build_routes(service: ChatService, base_of: Callable[[Request], str], client_of: Callable[[Request], str],
                 is_local: Callable[[Request], bool], in_writer: WriteLane) -> list[PlainRoute]:
    """negotiate.v1's routes, plain Starlette routes (``server/plain_routes.py``): the store's
    busiest paths, which read their requests themselves. ``client_of`` names a request's client
    for the chat-start limit, ``is_local`` says whether that client is this machine (exempt
    unless ``--limit-loopback``).

    Chat starts and turns run in ``in_writer`` (``server/write_lane.py``): on the event loop
    unless the database is busy."""
    catalog = service.catalog

    @lru_cache(maxsize=64)
    def descriptor_bytes(base: str, version: str) -> bytes:
        return dump_json(views.descriptor(catalog, service.limits, base, service.merchant, version))

    @lru_cache(maxsize=64)
    def catalog_bytes(base: str) -> bytes:
        return dump_json({"store": views.store_view(catalog.store),
                          "products": [views.product_view(p.facts, base, detailed=True) for p in catalog.products]})

    def discovery(version: str) -> Callable[[Request], Awaitable[JSON]]:
        async def serve(request: Request) -> JSON:
            return JSON(descriptor_bytes(base_of(request), version))
        return serve

    async def product_catalog(request: Request) -> JSON:
        return JSON(catalog_bytes(base_of(request)))

    def _start(request: Request, product_id: Any) -> JSON:
        if product_id is None or product_id == "":
            raise InvalidInput("missing parameter: product_id")
        if not isinstance(product_id, str) or not PRODUCT_ID_PATTERN.match(product_id):
            raise InvalidInput("malformed product_id")
        start = service.start(product_id, client_of(request), local=is_local(request))
        base = base_of(request)
        return JSON({"session_id": start.session_id, "greeting": start.greeting,
                     "next": views.next_url(base, start.session_id), "offer": views.offer_view(start.offer)},
                    status_code=201)

    async def start_chat(request: Request) -> JSON:
        return await in_writer(_start, request, request.query_params.get("product_id"))

    async def start_chat_post(request: Request) -> JSON:
        body = await _json_post_body(request)
        return await in_writer(_start, request, body.get("product_id"))

    def _answer(request: Request, session_id: str, message: str, plan: Plan | None) -> JSON:
        base = base_of(request)
        reply = service.answer(session_id, message, plan,
                               checkout_url=lambda deal_id: views.checkout_url(base, deal_id))
        return JSON(views.reply_view(reply, base, session_id))

    async def _say(request: Request, session_id: str, message: Any) -> JSON:
        if message is None or message == "":
            raise InvalidInput("missing parameter: message")
        if not isinstance(message, str):
            raise InvalidInput("message must be a string")
        _check_session_id(session_id)
        # The merchant's model (if any) is asked outside the write slots: a slow model holds a
        # thread of the shared pool, never a slot other chats' turns wait for.
        plan = await anyio.to_thread.run_sync(service.plan, session_id, message) if service.model else None
        return await in_writer(_answer, request, session_id, message, plan)

    async def say(request: Request) -> JSON:
        return await _say(request, request.path_params["session_id"], request.query_params.get("message"))

    async def say_post(request: Request) -> JSON:
        body = await _json_post_body(request)
        return await _say(request, request.path_params["session_id"], body.get("message"))

    def history(request: Request) -> JSON:  # a read: Starlette runs it in a worker thread
        session_id = request.path_params["session_id"]
        _check_session_id(session_id)
        return JSON(views.history_view(service.history(session_id), base_of(request)))

    chat = f"{views.CHAT_PREFIX}/{{session_id}}"
    return [
        PlainRoute("GET", f"{chat}/say", say),
        PlainRoute("GET", views.START_PATH, start_chat),
        PlainRoute("GET", chat, history),
        PlainRoute("POST", f"{chat}/message", say_post),
        PlainRoute("POST", views.START_PATH, start_chat_post),
        *(PlainRoute("GET", path, discovery(version))
          for version, (_, paths) in views.DISCOVERY.items() for path in paths),
        PlainRoute("GET", views.CATALOG_PATH, product_catalog),
    ]


def _check_session_id(session_id: str) -> None:
    if not _SESSION_ID.match(session_id):
        raise NotFound(f"unknown session_id: {session_id}")


async def _json_post_body(request: Request) -> dict[str, Any]:
    """The optional POSTs of §5 take JSON only: a form or text body is told so before it is read."""
    if "json" not in request.headers.get("content-type", ""):
        raise InvalidInput("send a JSON body with Content-Type: application/json")
    return await read_json_body(request, BODY_WORDING)
