"""How each of spec 003's negotiation protocols settles a price: pure rules, shared by the served
market (``/market``) and the lab, so the two can never disagree.

* **Sealed bid** (Protocol 2): :func:`sealed_bid_price` — a deal at the midpoint
  (:func:`~haggler.protocols.market.pricing.midpoint_cents`, half a cent up) when the buyer's
  ``maxPrice`` reaches the seller's ``minPrice``; None otherwise, and nothing about either bid
  is told.
* **Instant match** (Protocol 3): :func:`instant_match_price` — the buyer's accepted price
  must be the live ask exactly; anything else is a stale price (409).
* **Offers** (Protocol 1, "natural language"): :func:`offer_rules` and :func:`offer_turn` put
  the offers on the engine: strict alternation, a cap on turns, ``accept`` agrees to the
  counterpart's standing offer (``Negotiation.standing``).
* **Double auction** (Protocol 4): :func:`haggler.protocols.market.auction.clear`.

Amounts are integer cents throughout.
"""

from __future__ import annotations

from datetime import datetime

from haggler.engine import Action, Rules, Terms, Turn
from haggler.errors import Conflict, InvalidInput
from haggler.protocols.market.pricing import midpoint_cents

BUYER, SELLER = "buyer", "seller"
#: A natural-language negotiation ends without a deal after this many offers in all, unless the
#: market is configured otherwise (``MarketSettings.offer_turn_cap``).
DEFAULT_OFFER_TURN_CAP = 20


def sealed_bid_price(buyer_max: int, seller_min: int) -> int | None:
    """The deal price of two sealed bids, or None when they do not overlap (spec 003, Protocol 2:
    "If overlap exists, deal auto-closes at midpoint"; "If no overlap, negotiation fails")."""
    return midpoint_cents(buyer_max, seller_min) if buyer_max >= seller_min else None


class StalePrice(Conflict):
    """An instant match at a price that is not the listing's live ask (spec 003, 6. Instant Match:
    the seller "rejects if listing is stale")."""


def instant_match_price(ask: int, accepted: int) -> int:
    """The deal price of an instant match: the ask, when the buyer accepted exactly it."""
    if accepted != ask:
        raise StalePrice("the accepted price is not the listing's current ask; read the listing again")
    return ask


def offer_rules(first: str, turn_cap: int | None = DEFAULT_OFFER_TURN_CAP) -> Rules:
    """The engine's rules for a natural-language negotiation that ``first`` opens."""
    if first not in (BUYER, SELLER):
        raise InvalidInput(f"party must be buyer or seller, not {first!r}")
    return Rules(parties=(first, SELLER if first == BUYER else BUYER), max_turns=turn_cap)


def offer_turn(party: str, action: str, at: datetime, *, price: int | None = None, currency: str,
               text: str | None = None) -> Turn:
    """One offer message as an engine turn: ``offer`` (with ``price``), ``accept`` or ``reject``."""
    kind = Action(action)
    if kind is Action.OFFER:
        if price is None:
            raise InvalidInput("an offer needs a price")
        return Turn(party, kind, at, Terms(price, currency), text)
    if kind is Action.MESSAGE:
        raise InvalidInput("an offer message makes an offer, accepts or rejects")
    return Turn(party, kind, at, None, text)

