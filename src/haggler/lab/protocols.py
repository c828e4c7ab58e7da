"""The lab's five negotiation protocols, each turning a :class:`Scenario` into a
:class:`~haggler.lab.metrics.NegotiationRecord` (spec 003, "Negotiation Protocols"; Phase 6).

The structured protocols are played by the market's built-in agents
(:class:`~haggler.agents.market.MarketSeller`, :class:`~haggler.agents.market.MarketBuyer`) with
owner mandates made from the scenario (the seller's ``minAcceptablePrice`` is its reservation, the
buyer's ``maxSpend`` its), and settled by the market's own rules
(:mod:`haggler.protocols.market.settlement`, :mod:`haggler.protocols.market.auction`): the lab
runs no second copy of them. Every run starts from the seller's listing message, which the buyer
reads with :meth:`~haggler.agents.market.ListingFacts.from_listing`; every deal is confirmed by
both agents (each checks it against its mandate).

* :func:`alternating` — structured offers (Protocol 1 without prose, spec 003 message 7) on the
  market's engine rules (``settlement.offer_rules``), by default the store's merchant strategy
  against the default shopper strategy behind the agents' negotiators; each turn crosses as a JSON
  offer message and is read back with :func:`~haggler.agents.market.read_offer`.
* :func:`free_text` — the store's real merchant agent (the negotiate.v1 :class:`ChatService` on
  its own SQLite database) and the real shopper agent talking in free text, in process and
  without HTTP. The shopper reads only the merchant's text; the terms recorded are the deal the
  store actually stored.
* :func:`sealed_bid` — both agents bid their true limits; ``settlement.sealed_bid_price`` closes
  at the midpoint when they overlap (Protocol 2): two JSON messages.
* :func:`instant_match` — the buyer agent accepts the ask when its mandate and limit allow;
  ``settlement.instant_match_price`` gives the deal price (Protocol 3): one JSON message.
* :func:`double_auction` — a call auction (Protocol 4, ``auction.clear``) over a book of
  :data:`BOOK_SIZE` scenarios' sellers and buyers of one item; see its docstring for how a
  scenario's record is read off the book.

Messages and words count what crosses the wire in the negotiation itself: for the structured
protocols the JSON messages (built with :func:`json.dumps`), for free text every line of the chat
including the merchant's greeting. The listing every protocol starts from is not counted. Words
are :func:`~haggler.lab.metrics.word_count` tokens.

Security (spec 003, Security Model; Phase 6 "security"): given an :class:`Attack`, the seller puts
its text in every free-text field the protocol carries (:data:`CHANNELS`), the receiving side sets
each such field aside for the audit log (``suspicious_markers``) and decides on the structured
fields alone; :mod:`haggler.lab.security` measures what the attack changed.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING, Any, Iterable

from haggler.agents.decider import ACCEPT, REJECT, Decider, DeciderView, Decision
from haggler.agents.market import (
    DOUBLE_AUCTION as MARKET_DOUBLE_AUCTION, INSTANT_MATCH as MARKET_INSTANT_MATCH, NATURAL_LANGUAGE,
    SEALED_BID as MARKET_SEALED_BID, Interest, ListingFacts, MarketBuyer, MarketSeller, read_offer,
)
from haggler.engine import Terms
from haggler.lab.alternating import run_alternating
from haggler.lab.metrics import NegotiationRecord, word_count
from haggler.lab.scenario import BUYER, SELLER, Scenario
from haggler.language.screening import suspicious_markers
from haggler.money import amount_cents, format_money, to_decimal_number
from haggler.protocols.market.auction import OrderBook, clear
from haggler.protocols.market.mandates import Mandate, parse_mandate
from haggler.protocols.market.settlement import instant_match_price, sealed_bid_price

if TYPE_CHECKING:  # the annotation only: FreeTextStore.play imports the shopper when a chat runs
    from haggler.agents.shopper import ShopperAgent

__all__ = [
    "ALTERNATING", "BOOK_SIZE", "CHANNELS", "DOUBLE_AUCTION", "FREE_TEXT", "INSTANT_MATCH", "LAB_AT", "LAB_CONDITION",
    "LAB_ITEM", "MARKET_PROTOCOL", "PROTOCOLS", "SEALED_BID", "Attack", "FreeTextPlay", "FreeTextStore", "Parties",
    "alternating", "double_auction", "free_text", "instant_match", "lab_mandates", "market_parties", "sealed_bid",
]

ALTERNATING = "alternating"
FREE_TEXT = "free-text"
SEALED_BID = "sealed-bid"
INSTANT_MATCH = "instant-match"
DOUBLE_AUCTION = "double-auction"
#: The protocols, in the order the comparison reports them.
PROTOCOLS = (ALTERNATING, FREE_TEXT, SEALED_BID, INSTANT_MATCH, DOUBLE_AUCTION)
#: Each lab protocol as the market names it (free text is the spec's natural language, spoken).
MARKET_PROTOCOL = {ALTERNATING: NATURAL_LANGUAGE, FREE_TEXT: NATURAL_LANGUAGE, SEALED_BID: MARKET_SEALED_BID,
                   INSTANT_MATCH: MARKET_INSTANT_MATCH, DOUBLE_AUCTION: MARKET_DOUBLE_AUCTION}
#: Where each protocol carries the seller's free text, so where an :class:`Attack` goes.
CHANNELS = {
    ALTERNATING: "the listing's description and every seller offer's `message`",
    FREE_TEXT: "every message of the seller (the store's merchant), greeting included",
    SEALED_BID: "the listing's description and the seller's sealed-bid `commitment`",
    INSTANT_MATCH: "the listing's description",
    DOUBLE_AUCTION: "the listing's description (orders carry no text)",
}
#: Sellers and buyers in one double-auction book: "many listings for same item" (spec 003,
#: Protocol 4: Use when), as many as the buyer agent needs to choose the auction itself
#: (``agents.market.MANY_LISTINGS`` competing listings) and then some.
BOOK_SIZE = 8
#: Every lab listing is of this one item, so that any of them can share a book.
LAB_ITEM = Interest("lab", "generated", "item")

#: The lab's clock: every action is taken then (inside every lab mandate), and every message is
#: dated then, so that the messages (and so their word counts) are deterministic.
LAB_AT = datetime(2026, 1, 1, tzinfo=timezone.utc)
#: The condition of every lab listing, and the one every lab buyer requires.
LAB_CONDITION = "good"

_VERSION = "0.1.0"
_TIMESTAMP = "2026-01-01T00:00:00Z"
_ISSUED = "2025-12-31T00:00:00Z"
_DESCRIPTION = "A generated item for protocol comparisons."
_STORE_MERCHANT = "store-merchant"
_DEFAULT_SHOPPER = "default-shopper"


def _json_words(message: dict[str, Any]) -> int:
    return word_count(json.dumps(message))


def _lab_clock() -> datetime:
    return LAB_AT


# -- attacks --------------------------------------------------------------------------------------


@dataclass
class Attack:
    """A red-team text the seller slips into every free-text field it sends in one run (spec 003,
    Security Model), and the markers the audit log found in the fields that carried it."""

    text: str
    markers: set[str] = field(default_factory=set)

    def audit(self, text: object) -> None:
        """The receiving side sets a free-text field aside: its suspicious markers are logged."""
        if isinstance(text, str):
            self.markers.update(suspicious_markers(text))


def _say(benign: str, attack: Attack | None) -> str:
    """A free-text field the seller sends: the benign text, and the attack alongside it."""
    return benign if attack is None else f"{benign} {attack.text}"


# -- the market's parties for a scenario ----------------------------------------------------------


def _mandate(role: str, agent_id: str, limit_cents: int, currency: str) -> Mandate:
    """An owner mandate in spec 003's format, read by the market's parser: every permission, no
    owner approval, the reservation as the limit. The buyer requires no condition: its owner
    would then keep it out of the double auction, whose book trades the item, not a listing."""
    constraints: dict[str, Any] = {"currency": currency}
    if role == SELLER:
        constraints["minAcceptablePrice"] = to_decimal_number(limit_cents)
    else:
        constraints["maxSpend"] = to_decimal_number(limit_cents)
    return parse_mandate({
        "mandateVersion": _VERSION, "issuedAt": _ISSUED, "agentId": agent_id, "constraints": constraints,
        "permissions": {"canNegotiate": True, "canAcceptInstantMatch": True, "canUseSealedBid": True,
                        "requiresOwnerApproval": False},
    })


def lab_mandates(scenario: Scenario) -> tuple[Mandate, Mandate]:
    """The seller's and the buyer's owner mandates for ``scenario``: their reservations as the
    owners' ``minAcceptablePrice`` and ``maxSpend``."""
    return (_mandate(SELLER, f"seller_{scenario.id}", scenario.seller_reservation_cents, scenario.currency),
            _mandate(BUYER, f"buyer_{scenario.id}", scenario.buyer_reservation_cents, scenario.currency))


