"""Pricing a checkout: line totals, discount codes, shipping options and the totals, from the
merchant's data alone (the buyer's agent may send titles and prices; they are never read).

Pure: no database, no clock, so every rule here is exact to test and the same for every protocol.
Money is integer minor units throughout; a percentage rounds down to a whole unit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from haggler.commerce.merchant_data import Discount, Promotion, ShippingRate

#: The service level a free-shipping promotion makes free.
FREE_SHIPPING_LEVEL = "standard"


@dataclass(frozen=True, slots=True)
class Line:
    """A line of a checkout: a product at the merchant's price for it (a deal's price, when one
    applies, is the session's to say: ``sessions.Priced.line_total``)."""

    id: str
    product_id: str
    title: str
    quantity: int
    unit_price_cents: int
    image_url: str | None = None

    @property
    def subtotal_cents(self) -> int:
        return self.unit_price_cents * self.quantity


@dataclass(frozen=True, slots=True)
class AppliedDiscount:
    code: str
    title: str
    amount_cents: int


@dataclass(frozen=True, slots=True)
class ShippingOption:
    id: str
    title: str
    service_level: str
    price_cents: int
    free_by_promotion: bool


@dataclass(frozen=True, slots=True)
class Totals:
    subtotal_cents: int
    discount_cents: int
    fulfillment_cents: int | None  # None while no option is chosen
    total_cents: int


def subtotal(lines: Sequence[Line]) -> int:
    return sum(line.subtotal_cents for line in lines)


def apply_discounts(amount_cents: int, discounts: Sequence[Discount]) -> tuple[tuple[AppliedDiscount, ...], int]:
    """Each discount in turn on what the one before left (10% then 20% of 3500: 3150, then 2520),
    never below zero; returns what each took and what is left."""
    applied = []
    left = amount_cents
    for d in discounts:
        after = left * (100 - min(d.value, 100)) // 100 if d.kind == "percentage" else max(0, left - d.value)
        applied.append(AppliedDiscount(d.code, d.description, left - after))
        left = after
    return tuple(applied), left


def shipping_options(rates: Sequence[ShippingRate], promotions: Sequence[Promotion], country: str | None,
                     lines: Sequence[Line]) -> tuple[ShippingOption, ...]:
    """The options for a destination country, cheapest first: the country's own rate for a service
    level where it has one, the default rate otherwise; standard shipping free when a promotion
    covers the order (its subtotal reaches the promotion's minimum, or it holds an eligible item)."""
    country = (country or "").upper()
    by_level: dict[str, ShippingRate] = {}
    for rate in rates:
        if rate.country_code == "default":
            by_level.setdefault(rate.service_level, rate)
    for rate in rates:
        if country and rate.country_code.upper() == country:
            by_level[rate.service_level] = rate
    free = free_shipping(promotions, lines)
    options = []
    for rate in by_level.values():
        promoted = free and rate.service_level == FREE_SHIPPING_LEVEL
        options.append(ShippingOption(rate.id, f"Free {rate.title}" if promoted else rate.title, rate.service_level,
                                      0 if promoted else rate.price_cents, promoted))
    return tuple(sorted(options, key=lambda o: (o.price_cents, o.id)))


def free_shipping(promotions: Sequence[Promotion], lines: Sequence[Line]) -> bool:
    """Whether a free-shipping promotion covers these lines."""
    items = subtotal(lines)
    ids = {line.product_id for line in lines}
    for promotion in promotions:
        if promotion.kind != "free_shipping":
            continue
        if promotion.min_subtotal_cents is not None and items >= promotion.min_subtotal_cents:
            return True
        if ids.intersection(promotion.eligible_item_ids):
            return True
    return False


def totals(lines: Sequence[Line], discounts: Sequence[AppliedDiscount], option: ShippingOption | None) -> Totals:
    """Subtotal less what the discounts took, plus the chosen option (none yet: no shipping counted)."""
    items = subtotal(lines)
    off = sum(d.amount_cents for d in discounts)
    shipping = option.price_cents if option is not None else None
    return Totals(items, off, shipping, items - off + (shipping or 0))
