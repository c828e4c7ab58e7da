"""Metrics for one negotiation, and aggregated over many.

Utilities are the scenario's normalised utilities (:meth:`Scenario.utility`): each side's
surplus over the most value any acceptable agreement can create, so no agreement is (0, 0)
and the best agreements have utilities summing to 1.

The Pareto frontier in that utility space: with linear utilities it is the segment of
agreements with the scenario's efficient extras — ``u_s + u_b = 1`` — as far as the buyer's
cash ceiling lets the price go (the price can never exceed the buyer's reservation). Beyond
that the seller can only do better with cheaper bundles, so the frontier continues as a
staircase of lower parallel segments, ending with the price-only agreements near the buyer's
reservation. When every efficient extra fits between the reservations (or there are no
extras) and the point lies opposite the top segment, the distance is the textbook
``max(0, 1 − u_s − u_b) / √2``. Points no frontier point dominates (agreements someone should
not have accepted, or on the frontier) have distance 0.

The Nash bargaining solution maximises ``u_s · u_b`` over the frontier: (0.5, 0.5) when the
top segment reaches it.
"""

from __future__ import annotations

import math
import re
import statistics
from dataclasses import dataclass
from typing import Iterable

from haggler.engine import Terms
from haggler.lab.scenario import BUYER, SELLER, Scenario

_WORD = re.compile(r"\S+")


def word_count(text: str | None) -> int:
    """Words in a message (whitespace-separated tokens): the token proxy for talk volume."""
    if not text:
        return 0
    return len(_WORD.findall(text))


@dataclass(frozen=True, slots=True)
class NegotiationRecord:
    """What happened in one negotiation, as the lab saw it."""

    scenario: Scenario
    #: The agreed terms; None when the negotiation ended without agreement.
    terms: Terms | None
    rounds: int = 0
    messages: int = 0
    words: int = 0
    wall_seconds: float = 0.0
    protocol: str = ""
    seller_name: str = ""
    buyer_name: str = ""

    def __post_init__(self) -> None:
        if min(self.rounds, self.messages, self.words) < 0 or self.wall_seconds < 0:
            raise ValueError("rounds, messages, words and wall_seconds must not be negative")
        if self.terms is not None:
            if self.terms.currency != self.scenario.currency:
                raise ValueError(f"scenario {self.scenario.id}: terms in {self.terms.currency}, "
                                 f"scenario in {self.scenario.currency}")
            known = {e.name for e in self.scenario.extras}
            unknown = [n for n in self.terms.extras if n not in known]
            if unknown:
                raise ValueError(f"scenario {self.scenario.id}: unknown extras {unknown}")
            if len(set(self.terms.extras)) != len(self.terms.extras):
                raise ValueError(f"scenario {self.scenario.id}: an extra is listed twice in {self.terms.extras}")


@dataclass(frozen=True, slots=True)
class Metrics:
    agreed: bool
    price_cents: int | None
    seller_utility: float
    buyer_utility: float
    #: Each side's share of the surplus the agreement created (single issue:
    #: (price − seller_res) / (buyer_res − seller_res)); None without agreement or when the
    #: agreement created no surplus.
    seller_share: float | None
    buyer_share: float | None
    #: CraigslistBargain margin, (price − midpoint) / |target − midpoint| with the sign turned
    #: so that positive is good for that side; targets: list price (seller), buyer's
    #: reservation (buyer). None without agreement or when the targets coincide.
    cb_margin_seller: float | None
    cb_margin_buyer: float | None
    #: Euclidean distance in utility space to the Pareto frontier / the Nash point; None
    #: when the scenario leaves no surplus to split (no zone, or a zone of zero width).
    pareto_distance: float | None
    nash_distance: float | None
    rounds: int
    messages: int
    words: int
    wall_seconds: float
    scenario_id: str = ""
    protocol: str = ""
    seller_name: str = ""
    buyer_name: str = ""
    #: Whether the scenario had a zone of agreement (so no agreement was a missed deal).
    had_zopa: bool = True
    #: An agreement one side should not have accepted (below its reservation).
    irrational: bool = False


