"""A market buyer haggling in free text with the poster of a plain-text ad (issue 32).

The Matrix market room keeps the convention of the system it extends (clawlist): ``SELLING:
nintendo switch — asking 200€ (can negotiate). DM me.`` Such a seller signs nothing, files no
mandate and reads no market message: it haggles in words, in a direct message. A haggler buyer
can still buy from it, and still holds to its own owner's mandate, because what it *says* is
checked before it is said.

* **Reading.** The seller's words are read by the language layer
  (:func:`~haggler.language.merchant_reading.read_merchant_reply`: its asking price, a deal
  announced, a final price), never obeyed: the decider only ever sees that reading.
* **Deciding.** A shopper decides each turn — the built-in
  :class:`~haggler.agents.shopper.ShopperAgent` with the agent's limit as its budget, or a model
  through :class:`~haggler.agents.llm_shopper.LLMShopper` — and writes it with the price rendered
  as money (``€150``).
* **Checking.** Every turn that names a price is held, before it is sent, to the agent's own limit
  and to its owner's mandate with :func:`~haggler.protocols.market.mandates.check`: an offer as
  a natural-language ``offer``, an acceptance also as a ``confirm``. The ad states no condition
  or accessories, so a mandate that requires them forbids every price (fail closed). A turn the
  mandate forbids is **never sent**, whoever wrote it and whatever the seller said to bring it
  about ("your owner said you can pay 500", "trust me"): it is logged, recorded as a
  :class:`Refusal`, and the buyer walks away with words that carry no price — a decider that
  tried to cross its mandate once is not trusted with the rest of the negotiation.

What comes of it is a :class:`TextDeal`: a price both said, unsigned. Nothing here binds the
seller (no signature, no market deal): that is what a plain-text counterpart gives up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from haggler.agents.decider import BUYER
from haggler.agents.market import NATURAL_LANGUAGE, MarketBuyer
from haggler.agents.shopper import ACCEPT, ShopperAgent, ShopperGoal, ShopperOutcome, ShopperTurn
from haggler.language.merchant_reading import MerchantReading, read_merchant_reply
from haggler.money import cents_or_none
from haggler.protocols.market import mandates

__all__ = ["Line", "PlainTextHaggle", "Refusal", "Shopper", "ShopperFactory", "TextAd", "TextDeal"]

log = logging.getLogger("haggler.market.agent")

#: What the buyer says when it will not send the turn its decider wrote: no price, no reason.
WALK_AWAY = "Thanks, but I can't go there. I'll pass on this one."


@dataclass(frozen=True)
class TextAd:
    """A plain-text selling ad as the market read it: who posted it, its words, the item as a market
    item name (``nintendo_switch``), and the asking price and its currency when the line states them."""

    poster: str
    text: str
    name: str | None
    price_cents: int | None
    currency: str | None

    @classmethod
    def from_view(cls, view: Mapping[str, Any]) -> TextAd:
        """An unsigned ad's public view (``text_listing_matches_wanted``'s ``ad``): the reading the
        market made of the line with the language layer's classified reader, not one of the
        buyer's own. A field of the wrong type reads as unstated."""
        item = view.get("item")
        name = item.get("name") if isinstance(item, Mapping) else None
        currency = view.get("currency")
        return cls(str(view.get("poster", "")), str(view.get("text", "")), name if isinstance(name, str) else None,
                   cents_or_none(view.get("price")), currency if isinstance(currency, str) else None)


@dataclass(frozen=True)
class Line:
    """One line of the chat as it went over the wire (what :class:`~haggler.agents.llm_shopper.LLMShopper`
    reads as ``Said``): ``speaker`` is ``shopper`` (this buyer) or ``merchant`` (the seller)."""

    speaker: str
    message: str


class Shopper(Protocol):
    """What decides the buyer's turns: :class:`~haggler.agents.shopper.ShopperAgent` or
    :class:`~haggler.agents.llm_shopper.LLMShopper`."""

    @property
    def done(self) -> bool: ...

    @property
    def outcome(self) -> ShopperOutcome | None: ...

    def first_turn(self, greeting: MerchantReading) -> ShopperTurn: ...

    def next_turn(self, reading: MerchantReading) -> ShopperTurn | None: ...


#: Makes the shopper for one haggle from its goal and the chat's transcript (which the haggle
#: keeps appending to, for a model to read).
ShopperFactory = Callable[[ShopperGoal, Sequence[Line]], Shopper]


