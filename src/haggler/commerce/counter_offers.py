"""A counter-offer for a buyer who leaves a checkout over price: the store's merchant agent haggles
once more, and the deal it makes is a discount code the buyer's agent can apply.

Checkout protocols let an agent say why it cancels (ACP's ``intent_trace.reason_code``, and the same
on UCP's cancel under ``org.haggler.negotiation``). When the reason is the price, the store opens a
negotiate.v1 chat on the buyer's behalf for the checkout's product and lets the built-in shopper
agent haggle in it against the store's own deterministic merchant agent, with a budget just below the
list price: the price agreed is a real negotiation's, within the merchant's floor by the same guards
as every chat, and on the record like every chat. Its deal is the counter-offer.

At most once per checkout (a canceled checkout cannot be canceled again, and a replayed
idempotency key replays the same answer), only for a checkout with no deal already applied and a
line of one unit of a negotiable product (a deal is for one unit), and counted against the caller's
address like a chat start, so that cancelling in a loop buys no more haggling than chatting does.
Off with ``--no-checkout-counter-offers``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from haggler.agents.shopper import ShopperAgent, ShopperGoal
from haggler.catalog import Catalog
from haggler.commerce.sessions import Priced
from haggler.errors import Closed, HagglerError
from haggler.language.merchant_reading import read_merchant_reply
from haggler.storage.chats import DealRow

log = logging.getLogger("haggler")

#: The cancellation reasons that are about the price (ACP's ``IntentTrace.reason_code`` values).
PRICE_REASONS = frozenset({"price_sensitivity"})


class Chats(Protocol):
    """What a counter-offer needs of the store's chat (``negotiate_v1.service.ChatService``)."""

    def start(self, product_id: str, client_ip: str, *, local: bool = False) -> "_Started": ...

    def answer(self, session_id: str, text: str, plan: None, *,
               checkout_url: Callable[[str], str]) -> "_Reply": ...


class _Started(Protocol):
    session_id: str
    greeting: str


class _Reply(Protocol):
    message: str
    closed: bool
    deal: DealRow | None


@dataclass(frozen=True, slots=True)
class Caller:
    """Who cancelled, for the chat-start limit: the client address, and whether it is this machine."""

    address: str
    local: bool


@dataclass(frozen=True, slots=True)
class CounterOffer:
    """A deal the buyer's agent can apply as a discount code, before ``expires_at``."""

    deal: DealRow
    title: str
    list_price_cents: int
    expires_at: datetime
    #: The deal's own checkout page, where a person can buy it too.
    checkout_url: str


class CounterOffers:
    def __init__(self, chats: Chats, catalog: Catalog, deal_page: Callable[[str, str], str], *,
                 deal_ttl: timedelta, max_turns: int, enabled: bool = True) -> None:
        """``deal_page(base, deal_id)``: a deal's checkout page; ``max_turns``: the store's message cap
        per chat, which the shopper agent plans within."""
        self.chats = chats
        self.deal_page = deal_page
        self.max_turns = max(2, min(ShopperAgent.MAX_TURNS, max_turns))
        self.catalog = catalog
        self.deal_ttl = deal_ttl
        self.enabled = enabled

    def after_cancel(self, canceled: Priced, reason: str | None, caller: Caller | None,
                     base: str) -> CounterOffer | None:
        """The counter-offer for a checkout just canceled for ``reason``, or None (see the module's
        docstring for when). A chat that cannot be had (the caller's chat starts used up, the store
        busy) is no counter-offer: the cancellation stands either way."""
        if not self.enabled or caller is None or reason not in PRICE_REASONS or canceled.deal is not None:
            return None
        line = next((li for li in canceled.session.lines
                     if li.quantity == 1 and self.catalog.product(li.product_id) is not None), None)
        if line is None:
            return None
        product = self.catalog.product(line.product_id)
        assert product is not None

        def deal_url(deal_id: str) -> str:
            return self.deal_page(base, deal_id)
        try:
            deal = self._haggle(product.id, product.list_price_cents, product.currency, caller, deal_url)
        except HagglerError as exc:  # a rate limit, a closed chat: no counter-offer, the cancel stands
            log.info("no counter-offer for checkout %s: %s", canceled.session.id, exc.message)
            return None
        if deal is None:
            return None
        return CounterOffer(deal, product.name, product.list_price_cents, deal.created_at + self.deal_ttl,
                            deal_url(deal.id))

    def _haggle(self, product_id: str, list_price_cents: int, currency: str, caller: Caller,
                deal_url: Callable[[str], str]) -> DealRow | None:
        """One chat between the built-in shopper agent (a budget one price unit below list: the
        buyer left at list) and the store's deterministic merchant; the deal, if they made one."""
        goal = ShopperGoal(list_price_cents=list_price_cents, budget_cents=list_price_cents - 1, currency=currency)
        shopper = ShopperAgent(goal, seed=0, max_turns=self.max_turns)
        chat = self.chats.start(product_id, caller.address, local=caller.local)
        turn = shopper.first_turn(read_merchant_reply(chat.greeting, closed=False, list_price_cents=list_price_cents,
                                                      currency=currency))
        while turn is not None:
            try:
                reply = self.chats.answer(chat.session_id, turn.text, None, checkout_url=deal_url)
            except Closed:
                return None
            if reply.deal is not None or reply.closed:
                return reply.deal
            turn = shopper.next_turn(read_merchant_reply(reply.message, closed=False,
                                                         list_price_cents=list_price_cents, currency=currency))
        return None


__all__ = ["Caller", "Chats", "CounterOffer", "CounterOffers", "PRICE_REASONS"]
