"""The backend interface: one call, a validated answer or one typed error.

``LLMBackend.complete`` sends a system prompt and messages, asks for an answer shaped like a
pydantic model, validates it, and counts the tokens on a ``Conversation``. Everything that can go
wrong with the model — a timeout, a 429, a 5xx, an answer that is not the asked shape (after one
retry), a spent token budget — surfaces as ``ModelUnavailable`` with a ``reason``, which a caller
turns into "the deterministic agent takes this turn". A misconfiguration found before any call (the
extra not installed, no key) is ``LLMSetupError``: that is the operator's problem, raised at start.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from types import ModuleType
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

Reason = Literal["timeout", "rate_limited", "server_error", "unreachable", "rejected",
                 "malformed", "budget_exhausted", "suspended"]
"""Why the model did not answer. ``rejected``: the provider refused the request (4xx other than
429: a bad key, an unknown model); ``unreachable``: no connection to the provider; ``suspended``:
the provider failed several calls in a row and is given a rest (see ``Breaker``)."""

Role = Literal["user", "assistant"]
T = TypeVar("T", bound=BaseModel)

INSTALL_HINT = "pip install 'haggler[llm]'"


class LLMSetupError(RuntimeError):
    """The backend cannot be built: the optional SDK is missing or no API key was given."""


class ModelUnavailable(Exception):
    """The model gave no usable answer for this turn; the deterministic agent takes it."""

    def __init__(self, reason: Reason, detail: str = "") -> None:
        self.reason: Reason = reason
        self.detail = detail
        super().__init__(f"model unavailable ({reason})" + (f": {detail}" if detail else ""))


@dataclass(frozen=True)
class Message:
    role: Role
    content: str


@dataclass(frozen=True)
class Prices:
    """A model's prices in nano-dollars per token (money is integers): $3 per million input
    tokens is ``input=3000``. ``Prices.per_million_usd(3, 15)`` says it the providers' way."""

    input: int
    output: int

    @classmethod
    def per_million_usd(cls, input_usd: float | str, output_usd: float | str) -> Prices:
        return cls(int(Decimal(str(input_usd)) * 1000), int(Decimal(str(output_usd)) * 1000))

    def cost(self, input_tokens: int, output_tokens: int) -> int:
        return input_tokens * self.input + output_tokens * self.output


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cost_nanousd: int = 0
    """What the tokens cost at the backend's ``Prices`` (0 when it has none)."""

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, input_tokens: int, output_tokens: int, cost_nanousd: int = 0) -> None:
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.calls += 1
        self.cost_nanousd += cost_nanousd

    def copy(self) -> Usage:
        return Usage(self.input_tokens, self.output_tokens, self.calls, self.cost_nanousd)

    def since(self, before: Usage) -> Usage:
        """What was spent between ``before`` (an earlier ``copy`` of this) and now: one turn's
        calls on a conversation, retries and failed calls included."""
        return Usage(self.input_tokens - before.input_tokens, self.output_tokens - before.output_tokens,
                     self.calls - before.calls, self.cost_nanousd - before.cost_nanousd)

    def include(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.calls += other.calls
        self.cost_nanousd += other.cost_nanousd


@dataclass
class Conversation:
    """Token accounting for one negotiation. ``token_budget`` (input + output, ``None``: no limit)
    is checked before every call: once it is reached, no further request is sent; and a call's
    ``max_tokens`` is capped by what remains of it."""

    token_budget: int | None = None
    usage: Usage = field(default_factory=Usage)

    @property
    def remaining(self) -> int | None:
        if self.token_budget is None:
            return None
        return max(0, self.token_budget - self.usage.total_tokens)

    @property
    def exhausted(self) -> bool:
        return self.token_budget is not None and self.usage.total_tokens >= self.token_budget


@dataclass(frozen=True)
class Answer(Generic[T]):
    value: T
    usage: Usage
    """The tokens of this answer, retries included (the conversation holds the running total)."""


@dataclass(frozen=True)
class RawReply:
    """What one provider call returned, before validation: ``data`` is the structured answer as
    parsed JSON (a dict when well formed), or the text / ``None`` when the model did not comply."""

    data: Any
    input_tokens: int
    output_tokens: int


class Malformed(Exception):
    """Raised by a backend's ``_call`` when the reply is unusable; counts as a malformed attempt."""

    def __init__(self, detail: str, input_tokens: int = 0, output_tokens: int = 0) -> None:
        super().__init__(detail)
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens


#: The one tool a backend forces the model to call; its input is the structured answer.
TOOL_NAME = "answer"


def tool_description(schema: type[BaseModel]) -> str:
    return f"Give your answer as a {schema.__name__}."


def import_sdk(module: str, backend: str, key_env: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise LLMSetupError(
            f"the {backend} backend needs the `{module}` package: {INSTALL_HINT}; "
            f"it also needs an API key ({key_env} or api_key=...)") from exc


def require_key(api_key: str | None, env: dict[str, str] | Any, backend: str, key_env: str) -> str:
    key = api_key or env.get(key_env)
    if not key:
        raise LLMSetupError(
            f"the {backend} backend needs an API key: set {key_env} or pass api_key=... "
            f"(and the SDK: {INSTALL_HINT})")
    return str(key)


class Breaker:
    """Stops calling a provider that keeps failing: after ``failures`` calls in a row that found
    it down (timeout, unreachable, 429, 5xx, a refused key), no call is sent for ``rest``
    seconds, so that each turn falls back at once instead of waiting out its own timeout; the
    first call after the rest probes the provider again. Shared by every conversation of one
    backend (one store, one shopper process), hence the lock."""

    def __init__(self, failures: int = 3, rest: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.failures = failures
        self.rest = rest
        self._clock = clock
        self._lock = threading.Lock()
        self._in_a_row = 0
        self._until = 0.0

    def check(self) -> None:
        with self._lock:
            if self._in_a_row >= self.failures and self._clock() < self._until:
                raise ModelUnavailable("suspended", f"{self._in_a_row} failed calls in a row; "
                                                    f"retrying in {self._until - self._clock():.0f}s")

    def record(self, provider_down: bool) -> None:
        with self._lock:
            self._in_a_row = self._in_a_row + 1 if provider_down else 0
            if self._in_a_row >= self.failures:
                self._until = self._clock() + self.rest


#: Reasons that say the provider, not the answer, failed: they count towards the breaker.
PROVIDER_DOWN = frozenset({"timeout", "unreachable", "rate_limited", "server_error", "rejected"})


class LLMBackend:
    """Base of the provider backends. Subclasses implement ``_call`` (one request through
    ``_request``, its response read inside ``reading``); ``complete`` adds validation, the single
    retry of a malformed answer, the budget and the accounting."""

    name = "llm"
    malformed_attempts = 2  # the first answer and one retry
    _sdk: ModuleType

    def __init__(self, model: str, *, max_tokens: int = 1024, prices: Prices | None = None) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.prices = prices
        self.breaker = Breaker()

    def complete(self, system: str, messages: list[Message], schema: type[T],
                 conversation: Conversation | None = None) -> Answer[T]:
        conversation = conversation if conversation is not None else Conversation()
        before = conversation.usage.copy()
        detail = ""
        for _ in range(self.malformed_attempts):
            if conversation.exhausted:
                raise ModelUnavailable("budget_exhausted",
                                       f"{conversation.usage.total_tokens} of "
                                       f"{conversation.token_budget} tokens used")
            self.breaker.check()
            try:
                reply = self._call(system, messages, schema, self._max_tokens(conversation))
            except ModelUnavailable as exc:
                self.breaker.record(exc.reason in PROVIDER_DOWN)
                raise
            except Malformed as exc:
                self.breaker.record(False)
                self._count(exc.input_tokens, exc.output_tokens, conversation.usage)
                detail = str(exc)
                continue
            self.breaker.record(False)
            self._count(reply.input_tokens, reply.output_tokens, conversation.usage)
            try:
                return Answer(schema.model_validate(reply.data), conversation.usage.since(before))
            except ValidationError as exc:
                detail = f"answer does not match {schema.__name__}: {exc.error_count()} error(s): " \
                         f"{exc.errors()[0]['msg']}"
        raise ModelUnavailable("malformed", detail)

    def _count(self, input_tokens: int, output_tokens: int, usage: Usage) -> None:
        usage.add(input_tokens, output_tokens, self.prices.cost(input_tokens, output_tokens) if self.prices else 0)

    def _max_tokens(self, conversation: Conversation) -> int:
        """The answer's length is capped by what is left of the budget, so one call overshoots
        it by at most its input."""
        remaining = conversation.remaining
        return self.max_tokens if remaining is None else max(1, min(self.max_tokens, remaining))

    def _connect(self, module: str, client: str, key_env: str, *, api_key: str | None, base_url: str | None,
                 timeout: float, max_retries: int) -> Any:
        """The provider's SDK client (``module.client``), the SDK imported only now; a missing SDK
        or key is an ``LLMSetupError`` naming both the extra and ``key_env``."""
        self._sdk = import_sdk(module, self.name, key_env)
        key = require_key(api_key, os.environ, self.name, key_env)
        return getattr(self._sdk, client)(api_key=key, base_url=base_url, timeout=timeout, max_retries=max_retries)

    def _call(self, system: str, messages: list[Message], schema: type[BaseModel],
              max_tokens: int) -> RawReply:
        raise NotImplementedError

    def _request(self, create: Callable[..., Any], **kwargs: Any) -> Any:
        """One SDK call, its API errors turned into ``ModelUnavailable`` (a body that is not
        JSON at all into ``Malformed``); anything else is a bug and propagates."""
        try:
            return create(**kwargs)
        except Exception as exc:
            mapped: Exception | None = classify(self._sdk, exc)
            if mapped is None and isinstance(exc, ValueError):
                mapped = Malformed(f"the provider's response is not JSON: {exc}")
            if mapped is None:
                raise
            raise mapped from exc


@contextmanager
def reading(api: str) -> Iterator[None]:
    """Around the code that reads an SDK response object: a provider (or a proxy, or a local
    server) answering 200 with something else than the API's shape makes a malformed answer,
    not an ``AttributeError`` on the shopper's request."""
    try:
        yield
    except Malformed:
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValueError) as exc:
        raise Malformed(f"not a {api} response: {type(exc).__name__}: {exc}") from exc


def classify(sdk: ModuleType, exc: Exception) -> ModelUnavailable | None:
    """Map one of the official SDKs' errors (``anthropic`` and ``openai`` share the names) to
    ``ModelUnavailable``; ``None`` for anything that is not an API error (a bug: let it raise)."""
    if isinstance(exc, sdk.APITimeoutError):
        return ModelUnavailable("timeout", str(exc))
    if isinstance(exc, sdk.APIConnectionError):
        return ModelUnavailable("unreachable", str(exc))
    if isinstance(exc, sdk.RateLimitError):
        return ModelUnavailable("rate_limited", str(exc))
    if isinstance(exc, sdk.APIStatusError):
        if exc.status_code == 408:
            return ModelUnavailable("timeout", "HTTP 408")
        if exc.status_code >= 500:  # 529: Anthropic's "overloaded" too
            return ModelUnavailable("server_error", f"HTTP {exc.status_code}")
        return ModelUnavailable("rejected", f"HTTP {exc.status_code}: {exc}")
    if isinstance(exc, getattr(sdk, "APIResponseValidationError", ())):
        return ModelUnavailable("malformed", str(exc))
    if isinstance(exc, sdk.APIError):
        return ModelUnavailable("server_error", str(exc))
    return None
