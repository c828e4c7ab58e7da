"""Seeded scenario generators: determinism, zone-of-agreement flags, realistic ranges."""

from __future__ import annotations

import pytest

from haggler.engine import Terms
from haggler.lab.generate import mixed_set, multi_issue, single_issue
from haggler.lab.scenario import Scenario


def agreeable_price_exists(s: Scenario) -> bool:
    """Directly: is some price (with no extras, or with any single extra) acceptable to both?"""
    for price in (s.seller_reservation_cents, s.buyer_reservation_cents):
        terms = Terms(price, s.currency)
        if s.acceptable_to_seller(terms) and s.acceptable_to_buyer(terms):
            return True
    for extra in s.extras:
        for price in (s.seller_reservation_cents + extra.cost_cents, s.buyer_reservation_cents):
            terms = Terms(price, s.currency, (extra.name,))
            if s.acceptable_to_seller(terms) and s.acceptable_to_buyer(terms):
                return True
    return False


@pytest.mark.parametrize("make", [single_issue, multi_issue])
def test_same_seed_same_scenarios(make):
    assert make(50, seed=7) == make(50, seed=7)
    assert make(50, seed="abc") == make(50, seed="abc")


@pytest.mark.parametrize("make", [single_issue, multi_issue])
def test_different_seeds_differ(make):
    a, b = make(50, seed=1), make(50, seed=2)
    assert a != b
    prices_a = [s.list_price_cents for s in a]
    prices_b = [s.list_price_cents for s in b]
    assert sum(x != y for x, y in zip(prices_a, prices_b, strict=True)) > 40


def test_mixed_set_deterministic_and_seed_sensitive():
    assert mixed_set(60, 3) == mixed_set(60, 3)
    assert mixed_set(60, 3) != mixed_set(60, 4)


def test_prefix_stable_scenario_i_depends_only_on_seed_and_i():
    assert single_issue(10, seed=5) == single_issue(30, seed=5)[:10]
    assert multi_issue(10, seed=5) == multi_issue(30, seed=5)[:10]
    assert mixed_set(10, 5) == mixed_set(30, 5)[:10]


def test_ids_are_numbered_and_distinct():
    s = single_issue(12, seed=0)
    assert s[7].id == "s1-0007"
    assert multi_issue(3, seed=0)[2].id == "m1-0002"
    assert single_issue(2, seed=0, prefix="setA")[1].id == "setA-0001"
    ids = [x.id for x in mixed_set(300, 0)]
    assert len(set(ids)) == len(ids)


def test_zero_scenarios_and_bad_arguments():
    assert single_issue(0, seed=1) == ()
    with pytest.raises(ValueError):
        single_issue(-1, seed=1)
    with pytest.raises(ValueError):
        multi_issue(3, seed=1, max_rounds=0)


@pytest.mark.parametrize("make", [single_issue, multi_issue])
def test_zopa_true_always_has_a_zone(make):
    for s in make(400, seed=11, zopa=True):
        assert s.has_zopa, s
        assert agreeable_price_exists(s), s
        assert s.total_surplus > 0, s
        assert "zopa" in s.tags


@pytest.mark.parametrize("make", [single_issue, multi_issue])
def test_zopa_false_never_has_a_zone(make):
    for s in make(400, seed=12, zopa=False):
        assert not s.has_zopa, s
        assert not agreeable_price_exists(s), s
        assert s.total_surplus < 0, s
        assert "no-zopa" in s.tags


@pytest.mark.parametrize("make", [single_issue, multi_issue])
def test_zopa_none_mixes(make):
    scenarios = make(400, seed=13, zopa=None)
    with_zone = sum(s.has_zopa for s in scenarios)
    assert 200 < with_zone < 380
    for s in scenarios:
        assert s.has_zopa == agreeable_price_exists(s)
        assert ("zopa" in s.tags) == s.has_zopa


def test_mixed_set_mixes_issues_and_zones():
    scenarios = mixed_set(400, seed=21)
    multi = sum(bool(s.extras) for s in scenarios)
    zone = sum(s.has_zopa for s in scenarios)
    assert 120 < multi < 280
    assert 200 < zone < 380


@pytest.mark.parametrize("make", [single_issue, multi_issue])
def test_value_ranges(make):
    scenarios = make(500, seed=99, zopa=None)
    for s in scenarios:
        assert 20_00 - 5 <= s.list_price_cents <= 3_000_00
        ratio = s.seller_reservation_cents / s.list_price_cents
        assert 0.65 - 1e-3 <= ratio <= 0.95 + 1e-3, s
        assert 0 < s.buyer_reservation_cents <= 1.2 * s.list_price_cents + 1
        assert s.buyer_reservation_cents >= 0.45 * s.list_price_cents - 1
        assert s.currency == "USD" and s.max_rounds == 20
        assert all(isinstance(v, int) for v in (s.list_price_cents, s.seller_reservation_cents,
                                                s.buyer_reservation_cents))
    prices = sorted(s.list_price_cents for s in scenarios)
    assert prices[0] < 60_00 and prices[-1] > 1_500_00  # the range is actually used


def test_budgets_below_around_and_above_list():
    tags = [t for s in single_issue(500, seed=4) for t in s.tags]
    for kind in ("budget-below-list", "budget-around-list", "budget-above-list"):
        assert tags.count(kind) >= 25, kind


def test_single_issue_has_no_extras():
    assert all(s.extras == () and "single" in s.tags for s in single_issue(100, seed=8))


def test_multi_issue_extras():
    scenarios = multi_issue(500, seed=8)
    names = set()
    inefficient = efficient = 0
    for s in scenarios:
        assert 1 <= len(s.extras) <= 4
        assert len({e.name for e in s.extras}) == len(s.extras)
        for e in s.extras:
            names.add(e.name)
            assert 0 < e.cost_cents and 0 <= e.value_cents
            if e.value_cents > e.cost_cents:
                efficient += 1
            else:
                inefficient += 1
    assert {"shipping", "warranty", "accessory"} <= names
    assert inefficient > 0 and efficient > 4 * inefficient  # mostly value-creating, not always
    # Value-creating extras (that fit) raise the total surplus above the price zone alone.
    assert any(s.total_surplus > s.buyer_reservation_cents - s.seller_reservation_cents for s in scenarios)


def test_custom_rounds_and_currency():
    s = multi_issue(3, seed=1, max_rounds=7, currency="EUR")
    assert all(x.max_rounds == 7 and x.currency == "EUR" for x in s)
