"""Helpers for the market tests (spec 003): agents with real Ed25519 keys (their own and their
owner's) talking to a real store's ``/market`` over HTTP, and builders for every message."""

from __future__ import annotations

import itertools
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, Iterator

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import Table, select

from haggler.protocols.market.client import AgentKeys
from haggler.protocols.market.text_ads import post_text_ad
from haggler.storage.schema import (
    market_agents,
    market_audit,
    market_bids,
    market_deals,
    market_inbox,
    market_listings,
    market_mandates,
    market_offers,
    market_orders,
    market_requests,
    market_text_ads,
    market_wanted,
)
from haggler.timestamps import utc_z as z  # the tests' short name for a wire timestamp
from haggler.trust.messages import sign_deal, sign_message

VERSION = "0.1.0"
ITEM = {"category": "electronics", "subcategory": "gaming_console", "name": "nintendo_switch"}
BOOK = "electronics.gaming_console.nintendo_switch"
ALL_PERMISSIONS = {"canNegotiate": True, "canAcceptInstantMatch": True, "canUseSealedBid": True,
                   "requiresOwnerApproval": False}
_ids = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids)}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Trader(AgentKeys):
    """One market agent: its key, its owner's key, its token once registered."""

    http: httpx.Client
    id: str
    clock: Any
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    owner: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    token: str = ""

    def now(self) -> str:
        return z(self.clock())

    # -- sending --------------------------------------------------------------------------------

    def sign(self, message: dict[str, Any]) -> dict[str, Any]:
        return sign_message(self.key, message)

    def send(self, path: str, message: dict[str, Any], *, sign: bool = True) -> httpx.Response:
        return self.http.post(path, json=self.sign(message) if sign else message)

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path, params=params, headers=self.auth)

    def register(self, matrix_id: str | None = None) -> dict[str, Any]:
        body = {"agentId": self.id, "publicKey": self.public_key, "ownerPublicKey": self.owner_key}
        if matrix_id is not None:
            body["matrixId"] = matrix_id
        response = self.http.post("/market/agents", json=body)
        assert response.status_code == 201, response.text
        self.token = response.json()["token"]
        return response.json()

    def on(self, http: httpx.Client) -> "Trader":
        """The same agent (keys, token) talking through another client: one per racing thread."""
        return replace(self, http=http)

    def mandate(self, *, issued: datetime | None = None, permissions: dict[str, bool] | None = None,
                **constraints: Any) -> dict[str, Any]:
        """An owner-signed mandate (EUR unless given), not yet filed."""
        body = {"mandateVersion": VERSION, "issuedAt": z(issued or self.clock() - timedelta(hours=1)),
                "agentId": self.id, "constraints": {"currency": "EUR", **constraints},
                "permissions": {**ALL_PERMISSIONS, **(permissions or {})}, "publicKey": self.owner_key}
        return sign_message(self.owner, body)

    def file_mandate(self, **kwargs: Any) -> dict[str, Any]:
        response = self.http.post("/market/mandates", json=self.mandate(**kwargs))
        assert response.status_code in (200, 201), response.text
        return response.json()

    def owner_signed(self, constraints: dict[str, Any], **context: str) -> dict[str, Any]:
        """An embedded ownerMandate, signed by the owner for one listing or wanted ad (``context``:
        its ``listingId`` or ``wantedId``), issued now unless ``issuedAt`` is in ``constraints``."""
        return sign_message(self.owner, {**context, "issuedAt": self.now(), **constraints, "publicKey": self.owner_key})

    # -- message builders --------------------------------------------------------------------------

    def listing(self, *, ask: float = 180, floor: float = 150, min_price: float | None = None,
                condition: str = "good", accessories: tuple[str, ...] = ("charger", "case"),
                negotiable: bool = True, listing_id: str | None = None, description: str | None = None,
                available_until: str | None = None, item: dict[str, str] | None = None,
                timestamp: str | None = None, shipping: float | None = None) -> dict[str, Any]:
        pricing: dict[str, Any] = {"askPrice": ask, "currency": "EUR", "negotiable": negotiable}
        if min_price is not None:
            pricing["minPrice"] = min_price
        listing_id = listing_id or new_id("lst")
        body: dict[str, Any] = {
            "type": "listing", "version": VERSION, "listingId": listing_id,
            "timestamp": timestamp or self.now(), "seller": {"agentId": self.id},
            "item": {**(item or ITEM), "condition": condition, "accessories": list(accessories)},
            "pricing": pricing, "ownerMandate": self.owner_signed({"minAcceptablePrice": floor}, listingId=listing_id),
        }
        if description is not None:
            body["item"]["description"] = description
        logistics: dict[str, Any] = {}
        if available_until is not None:
            logistics["availableUntil"] = available_until
        if shipping is not None:
            logistics["shippingCost"] = shipping
        if logistics:
            body["logistics"] = logistics
        return body

    def wanted(self, *, budget: float = 200, max_spend: float = 200, min_condition: str | None = "good",
               must_have: tuple[str, ...] = ("charger",), active_for: timedelta = timedelta(days=7),
               wanted_id: str | None = None, interests: list[dict[str, Any]] | None = None,
               required_condition: str | None = None) -> dict[str, Any]:
        interest: dict[str, Any] = {**ITEM, "mustHaveAccessories": list(must_have)}
        if min_condition:
            interest["minCondition"] = min_condition
        embedded: dict[str, Any] = {"maxSpend": max_spend}
        if required_condition is not None:
            embedded["requiredCondition"] = required_condition
        wanted_id = wanted_id or new_id("wnt")
        return {"type": "wanted", "version": VERSION, "wantedId": wanted_id, "timestamp": self.now(),
                "buyer": {"agentId": self.id}, "interests": interests if interests is not None else [interest],
                "budget": {"maxPrice": budget, "currency": "EUR", "flexible": False},
                "ownerMandate": self.owner_signed(embedded, wantedId=wanted_id),
                "activeUntil": z(self.clock() + active_for)}

    def contact(self, listing_id: str, protocol: str, *, message: str | None = None,
                request_id: str | None = None) -> dict[str, Any]:
        body = {"type": "contact_request", "version": VERSION, "timestamp": self.now(),
                "requestId": request_id or new_id("req"), "listingId": listing_id, "buyer": {"agentId": self.id},
                "protocol": protocol}
        if message is not None:
            body["message"] = message
        return body

    def agreement(self, request_id: str, protocol: str) -> dict[str, Any]:
        return {"type": "protocol_agreement", "version": VERSION, "timestamp": self.now(), "requestId": request_id,
                "agreedProtocol": protocol}

    def bid(self, request_id: str, party: str, limit: float) -> dict[str, Any]:
        return {"type": "sealed_bid", "version": VERSION, "timestamp": self.now(), "requestId": request_id,
                "party": party, ("maxPrice" if party == "buyer" else "minPrice"): limit}

    def offer(self, request_id: str, party: str, price: float | None = None, *, action: str | None = None,
              message: str | None = None, sequence: int | None = None) -> dict[str, Any]:
        """An offer; its ``sequence`` is the party's next on the request unless given (read from
        the market, which shows a party its request's offers; 1 for an agent not registered, whose
        messages are only built)."""
        if sequence is None:
            shown = self.get(f"/market/contact/{request_id}").json().get("offers", []) if self.token else []
            sequence = sum(1 for turn in shown if turn["party"] == party) + 1
        body: dict[str, Any] = {"type": "offer", "version": VERSION, "timestamp": self.now(), "requestId": request_id,
                                "party": party, "sequence": sequence}
        if action is not None:
            body["action"] = action
        if price is not None:
            body["offerPrice"] = price
        if message is not None:
            body["message"] = message
        return body

    def instant(self, listing_id: str, price: float, *, request_id: str | None = None) -> dict[str, Any]:
        return {"type": "instant_match", "version": VERSION, "timestamp": self.now(),
                "requestId": request_id or new_id("req"), "listingId": listing_id, "buyer": {"agentId": self.id},
                "acceptedPrice": price}

    def order(self, side: str, price: float, quantity: int = 1, *, order_id: str | None = None,
              item: str = BOOK) -> dict[str, Any]:
        return {"type": "order", "version": VERSION, "timestamp": self.now(), "orderId": order_id or new_id("ord"),
                "agentId": self.id, "item": item, "side": side, "price": price, "currency": "EUR",
                "quantity": quantity}

    # -- deals ----------------------------------------------------------------------------------

    def deal(self, deal_id: str) -> dict[str, Any]:
        response = self.get(f"/market/deals/{deal_id}")
        assert response.status_code == 200, response.text
        return response.json()

    def sign_deal(self, deal_id: str, party: str) -> httpx.Response:
        document = self.deal(deal_id)
        signature = sign_deal(self.key, document["deal"], party)[party]["signature"]
        return self.http.post(f"/market/deals/{deal_id}/signatures", json={"party": party, "signature": signature})

    def sign_deal_as_owner(self, deal_id: str, party: str) -> httpx.Response:
        """The owner's approval: the owner key's signature over the deal's signing bytes."""
        document = self.deal(deal_id)
        signature = sign_deal(self.owner, document["deal"], party)[party]["signature"]
        return self.http.post(f"/market/deals/{deal_id}/approvals", json={"party": party, "signature": signature})

    def inbox(self, after: int = 0, **params: Any) -> dict[str, Any]:
        response = self.get("/market/inbox", after=after, **params)
        assert response.status_code == 200, response.text
        return response.json()

    def audit(self) -> list[dict[str, Any]]:
        response = self.get("/market/audit")
        assert response.status_code == 200, response.text
        return response.json()["entries"]


