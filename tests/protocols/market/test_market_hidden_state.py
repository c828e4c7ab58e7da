"""Hidden state stays hidden (spec 003: 1. Listing, "minPrice: floor price (optional, may be
hidden)"; Owner Mandate Format; Security Model): a listing's pricing.minPrice, the floor in its
embedded ownerMandate and every constraint of an agent's mandate reach only that agent.

A whole market day is played — listings, a wanted ad, a sealed bid, offers, an instant match,
an auction, refusals — with distinctive amounts as the secrets (151.37, 263.17, ...). Then every
GET the API has is made by everyone who is not the secret's owner (the counterparty, an
outsider, nobody at all), and the text of every response is searched for each secret, as an
amount in major units, in cents, and as its field name."""

from __future__ import annotations

from collections import defaultdict

import pytest

from tests.support.market import (
    BOOK,
    ITEM,
    Trader,
    created,
    everything_said_to,
    new_id,
    refused,
    trader,
)

SELLER_FLOOR, LISTING_FLOOR, MIN_PRICE = 151.37, 152.41, 153.59
SELLER_DEADLINE = "2027-03-14T07:13:51Z"
BUYER_CAP, WANTED_CAP = 263.17, 262.83
BUYER_DEADLINE = "2027-05-06T08:09:10Z"
FIELD_NAMES = ("minPrice", "minAcceptablePrice", "maxSpend", "dealMustCloseBy", "requiredCondition",
               "requiredAccessories", "constraints")


def _forms(*amounts: float) -> tuple[str, ...]:
    return tuple(form for amount in amounts for form in (f"{amount:.2f}", str(round(amount * 100))))


SELLER_SECRETS = _forms(SELLER_FLOOR, LISTING_FLOOR, MIN_PRICE) + (SELLER_DEADLINE[:19],)
BUYER_SECRETS = _forms(BUYER_CAP, WANTED_CAP) + (BUYER_DEADLINE[:19],)


class Seen:
    """Every response text each viewer got, by viewer name."""

    def __init__(self) -> None:
        self.texts: dict[str, list[str]] = defaultdict(list)

    def add(self, viewer: str, response) -> None:
        self.texts[viewer].append(f"{response.request.method} {response.request.url} -> {response.text}")


@pytest.fixture
def market(make_store):
    store = make_store()
    seller = trader(store, new_id("seller"))
    seller.file_mandate(minAcceptablePrice=SELLER_FLOOR, dealMustCloseBy=SELLER_DEADLINE)
    buyer = trader(store, new_id("buyer"))
    buyer.file_mandate(maxSpend=BUYER_CAP, requiredCondition="good", requiredAccessories=["charger"],
                       dealMustCloseBy=BUYER_DEADLINE)
    outsider = trader(store, new_id("outsider"), maxSpend=50)
    return store, seller, buyer, outsider


