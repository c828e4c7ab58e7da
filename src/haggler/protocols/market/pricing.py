"""The market's price rules, in one place for every protocol that splits a spread."""

from __future__ import annotations


def midpoint_cents(a: int, b: int) -> int:
    """The midpoint of two amounts in integer cents; **half a cent rounds up** (to the seller).

    The sealed bid's deal price (spec 003, "Protocol 2: Sealed Bid": the midpoint of the buyer's
    max and the seller's min) and the double auction's uniform price (the k = 0.5 midpoint of the
    marginal pair) both use it, so a one-cent spread never splits differently in the two."""
    return (a + b + 1) // 2
