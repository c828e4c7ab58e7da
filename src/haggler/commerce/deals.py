"""A deal closed in chat, used at an agentic checkout as a discount code (its id).

The deal brings its product's line to exactly the agreed price, for the one unit it prices, with
the agreed extras; it can be used once, before it expires (the same lifetime the agents.json cart
and the deal's checkout page honour), and only for its own product. Once is guarded by the same
``deal_redemptions`` row as every other door: a completion takes it before charging, in the same
transaction that takes the stock, and gives it back if the payment does not go through.

Each refusal carries the discount-rejection code UCP's discount extension defines (ACP will map the
same reasons to its own).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Connection

from haggler.commerce.pricing import Line
from haggler.orders import redemption_of
from haggler.storage.chats import DealRow, get_deal


@dataclass(frozen=True, slots=True)
class Rejection:
    """A code that was not applied: the code, why (a discount-rejection code), in words."""

    code: str
    reason: str
    content: str


@dataclass(frozen=True, slots=True)
class AppliedDeal:
    """A deal applied to the line ``line_id``: one unit at ``deal.price_cents``."""

    deal: DealRow
    line_id: str

    @property
    def code(self) -> str:
        return self.deal.id


def find(conn: Connection, code: str) -> DealRow | None:
    """The deal a code names (a deal's code is its id), or None."""
    return get_deal(conn, code)


def check(conn: Connection, deal: DealRow, lines: Sequence[Line], currency: str, now: datetime,
          ttl: timedelta, *, already: AppliedDeal | None) -> AppliedDeal | Rejection:
    """Whether ``deal`` applies to this checkout's lines, and to which line."""
    expires_at = deal.created_at + ttl
    if already is not None:
        return Rejection(deal.id, "discount_code_combination_disallowed",
                         f"Deal {deal.id} cannot be combined with deal {already.code}: one deal per checkout")
    if expires_at <= now:
        return Rejection(deal.id, "discount_code_expired",
                         f"Deal {deal.id} expired at {expires_at.strftime('%Y-%m-%dT%H:%M:%SZ')}")
    if redemption_of(conn, deal.id) is not None:
        return Rejection(deal.id, "discount_code_already_applied", f"Deal {deal.id} has already been bought")
    line = next((li for li in lines if li.product_id == deal.product_id), None)
    if line is None:
        return Rejection(deal.id, "discount_code_invalid",
                         f"Deal {deal.id} is for {deal.product_id}, which is not in this checkout")
    if deal.currency != currency:
        return Rejection(deal.id, "discount_code_invalid", f"Deal {deal.id} is priced in {deal.currency}")
    if line.quantity != 1:
        return Rejection(deal.id, "discount_code_invalid",
                         f"Deal {deal.id} prices exactly one unit of {deal.product_id}: set that line's quantity "
                         "to 1 (further units go in at list price)")
    return AppliedDeal(deal, line.id)
