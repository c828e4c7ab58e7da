"""Message builders and helpers for issue 29 ("Money that holds"), written from the wire design
(`/work/issue29-design.md`) only: owner-signed floors and budgets bound to their listing or
wanted ad (``listingId`` / ``wantedId`` and ``issuedAt`` inside the owner's bytes), offers with
their party's ``sequence``, instant matches naming the ``listingVersion`` seen, listings with a
``shippingCost``, deal cancellation, and the arithmetic of a deal's total.

Kept apart from ``tests/support/market.py`` on purpose (the held-out suite must merge without
touching the shared builders); it reuses that module's :class:`Trader`."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx

from tests.support.market import ITEM, VERSION, Trader, bearer, new_id, z
from haggler.trust.messages import sign_deal, sign_message

PENDING = ("awaiting_signatures", "awaiting_owner_approval")
DEAL_EXPIRY_SECONDS = 86_400  # MarketSettings.deal_expiry_seconds' default (design 6)


def cents(amount: Any) -> int:
    """A wire amount (major units) in integer cents, exactly."""
    value = Decimal(str(amount)) * 100
    assert value == value.to_integral_value(), amount
    return int(value)


def budget(maximum: float, currency: str = "EUR") -> dict[str, Any]:
    """A mandate's ``constraints.budget``: AP2's open payment mandate ``payment.budget`` shape."""
    return {"max": maximum, "currency": currency}


def item_block(name: str = "nintendo_switch", *, condition: str = "good",
               accessories: tuple[str, ...] = ("charger", "case"), **extra: str) -> dict[str, Any]:
    return {**ITEM, "name": name, "condition": condition, "accessories": list(accessories), **extra}


# -- owner-signed embedded mandates (design 4) ---------------------------------------------------------

def owner_floor(agent: Trader, listing_id: str, floor: float, *, issued: datetime | None = None) -> dict[str, Any]:
    """A listing's embedded ``ownerMandate``, bound to ``listing_id`` and dated ``issued``."""
    when = issued or agent.clock() - timedelta(seconds=1)
    return sign_message(agent.owner, {"listingId": listing_id, "issuedAt": z(when), "minAcceptablePrice": floor,
                                      "publicKey": agent.owner_key})


def old_style_owner_floor(agent: Trader, floor: float) -> dict[str, Any]:
    """What an owner signed before issue 29: ``{minAcceptablePrice, publicKey}`` bound to nothing."""
    return sign_message(agent.owner, {"minAcceptablePrice": floor, "publicKey": agent.owner_key})


def owner_spend(agent: Trader, wanted_id: str, max_spend: float, *, issued: datetime | None = None) -> dict[str, Any]:
    when = issued or agent.clock() - timedelta(seconds=1)
    return sign_message(agent.owner, {"wantedId": wanted_id, "issuedAt": z(when), "maxSpend": max_spend,
                                      "publicKey": agent.owner_key})


# -- message builders ----------------------------------------------------------------------------------

def listing(agent: Trader, *, listing_id: str | None = None, ask: float = 180, floor: float = 150,
            item: dict[str, Any] | None = None, shipping: float | None = None, min_price: float | None = None,
            negotiable: bool = True, owner_mandate: dict[str, Any] | None = None,
            issued: datetime | None = None) -> dict[str, Any]:
    """An unsigned listing whose embedded floor is bound to its own id (design 4)."""
    listing_id = listing_id or new_id("lst")
    pricing: dict[str, Any] = {"askPrice": ask, "currency": "EUR", "negotiable": negotiable}
    if min_price is not None:
        pricing["minPrice"] = min_price
    body: dict[str, Any] = {
        "type": "listing", "version": VERSION, "listingId": listing_id, "timestamp": agent.now(),
        "seller": {"agentId": agent.id}, "item": dict(item or item_block()), "pricing": pricing,
        "ownerMandate": owner_mandate or owner_floor(agent, listing_id, floor, issued=issued),
    }
    if shipping is not None:
        body["logistics"] = {"meetingOptions": ["shipping"], "shippingCost": shipping}
    return body


def post_listing(agent: Trader, status: int = 201, **kwargs: Any) -> dict[str, Any]:
    """Post (or revise) a listing built by :func:`listing`; asserts ``status``; the message sent."""
    body = listing(agent, **kwargs)
    response = agent.send("/market/listings", body)
    assert response.status_code == status, (response.status_code, response.text)
    return body


def offer(agent: Trader, request_id: str, party: str, price: float | None = None, *, sequence: int,
          action: str | None = None) -> dict[str, Any]:
    """An unsigned offer carrying the party's own ``sequence`` on this request (design 4)."""
    body = agent.offer(request_id, party, price, action=action)
    body["sequence"] = sequence
    return body


def instant(agent: Trader, listing_id: str, price: float, *, version: int | None = None,
            request_id: str | None = None) -> dict[str, Any]:
    body = agent.instant(listing_id, price, request_id=request_id)
    if version is not None:
        body["listingVersion"] = version
    return body


# -- deals ---------------------------------------------------------------------------------------------

def deal_document(agent: Trader, deal_id: str) -> dict[str, Any]:
    response = agent.get(f"/market/deals/{deal_id}")
    assert response.status_code == 200, (response.status_code, response.text)
    return response.json()


def sign(agent: Trader, deal_id: str, party: str) -> httpx.Response:
    """The party's agent signs the deal as it reads it now (whatever its status)."""
    document = deal_document(agent, deal_id)
    signature = sign_deal(agent.key, document["deal"], party)[party]["signature"]
    return agent.http.post(f"/market/deals/{deal_id}/signatures", json={"party": party, "signature": signature})


def approve(agent: Trader, deal_id: str, party: str) -> httpx.Response:
    document = deal_document(agent, deal_id)
    signature = sign_deal(agent.owner, document["deal"], party)[party]["signature"]
    return agent.http.post(f"/market/deals/{deal_id}/approvals", json={"party": party, "signature": signature})


def cancel(agent: Trader, deal_id: str) -> httpx.Response:
    """``POST /market/deals/{id}/cancel`` with the agent's token (design 6)."""
    return agent.http.post(f"/market/deals/{deal_id}/cancel", headers=bearer(agent.token))


def clear(agent: Trader, book: str) -> httpx.Response:
    return agent.http.post(f"/market/books/{book}/clear", headers=bearer(agent.token))


def quantity(deal: dict[str, Any]) -> int:
    return int(deal.get("quantity", 1))


def total_cents(deal: dict[str, Any], shipping: float | None = None) -> int:
    """price × quantity + shipping, in cents: the deal's own ``shippingCost`` when it states one,
    else ``shipping`` (what the test knows the listing stated)."""
    stated = deal.get("shippingCost", shipping)
    return cents(deal["finalPrice"]) * quantity(deal) + (cents(stated) if stated is not None else 0)


def notices(agent: Trader, event: str) -> list[dict[str, Any]]:
    """The agent's inbox notifications of ``event``."""
    return [m["body"] for m in agent.inbox()["messages"]
            if m["kind"] == "notification" and m["body"].get("event") == event]
