"""How the dashboard's pages and the ``haggler`` commands write a figure for people, one spelling
for both: an amount as its currency writes it, a share with one decimal, a dash for none (a
product that left the catalog has no list price; nothing closed yet has no agreement rate)."""

from __future__ import annotations

from haggler.money import format_money

NONE = "—"


def money(cents: int | None, currency: str) -> str:
    """``$1,299.99``, ``€180``, or a dash."""
    return NONE if cents is None else format_money(cents, currency)


def percent(fraction: float | None) -> str:
    """``12.5%`` for 0.125, or a dash."""
    return NONE if fraction is None else f"{fraction:.1%}"
