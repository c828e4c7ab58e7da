"""A seeded market of built-in agents trading over HTTP: ``haggler market demo`` (spec 003).

Sellers list items, buyers post wanted ads, then each buyer picks the cheapest listing that fits
its owner's mandate and proposes a protocol by the spec's "use when" rules
(:meth:`~haggler.agents.market.MarketBuyer.choose_protocol`); the seller agrees or proposes
another (:meth:`~haggler.agents.market.MarketSeller.agree_protocol`). Sealed bids, instant
matches and offers run to a deal or a failure; buyers sent to the double auction bid in their
item's book, unsold sellers ask there, and each book clears once at the end. Every deal is signed
by both agents, each checking it against its own mandate first.

Everything goes through :class:`~haggler.protocols.market.client.MarketClient`: real HTTP, real
signatures, the market's own checks — the demo does nothing an outside agent could not. The
random draws (items, prices, mandates) come from one seeded generator, so a seed replays the same
market; the agents' ids and messages follow from it.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

import httpx

from haggler.agents.decider import ACCEPT, REJECT, DeciderView, Decision
from haggler.agents.llm_market import LLMMarketNegotiator
from haggler.agents.market import (
    DOUBLE_AUCTION,
    INSTANT_MATCH,
    SEALED_BID,
    Interest,
    ListingFacts,
    MarketBuyer,
    MarketNegotiator,
    MarketSeller,
)
from haggler.engine import Terms
from haggler.protocols.market.client import MarketClient, MarketError
from haggler.protocols.market.mandates import CONDITIONS, Mandate, parse_mandate
from haggler.protocols.market.settlement import DEFAULT_OFFER_TURN_CAP

#: The demo's items: taxonomy and a typical price in cents.
ITEMS: tuple[tuple[str, str, str, int], ...] = (
    ("electronics", "gaming_console", "nintendo_switch", 18000),
    ("electronics", "phone", "pixel_8", 42000),
    ("electronics", "headphones", "sony_wh1000xm5", 24000),
    ("books", "fiction", "dune_hardcover", 2500),
)
ACCESSORIES = ("charger", "case", "box", "cable")


@dataclass
class Trader:
    """One demo agent: its HTTP side and its decider (which holds its role and limit)."""

    client: MarketClient
    agent: MarketSeller | MarketBuyer
    #: A seller's listing as the market served it, and its facts (read once).
    listing: dict[str, Any] | None = None
    facts: ListingFacts | None = None
    sold: bool = False
    #: Where the next read of its inbox starts (:meth:`new_messages`).
    inbox_cursor: int = 0

    @property
    def role(self) -> str:
        return self.agent.role

    @property
    def limit_cents(self) -> int:
        return self.agent.limit_cents

    def new_messages(self) -> list[dict[str, Any]]:
        """Its inbox's messages since the last read, every page of them."""
        messages: list[dict[str, Any]] = []
        while True:
            page = self.client.inbox(self.inbox_cursor)
            if not page["messages"]:
                return messages
            messages += page["messages"]
            self.inbox_cursor = page["cursor"]


@dataclass
class DealRow:
    deal_id: str
    item: str
    protocol: str
    price_cents: int
    buyer: str
    seller: str
    buyer_surplus: int
    seller_surplus: int
    status: str


@dataclass
class DemoResult:
    deals: list[DealRow] = field(default_factory=list)
    #: The protocol each buyer proposed (or "pass").
    proposed: Counter[str] = field(default_factory=Counter)
    failures: Counter[str] = field(default_factory=Counter)
    buyers: int = 0
    sellers: int = 0
    #: Each deal's document as GET /market/deals/{dealId} serves it to its parties, by deal id: only
    #: the parties may fetch it, so the demo, which holds their tokens, keeps it for offline checks.
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def protocol_mix(self) -> Counter[str]:
        return Counter(deal.protocol for deal in self.deals)

    def to_json(self) -> dict[str, Any]:
        return {"sellers": self.sellers, "buyers": self.buyers, "proposed": dict(self.proposed),
                "failures": dict(self.failures), "protocolMix": dict(self.protocol_mix),
                "deals": [deal.__dict__ for deal in self.deals],
                "surplus": {"buyers": sum(d.buyer_surplus for d in self.deals),
                            "sellers": sum(d.seller_surplus for d in self.deals)}}


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _said(negotiator: MarketNegotiator) -> str | None:
    """What a negotiator says with its decision: a model's message; the built-in one says nothing."""
    return negotiator.message if isinstance(negotiator, LLMMarketNegotiator) else None


