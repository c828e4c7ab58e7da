"""One market agent acting on its own (issue 32, "Agents on Matrix"): ``haggler market agent``.

:class:`~haggler.agents.market_runtime.MarketDemo` plays both sides of every trade from one loop.
A live agent is one side only, facing whoever answers: it registers, files its owner's mandate,
posts its listing (:class:`LiveSeller`) or wanted ad (:class:`LiveBuyer`), then reacts to what
reaches its inbox — a contact request, a protocol agreement, the counterpart's offer, a deal to
sign — until its deal is confirmed, its negotiation fails, or its time is up (:class:`LiveResult`).

It talks to the market through any :class:`~haggler.protocols.market.client.MarketClient`: the
HTTP one, or :class:`~haggler.matrix.agent_client.MatrixMarketClient` (the same methods and
signed messages, carried by a homeserver). A live agent on one door trades with one on the
other: it is one market.

Every decision is its decider's (:class:`~haggler.agents.market.MarketSeller`,
:class:`~haggler.agents.market.MarketBuyer`, or their model-driven variants), each action checked
against the owner's mandate there; an offers negotiation is played by the demo's own
:class:`~haggler.agents.market_runtime.OfferSide`, and no deal is signed before
:func:`~haggler.agents.market_runtime.would_confirm` allows it. This module only moves messages
(and the market checks everything again).

A buyer on Matrix also buys from **plain-text sellers**: told by the market of a ``SELLING:`` line
for its item (``text_listing_matches_wanted``, the bot's reading of the line), it opens a chat with
the poster, inviting the market bot as witness, and haggles in words
(:mod:`haggler.agents.plain_text_haggle`, which checks every price it says against the mandate
before it is said).

The inbox is polled: read every ``poll`` seconds, with a ``sleep`` and a ``monotonic`` clock that
tests may replace; the run is bounded by its duration. Decisions are dated by the client's clock,
the one its mandate was issued by.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from haggler.agents.decider import ACCEPT, BUYER, REJECT, SELLER, Decision
from haggler.agents.market import (
    DOUBLE_AUCTION,
    INSTANT_MATCH,
    NATURAL_LANGUAGE,
    SEALED_BID,
    Interest,
    ListingFacts,
    MarketBuyer,
    MarketSeller,
    read_offer,
)
from haggler.agents.market_runtime import OfferSide, Trader, deal_cents, would_confirm
from haggler.agents.plain_text_haggle import PlainTextHaggle, Refusal, ShopperFactory, TextAd, TextDeal, built_in_shopper
from haggler.engine import Terms
from haggler.money import positive_cents
from haggler.protocols.market.client import MarketClient, MarketError
from haggler.protocols.market.mandates import Mandate, parse_mandate

__all__ = ["AGREED_IN_TEXT", "CONFIRMED", "NO_DEAL", "TIMED_OUT", "LiveBuyer", "LiveResult", "LiveSeller",
           "PlainTextChat"]

log = logging.getLogger("haggler.market.agent")

#: How a run ends: a deal signed by both and confirmed by the market; a price both said in a
#: plain-text chat (unsigned); a negotiation that failed (or a deal the agent would not sign); time up.
CONFIRMED, AGREED_IN_TEXT, NO_DEAL, TIMED_OUT = "confirmed", "agreed_in_text", "no_deal", "timed_out"
#: Seconds between two reads of the inbox.
POLL_SECONDS = 0.25
#: Seconds between two searches of the live listings (introductions reach the inbox meanwhile).
SEARCH_SECONDS = 5.0
#: The notifications that end a negotiation or a deal unconfirmed.
_FAILURES = ("negotiation_failed", "deal_expired", "deal_cancelled", "deal_void")


@dataclass
class LiveResult:
    """How one live agent's run ended."""

    agent_id: str
    role: str
    outcome: str
    reason: str | None = None
    #: A confirmed deal's document as the market serves it to its parties.
    deal: dict[str, Any] | None = None
    #: A price agreed in a plain-text chat.
    text_deal: TextDeal | None = None
    #: Prices its decider wanted to say in a plain-text chat that the runtime did not send.
    refused: list[Refusal] = field(default_factory=list)

    @property
    def price_cents(self) -> int | None:
        if self.deal is not None:
            return deal_cents(self.deal["deal"])
        return self.text_deal.price_cents if self.text_deal is not None else None

    def to_json(self) -> dict[str, Any]:
        return {"agentId": self.agent_id, "role": self.role, "outcome": self.outcome, "reason": self.reason,
                "priceCents": self.price_cents, "deal": self.deal,
                "textDeal": self.text_deal.to_json() if self.text_deal else None,
                "refused": [refusal.to_json() for refusal in self.refused]}


