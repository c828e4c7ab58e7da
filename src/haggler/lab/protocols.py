"""The lab's four negotiation protocols, each turning a :class:`Scenario` into a
:class:`~haggler.lab.metrics.NegotiationRecord` (spec 003, "Protocols").

* :func:`alternating` — structured alternating offers through the engine
  (:func:`~haggler.lab.alternating.run_alternating`), by default the store's merchant agent
  against the shopper agent; each turn is one JSON offer message (spec 003, message 7).
* :func:`free_text` — the store's real merchant agent (the negotiate.v1 :class:`ChatService`
  on its own SQLite database) and the real shopper agent talking in free text, in process and
  without HTTP. The shopper reads only the merchant's text; the terms recorded are the deal the
  store actually stored.
* :func:`sealed_bid` — both sides reveal their reservation; a deal at the midpoint when they
  overlap (spec 003, Protocol 2): two JSON messages.
* :func:`instant_match` — the buyer takes the asking price when it is within budget
  (Protocol 3): one JSON message.

Messages and words count what crosses the wire: for the structured protocols the JSON
messages (built with :func:`json.dumps`), for free text every line of the chat including the
merchant's greeting. Words are :func:`~haggler.lab.metrics.word_count` tokens.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from time import perf_counter
from typing import Any, Iterable

from haggler.agents.decider import ACCEPT, Decider, DeciderView, Decision, guard
from haggler.engine import Terms
from haggler.lab.alternating import run_alternating
from haggler.lab.metrics import NegotiationRecord, word_count
from haggler.lab.scenario import BUYER, SELLER, Scenario
from haggler.money import format_money, to_decimal_number
from haggler.protocols.market.pricing import midpoint_cents

__all__ = [
    "FREE_TEXT", "ALTERNATING", "INSTANT_MATCH", "PROTOCOLS", "SEALED_BID", "FreeTextStore",
    "alternating", "free_text", "instant_match", "sealed_bid",
]

ALTERNATING = "alternating"
FREE_TEXT = "free-text"
SEALED_BID = "sealed-bid"
INSTANT_MATCH = "instant-match"
#: The protocols, in the order the comparison reports them.
PROTOCOLS = (ALTERNATING, FREE_TEXT, SEALED_BID, INSTANT_MATCH)

_VERSION = "0.1.0"
#: A fixed timestamp: the messages (and so their word counts) are deterministic.
_TIMESTAMP = "2026-01-01T00:00:00Z"
_STORE_MERCHANT = "store-merchant"
_DEFAULT_SHOPPER = "default-shopper"


def _json_words(message: dict[str, Any]) -> int:
    return word_count(json.dumps(message))


# -- sealed bid -----------------------------------------------------------------------------------


def sealed_bid_messages(scenario: Scenario) -> tuple[dict[str, Any], dict[str, Any]]:
    """The buyer's and the seller's sealed bids, in spec 003's format (unsigned: the lab has
    no keys, so there is no ``signature`` field)."""
    budget, floor = scenario.buyer_reservation_cents, scenario.seller_reservation_cents
    buyer = {
        "type": "sealed_bid", "version": _VERSION, "timestamp": _TIMESTAMP, "requestId": f"req_{scenario.id}",
        "party": BUYER, "maxPrice": to_decimal_number(budget),
        "commitment": f"If seller's minPrice <= {to_decimal_number(budget)}, I will pay midpoint price.",
    }
    seller = {
        "type": "sealed_bid", "version": _VERSION, "timestamp": _TIMESTAMP, "requestId": f"req_{scenario.id}",
        "party": SELLER, "minPrice": to_decimal_number(floor),
        "commitment": f"If buyer's maxPrice >= {to_decimal_number(floor)}, I will accept midpoint price.",
    }
    return buyer, seller


def sealed_bid(scenario: Scenario) -> NegotiationRecord:
    """Both sides reveal their reservation; the framework closes at the midpoint when the
    buyer's reaches the seller's, and fails at once otherwise. No extras are traded."""
    started = perf_counter()
    messages = sealed_bid_messages(scenario)
    budget, floor = scenario.buyer_reservation_cents, scenario.seller_reservation_cents
    terms = Terms(midpoint_cents(budget, floor), scenario.currency) if budget >= floor else None
    words = sum(_json_words(m) for m in messages)
    return NegotiationRecord(scenario=scenario, terms=terms, rounds=1, messages=len(messages), words=words,
                             wall_seconds=perf_counter() - started, protocol=SEALED_BID,
                             seller_name="sealed-bid", buyer_name="sealed-bid")


# -- instant match --------------------------------------------------------------------------------


def instant_match_message(scenario: Scenario) -> dict[str, Any]:
    """The buyer's one message: an ``instant_match`` acceptance of the list price when it is
    within budget, else a pass (the same shape, no accepted price)."""
    price = scenario.list_price_cents
    within = price <= scenario.buyer_reservation_cents
    return {
        "type": "instant_match", "version": _VERSION, "timestamp": _TIMESTAMP, "requestId": f"req_{scenario.id}",
        "listingId": f"lst_{scenario.id}", "acceptedPrice": to_decimal_number(price) if within else None,
        "message": (f"Your price of {to_decimal_number(price)} is within my budget. I accept immediately." if within
                    else f"Your price of {to_decimal_number(price)} is above my budget. I pass."),
    }


def instant_match(scenario: Scenario) -> NegotiationRecord:
    """The buyer takes the asking (list) price when it is within its budget; otherwise no deal."""
    started = perf_counter()
    message = instant_match_message(scenario)
    terms = (Terms(scenario.list_price_cents, scenario.currency)
             if scenario.list_price_cents <= scenario.buyer_reservation_cents else None)
    return NegotiationRecord(scenario=scenario, terms=terms, rounds=1, messages=1, words=_json_words(message),
                             wall_seconds=perf_counter() - started, protocol=INSTANT_MATCH,
                             seller_name="instant-match", buyer_name="instant-match")


# -- alternating offers ---------------------------------------------------------------------------


def offer_message(party: str, decision: Decision, *, request_id: str) -> dict[str, Any]:
    """One alternating-offers turn as a JSON message (spec 003, message 7, without prose)."""
    base: dict[str, Any] = {"type": "offer", "version": _VERSION, "timestamp": _TIMESTAMP,
                            "requestId": request_id, "party": party}
    if isinstance(decision, Terms):
        base["offerPrice"] = to_decimal_number(decision.price_cents)
        if decision.extras:
            base["extras"] = list(decision.extras)
    else:
        base["type"] = "accept" if decision is ACCEPT else "reject"
    return base


class _Recording:
    """A decider that logs the (guarded) decisions it makes, as JSON word counts."""

    def __init__(self, inner: Decider, request_id: str) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)
        self.request_id = request_id
        self.words = 0
        self.messages = 0

    def decide(self, view: DeciderView) -> Decision:
        # guard is idempotent, so run_alternating's own guard leaves this decision as it is.
        decision = guard(self.inner.decide(view), view)
        self.messages += 1
        self.words += _json_words(offer_message(view.role, decision, request_id=self.request_id))
        return decision


def _decider(spec: str | Decider) -> Decider:
    if isinstance(spec, str):
        from haggler.agents.strategies import STRATEGIES

        try:
            return STRATEGIES[spec]()
        except KeyError:
            raise ValueError(f"unknown strategy {spec!r}; known: {', '.join(sorted(STRATEGIES))}") from None
    return spec


def alternating(scenario: Scenario, seller: str | Decider = _STORE_MERCHANT,
                buyer: str | Decider = _DEFAULT_SHOPPER) -> NegotiationRecord:
    """Structured alternating offers (seller first); messages are turns, words those of the
    turns as JSON offer messages. Strategies by name get a fresh decider."""
    s, b = _decider(seller), _decider(buyer)
    rs, rb = _Recording(s, f"req_{scenario.id}"), _Recording(b, f"req_{scenario.id}")
    result = run_alternating(scenario, rs, rb)
    return NegotiationRecord(scenario=scenario, terms=result.terms if result.agreed else None,
                             rounds=result.rounds, messages=result.turns, words=rs.words + rb.words,
                             wall_seconds=result.wall_seconds, protocol=ALTERNATING,
                             seller_name=rs.name, buyer_name=rb.name)


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

    def negotiate(self, scenario: Scenario, seed: int | None = 0) -> NegotiationRecord:
        from haggler.agents.shopper import ShopperAgent, ShopperGoal
        from haggler.errors import Closed
        from haggler.language.merchant_reading import read_merchant_reply

        if self.scenarios.get(scenario.id) != scenario:
            raise ValueError(f"scenario {scenario.id!r} is not in this store's catalog")
        service = self.service
        started = perf_counter()
        product = service.product(scenario.id)
        list_price = product.list_price_cents
        to_extra = {lever.offer_text.casefold(): e.name for lever, e in zip(product.levers, scenario.extras)}
        goal = ShopperGoal(list_price_cents=list_price, budget_cents=scenario.buyer_reservation_cents,
                           extra_values={e.name.replace("_", " "): e.value_cents for e in scenario.extras},
                           currency=scenario.currency)
        cap = service.limits.max_messages_per_chat
        agent = ShopperAgent(goal, seed=seed, max_turns=max(2, min(ShopperAgent.MAX_TURNS, cap)))
        chat = service.start(scenario.id, "lab")
        texts = [chat.greeting]
        reading = read_merchant_reply(chat.greeting, closed=False, list_price_cents=list_price)
        turn = agent.first_turn(reading)
        deal = None
        sent = 0
        while turn is not None:
            texts.append(turn.text)
            try:
                reply = service.say(chat.session_id, turn.text, checkout_url=lambda d: f"https://lab.invalid/{d}")
            except Closed:
                break
            sent += 1
            texts.append(reply.message)
            deal = reply.deal or deal
            reading = read_merchant_reply(reply.message, closed=reply.closed, list_price_cents=list_price)
            turn = agent.next_turn(reading)
            if reply.closed:
                break
        terms = None
        if deal is not None:
            extras = tuple(to_extra.get(x.casefold(), x) for x in deal.extras)
            terms = Terms(deal.price_cents, deal.currency, extras)
        return NegotiationRecord(scenario=scenario, terms=terms, rounds=sent, messages=len(texts),
                                 words=sum(word_count(t) for t in texts), wall_seconds=perf_counter() - started,
                                 protocol=FREE_TEXT, seller_name=_STORE_MERCHANT, buyer_name=_DEFAULT_SHOPPER)


def free_text(scenario: Scenario, seed: int | None = 0, *, store: FreeTextStore | None = None) -> NegotiationRecord:
    """The store's merchant and the shopper agent haggling over ``scenario`` in free text.
    Without ``store`` a one-product store is made (and closed) for this negotiation alone:
    pass a :class:`FreeTextStore` when running many."""
    if store is not None:
        return store.negotiate(scenario, seed)
    with FreeTextStore([scenario], seed=seed or 0) as own:
        return own.negotiate(scenario, seed)
