"""The request edge: what every request passes before any protocol's routes see it.

One ASGI middleware for every surface (the store, agents.json, the exchange and whatever comes
next), answering 400 in the surface's own error shape (``server/errors.py``) when

- the request's host (``Host``, or ``X-Forwarded-Host`` from a ``--trusted-proxy``) is not one
  the operator allowed (``server/hosts.py``). The checked host is the only one links are built
  from: :func:`base_url` reads what this middleware stored;
- the URL's path or query holds a NUL character or bytes that are not UTF-8 (an encoded lone
  surrogate is not UTF-8), which would reach the database as ids and messages;
- the body is larger than the cap: a ``Content-Length`` over it is refused before a byte of the
  body is read, and a body without one (chunked) is counted as it is read and refused at the
  cap, so no more than the cap is ever buffered. Either way the connection is then closed, so
  the server does not go on reading the rest.

A GET costs a look at the scope and its headers, nothing more. What a JSON body must hold is
checked where routes read it, by the one reader they share (``server/json_body.py``).
"""

from __future__ import annotations

import re
from typing import Sequence
from urllib.parse import unquote, unquote_to_bytes

from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from haggler.errors import InvalidInput
from haggler.server.clientip import Network, is_trusted
from haggler.server.errors import error_response
from haggler.server.hosts import AllowedHosts, split_host
from haggler.server.json_body import BodyWording, text_problem

__all__ = ["BASE_URL", "RequestEdge", "base_url"]

#: The scope key under which the edge leaves the request's checked base URL.
BASE_URL = "haggler.base_url"

# An escape of a control character or of a byte of 0x80 or more, or a raw byte that has no place
# in a URL: only then is a path or query looked at closely (plain ASCII ones are not).
_SUSPECT = re.compile(rb"%[089a-fA-F]|[^\x21-\x7e]")
_CLOSE = {"Connection": "close"}


def base_url(request: Request) -> str:
    """The base of every absolute link in a response: ``--public-url``, or the request's own
    scheme and host as the edge checked them."""
    return request.scope[BASE_URL]


class RequestEdge:
    """``wordings`` pairs a path prefix with the words that surface uses for a refused body;
    paths under no prefix use ``default_wording``."""

    def __init__(self, app: ASGIApp, *, hosts: AllowedHosts, trusted_proxies: Sequence[Network],
                 public_url: str | None, wordings: Sequence[tuple[str, BodyWording]],
                 default_wording: BodyWording, max_body_bytes: int) -> None:
        self.app = app
        self.hosts = hosts
        self.trusted = tuple(trusted_proxies)
        self.public = public_url.rstrip("/") if public_url else None
        self.wordings = tuple(wordings)
        self.default_wording = default_wording
        self.max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        hosts: list[bytes] = []
        forwarded_host = forwarded_proto = length = None
        chunked = False
        for name, value in scope["headers"]:
            if name == b"host":
                hosts.append(value)
            elif name == b"x-forwarded-host":
                forwarded_host = forwarded_host or value
            elif name == b"x-forwarded-proto":
                forwarded_proto = forwarded_proto or value
            elif name == b"content-length":
                length = value
            elif name == b"transfer-encoding":
                chunked = True
        client = scope.get("client")
        from_proxy = bool(self.trusted and client and is_trusted(client[0], self.trusted))
        problem = (self._host_problem(scope, hosts, forwarded_host if from_proxy else None,
                                      forwarded_proto if from_proxy else None)
                   or _url_problem(scope))
        too_large = problem is None and length is not None and (not length.isdigit() or int(length) > self.max_body)
        if too_large:
            problem = self._too_large(scope["path"])
        if problem is not None:
            await error_response(scope, 400, problem, _CLOSE if too_large else None)(scope, receive, send)
            return
        if chunked:
            receive, send = self._capped(scope["path"], receive, send)
        await self.app(scope, receive, send)

    def _host_problem(self, scope: Scope, hosts: list[bytes], forwarded_host: bytes | None,
                      forwarded_proto: bytes | None) -> str | None:
        """Check the host links would be built from, and leave the base URL in the scope."""
        if len(hosts) > 1:
            return "the request has more than one Host header"
        if forwarded_host is not None:
            header, host = "X-Forwarded-Host", forwarded_host.decode("latin-1").split(",")[0].strip()
        elif hosts:
            header, host = "Host", hosts[0].decode("latin-1")
        else:  # HTTP/1.0 without Host: the address the client connected to
            server_host, server_port = scope.get("server") or ("", None)
            header, host = "Host", f"{server_host}:{server_port}" if server_port else server_host
        if not self.hosts.allows(host):
            parsed = split_host(host)
            if parsed is None:
                return f"{header} {host[:100]!r} is not a host name"
            return (f"{header} {host[:100]!r} is not a host this store answers to: its operator can allow it "
                    f"with --allowed-host {parsed[0]}")
        scheme = scope["scheme"]
        if forwarded_proto is not None:
            proto = forwarded_proto.decode("latin-1").split(",")[0].strip().lower()
            scheme = proto if proto in ("http", "https") else scheme
        scope[BASE_URL] = self.public or f"{scheme}://{host}"
        return None

    def _too_large(self, path: str) -> str:
        wording = next((w for prefix, w in self.wordings if path.startswith(prefix)), self.default_wording)
        return wording.too_large.format(limit=self.max_body)

    def _capped(self, path: str, receive: Receive, send: Send) -> tuple[Receive, Send]:
        """For a body of unknown length: a receive that counts its bytes and refuses the chunk that
        would pass the cap before anyone buffers it (InvalidInput: the app answers 400 in the
        surface's shape), and a send that then closes the connection instead of reading on."""
        received = 0
        refused = False

        async def receive_capped() -> Message:
            nonlocal received, refused
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body:
                    refused = True
                    raise InvalidInput(self._too_large(path))
            return message

        async def send_closing(message: Message) -> None:
            if refused and message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), (b"connection", b"close")]
            await send(message)

        return receive_capped, send_closing


def _url_problem(scope: Scope) -> str | None:
    raw_path = scope.get("raw_path") or scope["path"].encode("utf-8", "surrogatepass")
    if (b"%" in raw_path or not raw_path.isascii()) and _SUSPECT.search(raw_path):
        for segment in raw_path.split(b"/"):
            problem = _escaped_text_problem(segment)
            if problem:
                return f"the URL path segment {segment.decode('latin-1')[:100]!r} {problem}"
    query = scope["query_string"]
    if _SUSPECT.search(query):
        for pair in query.split(b"&"):
            name, _, value = pair.partition(b"=")
            problem = _escaped_text_problem(name) or _escaped_text_problem(value)
            if problem:
                shown = unquote(name.decode("latin-1"), errors="replace")
                return f"the query parameter {shown[:100]!r} {problem}"
    return None


def _escaped_text_problem(escaped: bytes) -> str | None:
    """What is wrong with a percent-escaped piece of a URL as text, or None."""
    try:
        text = unquote_to_bytes(escaped.replace(b"+", b" ")).decode("utf-8")
    except UnicodeDecodeError:
        return "is not valid UTF-8 text"
    return text_problem(text)