def trader(store: Any, agent_id: str, **mandate: Any) -> Trader:
    """A registered agent with a filed mandate (``mandate`` as constraints; none filed if empty)."""
    agent = Trader(store.http, agent_id, store.clock)
    agent.register()
    if mandate:
        agent.file_mandate(**mandate)
    return agent


def seller_and_buyer(store: Any, *, floor: float = 150, max_spend: float = 200, seller_permissions: dict | None = None,
                     buyer_permissions: dict | None = None, **buyer_constraints: Any) -> tuple[Trader, Trader]:
    seller = trader(store, new_id("seller"))
    seller.file_mandate(minAcceptablePrice=floor, permissions=seller_permissions)
    buyer = trader(store, new_id("buyer"))
    buyer.file_mandate(maxSpend=max_spend, permissions=buyer_permissions, **buyer_constraints)
    return seller, buyer


def created(response: httpx.Response, status: int = 201) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    return response.json()


def listed(seller: Trader, **listing: Any) -> str:
    """Post ``seller.listing(**listing)`` (201); the listing's id."""
    body = seller.listing(**listing)
    created(seller.send("/market/listings", body))
    return body["listingId"]


def agreed_request(seller: Trader, buyer: Trader, listing_id: str, protocol: str, *, agreed: str | None = None,
                   message: str | None = None) -> str:
    """The buyer's contact about the listing proposing ``protocol`` (201), and the seller's
    agreement to ``agreed`` (by default the same protocol, 200); the request's id."""
    request_id = created(buyer.send("/market/contact", buyer.contact(listing_id, protocol, message=message)))["requestId"]
    created(seller.send(f"/market/contact/{request_id}/agreement", seller.agreement(request_id, agreed or protocol)),
            200)
    return request_id