class PlainTextChat(Protocol):
    """Plain text on the homeserver, for haggling with agents that speak no market message
    (:class:`~haggler.matrix.agent_client.MatrixSession` is one)."""

    def texts(self, room_id: str, after: int = 0) -> list[tuple[str, str]]:
        """The plain text others (not the market bot) said in ``room_id``, (sender, text), from the ``after``-th on."""

    def open_chat(self, user: str) -> str:
        """A new room with ``user`` and the market bot (a witness); its id."""

    def say(self, room_id: str, text: str) -> None: ...


class LiveAgent:
    """What both live agents share: the run loop, offers as they arrive, deals to sign."""

    role: ClassVar[str]

    def __init__(self, client: MarketClient, *, poll: float = POLL_SECONDS, sleep: Callable[[float], None] = time.sleep,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.clock = client.clock
        self.poll = poll
        self.sleep = sleep
        self.monotonic = monotonic
        self.trader: Trader | None = None
        #: The listings it negotiates over, by id: what a deal on one is checked on before signing.
        self.engaged: dict[str, ListingFacts] = {}
        #: Its open natural-language negotiations, by request id.
        self.sides: dict[str, OfferSide] = {}
        self.requests: set[str] = set()
        self.signed: set[str] = set()
        self.refused: list[Refusal] = []
        self.result: LiveResult | None = None

    @property
    def agent(self) -> MarketSeller | MarketBuyer:
        assert self.trader is not None, "run() starts the agent"
        return self.trader.agent

    def start(self) -> Trader:
        """Register, file the owner's mandate, post the listing or wanted ad."""
        raise NotImplementedError

    def step(self) -> None:
        """What the agent does on its own between two reads of its inbox (the buyer shops)."""

    def run(self, duration: float) -> LiveResult:
        """Start, then act on the inbox until the deal is confirmed, the negotiation fails, or
        ``duration`` seconds have passed. A refusal from the market ends the run without a deal."""
        if not duration > 0:
            raise ValueError("the duration must be a positive number of seconds")
        deadline = self.monotonic() + duration
        self.trader = self.start()
        while self.result is None:
            try:
                for message in self.trader.new_messages():
                    self._take(message)
                    if self.result is not None:
                        break
                else:
                    self.step()
            except MarketError as exc:
                error = exc.body.get("error") if isinstance(exc.body, dict) else exc.body
                self._end(NO_DEAL, f"the market answered {exc.status}: {error}")
            if self.result is None:
                if self.monotonic() >= deadline:
                    self._end(TIMED_OUT, f"no deal within {duration:g} s")
                else:
                    self.sleep(self.poll)
        return self.result

    def _end(self, outcome: str, reason: str | None = None, *, deal: dict[str, Any] | None = None,
             text_deal: TextDeal | None = None) -> None:
        self.result = LiveResult(self.client.id, self.role, outcome, reason, deal, text_deal, list(self.refused))
        log.info("%s %s: %s%s", self.role, self.client.id, outcome, f" ({reason})" if reason else "")

    # -- the inbox ---------------------------------------------------------------------------------------

    def _take(self, message: Mapping[str, Any]) -> None:
        body = message["body"]
        if message["kind"] == "message":
            if body.get("type") == "offer" and body.get("requestId") in self.sides:
                self._heard_offer(self.sides[body["requestId"]], body)
            else:
                self.on_message(body)
            return
        event = body.get("event")
        if event == "deal_closed":
            self._sign(body["dealId"], body.get("deal"))
        elif event == "deal_confirmed" and body.get("dealId") in self.signed:
            self._end(CONFIRMED, deal=self.client.deal(body["dealId"]))
        elif event in _FAILURES and (body.get("requestId") in self.requests or body.get("dealId") in self.signed):
            self._end(NO_DEAL, f"{event.replace('_', ' ')}: {body.get('reason')}")
        else:
            self.on_notification(body)

    def on_message(self, body: Mapping[str, Any]) -> None:
        """A counterpart's message other than an offer on an open negotiation."""

    def on_notification(self, body: Mapping[str, Any]) -> None:
        """A notification other than a deal's or a failure's."""

    # -- negotiating -------------------------------------------------------------------------------------

    def _agreed(self, request_id: str, protocol: str, facts: ListingFacts) -> None:
        """Play the agreed protocol's first move, when it is this agent's."""
        if protocol == SEALED_BID:
            self._bid(request_id, facts)
        elif protocol == NATURAL_LANGUAGE:
            side = self.sides[request_id] = OfferSide(self.client, self.agent, facts, request_id, self.clock)
            if self.role == BUYER:  # the buyer opens, as in the demo
                self._move(side)

    def _bid(self, request_id: str, facts: ListingFacts) -> None:
        action = self.agent.sealed_bid(facts, at=self.clock())
        if action is None:
            self._end(NO_DEAL, "its mandate allows no sealed bid on this listing")
            return
        answer = self.client.sealed_bid(request_id, self.role, action.price)
        if answer.get("dealId"):
            self._sign(answer["dealId"])
        elif answer.get("state") == "failed":
            self._end(NO_DEAL, f"negotiation failed: {answer.get('reason')}")

    def _heard_offer(self, side: OfferSide, body: Mapping[str, Any]) -> None:
        """The counterpart's offer, accept or reject: heard, and answered when it is an offer (an
        accept or a reject ends the negotiation, and the market says how)."""
        decision: Decision | None = read_offer(body, side.facts.currency)
        if decision is None and body.get("offerPriceRead") is not None:  # the market read it from the words
            decision = Terms(positive_cents(body["offerPriceRead"]), side.facts.currency)
        side.hear(decision, body.get("message") if isinstance(body.get("message"), str) else None)
        if decision is not ACCEPT and decision is not REJECT and not side.spent:
            self._move(side)

    def _move(self, side: OfferSide) -> None:
        decision, _, answer = side.move()
        said = f"offers {decision.price_cents} cents" if isinstance(decision, Terms) else \
            "accepts" if decision is ACCEPT else "rejects"
        log.info("%s %s %s on request %s", self.role, self.client.id, said, side.request_id)
        if answer.get("state") == "closed":
            self._sign(answer["dealId"])
        elif answer.get("state") == "failed":
            self._end(NO_DEAL, f"negotiation failed: {answer.get('reason')}")

    # -- deals -------------------------------------------------------------------------------------------

    def _sign(self, deal_id: str, deal: Mapping[str, Any] | None = None) -> None:
        """Sign a deal of one of its negotiations, once, if its agent confirms the terms."""
        if deal_id in self.signed:
            return
        terms = dict(deal) if deal is not None else self.client.deal(deal_id)["deal"]
        facts = self.engaged.get(terms.get("listingId", ""))
        if facts is None or terms.get(self.role, {}).get("agentId") != self.client.id:
            return
        if not would_confirm(self.agent, facts, terms, self.clock()):
            self._end(NO_DEAL, f"its agent would not confirm deal {deal_id}")
            return
        self.signed.add(deal_id)
        log.info("%s %s signs deal %s at %s cents", self.role, self.client.id, deal_id, deal_cents(terms))
        document = self.client.sign_deal(deal_id, self.role)
        status = document.get("status")
        if status == "confirmed":
            self._end(CONFIRMED, deal=document)
        elif status in ("void", "expired", "cancelled"):
            self._end(NO_DEAL, f"deal {deal_id} is {status}")


class LiveSeller(LiveAgent):
    """A seller: lists ``item`` at ``ask_cents`` under its owner's floor ``floor_cents``, answers
    contact requests with its agent's protocol (or leaves them unanswered: the spec has no
    refusal message), bids, haggles and signs. ``seller_agent`` makes its decider from the
    mandate (the built-in one by default, a model-driven one with a model)."""

    role = SELLER

    def __init__(self, client: MarketClient, item: Mapping[str, Any], *, ask_cents: int, floor_cents: int,
                 negotiable: bool = True, currency: str = "EUR", permissions: dict[str, bool] | None = None,
                 seller_agent: Callable[[Mandate], MarketSeller] = MarketSeller, **options: Any) -> None:
        super().__init__(client, **options)
        self.item = dict(item)
        self.ask_cents, self.floor_cents = ask_cents, floor_cents
        self.negotiable, self.currency, self.permissions = negotiable, currency, permissions
        self.seller_agent = seller_agent
        #: Contact requests it declined (no protocol its mandate permits).
        self.declined: list[str] = []

    def start(self) -> Trader:
        client = self.client
        client.register()
        client.file_mandate({"minAcceptablePrice": self.floor_cents}, currency=self.currency,
                            permissions=self.permissions)
        agent = self.seller_agent(parse_mandate(client.mandate))
        listing = client.post_listing(self.item, ask=self.ask_cents, floor=self.floor_cents, currency=self.currency,
                                      negotiable=self.negotiable)
        facts = self.engaged[listing["listingId"]] = ListingFacts.from_listing(listing)
        return Trader(client, agent, listing=listing, facts=facts)

    @property
    def agent(self) -> MarketSeller:
        agent = super().agent
        assert isinstance(agent, MarketSeller)
        return agent

    def on_message(self, body: Mapping[str, Any]) -> None:
        assert self.trader is not None and self.trader.listing is not None and self.trader.facts is not None
        if body.get("type") != "contact_request" or body.get("listingId") != self.trader.listing["listingId"]:
            return
        request_id, facts = body["requestId"], self.trader.facts
        agreed = self.agent.agree_protocol(str(body.get("protocol")), facts)
        if agreed is None:
            self.declined.append(request_id)
            log.info("seller %s declined request %s: no protocol its mandate permits", self.client.id, request_id)
            return
        self.client.agree(request_id, agreed)
        log.info("seller %s agrees %s on request %s", self.client.id, agreed, request_id)
        self.requests.add(request_id)
        self._agreed(request_id, agreed, facts)


class LiveBuyer(LiveAgent):
    """A buyer after ``wants``: posts a wanted ad with the public budget ``budget_cents`` under its
    owner's ``limit_cents`` (``maxSpend``), then takes the cheapest fitting listing it hears of
    (introductions in its inbox, and a search every ``search_every`` seconds), proposes its
    agent's protocol and plays it. With a ``chat`` (on Matrix), a plain-text ``SELLING:`` ad for
    its item the market tells it of is haggled over in words when no listing fits (``shopper``
    decides those turns).
    ``buyer_agent`` makes its decider from the mandate and ``wants``."""

    role = BUYER

    def __init__(self, client: MarketClient, wants: Interest, *, budget_cents: int, limit_cents: int,
                 currency: str = "EUR", permissions: dict[str, bool] | None = None,
                 buyer_agent: Callable[[Mandate, Interest], MarketBuyer] = MarketBuyer,
                 chat: PlainTextChat | None = None, shopper: ShopperFactory = built_in_shopper,
                 search_every: float = SEARCH_SECONDS, **options: Any) -> None:
        super().__init__(client, **options)
        if budget_cents > limit_cents:
            raise ValueError("the wanted ad's budget cannot be above the owner's limit")
        self.wants = wants
        self.budget_cents, self.limit_cents = budget_cents, limit_cents
        self.currency, self.permissions = currency, permissions
        self.buyer_agent = buyer_agent
        self.chat = chat
        self.shopper = shopper
        self.search_every = search_every
        self._next_search = 0.0
        #: Live listings of the item heard of and not yet considered, by id.
        self._heard: dict[str, Mapping[str, Any]] = {}
        #: Listings already considered (contacted or passed on), by id.
        self._considered: set[str] = set()
        self._live: set[str] = set()
        #: The contact request waiting for the seller's agreement: its id, listing and facts.
        self._request: tuple[str, str, ListingFacts] | None = None
        #: The plain-text chat it haggles in, and the haggle.
        self._haggle: tuple[str, PlainTextHaggle] | None = None
        #: Plain-text ads of its item the market told it of, not yet tried.
        self._ads: list[TextAd] = []
        self._heard_in_chat = 0

    def start(self) -> Trader:
        client, wants = self.client, self.wants
        client.register()
        client.file_mandate({"maxSpend": self.limit_cents}, currency=self.currency, permissions=self.permissions)
        agent = self.buyer_agent(parse_mandate(client.mandate), wants)
        client.post_wanted({"category": wants.category, "subcategory": wants.subcategory, "name": wants.name},
                           budget=self.budget_cents, max_spend=self.limit_cents, currency=self.currency)
        return Trader(client, agent)

    @property
    def agent(self) -> MarketBuyer:
        agent = super().agent
        assert isinstance(agent, MarketBuyer)
        return agent

    def on_message(self, body: Mapping[str, Any]) -> None:
        if body.get("type") == "protocol_agreement" and self._request and body.get("requestId") == self._request[0]:
            request_id, listing_id, facts = self._request
            self._request = None
            protocol = str(body.get("agreedProtocol"))
            if protocol == INSTANT_MATCH:
                self._instant(listing_id, facts)
            else:
                self._agreed(request_id, protocol, facts)

    def on_notification(self, body: Mapping[str, Any]) -> None:
        if body.get("event") == "listing_matches_wanted" and isinstance(body.get("listing"), Mapping):
            self._heard[str(body["listingId"])] = body["listing"]
        elif body.get("event") == "text_listing_matches_wanted" and isinstance(body.get("ad"), Mapping):
            self._ads.append(TextAd.from_view(body["ad"]))

    def step(self) -> None:
        if self._haggle is not None:
            self._haggle_on()
        elif not self.engaged:  # one negotiation at a time: engaged, it waits for its inbox
            self._shop()

    # -- structured listings -----------------------------------------------------------------------------

    def _shop(self) -> None:
        wants = self.wants
        if self.monotonic() >= self._next_search:
            self._next_search = self.monotonic() + self.search_every
            found = self.client.listings(category=wants.category, subcategory=wants.subcategory, name=wants.name)
            self._live = {view["listingId"] for view in found}
            self._heard.update({view["listingId"]: view for view in found})
        fresh = [view for listing_id, view in self._heard.items()
                 if listing_id not in self._considered and view.get("status", "live") == "live"]
        self._heard.clear()
        fitting = sorted(((view, facts) for view in fresh if self.agent.fits(facts := ListingFacts.from_listing(view))),
                         key=lambda pair: pair[1].ask_cents)
        if fitting:
            view, facts = fitting[0]
            self._consider(view["listingId"], facts, competing=len(self._live | {view["listingId"]}) - 1)
        elif self.chat is not None and self._ads:
            self._haggle_over(self._ads.pop(0))

    def _consider(self, listing_id: str, facts: ListingFacts, *, competing: int) -> None:
        """Propose its agent's protocol for the listing (or pass on it)."""
        self._considered.add(listing_id)
        protocol = self.agent.choose_protocol(facts, competing_listings=competing)
        log.info("buyer %s: listing %s, protocol %s", self.client.id, listing_id, protocol or "none (pass)")
        if protocol is None:
            return
        self.engaged[listing_id] = facts
        if protocol == INSTANT_MATCH:
            self._instant(listing_id, facts)
        elif protocol == DOUBLE_AUCTION:
            self._order(facts)
        else:
            request_id = self.client.contact(listing_id, protocol)
            self.requests.add(request_id)
            self._request = (request_id, listing_id, facts)

    def _instant(self, listing_id: str, facts: ListingFacts) -> None:
        if self.agent.instant_match(facts, at=self.clock()) is None:
            self._end(NO_DEAL, "its mandate allows no instant match on this listing")
            return
        answer = self.client.instant_match(listing_id, facts.ask_cents)
        self._sign(answer["dealId"])

    def _order(self, facts: ListingFacts) -> None:
        """A bid at its limit in the item's double auction; the clearing (the market's schedule,
        or any agent's request) brings the deal to sign. A book deal names the book, not a
        listing: its terms are checked on the facts of the listing that led it there."""
        action = self.agent.auction_order(facts, at=self.clock())
        if action is None:
            self._end(NO_DEAL, "its mandate allows no order in the item's book")
            return
        self.engaged[f"book:{facts.item_key}"] = facts
        self.client.order(facts.item_key, "buy", action.price, currency=facts.currency)

    # -- plain-text ads ----------------------------------------------------------------------------------

    def _haggle_over(self, ad: TextAd) -> None:
        """A plain-text ad for its item (the market's reading of a ``SELLING:`` line) opens a chat
        with its poster, when it states a price in the mandate's currency (or none)."""
        assert self.chat is not None
        if ad.price_cents is None or ad.name != self.wants.name or ad.currency not in (None, self.currency):
            log.info("buyer %s: passes on %s's ad (no price, another item or currency)", self.client.id, ad.poster)
            return
        haggle = PlainTextHaggle(self.agent, ad, clock=self.clock, shopper=self.shopper)
        room = self.chat.open_chat(ad.poster)
        log.info("buyer %s: haggling in words with %s in %s", self.client.id, ad.poster, room)
        self._haggle = (room, haggle)
        self._heard_in_chat = 0
        self.chat.say(room, haggle.opening())
        self._settle_haggle()

    def _haggle_on(self) -> None:
        assert self.chat is not None and self._haggle is not None
        room, haggle = self._haggle
        lines = self.chat.texts(room, self._heard_in_chat)
        self._heard_in_chat += len(lines)
        for sender, text in lines:
            if sender != haggle.ad.poster:
                continue
            reply = haggle.answer(text)
            if reply is not None:
                self.chat.say(room, reply)
            self._settle_haggle()
            if self.result is not None:
                return

    def _settle_haggle(self) -> None:
        assert self._haggle is not None
        room, haggle = self._haggle
        self.refused = list(haggle.refused)
        if not haggle.done:
            return
        price = haggle.agreed_cents
        if price is not None:
            self._end(AGREED_IN_TEXT, f"agreed in words with {haggle.ad.poster}, unsigned",
                      text_deal=TextDeal(haggle.ad.poster, price, haggle.currency, room))
        elif haggle.refused:
            self._end(NO_DEAL, "its decider wanted to say a price its mandate forbids; it walked away")
        else:
            outcome = haggle.shopper.outcome
            self._end(NO_DEAL, f"plain-text haggle: {outcome.reason if outcome else 'ended'}")
