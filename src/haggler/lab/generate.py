"""Seeded scenario generators: single-issue price haggles and multi-issue ones with extras.

Every generator is deterministic for its seed, and scenario ``i`` depends only on the seed and
``i`` (each draws from its own ``random.Random``), so ``single_issue(10, seed=s)`` is the first
ten of ``single_issue(100, seed=s)``.

Ranges, in cents:

* list price: $20–$3,000, log-uniform (cheap items are common), ending in ``.00``, ``.99`` or
  ``.95`` the way shop prices do;
* seller floor (reservation): 0.65–0.95 of list;
* buyer budget (reservation): with a zone of agreement, from just above the floor up to 1.2×
  list — mostly below list, sometimes around or above it; without one, 0.45× list up to just
  under the floor.

Multi-issue scenarios add one to four extras (shipping, warranty, an accessory, ...), each
with a cost to the seller and a value to the buyer; most are worth more than they cost, some
are not.
"""

from __future__ import annotations

import math
import random

from haggler.lab.scenario import Extra, Scenario

MIN_LIST_CENTS = 20_00
MAX_LIST_CENTS = 3_000_00
SELLER_FLOOR_RANGE = (0.65, 0.95)
#: Budget as a fraction of list price, when there is a zone of agreement.
MAX_BUDGET_RATIO = 1.2
#: Budget as a fraction of list price, when there is none.
MIN_BUDGET_RATIO = 0.45
#: Share of scenarios with a zone of agreement when ``zopa=None`` mixes them.
ZOPA_SHARE = 0.75

#: name, cost as a fraction of list (low, high), cost floor and ceiling in cents,
#: value as a multiple of cost (low, high) when the extra creates value.
EXTRA_KINDS: tuple[tuple[str, tuple[float, float], int, int, tuple[float, float]], ...] = (
    ("shipping", (0.01, 0.06), 4_00, 60_00, (1.2, 2.5)),
    ("express_shipping", (0.02, 0.08), 8_00, 90_00, (1.1, 2.0)),
    ("warranty", (0.03, 0.10), 5_00, 250_00, (1.3, 3.0)),
    ("accessory", (0.02, 0.08), 3_00, 150_00, (1.2, 2.2)),
    ("gift_wrap", (0.005, 0.02), 1_00, 10_00, (1.1, 3.0)),
    ("extended_returns", (0.005, 0.03), 1_00, 40_00, (1.5, 4.0)),
    ("installation", (0.04, 0.12), 15_00, 200_00, (1.1, 1.8)),
)
#: Chance that an extra is worth no more to the buyer than it costs the seller.
INEFFICIENT_SHARE = 0.15


def single_issue(
    n: int,
    *,
    seed: int | str,
    zopa: bool | None = True,
    max_rounds: int = 20,
    currency: str = "USD",
    prefix: str = "s1",
) -> tuple[Scenario, ...]:
    """``n`` price-only scenarios. ``zopa=True``: every one has a zone of agreement;
    ``False``: none has; ``None``: a mix (about three in four have one)."""
    return _batch("single", n, seed, prefix, zopa=zopa, extras=False, max_rounds=max_rounds, currency=currency)


def multi_issue(
    n: int,
    *,
    seed: int | str,
    zopa: bool | None = True,
    max_rounds: int = 20,
    currency: str = "USD",
    prefix: str = "m1",
) -> tuple[Scenario, ...]:
    """``n`` scenarios with a price and one to four extras (same ``zopa`` rule as
    :func:`single_issue`; extras never create a zone of agreement: the buyer's budget is a
    cash ceiling)."""
    return _batch("multi", n, seed, prefix, zopa=zopa, extras=True, max_rounds=max_rounds, currency=currency)


def mixed_set(n: int, seed: int | str, *, max_rounds: int = 20, prefix: str = "x1") -> tuple[Scenario, ...]:
    """The tournament set: ``n`` scenarios, about half single-issue and half with extras,
    about three in four with a zone of agreement."""
    _check(n, max_rounds)
    scenarios = []
    for i in range(n):
        rng = random.Random(f"haggler.mixed:{seed}:{i}")
        scenarios.append(_scenario(rng, f"{prefix}-{i:04d}", zopa=None, extras=rng.random() < 0.5,
                                   max_rounds=max_rounds, currency="USD"))
    return tuple(scenarios)


# -- internals ------------------------------------------------------------------------------------


