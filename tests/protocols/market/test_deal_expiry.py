"""A deal's life after it opens, over the market's HTTP API, on SQLite and PostgreSQL (issue 29,
"Money that holds": nothing waits forever; every check runs against the mandate in force when
the action commits). Time moves by the store's injected clock, never by sleeping."""

from __future__ import annotations

from datetime import timedelta

import pytest

from haggler.protocols.market.settings import MarketSettings
from haggler.storage.schema import market_deals, market_listings, market_requests
from haggler.trust.messages import sign_deal
from tests.support.market import (
    BOOK,
    audit_events,
    created,
    listed,
    new_id,
    refused,
    rows,
    seller_and_buyer,
    trader,
    z,
)

DAY = timedelta(seconds=MarketSettings().deal_expiry_seconds)


@pytest.fixture
def store(make_store, db_url):
    return make_store(db_url=db_url)


def _instant_deal(seller, buyer, listing_id=None):
    """The buyer instant-matches a new (or the given) listing of the seller's at 180: the deal."""
    listing_id = listing_id or listed(seller, ask=180)
    return created(buyer.send(f"/market/listings/{listing_id}/instant_match", buyer.instant(listing_id, 180)))


def _row(store, table, row_id):
    return rows(store, table, table.c.id == row_id)[0]


def _events(agent, event):
    return [m["body"] for m in agent.inbox()["messages"] if m["body"].get("event") == event]


def _cancel(agent, deal_id, headers=None):
    return agent.http.post(f"/market/deals/{deal_id}/cancel", headers=agent.auth if headers is None else headers)


def _sweep(store):
    return store.app.state.market.sweep()


def test_owner_approval_is_read_when_the_deal_commits(store):
    """Attack 2 (requiresOwnerApproval is read only when a deal opens): after an instant match the
    buyer's owner files a newer mandate that requires approval; both agents sign. The deal must
    wait for that owner's approval, not be confirmed; and an approval one mandate asked for is
    not dropped by a later mandate that asks for none."""
    seller, buyer = seller_and_buyer(store)
    deal_id = _instant_deal(seller, buyer)["dealId"]
    assert buyer.deal(deal_id)["needsOwnerApproval"] == []
    buyer.file_mandate(maxSpend=200, issued=store.clock(), permissions={"requiresOwnerApproval": True})
    assert buyer.sign_deal(deal_id, "buyer").json()["needsOwnerApproval"] == ["buyer"]
    store.clock.advance(seconds=1)
    buyer.file_mandate(maxSpend=200, issued=store.clock())  # no approval asked: the deal keeps it
    signed = seller.sign_deal(deal_id, "seller").json()
    assert (signed["status"], signed["needsOwnerApproval"]) == ("awaiting_owner_approval", ["buyer"])
    assert not _events(buyer, "deal_confirmed")
    approved = buyer.sign_deal_as_owner(deal_id, "buyer")
    assert approved.status_code == 200 and approved.json()["status"] == "confirmed", approved.text


def test_a_seller_whose_owner_asks_for_approval_after_the_match_waits_for_it(store):
    """Attack 2, the seller's side: its owner requires approval after the buyer signed; the
    seller's own signature lands on a deal that now waits for the seller's owner, whose approval
    is accepted though the deal did not ask for it when it opened."""
    seller, buyer = seller_and_buyer(store)
    deal_id = _instant_deal(seller, buyer)["dealId"]
    buyer.sign_deal(deal_id, "buyer")
    seller.file_mandate(minAcceptablePrice=150, issued=store.clock(), permissions={"requiresOwnerApproval": True})
    assert seller.sign_deal(deal_id, "seller").json()["status"] == "awaiting_owner_approval"
    assert seller.sign_deal_as_owner(deal_id, "seller").json()["status"] == "confirmed"


