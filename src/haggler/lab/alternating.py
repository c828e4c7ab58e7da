"""Structured alternating offers through the engine: the lab's basic protocol.

Two deciders take turns — an OFFER, an ACCEPT of the other's last offer, or a REJECT — under
:class:`~haggler.engine.Rules` with strict alternation and a cap of two turns per round. Every
decision passes :func:`~haggler.agents.decider.guard` before it becomes a turn, so neither side
can cross its reservation whatever its decider proposes.

The rules are the market's own (:func:`haggler.protocols.market.settlement.offer_rules`, spec
003's offers on the engine), with a cap of two turns per round: the lab measures the protocol the
market serves, not a copy of it.

Turns carry fixed synthetic timestamps (one second apart from a fixed epoch): the run is
deterministic and reads no clock, except one ``perf_counter`` pair for the wall time. This is
the hot loop of ``benchmarks/engine_speed.py``.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from time import perf_counter
from typing import NamedTuple

from haggler.agents.decider import ACCEPT, REJECT, Decider, DeciderView, guard
from haggler.engine import Action, Negotiation, OutcomeKind, Rules, Terms
from haggler.lab.scenario import BUYER, SELLER, Scenario
from haggler.protocols.market.settlement import offer_rules

__all__ = ["AlternatingResult", "run_alternating"]

_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
_TIMES: list[datetime] = []
_OFFER = Action.OFFER
_AGREED, _REJECTED = OutcomeKind.AGREED, OutcomeKind.REJECTED
_new = tuple.__new__
_RULES: dict[tuple[str, int], Rules] = {}
_SCHEDULES: dict[tuple[str, int], tuple[tuple[bool, int, datetime, int], ...]] = {}


def _times(n: int) -> list[datetime]:
    while len(_TIMES) < n:
        _TIMES.append(_EPOCH + timedelta(seconds=len(_TIMES)))
    return _TIMES


def _schedule(first: str, max_turns: int) -> tuple[tuple[bool, int, datetime, int], ...]:
    """Each turn of a negotiation opened by ``first`` and capped at ``max_turns``, made once per
    (opener, cap): (whether the seller moves, the round, the turn's timestamp, the turns taken
    once it is). The hot loop reads these instead of working them out from the turn index."""
    schedule = _SCHEDULES.get((first, max_turns))
    if schedule is None:
        seller_parity = 0 if first == SELLER else 1
        times = _times(max_turns)
        schedule = _SCHEDULES[(first, max_turns)] = tuple(
            ((i & 1) == seller_parity, i >> 1, times[i], i + 1) for i in range(max_turns))
    return schedule


def _rules(first: str, max_turns: int) -> Rules:
    """The market's offer rules, made once per (opener, cap): Rules are immutable."""
    rules = _RULES.get((first, max_turns))
    if rules is None:
        rules = _RULES[(first, max_turns)] = offer_rules(first, turn_cap=max_turns)
    return rules


class AlternatingResult(NamedTuple):
    """How one negotiation ended.

    A named tuple rather than a frozen dataclass: one is built per negotiation, and a frozen
    dataclass sets each of its seven fields through ``object.__setattr__`` — about 2% of a
    20-round negotiation. Like the engine's Terms, it compares equal to a plain tuple of the
    same values, so compare results only with each other."""

    agreed: bool
    terms: Terms | None
    #: Rounds begun (a round is one turn of each side; the last may be half a round).
    rounds: int
    turns: int
    wall_seconds: float
    #: "agreed", "rejected" (a side walked away) or "timeout" (the turn cap was reached).
    reason: str
    #: The side whose turn ended the negotiation (None on timeout).
    by: str | None = None