# -- the frontier ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Segment:
    """Points (x, level − x) for x in [x0, x1] in (seller, buyer) utility space."""

    level: float
    x0: float
    x1: float

    def distance(self, x: float, y: float) -> float:
        # Project onto the line x + y = level, then clamp to the segment.
        t = (x - y + self.level) / 2
        t = min(max(t, self.x0), self.x1)
        return math.hypot(x - t, y - (self.level - t))


def pareto_frontier(scenario: Scenario) -> tuple[_Segment, ...]:
    """The Pareto frontier of the agreements acceptable to both sides, in normalised-utility
    space, as segments from left (buyer best) to right (seller best). Empty when there is no
    surplus to split."""
    total = scenario.total_surplus
    room = scenario.buyer_reservation_cents - scenario.seller_reservation_cents
    if total <= 0 or room < 0:
        return ()
    # Cheaper bundles reach further right (the seller keeps more of the price) but lower.
    bundles = sorted(scenario.bundles().items(), reverse=True)  # most costly (highest level) first
    segments = []
    x0 = 0.0
    for cost, (gain, _) in bundles:
        x1 = (room - cost) / total
        if x1 < x0:
            continue
        segments.append(_Segment(level=(room + gain) / total, x0=x0, x1=x1))
        x0 = x1
    return tuple(segments)


def _pareto_distance(frontier: tuple[_Segment, ...], x: float, y: float) -> float:
    # Dominated by some frontier point? Only then is there a distance to close.
    dominated = any(
        seg.x0 <= max(x, seg.x0) <= seg.x1 and y <= seg.level - max(x, seg.x0) for seg in frontier
    )
    if not dominated:
        return 0.0
    return min(seg.distance(x, y) for seg in frontier)


def nash_point(scenario: Scenario) -> tuple[float, float] | None:
    """The Nash bargaining solution in utility space: the frontier point maximising
    u_s · u_b. None when there is no surplus to split."""
    return _nash_on(pareto_frontier(scenario))


def _nash_on(frontier: tuple[_Segment, ...]) -> tuple[float, float] | None:
    best: tuple[float, float, float] | None = None
    for seg in frontier:
        x = min(max(seg.level / 2, seg.x0), seg.x1)
        product = x * (seg.level - x)
        if best is None or product > best[0] + 1e-15:
            best = (product, x, seg.level - x)
    return None if best is None else (best[1], best[2])


# -- one negotiation ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ScenarioFacts:
    """What :func:`measure` needs of a scenario whatever the agreement: the most value any
    agreement can create, the Pareto frontier, the Nash point and whether there was a zone of
    agreement. A tournament plays each scenario once per strategy pair, so it computes these
    once per scenario (:func:`scenario_facts`) instead of once per negotiation."""

    total_surplus: int
    frontier: tuple[_Segment, ...]
    nash: tuple[float, float] | None
    has_zopa: bool


def scenario_facts(scenario: Scenario) -> ScenarioFacts:
    frontier = pareto_frontier(scenario)
    return ScenarioFacts(scenario.total_surplus, frontier, _nash_on(frontier), scenario.has_zopa)