def _play_a_market_day(store, seller: Trader, buyer: Trader, seen: Seen) -> dict[str, str]:
    """Every protocol once, recording what the buyer and the seller were told. Returns the ids."""
    ids = {}

    def as_buyer(response, status=None):
        seen.add("buyer", response)
        if status is not None:
            assert response.status_code == status, response.text
        return response

    def as_seller(response, status=None):
        seen.add("seller", response)
        if status is not None:
            assert response.status_code == status, response.text
        return response

    def listing(ask, **kwargs):
        body = seller.listing(ask=ask, floor=LISTING_FLOOR, min_price=MIN_PRICE, **kwargs)
        as_seller(seller.send("/market/listings", body), 201)
        return body["listingId"]

    ids["sealed"] = listing(198, description="Used for 6 months, no scratches")
    wanted = buyer.wanted(budget=240, max_spend=WANTED_CAP, interests=[{**ITEM, "minCondition": "good"}])
    as_buyer(buyer.send("/market/wanted", wanted), 201)
    ids["offers"] = listing(205)  # notifies the buyer: it fits the wanted ad
    ids["instant"] = listing(189)
    ids["too_dear"] = listing(270)

    # sealed bid: the buyer first, the seller second; overlap closes at the midpoint
    request = buyer.contact(ids["sealed"], "sealed_bid")
    as_buyer(buyer.send("/market/contact", request), 201)
    rid = ids["sealed_request"] = request["requestId"]
    as_seller(seller.send(f"/market/contact/{rid}/agreement", seller.agreement(rid, "sealed_bid")), 200)
    as_buyer(buyer.send(f"/market/contact/{rid}/bids", buyer.bid(rid, "buyer", 199.99)), 202)
    closed = as_seller(seller.send(f"/market/contact/{rid}/bids", seller.bid(rid, "seller", 160.01)), 201)
    ids["sealed_deal"] = closed.json()["dealId"]
    as_buyer(buyer.sign_deal(ids["sealed_deal"], "buyer"), 200)
    as_seller(seller.sign_deal(ids["sealed_deal"], "seller"), 200)

    # a sealed bid that fails: neither bid told
    request = buyer.contact(ids["instant"], "sealed_bid")
    as_buyer(buyer.send("/market/contact", request), 201)
    failed = ids["failed_request"] = request["requestId"]
    as_seller(seller.send(f"/market/contact/{failed}/agreement", seller.agreement(failed, "sealed_bid")), 200)
    as_seller(seller.send(f"/market/contact/{failed}/bids", seller.bid(failed, "seller", 180)), 202)
    as_buyer(buyer.send(f"/market/contact/{failed}/bids", buyer.bid(failed, "buyer", 170)), 200)

    # offers, with refusals on both sides (each agent hears its own limit, nobody else's)
    request = buyer.contact(ids["offers"], "natural_language")
    as_buyer(buyer.send("/market/contact", request), 201)
    rid = ids["offers_request"] = request["requestId"]
    as_seller(seller.send(f"/market/contact/{rid}/agreement", seller.agreement(rid, "natural_language")), 200)
    as_buyer(buyer.send(f"/market/contact/{rid}/offers", buyer.offer(rid, "buyer", 150)), 200)
    as_seller(seller.send(f"/market/contact/{rid}/offers", seller.offer(rid, "seller", 140)), 403)
    as_seller(seller.send(f"/market/contact/{rid}/offers", seller.offer(rid, "seller", action="accept")), 403)
    as_seller(seller.send(f"/market/contact/{rid}/offers", seller.offer(rid, "seller", 199)), 200)
    as_buyer(buyer.send(f"/market/contact/{rid}/offers", buyer.offer(rid, "buyer", 300)), 403)
    as_buyer(buyer.send(f"/market/contact/{rid}/offers", buyer.offer(rid, "buyer", message="I can do 185€")), 200)
    as_seller(seller.send(f"/market/contact/{rid}/offers", seller.offer(rid, "seller", action="accept")), 201)

    # instant match: refused above the buyer's cap, then at a live ask
    as_buyer(buyer.send(f"/market/listings/{ids['too_dear']}/instant_match", buyer.instant(ids["too_dear"], 270)), 403)
    done = as_buyer(buyer.send(f"/market/listings/{ids['instant']}/instant_match",
                               buyer.instant(ids["instant"], 189)), 201)
    ids["instant_deal"] = done.json()["dealId"]

    # the double auction, with a refused order each. A book names no condition, so a buyer whose
    # owner requires one cannot bid in it (fail closed): a twin with the same cap and deadline
    # does, and what it is told counts as told to the buyer.
    as_buyer(buyer.send(f"/market/books/{BOOK}/orders", buyer.order("buy", 175)), 403)
    bidder = trader(store, new_id("bidder"), maxSpend=BUYER_CAP, dealMustCloseBy=BUYER_DEADLINE)
    as_seller(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 150)), 403)
    as_buyer(bidder.send(f"/market/books/{BOOK}/orders", bidder.order("buy", 270)), 403)
    as_seller(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 170, 2)), 201)
    as_buyer(bidder.send(f"/market/books/{BOOK}/orders", bidder.order("buy", 175)), 201)
    cleared = as_buyer(store.http.post(f"/market/books/{BOOK}/clear", headers=bidder.auth), 200)
    ids["auction_deal"] = cleared.json()["clearings"][0]["dealIds"][0]
    return ids


def _every_get(store, viewer: Trader | None, ids: dict[str, str], agents: list[Trader]) -> list:
    """Every GET of the market API, as ``viewer`` (None: no token)."""
    headers = viewer.auth if viewer else {}

    def get(path, **params):
        return store.http.get(path, params=params, headers=headers)

    responses = [get("/market/listings"), get("/market/listings", name=ITEM["name"], condition="poor"),
                 get("/market/listings", maxPrice="1000"), get("/market/wanted"), get("/market/wanted", name=ITEM["name"]),
                 get(f"/market/books/{BOOK}"), get("/market/schemas")]
    responses += [get(f"/market/listings/{ids[key]}") for key in ("sealed", "offers", "instant", "too_dear")]
    responses += [get(f"/market/agents/{agent.id}") for agent in agents]
    responses += [get(f"/market/mandates/{agent.id}") for agent in agents]
    for key in ("sealed_request", "failed_request", "offers_request"):
        responses.append(get(f"/market/contact/{ids[key]}"))
    for key in ("sealed_deal", "instant_deal", "auction_deal"):
        responses.append(get(f"/market/deals/{ids[key]}"))
    responses += [get("/market/inbox"), get("/market/inbox", after="0", limit="3"), get("/market/audit")]
    return responses


