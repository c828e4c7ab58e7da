"""haggler's strategies inside NegMAS's SAO mechanism: the one adapter the benchmarks share.

NegMAS (and the ANAC agents of ``negmas-genius-agents``) are AGPL-3.0: an optional, benchmark-only
extra (``pip install -e '.[anac]'``). Nothing under ``src/`` imports them, and this module imports
NegMAS only inside the functions that need it, so its pure part — the price and utility axes, the
frequency opponent model, the generated price domains and the metric helpers — loads (and is
tested) without NegMAS. ``benchmarks/strategy_quality.py`` and ``benchmarks/anac.py`` use it.

The adapter
-----------

:func:`haggler_negotiator` wraps a haggler :class:`~haggler.agents.decider.Decider` (the strategy
unchanged) in a NegMAS ``SAONegotiator``. On every move it builds a
:class:`~haggler.agents.decider.DeciderView` from the offers so far (its own and the
counterpart's, as prices), asks the strategy, passes the decision through
:func:`~haggler.agents.decider.guard` and maps it back: ACCEPT → ``ACCEPT_OFFER``, REJECT →
``END_NEGOTIATION``, offered terms → ``REJECT_OFFER`` and, when asked to propose, an outcome.
The view's round is the number of offers this side has made, ``max_rounds`` the deadline in
offers per side. Strategies see prices, NegMAS deals in outcomes; an *axis* translates:

* :class:`PriceAxis` — a single-issue price domain whose outcomes are ``(whole dollars,)``: an
  outcome is its price; an offered price is rounded to whole dollars towards the offering side
  (never past its reservation) and kept inside the outcome range.
* :class:`UtilityAxis` — any domain (ANAC's multi-issue ones): haggler's strategies are price
  strategies, so the domain is mapped onto a *virtual price axis* through the haggler side's own
  normalised utility ``u`` in [0, 1] (1 its best outcome), with a list price ``L``
  (:data:`VIRTUAL_LIST_CENTS`):

  - seller orientation: ``price = u * L`` — its opening (the list price) is its best outcome, and
    its reservation price is ``reserved_value * L``;
  - buyer orientation, likewise inverted: ``price = L * (1 - u / 2)`` — utility 1 is half the list
    price, the buyer's usual opening anchor, utility 0 the list price, and its budget is
    ``L * (1 - reserved_value / 2)`` (so an anchor at 80% of a high budget, below half list, maps
    to its best outcome too).

  The counterpart's offers become the prices of their utility for this side (rounded against
  this side, so it never overrates an offer, and :func:`guard`'s reservation check on prices is
  a check that the outcome is worth at least the reserved value). An offered price becomes a
  target utility; the outcome proposed is one *at or just above* it: among the outcomes whose own
  utility lies in ``[u*, u* + band]``, ``u*`` the lowest own utility at or above the target, the
  one the :class:`FrequencyModel` of the counterpart's offers rates best for the counterpart (ties:
  the one closest to the target). Conceding to a utility level thus walks along this side's
  iso-utility band towards the counterpart, which is what keeps a price strategy near the Pareto
  frontier on a multi-issue domain. The view records the price of the outcome actually proposed.

Metrics
-------

:func:`nearest_distance` measures the Euclidean distance in utility space from the outcome
reached (the reservation point on disagreement) to the nearest point of a set: the Pareto
frontier (:func:`pareto_points`: the non-dominated outcomes) or the Nash points
(:func:`nash_points`: the rational outcomes maximising the product of the advantages over the
reserved values — reserved values as this benchmark defines them, so a negative one, a buyer's
budget above list price, counts as it is, where NegMAS's ``nash_points`` would treat it as 0).
"""

from __future__ import annotations

import bisect
import math
import os
import sys
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from haggler.agents.decider import ACCEPT, BUYER, REJECT, SELLER, Decider, DeciderView, guard
from haggler.engine import Terms
from haggler.lab.scenario import Scenario

__all__ = [
    "BAND", "VIRTUAL_LIST_CENTS", "FrequencyModel", "PriceAxis", "PriceDomain", "UtilityAxis", "UtilityTable",
    "haggler_negotiator", "import_negmas", "nash_points", "nearest_distance", "pareto_points", "price_ufuns",
]

#: The virtual list price of a utility axis: $1,000.00, so one cent is 1e-5 of utility.
VIRTUAL_LIST_CENTS = 1_000_00
#: How far above the target own utility a utility axis looks for outcomes better for the counterpart.
BAND = 0.02


