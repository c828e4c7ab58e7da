"""The pure part of the ANAC benchmark's NegMAS bridge (``benchmarks/negmas_bridge.py``) and its
tournament plan (``benchmarks/anac.py``): axes, opponent model, price domains, metric helpers.

The benchmark itself needs the optional, AGPL ``anac`` extra (NegMAS); none of this does.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from haggler.agents.decider import BUYER, SELLER, DeciderView, acceptable
from haggler.engine import Terms
from haggler.lab.generate import single_issue

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
try:
    import anac
    import negmas_bridge as nb
finally:
    sys.path.remove(str(BENCHMARKS))


def test_the_bridge_and_the_benchmark_plan_import_without_negmas():
    source = (BENCHMARKS / "negmas_bridge.py").read_text() + (BENCHMARKS / "anac.py").read_text()
    for line in source.splitlines():
        if line.startswith(("import negmas", "from negmas ")):
            pytest.fail(f"a module-level NegMAS import: {line}")


# -- the price axis --------------------------------------------------------------------------------


def test_price_axis_rounds_offers_to_whole_dollars_towards_its_side_within_the_range():
    seller = nb.PriceAxis(SELLER, reservation_cents=50_50, list_price_cents=100_00, lo=30, hi=100)
    assert seller.outcome_for(70_01) == ((71,), 71_00)
    assert seller.outcome_for(40_00) == ((51,), 51_00)      # never below the floor
    assert seller.outcome_for(120_00) == ((100,), 100_00)   # never above the range
    buyer = nb.PriceAxis(BUYER, reservation_cents=80_99, list_price_cents=100_00, lo=30, hi=100)
    assert buyer.outcome_for(70_99) == ((70,), 70_00)
    assert buyer.outcome_for(95_00) == ((80,), 80_00)       # never above the budget
    assert buyer.outcome_for(10_00) == ((30,), 30_00)
    assert buyer.price_of((42,)) == 42_00


def test_price_domain_utilities_and_reserved_values():
    scenario = single_issue(1, seed=3, zopa=True)[0]
    domain = nb.PriceDomain.of(scenario)
    assert domain.hi == math.ceil(scenario.list_price_cents / 100)
    assert domain.seller_utility(domain.hi) == 1 and domain.seller_utility(domain.lo) == 0
    assert domain.buyer_utility(domain.lo) == 1 and domain.buyer_utility(domain.hi) == 0
    assert domain.seller_reserved_value == pytest.approx(
        (scenario.seller_reservation_cents / 100 - domain.lo) / (domain.hi - domain.lo))
    axis = domain.axis(BUYER)
    assert axis.reservation_cents == scenario.buyer_reservation_cents and axis.role == BUYER


# -- the utility axis --------------------------------------------------------------------------------

#: Two issues; own utility = a/4 * 0.5 + b/4 * 0.5 with a, b in 0..4 (ties everywhere).
OUTCOMES = [(a, b) for a in range(5) for b in range(5)]
UTILITIES = [a / 8 + b / 8 for a, b in OUTCOMES]


def table() -> nb.UtilityTable:
    return nb.UtilityTable(OUTCOMES, UTILITIES)


@pytest.mark.parametrize("role", [SELLER, BUYER])
def test_utility_axis_maps_own_utility_to_a_price_and_back(role):
    axis = nb.UtilityAxis(role, table(), reserved_value=0.25)
    L = nb.VIRTUAL_LIST_CENTS
    assert axis.list_price_cents == L
    best, worst = axis.price_of((4, 4)), axis.price_of((0, 0))
    if role == SELLER:
        assert (best, worst) == (L, 0) and axis.reservation_cents == L // 4
    else:
        assert (best, worst) == (L // 2, L) and axis.reservation_cents == math.floor(L * (1 - 0.25 / 2))
    for price in (best, axis.reservation_cents, (best + worst) // 2):
        assert axis.utility_of_price(price) == pytest.approx(axis.utility_of(axis.outcome_for(price)[0]), abs=0.13)


@pytest.mark.parametrize("role", [SELLER, BUYER])
def test_a_price_acceptable_to_the_guard_is_an_outcome_worth_the_reserved_value(role):
    axis = nb.UtilityAxis(role, table(), reserved_value=0.5)
    view = DeciderView(role, axis.reservation_cents, axis.list_price_cents, 0, 10)
    for outcome, u in zip(OUTCOMES, UTILITIES):
        assert acceptable(view, Terms(axis.price_of(outcome), "USD")) == (u >= 0.5), outcome


@pytest.mark.parametrize("role", [SELLER, BUYER])
def test_utility_axis_offers_at_or_just_above_the_target_and_best_for_the_opponent(role):
    axis = nb.UtilityAxis(role, table(), reserved_value=0.0, band=0.0)
    target_u = 0.5
    price = axis.price_of_utility(target_u)
    outcome, offered = axis.outcome_for(price)
    assert axis.utility_of(outcome) == pytest.approx(0.5)
    # The counterpart keeps asking for a = 0: among own utility 0.5, (0, 4) is best for it.
    for b in (1, 2, 3):
        axis.observe((0, b))
    outcome, offered = axis.outcome_for(price)
    assert outcome == (0, 4) and offered == axis.price_of((0, 4))
    # A target between levels rounds up to the next level, never below.
    outcome, _ = axis.outcome_for(axis.price_of_utility(0.55))
    assert axis.utility_of(outcome) == pytest.approx(0.625)
    # Above the best outcome: the best outcome.
    assert axis.outcome_for(axis.price_of_utility(1.0) + (1 if role == SELLER else -1))[0] == (4, 4)


def test_the_band_lets_the_axis_trade_a_little_own_utility_for_the_opponent():
    axis = nb.UtilityAxis(SELLER, table(), reserved_value=0.0, band=0.13)
    axis.observe((0, 0))
    axis.observe((0, 0))
    outcome, _ = axis.outcome_for(axis.price_of_utility(0.25))
    # Own utility 0.25 or 0.375; the opponent wants a = 0, b = 0 (b stayed too): (0, 2) is at 0.25.
    assert outcome == (0, 2)


def test_frequency_model_scores_often_offered_values_and_stable_issues():
    model = nb.FrequencyModel(2)
    assert model.score(("x", 1)) == 0.0
    for outcome in (("x", 1), ("x", 2), ("x", 3)):
        model.update(outcome)
    assert model.weights == [3.0, 1.0]
    assert model.score(("x", 9)) == pytest.approx(3 / 4)
    assert model.score(("y", 1)) == pytest.approx(1 / 4)
    assert model.score(("x", 1)) == 1.0


# -- metrics ---------------------------------------------------------------------------------------


def test_pareto_points_and_nash_points():
    points = [(1.0, 0.0), (0.5, 0.5), (0.4, 0.4), (0.0, 1.0), (0.5, 0.5), (0.2, 0.9)]
    assert nb.pareto_points(points) == [(1.0, 0.0), (0.5, 0.5), (0.2, 0.9), (0.0, 1.0)]
    assert nb.nash_points(points, (0.0, 0.0)) == [(0.5, 0.5)]
    assert nb.nash_points(points, (0.3, 0.0)) == [(0.5, 0.5)]
    assert nb.nash_points(points, (0.0, 0.6)) == [(0.2, 0.9)]
    assert nb.nash_points(points, (0.6, 0.6)) == []      # no zone of agreement
    assert nb.nearest_distance((0.4, 0.4), nb.pareto_points(points)) == pytest.approx(math.hypot(0.1, 0.1))
    assert nb.nearest_distance((0.4, 0.4), []) is None


# -- the tournament plan -----------------------------------------------------------------------------


def test_the_plan_is_a_round_robin_in_both_roles_and_single_seat_agents_keep_their_seat():
    agents = ["store-merchant", "default-shopper", "boulware", "HardHeaded"]
    tasks = anac.build_tasks(agents, ["y2010/ItexvsCypress"], reps=2, zopa=1, nozopa=1)
    on_anac = [(t.first, t.second) for t in tasks if t.kind == "anac" and t.rep == 0]
    assert sorted(on_anac) == sorted((a, b) for a in agents for b in agents if a != b)
    price = [(t.first, t.second) for t in tasks if t.kind == "price" and t.rep == 0]
    assert ("default-shopper", "boulware") not in price and ("boulware", "store-merchant") not in price
    assert ("store-merchant", "default-shopper") in price and ("boulware", "HardHeaded") in price
    assert len(price) == 2 * (3 * 3 - 2)   # sellers x buyers minus self-play, two price domains
    assert {t.domain for t in tasks if t.kind == "price"} == {"zopa-0000", "nozopa-0000", "zopa-0001",
                                                              "nozopa-0001"}
    assert [t.index for t in tasks] == list(range(len(tasks)))
    assert anac.orientation("boulware", 0) == SELLER and anac.orientation("boulware", 1) == BUYER
    assert anac.orientation("store-merchant", 1) == SELLER and anac.orientation("default-shopper", 0) == BUYER


def test_the_default_field_meets_the_issue():
    assert len(anac.ANAC_AGENTS) >= 10 and len(anac.DEFAULT_DOMAINS) >= 8
    assert {"store-merchant", "default-shopper"} <= set(anac.HAGGLER_AGENTS)
    assert set(anac.HAGGLER_AGENTS) <= set(anac.STRATEGIES)
