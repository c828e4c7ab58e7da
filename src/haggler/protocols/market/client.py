"""A market agent's side of ``/market`` over HTTP: its keys, its owner's key, and one method per
message it can send, each built in the spec's format and signed (spec 003: Message Types).

The built-in market agents (``haggler market demo``) talk to the market through this client, so
the demo exercises exactly what an outside agent would: real HTTP, real signatures, the market's
own checks. Amounts are given in cents and written on the wire in major units.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any, cast

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from haggler.money import to_decimal_number
from haggler.timestamps import utc_z
from haggler.trust.messages import Party, encode_hex_public_key, sign_deal, sign_message

VERSION = "0.1.0"
ALL_PERMISSIONS = {"canNegotiate": True, "canAcceptInstantMatch": True, "canUseSealedBid": True,
                   "requiresOwnerApproval": False}


class MarketError(RuntimeError):
    """The market refused a request; ``status`` and ``body`` are its answer."""

    def __init__(self, status: int, body: Any) -> None:
        super().__init__(f"{status}: {body}")
        self.status = status
        self.body = body


class AgentKeys:
    """An agent's signing key, its owner's key and its token, and their wire forms: what every
    market agent holds (this client, and the tests' traders)."""

    key: Ed25519PrivateKey
    owner: Ed25519PrivateKey
    token: str

    @property
    def public_key(self) -> str:
        return encode_hex_public_key(self.key)

    @property
    def owner_key(self) -> str:
        return encode_hex_public_key(self.owner)

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


class MarketClient(AgentKeys):
    """One agent: ``key`` signs its messages, ``owner`` signs its mandates (the owner's key would
    live with the owner, not the agent; the demo holds both to play both parts)."""

    def __init__(self, http: httpx.Client, agent_id: str, *, key: Ed25519PrivateKey | None = None,
                 owner: Ed25519PrivateKey | None = None, clock: Callable[[], datetime] | None = None) -> None:
        self.http = http
        self.id = agent_id
        self.key = key or Ed25519PrivateKey.generate()
        self.owner = owner or Ed25519PrivateKey.generate()
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.token = ""
        #: The owner's mandate last filed for this agent, as signed.
        self.mandate: dict[str, Any] | None = None
        self._ids = itertools.count(1)
        self._offers_sent: dict[tuple[str, str], int] = {}

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{self.id}_{next(self._ids)}"

    def now(self) -> str:
        return utc_z(self.clock())

    # -- transport ------------------------------------------------------------------------------------

    def call(self, method: str, path: str, body: Any = None, *, sign: bool = False,
             expect: tuple[int, ...] = (200, 201, 202)) -> Any:
        """Send ``body`` (signed by the agent's key when ``sign``) with the agent's token; the
        answer's JSON, or MarketError when its status is not one of ``expect``."""
        payload = sign_message(self.key, body) if sign else body
        response = self.http.request(method, path, json=payload, headers=self.auth if self.token else None)
        data = response.json() if response.content else None
        if response.status_code not in expect:
            raise MarketError(response.status_code, data)
        return data

    def register(self) -> dict[str, Any]:
        answer = self.call("POST", "/market/agents", {"agentId": self.id, "publicKey": self.public_key,
                                                      "ownerPublicKey": self.owner_key})
        self.token = answer["token"]
        return answer

    def file_mandate(self, constraints: dict[str, Any], *, currency: str = "EUR",
                     permissions: dict[str, bool] | None = None, issued: datetime | None = None) -> Any:
        """The owner signs a mandate for this agent (``constraints`` in cents; ``budget`` as the
        cents of its ``max``) and files it."""
        wire = {name: (to_decimal_number(value) if name in ("maxSpend", "minAcceptablePrice") else value)
                for name, value in constraints.items()}
        if "budget" in constraints:
            wire["budget"] = {"max": to_decimal_number(constraints["budget"]), "currency": currency}
        mandate = {"mandateVersion": VERSION, "issuedAt": utc_z(issued or self.clock() - timedelta(minutes=1)),
                   "agentId": self.id, "constraints": {"currency": currency, **wire},
                   "permissions": {**ALL_PERMISSIONS, **(permissions or {})}, "publicKey": self.owner_key}
        signed = sign_message(self.owner, mandate)
        answer = self.call("POST", "/market/mandates", signed)
        self.mandate = signed  # on file: the market took it
        return answer

    def owner_signed(self, constraints: dict[str, Any], **context: str) -> dict[str, Any]:
        """A listing's or wanted ad's embedded ``ownerMandate``, signed by the owner for that one
        message (``context``: its ``listingId`` or ``wantedId``) as of now."""
        return sign_message(self.owner, {**context, "issuedAt": self.now(), **constraints,
                                         "publicKey": self.owner_key})

    # -- messages -------------------------------------------------------------------------------------

    def post_listing(self, item: dict[str, Any], *, ask: int, floor: int, currency: str = "EUR",
                     negotiable: bool = True, listing_id: str | None = None) -> dict[str, Any]:
        listing_id = listing_id or self.new_id("lst")
        listing = {"type": "listing", "version": VERSION, "listingId": listing_id,
                   "timestamp": self.now(), "seller": {"agentId": self.id}, "item": item,
                   "pricing": {"askPrice": to_decimal_number(ask), "currency": currency, "negotiable": negotiable},
                   "ownerMandate": self.owner_signed({"minAcceptablePrice": to_decimal_number(floor)},
                                                     listingId=listing_id)}
        self.call("POST", "/market/listings", listing, sign=True)
        return listing

    def post_wanted(self, interest: dict[str, Any], *, budget: int, max_spend: int, currency: str = "EUR",
                    active_for: timedelta = timedelta(days=7)) -> dict[str, Any]:
        wanted_id = self.new_id("wnt")
        wanted = {"type": "wanted", "version": VERSION, "wantedId": wanted_id, "timestamp": self.now(),
                  "buyer": {"agentId": self.id}, "interests": [interest],
                  "budget": {"maxPrice": to_decimal_number(budget), "currency": currency, "flexible": False},
                  "ownerMandate": self.owner_signed({"maxSpend": to_decimal_number(max_spend)}, wantedId=wanted_id),
                  "activeUntil": utc_z(self.clock() + active_for)}
        self.call("POST", "/market/wanted", wanted, sign=True)
        return wanted

    def contact(self, listing_id: str, protocol: str, message: str | None = None) -> str:
        request_id = self.new_id("req")
        body = {"type": "contact_request", "version": VERSION, "timestamp": self.now(), "requestId": request_id,
                "listingId": listing_id, "buyer": {"agentId": self.id}, "protocol": protocol}
        if message:
            body["message"] = message
        self.call("POST", "/market/contact", body, sign=True)
        return request_id

    def agree(self, request_id: str, protocol: str) -> Any:
        return self.call("POST", f"/market/contact/{request_id}/agreement",
                         {"type": "protocol_agreement", "version": VERSION, "timestamp": self.now(),
                          "requestId": request_id, "agreedProtocol": protocol}, sign=True)

    def sealed_bid(self, request_id: str, party: str, limit: int) -> Any:
        return self.call("POST", f"/market/contact/{request_id}/bids",
                         {"type": "sealed_bid", "version": VERSION, "timestamp": self.now(), "requestId": request_id,
                          "party": party, ("maxPrice" if party == "buyer" else "minPrice"): to_decimal_number(limit)},
                         sign=True)

    def offer(self, request_id: str, party: str, *, price: int | None = None, action: str = "offer",
              message: str | None = None) -> Any:
        sequence = self._offers_sent.get((request_id, party), 0) + 1
        body: dict[str, Any] = {"type": "offer", "version": VERSION, "timestamp": self.now(), "requestId": request_id,
                                "party": party, "sequence": sequence}
        if action != "offer":
            body["action"] = action
        if price is not None:
            body["offerPrice"] = to_decimal_number(price)
        if message:
            body["message"] = message
        answer = self.call("POST", f"/market/contact/{request_id}/offers", body, sign=True)
        self._offers_sent[(request_id, party)] = sequence  # only once the market took it
        return answer

    def instant_match(self, listing_id: str, price: int) -> Any:
        return self.call("POST", f"/market/listings/{listing_id}/instant_match",
                         {"type": "instant_match", "version": VERSION, "timestamp": self.now(),
                          "requestId": self.new_id("req"), "listingId": listing_id, "buyer": {"agentId": self.id},
                          "acceptedPrice": to_decimal_number(price)}, sign=True)

    def order(self, item: str, side: str, price: int, quantity: int = 1, currency: str = "EUR") -> Any:
        return self.call("POST", f"/market/books/{item}/orders",
                         {"type": "order", "version": VERSION, "timestamp": self.now(), "orderId": self.new_id("ord"),
                          "agentId": self.id, "item": item, "side": side, "price": to_decimal_number(price),
                          "currency": currency, "quantity": quantity}, sign=True)

    def clear(self, item: str) -> Any:
        return self.call("POST", f"/market/books/{item}/clear")

    # -- reading and signing deals --------------------------------------------------------------------

    def inbox(self, after: int = 0) -> Any:
        return self.call("GET", f"/market/inbox?after={after}")

    def listings(self, **filters: Any) -> list[dict[str, Any]]:
        query = "&".join(f"{name}={value}" for name, value in filters.items())
        return self.call("GET", "/market/listings" + (f"?{query}" if query else ""))["listings"]

    def deal(self, deal_id: str) -> Any:
        return self.call("GET", f"/market/deals/{deal_id}")

    def sign_deal(self, deal_id: str, party: str) -> Any:
        """Sign the deal as served (the agent's mandate is checked again by the market)."""
        deal = self.deal(deal_id)["deal"]
        signature = sign_deal(self.key, deal, cast(Party, party))[party]["signature"]  # sign_deal checks it
        return self.call("POST", f"/market/deals/{deal_id}/signatures", {"party": party, "signature": signature})
