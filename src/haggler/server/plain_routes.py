"""Routes that skip FastAPI's per-request machinery, for the store's hottest paths.

FastAPI finds a request's route by walking its tree of included routers and then solves the
endpoint's dependencies (its parameters, read and validated); on a chat turn of the store that
was about a fifth of the server's CPU. negotiate.v1's routes read and check their requests
themselves (one error vocabulary, in the surface's own shape), so they need none of it: they are
plain Starlette routes placed at the front of the app's route list, each found by one regular
expression. They still pass every middleware (the request edge, CORS, metrics, the error edge),
their errors still go through the app's exception handlers, and the OpenAPI document still
describes them (``server/openapi.py`` documents a plain route from its ``Operation`` alone).
"""

from __future__ import annotations

import re
from typing import Awaitable, Callable, Sequence

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Scope

__all__ = ["PlainRoute", "install_plain_routes"]

Endpoint = Callable[[Request], Awaitable[Response] | Response]


class PlainRoute(Route):
    """One method on one path, served by ``endpoint(request)``."""

    def __init__(self, method: str, path: str, endpoint: Endpoint) -> None:
        super().__init__(path, endpoint, methods=[method])
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


def install_plain_routes(app: FastAPI, routes: Sequence[PlainRoute]) -> None:
    """Put ``routes`` first in ``app``'s route list, ahead of every router FastAPI walks."""
    app.router.routes[0:0] = routes

