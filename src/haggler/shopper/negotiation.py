"""Run haggler's shopper agent against any nash.v1 or negotiate.v1 store, end to end.

One async implementation serves `haggler shop` (through ``asyncio.run``) and the MCP
``negotiate`` tool. The agent reads the store's structured ``offer``/``deal`` when the store
sends them and the merchant's free text otherwise, so it haggles with LLM merchants too. Given a
model backend, a model writes the turns (:class:`~haggler.agents.llm_shopper.LLMShopper`) within
the deterministic agent's limits, and the deterministic agent takes every turn the model cannot.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from haggler.agents.llm_shopper import LLMReport, LLMShopper
from haggler.agents.shopper import OVER_BUDGET, ShopperAgent, ShopperGoal, ShopperTurn
from haggler.language.intents import IntentKind
from haggler.language.merchant_reading import MerchantReading, read_merchant_reply
from haggler.language.parse import parse_shopper_turn
from haggler.llm.base import LLMBackend
from haggler.llm.choice import DEFAULT_TOKEN_BUDGET
from haggler.money import to_cents, to_decimal_number
from haggler.shopper.client import AsyncNegotiateClient
from haggler.shopper.errors import NotFound
from haggler.shopper.models import Deal, Listing, StoreInfo, wire_view


@dataclass(frozen=True, slots=True)
class Line:
    speaker: str  # "merchant" | "shopper"
    message: str


@dataclass(frozen=True)
class NegotiationResult:
    store: str
    #: The version the store's descriptor names ("nash.v1" or "negotiate.v1").
    protocol: str
    product_id: str
    product_name: str
    list_price_cents: int
    currency: str
    #: "deal", "walked_away" (the shopper left), "merchant_closed" (the store ended it without
    #: a deal), "gave_up" (turn limit), or "over_budget" (the store reported a deal above the
    #: budget: not the shopper's deal, so no checkout link; its price is the store's).
    outcome: str
    price_cents: int | None
    extras: tuple[str, ...]
    session_id: str
    turns: int
    transcript: tuple[Line, ...]
    deal_id: str | None = None
    checkout_url: str | None = None
    #: What the model did and cost, when a model wrote the turns (None: the deterministic agent).
    llm: LLMReport | None = None

    @property
    def agreed(self) -> bool:
        return self.outcome == "deal"

    @property
    def saving_cents(self) -> int | None:
        return self.list_price_cents - self.price_cents if self.price_cents is not None else None

    def to_json(self) -> dict[str, Any]:
        def money(cents: int | None) -> int | float | None:
            return to_decimal_number(cents) if cents is not None else None

        return {
            "store": self.store, "protocol": self.protocol, "product_id": self.product_id,
            "product_name": self.product_name,
            "outcome": self.outcome, "price": money(self.price_cents), "currency": self.currency,
            "extras": list(self.extras), "list_price": money(self.list_price_cents),
            "saving": money(self.saving_cents), "turns": self.turns, "session_id": self.session_id,
            "deal_id": self.deal_id, "checkout_url": self.checkout_url,
            "transcript": [{"speaker": line.speaker, "message": line.message} for line in self.transcript],
            "llm": self.llm.to_json() if self.llm is not None else None,
        }


def listing_for(store: StoreInfo, product_id: str) -> Listing:
    """The store's listing of ``product_id``; NotFound names what the store does list."""
    listing = store.product(product_id)
    if listing is None:
        raise NotFound(f"{store.name or 'the store'} does not list {product_id!r}; it lists: "
                       + ", ".join(p.id for p in store.products), status=404)
    return listing


def goal_for(listing: Listing, budget: float, target: float | None, values: dict[str, float] | None) -> ShopperGoal:
    """A shopper goal for ``listing`` from amounts as people give them (decimal, in the
    listing's currency); ValueError names what is wrong."""
    try:
        budget_cents = to_cents(budget)
        target_cents = to_cents(target) if target is not None else None
        extra_values = {k: to_cents(v) for k, v in (values or {}).items()}
        return ShopperGoal(list_price_cents=listing.list_price_cents or budget_cents, budget_cents=budget_cents,
                           target_cents=target_cents, extra_values=extra_values, currency=listing.currency)
    except ValueError as exc:
        raise ValueError(f"bad negotiation goal: {exc}") from exc


#: Either shopper: the deterministic agent, or a model writing turns within its limits.
Shopper = ShopperAgent | LLMShopper

#: Lets a person (``haggle shop --interactive``) edit or replace each turn: receives the
#: agent's suggested text, returns what to send.
Decide = Callable[[ShopperTurn], Awaitable[str]]