def _check(n: int, max_rounds: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n must be a non-negative integer, got {n!r}")
    if max_rounds < 1:
        raise ValueError(f"max_rounds must be at least 1, got {max_rounds!r}")


def _batch(kind: str, n: int, seed: int | str, prefix: str, *, zopa: bool | None, extras: bool, max_rounds: int,
           currency: str) -> tuple[Scenario, ...]:
    """``n`` scenarios of one kind, scenario ``i`` from its own generator seeded by kind, seed and ``i``."""
    _check(n, max_rounds)
    return tuple(
        _scenario(random.Random(f"haggler.{kind}:{seed}:{i}"), f"{prefix}-{i:04d}",
                  zopa=zopa, extras=extras, max_rounds=max_rounds, currency=currency)
        for i in range(n)
    )


def _list_price(rng: random.Random) -> int:
    dollars = round(math.exp(rng.uniform(math.log(MIN_LIST_CENTS / 100), math.log(MAX_LIST_CENTS / 100))))
    dollars = min(max(dollars, MIN_LIST_CENTS // 100), MAX_LIST_CENTS // 100)
    ending = rng.random()
    if dollars > MIN_LIST_CENTS // 100 and ending < 0.35:
        return dollars * 100 - 1          # $499.99
    if dollars > MIN_LIST_CENTS // 100 and ending < 0.45:
        return dollars * 100 - 5          # $49.95
    return dollars * 100


def _scenario(
    rng: random.Random, id: str, *, zopa: bool | None, extras: bool, max_rounds: int, currency: str
) -> Scenario:
    with_zopa = rng.random() < ZOPA_SHARE if zopa is None else zopa
    list_cents = _list_price(rng)
    floor = round(list_cents * rng.uniform(*SELLER_FLOOR_RANGE))
    if with_zopa:
        # At least a sliver of room: a zone of one cent is a zone, but not a useful one.
        min_room = max(1, list_cents // 200)
        kind = rng.random()
        if kind < 0.6:        # below list: the usual haggle
            budget = round(rng.uniform(floor / list_cents, 0.97) * list_cents)
        elif kind < 0.85:     # around list
            budget = round(rng.uniform(0.97, 1.03) * list_cents)
        else:                 # above list: the buyer would pay more than asked
            budget = round(rng.uniform(1.03, MAX_BUDGET_RATIO) * list_cents)
        budget = max(budget, floor + min_room)
    else:
        budget = round(rng.uniform(MIN_BUDGET_RATIO, floor / list_cents) * list_cents)
        budget = max(1, min(budget, floor - 1))
    tags = ["multi" if extras else "single", "zopa" if budget >= floor else "no-zopa"]
    if budget < list_cents * 0.97:
        tags.append("budget-below-list")
    elif budget <= list_cents * 1.03:
        tags.append("budget-around-list")
    else:
        tags.append("budget-above-list")
    if 0 <= budget - floor < list_cents * 0.05:
        tags.append("thin-zone")
    extra_list: tuple[Extra, ...] = ()
    if extras:
        extra_list = _extras(rng, list_cents)
        tags.append(f"extras-{len(extra_list)}")
        if any(e.value_cents <= e.cost_cents for e in extra_list):
            tags.append("inefficient-extra")
        gainful_cost = sum(e.cost_cents for e in extra_list if e.value_cents > e.cost_cents)
        if budget >= floor and gainful_cost > budget - floor:
            tags.append("extras-exceed-zone")
    return Scenario(
        id=id,
        list_price_cents=list_cents,
        seller_reservation_cents=floor,
        buyer_reservation_cents=budget,
        extras=extra_list,
        currency=currency,
        max_rounds=max_rounds,
        tags=tuple(tags),
    )


def _extras(rng: random.Random, list_cents: int) -> tuple[Extra, ...]:
    count = rng.choice((1, 1, 2, 2, 2, 3, 3, 4))
    kinds = rng.sample(EXTRA_KINDS, count)
    out = []
    for name, (lo, hi), floor_cents, ceiling_cents, (vlo, vhi) in kinds:
        cost = round(list_cents * rng.uniform(lo, hi))
        cost = min(max(cost, floor_cents), ceiling_cents)
        cost = max(50, round(cost / 50) * 50)          # whole 50 cents
        if rng.random() < INEFFICIENT_SHARE:
            value = round(cost * rng.uniform(0.4, 1.0))
        else:
            value = round(cost * rng.uniform(vlo, vhi))
            value = max(value, cost + 50)
        out.append(Extra(name, cost_cents=cost, value_cents=value))
    return tuple(out)
