"""Asking a model for a proposal, one conversation per negotiation: what every LLM agent shares.

The model proposes, the framework disposes (DESIGN.md, principle 2). An LLM agent asks the model
for a structured answer (a pydantic model) and gets it back validated, or gets None when the model
gave none — a timeout, a 429, a 5xx, an answer malformed twice, a spent token budget: every
:class:`~haggler.llm.ModelUnavailable`. None is never an error: the caller checks a proposal
against its own rules (the turn rules, the owner's mandate) exactly as it checks its deterministic
agent's, and on None or a refusal lets that deterministic agent take the turn.

Tokens and cost are counted per negotiation: one :class:`~haggler.llm.Conversation` (with its
token budget) per key the caller names — a negotiation id, a trader and its listing. Conversations
are kept in least-recently-used order and at most ``max_conversations`` of them, so a long-running
agent's memory stays bounded; a negotiation evicted and resumed starts a fresh budget, which at
worst lets it spend its budget twice, never without bound.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import BaseModel

from haggler.llm.base import Conversation, LLMBackend, Message, ModelUnavailable, Usage
from haggler.llm.choice import DEFAULT_TOKEN_BUDGET

__all__ = ["REFUSED", "Proposer"]

T = TypeVar("T", bound=BaseModel)

#: The fallback reason of a proposal the framework refused (the others are ModelUnavailable's).
REFUSED = "refused"


def _quiet(_: str) -> None:
    """The default log: an agent embedded in a test or a library says nothing."""


@dataclass
class Proposer:
    """A backend, the per-negotiation conversations, and the count of turns the model did not
    take (``fallbacks``, by reason: ``timeout``, ``rate_limited``, ..., ``refused``, or a guard's
    own name, such as the match agent's ``unmet_condition``)."""

    backend: LLMBackend
    #: Tokens (input + output) one negotiation may spend; None: no limit.
    token_budget: int | None = DEFAULT_TOKEN_BUDGET
    max_conversations: int = 1024
    log: Callable[[str], None] = _quiet
    #: Every token spent, over all conversations (evicted ones included).
    usage: Usage = field(default_factory=Usage)
    fallbacks: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        if self.max_conversations < 1:
            raise ValueError("max_conversations must be at least 1")
        self._conversations: OrderedDict[Hashable, Conversation] = OrderedDict()

    def conversation(self, key: Hashable) -> Conversation:
        """The conversation of ``key``, made on first use; the least recently used one is dropped
        when there are more than ``max_conversations``."""
        conversation = self._conversations.pop(key, None) or Conversation(self.token_budget)
        self._conversations[key] = conversation
        if len(self._conversations) > self.max_conversations:
            self._conversations.popitem(last=False)
        return conversation

    def finish(self, key: Hashable) -> None:
        """Forget the conversation of a negotiation that has ended."""
        self._conversations.pop(key, None)

    def propose(self, key: Hashable, system: str, prompt: str, schema: type[T]) -> T | None:
        """The model's answer to ``prompt`` in the negotiation ``key``, validated against
        ``schema``; None when the model gave none (logged, counted in ``fallbacks``)."""
        conversation = self.conversation(key)
        before = conversation.usage.copy()
        try:
            return self.backend.complete(system, [Message("user", prompt)], schema, conversation).value
        except ModelUnavailable as exc:
            self.fallbacks[exc.reason] += 1
            self.log(f"the model gave no answer ({exc}); the deterministic agent takes the turn")
            return None
        finally:
            self.usage.include(conversation.usage.since(before))  # retries and failed calls too

    def refused(self, why: str, reason: str = REFUSED) -> None:
        """Record a proposal the framework refused (the deterministic agent takes the turn), counted
        under ``reason`` (default ``refused``; an agent may name a guard of its own)."""
        self.fallbacks[reason] += 1
        self.log(f"the model's proposal was refused ({why}); the deterministic agent takes the turn")