async def run_negotiation(client: AsyncNegotiateClient, store: StoreInfo, product_id: str, goal: ShopperGoal, *,
                          seed: int | None = None, structured: bool = False, decide: Decide | None = None,
                          on_line: Callable[[Line], None] | None = None, backend: LLMBackend | None = None,
                          token_budget: int | None = DEFAULT_TOKEN_BUDGET) -> NegotiationResult:
    """Haggle for one product until the chat closes or the agent is done.

    ``structured`` sends the agent's turns as JSON messages (the store's extension) instead of
    text; replies are read from the structured fields whenever the store includes them.
    ``backend``: a model writes the turns, spending at most ``token_budget`` tokens (None: no
    limit) before the deterministic agent finishes the negotiation. Turns are decided in a worker
    thread, so a model call never blocks the event loop."""
    listing = listing_for(store, product_id)
    list_price = listing.list_price_cents or goal.list_price_cents
    cap = store.limits.max_messages_per_chat or ShopperAgent.MAX_TURNS
    agent = ShopperAgent(goal, seed=seed, max_turns=max(2, min(ShopperAgent.MAX_TURNS, cap)))
    transcript: list[Line] = []
    shopper: Shopper = agent
    if backend is not None:
        shopper = LLMShopper(agent, backend, product=listing.name, transcript=transcript, token_budget=token_budget,
                             max_chars=store.limits.max_message_length_chars)

    def record(speaker: str, message: str) -> None:
        line = Line(speaker, message)
        transcript.append(line)
        if on_line is not None:
            on_line(line)

    chat = await client.start(store, product_id)
    record("merchant", chat.greeting)
    reading = read_merchant_reply(chat.greeting, closed=False, offer=wire_view(chat.offer), list_price_cents=list_price,
                                  currency=listing.currency)
    turn: ShopperTurn | None = await asyncio.to_thread(shopper.first_turn, reading)
    next_url: str | None = chat.next_url
    deal: Deal | None = None
    checkout_url: str | None = None
    sent = 0
    while turn is not None and next_url is not None:
        message = json.dumps(turn.structured) if structured else turn.text
        if decide is not None:
            message = await decide(turn)
        record("shopper", message)
        reply = await client.say(store, next_url, message)
        sent += 1
        record("merchant", reply.message)
        deal = reply.deal or deal
        checkout_url = reply.checkout_url or checkout_url
        reading = read_merchant_reply(reply.message, closed=reply.closed, offer=wire_view(reply.offer),
                                      deal=wire_view(reply.deal), list_price_cents=list_price,
                                      currency=listing.currency)
        next_url = reply.next_url
        turn = await asyncio.to_thread(shopper.next_turn, reading)
    return _result(store, listing, list_price, chat.session_id, shopper, reading, deal, checkout_url, sent,
                   transcript)


def _result(store: StoreInfo, listing: Listing, list_price: int, session_id: str, agent: Shopper,
            reading: MerchantReading, deal: Deal | None, checkout_url: str | None, sent: int,
            transcript: list[Line]) -> NegotiationResult:
    """The outcome as the shopper sees it. ``checkout_url`` is the closing reply's top-level one
    (nash.v1), preferred to the deal's own: it is where that version tells shoppers to pay."""
    outcome = agent.outcome
    if deal is not None:
        # The store's own record of the deal (held to the budget below, as every deal is).
        kind, price, extras = "deal", deal.price_cents, deal.extras
    elif outcome is not None:
        kind, price, extras = outcome.reason, outcome.price_cents, outcome.extras
    elif reading.closed and reading.deal:
        kind, price, extras = "deal", reading.price_cents, reading.extras
    elif reading.closed:
        kind, price, extras = "merchant_closed", None, ()
    else:
        kind, price, extras = "gave_up", None, ()
    said = [line.message for line in transcript if line.speaker == "shopper"]
    if kind == "merchant_closed" and said and parse_shopper_turn(said[-1]).kind is IntentKind.WALK_AWAY:
        kind = "walked_away"  # a person at the keyboard (--interactive) left in their own words
    if kind == "deal" and (price is None or price > agent.goal.budget_cents):
        # A deal above the budget is not one the shopper made, whatever the chat said: the store's
        # record of one, or a person at the keyboard (--interactive) accepting terms read from text.
        kind = OVER_BUDGET if price is not None else "merchant_closed"
    if kind == OVER_BUDGET:
        checkout = None
    elif kind != "deal":
        price, extras, checkout = None, (), None
    else:
        checkout = checkout_url or (deal.checkout_url if deal else reading.checkout_url)
    return NegotiationResult(
        store=store.name, protocol=store.protocol, product_id=listing.id, product_name=listing.name,
        list_price_cents=list_price,
        currency=listing.currency, outcome=kind, price_cents=price, extras=tuple(extras),
        session_id=session_id, turns=sent, transcript=tuple(transcript),
        deal_id=deal.id if deal else None, checkout_url=checkout,
        llm=agent.report() if isinstance(agent, LLMShopper) else None,
    )
