"""The one decider interface: what a strategy sees, what it proposes, and the guard.

Deciders propose, the framework disposes. A :class:`Decider` looks at a :class:`DeciderView`
(its own side of the negotiation: its reservation value, the list price, the clock and both
sides' offers so far) and returns a :data:`Decision`: the terms it offers, ACCEPT or REJECT.
Before a decision becomes a turn, :func:`guard` checks it against the owner's reservation
value, so that no strategy — buggy, adversarial or learned — can ever sell below the seller's
floor or pay above the buyer's budget.

Money is integer cents. Single-issue deals are a price; multi-issue deals add extras, which
the view values from its owner's side: what each costs the seller, or is worth to the buyer.
A seller's *net* for some terms is the price minus the extras' cost (higher is better); a
buyer's is the price minus the extras' value (lower is better). The seller never accepts or
offers a net below its reservation; the buyer never accepts or offers a cash price above its
reservation, whatever the extras are worth (its budget is cash).
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import NamedTuple, Protocol, Union, runtime_checkable

from haggler.engine import Action, Terms

__all__ = [
    "ACCEPT", "BUYER", "REJECT", "SELLER", "Decider", "DeciderView", "Decision", "PricePlanner",
    "acceptable", "guard", "net_cents",
]

SELLER = "seller"
BUYER = "buyer"

_EMPTY: Mapping[str, int] = MappingProxyType({})


class DeciderView(NamedTuple):
    """One side's view of an alternating-offers negotiation, at its turn to move.

    A named tuple, like the engine's Terms: a fresh immutable snapshot is built for every
    turn, so it must be cheap to build (``tuple.__new__`` in the lab's loop)."""

    #: "seller" or "buyer".
    role: str
    #: The seller's floor (net of extras' cost) or the buyer's cash ceiling.
    reservation_cents: int
    list_price_cents: int
    #: The current round, 0-based; a round is one turn of each side.
    round: int
    max_rounds: int
    #: This side's offers so far, oldest first.
    my_offers: tuple[Terms, ...] = ()
    #: The counterpart's offers so far, oldest first; the last one is what an ACCEPT agrees to.
    their_offers: tuple[Terms, ...] = ()
    #: Extra name → cents, from this side: its cost for the seller, its value for the buyer.
    extras: Mapping[str, int] = _EMPTY
    currency: str = "USD"

    @property
    def time(self) -> float:
        """Relative time in [0, 1]: 0 at the first round, 1 at the last one."""
        last = self.max_rounds - 1
        return 1.0 if last <= 0 else min(1.0, self.round / last)


#: Accept the counterpart's last offer.
ACCEPT = Action.ACCEPT
#: Walk away: end the negotiation without agreement.
REJECT = Action.REJECT

#: What a decider returns: the :class:`~haggler.engine.Terms` it offers, :data:`ACCEPT` or
#: :data:`REJECT`. Offers are bare terms, with no wrapper object, because a decision is made
#: on every turn of every negotiation.
Decision = Union[Terms, Action]


@runtime_checkable
class Decider(Protocol):
    """A strategy: proposes this side's next move. It may keep state for one negotiation, so
    make a fresh one per negotiation (the lab's registries hold factories)."""

    name: str

    def decide(self, view: DeciderView) -> Decision: ...


class PricePlanner(Protocol):
    """An optional fast path of a :class:`Decider` whose move depends only on the clock and the
    counterpart's last offer (a time-dependent strategy): it says up front what it will offer in
    each round, so a hot loop need not build a view and call ``decide`` on every turn.

    The contract: for every view with these role, reservation, list price and rounds, at round
    ``r``, whose counterpart has made no offer or last offered a bare price (no extras) in the
    view's currency, ``decide(view)`` returns ACCEPT when that price is at least as good for
    this side as ``plan[r]`` (``>=`` for the seller, ``<=`` for the buyer) and
    ``Terms(plan[r], view.currency)`` otherwise. A loop that uses the plan still asks ``decide``
    for any other view, and passes any planned move not provably within the reservation
    through :func:`guard`, so a plan can never take a side past its reservation."""

    def price_plan(self, role: str, reservation_cents: int, list_price_cents: int,
                   max_rounds: int) -> tuple[int, ...] | None:
        """One price per round (``max_rounds`` of them), or None when this decider cannot
        promise the contract (the loop then calls ``decide`` every turn)."""
        ...


def net_cents(view: DeciderView, terms: Terms) -> int:
    """The price net of the extras as this side values them (each extra counted once)."""
    if not terms.extras:
        return terms.price_cents
    values = view.extras
    total = sum(values.get(name, 0) for name in dict.fromkeys(terms.extras))
    return terms.price_cents - total


def acceptable(view: DeciderView, terms: Terms) -> bool:
    """Whether agreeing to ``terms`` leaves this side no worse off than walking away."""
    if terms.currency != view.currency:
        return False
    if view.role == SELLER:
        return net_cents(view, terms) >= view.reservation_cents
    return terms.price_cents <= view.reservation_cents


def guard(decision: Decision, view: DeciderView) -> Decision:
    """Make ``decision`` safe for its owner: never past its reservation.

    * An ACCEPT agrees to the counterpart's last offer: when there is none, or it is not
      acceptable to this side, the ACCEPT becomes a REJECT.
    * Offered terms are clamped to the reservation: a seller's price is raised until its net
      covers its floor, a buyer's lowered to its ceiling. The currency becomes the view's,
      extras the view does not know (or repeated) are dropped.
    * Anything else (a bare OFFER or MESSAGE action, a plain tuple, None) becomes a REJECT.
    """
    if isinstance(decision, Terms):
        extras = decision.extras
        if extras:
            known = view.extras
            cleaned = tuple(name for name in dict.fromkeys(extras) if name in known)
            if cleaned != extras:
                extras = cleaned
        price = decision.price_cents
        if view.role == SELLER:
            cost = sum(view.extras[name] for name in extras) if extras else 0
            if price - cost < view.reservation_cents:
                price = view.reservation_cents + cost
        elif price > view.reservation_cents:
            price = view.reservation_cents
        if price != decision.price_cents or extras is not decision.extras or decision.currency != view.currency:
            return Terms(price, view.currency, extras)
        return decision
    if decision is ACCEPT:
        theirs = view.their_offers
        return ACCEPT if theirs and acceptable(view, theirs[-1]) else REJECT
    return REJECT