def deal_cents(deal: dict[str, Any]) -> int:
    """A deal's unit price (``finalPrice``, in major units on the wire) in cents."""
    return round(deal["finalPrice"] * 100)


def would_confirm(agent: MarketSeller | MarketBuyer, facts: ListingFacts, deal: dict[str, Any], at: datetime) -> bool:
    """Whether ``agent`` may sign ``deal`` (the terms the market wrote) on ``facts``: its own check
    against its mandate and limit, made before its signature is sent, never after."""
    return agent.confirm(facts, deal_cents(deal), deal["protocol"], at=at) is not None


class OfferSide:
    """One party's side of a natural-language negotiation (spec 003, Protocol 1, structured offers):
    its negotiator, the offers each side has made, and the count of messages on the request.

    The demo runs one per party in a single loop; a live agent (:mod:`haggler.agents.market_live`)
    runs its own and moves when the counterpart's offer reaches its inbox. Both build the
    negotiator's view the same way here, so a live negotiation is played as the demo plays it."""

    def __init__(self, client: MarketClient, agent: MarketSeller | MarketBuyer, facts: ListingFacts,
                 request_id: str, clock: Callable[[], datetime]) -> None:
        self.client = client
        self.agent = agent
        self.facts = facts
        self.request_id = request_id
        self.negotiator = agent.negotiator(facts, clock=clock)
        self.mine: list[Terms] = []
        self.theirs: list[Terms] = []
        #: Messages on the request so far, both parties': a round is one of each.
        self.turn = 0

    @property
    def party(self) -> str:
        return self.agent.role

    @property
    def spent(self) -> bool:
        """Whether the market's turn cap is reached: the message that reached it ends the
        negotiation, and the market's failure notice follows it."""
        return self.turn >= DEFAULT_OFFER_TURN_CAP

    def move(self) -> tuple[Decision, str | None, dict[str, Any]]:
        """Decide this party's next message and send it: the decision, the words sent with it (a
        model's), and the market's answer."""
        facts, party = self.facts, self.party
        view = DeciderView(party, self.agent.limit_cents, facts.ask_cents, self.turn // 2, DEFAULT_OFFER_TURN_CAP // 2,
                           tuple(self.mine), tuple(self.theirs), currency=facts.currency)
        decision = self.negotiator.decide(view)
        said = _said(self.negotiator)
        if decision is ACCEPT:
            answer = self.client.offer(self.request_id, party, action="accept", message=said)
        elif decision is REJECT:
            answer = self.client.offer(self.request_id, party, action="reject", message=said)
        else:
            assert isinstance(decision, Terms)
            self.mine.append(decision)
            answer = self.client.offer(self.request_id, party, price=decision.price_cents, message=said)
        self.turn += 1
        return decision, said, answer

    def hear(self, decision: Decision | None, said: str | None) -> None:
        """The counterpart's message, as the market delivered it: the terms it offered (what an
        ACCEPT of this side agrees to) and its words, which only a model's negotiator reads (as
        untrusted data)."""
        if isinstance(decision, Terms):
            self.theirs.append(decision)
        if said and isinstance(self.negotiator, LLMMarketNegotiator):
            self.negotiator.hear(said)
        self.turn += 1


