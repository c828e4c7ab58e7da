"""A fake LLM provider on a free loopback port, speaking both the Anthropic Messages API
(``POST /v1/messages``) and OpenAI Chat Completions (``POST /v1/chat/completions``), so tests run
the real SDK clients over real HTTP.

Each test scripts the provider's next replies with ``FakeLLM.script(...)``:

``answer(data)``
    a well-formed structured answer: a forced ``tool_use`` block (Anthropic), or JSON content
    (OpenAI ``response_format``) or a tool call (OpenAI request with ``tools``). ``data`` may be a
    dict (sent as is, so it can lack required fields) or a string (sent raw: malformed JSON).
``text(content)``
    a plain text answer, no structured output at all.
``status(code, message)``
    an HTTP error in the provider's error shape (429, 500, 400, ...).
``garbage(body)``
    HTTP 200 with a body that is not the provider's shape (``body`` sent as is, JSON or not).
``slow(seconds, reply)``
    the reply, after a delay (to trip a client timeout).

When the scripted queue is empty, a *responder* set with ``FakeLLM.respond_with(fn)`` answers:
``fn(path, body)`` gets the request's path (``/v1/messages`` or ``/v1/chat/completions``) and its
JSON body and returns a ``Reply`` — a stand-in model that reads the prompt (see
``tests/support/gullible_model.py``). Scripted replies still go first, so a test can put a
provider error in front of a responder. ``script()`` leaves the responder in place (it resets the
queue and the request log, not the model); ``respond_with(None)`` removes it. A responder that
raises is answered with a 500 and its exception kept in ``responder_errors``: a test that expects
the model to have answered should check that list, since a backend reads the 500 as "model
unavailable" and the caller quietly falls back. Without a responder an empty queue answers 500
("no scripted reply").

Every request received is kept in ``requests`` as ``(path, json body)``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from haggler.server.threaded import ThreadedServer

INPUT_TOKENS = 11
OUTPUT_TOKENS = 7


@dataclass(frozen=True)
class Reply:
    kind: str  # "answer" | "text" | "status"
    data: Any = None
    status: int = 200
    delay: float = 0.0


def answer(data: Any) -> Reply:
    return Reply("answer", data)


def text(content: str) -> Reply:
    return Reply("text", content)


def status(code: int, message: str = "scripted error") -> Reply:
    return Reply("status", message, status=code)


def garbage(body: str) -> Reply:
    return Reply("garbage", body)


def slow(seconds: float, reply: Reply) -> Reply:
    return Reply(reply.kind, reply.data, reply.status, seconds)


Responder = Callable[[str, dict[str, Any]], Reply]
"""Answers a request when nothing is scripted: ``(path, json body) -> Reply``."""


class FakeLLM:
    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._responder: Responder | None = None
        self.requests: list[tuple[str, dict[str, Any]]] = []
        self.responder_errors: list[Exception] = []
        app = Starlette(routes=[Route("/v1/messages", self._anthropic, methods=["POST"]),
                                Route("/v1/chat/completions", self._openai, methods=["POST"])])
        self._server = ThreadedServer(app)
        self.base = self._server.base

    def __enter__(self) -> FakeLLM:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)

    def script(self, *replies: Reply) -> None:
        with self._lock:
            self._replies.clear()
            self._replies.extend(replies)
            self.requests.clear()

    def respond_with(self, responder: Responder | None) -> None:
        """Answer with ``responder(path, body)`` whenever the scripted queue is empty (``None``:
        stop). Kept across ``script()`` calls."""
        with self._lock:
            self._responder = responder
            self.responder_errors.clear()

    @property
    def pending(self) -> int:
        return len(self._replies)

    async def _next(self, request: Request) -> tuple[Reply, dict[str, Any]]:
        body = await request.json()
        path = request.url.path
        with self._lock:
            self.requests.append((path, body))
            scripted = self._replies.popleft() if self._replies else None
            responder = self._responder
        if scripted is not None:
            reply = scripted
        elif responder is None:
            reply = status(500, "no scripted reply")
        else:
            try:
                reply = responder(path, body)
            except Exception as exc:  # kept for the test to see; the client gets a 500
                with self._lock:
                    self.responder_errors.append(exc)
                reply = status(500, f"responder failed: {exc!r}")
        if reply.delay:
            await asyncio.sleep(reply.delay)
        return reply, body

    async def _anthropic(self, request: Request) -> Response:
        reply, body = await self._next(request)
        if reply.kind == "garbage":
            return Response(reply.data, media_type="application/json")
        if reply.kind == "status":
            return JSONResponse({"type": "error", "error": {"type": _error_type(reply.status),
                                                            "message": reply.data}},
                                status_code=reply.status)
        if reply.kind == "text":
            content: list[dict[str, Any]] = [{"type": "text", "text": reply.data}]
            stop = "end_turn"
        else:
            tool = body.get("tool_choice", {}).get("name", "answer")
            data = reply.data
            if isinstance(data, str):  # hostile: the tool input is not an object
                content = [{"type": "text", "text": data}]
            else:
                content = [{"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:12]}",
                            "name": tool, "input": data}]
            stop = "tool_use"
        return JSONResponse({
            "id": f"msg_{uuid.uuid4().hex[:12]}", "type": "message", "role": "assistant",
            "model": body.get("model", "fake"), "content": content, "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": INPUT_TOKENS, "output_tokens": OUTPUT_TOKENS}})

    async def _openai(self, request: Request) -> Response:
        reply, body = await self._next(request)
        if reply.kind == "garbage":
            return Response(reply.data, media_type="application/json")
        if reply.kind == "status":
            return JSONResponse({"error": {"message": reply.data, "type": _error_type(reply.status),
                                           "param": None, "code": None}},
                                status_code=reply.status)
        message: dict[str, Any] = {"role": "assistant", "content": None}
        finish = "stop"
        if reply.kind == "text":
            message["content"] = reply.data
        else:
            raw = reply.data if isinstance(reply.data, str) else json.dumps(reply.data)
            if "tools" in body:
                message["tool_calls"] = [{"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function",
                                          "function": {"name": body["tools"][0]["function"]["name"],
                                                       "arguments": raw}}]
                finish = "tool_calls"
            else:
                message["content"] = raw
        return JSONResponse({
            "id": f"chatcmpl-{uuid.uuid4().hex[:12]}", "object": "chat.completion", "created": 0,
            "model": body.get("model", "fake"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": {"prompt_tokens": INPUT_TOKENS, "completion_tokens": OUTPUT_TOKENS,
                      "total_tokens": INPUT_TOKENS + OUTPUT_TOKENS}})


def _error_type(code: int) -> str:
    return {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error"}.get(
        code, "api_error")