def _price_plan(decider: Decider, role: str, reservation: int, list_price: int,
                max_rounds: int) -> tuple[int, ...] | None:
    """The decider's prices per round when it offers the fast path
    (:class:`~haggler.agents.decider.PricePlanner`), else None: also when the plan does not hold
    one price per round, which the loop reads it by."""
    plan = getattr(decider, "price_plan", None)
    prices = None if plan is None else plan(role, reservation, list_price, max_rounds)
    return prices if prices is not None and len(prices) == max_rounds else None


def _offers(negotiation: Negotiation) -> tuple[tuple[Terms, ...], tuple[Terms, ...]]:
    """The seller's and the buyer's offers so far, oldest first, read from the engine's record:
    the histories a view needs when the loop has not kept them (both sides planned)."""
    turns = negotiation.turns
    return (tuple(t.terms for t in turns if t.party == SELLER and t.action is _OFFER),  # type: ignore[misc]
            tuple(t.terms for t in turns if t.party == BUYER and t.action is _OFFER))  # type: ignore[misc]


def run_alternating(scenario: Scenario, seller: Decider, buyer: Decider, *, first: str = SELLER) -> AlternatingResult:
    """Run one alternating-offers negotiation of ``scenario`` to its end.

    The hot loop of the lab: views are built with ``tuple.__new__`` (all fields given), turns
    go to the engine as plain tuples of their fields (it reads them back as Turns), a plain
    single-issue offer already within its owner's reservation skips the call to
    :func:`guard` — exactly the case in which guard returns it unchanged — and every other
    decision goes through guard. A decider with a price plan
    (:class:`~haggler.agents.decider.PricePlanner`) is not asked through a view while the
    counterpart's last offer, if any, is a bare price and its planned price is within its
    reservation: the loop makes the move the plan's contract says ``decide`` would (an accept
    then agrees to an offer at least as good as a price within the reservation, which guard
    would let pass). When both sides plan, the offer histories views carry are not kept turn by
    turn but read from the engine's record when a view is first needed. Every turn goes
    through the engine's ``apply``."""
    if first not in (SELLER, BUYER):
        raise ValueError(f"first must be {SELLER!r} or {BUYER!r}, not {first!r}")
    started = perf_counter()
    max_rounds = scenario.max_rounds
    max_turns = 2 * max_rounds
    negotiation = Negotiation(_rules(first, max_turns))
    apply = negotiation.apply
    schedule = _schedule(first, max_turns)
    currency = scenario.currency
    list_price = scenario.list_price_cents
    floor, budget = scenario.seller_reservation_cents, scenario.buyer_reservation_cents
    extras = scenario.extras
    if extras:
        seller_extras = {e.name: e.cost_cents for e in extras}
        buyer_extras = {e.name: e.value_cents for e in extras}
    else:  # the same fresh empty dicts, without two comprehensions' frames
        seller_extras, buyer_extras = {}, {}
    seller_decide, buyer_decide = seller.decide, buyer.decide
    seller_plan = _price_plan(seller, SELLER, floor, list_price, max_rounds)
    buyer_plan = _price_plan(buyer, BUYER, budget, list_price, max_rounds)
    # Whether seller_offers and buyer_offers are kept: always when a side is asked every turn;
    # when both plan, only once a view has been needed (until then, _offers reads them).
    kept = seller_plan is None or buyer_plan is None
    seller_offers: tuple[Terms, ...] = ()
    buyer_offers: tuple[Terms, ...] = ()
    # Each side's last offer as a bare price (None before its first offer or after one with
    # extras), and whether it has made none with extras last (only decide can weigh those).
    seller_ask: int | None = None
    buyer_ask: int | None = None
    seller_bare = buyer_bare = True
    outcome = None
    turns = 0
    # Module globals as locals: the loop reads each of them on every turn.
    new, view_type, terms_type, offer, accept = _new, DeciderView, Terms, _OFFER, ACCEPT
    for seller_moves, round_, at, turns in schedule:
        if seller_moves:
            if seller_plan is not None and buyer_bare:
                price = seller_plan[round_]
                if price >= floor:
                    if buyer_ask is not None and buyer_ask >= price:
                        outcome = apply((SELLER, accept, at, None, None, False))
                        break  # an accept of a standing offer closes the negotiation
                    decision = new(terms_type, (price, currency, ()))
                    outcome = apply((SELLER, offer, at, decision, None, False))
                    if kept:
                        seller_offers += (decision,)
                    seller_ask, seller_bare = price, True
                    if outcome is None:
                        continue
                    break
            if not kept:
                seller_offers, buyer_offers = _offers(negotiation)
                kept = True
            view = new(view_type, (SELLER, floor, list_price, round_, max_rounds, seller_offers,
                                   buyer_offers, seller_extras, currency))
            decision = seller_decide(view)
            # Unpacked once rather than read as three attributes (each a descriptor lookup).
            if type(decision) is terms_type:
                price, decision_currency, decision_extras = decision
                if not decision_extras and decision_currency == currency and price >= floor:
                    outcome = apply((SELLER, offer, at, decision, None, False))
                    seller_offers += (decision,)
                    seller_ask, seller_bare = price, True
                    if outcome is None:
                        continue
                    break
            decision = guard(decision, view)
            if decision is ACCEPT or decision is REJECT:
                outcome = apply((SELLER, decision, at, None, None, False))
            else:
                # guard leaves Terms, ACCEPT or REJECT, so this is Terms; an isinstance() here
                # would cost the hot loop what the type checker cannot see. Its currency is the
                # scenario's: guard makes it so.
                outcome = apply((SELLER, offer, at, decision, None, False))
                seller_offers += (decision,)  # type: ignore[operator]
                seller_bare = not decision.extras  # type: ignore[union-attr]
                seller_ask = decision.price_cents if seller_bare else None  # type: ignore[union-attr]
        else:
            if buyer_plan is not None and seller_bare:
                price = buyer_plan[round_]
                if price <= budget:
                    if seller_ask is not None and seller_ask <= price:
                        outcome = apply((BUYER, accept, at, None, None, False))
                        break
                    decision = new(terms_type, (price, currency, ()))
                    outcome = apply((BUYER, offer, at, decision, None, False))
                    if kept:
                        buyer_offers += (decision,)
                    buyer_ask, buyer_bare = price, True
                    if outcome is None:
                        continue
                    break
            if not kept:
                seller_offers, buyer_offers = _offers(negotiation)
                kept = True
            view = new(view_type, (BUYER, budget, list_price, round_, max_rounds, buyer_offers,
                                   seller_offers, buyer_extras, currency))
            decision = buyer_decide(view)
            if type(decision) is terms_type:
                price, decision_currency, decision_extras = decision
                if not decision_extras and decision_currency == currency and price <= budget:
                    outcome = apply((BUYER, offer, at, decision, None, False))
                    buyer_offers += (decision,)
                    buyer_ask, buyer_bare = price, True
                    if outcome is None:
                        continue
                    break
            decision = guard(decision, view)
            if decision is ACCEPT or decision is REJECT:
                outcome = apply((BUYER, decision, at, None, None, False))
            else:
                outcome = apply((BUYER, offer, at, decision, None, False))
                buyer_offers += (decision,)  # type: ignore[operator]
                buyer_bare = not decision.extras  # type: ignore[union-attr]
                buyer_ask = decision.price_cents if buyer_bare else None  # type: ignore[union-attr]
        if outcome is not None:
            break
    assert outcome is not None  # the turn cap closes it at the latest
    kind = outcome.kind
    # Compared by identity: an Enum's __hash__ is Python code, so a dict lookup keyed on it is not.
    reason = "agreed" if kind is _AGREED else "rejected" if kind is _REJECTED else "timeout"
    return _new(AlternatingResult, (kind is _AGREED, outcome.terms, (turns + 1) // 2, turns,
                                    perf_counter() - started, reason, outcome.by))
