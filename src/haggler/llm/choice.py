"""Which model an agent runs on, as an operator names it: provider, model, where, how long, at
what price (each agent keeps its own per-negotiation token budget).

Every LLM agent (the store's merchant, the shopper, a personal match agent, a market trader) is
configured the same way from the command line (``--llm-provider``, ``--llm-model``,
``--llm-base-url``, ``--llm-token-budget``, ``--llm-timeout``), so the choice is one value that
builds its backend once, at start-up, where a missing extra or key is the operator's error.
"""

from __future__ import annotations

from dataclasses import dataclass

from haggler.llm.base import LLMBackend, LLMSetupError, Prices

#: Tokens (input + output) one negotiation may spend before the deterministic agent takes over.
DEFAULT_TOKEN_BUDGET = 40_000


@dataclass(frozen=True)
class LLMChoice:
    provider: str
    model: str
    #: An OpenAI-compatible server's base URL (vLLM, llama.cpp, Ollama: ``http://127.0.0.1:11434/v1``),
    #: or a proxy in front of Anthropic; None: the provider's own API.
    base_url: str | None = None
    #: Seconds one model call may take before the deterministic agent takes the turn.
    timeout: float = 20.0
    prices: Prices | None = None
    api_key: str | None = None

    def __post_init__(self) -> None:
        if self.provider not in ("anthropic", "openai"):
            raise LLMSetupError(f"unknown LLM provider {self.provider!r}: use 'anthropic' or 'openai' "
                                "(any OpenAI-compatible server, with a base URL)")
        if not self.model.strip():
            raise LLMSetupError("an LLM agent needs a model name (--llm-model)")
        if self.timeout <= 0:
            raise LLMSetupError(f"the model timeout must be positive, got {self.timeout}")

    def backend(self) -> LLMBackend:
        """The backend; ``LLMSetupError`` when the ``llm`` extra or the API key is missing."""
        from haggler.llm import make_backend

        return make_backend(self.provider, self.model, api_key=self.api_key, base_url=self.base_url,
                            timeout=self.timeout, prices=self.prices)


def parse_prices(text: str) -> Prices:
    """``--llm-prices``: "INPUT,OUTPUT" in USD per million tokens (``3,15``)."""
    parts = [part.strip() for part in text.split(",")]
    try:
        if len(parts) != 2 or any(float(part) < 0 for part in parts):
            raise ValueError
        return Prices.per_million_usd(parts[0], parts[1])
    except (ValueError, ArithmeticError):
        raise LLMSetupError(f"--llm-prices takes two amounts in USD per million tokens, input and output "
                            f"(e.g. 3,15), got {text!r}") from None


def llm_choice(provider: str | None, model: str | None, *, base_url: str | None = None,
               timeout: float = 20.0, prices: Prices | None = None) -> LLMChoice | None:
    """The command line's LLM options as a choice: None when neither provider nor model is given
    (the deterministic agent), ``LLMSetupError`` when only one of them is."""
    if provider is None and model is None:
        if base_url is not None:
            raise LLMSetupError("--llm-base-url needs --llm-provider and --llm-model")
        return None
    if provider is None or model is None:
        raise LLMSetupError("an LLM agent needs both --llm-provider (anthropic or openai) and --llm-model")
    return LLMChoice(provider, model, base_url=base_url, timeout=timeout, prices=prices)
