"""A tiny negotiate.v1 store, independent of haggler's own server, with switchable defects.

It exists to test ``haggler check``: with no defect switched on it follows the spec (so the
checker must pass it clean); each flag of ``Defects`` breaks exactly one rule the way stores
in the wild break it. By default it speaks negotiate.v1 only; ``nash=True`` also serves the
descriptor under nash.v1's names, and ``checkout_url`` says what the reply that closes a chat
with a deal (the shopper says "deal") carries at its top level. It also counts the requests it
gets, so a test can hold the checker to the limits the store publishes.

    store = BrokenStore(Defects(relative_next=True))
    with ThreadedServer(store.app) as server:
        run_checks(server.base)
"""

from __future__ import annotations

import json
import secrets
import threading
from collections import Counter
from dataclasses import dataclass, fields
from typing import Literal

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

PLACEHOLDER = "{url_encoded_message}"


@dataclass(frozen=True)
class Defects:
    relative_next: bool = False                 # next is "/api/store/chat/<sid>/say?message={url_encoded_message}"
    unknown_session_400: bool = False           # 400 instead of 404 for an unknown session (say and history)
    unknown_session_empty_history: bool = False  # history of an unknown session: 200 {"history": []}
    unknown_product_400: bool = False           # 400 instead of 404 for an unknown product
    limits_missing_fields: bool = False         # limits lacks max_messages_per_chat, session_idle_ttl_seconds
    floor_leak: bool = False                    # products carry their hidden "floor"
    rate_limit_on_xff: bool = False             # chat starts limited per client-supplied X-Forwarded-For
    no_cors: bool = False                       # no Access-Control-Allow-Origin
    wrong_content_type: bool = False            # JSON served as text/plain
    well_known_differs: bool = False            # /.well-known/negotiate.json is not the same document
    wrong_protocol: bool = False                # negotiate_protocol: "negotiate.v2"
    closed_chat_200: bool = False               # a turn after the close answers 200
    html_errors: bool = False                   # error bodies are HTML pages, not {"error": ...}

    @classmethod
    def names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


PRODUCTS = [
    {"id": "brass-kettle", "name": "Brass Stovetop Kettle", "subtitle": "2 L, whistling", "list_price": 89,
     "currency": "USD", "kind": "kitchen", "floor": 71, "levers": ["free shipping"],
     "inventory_note": "overstocked"},
    {"id": "oak-stool", "name": "Oak Step Stool", "subtitle": "Solid oak, folds flat", "list_price": 140,
     "currency": "USD", "kind": "furniture", "floor": 118, "levers": ["felt pads"],
     "inventory_note": "last two"},
]
HIDDEN = ("floor", "levers", "inventory_note", "merchant_persona")


@dataclass
class _Session:
    product: dict
    history: list[dict]
    shopper_turns: int = 0
    closed: bool = False


