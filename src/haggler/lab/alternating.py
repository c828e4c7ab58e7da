"""Structured alternating offers through the engine: the lab's basic protocol.

Two deciders take turns — an OFFER, an ACCEPT of the other's last offer, or a REJECT — under
:class:`~haggler.engine.Rules` with strict alternation and a cap of two turns per round. Every
decision passes :func:`~haggler.agents.decider.guard` before it becomes a turn, so neither side
can cross its reservation whatever its decider proposes.

Turns carry fixed synthetic timestamps (one second apart from a fixed epoch): the run is
deterministic and reads no clock, except one ``perf_counter`` pair for the wall time. This is
the hot loop of ``benchmarks/engine_speed.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from time import perf_counter

from haggler.agents.decider import Decider, DeciderView, guard
from haggler.engine import Action, Negotiation, OutcomeKind, Rules, Terms, Turn
from haggler.lab.scenario import BUYER, SELLER, Scenario

__all__ = ["AlternatingResult", "run_alternating"]

_EPOCH = datetime(2000, 1, 1, tzinfo=timezone.utc)
_TIMES: list[datetime] = []
_REASONS = {OutcomeKind.AGREED: "agreed", OutcomeKind.REJECTED: "rejected", OutcomeKind.TURN_CAP: "timeout",
            OutcomeKind.EXPIRED: "timeout"}
_OFFER = Action.OFFER
_RULES: dict[tuple[str, int], Rules] = {}


def _times(n: int) -> list[datetime]:
    while len(_TIMES) < n:
        _TIMES.append(_EPOCH + timedelta(seconds=len(_TIMES)))
    return _TIMES


def _rules(first: str, max_turns: int) -> Rules:
    rules = _RULES.get((first, max_turns))
    if rules is None:
        parties = (SELLER, BUYER) if first == SELLER else (BUYER, SELLER)
        rules = _RULES[(first, max_turns)] = Rules(parties=parties, max_turns=max_turns)
    return rules


@dataclass(frozen=True, slots=True)
class AlternatingResult:
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


def run_alternating(scenario: Scenario, seller: Decider, buyer: Decider, *, first: str = SELLER) -> AlternatingResult:
    """Run one alternating-offers negotiation of ``scenario`` to its end."""
    if first not in (SELLER, BUYER):
        raise ValueError(f"first must be {SELLER!r} or {BUYER!r}, not {first!r}")
    started = perf_counter()
    max_rounds = scenario.max_rounds
    max_turns = 2 * max_rounds
    rules = _rules(first, max_turns)
    negotiation = Negotiation(rules)
    apply = negotiation.apply
    times = _times(max_turns)
    currency = scenario.currency
    list_price = scenario.list_price_cents
    extras = scenario.extras
    seller_extras = {e.name: e.cost_cents for e in extras}
    buyer_extras = {e.name: e.value_cents for e in extras}
    seller_offers: list[Terms] = []
    buyer_offers: list[Terms] = []
    # (party, decider, reservation, extras, my offers, their offers), in turn order
    seller_side = (SELLER, seller.decide, scenario.seller_reservation_cents, seller_extras, seller_offers, buyer_offers)
    buyer_side = (BUYER, buyer.decide, scenario.buyer_reservation_cents, buyer_extras, buyer_offers, seller_offers)
    sides = (seller_side, buyer_side) if first == SELLER else (buyer_side, seller_side)
    outcome = None
    turn_index = 0
    for turn_index in range(max_turns):
        party, decide, reservation, values, mine, theirs = sides[turn_index & 1]
        view = DeciderView(party, reservation, list_price, turn_index >> 1, max_rounds,
                           tuple(mine), tuple(theirs), values, currency)
        decision = guard(decide(view), view)
        action = decision.action
        if action is _OFFER:
            terms = decision.terms
            outcome = apply(Turn(party, action, times[turn_index], terms))
            mine.append(terms)
        else:
            outcome = apply(Turn(party, action, times[turn_index]))
        if outcome is not None:
            break
    turns = turn_index + 1
    assert outcome is not None  # the turn cap closes it at the latest
    return AlternatingResult(
        agreed=outcome.kind is OutcomeKind.AGREED,
        terms=outcome.terms,
        rounds=(turns + 1) // 2,
        turns=turns,
        wall_seconds=perf_counter() - started,
        reason=_REASONS[outcome.kind],
        by=outcome.by,
    )