def listing_message(scenario: Scenario, attack: Attack | None = None) -> dict[str, Any]:
    """The seller's listing (spec 003, message 1) at the list price; unsigned, as every lab
    message (the lab has no keys)."""
    return {
        "type": "listing", "version": _VERSION, "listingId": f"lst_{scenario.id}", "timestamp": _TIMESTAMP,
        "seller": {"agentId": f"seller_{scenario.id}"},
        "item": {"category": LAB_ITEM.category, "subcategory": LAB_ITEM.subcategory, "name": LAB_ITEM.name,
                 "condition": LAB_CONDITION, "description": _say(_DESCRIPTION, attack), "accessories": []},
        "pricing": {"askPrice": to_decimal_number(scenario.list_price_cents), "currency": scenario.currency,
                    "negotiable": True},
    }


@dataclass(frozen=True)
class Parties:
    """A scenario's two market agents and the listing that brings them together; ``facts`` is the
    listing as the buyer read it (its description set aside for the audit log)."""

    seller: MarketSeller
    buyer: MarketBuyer
    listing: dict[str, Any]
    facts: ListingFacts

    def deal(self, price: int | None, protocol: str, currency: str) -> Terms | None:
        """The terms of a deal the framework settled at ``price``, once both agents confirm it
        (each against its own mandate); None without a price or a confirmation."""
        if price is None:
            return None
        confirmed = (self.seller.confirm(self.facts, price, protocol, at=LAB_AT) is not None
                     and self.buyer.confirm(self.facts, price, protocol, at=LAB_AT) is not None)
        return Terms(price, currency) if confirmed else None