class BrokenStore:
    def __init__(self, defects: Defects | None = None, *, max_chat_starts_per_hour_per_ip: int = 4,
                 max_messages_per_chat: int = 10, max_message_length_chars: int = 200,
                 retry_after_seconds: int = 3600, nash: bool = False, nash_differs: bool = False,
                 checkout_url: Literal["absolute", "relative", "missing"] = "absolute") -> None:
        self.defects = defects or Defects()
        self.nash = nash
        self.nash_differs = nash_differs  # /nash.json describes the store otherwise than /negotiate.json
        self.checkout_url = checkout_url
        self.max_starts = max_chat_starts_per_hour_per_ip
        self.max_messages = max_messages_per_chat
        self.max_length = max_message_length_chars
        self.retry_after = retry_after_seconds
        self.sessions: dict[str, _Session] = {}
        self.start_requests = 0              # every GET of the start endpoint
        self.chat_starts = 0                 # starts answered 201
        self.rate_limited = 0                # starts answered 429
        self.starts_by_client: Counter[str] = Counter()
        self._lock = threading.Lock()
        nash_routes = [Route("/nash.json", self.nash_discovery), Route("/.well-known/nash.json", self.nash_discovery)]
        self.app = Starlette(routes=[
            *(nash_routes if nash else []),
            Route("/negotiate.json", self.discovery),
            Route("/.well-known/negotiate.json", self.well_known),
            Route("/api/store/catalog", self.catalog),
            Route("/api/store/chat/start", self.start),
            Route("/api/store/chat/{session_id}/say", self.say),
            Route("/api/store/chat/{session_id}", self.history),
        ], exception_handlers={HTTPException: self._http_error})

    # -- responses ---------------------------------------------------------------------------

    def json(self, body: object, status: int = 200, headers: dict[str, str] | None = None) -> Response:
        media = "text/plain; charset=utf-8" if self.defects.wrong_content_type else "application/json; charset=utf-8"
        content = json.dumps(body, ensure_ascii=False).encode("utf-8")
        return Response(content, status, headers=self._headers(headers), media_type=media)

    def error(self, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
        if self.defects.html_errors:
            page = f"<!doctype html><html><body><h1>{status}</h1><p>{message}</p></body></html>"
            return Response(page, status, headers=self._headers(headers), media_type="text/html; charset=utf-8")
        return self.json({"error": message}, status, headers)

    def _headers(self, extra: dict[str, str] | None) -> dict[str, str]:
        headers = dict(extra or {})
        if not self.defects.no_cors:
            headers["Access-Control-Allow-Origin"] = "*"
        return headers

    async def _http_error(self, request: Request, exc: HTTPException) -> Response:
        return self.error(exc.status_code, "not found" if exc.status_code == 404 else str(exc.detail))

    # -- discovery and catalog -----------------------------------------------------------------

    @staticmethod
    def base(request: Request) -> str:
        return f"{request.url.scheme}://{request.url.netloc}"

    def public_product(self, product: dict, base: str) -> dict:
        view = {k: v for k, v in product.items() if self.defects.floor_leak or k not in HIDDEN}
        view["page_url"] = f"{base}/store/p/{product['id']}"
        view["start_chat_url"] = f"{base}/api/store/chat/start?product_id={product['id']}"
        return view

    def descriptor(self, request: Request, tagline: str = "Small shop, fair prices.") -> dict:
        base = self.base(request)
        limits = {
            "max_chat_starts_per_hour_per_ip": self.max_starts,
            "max_messages_per_chat": self.max_messages,
            "session_idle_ttl_seconds": 3600,
            "max_message_length_chars": self.max_length,
            "currency": "USD",
        }
        if self.defects.limits_missing_fields:
            del limits["max_messages_per_chat"], limits["session_idle_ttl_seconds"]
        return {
            "negotiate_protocol": "negotiate.v2" if self.defects.wrong_protocol else "negotiate.v1",
            "store": {"name": "Broken Test Shop", "rep_name": "Sam", "tagline": tagline,
                      "policy": "Returns in 30 days."},
            "endpoints": {
                "start_chat": {"method": "GET",
                               "url_template": f"{base}/api/store/chat/start?product_id={{product_id}}"},
                "send_message": {"method": "GET",
                                 "url_template": f"{base}/api/store/chat/{{session_id}}/say?message={PLACEHOLDER}"},
                "read_history": {"method": "GET", "url_template": f"{base}/api/store/chat/{{session_id}}"},
                "catalog": {"method": "GET", "url": f"{base}/api/store/catalog"},
            },
            "products": [self.public_product(p, base) for p in PRODUCTS],
            "limits": limits,
        }

    async def discovery(self, request: Request) -> Response:
        return self.json(self.descriptor(request))

    async def nash_discovery(self, request: Request) -> Response:
        doc = self.descriptor(request, tagline="Our nash.v1 copy." if self.nash_differs else "Small shop, fair prices.")
        return self.json({"nash_protocol": "nash.v1", **{k: v for k, v in doc.items() if k != "negotiate_protocol"}})

    async def well_known(self, request: Request) -> Response:
        if self.defects.well_known_differs:
            return self.json(self.descriptor(request, tagline="An older copy of our descriptor."))
        return self.json(self.descriptor(request))

    async def catalog(self, request: Request) -> Response:
        base = self.base(request)
        return self.json({"store": {"name": "Broken Test Shop"},
                          "products": [self.public_product(p, base) for p in PRODUCTS]})

    # -- chat ------------------------------------------------------------------------------------

    def client_key(self, request: Request) -> str:
        forwarded = request.headers.get("x-forwarded-for")
        if self.defects.rate_limit_on_xff and forwarded:
            return forwarded.split(",")[0].strip()
        return request.client.host if request.client else "unknown"

    def next_url(self, request: Request, session_id: str) -> str:
        path = f"/api/store/chat/{session_id}/say?message={PLACEHOLDER}"
        return path if self.defects.relative_next else self.base(request) + path

    async def start(self, request: Request) -> Response:
        with self._lock:
            self.start_requests += 1
        product_id = request.query_params.get("product_id")
        if not product_id:
            return self.error(400, "missing parameter: product_id")
        product = next((p for p in PRODUCTS if p["id"] == product_id), None)
        if product is None:
            return self.error(400 if self.defects.unknown_product_400 else 404, f"unknown product_id: {product_id}")
        key = self.client_key(request)
        with self._lock:
            if self.starts_by_client[key] >= self.max_starts:
                self.rate_limited += 1
                return self.error(429, "too many chats started from your address",
                                  headers={"Retry-After": str(self.retry_after)})
            self.starts_by_client[key] += 1
            self.chat_starts += 1
            session_id = secrets.token_urlsafe(18)
            greeting = f"Hi, I'm Sam. The {product['name']} is ${product['list_price']}. What can I do for you?"
            self.sessions[session_id] = _Session(product, [{"speaker": "merchant", "message": greeting}])
        return self.json({"session_id": session_id, "greeting": greeting,
                          "next": self.next_url(request, session_id)}, 201)

    def unknown_session(self) -> Response:
        return self.error(400 if self.defects.unknown_session_400 else 404, "unknown session_id")

    async def say(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        message = request.query_params.get("message")
        if not message:
            return self.error(400, "missing parameter: message")
        if len(message) > self.max_length:
            return self.error(400, f"message too long: at most {self.max_length} characters")
        with self._lock:
            session = self.sessions.get(session_id)
            if session is None:
                return self.unknown_session()
            if session.closed:
                if self.defects.closed_chat_200:
                    return self.json({"message": "This chat has ended.", "closed": True, "next": None})
                return self.error(400, "this chat is closed")
            session.shopper_turns += 1
            session.history.append({"speaker": "shopper", "message": message})
            lowered = message.lower()
            deal = None
            if any(word in lowered for word in ("no thanks", "goodbye", "bye")):
                reply, session.closed = "No problem. Thanks for stopping by!", True
            elif lowered == "deal":
                price = session.product["list_price"]
                deal = {"id": session_id, "price": price, "currency": "USD", "extras": [],
                        "checkout_url": f"{self.base(request)}/checkout/{session_id}"}
                reply, session.closed = f"Deal at ${price}!", True
            elif session.shopper_turns >= self.max_messages:
                reply, session.closed = "We've covered a lot; let's leave it here. Thanks!", True
            else:
                reply = f"Shipping is free on the {session.product['name']}. Anything else?"
            session.history.append({"speaker": "merchant", "message": reply})
            closed = session.closed
        body: dict = {"message": reply, "closed": closed, "next": None if closed else self.next_url(request, session_id)}
        if deal is not None:
            body["deal"] = deal
            if self.checkout_url != "missing":
                path = f"/checkout/{session_id}"
                body["checkout_url"] = path if self.checkout_url == "relative" else self.base(request) + path
        return self.json(body)

    async def history(self, request: Request) -> Response:
        session_id = request.path_params["session_id"]
        with self._lock:
            session = self.sessions.get(session_id)
            if session is None:
                if self.defects.unknown_session_empty_history:
                    return self.json({"session_id": session_id, "history": []})
                return self.unknown_session()
            return self.json({"session_id": session_id, "history": list(session.history),
                              "closed": session.closed})
