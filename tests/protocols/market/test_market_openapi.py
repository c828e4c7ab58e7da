"""The market's OpenAPI document against real answers.

The fuzzer (``tests/test_openapi_fuzz.py``) cannot sign, so it rarely gets past a 401 or a 422.
Here real agents walk every operation through its successes and its refusals, and every answer
must match the schema the document gives for its status and media type."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest
from jsonschema import Draft202012Validator

from haggler.protocols.market.messages import SCHEMA_NAMES, validate
from haggler.protocols.market.views import message_schema
from haggler.protocols.matching.settings import MatchingSettings
from haggler.trust.messages import sign_deal
from tests.support.market import BOOK, Trader, bearer, created, new_id, seller_and_buyer, text_ad, trader
from tests.support.servers import FakeClock

TOKEN = "market-operator-token-0123456789"


class Recorder:
    """Every market response the client receives, checked against the document as it comes."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.routes = [(re.compile("^" + re.sub(r"\\{\w+\\}", "[^/]+", re.escape(path)) + "$"), path)
                       for path in document["paths"] if path.startswith("/market")]
        self.seen: set[tuple[str, str, int]] = set()

    def template(self, path: str) -> str:
        matches = [template for regex, template in self.routes if regex.match(path)]
        assert matches, f"{path} is not in the document"
        return min(matches, key=lambda t: t.count("{"))  # /market/listings/x over /market/{...}

    def __call__(self, response: httpx.Response) -> None:
        if not response.request.url.path.startswith("/market"):
            return
        response.read()
        method, template = response.request.method.lower(), self.template(response.request.url.path)
        operation = self.document["paths"][template][method]
        status = response.status_code
        assert str(status) in operation["responses"], f"{method} {template}: {status} is not documented: {response.text}"
        content = operation["responses"][str(status)]["content"]
        media = response.headers["content-type"].split(";")[0]
        assert media in content, f"{method} {template}: {media} is not documented for {status}"
        root = {"components": self.document["components"], **content[media]["schema"]}
        errors = sorted(Draft202012Validator(root).iter_errors(response.json()), key=str)
        assert not errors, f"{method} {template} {status}: {errors[0].message} in {response.text[:800]}"
        self.seen.add((method, template, status))


@pytest.fixture
def market(make_store):
    store = make_store(matching=MatchingSettings(operator_token=TOKEN))
    recorder = Recorder(store.http.get("/openapi.json").json())
    store.http.event_hooks["response"].append(recorder)
    return store, recorder


def _deal(agent: Any, deal_id: str, party: str, key: Any) -> httpx.Response:
    document = agent.deal(deal_id)
    signature = sign_deal(key, document["deal"], party)[party]["signature"]
    path = "signatures" if key is agent.key else "approvals"
    return agent.http.post(f"/market/deals/{deal_id}/{path}", json={"party": party, "signature": signature})