def test_a_deal_nobody_signs_expires_on_read_and_releases_its_listing(store):
    """Attack 5 (a deal can be stuck forever): an instant match whose buyer never signs expires a
    day after it opened (one whose owner files maxSpend 1 is void at once: the next test). The
    first read past that instant shows it expired, before any sweep; a signature then is 409
    naming the status; the listing is live again, the request failed, and both agents were told."""
    seller, buyer = seller_and_buyer(store)
    opened = store.clock()
    deal = _instant_deal(seller, buyer)
    deal_id, listing_id = deal["dealId"], deal["listingId"]
    document = seller.deal(deal_id)
    assert (document["status"], document["expiresAt"]) == ("awaiting_signatures", z(opened + DAY))
    assert "expiresAt" not in document["deal"]  # not part of the signed terms
    assert seller.sign_deal(deal_id, "seller").status_code == 200
    store.clock.advance(seconds=DAY.total_seconds() - 2)
    assert seller.deal(deal_id)["status"] == "awaiting_signatures"
    assert _row(store, market_listings, listing_id).status == "sold"

    store.clock.advance(seconds=2)
    assert seller.deal(deal_id)["status"] == "expired"
    assert _row(store, market_deals, deal_id).status == "expired"
    assert _row(store, market_listings, listing_id).status == "live"
    assert _row(store, market_requests, deal["requestId"]).state == "failed"
    for agent in (buyer, seller):
        assert _events(agent, "deal_expired") == [{"event": "deal_expired", "dealId": deal_id,
                                                   "requestId": deal["requestId"], "reason": "deal_expired"}]
    refused(buyer.sign_deal(deal_id, "buyer"), 409, error=f"deal {deal_id} is expired")
    assert _sweep(store) == 0  # already expired: nothing twice
    assert len(_events(buyer, "deal_expired")) == 1


def test_a_signature_after_the_expiry_is_refused_even_before_anyone_read_the_deal(store):
    """Enforced on the action: the first thing past the expiry is a signature; it is 409 naming
    `expired`, and the expiry stands although the signature was refused."""
    seller, buyer = seller_and_buyer(store)
    deal = _instant_deal(seller, buyer)
    document = buyer.deal(deal["dealId"])
    store.clock.advance(seconds=DAY.total_seconds())
    signature = sign_deal(buyer.key, document["deal"], "buyer")["buyer"]["signature"]
    refused(store.http.post(f"/market/deals/{deal['dealId']}/signatures", json={"party": "buyer", "signature": signature}),
            409, error=f"deal {deal['dealId']} is expired")
    assert _row(store, market_deals, deal["dealId"]).status == "expired"
    assert _row(store, market_listings, deal["listingId"]).status == "live"


def test_the_sweep_expires_due_deals_so_another_buyer_can_buy(store):
    """The sweep expires what nobody reads — deals awaiting signatures and deals awaiting an
    owner's approval alike — and leaves deals not yet due; another buyer then instant-matches
    the released listing."""
    seller, buyer = seller_and_buyer(store, buyer_permissions={"requiresOwnerApproval": True})
    waiting = _instant_deal(seller, buyer)
    approving = _instant_deal(seller, buyer)
    buyer.sign_deal(approving["dealId"], "buyer")
    assert seller.sign_deal(approving["dealId"], "seller").json()["status"] == "awaiting_owner_approval"
    store.clock.advance(hours=1)
    later = _instant_deal(seller, buyer)
    store.clock.advance(seconds=DAY.total_seconds() - 3600)
    assert _sweep(store) == 2
    assert {deal_id: _row(store, market_deals, deal_id).status for deal_id in
            (waiting["dealId"], approving["dealId"], later["dealId"])} == \
        {waiting["dealId"]: "expired", approving["dealId"]: "expired", later["dealId"]: "awaiting_signatures"}
    refused(buyer.sign_deal_as_owner(approving["dealId"], "buyer"), 409, error=f"deal {approving['dealId']} is expired")
    other = trader(store, new_id("buyer"), maxSpend=200)
    again = _instant_deal(seller, other, waiting["listingId"])
    assert again["dealId"] != waiting["dealId"] and other.deal(again["dealId"])["status"] == "awaiting_signatures"


def test_an_unsigned_party_may_cancel_a_signed_one_may_not(store):
    """`POST /market/deals/{id}/cancel` (agent token): a party that has not signed cancels — the
    listing is released, the request failed, both told; the party that signed is 409, an
    outsider 403, no token 401, a second cancel 409, and a signature on the cancelled deal 409."""
    seller, buyer = seller_and_buyer(store)
    deal = _instant_deal(seller, buyer)
    deal_id = deal["dealId"]
    assert seller.sign_deal(deal_id, "seller").status_code == 200
    refused(_cancel(seller, deal_id), 409)
    outsider = trader(store, new_id("outsider"))
    refused(_cancel(outsider, deal_id), 403)
    refused(_cancel(buyer, deal_id, headers={}), 401)
    refused(_cancel(buyer, "dl_nowhere"), 404)
    assert _row(store, market_deals, deal_id).status == "awaiting_signatures"

    cancelled = _cancel(buyer, deal_id)
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "cancelled", cancelled.text
    assert _row(store, market_listings, deal["listingId"]).status == "live"
    assert _row(store, market_requests, deal["requestId"]).state == "failed"
    for agent in (buyer, seller):
        assert [(e["dealId"], e["reason"]) for e in _events(agent, "deal_cancelled")] == [(deal_id, "deal_cancelled")]
    refused(_cancel(buyer, deal_id), 409, error=f"deal {deal_id} is cancelled")
    refused(buyer.sign_deal(deal_id, "buyer"), 409, error=f"deal {deal_id} is cancelled")
    store.clock.advance(seconds=DAY.total_seconds())
    assert _sweep(store) == 0 and seller.deal(deal_id)["status"] == "cancelled"


