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

Every request received is kept in ``requests`` as ``(path, json body)``.
"""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import deque
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


class FakeLLM:
    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self._lock = threading.Lock()
        self.requests: list[tuple[str, dict[str, Any]]] = []
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

    @property
    def pending(self) -> int:
        return len(self._replies)

    async def _next(self, request: Request) -> tuple[Reply, dict[str, Any]]:
        body = await request.json()
        with self._lock:
            self.requests.append((request.url.path, body))
            reply = self._replies.popleft() if self._replies else status(500, "no scripted reply")
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