def test_every_operation_answers_as_the_document_says(market):
    store, seen = market
    http = store.http
    # schemas and identity
    assert {s["type"] for s in http.get("/market/schemas").json()["schemas"]} == set(SCHEMA_NAMES)
    http.get("/market/schemas/listing.json")
    http.get("/market/schemas/nope.json")
    seller, buyer = seller_and_buyer(store, buyer_permissions={"requiresOwnerApproval": True})
    http.post("/market/agents", json={"agentId": seller.id, "publicKey": seller.public_key,
                                      "ownerPublicKey": seller.owner_key})  # 409
    http.post("/market/agents", json={"agentId": "x"})  # 422
    http.post("/market/agents", content=b"[")  # 400
    http.get(f"/market/agents/{seller.id}")
    http.get("/market/agents/nobody")
    seller.file_mandate(minAcceptablePrice=150, issued=store.clock())  # 200: replaced
    http.post("/market/mandates", json=seller.mandate(minAcceptablePrice=150))  # 409: older
    seller.get(f"/market/mandates/{seller.id}")
    buyer.get(f"/market/mandates/{seller.id}")  # 403
    http.get(f"/market/mandates/{seller.id}")  # 401
    loner = trader(store, new_id("loner"))
    loner.get(f"/market/mandates/{loner.id}")  # 404

    # listings and wanted ads
    created(buyer.send("/market/wanted", buyer.wanted()))
    listing = seller.listing(min_price=155)
    created(seller.send("/market/listings", listing))
    store.clock.advance(seconds=1)
    assert seller.send("/market/listings", {**listing, "timestamp": seller.now()}).status_code == 200  # revised
    seller.send("/market/listings", seller.listing(ask=100))  # 403 below the floor
    loner.send("/market/listings", loner.listing())  # 403 no mandate
    http.get("/market/listings", params={"condition": "good", "maxPrice": 200})
    http.get("/market/listings", params={"condition": "mint"})  # 400
    http.get(f"/market/listings/{listing['listingId']}")
    seller.get(f"/market/listings/{listing['listingId']}")
    http.get("/market/listings/nothing")
    http.get("/market/wanted", params={"name": "nintendo_switch"})

    # unsigned plain-text ads: the market bot posts them (Market.act), the API only shows them
    ad = text_ad(store, "SELLING: nintendo switch — asking 170€ (can negotiate). DM me.")
    wanted_ad = text_ad(store, "BUYING: nintendo switch, max 150")
    http.get(f"/market/ads/{ad['adId']}")
    http.get("/market/ads/txt_nothing")  # 404
    assert http.get("/market/listings", params={"include": "unsigned"}).json()["unsigned"][0] == ad
    assert http.get("/market/wanted", params={"include": "unsigned"}).json()["unsigned"][0] == wanted_ad
    http.get("/market/listings", params={"include": "everything"})  # 400
    http.get(f"/market/listings/{ad['adId']}")  # 409: no listing
    buyer.send("/market/contact", buyer.contact(ad["adId"], "sealed_bid"))  # 409: unsigned

    # a sealed bid that closes, both sign, the buyer's owner approves
    request_id = created(buyer.send("/market/contact", buyer.contact(listing["listingId"], "sealed_bid")))["requestId"]
    buyer.get(f"/market/contact/{request_id}")
    loner.get(f"/market/contact/{request_id}")  # 403
    buyer.send(f"/market/contact/{request_id}/bids", buyer.bid(request_id, "buyer", 185))  # 409 not agreed yet
    seller.send(f"/market/contact/{request_id}/agreement", seller.agreement(request_id, "sealed_bid"))
    buyer.send(f"/market/contact/{request_id}/bids", buyer.bid(request_id, "buyer", 250))  # 403 maxSpend
    buyer.send(f"/market/contact/{request_id}/bids", buyer.bid(request_id, "buyer", 185))  # 202
    closed = seller.send(f"/market/contact/{request_id}/bids", seller.bid(request_id, "seller", 155.01))
    assert closed.status_code == 201 and closed.json()["finalPrice"] == 170.01  # half a cent up, to the seller
    deal_id = closed.json()["dealId"]
    seller.get(f"/market/contact/{request_id}")
    http.post(f"/market/deals/{deal_id}/signatures", json={"party": "buyer", "signature": "0x" + "0" * 128})  # 401
    _deal(buyer, deal_id, "buyer", buyer.key)
    _deal(seller, deal_id, "seller", seller.key)
    _deal(seller, deal_id, "seller", seller.owner)  # 409: the seller's mandate asks for no approval
    approved = _deal(buyer, deal_id, "buyer", buyer.owner)
    assert approved.json()["status"] == "confirmed" and approved.json()["ownerApprovals"]["buyer"]
    loner.get(f"/market/deals/{deal_id}")  # 403
    buyer.get("/market/deals/dl_nothing")  # 404
    seller.send("/market/contact", seller.contact(listing["listingId"], "sealed_bid"))  # 409: sold
    buyer.send("/market/contact", buyer.contact(listing["listingId"], "sealed_bid", request_id="r 1"))  # 422

    # sealed bids that do not overlap
    other = seller.listing()
    created(seller.send("/market/listings", other))
    request_id = created(buyer.send("/market/contact", buyer.contact(other["listingId"], "sealed_bid")))["requestId"]
    seller.send(f"/market/contact/{request_id}/agreement", seller.agreement(request_id, "sealed_bid"))
    buyer.send(f"/market/contact/{request_id}/bids", buyer.bid(request_id, "buyer", 150))
    failed = seller.send(f"/market/contact/{request_id}/bids", seller.bid(request_id, "seller", 160))
    assert failed.status_code == 200 and failed.json()["state"] == "failed"

    # offers: one negotiation closes, one is rejected
    for closing in (True, False):
        listing = seller.listing()
        created(seller.send("/market/listings", listing))
        request_id = created(buyer.send("/market/contact", buyer.contact(listing["listingId"],
                                                                          "natural_language")))["requestId"]
        seller.send(f"/market/contact/{request_id}/agreement", seller.agreement(request_id, "natural_language"))
        buyer.send(f"/market/contact/{request_id}/offers", buyer.offer(request_id, "buyer", message="165€?"))
        seller.send(f"/market/contact/{request_id}/offers", seller.offer(request_id, "seller", 175))
        buyer.send(f"/market/contact/{request_id}/offers",
                   buyer.offer(request_id, "buyer", action="accept" if closing else "reject"))
        buyer.get(f"/market/contact/{request_id}")

    # instant match, an expired listing
    listing = seller.listing(ask=190)
    created(seller.send("/market/listings", listing))
    buyer.send(f"/market/listings/{listing['listingId']}/instant_match", buyer.instant(listing["listingId"], 180))
    matched = buyer.send(f"/market/listings/{listing['listingId']}/instant_match",
                         buyer.instant(listing["listingId"], 190)).json()["dealId"]
    loner.http.post(f"/market/deals/{matched}/cancel", headers=loner.auth)  # 403
    assert seller.http.post(f"/market/deals/{matched}/cancel", headers=seller.auth).json()["status"] == "cancelled"
    buyer.send("/market/listings/nothing/instant_match", buyer.instant("nothing", 190))
    soon = seller.listing(available_until=store.clock().date().isoformat())
    created(seller.send("/market/listings", soon))
    store.clock.advance(days=1)
    buyer.send("/market/contact", buyer.contact(soon["listingId"], "sealed_bid"))  # 410
    http.get(f"/market/listings/{soon['listingId']}")  # expired

    # the double auction
    created(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 160, 2)))
    created(buyer.send(f"/market/books/{BOOK}/orders", buyer.order("buy", 170.01, 1)))
    resting = seller.order("sell", 300)
    created(seller.send(f"/market/books/{BOOK}/orders", resting))
    seller.send(f"/market/books/{BOOK}/orders", seller.order("buy", 170))  # 409: both sides
    http.get(f"/market/books/{BOOK}")
    http.get("/market/books/Not-A-Book")
    buyer.http.delete(f"/market/books/{BOOK}/orders/{resting['orderId']}", headers=buyer.auth)  # 403
    http.delete(f"/market/books/{BOOK}/orders/{resting['orderId']}", headers=seller.auth)
    http.delete(f"/market/books/{BOOK}/orders/{resting['orderId']}", headers=seller.auth)  # 409
    http.delete(f"/market/books/{BOOK}/orders/nothing", headers=seller.auth)  # 404
    http.post(f"/market/books/{BOOK}/clear")  # 401
    cleared = http.post(f"/market/books/{BOOK}/clear", headers=seller.auth).json()["clearings"][0]
    assert cleared["price"] == 165.01 and cleared["volume"] == 1  # the k = 0.5 midpoint, half a cent up
    http.post(f"/market/books/{BOOK}/clear", headers=bearer(TOKEN))

    # the inbox and the audit log
    buyer.get("/market/inbox", after=0, limit=500)
    buyer.get("/market/inbox", after="x")  # 400
    http.get("/market/inbox")  # 401
    buyer.get("/market/audit")
    http.get("/market/audit", headers=bearer(TOKEN))

    documented = {(method, path) for path, ops in seen.document["paths"].items() if path.startswith("/market")
                  for method in ops}
    succeeded = {(method, path) for method, path, status in seen.seen if status < 300}
    assert documented - succeeded == set(), "every operation answered with a success at least once"
    statuses = {status for _, _, status in seen.seen}
    assert statuses >= {200, 201, 202, 400, 401, 403, 404, 409, 410, 422}


