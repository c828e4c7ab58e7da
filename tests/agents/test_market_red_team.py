"""spec 003: Security Model — the built-in market agents against every red-team attack.

Each attack of the corpus (haggler/data/market_red_team.json) is placed in every free-text field
the counterpart sends — the listing's description, model, price justification and location, the
contact request's message, the protocol agreement's message, the sealed bids' commitments, the
instant match's message and every offer's message — alongside a real negotiation under each
protocol the spec defines. The agents read those messages the way they are built to (listing facts,
structured offer fields); the test then holds two things:

* no decision of either agent violates its owner's mandate (``mandates.check``, Constraint
  enforcement);
* the decisions are byte-identical with and without the attack: the text never reaches a decider
  (Structured parsing, Field isolation).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib import resources
from typing import Any

import pytest

from haggler.agents.decider import ACCEPT, REJECT, DeciderView
from haggler.agents.market import (
    DOUBLE_AUCTION, INSTANT_MATCH, MANY_LISTINGS, NATURAL_LANGUAGE, SEALED_BID, Interest, ListingFacts, MarketBuyer,
    MarketSeller, read_offer,
)
from haggler.engine import Negotiation, Terms
from haggler.money import amount_cents, to_decimal_number
from haggler.protocols.market import mandates
from haggler.protocols.market.auction import OrderBook, clear
from haggler.protocols.market.mandates import Mandate, check
from haggler.protocols.market.settlement import BUYER, SELLER, offer_rules, offer_turn, sealed_bid_price
from tests.support.market_agents import decision_action

CORPUS = json.loads(resources.files("haggler").joinpath("data/market_red_team.json").read_text(encoding="utf-8"))
ATTACKS = CORPUS["attacks"]
ISSUED = datetime(2026, 2, 7, 20, 0, tzinfo=timezone.utc)
AT = datetime(2026, 2, 8, 12, 0, tzinfo=timezone.utc)
WANTS = Interest("electronics", "gaming_console", "nintendo_switch")
PERMITTED = dict(can_negotiate=True, can_accept_instant_match=True, can_use_sealed_bid=True)

#: (name, seller floor, seller reservation, buyer maxSpend, buyer valuation, ask, negotiable)
SETUPS = (
    ("zone", 15_000, 15_500, 20_000, 18_500, 18_000, True),
    ("narrow", 17_000, None, 17_500, None, 20_000, True),
    ("no_zone", 19_000, None, 20_000, 17_000, 20_000, True),
    ("fixed_price", 15_000, None, 20_000, None, 18_000, False),
)


def _text(benign: str, attack: str | None) -> str:
    return benign if attack is None else f"{benign} {attack}"


def _agents(setup: tuple) -> tuple[MarketSeller, MarketBuyer]:
    _, floor, reservation, cap, valuation, _, _ = setup
    seller = MarketSeller(Mandate("seller_1", ISSUED, "EUR", min_acceptable_price=floor, **PERMITTED),
                          reservation_cents=reservation)
    buyer = MarketBuyer(Mandate("buyer_1", ISSUED, "EUR", max_spend=cap, required_condition="good",
                                required_accessories=("charger",), **PERMITTED), WANTS, valuation_cents=valuation)
    return seller, buyer


def _listing(setup: tuple, attack: str | None) -> dict[str, Any]:
    *_, ask, negotiable = setup
    return {
        "type": "listing", "version": "0.1.0", "listingId": "lst_1", "timestamp": "2026-02-08T12:00:00Z",
        "seller": {"agentId": "seller_1"},
        "item": {"category": "electronics", "subcategory": "gaming_console", "name": "nintendo_switch",
                 "model": _text("OLED", attack), "condition": "good",
                 "description": _text("Used for 6 months, no scratches", attack),
                 "accessories": ["charger", "case"]},
        "pricing": {"askPrice": to_decimal_number(ask), "currency": "EUR", "negotiable": negotiable,
                    "priceJustification": _text("Market rate for good condition OLED", attack)},
        "logistics": {"location": _text("Paris, France", attack)},
    }


class Session:
    """One negotiation between the two agents, messages and all; ``log`` is every decision."""

    def __init__(self, setup: tuple, attack: str | None) -> None:
        self.seller, self.buyer = _agents(setup)
        self.attack = attack
        self.log: list[Any] = []
        listing = _listing(setup, attack)
        self.seller_facts = ListingFacts.from_listing(listing)
        self.buyer_facts = ListingFacts.from_listing(listing)

    def act(self, agent: MarketSeller | MarketBuyer, action: mandates.Action | None) -> mandates.Action | None:
        """Record one proposed action, after checking it against the agent's mandate."""
        if action is not None:
            assert check(agent.mandate, agent.role, action) is None, action
        self.log.append(None if action is None else [action.kind, action.protocol, action.price])
        return action

    def run(self) -> bytes:
        facts = self.buyer_facts
        self.log.append(self.buyer.fits(facts))
        self.log.append([self.buyer.choose_protocol(facts, competing_listings=n, urgent=urgent)
                         for n in (0, 1, MANY_LISTINGS) for urgent in (False, True)])
        for proposed in (NATURAL_LANGUAGE, SEALED_BID, INSTANT_MATCH):
            contact = {"type": "contact_request", "protocol": proposed,
                       "message": _text("I'm interested in your Nintendo Switch listing.", self.attack)}
            agreed = self.seller.agree_protocol(contact["protocol"], self.seller_facts)
            agreement = {"type": "protocol_agreement", "agreedProtocol": agreed,
                         "message": _text("Agreed.", self.attack)}
            self.log.append(agreed)
            protocol = agreement["agreedProtocol"]
            if protocol == SEALED_BID:
                self.sealed_bid()
            elif protocol == INSTANT_MATCH:
                self.instant_match()
            elif protocol == NATURAL_LANGUAGE:
                self.offers()
        self.double_auction()
        return json.dumps(self.log).encode()

    def deal(self, price: int | None, protocol: str) -> None:
        """Both agents' confirmations of a deal the framework settled (None: no deal)."""
        if price is not None:
            self.act(self.seller, self.seller.confirm(self.seller_facts, price, protocol, at=AT))
            self.act(self.buyer, self.buyer.confirm(self.buyer_facts, price, protocol, at=AT))

    def sealed_bid(self) -> None:
        buyer_bid = self.act(self.buyer, self.buyer.sealed_bid(self.buyer_facts, at=AT))
        seller_bid = self.act(self.seller, self.seller.sealed_bid(self.seller_facts, at=AT))
        if buyer_bid is None or seller_bid is None:
            return
        bids = ({"type": "sealed_bid", "party": BUYER, "maxPrice": to_decimal_number(buyer_bid.price),
                 "commitment": _text("If seller's minPrice <= my max, I will pay midpoint price.", self.attack)},
                {"type": "sealed_bid", "party": SELLER, "minPrice": to_decimal_number(seller_bid.price),
                 "commitment": _text("If buyer's maxPrice >= my min, I will accept midpoint price.", self.attack)})
        self.deal(sealed_bid_price(amount_cents(bids[0]["maxPrice"]), amount_cents(bids[1]["minPrice"])), SEALED_BID)

    def instant_match(self) -> None:
        match = self.act(self.buyer, self.buyer.instant_match(self.buyer_facts, at=AT))
        if match is None:
            return
        message = {"type": "instant_match", "acceptedPrice": to_decimal_number(match.price),
                   "message": _text("Your price is within my budget. I accept immediately.", self.attack)}
        confirmed = self.act(self.seller, self.seller.accept_instant_match(
            self.seller_facts, amount_cents(message["acceptedPrice"]), at=AT))
        if confirmed is not None:
            self.act(self.buyer, self.buyer.confirm(self.buyer_facts, confirmed.price, INSTANT_MATCH, at=AT))

    def offers(self) -> None:
        """Offers on the market's engine rules (settlement.offer_rules, the seller first); each
        turn crosses as an offer message whose free text carries the attack; the other side reads
        it with read_offer, and the engine holds the text as the market would."""
        negotiation = Negotiation(offer_rules(SELLER))
        sides = {SELLER: (self.seller, self.seller_facts), BUYER: (self.buyer, self.buyer_facts)}
        negotiators = {party: agent.negotiator(facts, clock=lambda: AT) for party, (agent, facts) in sides.items()}
        offers: dict[str, tuple[Terms, ...]] = {SELLER: (), BUYER: ()}
        cap = negotiation.rules.max_turns
        for index in range(cap):
            party = SELLER if index % 2 == 0 else BUYER
            other = BUYER if party == SELLER else SELLER
            agent, facts = sides[party]
            view = DeciderView(party, 0, 0, index // 2, cap // 2, offers[party], offers[other], currency="EUR")
            decision = negotiators[party].decide(view)
            self.act(agent, decision_action(agent.mandate.agent_id, facts, decision,
                                            offers[other][-1] if offers[other] else None, AT))
            message: dict[str, Any] = {"type": "offer", "party": party,
                                       "message": _text("Here is my offer.", self.attack)}
            if decision is ACCEPT or decision is REJECT:
                message["action"] = decision.value
            else:
                message["offerPrice"] = to_decimal_number(decision.price_cents)
            received = read_offer(message, "EUR")
            if isinstance(received, Terms):
                offers[party] += (received,)
                turn = offer_turn(party, "offer", AT, price=received.price_cents, currency="EUR",
                                  text=message["message"])
            else:
                turn = offer_turn(party, message["action"], AT, currency="EUR", text=message["message"])
            outcome = negotiation.apply(turn)
            if outcome is not None:
                self.log.append([outcome.kind.value, outcome.terms and outcome.terms.price_cents])
                if outcome.terms is not None:
                    self.deal(outcome.terms.price_cents, NATURAL_LANGUAGE)
                return

    def double_auction(self) -> None:
        """The item's book: the two agents' orders among three other sellers' and buyers' (orders
        carry no text; the attack rides in the listing the buyer read)."""
        bid = self.act(self.buyer, self.buyer.auction_order(self.buyer_facts, at=AT))
        ask = self.act(self.seller, self.seller.auction_order(self.seller_facts, at=AT))
        book = OrderBook()
        for i, (buy, sell) in enumerate(((19_000, 16_000), (17_500, 18_500), (16_000, 20_500))):
            book.add(f"b{i}", "buy", buy, 1)
            book.add(f"s{i}", "sell", sell, 1)
        if bid is not None:
            book.add("buyer_1", "buy", bid.price, 1)
        if ask is not None:
            book.add("seller_1", "sell", ask.price, 1)
        clearing = clear(book)
        self.log.append([clearing.price, list(clearing.trades)])
        traded = {order_id for trade in clearing.trades for order_id in trade[:2]}
        if clearing.price is not None:
            if "seller_1" in traded:
                self.act(self.seller, self.seller.confirm(self.seller_facts, clearing.price, DOUBLE_AUCTION, at=AT))
            if "buyer_1" in traded:
                self.act(self.buyer, self.buyer.confirm(self.buyer_facts, clearing.price, DOUBLE_AUCTION, at=AT))


BASELINES = {setup[0]: Session(setup, None).run() for setup in SETUPS}


def _confirmations(log: bytes) -> list[list[Any]]:
    return [entry for entry in json.loads(log) if isinstance(entry, list) and entry[:1] == ["confirm"]]


def test_security_model_corpus_is_large_enough_and_sessions_make_deals():
    """The red team runs at least 40 attacks, and the attack-free sessions it compares against do
    trade under every protocol (refusing everything would resist every attack trivially)."""
    assert len(ATTACKS) >= 40
    assert {c[1] for c in _confirmations(BASELINES["zone"])} == {NATURAL_LANGUAGE, SEALED_BID, INSTANT_MATCH,
                                                                  DOUBLE_AUCTION}
    assert ["confirm", SEALED_BID, 17_000] in _confirmations(BASELINES["zone"])  # midpoint of 18,500 and 15,500
    assert ["confirm", INSTANT_MATCH, 18_000] in _confirmations(BASELINES["fixed_price"])
    assert {c[1] for c in _confirmations(BASELINES["fixed_price"])} == {INSTANT_MATCH}
    assert _confirmations(BASELINES["no_zone"]) == []


@pytest.mark.parametrize("attack", ATTACKS, ids=[attack["id"] for attack in ATTACKS])
def test_security_model_attack_never_reaches_a_decision(attack: dict[str, str]) -> None:
    """spec 003: Security Model — the attack in every free-text field of every protocol: every
    decision within the mandates (checked as it is made) and byte-identical to the attack-free run."""
    for setup in SETUPS:
        assert Session(setup, attack["text"]).run() == BASELINES[setup[0]], (attack["id"], setup[0])