def measure(record: NegotiationRecord, facts: ScenarioFacts | None = None) -> Metrics:
    """The metrics of one negotiation. ``facts``: :func:`scenario_facts` of its scenario, when
    the caller has them (the same numbers either way)."""
    scenario, terms = record.scenario, record.terms
    if facts is None:
        facts = scenario_facts(scenario)
    total = facts.total_surplus
    agreed = terms is not None
    u_s = u_b = 0.0  # Scenario.utility: no agreement, or no surplus to split
    seller_share = buyer_share = None
    cb_seller = cb_buyer = None
    irrational = False
    if terms is not None:
        s_surplus, b_surplus = scenario.seller_surplus(terms), scenario.buyer_surplus(terms)
        if total > 0:
            u_s, u_b = s_surplus / total, b_surplus / total
        created = s_surplus + b_surplus
        if created > 0:
            seller_share, buyer_share = s_surplus / created, b_surplus / created
        # acceptable_to_seller / acceptable_to_buyer
        irrational = not (s_surplus >= 0 and terms.price_cents <= scenario.buyer_reservation_cents)
        seller_target, buyer_target = scenario.list_price_cents, scenario.buyer_reservation_cents
        midpoint = (seller_target + buyer_target) / 2
        half_gap = abs(seller_target - midpoint)
        if half_gap > 0:
            # Positive is good for a side: a higher price for the seller, lower for the buyer
            # (even when the buyer's reservation is above list and the targets cross).
            cb_seller = (terms.price_cents - midpoint) / half_gap
            cb_buyer = -cb_seller
    frontier = facts.frontier
    pareto = nash = None
    if frontier:
        pareto = _pareto_distance(frontier, u_s, u_b)
        point = facts.nash
        assert point is not None
        nash = math.hypot(u_s - point[0], u_b - point[1])
    return Metrics(
        agreed=agreed,
        price_cents=terms.price_cents if terms is not None else None,
        seller_utility=u_s,
        buyer_utility=u_b,
        seller_share=seller_share,
        buyer_share=buyer_share,
        cb_margin_seller=cb_seller,
        cb_margin_buyer=cb_buyer,
        pareto_distance=pareto,
        nash_distance=nash,
        rounds=record.rounds,
        messages=record.messages,
        words=record.words,
        wall_seconds=record.wall_seconds,
        scenario_id=scenario.id,
        protocol=record.protocol,
        seller_name=record.seller_name,
        buyer_name=record.buyer_name,
        had_zopa=facts.has_zopa,
        irrational=irrational,
    )


# -- many negotiations ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Aggregate:
    count: int
    agreements: int
    agreement_rate: float
    #: Negotiations over a scenario with a zone of agreement that ended without one.
    missed_deals: int
    #: Agreements one side should not have accepted.
    irrational_agreements: int
    #: Over all negotiations (no agreement counts as 0: what walking away is worth).
    mean_seller_utility: float
    mean_buyer_utility: float
    #: Over agreements only (None when there were none).
    mean_seller_utility_agreed: float | None
    mean_buyer_utility_agreed: float | None
    mean_seller_share: float | None
    mean_buyer_share: float | None
    mean_cb_margin_seller: float | None
    mean_cb_margin_buyer: float | None
    #: Over negotiations where the distance is defined (no agreement counts from (0, 0)).
    mean_pareto_distance: float | None
    mean_nash_distance: float | None
    mean_rounds: float
    mean_messages: float
    mean_words: float
    mean_wall_seconds: float
    total_words: int
    total_wall_seconds: float


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.fmean(present) if present else None


def aggregate(metrics: Iterable[Metrics]) -> Aggregate:
    ms = list(metrics)
    n = len(ms)
    deals = [m for m in ms if m.agreed]

    def over_all(values: list[float]) -> float:
        return statistics.fmean(values) if values else 0.0

    return Aggregate(
        count=n,
        agreements=len(deals),
        agreement_rate=len(deals) / n if n else 0.0,
        missed_deals=sum(1 for m in ms if not m.agreed and m.had_zopa),
        irrational_agreements=sum(1 for m in deals if m.irrational),
        mean_seller_utility=over_all([m.seller_utility for m in ms]),
        mean_buyer_utility=over_all([m.buyer_utility for m in ms]),
        mean_seller_utility_agreed=_mean(m.seller_utility for m in deals),
        mean_buyer_utility_agreed=_mean(m.buyer_utility for m in deals),
        mean_seller_share=_mean(m.seller_share for m in deals),
        mean_buyer_share=_mean(m.buyer_share for m in deals),
        mean_cb_margin_seller=_mean(m.cb_margin_seller for m in deals),
        mean_cb_margin_buyer=_mean(m.cb_margin_buyer for m in deals),
        mean_pareto_distance=_mean(m.pareto_distance for m in ms),
        mean_nash_distance=_mean(m.nash_distance for m in ms),
        mean_rounds=over_all([float(m.rounds) for m in ms]),
        mean_messages=over_all([float(m.messages) for m in ms]),
        mean_words=over_all([float(m.words) for m in ms]),
        mean_wall_seconds=over_all([m.wall_seconds for m in ms]),
        total_words=sum(m.words for m in ms),
        total_wall_seconds=sum(m.wall_seconds for m in ms),
    )