def test_a_double_auction_deal_expires_without_a_listing_to_release(store):
    """A double-auction deal (listingId book:…) expires too and both parties are told; it holds
    no listing, and the units it traded do not return to the book."""
    seller, buyer = seller_and_buyer(store)
    created(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 160)))
    created(buyer.send(f"/market/books/{BOOK}/orders", buyer.order("buy", 170)))
    [deal_id] = store.http.post(f"/market/books/{BOOK}/clear", headers=seller.auth).json()["clearings"][0]["dealIds"]
    store.clock.advance(seconds=DAY.total_seconds())
    assert _sweep(store) == 1
    assert buyer.deal(deal_id)["status"] == "expired" and _events(seller, "deal_expired")[0]["dealId"] == deal_id
    assert store.http.get(f"/market/books/{BOOK}").json()["books"] == []


def test_the_expiry_time_is_a_setting(make_store, db_url):
    """`MarketSettings.deal_expiry_seconds` sets when a deal opened from now expires."""
    store = make_store(db_url=db_url, market=MarketSettings(deal_expiry_seconds=90))
    seller, buyer = seller_and_buyer(store)
    opened = store.clock()
    deal_id = _instant_deal(seller, buyer)["dealId"]
    assert buyer.deal(deal_id)["expiresAt"] == z(opened + timedelta(seconds=90))
    store.clock.advance(seconds=90)
    assert buyer.deal(deal_id)["status"] == "expired"


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, None])
def test_the_expiry_setting_is_a_positive_whole_number_of_seconds(bad):
    with pytest.raises(ValueError, match="deal_expiry_seconds must be a whole number of seconds, at least 1"):
        MarketSettings(deal_expiry_seconds=bad)


def test_a_new_mandate_voids_the_pending_deals_it_no_longer_allows(store):
    """Attack 5's other half, design §2: filing a mandate re-checks the agent's pending deals, oldest first, with the
    signing check. A deal it would not let the agent sign — signed already or not — becomes void
    (listing released, request failed, both told `deal_void`, the constraint audited); one it
    allows stays pending, a confirmed deal stands, and a mandate dated ahead voids what it will
    forbid."""
    seller, buyer = seller_and_buyer(store, max_spend=300)
    confirmed = _instant_deal(seller, buyer)["dealId"]
    buyer.sign_deal(confirmed, "buyer")
    seller.sign_deal(confirmed, "seller")
    signed = _instant_deal(seller, buyer)
    buyer.sign_deal(signed["dealId"], "buyer")
    cheap_listing = listed(seller, ask=150)
    kept = created(buyer.send(f"/market/listings/{cheap_listing}/instant_match", buyer.instant(cheap_listing, 150)))

    # dated ahead: judged as of its issuedAt, it voids now what it will forbid then (else the deal,
    # signed by the buyer already, could be confirmed by the seller once it is in force)
    buyer.file_mandate(maxSpend=160, issued=store.clock() + timedelta(hours=1))
    assert {deal_id: buyer.deal(deal_id)["status"] for deal_id in (confirmed, signed["dealId"], kept["dealId"])} == \
        {confirmed: "confirmed", signed["dealId"]: "void", kept["dealId"]: "awaiting_signatures"}
    assert _row(store, market_listings, signed["listingId"]).status == "live"
    assert _row(store, market_requests, signed["requestId"]).state == "failed"
    for agent in (buyer, seller):
        assert [(e["dealId"], e["reason"]) for e in _events(agent, "deal_void")] == [(signed["dealId"], "mandate")]
    assert [(detail["action"], detail["dealId"]) for _, _, detail in audit_events(store, buyer.id)
            if detail.get("constraint") == "maxSpend"] == [("deal voided by a new mandate", signed["dealId"])]
    refused(seller.sign_deal(signed["dealId"], "seller"), 409, error=f"deal {signed['dealId']} is void")
