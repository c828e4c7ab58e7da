"""CORS for a protocol meant to be called from anywhere.

negotiate.v1 wants ``Access-Control-Allow-Origin: *`` on its responses whether or not the
request carried an ``Origin`` header, and POST equivalents that browsers can preflight.
Starlette's CORSMiddleware only answers requests that carry ``Origin``, so this small ASGI
middleware does it for every response. It also exposes ``Retry-After`` and ``X-Request-Id``,
which are not CORS-safelisted headers: without it, a widget embedded on another site could not
read how long a 429 or 503 asks it to wait, nor the id to quote to the store.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

ALLOW_ORIGIN = (b"access-control-allow-origin", b"*")
EXPOSE_HEADERS = (b"access-control-expose-headers", b"Retry-After, X-Request-Id")


class OpenCORSMiddleware:
    def __init__(self, app: ASGIApp, *, max_age: int = 86400) -> None:
        self.app = app
        self.max_age = str(max_age).encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] == "OPTIONS":
            await self._preflight(scope, send)
            return

        async def send_with_cors(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), ALLOW_ORIGIN, EXPOSE_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_cors)

    async def _preflight(self, scope: Scope, send: Send) -> None:
        requested = b"content-type"
        for name, value in scope["headers"]:
            if name == b"access-control-request-headers":
                requested = value
        headers = [
            ALLOW_ORIGIN,
            (b"access-control-allow-methods", b"GET, POST, OPTIONS"),
            (b"access-control-allow-headers", requested),
            (b"access-control-max-age", self.max_age),
            (b"content-length", b"0"),
        ]
        await send({"type": "http.response.start", "status": 204, "headers": headers})
        await send({"type": "http.response.body", "body": b""})