class MarketDemo:
    """The seeded market: build it with the traders' draws, then :meth:`run` it. ``seller_agent``
    and ``buyer_agent`` make each trader's agent from its mandate (and a buyer's interest): the
    built-in ones by default, model-driven ones (:mod:`haggler.agents.llm_market`) with a model."""

    def __init__(self, http: httpx.Client | None, *, sellers: int, buyers: int, seed: int,
                 clock: Callable[[], datetime] = _now,
                 seller_agent: Callable[[Mandate], MarketSeller] = MarketSeller,
                 buyer_agent: Callable[[Mandate, Interest], MarketBuyer] = MarketBuyer,
                 client: Callable[[str], MarketClient] | None = None) -> None:
        """``client(agent_id)`` makes each trader's market client: over ``http`` by default, or
        any other door's (``haggler.matrix.local_market.MatrixMarket.client``: the same demo over
        Matrix)."""
        if sellers < 1 or buyers < 1:
            raise ValueError("a market needs at least one seller and one buyer")
        if client is None and http is None:
            raise ValueError("the demo needs an HTTP client or a client factory")
        self.new_client = client or (lambda agent_id: MarketClient(http, agent_id, clock=clock))  # type: ignore[arg-type]
        self.rng = random.Random(seed)
        self.clock = clock
        self.seller_agent = seller_agent
        self.buyer_agent = buyer_agent
        self.tag = f"s{seed}"
        self.result = DemoResult(buyers=buyers, sellers=sellers)
        self.sellers = [self._seller(n) for n in range(sellers)]
        self.buyers = [self._buyer(n) for n in range(buyers)]
        self.book_orders: dict[str, list[Trader]] = {}

    # -- the draws --------------------------------------------------------------------------------------

    def _client(self, name: str) -> MarketClient:
        client = self.new_client(f"{name}_{self.tag}_{self.rng.randrange(16**6):06x}")
        client.register()
        return client

    def _seller(self, n: int) -> Trader:
        category, subcategory, name, typical = self.rng.choice(ITEMS)
        ask = round(typical * self.rng.uniform(0.9, 1.25))
        floor = round(ask * self.rng.uniform(0.7, 0.92))
        client = self._client(f"seller{n}")
        client.file_mandate({"minAcceptablePrice": floor}, permissions=self._permissions())
        mandate = parse_mandate(client.mandate)
        trader = Trader(client, self.seller_agent(mandate))
        item = {"category": category, "subcategory": subcategory, "name": name,
                "condition": self.rng.choice(CONDITIONS[:4]),
                "accessories": sorted(self.rng.sample(ACCESSORIES, self.rng.randrange(len(ACCESSORIES) + 1)))}
        trader.listing = client.post_listing(item, ask=ask, floor=floor, negotiable=self.rng.random() > 0.1)
        trader.facts = ListingFacts.from_listing(trader.listing)
        return trader

    def _buyer(self, n: int) -> Trader:
        category, subcategory, name, typical = self.rng.choice(ITEMS)
        valuation = round(typical * self.rng.uniform(0.85, 1.3))
        constraints: dict[str, Any] = {"maxSpend": valuation}
        if self.rng.random() < 0.3:
            constraints["requiredCondition"] = "good"
        client = self._client(f"buyer{n}")
        client.file_mandate(constraints, permissions=self._permissions())
        mandate = parse_mandate(client.mandate)
        interest = {"category": category, "subcategory": subcategory, "name": name}
        client.post_wanted({**interest, **({"minCondition": "good"} if "requiredCondition" in constraints else {})},
                           budget=valuation, max_spend=valuation)
        return Trader(client, self.buyer_agent(mandate, Interest(**interest)))

    def _permissions(self) -> dict[str, bool]:
        """Most owners allow everything; some withhold one protocol."""
        withheld = self.rng.choice((None, None, None, "canNegotiate", "canUseSealedBid", "canAcceptInstantMatch"))
        return {"canNegotiate": True, "canUseSealedBid": True, "canAcceptInstantMatch": True,
                **({withheld: False} if withheld else {})}

    # -- the run ----------------------------------------------------------------------------------------

    def run(self) -> DemoResult:
        for buyer in self.buyers:
            self._shop(buyer)
        self._auctions()
        return self.result

    def _seller_of(self, listing_id: str) -> Trader:
        return next(s for s in self.sellers if s.listing and s.listing["listingId"] == listing_id)

    def _shop(self, buyer: Trader) -> None:
        assert isinstance(buyer.agent, MarketBuyer)
        wants = buyer.agent.wants
        live = buyer.client.listings(category=wants.category, subcategory=wants.subcategory, name=wants.name)
        fitting = [(listing, ListingFacts.from_listing(listing)) for listing in live]
        fitting = [(listing, facts) for listing, facts in fitting if buyer.agent.fits(facts)]
        if not fitting:
            self.result.proposed["pass"] += 1
            return
        listing, facts = fitting[0]  # the cheapest (the market lists by ask)
        protocol = buyer.agent.choose_protocol(facts, competing_listings=len(live) - 1)
        self.result.proposed[protocol or "pass"] += 1
        if protocol is None:
            return
        if protocol == DOUBLE_AUCTION:
            self.book_orders.setdefault(facts.item_key, []).append(buyer)
            return
        seller = self._seller_of(listing["listingId"])
        assert isinstance(seller.agent, MarketSeller)
        try:
            if protocol == INSTANT_MATCH:
                self._instant(buyer, seller, facts)
                return
            request_id = buyer.client.contact(listing["listingId"], protocol)
            agreed = seller.agent.agree_protocol(protocol, facts)
            if agreed is None:
                self.result.failures["declined"] += 1
                return
            seller.client.agree(request_id, agreed)
            if agreed == INSTANT_MATCH:
                self._instant(buyer, seller, facts)
            elif agreed == SEALED_BID:
                self._sealed(buyer, seller, facts, request_id)
            else:
                self._offers(buyer, seller, facts, request_id)
        except MarketError as exc:
            self.result.failures[f"refused {exc.status}"] += 1

    def _instant(self, buyer: Trader, seller: Trader, facts: ListingFacts) -> None:
        if buyer.agent.instant_match(facts, at=self.clock()) is None:  # type: ignore[union-attr]
            self.result.failures["instant match not allowed"] += 1
            return
        done = buyer.client.instant_match(seller.listing["listingId"], facts.ask_cents)  # type: ignore[index]
        self._sign(done["dealId"], buyer, seller, facts)

    def _sealed(self, buyer: Trader, seller: Trader, facts: ListingFacts, request_id: str) -> None:
        bids = [(trader, trader.agent.sealed_bid(facts, at=self.clock())) for trader in (buyer, seller)]
        if any(action is None for _, action in bids):
            self.result.failures["no sealed bid allowed"] += 1
            return
        answer: dict[str, Any] = {}
        for trader, action in bids:
            answer = trader.client.sealed_bid(request_id, trader.role, action.price)  # type: ignore[union-attr]
        if answer.get("dealId"):
            self._sign(answer["dealId"], buyer, seller, facts)
        else:
            self.result.failures["sealed bids did not overlap"] += 1

    def _offers(self, buyer: Trader, seller: Trader, facts: ListingFacts, request_id: str) -> None:
        mover, listener = (OfferSide(t.client, t.agent, facts, request_id, self.clock) for t in (buyer, seller))
        while True:
            decision, said, answer = mover.move()
            listener.hear(decision, said)  # what the market delivered to the counterparty's inbox
            if answer["state"] == "closed":
                self._sign(answer["dealId"], buyer, seller, facts)
                return
            if answer["state"] == "failed":
                self.result.failures[f"offers {answer['reason']}"] += 1
                return
            mover, listener = listener, mover

    def _auctions(self) -> None:
        """Each book gets its buyers' bids and its unsold sellers' asks, clears once, and every
        party signs the deals its inbox announces (the clearing itself names no parties)."""
        for item, bidders in self.book_orders.items():
            sellers = [s for s in self.sellers if s.facts and s.facts.item_key == item and not s.sold]
            if not sellers:
                continue
            reference = min((s.facts for s in sellers if s.facts), key=lambda facts: facts.ask_cents)
            placed = []
            for trader in [*bidders, *sellers]:
                facts = trader.facts or reference
                action = trader.agent.auction_order(facts, at=self.clock())
                if action is None:
                    continue
                try:
                    trader.client.order(item, "buy" if trader.role == "buyer" else "sell", action.price)
                except MarketError as exc:
                    self.result.failures[f"order refused {exc.status}"] += 1
                    continue
                placed.append(trader)
            if not placed:
                continue
            placed[0].client.clear(item)
            by_id = {t.client.id: t for t in placed}
            for trader in placed:
                for message in trader.new_messages():
                    body = message["body"]
                    if body.get("event") == "deal_closed" and body["protocol"] == DOUBLE_AUCTION \
                            and body["deal"][trader.role]["agentId"] == trader.client.id:
                        document = trader.client.sign_deal(body["dealId"], trader.role)
                        if trader.role == "seller":  # both have signed by now (buyers come first)
                            deal = document["deal"]
                            self._record(document, by_id[deal["buyer"]["agentId"]], trader)

    # -- signing ----------------------------------------------------------------------------------------

    def _sign(self, deal_id: str, buyer: Trader, seller: Trader, facts: ListingFacts) -> None:
        deal = buyer.client.deal(deal_id)["deal"]
        if not all(would_confirm(trader.agent, facts, deal, self.clock()) for trader in (buyer, seller)):
            self.result.failures["a party would not confirm"] += 1
            return
        for trader in (buyer, seller):
            document = trader.client.sign_deal(deal_id, trader.role)
        seller.sold = True
        self._record(document, buyer, seller)

    def _record(self, document: dict[str, Any], buyer: Trader, seller: Trader) -> None:
        deal = document["deal"]
        price = deal_cents(deal)
        item = seller.listing["item"]["name"] if seller.listing else deal["listingId"]
        self.result.documents[document["dealId"]] = document
        self.result.deals.append(DealRow(
            deal_id=document["dealId"], item=item, protocol=deal["protocol"], price_cents=price,
            buyer=buyer.client.id, seller=seller.client.id, buyer_surplus=buyer.limit_cents - price,
            seller_surplus=price - seller.limit_cents, status=document["status"]))
