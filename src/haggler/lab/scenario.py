"""A negotiation scenario: what is for sale, and what each side wants.

Single-issue scenarios are a price between a seller's reservation value (its floor) and a
buyer's (its budget). Multi-issue scenarios add extras — each with a cost to the seller and a
value to the buyer — so that trading an extra can create value instead of only moving it.

Surplus is money (integer cents): the seller's is what the price earns over its floor after
the extras' cost; the buyer's is what it saves under its budget plus the extras' value. The
normalised utilities divide by the best surplus each side could get in the scenario, so that
0 is "no better than walking away" and 1 is "the best any agreement could give me".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from haggler.engine import Terms

from haggler.agents.decider import BUYER, SELLER

__all__ = ["BUYER", "SELLER", "Extra", "Scenario"]


@dataclass(frozen=True, slots=True)
class Extra:
    name: str
    #: What including it costs the seller.
    cost_cents: int
    #: What it is worth to the buyer.
    value_cents: int

    def __post_init__(self) -> None:
        if self.cost_cents < 0 or self.value_cents < 0:
            raise ValueError(f"extra {self.name!r}: cost and value must not be negative")


@dataclass(frozen=True, slots=True)
class Scenario:
    id: str
    list_price_cents: int
    #: The seller's reservation value: it never sells below this (net of extras' cost).
    seller_reservation_cents: int
    #: The buyer's reservation value: it never pays more than this (before extras' value).
    buyer_reservation_cents: int
    extras: tuple[Extra, ...] = ()
    currency: str = "USD"
    #: Rounds (one offer by each side) before the negotiation times out.
    max_rounds: int = 20
    tags: tuple[str, ...] = field(default=())

    def __post_init__(self) -> None:
        if min(self.list_price_cents, self.seller_reservation_cents, self.buyer_reservation_cents) <= 0:
            raise ValueError(f"scenario {self.id}: prices must be positive")
        if self.seller_reservation_cents > self.list_price_cents:
            raise ValueError(f"scenario {self.id}: the seller's reservation is above list price")
        if self.max_rounds < 1:
            raise ValueError(f"scenario {self.id}: max_rounds must be at least 1")
        if len({e.name for e in self.extras}) != len(self.extras):
            raise ValueError(f"scenario {self.id}: extras must have distinct names")

    # -- surplus -------------------------------------------------------------------------------

    def _extras(self, names: Iterable[str]) -> list[Extra]:
        by_name = {e.name: e for e in self.extras}
        return [by_name[n] for n in names if n in by_name]

    def extras_cost(self, names: Iterable[str]) -> int:
        return sum(e.cost_cents for e in self._extras(names))

    def extras_value(self, names: Iterable[str]) -> int:
        return sum(e.value_cents for e in self._extras(names))

    def seller_surplus(self, terms: Terms) -> int:
        return terms.price_cents - self.extras_cost(terms.extras) - self.seller_reservation_cents

    def buyer_surplus(self, terms: Terms) -> int:
        return self.buyer_reservation_cents + self.extras_value(terms.extras) - terms.price_cents

    def acceptable_to_seller(self, terms: Terms) -> bool:
        return self.seller_surplus(terms) >= 0

    def acceptable_to_buyer(self, terms: Terms) -> bool:
        # The buyer's reservation is a cash ceiling; extras are never worth less than nothing,
        # so a price within it always leaves a surplus (no need to value the extras).
        return terms.price_cents <= self.buyer_reservation_cents

    # -- the zone of possible agreement -----------------------------------------------------------

    def bundles(self) -> dict[int, tuple[int, tuple[Extra, ...]]]:
        """The non-dominated bundles of value-creating extras whose cost fits between the two
        reservations (an agreement's price is at most the buyer's reservation and at least the
        seller's reservation plus the extras' cost), as cost → (value created, extras), cheapest
        first; a costlier bundle is kept only when it creates strictly more value. Empty when
        there is no zone of agreement."""
        room = self.buyer_reservation_cents - self.seller_reservation_cents
        if room < 0:
            return {}
        # Exact search over bundles, keeping only non-dominated (cost, gain) states.
        states: dict[int, tuple[int, tuple[Extra, ...]]] = {0: (0, ())}
        for extra in self.extras:
            if extra.value_cents <= extra.cost_cents:
                continue
            grown = dict(states)
            for cost, (gain, chosen) in states.items():
                new_cost = cost + extra.cost_cents
                if new_cost > room:
                    continue
                new_gain = gain + extra.value_cents - extra.cost_cents
                if new_cost not in grown or grown[new_cost][0] < new_gain:
                    grown[new_cost] = (new_gain, chosen + (extra,))
            pruned: dict[int, tuple[int, tuple[Extra, ...]]] = {}
            best_gain = -1
            for cost in sorted(grown):
                gain, chosen = grown[cost]
                if gain > best_gain:
                    pruned[cost] = (gain, chosen)
                    best_gain = gain
            states = pruned
        return states

    def _best_bundle(self) -> tuple[Extra, ...]:
        """The extras that create the most value in an agreement both sides can accept.

        Only extras worth more than they cost can add value. When all of them fit between the
        reservations (see :meth:`bundles`), that is all of them; otherwise the best bundle that
        fits (ties: the cheaper bundle, then the earlier extras).
        """
        room = self.buyer_reservation_cents - self.seller_reservation_cents
        gainful = [e for e in self.extras if e.value_cents > e.cost_cents]
        if room < 0:
            return ()
        if sum(e.cost_cents for e in gainful) <= room:
            return tuple(gainful)
        _, best = max(self.bundles().values(), key=lambda state: state[0])  # cheapest among ties
        order = {e.name: i for i, e in enumerate(self.extras)}
        return tuple(sorted(best, key=lambda e: order[e.name]))

    @property
    def efficient_extras(self) -> tuple[str, ...]:
        """The extras of the agreements that create the most value: those worth more to the
        buyer than they cost the seller — or, when their cost does not fit between the two
        reservations (the buyer never pays above its reservation), the best bundle that does."""
        return tuple(e.name for e in self._best_bundle())

    @property
    def total_surplus(self) -> int:
        """The most value any agreement acceptable to both sides can create (negative: no
        agreement is possible)."""
        room = self.buyer_reservation_cents - self.seller_reservation_cents
        return room + sum(e.value_cents - e.cost_cents for e in self._best_bundle())

    @property
    def has_zopa(self) -> bool:
        """Whether some agreement is acceptable to both sides. The buyer's cash ceiling binds
        whatever the extras are worth, and extras only add cost to the seller, so that is
        exactly when the buyer's reservation reaches the seller's."""
        return self.buyer_reservation_cents >= self.seller_reservation_cents

    def utility(self, side: str, terms: Terms | None) -> float:
        """Normalised utility: the side's surplus over the total surplus available (0 for no
        agreement, which is each side's reservation point)."""
        if side not in (SELLER, BUYER):
            raise ValueError(f"side must be {SELLER!r} or {BUYER!r}, got {side!r}")
        total = self.total_surplus
        if terms is None or total <= 0:
            return 0.0
        surplus = self.seller_surplus(terms) if side == SELLER else self.buyer_surplus(terms)
        return surplus / total
