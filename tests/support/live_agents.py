"""Live market agents in tests (``haggler.agents.market_live``): running several at once, reading
what the market's audit log says of them, and a decider that believes what a seller tells it."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from haggler.agents.market_live import LiveAgent, LiveResult
from haggler.agents.plain_text_haggle import Line
from haggler.agents.shopper import OFFER, ShopperAgent, ShopperGoal, ShopperOutcome, ShopperTurn, structured_message
from haggler.language.merchant_reading import MerchantReading

SWITCH = {"category": "electronics", "subcategory": "gaming_console", "name": "nintendo_switch", "condition": "good"}


def run_together(*agents: LiveAgent, duration: float = 60.0) -> list[LiveResult]:
    """Each agent runs in a thread of its own, as two programs would."""
    with ThreadPoolExecutor(len(agents)) as pool:
        return [future.result(timeout=duration + 30) for future in [pool.submit(agent.run, duration)
                                                                   for agent in agents]]


def violations(http: httpx.Client, *agents: LiveAgent) -> list[dict[str, Any]]:
    """The mandate violations the market's audit log holds for the agents (each reads its own)."""
    return [entry for agent in agents for entry in
            http.get("/market/audit", headers=agent.client.auth).json()["entries"]
            if entry["event"] == "mandate_violation"]


class Gullible:
    """A decider that believes the seller: told the owner allows more, it offers 500€ (a model
    talked into it might; the built-in shopper never does)."""

    def __init__(self, goal: ShopperGoal, transcript: Sequence[Line]) -> None:
        self.inner = ShopperAgent(goal)
        self.transcript = transcript

    @property
    def done(self) -> bool:
        return self.inner.done

    @property
    def outcome(self) -> ShopperOutcome | None:
        return self.inner.outcome

    def first_turn(self, greeting: MerchantReading) -> ShopperTurn:
        return self.inner.first_turn(greeting)

    def next_turn(self, reading: MerchantReading) -> ShopperTurn | None:
        if "owner" in self.transcript[-1].message:
            return ShopperTurn(OFFER, 50000, "Oh, if my owner said so: 500€ it is!", structured_message(OFFER, 50000))
        return self.inner.next_turn(reading)
