"""What every request leaves behind: its id, its count in the metrics, its access log line.

:class:`RequestLog` is the outermost ASGI middleware (a pure one: no BaseHTTPMiddleware, whose
task and queue per request show on a path measured in tenths of a millisecond). For each request it

- picks an id: a fresh one, or a well-formed ``X-Request-Id`` sent by a ``--trusted-proxy`` (so
  one id follows the request through the proxy's log and the store's). The id goes back as the
  answer's ``X-Request-Id`` and, through :func:`request_id`, into every error body;
- counts the answer in :class:`~haggler.server.metrics.Metrics` by route template, method and
  status, with its latency;
- with the access log on (``--access-log json``), writes one JSON line to the ``haggler.access``
  logger: time, request id, method, route template (the path only when no route matched, so a
  chat's session id never reaches the log), status, duration in ms, and the client address as
  the store sees it (``X-Forwarded-For`` only from a trusted proxy).

Everything is measured once, in one place, and shared by the metrics and the log.
"""

from __future__ import annotations

import asyncio
import logging
import re
import random
import sys
import time
from datetime import datetime, timezone
from typing import Sequence, TextIO

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from haggler.server.clientip import Network, is_trusted, known_client, request_client
from haggler.server.metrics import UNMATCHED, Metrics
from haggler.server.responses import dump_json
from haggler.timestamps import utc_z

__all__ = ["ACCESS_LOGGER", "REQUEST_ID", "RequestLog", "enable_access_log", "request_id"]

#: The scope key under which the request's id is kept.
REQUEST_ID = "haggler.request_id"
ACCESS_LOGGER = "haggler.access"
#: An incoming id worth keeping: short, and nothing that could forge a log line or a header.
_WELL_FORMED = re.compile(rb"[A-Za-z0-9._:-]{1,128}")
_HEADER = b"x-request-id"


def _fresh_id() -> str:
    """16 hex digits. A request id names a request in the log; it guards nothing, so it comes from
    the process's ordinary random generator (reseeded in every forked worker), not from the
    operating system's, a system call per request."""
    return f"{random.getrandbits(64):016x}"


def request_id(scope: Scope) -> str | None:
    """The id :class:`RequestLog` gave this request (None outside it: a bare app in a test)."""
    return scope.get(REQUEST_ID)


class LoopBatchedHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A stream handler that writes the lines logged during one turn of the event loop with one
    write when the loop turns, instead of a write and a flush (a system call) for each line: at a
    few thousand requests a second those were a twentieth of the server's CPU. Outside a running
    event loop (or from another thread's) a line is written at once, as a plain stream handler
    would; closing writes what is pending."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__(stream)
        self._pending: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
        except Exception:
            self.handleError(record)
            return
        self.write_line(line)

    def write_line(self, line: str) -> None:
        """Write ``line`` as :meth:`emit` writes a record's: with the loop's turn, or at once."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop in this thread
            self._pending.append(line + self.terminator)
            self.flush()
            return
        if not self._pending:
            loop.call_soon(self.flush)
        self._pending.append(line + self.terminator)

    def takes_lines_from(self, logger: logging.Logger) -> bool:
        """Whether a line logged at INFO on ``logger`` would reach this handler alone, unchanged
        (the formatter :func:`enable_access_log` gives it, no filter anywhere), so that writing it
        here directly is what logging would do, without a ``LogRecord``: building one, with its
        caller's frame looked up, was a tenth of a plain request's CPU. Asked on every line, so
        that a handler or filter added later (a test's, an operator's) gets the lines again."""
        return (logger.handlers == [self] and not logger.filters and not self.filters
                and self.formatter is _BARE and logger.isEnabledFor(logging.INFO))

    def flush(self) -> None:
        with self.lock:  # type: ignore[union-attr]
            if self._pending:
                text, self._pending = "".join(self._pending), []
                self.stream.write(text)
            super().flush()

    def close(self) -> None:
        self.flush()
        super().close()


#: The access log's formatter: the message alone.
_BARE = logging.Formatter("%(message)s")


def enable_access_log() -> logging.Logger:
    """Send the ``haggler.access`` logger's lines, bare, to standard output (once per process)."""
    logger = logging.getLogger(ACCESS_LOGGER)
    if not logger.handlers:
        handler = LoopBatchedHandler(sys.stdout)
        handler.setFormatter(_BARE)
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    return logger


class RequestLog:
    def __init__(self, app: ASGIApp, *, metrics: Metrics, access_log: bool,
                 trusted_proxies: Sequence[Network]) -> None:
        self.app = app
        self.metrics = metrics
        self.access = enable_access_log() if access_log else None
        self.trusted = tuple(trusted_proxies)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        rid = self._forwarded_id(scope) or _fresh_id()
        scope[REQUEST_ID] = rid
        header = (_HEADER, rid.encode("ascii"))
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), header]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            seconds = time.perf_counter() - started
            route = getattr(scope.get("route"), "path", None)
            self.metrics.observe(route or UNMATCHED, scope["method"], status, seconds)
            if self.access is not None:
                self._log(self.access, scope, rid, route, status, seconds)

    def _forwarded_id(self, scope: Scope) -> str | None:
        if not self.trusted:
            return None
        client = scope.get("client")
        if not client or not is_trusted(client[0], self.trusted):
            return None
        value = next((v for name, v in scope["headers"] if name == _HEADER), None)
        return value.decode("ascii") if value is not None and _WELL_FORMED.fullmatch(value) else None

    def _log(self, log: logging.Logger, scope: Scope, rid: str, route: str | None, status: int,
             seconds: float) -> None:
        client = scope.get("client")
        line = dump_json({
            "time": utc_z(datetime.now(timezone.utc)),
            "request_id": rid, "method": scope["method"], "route": route or scope["path"][:200],
            "status": status, "duration_ms": round(seconds * 1000, 3),
            # As the routes resolved it, when one did (with the same --trusted-proxy networks).
            "client": known_client(scope) or request_client(client[0] if client else None, Headers(scope=scope),
                                                            self.trusted),
        }).decode()
        handler = log.handlers[0] if log.handlers else None
        if isinstance(handler, LoopBatchedHandler) and handler.takes_lines_from(log):
            handler.write_line(line)
        else:
            log.info(line)
