"""The checkout's pricing rules, exactly: discounts, shipping options, promotions, totals."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from haggler.commerce.merchant_data import Discount, Promotion, ShippingRate
from haggler.commerce.pricing import Line, apply_discounts, shipping_options, totals

RATES = (ShippingRate("std", "default", "standard", 500, "Standard"),
         ShippingRate("exp-us", "US", "express", 1500, "Express US"),
         ShippingRate("exp-intl", "default", "express", 2500, "Express"))
PROMOS = (Promotion("p1", "free_shipping", 10000, (), "over 100"),
          Promotion("p2", "free_shipping", None, ("roses",), "roses ship free"))


def line(product: str = "pot", quantity: int = 1, price: int = 1500) -> Line:
    return Line("l1", product, product, quantity, price)


def test_percentages_apply_one_after_another_rounding_down():
    applied, left = apply_discounts(3500, [Discount("A", "percentage", 10, "a"), Discount("B", "percentage", 20, "b")])
    assert [d.amount_cents for d in applied] == [350, 630] and left == 2520


def test_a_fixed_amount_never_takes_the_total_below_zero():
    applied, left = apply_discounts(300, [Discount("F", "fixed_amount", 500, "f")])
    assert applied[0].amount_cents == 300 and left == 0


@given(st.integers(0, 10**9), st.lists(st.tuples(st.sampled_from(["percentage", "fixed_amount"]), st.integers(0, 5000)),
                                       max_size=5))
def test_discounts_add_up_to_what_they_took(amount, specs):
    applied, left = apply_discounts(amount, [Discount(str(i), k, v, "") for i, (k, v) in enumerate(specs)])
    assert 0 <= left <= amount and sum(d.amount_cents for d in applied) == amount - left


def test_a_countrys_own_rate_replaces_the_default_of_its_service_level():
    assert [o.id for o in shipping_options(RATES, (), "us", [line()])] == ["std", "exp-us"]
    assert [o.id for o in shipping_options(RATES, (), "CA", [line()])] == ["std", "exp-intl"]


def test_free_shipping_by_subtotal_or_by_item_makes_only_standard_free():
    for lines in ([line(quantity=7)], [line("roses", 1, 3500)]):
        options = shipping_options(RATES, PROMOS, "US", lines)
        assert [(o.id, o.price_cents, o.title) for o in options] == [
            ("std", 0, "Free Standard"), ("exp-us", 1500, "Express US")]
    assert shipping_options(RATES, PROMOS, "US", [line(quantity=6)])[0].price_cents == 500


def test_total_is_subtotal_less_discounts_plus_shipping():
    lines = [line(quantity=2)]
    applied, _ = apply_discounts(3000, [Discount("A", "percentage", 10, "a")])
    option = shipping_options(RATES, (), "US", lines)[0]
    t = totals(lines, applied, option)
    assert (t.subtotal_cents, t.discount_cents, t.fulfillment_cents, t.total_cents) == (3000, 300, 500, 3200)
    assert totals(lines, (), None).fulfillment_cents is None
