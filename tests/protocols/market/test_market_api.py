"""The market's HTTP API (spec 003), over real HTTP against a running store. Each test names the
section of the spec it holds the market to."""

from __future__ import annotations

import pytest

from tests.support.market import BOOK, created, new_id, seller_and_buyer, trader


@pytest.fixture
def store(make_store):
    return make_store()


def test_sealed_bid_flow_closes_at_the_midpoint_and_both_sign(store):
    """spec 003: 3. Contact Request, 4. Protocol Agreement, 5. Sealed Bid, 8. Deal Confirmation."""
    seller, buyer = seller_and_buyer(store)
    listing = seller.listing(ask=180, floor=150, min_price=155)
    assert created(seller.send("/market/listings", listing))["listingId"] == listing["listingId"]
    contact = buyer.contact(listing["listingId"], "sealed_bid", message="Interested in your Switch.")
    request_id = created(buyer.send("/market/contact", contact))["requestId"]
    agreed = seller.send(f"/market/contact/{request_id}/agreement", seller.agreement(request_id, "sealed_bid"))
    assert agreed.status_code == 200, agreed.text
    first = buyer.send(f"/market/contact/{request_id}/bids", buyer.bid(request_id, "buyer", 185))
    assert first.status_code == 202, first.text
    assert "185" not in seller.get(f"/market/contact/{request_id}").text
    second = created(seller.send(f"/market/contact/{request_id}/bids", seller.bid(request_id, "seller", 155)))
    assert second["finalPrice"] == 170
    deal_id = second["dealId"]
    assert buyer.sign_deal(deal_id, "buyer").json()["status"] == "awaiting_signatures"
    document = seller.sign_deal(deal_id, "seller").json()
    assert document["status"] == "confirmed"
    assert document["deal"]["finalPrice"] == 170


def test_offers_instant_match_and_auction_smoke(store):
    """spec 003: 6. Instant Match, 7. Natural Language Offer, Protocol 4: Double Auction."""
    seller, buyer = seller_and_buyer(store)
    listing = seller.listing(ask=180, floor=150)
    created(seller.send("/market/listings", listing))
    request_id = created(buyer.send("/market/contact", buyer.contact(listing["listingId"], "natural_language")))["requestId"]
    seller.send(f"/market/contact/{request_id}/agreement", seller.agreement(request_id, "natural_language"))
    r = buyer.send(f"/market/contact/{request_id}/offers", buyer.offer(request_id, "buyer", message="Would you consider 165€?"))
    assert r.status_code == 200 and r.json()["offerPrice"] == 165, r.text
    r = seller.send(f"/market/contact/{request_id}/offers", seller.offer(request_id, "seller", 175))
    assert r.status_code == 200, r.text
    r = buyer.send(f"/market/contact/{request_id}/offers", buyer.offer(request_id, "buyer", action="accept"))
    assert r.status_code == 201 and r.json()["finalPrice"] == 175, r.text

    other = seller.listing(ask=190, floor=150)
    created(seller.send("/market/listings", other))
    stale = buyer.send(f"/market/listings/{other['listingId']}/instant_match", buyer.instant(other["listingId"], 180))
    assert stale.status_code == 409, stale.text
    done = created(buyer.send(f"/market/listings/{other['listingId']}/instant_match", buyer.instant(other["listingId"], 190)))
    assert done["finalPrice"] == 190

    created(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 160, 2)))
    created(buyer.send(f"/market/books/{BOOK}/orders", buyer.order("buy", 170, 1)))
    cleared = store.http.post(f"/market/books/{BOOK}/clear", headers=seller.auth).json()
    assert cleared["clearings"][0]["price"] == 165 and cleared["clearings"][0]["volume"] == 1


def test_mandate_violation_is_403_and_audited(store):
    """spec 003: Owner Mandate Format ("Enforced by framework")."""
    seller, buyer = seller_and_buyer(store, max_spend=160)
    listing = seller.listing(ask=180, floor=150)
    created(seller.send("/market/listings", listing))
    r = buyer.send(f"/market/listings/{listing['listingId']}/instant_match", buyer.instant(listing["listingId"], 180))
    assert r.status_code == 403, r.text
    assert r.json()["error"] == "mandate_violation" and r.json()["constraint"] == "maxSpend"
    assert [e["event"] for e in buyer.audit()] == ["mandate_violation"]