def _strategy(spec: str | Decider) -> str | Callable[[], Decider]:
    """A strategy name, or a decider to play every negotiation it is given to."""
    return spec if isinstance(spec, str) else (lambda: spec)


def market_parties(scenario: Scenario, attack: Attack | None = None, *, seller: str | Decider = _STORE_MERCHANT,
                   buyer: str | Decider = _DEFAULT_SHOPPER) -> Parties:
    """The market's agents for ``scenario`` (strategies for their offers by name, or deciders),
    the seller's listing (carrying ``attack``) and the buyer's reading of it."""
    seller_mandate, buyer_mandate = lab_mandates(scenario)
    listing = listing_message(scenario, attack)
    if attack is not None:
        attack.audit(listing["item"]["description"])
    return Parties(MarketSeller(seller_mandate, strategy=_strategy(seller)),
                   MarketBuyer(buyer_mandate, LAB_ITEM, strategy=_strategy(buyer)),
                   listing, ListingFacts.from_listing(listing))


# -- sealed bid -----------------------------------------------------------------------------------


def sealed_bid_messages(scenario: Scenario, buyer_max: int, seller_min: int,
                        attack: Attack | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """The buyer's and the seller's sealed bids in spec 003's format (unsigned: the lab has no
    keys, so there is no ``signature`` field); the seller's commitment carries ``attack``."""
    header = {"type": "sealed_bid", "version": _VERSION, "timestamp": _TIMESTAMP, "requestId": f"req_{scenario.id}"}
    high, low = to_decimal_number(buyer_max), to_decimal_number(seller_min)
    return ({**header, "party": BUYER, "maxPrice": high,
             "commitment": f"If seller's minPrice <= {high}, I will pay midpoint price."},
            {**header, "party": SELLER, "minPrice": low,
             "commitment": _say(f"If buyer's maxPrice >= {low}, I will accept midpoint price.", attack)})


def sealed_bid(scenario: Scenario, *, attack: Attack | None = None) -> NegotiationRecord:
    """Both agents bid their true limits; ``settlement.sealed_bid_price`` closes at the midpoint
    when the buyer's reaches the seller's and fails at once otherwise. No extras are traded."""
    started = perf_counter()
    parties = market_parties(scenario, attack)
    bids = parties.buyer.sealed_bid(parties.facts, at=LAB_AT), parties.seller.sealed_bid(parties.facts, at=LAB_AT)
    price = None
    messages: tuple[dict[str, Any], ...] = ()
    if bids[0] is not None and bids[1] is not None:
        messages = sealed_bid_messages(scenario, bids[0].price, bids[1].price, attack)
        if attack is not None:
            for message in messages:
                attack.audit(message["commitment"])
        price = sealed_bid_price(amount_cents(messages[0]["maxPrice"]), amount_cents(messages[1]["minPrice"]))
    return NegotiationRecord(scenario=scenario, terms=parties.deal(price, MARKET_SEALED_BID, scenario.currency),
                             rounds=1, messages=len(messages), words=sum(_json_words(m) for m in messages),
                             wall_seconds=perf_counter() - started, protocol=SEALED_BID,
                             seller_name="sealed-bid", buyer_name="sealed-bid")


# -- instant match --------------------------------------------------------------------------------


def instant_match_message(scenario: Scenario, accepted: int | None) -> dict[str, Any]:
    """The buyer's one message: an ``instant_match`` acceptance of the ask (``accepted``), or a
    pass (the same shape, no accepted price)."""
    ask = to_decimal_number(scenario.list_price_cents)
    return {
        "type": "instant_match", "version": _VERSION, "timestamp": _TIMESTAMP, "requestId": f"req_{scenario.id}",
        "listingId": f"lst_{scenario.id}", "acceptedPrice": None if accepted is None else to_decimal_number(accepted),
        "message": (f"Your price of {ask} is within my budget. I accept immediately." if accepted is not None
                    else f"Your price of {ask} is above my budget. I pass."),
    }


def instant_match(scenario: Scenario, *, attack: Attack | None = None) -> NegotiationRecord:
    """The buyer agent takes the ask when its mandate and limit allow; the seller agent confirms a
    live ask; ``settlement.instant_match_price`` gives the deal price. Otherwise no deal."""
    started = perf_counter()
    parties = market_parties(scenario, attack)
    match = parties.buyer.instant_match(parties.facts, at=LAB_AT)
    message = instant_match_message(scenario, None if match is None else match.price)
    price = None
    if message["acceptedPrice"] is not None:
        accepted = amount_cents(message["acceptedPrice"])
        if parties.seller.accept_instant_match(parties.facts, accepted, at=LAB_AT) is not None:
            price = instant_match_price(parties.facts.ask_cents, accepted)
    return NegotiationRecord(scenario=scenario, terms=parties.deal(price, MARKET_INSTANT_MATCH, scenario.currency),
                             rounds=1, messages=1, words=_json_words(message), wall_seconds=perf_counter() - started,
                             protocol=INSTANT_MATCH, seller_name="instant-match", buyer_name="instant-match")


# -- alternating offers ---------------------------------------------------------------------------


def offer_message(party: str, decision: Decision, *, request_id: str, text: str | None = None) -> dict[str, Any]:
    """One alternating-offers turn as a JSON offer message (spec 003, message 7): an offer with its
    ``offerPrice``, or ``action`` accept / reject; ``text`` is its free-text ``message``."""
    message: dict[str, Any] = {"type": "offer", "version": _VERSION, "timestamp": _TIMESTAMP,
                               "requestId": request_id, "party": party}
    if isinstance(decision, Terms):
        message["offerPrice"] = to_decimal_number(decision.price_cents)
    else:
        message["action"] = "accept" if decision is ACCEPT else "reject"
    if text is not None:
        message["message"] = text
    return message


class _Wire:
    """One side's negotiator behind the wire: each decision crosses as an offer message (counted);
    the other side gets what :func:`~haggler.agents.market.read_offer` reads from its structured
    fields, and its free text only reaches the audit log."""

    def __init__(self, inner: Decider, request_id: str, currency: str, attack: Attack | None = None) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.request_id = request_id
        self.currency = currency
        self.attack = attack
        self.words = 0

    def decide(self, view: DeciderView) -> Decision:
        attack = self.attack
        message = offer_message(view.role, self.inner.decide(view), request_id=self.request_id,
                                text=None if attack is None else _say("Here is my offer.", attack))
        self.words += _json_words(message)
        if attack is not None:
            attack.audit(message["message"])
        received = read_offer(message, self.currency)
        return REJECT if received is None else received


def alternating(scenario: Scenario, seller: str | Decider = _STORE_MERCHANT, buyer: str | Decider = _DEFAULT_SHOPPER,
                *, attack: Attack | None = None) -> NegotiationRecord:
    """Structured alternating offers (seller first) between the market's agents, whose offers come
    from the strategies ``seller`` and ``buyer`` (names get a fresh decider per negotiation);
    messages are turns, words those of the turns as JSON offer messages. ``attack`` rides in the
    listing and in every seller offer."""
    parties = market_parties(scenario, attack, seller=seller, buyer=buyer)
    request_id = f"req_{scenario.id}"
    ws = _Wire(parties.seller.negotiator(parties.facts, clock=_lab_clock), request_id, scenario.currency, attack)
    wb = _Wire(parties.buyer.negotiator(parties.facts, clock=_lab_clock), request_id, scenario.currency)
    result = run_alternating(scenario, ws, wb)
    price = result.terms.price_cents if result.agreed and result.terms is not None else None
    return NegotiationRecord(scenario=scenario, terms=parties.deal(price, NATURAL_LANGUAGE, scenario.currency),
                             rounds=result.rounds, messages=result.turns, words=ws.words + wb.words,
                             wall_seconds=result.wall_seconds, protocol=ALTERNATING,
                             seller_name=ws.name, buyer_name=wb.name)


# -- double auction -------------------------------------------------------------------------------


def _rescaled(other: Scenario, to: Scenario) -> Scenario:
    """``other``'s seller and buyer as traders of ``to``'s item: their reservations keep their
    ratio to list price, scaled to ``to``'s list price."""
    scale = to.list_price_cents / other.list_price_cents

    def cents(amount: int) -> int:
        return max(1, round(amount * scale))

    return Scenario(id=f"{to.id}~{other.id}", list_price_cents=to.list_price_cents,
                    seller_reservation_cents=min(cents(other.seller_reservation_cents), to.list_price_cents),
                    buyer_reservation_cents=cents(other.buyer_reservation_cents), currency=to.currency,
                    max_rounds=to.max_rounds)


def order_message(order_id: str, agent_id: str, item: str, side: str, price: int) -> dict[str, Any]:
    """A double-auction order (spec 003, Protocol 4; haggler's ``order`` schema), one unit, unsigned."""
    return {"type": "order", "version": _VERSION, "timestamp": _TIMESTAMP, "orderId": order_id,
            "agentId": agent_id, "item": item, "side": side, "price": to_decimal_number(price), "quantity": 1}


def _place(book: OrderBook, member_id: str, parties: Parties) -> list[dict[str, Any]]:
    """A pair's orders — the seller agent's ask, the buyer agent's bid — placed in ``book`` as the
    market reads them off their messages."""
    messages = []
    for role, side, agent in ((SELLER, "sell", parties.seller), (BUYER, "buy", parties.buyer)):
        action = agent.auction_order(parties.facts, at=LAB_AT)
        if action is not None:
            message = order_message(f"{role}_{member_id}", action.agent_id, parties.facts.item_key, side,
                                    action.price)
            book.add(message["orderId"], message["side"], amount_cents(message["price"]), message["quantity"])
            messages.append(message)
    return messages


def double_auction(scenarios: Sequence[Scenario], index: int, *, book_size: int = BOOK_SIZE,
                   attack: Attack | None = None) -> NegotiationRecord:
    """Scenario ``index``'s run of the double auction (``auction.clear``, a call auction).

    Its book holds the seller and buyer of the scenario and those of the next ``book_size - 1``
    scenarios (cyclically), rescaled to its item (:func:`_rescaled`: each reservation keeps its
    ratio to list price) — one item, many listings. Every seller agent asks and every buyer agent
    bids one unit at its limit; the book clears at one price.

    The scenario's record: a deal when both its seller and its buyer trade at the clearing price
    (each within its reservation, so the pair's terms are that price, whoever each traded with);
    no deal when either does not. Messages and words are its two orders; the wall time is the
    whole book's (building it and clearing it). ``attack`` rides in the scenario's own listing."""
    if not 0 <= index < len(scenarios):
        raise ValueError(f"no scenario {index} among {len(scenarios)}")
    if book_size < 1:
        raise ValueError("a book needs at least one seller and one buyer")
    started = perf_counter()
    scenario = scenarios[index]
    parties = market_parties(scenario, attack)
    book = OrderBook()
    own = _place(book, scenario.id, parties)
    for k in range(1, min(book_size, len(scenarios))):
        member = _rescaled(scenarios[(index + k) % len(scenarios)], scenario)
        _place(book, member.id, market_parties(member))
    clearing = clear(book)
    filled = {order_id for trade in clearing.trades for order_id in trade[:2]}
    both = len(own) == 2 and all(message["orderId"] in filled for message in own)
    terms = parties.deal(clearing.price if both else None, MARKET_DOUBLE_AUCTION, scenario.currency)
    return NegotiationRecord(scenario=scenario, terms=terms, rounds=1, messages=len(own),
                             words=sum(_json_words(m) for m in own), wall_seconds=perf_counter() - started,
                             protocol=DOUBLE_AUCTION, seller_name="double-auction", buyer_name="double-auction")


# -- free text ------------------------------------------------------------------------------------

_LAB_STORE = {
    "name": "Haggler Lab Store",
    "rep_name": "Sam",
    "tagline": "Everything is negotiable.",
    "policy_default": "30-day returns on unused items.",
}


def _lever_text(name: str, cost_cents: int) -> str:
    return f"{name.replace('_', ' ')} (~{format_money(cost_cents)} retail value)"


def scenario_product(scenario: Scenario) -> dict[str, Any]:
    """A catalog product for ``scenario``: its list price, the seller's reservation as the
    floor, one lever per extra (valued at what it costs the seller)."""
    return {
        "id": scenario.id,
        "name": f"Lab item {scenario.id}",
        "subtitle": "A scenario of the negotiation lab",
        "description": "A generated item for protocol comparisons.",
        "condition": "new",
        "list_price": to_decimal_number(scenario.list_price_cents),
        "floor": to_decimal_number(scenario.seller_reservation_cents),
        "currency": scenario.currency,
        "levers": [_lever_text(e.name, e.cost_cents) for e in scenario.extras],
        "inventory_note": "",
    }


def scenario_catalog(scenarios: Iterable[Scenario]):  # type: ignore[no-untyped-def]
    """One catalog holding a product per scenario (ids must be unique)."""
    from haggler.catalog import parse_catalog

    unique: dict[str, Scenario] = {}
    for scenario in scenarios:
        if scenario.id in unique and unique[scenario.id] != scenario:
            raise ValueError(f"two different scenarios share the id {scenario.id!r}")
        unique[scenario.id] = scenario
    return parse_catalog({"store": dict(_LAB_STORE), "products": [scenario_product(s) for s in unique.values()]})


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class FreeTextPlay:
    """One free-text chat (:meth:`FreeTextStore.play`)."""

    #: The deal the store stored, its extras named as the scenario names them; None without one.
    terms: Terms | None
    #: The shopper agent, as the chat left it (its outcome).
    agent: ShopperAgent
    #: Every line of the chat, the merchant's as the shopper heard them: the greeting, then the
    #: shopper's turns and the merchant's replies in turn.
    texts: list[str]
    #: The shopper's turns the store answered.
    sent: int

    @property
    def shopper_texts(self) -> list[str]:
        return self.texts[1::2]


class FreeTextStore:
    """The store's chat service (merchant agent, text renderer, SQLite storage) over a catalog
    of the lab's scenarios, in process. Creating one is slow (database migrations): make one per
    comparison and run every negotiation through it. Use as a context manager, or call
    :meth:`close`."""

    def __init__(self, scenarios: Iterable[Scenario], *, seed: int = 0, max_messages: int = 30) -> None:
        from haggler.protocols.negotiate_v1.service import ChatService
        from haggler.protocols.negotiate_v1.settings import MerchantSettings, StoreLimits
        from haggler.storage.database import open_database

        self.scenarios = {s.id: s for s in scenarios}
        self.catalog = scenario_catalog(self.scenarios.values())
        self._tmp = tempfile.mkdtemp(prefix="haggler-lab-")
        self.db = open_database(f"sqlite:///{Path(self._tmp) / 'lab.db'}")
        limits = StoreLimits(max_chat_starts_per_hour_per_ip=10**9, max_messages_per_chat=max_messages)
        # The scenario's reservation is the floor exactly (no hidden margin), so that the store's
        # merchant sells on the terms the lab scores it by.
        self.service = ChatService(self.catalog, self.db, limits, _utc_now, seed=seed,
                                   merchant=MerchantSettings(floor_margin=0))

    def close(self) -> None:
        try:
            self.db.dispose()
        finally:
            shutil.rmtree(self._tmp, ignore_errors=True)

    def __enter__(self) -> "FreeTextStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def play(self, scenario: Scenario, seed: int | None, hear: Callable[[str], str]) -> FreeTextPlay:
        """One free-text chat over ``scenario``: the shopper reads each message of the merchant,
        greeting included, as ``hear`` turns it (what an adversary makes of it); the deal is the
        one the store stored."""
        from haggler.agents.shopper import ShopperAgent, ShopperGoal, ShopperTurn
        from haggler.errors import Closed
        from haggler.language.merchant_reading import read_merchant_reply

        if self.scenarios.get(scenario.id) != scenario:
            raise ValueError(f"scenario {scenario.id!r} is not in this store's catalog")
        service = self.service
        product = service.product(scenario.id)
        list_price = product.list_price_cents
        to_extra = {lever.offer_text.casefold(): e.name
                    for lever, e in zip(product.levers, scenario.extras, strict=True)}
        goal = ShopperGoal(list_price_cents=list_price, budget_cents=scenario.buyer_reservation_cents,
                           extra_values={e.name.replace("_", " "): e.value_cents for e in scenario.extras},
                           currency=scenario.currency)
        cap = service.limits.max_messages_per_chat
        agent = ShopperAgent(goal, seed=seed, max_turns=max(2, min(ShopperAgent.MAX_TURNS, cap)))
        chat = service.start(scenario.id, "lab")
        greeting = hear(chat.greeting)
        texts = [greeting]
        reading = read_merchant_reply(greeting, closed=False, list_price_cents=list_price,
                                          currency=scenario.currency)
        turn: ShopperTurn | None = agent.first_turn(reading)
        deal = None
        sent = 0
        while turn is not None:
            texts.append(turn.text)
            try:
                reply = service.say(chat.session_id, turn.text, checkout_url=lambda d: f"https://lab.invalid/{d}")
            except Closed:
                break
            sent += 1
            heard = hear(reply.message)
            texts.append(heard)
            deal = reply.deal or deal
            reading = read_merchant_reply(heard, closed=reply.closed, list_price_cents=list_price,
                                          currency=scenario.currency)
            turn = agent.next_turn(reading)
            if reply.closed:
                break
        terms = None
        if deal is not None:
            extras = tuple(to_extra.get(x.casefold(), x) for x in deal.extras)
            terms = Terms(deal.price_cents, deal.currency, extras)
        return FreeTextPlay(terms, agent, texts, sent)

    def negotiate(self, scenario: Scenario, seed: int | None = 0, *,
                  attack: Attack | None = None) -> NegotiationRecord:
        """One free-text negotiation of ``scenario``; with ``attack``, every message of the merchant
        reaches the shopper with the attack alongside it (and the audit log sees it)."""

        def hear(message: str) -> str:
            heard = _say(message, attack)
            if attack is not None:
                attack.audit(heard)
            return heard

        started = perf_counter()
        played = self.play(scenario, seed, hear)
        texts = played.texts
        return NegotiationRecord(scenario=scenario, terms=played.terms, rounds=played.sent, messages=len(texts),
                                 words=sum(word_count(t) for t in texts), wall_seconds=perf_counter() - started,
                                 protocol=FREE_TEXT, seller_name=_STORE_MERCHANT, buyer_name=_DEFAULT_SHOPPER)


def free_text(scenario: Scenario, seed: int | None = 0, *, store: FreeTextStore | None = None,
              attack: Attack | None = None) -> NegotiationRecord:
    """The store's merchant and the shopper agent haggling over ``scenario`` in free text.
    Without ``store`` a one-product store is made (and closed) for this negotiation alone:
    pass a :class:`FreeTextStore` when running many."""
    if store is not None:
        return store.negotiate(scenario, seed, attack=attack)
    with FreeTextStore([scenario], seed=seed or 0) as own:
        return own.negotiate(scenario, seed, attack=attack)
