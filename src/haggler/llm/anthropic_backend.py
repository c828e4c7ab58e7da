"""The Anthropic Messages API through the official ``anthropic`` SDK (imported lazily).

Structured output: a single tool whose ``input_schema`` is the pydantic model's JSON schema, and
``tool_choice`` forcing it, so the answer arrives as the tool call's input.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from haggler.llm.base import TOOL_NAME, LLMBackend, Malformed, Message, Prices, RawReply, reading, tool_description


class AnthropicBackend(LLMBackend):
    name = "anthropic"

    def __init__(self, model: str, *, api_key: str | None = None, base_url: str | None = None,
                 timeout: float = 30.0, max_retries: int = 1, max_tokens: int = 1024,
                 prices: Prices | None = None) -> None:
        super().__init__(model, max_tokens=max_tokens, prices=prices)
        self._client = self._connect("anthropic", "Anthropic", "ANTHROPIC_API_KEY", api_key=api_key,
                                     base_url=base_url, timeout=timeout, max_retries=max_retries)

    def _call(self, system: str, messages: list[Message], schema: type[BaseModel],
              max_tokens: int) -> RawReply:
        tool: dict[str, Any] = {
            "name": TOOL_NAME,
            "description": tool_description(schema),
            "input_schema": schema.model_json_schema(),
        }
        response = self._request(
            self._client.messages.create, model=self.model, max_tokens=max_tokens,
            system=system, messages=[{"role": m.role, "content": m.content} for m in messages],
            tools=[tool], tool_choice={"type": "tool", "name": TOOL_NAME})
        with reading("Messages API"):
            return _read(response)


def _read(response: Any) -> RawReply:
    usage = getattr(response, "usage", None)
    tokens_in = int(getattr(usage, "input_tokens", 0) or 0)
    tokens_out = int(getattr(usage, "output_tokens", 0) or 0)
    if response.stop_reason == "max_tokens":
        raise Malformed("the answer was cut off at max_tokens", tokens_in, tokens_out)
    for block in response.content:
        if getattr(block, "type", None) == "tool_use" and block.name == TOOL_NAME:
            return RawReply(block.input, tokens_in, tokens_out)
    raise Malformed(f"no {TOOL_NAME!r} tool call in the answer", tokens_in, tokens_out)