def import_negmas() -> Any | None:
    """The ``negmas`` module, or None when it is not importable (it is an optional extra).
    ``HAGGLER_NEGMAS_PATH``, when set, is put first on ``sys.path`` (e.g. a ``pip install --target``
    directory). NegMAS's warnings are silenced."""
    path = os.environ.get("HAGGLER_NEGMAS_PATH")
    if path and path not in sys.path:
        sys.path.insert(0, path)
    try:
        import negmas
        import negmas.sao  # noqa: F401
    except Exception:  # noqa: BLE001 - any import problem means "not available"
        return None
    import warnings

    warnings.filterwarnings("ignore")
    return negmas


# -- axes: outcomes <-> prices ---------------------------------------------------------------------


class PriceAxis:
    """A single-issue price domain for one side: outcomes are ``(dollars,)`` from ``lo`` to ``hi``."""

    def __init__(self, role: str, reservation_cents: int, list_price_cents: int, lo: int, hi: int) -> None:
        self.role, self.reservation_cents, self.list_price_cents = role, reservation_cents, list_price_cents
        self.lo, self.hi = lo, hi

    def price_of(self, outcome: Sequence[Any]) -> int:
        return int(outcome[0]) * 100

    def observe(self, outcome: Sequence[Any]) -> None:
        """The counterpart offered ``outcome`` (a price axis learns nothing from it)."""

    def outcome_for(self, price_cents: int) -> tuple[tuple[int], int]:
        """The outcome offered for ``price_cents`` and its price: whole dollars, rounded towards
        this side and never past its reservation, within the outcome range."""
        if self.role == SELLER:
            dollars = max(math.ceil(price_cents / 100), math.ceil(self.reservation_cents / 100))
        else:
            dollars = min(price_cents // 100, self.reservation_cents // 100)
        dollars = min(max(dollars, self.lo), self.hi)
        return (dollars,), dollars * 100


class FrequencyModel:
    """A frequency model of the counterpart's preferences from its offers (as in HardHeaded and
    most ANAC agents): a value scores how often the counterpart offered it, relative to the most
    offered value of its issue; an issue weighs more the more often the counterpart kept its value
    from one offer to the next (each issue starts at weight 1). ``score`` is the weighted mean of
    the value scores, in [0, 1]; 0 for everything before the first offer."""

    def __init__(self, n_issues: int) -> None:
        self.counts: list[dict[Hashable, int]] = [{} for _ in range(n_issues)]
        self.weights = [1.0] * n_issues
        self._last: Sequence[Any] | None = None

    def update(self, outcome: Sequence[Any]) -> None:
        last = self._last
        for i, value in enumerate(outcome):
            counts = self.counts[i]
            counts[value] = counts.get(value, 0) + 1
            if last is not None and last[i] == value:
                self.weights[i] += 1.0
        self._last = tuple(outcome)

    def score(self, outcome: Sequence[Any]) -> float:
        if self._last is None:
            return 0.0
        total = weighted = 0.0
        for i, value in enumerate(outcome):
            counts = self.counts[i]
            weight = self.weights[i]
            total += weight
            if counts:
                weighted += weight * counts.get(value, 0) / max(counts.values())
        return weighted / total if total else 0.0


class UtilityTable:
    """Every outcome of a domain with one side's utility for it, sorted by that utility (shared,
    read-only, by all the negotiations of that side of that domain)."""

    def __init__(self, outcomes: Sequence[tuple], utilities: Sequence[float]) -> None:
        order = sorted(range(len(outcomes)), key=lambda i: (utilities[i], i))
        self.outcomes = [tuple(outcomes[i]) for i in order]
        self.utilities = [float(utilities[i]) for i in order]
        self.by_outcome = dict(zip(self.outcomes, self.utilities))
        if not self.outcomes:
            raise ValueError("a utility table needs at least one outcome")


class UtilityAxis:
    """Any domain for one side, on the virtual price axis of its own utility (see the module
    docstring): seller orientation ``price = u * L``, buyer orientation ``price = L * (1 - u/2)``."""

    def __init__(self, role: str, table: UtilityTable, reserved_value: float, *,
                 list_price_cents: int = VIRTUAL_LIST_CENTS, band: float = BAND,
                 utility: Callable[[Sequence[Any]], float] | None = None) -> None:
        if role not in (SELLER, BUYER):
            raise ValueError(f"role must be {SELLER!r} or {BUYER!r}")
        self.role, self.table, self.band = role, table, band
        self.list_price_cents = list_price_cents
        self.reserved_value = reserved_value
        #: Utility of an outcome the table does not list (e.g. another type of the same values).
        self._utility = utility
        n_issues = len(table.outcomes[0])
        self.model = FrequencyModel(n_issues)
        rv = min(max(reserved_value, 0.0), 1.0)
        L = list_price_cents
        # Rounded so that a price at least as good as the reservation means u >= reserved value.
        self.reservation_cents = math.ceil(rv * L) if role == SELLER else math.floor(L * (1 - rv / 2))

    def utility_of(self, outcome: Sequence[Any]) -> float:
        u = self.table.by_outcome.get(tuple(outcome))
        if u is None:
            if self._utility is None:
                raise KeyError(f"outcome {outcome!r} is not in the domain")
            u = float(self._utility(outcome))
        return u

    def price_of_utility(self, u: float) -> int:
        """The price of own utility ``u``, rounded against this side."""
        L = self.list_price_cents
        if self.role == SELLER:
            return math.floor(u * L + 1e-9)
        return math.ceil(L * (1 - u / 2) - 1e-9)

    def utility_of_price(self, price_cents: int) -> float:
        L = self.list_price_cents
        return price_cents / L if self.role == SELLER else 2 * (1 - price_cents / L)

    def price_of(self, outcome: Sequence[Any]) -> int:
        return self.price_of_utility(self.utility_of(outcome))

    def observe(self, outcome: Sequence[Any]) -> None:
        self.model.update(outcome)

    def outcome_for(self, price_cents: int) -> tuple[tuple, int]:
        """The outcome proposed for ``price_cents``: at or just above its own utility, the best
        for the counterpart under the frequency model; and that outcome's price."""
        table = self.table
        utilities = table.utilities
        target = min(self.utility_of_price(price_cents), utilities[-1])
        start = bisect.bisect_left(utilities, target - 1e-12)
        floor_u = utilities[start]
        stop = bisect.bisect_right(utilities, floor_u + self.band + 1e-12)
        score = self.model.score
        best = max(range(start, stop), key=lambda i: (score(table.outcomes[i]), -i))
        return table.outcomes[best], self.price_of_utility(utilities[best])


Axis = PriceAxis | UtilityAxis


# -- generated price domains ----------------------------------------------------------------------


@dataclass(frozen=True)
class PriceDomain:
    """A single-issue price domain from a haggler :class:`~haggler.lab.scenario.Scenario`:
    outcomes are whole dollars from 30% of list price up to list price (like haggler's sellers, a
    seller never asks more than list, and the space tells neither side the other's reservation);
    the seller's utility rises linearly from 0 at ``lo`` to 1 at ``hi``, the buyer's falls likewise;
    reserved values are the utilities of the seller's floor and the buyer's budget (a budget above
    list gives the buyer a negative reserved value: every outcome beats walking away)."""

    scenario: Scenario
    lo: int
    hi: int

    @classmethod
    def of(cls, scenario: Scenario) -> PriceDomain:
        lo = max(1, int(scenario.list_price_cents * 0.3) // 100)
        hi = math.ceil(max(scenario.list_price_cents, scenario.seller_reservation_cents) / 100)
        return cls(scenario, lo, hi)

    @property
    def span(self) -> float:
        return float(self.hi - self.lo) or 1.0

    def seller_utility(self, dollars: float) -> float:
        return (dollars - self.lo) / self.span

    def buyer_utility(self, dollars: float) -> float:
        return (self.hi - dollars) / self.span

    @property
    def seller_reserved_value(self) -> float:
        return self.seller_utility(self.scenario.seller_reservation_cents / 100)

    @property
    def buyer_reserved_value(self) -> float:
        return self.buyer_utility(self.scenario.buyer_reservation_cents / 100)

    def axis(self, role: str) -> PriceAxis:
        s = self.scenario
        reservation = s.seller_reservation_cents if role == SELLER else s.buyer_reservation_cents
        return PriceAxis(role, reservation, s.list_price_cents, self.lo, self.hi)


def pareto_points(points: Sequence[Sequence[float]]) -> list[tuple[float, float]]:
    """The Pareto frontier of a two-party domain: the utility pairs no other pair dominates (at
    least as good for both, better for one), each once, by the first party's utility, descending."""
    frontier: list[tuple[float, float]] = []
    best_second = -math.inf
    for a, b in sorted({(float(a), float(b)) for a, b in points}, key=lambda p: (-p[0], -p[1])):
        if b > best_second:
            frontier.append((a, b))
            best_second = b
    return frontier


def nash_points(points: Sequence[Sequence[float]], reserved: Sequence[float]) -> list[tuple[float, float]]:
    """The Nash points: the utility pairs, among those at least as good as walking away for both
    sides, with the largest product of the two advantages over the reserved values (empty when no
    outcome is acceptable to both: no zone of agreement)."""
    r0, r1 = reserved
    rational = [(float(a), float(b)) for a, b in points if a >= r0 and b >= r1]
    if not rational:
        return []
    best = max((a - r0) * (b - r1) for a, b in rational)
    return sorted({p for p in rational if (p[0] - r0) * (p[1] - r1) >= best - 1e-12})


def nearest_distance(point: Sequence[float], points: Sequence[Sequence[float]]) -> float | None:
    """The Euclidean distance from ``point`` to the nearest of ``points`` (None when there are none)."""
    if not points:
        return None
    return min(math.dist(point, p) for p in points)


# -- NegMAS ---------------------------------------------------------------------------------------


def price_ufuns(domain: PriceDomain) -> tuple[list, Any, Any]:
    """NegMAS issues and the seller's and buyer's linear utility functions of a price domain."""
    from negmas import make_issue
    from negmas.preferences import LinearAdditiveUtilityFunction as LUFun

    lo, hi, span = domain.lo, domain.hi, domain.span
    issues = [make_issue(values=(lo, hi), name="price")]
    seller = LUFun(values={"price": lambda x: (x - lo) / span}, weights={"price": 1.0}, issues=issues,
                   reserved_value=domain.seller_reserved_value)
    buyer = LUFun(values={"price": lambda x: (hi - x) / span}, weights={"price": 1.0}, issues=issues,
                  reserved_value=domain.buyer_reserved_value)
    return issues, seller, buyer


_NEGOTIATOR_CLASS: type | None = None


def _negotiator_class() -> type:
    global _NEGOTIATOR_CLASS
    if _NEGOTIATOR_CLASS is not None:
        return _NEGOTIATOR_CLASS
    from negmas.sao import ResponseType, SAONegotiator

    class HagglerNegotiator(SAONegotiator):
        """A haggler decider behind NegMAS's SAO interface, through an axis (module docstring)."""

        def __init__(self, decider: Decider, axis: Axis, max_rounds: int, currency: str = "USD", **kwargs) -> None:
            super().__init__(**kwargs)
            self._h_decider, self._h_axis = decider, axis
            self._h_max_rounds, self._h_currency = max_rounds, currency
            self._h_mine: list[Terms] = []
            self._h_theirs: list[Terms] = []
            self._h_pending: Terms | None = None

        def _decide(self):
            axis = self._h_axis
            view = DeciderView(axis.role, axis.reservation_cents, axis.list_price_cents, len(self._h_mine),
                               self._h_max_rounds, tuple(self._h_mine), tuple(self._h_theirs), {}, self._h_currency)
            return guard(self._h_decider.decide(view), view)

        def respond(self, state, source=None):
            offer = state.current_offer
            if offer is None:
                return ResponseType.REJECT_OFFER
            self._h_theirs.append(Terms(self._h_axis.price_of(offer), self._h_currency))
            self._h_axis.observe(offer)
            decision = self._decide()
            if decision is ACCEPT:
                return ResponseType.ACCEPT_OFFER
            if decision is REJECT:
                return ResponseType.END_NEGOTIATION
            self._h_pending = decision
            return ResponseType.REJECT_OFFER

        def propose(self, state, dest=None):
            terms, self._h_pending = self._h_pending, None
            if terms is None:
                decision = self._decide()
                if not isinstance(decision, Terms):
                    return None
                terms = decision
            outcome, price = self._h_axis.outcome_for(terms.price_cents)
            self._h_mine.append(Terms(price, self._h_currency))
            return outcome

    _NEGOTIATOR_CLASS = HagglerNegotiator
    return HagglerNegotiator


def haggler_negotiator(decider: Decider, axis: Axis, max_rounds: int, *, currency: str = "USD", **kwargs) -> Any:
    """A NegMAS ``SAONegotiator`` playing ``decider`` through ``axis``; ``max_rounds`` is the
    deadline in offers of this side (the view's clock); ``kwargs`` go to ``SAONegotiator``
    (``name``, ...)."""
    return _negotiator_class()(decider, axis, max_rounds, currency, **kwargs)
