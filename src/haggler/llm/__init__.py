"""Language-model backends for haggler's LLM agents (issue 16): groundwork, no agents yet.

Why this layer looks the way it does: **the model proposes, the framework disposes**
(``../shared/DESIGN.md``, principle 2). A model's answer is only ever a proposal, so a backend
returns it as a validated pydantic instance that guards can check, or not at all. Every way a
model can fail — timeout, 429, 5xx, malformed or out-of-schema JSON (retried once), a spent
per-conversation token budget — becomes one typed error, ``ModelUnavailable(reason)``, on which the
caller lets the deterministic agent take the turn. A model failing therefore never reaches the
shopper as a 500.

The SDKs are an optional extra (``pip install 'haggler[llm]'``), imported only when a backend is
built; ``haggler.llm`` itself imports without them.

    backend = AnthropicBackend("claude-...")          # or OpenAIBackend("gpt-...", base_url=...)
    conversation = Conversation(token_budget=20_000)
    try:
        move = backend.complete(system, [Message("user", text)], Move, conversation).value
    except ModelUnavailable as exc:
        move = deterministic_agent.decide(...)        # exc.reason says why
"""

from __future__ import annotations

from typing import Any

from haggler.llm.anthropic_backend import AnthropicBackend
from haggler.llm.base import (
    INSTALL_HINT,
    Answer,
    Conversation,
    LLMBackend,
    LLMSetupError,
    Message,
    ModelUnavailable,
    Prices,
    Reason,
    Usage,
)
from haggler.llm.openai_backend import OpenAIBackend

__all__ = [
    "INSTALL_HINT",
    "Answer",
    "AnthropicBackend",
    "Conversation",
    "LLMBackend",
    "LLMSetupError",
    "Message",
    "ModelUnavailable",
    "OpenAIBackend",
    "Prices",
    "Reason",
    "Usage",
    "make_backend",
]


def make_backend(provider: str, model: str, **options: Any) -> LLMBackend:
    """``provider``: ``anthropic`` or ``openai`` (any OpenAI-compatible server via ``base_url``)."""
    if provider == "anthropic":
        return AnthropicBackend(model, **options)
    if provider == "openai":
        return OpenAIBackend(model, **options)
    raise LLMSetupError(f"unknown LLM provider {provider!r}: use 'anthropic' or 'openai' "
                        "(any OpenAI-compatible server, with a base URL)")
