"""Routes that skip FastAPI's per-request machinery, for the store's hottest paths.

FastAPI finds a request's route by walking its tree of included routers and then solves the
endpoint's dependencies (its parameters, read and validated); on a chat turn of the store that
was about a fifth of the server's CPU. negotiate.v1's routes read and check their requests
themselves (one error vocabulary, in the surface's own shape), so they need none of it: they are
plain Starlette routes, served by :class:`PlainRouteLane` from inside the app's own middlewares
(the request edge, CORS, metrics, the error edge), each found by one regular expression. Their
errors still go through the app's exception handlers, and the OpenAPI document still describes
them (``server/openapi.py`` documents a plain route from its ``Operation`` alone).
"""

from __future__ import annotations

import inspect
import re
from typing import Awaitable, Callable, Sequence

from fastapi import FastAPI
from starlette._utils import get_route_path
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import ASGIApp, ExceptionHandler, Receive, Scope, Send

__all__ = ["PlainRoute", "PlainRouteLane", "install_plain_routes"]

Endpoint = Callable[[Request], Awaitable[Response] | Response]


class PlainRoute(Route):
    """One method on one path, served by ``endpoint(request)``."""

    def __init__(self, method: str, path: str, endpoint: Endpoint) -> None:
        super().__init__(path, endpoint, methods=[method])
        #: A plain ``def`` endpoint (a read) runs in a worker thread, as Starlette runs it.
        self.in_thread = not inspect.iscoroutinefunction(endpoint)
        # Only the method named: Starlette would add HEAD to a GET, and a HEAD that takes a
        # chat turn (or starts a chat) is not the safe request HEAD is meant to be.
        self.methods = {method.upper()}

    @property
    def operation_id(self) -> str:
        """The OpenAPI operationId, spelled as FastAPI spells its own: name, path, method."""
        return re.sub(r"\W", "_", f"{self.name}{self.path}") + f"_{next(iter(self.methods)).lower()}"

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child = super().matches(scope)
        if match is not Match.NONE:
            # The matched route, where FastAPI's own routes leave it: the metrics and the access
            # log label a request by its route's template, never by the ids in its path.
            child["route"] = self
        return match, child


class PlainRouteLane:
    """Serves the plain routes straight from inside the app's own middlewares (the request
    edge, CORS, the request log, the error edge), past the layers that only FastAPI's routes
    need: the exception middleware, the exit stack for dependencies, the walk of the router and
    Starlette's per-route wrappers. A domain error goes to the app's exception handler for its
    class, as Starlette's exception middleware would send it; anything else goes on up to the
    error edge. A request no plain route fully matches (another path, or a method the path does
    not take: the router answers 405) goes to the app as before."""

    def __init__(self, app: ASGIApp, *, routes: Sequence[PlainRoute], handlers: dict[object, ExceptionHandler]) -> None:
        self.app = app
        #: Per method, in order, each route with the literal start of its path (up to its first
        #: parameter): only a route of the request's method whose start the path has can match
        #: it fully, so only those are tried. Trying every route's expression on every request,
        #: ``/healthz`` included, was 3% of a match turn's CPU.
        self._candidates: dict[str, list[tuple[str, PlainRoute]]] = {}
        for route in routes:
            for method in route.methods:
                self._candidates.setdefault(method, []).append((route.path.split("{", 1)[0], route))
        #: The app's exception handlers, by class: the dict itself, so handlers added later count.
        self.handlers = handlers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = get_route_path(scope)  # what each route's expression is matched against
            for start, route in self._candidates.get(scope["method"], ()):
                if not path.startswith(start):
                    continue
                match, child = route.matches(scope)
                if match is Match.FULL:
                    scope.update(child)
                    await self._serve(route, Request(scope, receive, send), send)
                    return
        await self.app(scope, receive, send)

    async def _serve(self, route: PlainRoute, request: Request, send: Send) -> None:
        endpoint = route.endpoint
        try:
            response = await run_in_threadpool(endpoint, request) if route.in_thread else await endpoint(request)
        except Exception as exc:
            handler = next((self.handlers[kind] for kind in type(exc).__mro__ if kind in self.handlers), None)
            if handler is None:
                raise
            response = handler(request, exc)
            if inspect.isawaitable(response):
                response = await response
        await response(request.scope, request.receive, send)  # type: ignore[operator]


def install_plain_routes(app: FastAPI, routes: Sequence[PlainRoute]) -> None:
    """Serve ``routes`` through a :class:`PlainRouteLane`, innermost of the app's middlewares:
    install them before any other middleware. They also go first in the app's route list, where
    the OpenAPI document finds them and the router answers a method they do not take."""
    app.router.routes[0:0] = routes
    app.add_middleware(PlainRouteLane, routes=routes, handlers=app.exception_handlers)

