"""Structured alternating offers through the engine (haggler.lab.alternating)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haggler.agents.decider import ACCEPT, REJECT, DeciderView, Decision
from haggler.agents.strategies import Firm, Hardliner, NaiveAcceptFirst, TimeDependent
from haggler.engine import Terms
from haggler.lab.alternating import AlternatingResult, run_alternating
from haggler.lab.scenario import BUYER, SELLER, Extra, Scenario


def scenario(list_price: int = 100_000, floor: int = 60_000, budget: int = 80_000, rounds: int = 20,
             extras: tuple[Extra, ...] = ()) -> Scenario:
    return Scenario(id="t", list_price_cents=list_price, seller_reservation_cents=floor,
                    buyer_reservation_cents=budget, extras=extras, max_rounds=rounds)


class Spy:
    """Records the views it is shown; offers fixed prices (by round) or follows a script."""

    def __init__(self, name: str, decide) -> None:
        self.name = name
        self._decide = decide
        self.views: list[DeciderView] = []

    def decide(self, view: DeciderView) -> Decision:
        self.views.append(view)
        return self._decide(view)


def test_ends_by_timeout_after_two_turns_per_round_without_agreement():
    for rounds in (1, 5, 20):
        result = run_alternating(scenario(rounds=rounds), Hardliner(), Hardliner())
        assert result == AlternatingResult(agreed=False, terms=None, rounds=rounds, turns=2 * rounds,
                                           wall_seconds=result.wall_seconds, reason="timeout", by=None)
        assert result.wall_seconds >= 0


@pytest.mark.parametrize("first", [SELLER, BUYER])
def test_sides_alternate_and_see_their_own_and_the_others_offers(first):
    seller = Spy("s", lambda v: Terms(90_000 - v.round, "USD"))
    buyer = Spy("b", lambda v: Terms(50_000 + v.round, "USD"))
    result = run_alternating(scenario(rounds=4), seller, buyer, first=first)
    assert result.reason == "timeout" and result.turns == 8
    assert [v.round for v in seller.views] == [0, 1, 2, 3] == [v.round for v in buyer.views]
    last_seller, last_buyer = seller.views[-1], buyer.views[-1]
    assert last_seller.role == SELLER and last_buyer.role == BUYER
    assert [t.price_cents for t in last_seller.my_offers] == [90_000, 89_999, 89_998]
    assert [t.price_cents for t in last_buyer.my_offers] == [50_000, 50_001, 50_002]
    if first == SELLER:
        assert len(last_seller.their_offers) == 3 and len(last_buyer.their_offers) == 4
        assert buyer.views[0].their_offers == (Terms(90_000, "USD"),)
    else:
        assert len(last_seller.their_offers) == 4 and len(last_buyer.their_offers) == 3
        assert seller.views[0].their_offers == (Terms(50_000, "USD"),)
    assert last_seller.reservation_cents == 60_000 and last_buyer.reservation_cents == 80_000
    assert last_seller.max_rounds == 4 and last_seller.list_price_cents == 100_000


def test_views_value_extras_from_each_side():
    extras = (Extra("shipping", 1_000, 3_000), Extra("warranty", 2_000, 500))
    seller = Spy("s", lambda v: REJECT)
    run_alternating(scenario(extras=extras), seller, Hardliner())
    assert dict(seller.views[0].extras) == {"shipping": 1_000, "warranty": 2_000}
    buyer = Spy("b", lambda v: REJECT)
    run_alternating(scenario(extras=extras), Hardliner(), buyer)
    assert dict(buyer.views[0].extras) == {"shipping": 3_000, "warranty": 500}


def test_an_accept_closes_with_the_counterparts_last_offer():
    result = run_alternating(scenario(), Hardliner(), NaiveAcceptFirst())
    # the hardliner asks list price (above the budget); accept-first offers its reservation,
    # which the hardliner never takes: a timeout
    assert result.reason == "timeout"
    result = run_alternating(scenario(budget=100_000), Hardliner(), NaiveAcceptFirst())
    assert result == AlternatingResult(True, Terms(100_000, "USD"), 1, 2, result.wall_seconds, "agreed", BUYER)


def test_a_reject_ends_without_agreement():
    result = run_alternating(scenario(), TimeDependent(1.0), Spy("b", lambda v: REJECT))
    assert (result.agreed, result.terms, result.reason, result.by, result.turns) == (False, None, "rejected", BUYER, 2)


def test_the_guard_stops_an_accept_below_the_floor():
    # the seller accepts anything: the guard turns its accept of 50,000 (below its floor) into a reject
    seller = Spy("s", lambda v: ACCEPT if v.their_offers else Terms(99_000, "USD"))
    result = run_alternating(scenario(), seller, TimeDependent(1.0))
    assert (result.agreed, result.reason, result.by) == (False, "rejected", SELLER)


def test_the_guard_clamps_a_crazy_offer_before_the_other_side_can_take_it():
    seller = Spy("s", lambda v: Terms(-5, "EUR", ("yacht",)))
    result = run_alternating(scenario(), seller, NaiveAcceptFirst())
    assert result.agreed and result.terms == Terms(60_000, "USD")


def test_an_accept_of_nothing_is_a_reject():
    result = run_alternating(scenario(), Spy("s", lambda v: ACCEPT), Hardliner())
    assert (result.reason, result.turns, result.by) == ("rejected", 1, SELLER)


def test_first_must_be_a_side():
    with pytest.raises(ValueError):
        run_alternating(scenario(), Hardliner(), Hardliner(), first="merchant")


def test_runs_are_deterministic():
    a = run_alternating(scenario(), TimeDependent(0.2), TimeDependent(5.0))
    b = run_alternating(scenario(), TimeDependent(0.2), TimeDependent(5.0))
    assert (a.agreed, a.terms, a.turns) == (b.agreed, b.terms, b.turns)
    assert a.agreed and a.turns > 10  # Boulware against a conceder: many rounds


@settings(max_examples=200, deadline=None)
@given(st.integers(100, 10**7), st.floats(0.05, 1.0), st.floats(0.0, 2.0), st.integers(1, 30),
       st.sampled_from([0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]), st.sampled_from([0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0]),
       st.sampled_from([SELLER, BUYER]))
def test_agreements_are_within_both_reservations(list_price, floor_share, budget_share, rounds, e_seller, e_buyer,
                                                 first):
    floor = max(1, int(list_price * floor_share))
    budget = max(1, int(list_price * budget_share))
    s = scenario(list_price, floor, budget, rounds)
    result = run_alternating(s, TimeDependent(e_seller), TimeDependent(e_buyer), first=first)
    assert 1 <= result.turns <= 2 * rounds and result.rounds == (result.turns + 1) // 2
    if result.agreed:
        assert result.terms is not None and result.reason == "agreed"
        assert floor <= result.terms.price_cents <= budget
        assert s.acceptable_to_seller(result.terms) and s.acceptable_to_buyer(result.terms)
    else:
        assert result.terms is None
        assert result.reason == "timeout"
    if budget >= floor:
        # time-dependent sides both reach their reservations by the last round: a ZOPA is found
        assert result.agreed
    else:
        assert not result.agreed


def test_plain_offers_past_the_reservation_are_clamped_on_both_sides():
    # Plain single-issue offers take the loop's fast path; past the reservation they must not.
    seller = Spy("s", lambda v: Terms(1, "USD"))
    buyer = Spy("b", lambda v: Terms(10**12, "USD"))
    result = run_alternating(scenario(rounds=2), seller, buyer)
    assert not result.agreed and result.reason == "timeout"
    assert {t.price_cents for t in buyer.views[-1].their_offers} == {60_000}
    assert {t.price_cents for t in seller.views[-1].their_offers} == {scenario().buyer_reservation_cents}


# -- price plans (PricePlanner): the fast path of time-dependent deciders ---------------------------


class Unplanned:
    """A decider's decide without its price plan: the loop asks it through a view every turn."""

    def __init__(self, decider) -> None:
        self.name = decider.name
        self.decide = decider.decide


