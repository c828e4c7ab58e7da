"""Negotiation metrics: hand-computed examples, the frontier, aggregation, properties."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from haggler.engine import Terms
from haggler.lab.generate import mixed_set
from haggler.lab.metrics import (
    Metrics,
    NegotiationRecord,
    aggregate,
    measure,
    nash_point,
    pareto_frontier,
    word_count,
)
from haggler.lab.scenario import BUYER, SELLER, Extra, Scenario

R2 = math.sqrt(2)

SINGLE = Scenario("one", list_price_cents=120_00, seller_reservation_cents=100_00, buyer_reservation_cents=110_00)
EXTRAS = Scenario(
    "two", 120_00, 100_00, 110_00,
    extras=(Extra("shipping", cost_cents=2_00, value_cents=6_00), Extra("junk", cost_cents=3_00, value_cents=1_00)),
)


def m(scenario, price=None, extras=(), **kw) -> Metrics:
    terms = None if price is None else Terms(price, scenario.currency, tuple(extras))
    return measure(NegotiationRecord(scenario, terms, **kw))


def test_midpoint_single_issue_deal():
    r = m(SINGLE, 105_00, rounds=4, messages=8, words=57, wall_seconds=1.5, protocol="nv1",
          seller_name="tough", buyer_name="soft")
    assert r.agreed and r.price_cents == 105_00
    assert r.seller_utility == pytest.approx(0.5) and r.buyer_utility == pytest.approx(0.5)
    assert r.seller_share == pytest.approx(0.5) and r.buyer_share == pytest.approx(0.5)
    assert r.pareto_distance == pytest.approx(0) and r.nash_distance == pytest.approx(0)
    # CraigslistBargain: targets 120 (list) and 110 (buyer), midpoint 115, half gap 5.
    assert r.cb_margin_seller == pytest.approx(-2.0) and r.cb_margin_buyer == pytest.approx(2.0)
    assert (r.rounds, r.messages, r.words, r.wall_seconds) == (4, 8, 57, 1.5)
    assert (r.scenario_id, r.protocol, r.seller_name, r.buyer_name) == ("one", "nv1", "tough", "soft")
    assert not r.irrational


def test_single_issue_share_formula():
    r = m(SINGLE, 108_00)
    assert r.seller_share == pytest.approx((108_00 - 100_00) / (110_00 - 100_00))
    assert r.buyer_share == pytest.approx(0.2)
    assert r.seller_utility + r.buyer_utility == pytest.approx(1)
    assert r.pareto_distance == pytest.approx(0)
    assert r.nash_distance == pytest.approx(math.hypot(0.3, 0.3))
    assert r.cb_margin_seller == pytest.approx((108_00 - 115_00) / 5_00)


def test_cb_margin_at_targets():
    assert m(SINGLE, 120_00).cb_margin_seller == pytest.approx(1.0)
    assert m(SINGLE, 110_00).cb_margin_buyer == pytest.approx(1.0)
    # Buyer's reservation above list: a higher price is still good for the seller.
    above = Scenario("up", 100_00, 80_00, 110_00)
    r = m(above, 90_00)
    assert r.cb_margin_seller == pytest.approx((90_00 - 105_00) / 5_00)
    assert r.cb_margin_buyer == pytest.approx(-r.cb_margin_seller)
    # Targets coincide: the margin is undefined.
    assert m(Scenario("eq", 100_00, 80_00, 100_00), 90_00).cb_margin_seller is None


def test_no_deal():
    r = m(SINGLE, rounds=20, messages=40)
    assert not r.agreed and r.price_cents is None
    assert r.seller_utility == 0 and r.buyer_utility == 0
    assert r.seller_share is None and r.buyer_share is None
    assert r.cb_margin_seller is None and r.cb_margin_buyer is None
    assert r.pareto_distance == pytest.approx(1 / R2)
    assert r.nash_distance == pytest.approx(math.hypot(0.5, 0.5))
    assert r.had_zopa


def test_no_zopa_scenario():
    s = Scenario("none", 100_00, 90_00, 80_00, extras=(Extra("w", 1_00, 50_00),))
    assert not s.has_zopa and s.total_surplus < 0
    r = m(s)
    assert r.seller_utility == r.buyer_utility == 0
    assert r.pareto_distance is None and r.nash_distance is None and not r.had_zopa
    assert pareto_frontier(s) == () and nash_point(s) is None


def test_extras_that_create_value_raise_total_surplus():
    assert SINGLE.total_surplus == 10_00
    assert EXTRAS.total_surplus == 10_00 + 4_00
    assert EXTRAS.efficient_extras == ("shipping",)


def test_extras_deal_on_the_frontier_and_at_nash():
    # Seller gets 7.00 net of shipping, buyer 110 + 6 − 109 = 7.00: half of 14.00 each.
    r = m(EXTRAS, 109_00, ["shipping"])
    assert r.seller_utility == pytest.approx(0.5) and r.buyer_utility == pytest.approx(0.5)
    assert r.pareto_distance == pytest.approx(0) and r.nash_distance == pytest.approx(0)
    assert r.seller_share == pytest.approx(0.5)


def test_agreement_without_efficient_extras_is_off_the_frontier():
    r = m(EXTRAS, 105_00)
    assert r.seller_utility == pytest.approx(5 / 14) and r.buyer_utility == pytest.approx(5 / 14)
    assert r.pareto_distance == pytest.approx((1 - 10 / 14) / R2)
    assert r.pareto_distance > 0
    # Shares split what this deal created (10.00), not what it could have.
    assert r.seller_share == pytest.approx(0.5)
    # Adding an extra that destroys value moves it further away.
    worse = m(EXTRAS, 105_00, ["shipping", "junk"])
    assert worse.seller_utility + worse.buyer_utility < 1
    assert worse.pareto_distance > 0


def test_cash_ceiling_limits_extras():
    # Shipping creates 3.00 but costs 5.00, and the zone is only 1.00 wide: the buyer never
    # pays above 101.00 and the seller never nets below 100.00, so no deal can include it.
    s = Scenario("thin", 120_00, 100_00, 101_00, extras=(Extra("shipping", 5_00, 8_00),))
    assert s.efficient_extras == () and s.total_surplus == 1_00
    r = m(s, 100_50)
    assert r.seller_utility == pytest.approx(0.5) and r.buyer_utility == pytest.approx(0.5)
    assert r.pareto_distance == pytest.approx(0) and r.nash_distance == pytest.approx(0)


def test_best_bundle_that_fits():
    s = Scenario("pick", 300_00, 100_00, 110_00, extras=(
        Extra("a", 6_00, 9_00), Extra("b", 5_00, 7_00), Extra("c", 5_00, 7_50)))
    # All three cost 16.00 > 10.00 of room; b + c (10.00, gain 4.50) beats a (gain 3.00).
    assert s.efficient_extras == ("b", "c")
    assert s.total_surplus == 10_00 + 4_50


def test_staircase_frontier():
    s = Scenario("stairs", 250_00, 100_00, 200_00, extras=(Extra("shipping", 10_00, 50_00),))
    # Top: with shipping, u_s + u_b = 1 while the seller nets at most 90.00 of 140.00.
    # Then price-only deals: u_s + u_b = 100/140 up to the seller's 100.00.
    top, low = pareto_frontier(s)
    assert (top.level, top.x0, top.x1) == pytest.approx((1, 0, 90 / 140))
    assert (low.level, low.x0, low.x1) == pytest.approx((100 / 140, 90 / 140, 100 / 140))
    # The whole zone to the seller without shipping is Pareto-efficient: nothing beats it
    # for the seller.
    assert m(s, 200_00).pareto_distance == pytest.approx(0)
    assert m(s, 150_00).pareto_distance == pytest.approx((1 - 100 / 140) / R2)
    assert nash_point(s) == pytest.approx((0.5, 0.5))


def test_nash_point_on_a_lower_step():
    # The top step is short (the seller nets at most 0.50 with the bundle), so the product
    # is largest on the price-only step.
    s = Scenario("short", 30_00, 20_00, 25_00, extras=(Extra("x", 4_50, 5_50),))
    total = 6_00
    top, low = pareto_frontier(s)
    assert top.x1 == pytest.approx(50 / total) and low.level == pytest.approx(500 / total)
    assert nash_point(s) == pytest.approx((250 / total, 250 / total))


def test_irrational_agreement_flagged():
    r = m(SINGLE, 115_00)  # above the buyer's reservation
    assert r.irrational and r.buyer_utility < 0
    assert r.pareto_distance == pytest.approx(0)  # not dominated: just bad for the buyer


def test_record_validation():
    with pytest.raises(ValueError, match="unknown extras"):
        NegotiationRecord(EXTRAS, Terms(105_00, "USD", ("rocket",)))
    with pytest.raises(ValueError, match="EUR"):
        NegotiationRecord(SINGLE, Terms(105_00, "EUR"))
    with pytest.raises(ValueError):
        NegotiationRecord(SINGLE, None, rounds=-1)


def test_word_count():
    assert word_count("I can do $450, final offer.") == 6
    assert word_count("  two\nwords ") == 2
    assert word_count("") == 0 and word_count(None) == 0


def test_aggregate():
    results = [
        m(SINGLE, 105_00, rounds=2, messages=4, words=10, wall_seconds=1.0),
        m(SINGLE, 108_00, rounds=4, messages=8, words=30, wall_seconds=3.0),
        m(SINGLE, rounds=6, messages=12, words=20, wall_seconds=2.0),
    ]
    a = aggregate(results)
    assert (a.count, a.agreements, a.missed_deals, a.irrational_agreements) == (3, 2, 1, 0)
    assert a.agreement_rate == pytest.approx(2 / 3)
    assert a.mean_seller_utility == pytest.approx((0.5 + 0.8 + 0) / 3)
    assert a.mean_seller_utility_agreed == pytest.approx(0.65)
    assert a.mean_buyer_utility_agreed == pytest.approx(0.35)
    assert a.mean_seller_share == pytest.approx(0.65)
    assert a.mean_cb_margin_seller == pytest.approx((-2 + -1.4) / 2)
    assert a.mean_pareto_distance == pytest.approx((0 + 0 + 1 / R2) / 3)
    assert a.mean_rounds == 4 and a.mean_messages == 8 and a.mean_words == 20
    assert a.total_words == 60 and a.total_wall_seconds == pytest.approx(6.0)
    assert a.mean_wall_seconds == pytest.approx(2.0)


def test_aggregate_empty_and_no_deals():
    empty = aggregate([])
    assert empty.count == 0 and empty.agreement_rate == 0 and empty.mean_seller_share is None
    none = aggregate([m(SINGLE), m(SINGLE)])
    assert none.agreement_rate == 0 and none.mean_seller_utility_agreed is None
    assert none.mean_seller_utility == 0


def test_generated_set_measures_cleanly():
    for s in mixed_set(200, seed=5):
        if s.has_zopa:
            price = (s.seller_reservation_cents + s.extras_cost(s.efficient_extras) + s.buyer_reservation_cents) // 2
            price = min(max(price, s.seller_reservation_cents + s.extras_cost(s.efficient_extras)),
                        s.buyer_reservation_cents)
            r = m(s, price, s.efficient_extras)
            assert r.agreed and not r.irrational
            assert r.seller_utility + r.buyer_utility == pytest.approx(1)
            assert r.pareto_distance == pytest.approx(0, abs=1e-9)
        else:
            r = m(s)
            assert r.pareto_distance is None


# -- properties -----------------------------------------------------------------------------------

cents = st.integers(min_value=1, max_value=5_000_00)
extra_st = st.tuples(st.integers(0, 300_00), st.integers(0, 300_00))


@st.composite
def scenarios_and_deals(draw):
    seller = draw(cents)
    list_price = seller + draw(st.integers(0, 2_000_00))
    buyer = seller + draw(st.integers(0, 2_000_00))
    raw = draw(st.lists(extra_st, max_size=5))
    extras = tuple(Extra(f"e{i}", c, v) for i, (c, v) in enumerate(raw))
    s = Scenario("h", list_price, seller, buyer, extras=extras)
    chosen = tuple(e.name for e in extras if draw(st.booleans()))
    low = seller + s.extras_cost(chosen)
    assume(low <= buyer)
    price = draw(st.integers(low, buyer))
    return s, Terms(price, "USD", chosen)


@settings(max_examples=400, deadline=None)
@given(scenarios_and_deals())
def test_acceptable_agreements_have_bounded_utilities(case):
    s, terms = case
    assert s.acceptable_to_seller(terms) and s.acceptable_to_buyer(terms)
    u_s, u_b = s.utility(SELLER, terms), s.utility(BUYER, terms)
    assert 0 <= u_s <= 1 + 1e-9 and 0 <= u_b <= 1 + 1e-9
    assert u_s + u_b <= 1 + 1e-9
    r = measure(NegotiationRecord(s, terms))
    if s.total_surplus > 0:
        # at most the vertical gap to the frontier, which is at most 1
        assert r.pareto_distance is not None and 0 <= r.pareto_distance <= 1 + 1e-9
        assert r.nash_distance is not None and r.nash_distance >= 0
    assert not r.irrational


@settings(max_examples=300, deadline=None)
@given(cents, st.integers(0, 1_000_00), st.lists(extra_st, max_size=6))
def test_total_surplus_is_the_best_acceptable_bundle(seller, room, raw):
    extras = tuple(Extra(f"e{i}", c, v) for i, (c, v) in enumerate(raw))
    s = Scenario("b", seller + room, seller, seller + room, extras=extras)
    best = max(
        room + sum(e.value_cents - e.cost_cents for e in combo)
        for k in range(len(extras) + 1)
        for combo in itertools.combinations(extras, k)
        if sum(e.cost_cents for e in combo) <= room
    )
    assert s.total_surplus == best
    chosen = s.efficient_extras
    assert s.extras_cost(chosen) <= room
    assert room + s.extras_value(chosen) - s.extras_cost(chosen) == best


def test_record_rejects_repeated_extra_and_utility_rejects_unknown_side():
    with pytest.raises(ValueError, match="twice"):
        NegotiationRecord(EXTRAS, Terms(105_00, "USD", ("shipping", "shipping")))
    with pytest.raises(ValueError, match="side"):
        SINGLE.utility("Seller", Terms(105_00, "USD"))


@settings(max_examples=300, deadline=None)
@given(scenarios_and_deals(), st.floats(0, 1))
def test_best_bundle_agreements_are_on_the_frontier(case, where):
    s, _ = case
    assume(s.total_surplus > 0)
    low = s.seller_reservation_cents + s.extras_cost(s.efficient_extras)
    price = low + round(where * (s.buyer_reservation_cents - low))
    r = measure(NegotiationRecord(s, Terms(price, "USD", s.efficient_extras)))
    assert r.seller_utility + r.buyer_utility == pytest.approx(1)
    assert r.pareto_distance == pytest.approx(0, abs=1e-9)
    # and walking away is never on it
    assert measure(NegotiationRecord(s, None)).pareto_distance > 0
