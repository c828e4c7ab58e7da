"""Which model an agent runs on, as an operator names it: provider, model, where, how long, at
what price (each agent keeps its own per-negotiation token budget).

Every LLM agent (the store's merchant, the shopper, a personal match agent, a market trader) is
configured the same way from the command line (``--llm-provider``, ``--llm-model``,
``--llm-base-url``, ``--llm-token-budget``, ``--llm-timeout``, ``--llm-prices``), and its backend
is built once, at start-up, where a missing extra or key is the operator's error.
"""

from __future__ import annotations

from haggler.llm.base import LLMBackend, LLMSetupError, Prices

#: Tokens (input + output) one negotiation may spend before the deterministic agent takes over.
DEFAULT_TOKEN_BUDGET = 40_000


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


def backend_for_options(provider: str | None, model: str | None, *, base_url: str | None = None,
                        timeout: float = 20.0, prices: Prices | None = None) -> LLMBackend | None:
    """The backend the command line's LLM options name: None when neither provider nor model is
    given (the deterministic agent); ``LLMSetupError`` when only one of them is, when the model
    name is empty or the timeout not positive, and when the ``llm`` extra or the key is missing."""
    from haggler.llm import make_backend

    if provider is None and model is None:
        if base_url is not None:
            raise LLMSetupError("--llm-base-url needs --llm-provider and --llm-model")
        return None
    if provider is None or model is None:
        raise LLMSetupError("an LLM agent needs both --llm-provider (anthropic or openai) and --llm-model")
    if not model.strip():
        raise LLMSetupError("an LLM agent needs a model name (--llm-model)")
    if timeout <= 0:
        raise LLMSetupError(f"the model timeout must be positive, got {timeout}")
    return make_backend(provider, model, base_url=base_url, timeout=timeout, prices=prices)