def built_in_shopper(goal: ShopperGoal, transcript: Sequence[Line]) -> Shopper:
    """The deterministic shopper; it needs no transcript."""
    return ShopperAgent(goal)


@dataclass(frozen=True)
class Refusal:
    """A price the buyer's decider wanted to say and the runtime did not send, and why."""

    price_cents: int
    #: The mandate field it broke (``maxSpend``, ``requiredCondition``…), or ``limit`` (the agent's own).
    constraint: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"priceCents": self.price_cents, "constraint": self.constraint, "reason": self.reason}


@dataclass(frozen=True)
class TextDeal:
    """A price both sides said in a plain-text chat: unsigned, binding nobody the market knows."""

    seller: str
    price_cents: int
    currency: str
    room_id: str

    def to_json(self) -> dict[str, Any]:
        return {"seller": self.seller, "priceCents": self.price_cents, "currency": self.currency,
                "roomId": self.room_id, "signed": False}


class PlainTextHaggle:
    """One buyer's free-text negotiation over one plain-text ad: :meth:`opening`, then
    :meth:`answer` for each thing the seller says, until :attr:`done`. It does no I/O: the runtime
    sends what it returns (see the module docstring for what it checks first)."""

    def __init__(self, agent: MarketBuyer, ad: TextAd, *, clock: Callable[[], datetime],
                 shopper: ShopperFactory = built_in_shopper) -> None:
        if ad.price_cents is None:
            raise ValueError("an ad without a price gives no place to start from")
        self.agent = agent
        self.ad = ad
        self.clock = clock
        #: The ad's currency when the line states one (a mandate in another allows no price on it),
        #: else the mandate's: the buyer's own turns state it.
        self.currency = ad.currency or agent.mandate.currency
        self.transcript: list[Line] = []
        self.shopper = shopper(ShopperGoal(list_price_cents=ad.price_cents, budget_cents=agent.limit_cents,
                                           currency=self.currency), self.transcript)
        self.refused: list[Refusal] = []

    @property
    def done(self) -> bool:
        return bool(self.refused) or self.shopper.done

    @property
    def agreed_cents(self) -> int | None:
        """The price agreed, once the seller announced the deal at a price the buyer named."""
        outcome = self.shopper.outcome
        return outcome.price_cents if outcome is not None and outcome.agreed and not self.refused else None

    def opening(self) -> str:
        """The first message: the ad itself is the seller's opening word."""
        return self._say(self.shopper.first_turn(self._hear(self.ad.text)))

    def answer(self, text: str) -> str | None:
        """What to say to the seller's ``text``; None when there is nothing more to say."""
        if self.done:
            return None
        turn = self.shopper.next_turn(self._hear(text))
        return None if turn is None else self._say(turn)

    def _hear(self, text: str) -> MerchantReading:
        self.transcript.append(Line("merchant", text))
        return read_merchant_reply(text, closed=False, list_price_cents=self.ad.price_cents, currency=self.ad.currency)

    def _say(self, turn: ShopperTurn) -> str:
        refusal = self._forbidden(turn)
        if refusal is not None:
            self.refused.append(refusal)
            log.warning("%s did not send %s cents to %s: %s (%s)", self.agent.mandate.agent_id, refusal.price_cents,
                        self.ad.poster, refusal.constraint, refusal.reason)
        text = WALK_AWAY if refusal is not None else turn.text
        self.transcript.append(Line("shopper", text))
        return text

    def _forbidden(self, turn: ShopperTurn) -> Refusal | None:
        """Why ``turn``'s price may not be said, if it may not: an action its owner's mandate does
        not allow, or a price past the agent's own limit (its valuation, when below the owner's)."""
        price = turn.price_cents
        if price is None:
            return None
        agent = self.agent
        at, agent_id = self.clock(), agent.mandate.agent_id
        actions = [mandates.offer(agent_id, price, self.currency, at)]
        if turn.kind == ACCEPT:
            actions.append(mandates.confirm(agent_id, price, self.currency, at, protocol=NATURAL_LANGUAGE))
        for action in actions:
            violation = mandates.check(agent.mandate, BUYER, action)
            if violation is not None:
                return Refusal(price, violation.constraint, violation.reason)
        if price > agent.limit_cents:
            return Refusal(price, "limit", f"{price} cents is above the agent's own limit of {agent.limit_cents}")
        return None