def _outcome(result: AlternatingResult) -> tuple:
    return (result.agreed, result.terms, result.rounds, result.turns, result.reason, result.by)


@settings(max_examples=200, deadline=None)
@given(st.integers(100, 10**7), st.floats(0.05, 1.0), st.floats(0.0, 2.0), st.integers(1, 30),
       st.sampled_from([0.1, 0.2, 1.0, 5.0]), st.sampled_from([0.1, 1.0, 5.0, 10.0]),
       st.sampled_from([SELLER, BUYER]), st.booleans())
def test_a_price_plan_plays_exactly_as_decide(list_price, floor_share, budget_share, rounds, e_seller, e_buyer,
                                              first, extras):
    # The same negotiation with the plans used and with every move asked of decide: the same
    # outcome, including when the counterpart offers extras (then the planned side is asked).
    s = scenario(list_price, max(1, int(list_price * floor_share)), max(1, int(list_price * budget_share)), rounds,
                 (Extra("shipping", 500, 2_000),) if extras else ())
    with_extras = Spy("b", lambda v: Terms(v.reservation_cents // 2, "USD", ("shipping",)))
    for seller, buyer in ((TimeDependent(e_seller), TimeDependent(e_buyer)), (TimeDependent(e_seller), with_extras),
                          (Hardliner(), TimeDependent(e_buyer))):
        planned = run_alternating(s, seller, buyer, first=first)
        asked = run_alternating(s, Unplanned(seller), Unplanned(buyer), first=first)
        assert _outcome(planned) == _outcome(asked)


def test_the_plan_is_the_price_decide_offers_each_round():
    for e in (0.2, 1.0, 5.0):
        for role, reservation in ((SELLER, 60_000), (BUYER, 80_000)):
            decider = TimeDependent(e)
            plan = decider.price_plan(role, reservation, 100_000, 20)
            assert plan is not None and len(plan) == 20
            views = [DeciderView(role, reservation, 100_000, r, 20) for r in range(20)]
            assert list(plan) == [TimeDependent(e).decide(v).price_cents for v in views]


def test_a_subclass_that_decides_otherwise_has_no_plan():
    assert Firm().price_plan(SELLER, 60_000, 100_000, 20) is None
    assert TimeDependent(1.0).price_plan(SELLER, 60_000, 100_000, 2.5) is None  # rounds not whole


class CrossingPlan:
    """A planner whose plan and decide both ask far below the seller's floor."""

    name = "crossing"

    def __init__(self) -> None:
        self.views: list[DeciderView] = []

    def price_plan(self, role, reservation_cents, list_price_cents, max_rounds):
        return (1,) * max_rounds

    def decide(self, view: DeciderView) -> Decision:
        self.views.append(view)
        return Terms(1, view.currency)


def test_a_planned_price_past_the_reservation_goes_through_decide_and_guard():
    seller = CrossingPlan()
    result = run_alternating(scenario(rounds=3), seller, NaiveAcceptFirst())
    assert result.agreed and result.terms == Terms(60_000, "USD")  # clamped to the floor
    assert len(seller.views) == 1  # asked through a view, not taken from the plan


def test_a_view_after_planned_turns_carries_every_offer_so_far():
    # Both sides plan, so the loop keeps no histories until the seller's plan crosses its floor
    # in round 2: the view it then gets holds every offer made, read back from the engine.
    class PlanThenAsk(CrossingPlan):
        def price_plan(self, role, reservation_cents, list_price_cents, max_rounds):
            return (90_000, 89_000) + (1,) * (max_rounds - 2)

    seller, buyer = PlanThenAsk(), TimeDependent(1.0)
    result = run_alternating(scenario(rounds=4), seller, buyer)
    bids = TimeDependent(1.0).price_plan(BUYER, 80_000, 100_000, 4)
    assert seller.views[0].round == 2
    assert seller.views[0].my_offers == (Terms(90_000, "USD"), Terms(89_000, "USD"))
    assert seller.views[0].their_offers == (Terms(bids[0], "USD"), Terms(bids[1], "USD"))
    # decide's offer of 1 is clamped to the floor, which the buyer takes
    assert len(seller.views) == 1 and result.agreed and result.terms == Terms(60_000, "USD")


def test_a_plan_without_a_price_for_every_round_is_not_used():
    class ShortPlan(CrossingPlan):
        def price_plan(self, role, reservation_cents, list_price_cents, max_rounds):
            return (90_000,)

    seller = ShortPlan()
    run_alternating(scenario(rounds=3), seller, Hardliner())
    assert [v.round for v in seller.views] == [0, 1, 2]  # asked through a view every turn