def _messages() -> dict[str, dict[str, Any]]:
    """One valid message of every type, from the tests' builders."""
    agent = Trader(None, "agent_1", FakeClock())  # type: ignore[arg-type]  # builds, never sends
    deal = {"type": "deal_confirmed", "version": "0.1.0", "timestamp": agent.now(), "requestId": "req_1",
            "listingId": "lst_1", "finalPrice": 170.01, "protocol": "sealed_bid",
            "buyer": {"agentId": "b", "signature": "0x" + "1" * 128},
            "seller": {"agentId": "s", "signature": "0x" + "2" * 128}}
    built = {"listing": agent.listing(min_price=155), "wanted": agent.wanted(),
             "contact_request": agent.contact("lst_1", "sealed_bid", message="hello"),
             "protocol_agreement": agent.agreement("req_1", "sealed_bid"),
             "sealed_bid": agent.bid("req_1", "seller", 155.5), "instant_match": agent.instant("lst_1", 180),
             "offer": agent.offer("req_1", "buyer", 165, message="165?"), "deal_confirmed": deal,
             "mandate": agent.mandate(maxSpend=200, requiredCondition="good", requiredAccessories=["charger"]),
             "order": agent.order("buy", 170.1, 2)}
    return {name: message if name in ("deal_confirmed", "mandate") else agent.sign(message)
            for name, message in built.items()}


@pytest.mark.parametrize("name", SCHEMA_NAMES)
def test_the_documents_message_schemas_are_the_served_ones(name):
    """The document inlines each message's schema (it cannot follow the file's own references):
    nothing is left to follow, it points at the file that is the contract, and it agrees with
    the market's validation on a valid message and on one with an unknown field."""
    inlined = message_schema(name)
    assert "$ref" not in str(inlined) and "$defs" not in inlined
    assert f"/market/schemas/{name}.json" in inlined["description"]
    Draft202012Validator.check_schema(inlined)
    message = _messages()[name]
    validate(message, name)
    assert not list(Draft202012Validator(inlined).iter_errors(message))
    assert list(Draft202012Validator(inlined).iter_errors({**message, "surprise": 1}))