def test_no_response_to_anyone_else_shows_a_floor_a_min_price_or_a_mandate_constraint(market):
    """spec 003: 1. Listing ("minPrice ... may be hidden"), Owner Mandate Format: every GET —
    listing search, a listing by id with no token, another agent's token or the counterparty's,
    wanted ads, the inbox, the contact and deal views, the book, the audit log, agents and
    mandates — and every answer to a protocol message, for everyone but the secret's owner,
    is free of the seller's floors and minPrice and of the buyer's mandate constraints."""
    store, seller, buyer, outsider = market
    seen = Seen()
    ids = _play_a_market_day(store, seller, buyer, seen)
    agents = [seller, buyer, outsider]
    for viewer, name in ((None, "nobody"), (outsider, "outsider"), (buyer, "buyer"), (seller, "seller")):
        for response in _every_get(store, viewer, ids, agents):
            assert response.status_code < 500, response.text
            own_mandate = viewer is not None and response.url.path == f"/market/mandates/{viewer.id}"
            seen.add(f"{name}'s own mandate" if own_mandate else name, response)

    told = {name: texts for name, texts in seen.texts.items()}
    assert set(told) == {"nobody", "outsider", "buyer", "seller", "outsider's own mandate", "buyer's own mandate",
                         "seller's own mandate"}
    for name in ("nobody", "outsider", "buyer"):
        assert everything_said_to(told[name], *SELLER_SECRETS) == [], name
    for name in ("nobody", "outsider", "seller"):
        assert everything_said_to(told[name], *BUYER_SECRETS) == [], name
    for name in ("nobody", "outsider"):
        assert everything_said_to(told[name], *(f'"{field}"' for field in FIELD_NAMES)) == [], name
    assert everything_said_to(told["buyer"], '"minPrice"', '"minAcceptablePrice"') == []
    assert everything_said_to(told["seller"], '"maxSpend"', '"requiredCondition"', '"requiredAccessories"',
                              '"dealMustCloseBy"') == []

    # the owners themselves do see their own (the searches above would have found them)
    seller_saw = told["seller"] + told["seller's own mandate"]
    shown_to_owner = {"151.37", "152.41", "153.59", SELLER_DEADLINE[:19]}
    assert {secret for secret, _ in everything_said_to(seller_saw, *SELLER_SECRETS)} >= shown_to_owner
    buyer_saw = told["buyer"] + told["buyer's own mandate"]
    assert {secret for secret, _ in everything_said_to(buyer_saw, "263.17", "26317", BUYER_DEADLINE[:19])} == \
        {"263.17", "26317", BUYER_DEADLINE[:19]}
    # and the market day really happened: three deals, the public sees the asks
    assert {seller.deal(ids[k])["status"] for k in ("sealed_deal", "instant_deal", "auction_deal")} == \
        {"confirmed", "awaiting_signatures"}
    assert everything_said_to(told["nobody"], '"askPrice":198')


def test_a_listing_by_id_shows_min_price_to_its_seller_only(market):
    """spec 003: 1. Listing ("minPrice: floor price (optional, may be hidden)"): GET
    /market/listings/{id} is the whole signed message for the seller's own token, and the public
    allow-list — no minPrice, no embedded floor — with no token or any other agent's."""
    store, seller, buyer, outsider = market
    listing = seller.listing(ask=199, floor=LISTING_FLOOR, min_price=MIN_PRICE)
    created(seller.send("/market/listings", listing))
    path = f"/market/listings/{listing['listingId']}"
    own = seller.get(path).json()
    assert own["pricing"]["minPrice"] == MIN_PRICE and own["ownerMandate"]["minAcceptablePrice"] == LISTING_FLOOR
    assert own["signature"] == seller.sign(listing)["signature"]
    for response in (store.http.get(path), buyer.get(path), outsider.get(path)):
        shown = response.json()
        assert "minPrice" not in shown["pricing"] and shown["pricing"]["askPrice"] == 199
        assert shown["ownerMandate"] == {"publicKey": seller.owner_key, "verified": True}
        assert everything_said_to([response.text], *SELLER_SECRETS) == []
    refused(store.http.get(path, headers={"Authorization": "Bearer mkt_wrong"}), 401)


def test_another_agents_audit_entries_and_mandate_are_not_shown(market):
    """spec 003: Security Model ("Audit logging"), Owner Mandate Format: GET /market/audit with
    an agent's token is that agent's own log only — another agent's refusals never appear in it;
    GET /market/mandates/{id} of another agent is 403 and tells nothing."""
    store, seller, buyer, outsider = market
    created(seller.send("/market/listings", seller.listing(ask=199, floor=LISTING_FLOOR)))
    refused(seller.send("/market/listings", seller.listing(ask=150, floor=LISTING_FLOOR)), 403)
    refused(buyer.send(f"/market/books/{BOOK}/orders", buyer.order("buy", 300)), 403)
    assert [e["agentId"] for e in seller.audit()] == [seller.id]
    assert [e["agentId"] for e in buyer.audit()] == [buyer.id]
    assert outsider.audit() == []
    for viewer, owner, secrets in ((buyer, seller, SELLER_SECRETS), (outsider, seller, SELLER_SECRETS),
                                   (seller, buyer, BUYER_SECRETS)):
        response = viewer.get(f"/market/mandates/{owner.id}")
        assert response.status_code == 403 and everything_said_to([response.text], *secrets) == []
        assert everything_said_to([viewer.get("/market/audit").text], *secrets) == []
