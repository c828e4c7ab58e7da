"""The error edge: every failure becomes ``{"error": "...", "request_id": "..."}`` with the right
status code — never a traceback, never HTML. A database that is unreachable, too slow or full
(``storage/outages.py``) is 503 with ``Retry-After``; anything else unexpected is a bug: 500."""

from __future__ import annotations

import logging
from typing import Any, Callable

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from haggler.errors import (
    Closed,
    Conflict,
    Forbidden,
    InFlight,
    InsufficientFunds,
    Gone,
    HagglerError,
    InvalidInput,
    NotFound,
    PaymentDeclined,
    RateLimited,
    TooEarly,
    Unauthorized,
    Unavailable,
    Unprocessable,
)
from haggler.server.request_log import request_id
from haggler.server.responses import JSON
from haggler.storage.outages import is_outage

log = logging.getLogger("haggler")

#: Seconds a client is told to wait before retrying a request the database could not serve.
OUTAGE_RETRY_AFTER_SECONDS = 1


#: Domain error → HTTP status, checked in order (a subclass before its base: InFlight is a Conflict).
_STATUS: tuple[tuple[type[HagglerError] | tuple[type[HagglerError], ...], int], ...] = (
    (NotFound, 404), (RateLimited, 429), (Unauthorized, 401), (TooEarly, 425), (Conflict, 409), (Forbidden, 403),
    ((InsufficientFunds, PaymentDeclined), 402), (Unavailable, 503), (Unprocessable, 422), (Gone, 410),
    ((InvalidInput, Closed), 400),
)


def status_for(exc: HagglerError) -> int:
    return next((status for kind, status in _STATUS if isinstance(exc, kind)), 500)


#: Paths under this prefix answer errors in the agents.json envelope, ``{"ok": false, "error"}``.
ENVELOPE_PREFIX = "/.well-known/agents"


def error_response(scope: Scope, status: int, message: str, headers: dict[str, str] | None = None,
                   fields: dict[str, Any] | None = None) -> JSON:
    """An error in the shape of the surface that serves the request's path, with the request's id
    (the ``X-Request-Id`` of the answer: what a caller quotes to the operator, who finds the
    request's access log line by it); ``fields`` is a domain error's whole body
    (``HagglerError.fields``), when it names more than its message."""
    shaped = _shape_for(scope)
    if scope["path"].startswith(ENVELOPE_PREFIX):
        body: dict[str, Any] = {"ok": False, "error": message}
    elif shaped is not None:
        body = shaped(status, message, fields)
    else:
        body = dict(fields) if fields is not None else {"error": message}
    if not _closed(scope):
        body["request_id"] = request_id(scope)
    return JSON(body, status_code=status, headers=headers)


#: An error body builder for the paths a surface owns: ``(status, message, the domain error's
#: fields or None) -> body``.
ErrorShape = Callable[[int, str, "dict[str, Any] | None"], dict[str, Any]]
#: Where an app keeps its surfaces' own error shapes (``app.state``): ``((path prefixes), shape)``
#: pairs, set by ``server/app.py`` for the protocols whose wire fixes an error shape (UCP's
#: ``{"detail": ...}``), so that the edge, the handlers and the catch-all all answer in it.
ERROR_SHAPES_STATE = "error_shapes"


#: Where an app keeps the path prefixes whose error shape is closed (ACP's ``Error`` allows no
#: field beyond its own): their bodies carry no ``request_id``, which stays in ``X-Request-Id``.
CLOSED_SHAPES_STATE = "closed_error_shapes"


def _closed(scope: Scope) -> bool:
    app = scope.get("app")
    prefixes: tuple[str, ...] = getattr(app.state, CLOSED_SHAPES_STATE, ()) if app is not None else ()
    return bool(prefixes) and scope["path"].startswith(prefixes)


def _shape_for(scope: Scope) -> ErrorShape | None:
    app = scope.get("app")
    shapes = getattr(app.state, ERROR_SHAPES_STATE, ()) if app is not None else ()
    path = scope["path"]
    return next((shape for prefixes, shape in shapes if path.startswith(prefixes)), None)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(HagglerError)
    async def _domain(request: Request, exc: HagglerError) -> JSON:
        headers = {"Retry-After": str(exc.retry_after_seconds)} if isinstance(exc, (RateLimited, InFlight, Unavailable)) \
            else None
        return error_response(request.scope, status_for(exc), exc.message, headers, exc.fields())

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSON:
        message = {404: "not found", 405: "method not allowed"}.get(exc.status_code, str(exc.detail))
        return error_response(request.scope, exc.status_code, message, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSON:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(p) for p in first.get("loc", ()) if p not in ("query", "body", "path"))
        return error_response(request.scope, 400, f"bad parameter {where}: {first.get('msg', 'invalid')}".strip())

    app.add_middleware(_ContainUnexpected)


class _ContainUnexpected:
    """Turns an unexpected exception into a plain 500 in the usual error shape, and stops it there;
    a database outage into a 503 with ``Retry-After``, logged in one line (it is not a bug, and a
    restarting database would otherwise fill the log with tracebacks); a client that disconnected
    mid-body into one info line and no answer.

    Starlette's own catch-all handler re-raises after answering, and uvicorn then closes the
    connection, so clients saw a reset instead of the 500. This ASGI middleware answers and
    logs instead; if the response had already started, the exception goes on up (no second
    response can be sent)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def send_tracking(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, send_tracking)
        except ClientDisconnect:
            # The client went away before its body arrived: nobody is left to answer, and it is not
            # a bug, so one line at info (each once filled the log with a 270-line traceback).
            log.info("client disconnected before its request was read (request %s, %s %s)", request_id(scope),
                     scope["method"], scope["path"])
        except Exception as exc:
            if started:
                raise
            if is_outage(exc):
                first_line = next(iter(str(exc).splitlines()), type(exc).__name__)
                log.warning("database unavailable, answered 503 (request %s, %s %s): %s", request_id(scope),
                            scope["method"], scope["path"], first_line)
                answer = error_response(scope, 503, "the database is unavailable: retry in a moment",
                                        {"Retry-After": str(OUTAGE_RETRY_AFTER_SECONDS)})
            else:
                log.exception("unhandled error (%s)", request_id(scope), exc_info=exc)
                answer = error_response(scope, 500, "internal server error")
            await answer(scope, receive, send)