def refused(response: httpx.Response, status: int, **fields: Any) -> dict[str, Any]:
    """A refusal: ``status``, a JSON object with an ``error``, and the given fields."""
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"], body
    for name, value in fields.items():
        assert body.get(name) == value, (name, body)
    return body


# -- the database behind the API -------------------------------------------------------------------

#: Every market table but the audit log: what a refused request must leave exactly as it was.
STATE_TABLES: tuple[Table, ...] = (market_agents, market_mandates, market_listings, market_wanted, market_requests,
                                   market_bids, market_offers, market_deals, market_orders, market_inbox,
                                   market_text_ads)


def database(store: Any) -> Any:
    return store.app.state.market.db


def rows(store: Any, table: Table, *where: Any) -> list[Any]:
    with database(store).read() as conn:
        return list(conn.execute(select(table).where(*where)).all())


def state(store: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every market table but the audit log, sorted: a snapshot to compare."""
    with database(store).read() as conn:
        return {table.name: sorted((tuple(row) for row in conn.execute(select(table)).all()), key=repr)
                for table in STATE_TABLES}


def audit_events(store: Any, agent_id: str | None = None) -> list[tuple[str | None, str, dict[str, Any]]]:
    where = () if agent_id is None else (market_audit.c.agent_id == agent_id,)
    with database(store).read() as conn:
        found = conn.execute(select(market_audit).where(*where).order_by(market_audit.c.seq)).all()
    return [(row.agent_id, row.event, json.loads(row.detail)) for row in found]


@contextmanager
def nothing_changes(store: Any) -> Iterator[None]:
    """Assert that what runs inside changes no market state (the audit log may grow)."""
    before = state(store)
    yield
    after = state(store)
    for table in before:
        assert after[table] == before[table], f"{table} changed: {before[table]} -> {after[table]}"


def text_ad(store: Any, text: str, *, poster: str = "@poster:localhost", room_id: str = "!market:localhost",
            event_id: str | None = None) -> dict[str, Any]:
    """An unsigned plain-text ad posted as the market bot posts one read from the room: through
    ``Market.act`` (one transaction, its audit events kept even when refused); its public view."""
    event_id = event_id or "$" + new_id("event")
    return store.app.state.market.act(lambda conn, events: post_text_ad(
        conn, poster=poster, room_id=room_id, event_id=event_id, text=text, audit=events, now=store.clock()))


def deal_count(store: Any, listing_id: str) -> int:
    return len(rows(store, market_deals, market_deals.c.listing_id == listing_id))


#: What may hold any run of digits by chance and carries no amount: hex keys and signatures, the
#: market's random ids (dl_…, clr_…, mkt_…), the tests' counted ids (lst_12, buyer_190) and an
#: error's random request id (``"request_id":"9201600a153591b2"`` once held a floor's 15359).
_NOT_AMOUNTS = re.compile(r'0x[0-9a-fA-F]+|\b(?:dl|clr|mkt)_[0-9A-Za-z_-]+|\b[a-z]+_\d+\b|"request_id":\s*"[^"]*"')


def everything_said_to(response_texts: list[str], *secrets: str) -> list[tuple[str, str]]:
    """The (secret, text excerpt) pairs for every secret found in any of the texts (hex blobs and
    ids left out: a secret amount found inside a signature is chance, not a leak)."""
    found = []
    for text in (_NOT_AMOUNTS.sub("#", text) for text in response_texts):
        for secret in secrets:
            at = text.find(secret)
            if at >= 0:
                found.append((secret, text[max(0, at - 80):at + 80]))
    return found
