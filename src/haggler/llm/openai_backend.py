"""OpenAI-compatible Chat Completions through the official ``openai`` SDK (imported lazily), with
``base_url`` for other servers speaking the same API (vLLM, llama.cpp's server, Ollama).

Structured output: ``response_format`` with a JSON schema. A server that refuses it (a 400 naming
``response_format``) is asked again with a single forced tool call instead, and the backend keeps
using tools from then on (``structured="tools"`` chooses them from the start).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel

from haggler.llm.base import (
    TOOL_NAME,
    LLMBackend,
    Malformed,
    Message,
    ModelUnavailable,
    Prices,
    RawReply,
    reading,
    tool_description,
)

Structured = Literal["json_schema", "tools"]


class OpenAIBackend(LLMBackend):
    name = "openai"

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 30.0, max_retries: int = 1, max_tokens: int = 1024,
                 prices: Prices | None = None,
                 structured: Structured = "json_schema") -> None:
        super().__init__(model, max_tokens=max_tokens, prices=prices)
        self.structured: Structured = structured
        self._client = self._connect("openai", "OpenAI", "OPENAI_API_KEY", api_key=api_key,
                                     base_url=base_url, timeout=timeout, max_retries=max_retries)

    def _call(self, system: str, messages: list[Message], schema: type[BaseModel],
              max_tokens: int) -> RawReply:
        chat: list[dict[str, Any]] = [{"role": "system", "content": system}]
        chat += [{"role": m.role, "content": m.content} for m in messages]
        if self.structured == "json_schema":
            try:
                return self._json_schema(chat, schema, max_tokens)
            except ModelUnavailable as exc:
                if not (exc.reason == "rejected" and exc.detail.startswith("HTTP 400")
                        and "response_format" in exc.detail):
                    raise
                self.structured = "tools"
        return self._tools(chat, schema, max_tokens)

    def _json_schema(self, chat: list[dict[str, Any]], schema: type[BaseModel],
                     max_tokens: int) -> RawReply:
        response = self._request(
            self._client.chat.completions.create, model=self.model, max_tokens=max_tokens,
            messages=chat, response_format={"type": "json_schema", "json_schema": {
                "name": schema.__name__, "schema": schema.model_json_schema()}})
        with reading("Chat Completions"):
            tokens_in, tokens_out = _usage(response)
            choice = _choice(response, tokens_in, tokens_out)
            return RawReply(_parse(choice.message.content, tokens_in, tokens_out),
                            tokens_in, tokens_out)

    def _tools(self, chat: list[dict[str, Any]], schema: type[BaseModel],
               max_tokens: int) -> RawReply:
        response = self._request(
            self._client.chat.completions.create, model=self.model, max_tokens=max_tokens,
            messages=chat,
            tools=[{"type": "function", "function": {
                "name": TOOL_NAME, "description": tool_description(schema),
                "parameters": schema.model_json_schema()}}],
            tool_choice={"type": "function", "function": {"name": TOOL_NAME}})
        with reading("Chat Completions"):
            tokens_in, tokens_out = _usage(response)
            choice = _choice(response, tokens_in, tokens_out)
            for call in choice.message.tool_calls or []:
                function = getattr(call, "function", None)
                if function is not None and function.name == TOOL_NAME:
                    return RawReply(_parse(function.arguments, tokens_in, tokens_out),
                                    tokens_in, tokens_out)
            raise Malformed(f"no {TOOL_NAME!r} tool call in the answer", tokens_in, tokens_out)


def _usage(response: Any) -> tuple[int, int]:
    usage = getattr(response, "usage", None)
    return (int(getattr(usage, "prompt_tokens", 0) or 0),
            int(getattr(usage, "completion_tokens", 0) or 0))


def _choice(response: Any, tokens_in: int, tokens_out: int) -> Any:
    if not response.choices:
        raise Malformed("the answer has no choices", tokens_in, tokens_out)
    choice = response.choices[0]
    if choice.finish_reason == "length":
        raise Malformed("the answer was cut off at max_tokens", tokens_in, tokens_out)
    return choice


def _parse(text: str | None, tokens_in: int, tokens_out: int) -> Any:
    if not text:
        raise Malformed("the answer is empty", tokens_in, tokens_out)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Malformed(f"the answer is not JSON: {exc}", tokens_in, tokens_out) from exc
