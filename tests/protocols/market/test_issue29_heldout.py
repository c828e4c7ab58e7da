"""Held-out tests for issue 29, "Money that holds": each of the issue's attacks 1–6, replayed
against a real store over HTTP (injected clock, real Ed25519 keys), judged by the wire design
(`issue29-design.md`, sections 1–6). Written before the fix, from the issue and the design only.

Attacks 7–9 (token throttling, registration and inbox limits, disconnect logging) are tested
elsewhere."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tests.support.market import (
    BOOK,
    agreed_request,
    created,
    deal_count,
    new_id,
    nothing_changes,
    refused,
    seller_and_buyer,
    trader,
)
from tests.support.market_issue29 import (
    DEAL_EXPIRY_SECONDS,
    budget,
    cancel,
    clear,
    deal_document,
    instant,
    item_block,
    listing,
    notices,
    offer,
    old_style_owner_floor,
    owner_floor,
    post_listing,
    sign,
    approve,
    total_cents,
)

ORDERS = f"/market/books/{BOOK}/orders"


def _instant_path(listing_id: str) -> str:
    return f"/market/listings/{listing_id}/instant_match"


def _clear_deals(agent) -> list[str]:
    answer = created(clear(agent, BOOK), 200)
    return [deal_id for clearing in answer["clearings"] for deal_id in clearing.get("dealIds", [])]


def _opened_deal(store, protocol: str, *, max_spend: float = 300, floor: float = 100):
    """A seller and a buyer with a deal between them awaiting signatures, at 180: by instant match
    on a listing, or by one unit crossing in the double auction (sell 170, buy 190: midpoint 180).
    (seller, buyer, listing id or None, deal id, request id)."""
    seller, buyer = seller_and_buyer(store, floor=floor, max_spend=max_spend)
    if protocol == "instant_match":
        listing_id = post_listing(seller, ask=180, floor=floor)["listingId"]
        message = instant(buyer, listing_id, 180)
        closed = created(buyer.send(_instant_path(listing_id), message))
        return seller, buyer, listing_id, closed["dealId"], message["requestId"]
    created(seller.send(ORDERS, seller.order("sell", 170, 1)))
    created(buyer.send(ORDERS, buyer.order("buy", 190, 1)))
    [deal_id] = _clear_deals(buyer)
    document = deal_document(buyer, deal_id)
    assert document["status"] == "awaiting_signatures" and document["deal"]["finalPrice"] == 180, document
    return seller, buyer, None, deal_id, document["deal"]["requestId"]


BOTH_WAYS = pytest.mark.parametrize("protocol", ["double_auction", "instant_match"])


# -- attack 1: quantity (and shipping, and repetition) escape maxSpend ---------------------------------

def test_attack_1_an_order_quantity_does_not_escape_max_spend(store):
    """Attack 1: a buyer whose owner signed maxSpend 200 orders buy 200 × 1000 against sell
    150 × 1000; the clearing made one deal at 175 × 1000 (175,000 under a 200 mandate). The
    order's total (price × quantity) is checked when placed (design 1): 403 maxSpend, and no
    clearing ever makes a deal whose total is above 200. One unit at 200 is fine: a deal of
    quantity 1, total 175."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=200)
    created(seller.send(ORDERS, seller.order("sell", 150, 1000)))
    refused(buyer.send(ORDERS, buyer.order("buy", 200, 1000)), 403, error="mandate_violation", constraint="maxSpend")
    for deal_id in _clear_deals(buyer):  # whatever the book holds, nothing above the mandate
        assert total_cents(deal_document(buyer, deal_id)["deal"]) <= 20000

    created(buyer.send(ORDERS, buyer.order("buy", 200, 1)))
    [deal_id] = _clear_deals(buyer)
    document = deal_document(buyer, deal_id)
    deal = document["deal"]
    assert (deal["finalPrice"], deal["quantity"], deal["total"]) == (175, 1, 175), deal
    assert "item" not in deal and deal["listingId"] == f"book:{BOOK}"
    created(sign(buyer, deal_id, "buyer"), 200)
    assert created(sign(seller, deal_id, "seller"), 200)["status"] == "confirmed"


def test_attack_1_an_auction_fill_is_capped_by_the_mandate_in_force(store):
    """Attack 1 (design 3): a buy of 100 × 5 is within maxSpend 500 when placed; the owner then
    files maxSpend 250. At clearing the order is capped to floor(250 / 100) = 2 units: the fill is
    a deal of 2 units at the uniform price (95), total 190 ≤ 250, and the 3 units the cap left
    out stay in the book. Today the order fills all 5 units (475 under a 250 mandate)."""
    seller, buyer = seller_and_buyer(store, floor=50, max_spend=500)
    created(buyer.send(ORDERS, buyer.order("buy", 100, 5)))
    store.clock.advance(seconds=1)
    buyer.file_mandate(maxSpend=250, issued=store.clock())
    created(seller.send(ORDERS, seller.order("sell", 90, 5)))
    deal_ids = _clear_deals(seller)
    deals = [deal_document(buyer, deal_id)["deal"] for deal_id in deal_ids]
    assert all(total_cents(deal) <= 25000 for deal in deals), deals
    assert sum(deal.get("quantity", 1) for deal in deals) == 2, deals
    assert [deal["finalPrice"] for deal in deals] == [95] * len(deals)
    book = store.http.get(f"/market/books/{BOOK}").json()
    [eur] = book["books"]
    assert eur["bids"] == [{"price": 100, "quantity": 3}], book


def test_attack_1_shipping_counts_toward_max_spend(store):
    """Attack 1 (design 1): maxSpend bounds the total, shipping included. Ask 190 + shipping 20
    is 210 under a 200 mandate: the instant match is refused (403 maxSpend) and so is a sealed
    bid of 185 (+20); ask 180 + 20 = 200 exactly is allowed, and the deal states shippingCost 20
    and total 200."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=200)
    dear = post_listing(seller, ask=190, floor=100, shipping=20)["listingId"]
    with nothing_changes(store):
        refused(buyer.send(_instant_path(dear), instant(buyer, dear, 190)), 403, error="mandate_violation",
                constraint="maxSpend")
    request_id = agreed_request(seller, buyer, dear, "sealed_bid")
    with nothing_changes(store):
        refused(buyer.send(f"/market/contact/{request_id}/bids", buyer.bid(request_id, "buyer", 185)), 403,
                error="mandate_violation", constraint="maxSpend")

    fits = post_listing(seller, ask=180, floor=100, shipping=20)["listingId"]
    closed = created(buyer.send(_instant_path(fits), instant(buyer, fits, 180)))
    deal = deal_document(buyer, closed["dealId"])["deal"]
    assert (deal["finalPrice"], deal["shippingCost"], deal["quantity"], deal["total"]) == (180, 20, 1, 200), deal


def test_attack_1_a_budget_bounds_the_sum_of_deals(store):
    """Attack 1: five instant matches at 200 each all closed under the same mandate. With
    ``budget: {max: 500}`` (design 1) the third is refused (403 budget: 600 > 500) and its
    listing stays live, confirming a deal does not free budget, and a cancelled deal no longer
    counts (design 6): after cancelling one, one more match fits, and no further."""
    seller = trader(store, new_id("seller"), minAcceptablePrice=100)
    buyer = trader(store, new_id("buyer"))
    buyer.file_mandate(maxSpend=200, budget=budget(500))
    listings = [post_listing(seller, ask=200, floor=100)["listingId"] for _ in range(5)]
    first, second = (created(buyer.send(_instant_path(lid), instant(buyer, lid, 200)))["dealId"] for lid in listings[:2])
    with nothing_changes(store):
        refused(buyer.send(_instant_path(listings[2]), instant(buyer, listings[2], 200)), 403,
                error="mandate_violation", constraint="budget")
    assert store.http.get(f"/market/listings/{listings[2]}").json()["status"] == "live"

    created(sign(buyer, first, "buyer"), 200)
    assert created(sign(seller, first, "seller"), 200)["status"] == "confirmed"
    refused(buyer.send(_instant_path(listings[3]), instant(buyer, listings[3], 200)), 403, constraint="budget")

    answer = cancel(buyer, second)
    assert 200 <= answer.status_code < 300, answer.text
    assert deal_document(buyer, second)["status"] == "cancelled"
    created(buyer.send(_instant_path(listings[2]), instant(buyer, listings[2], 200)))
    refused(buyer.send(_instant_path(listings[4]), instant(buyer, listings[4], 200)), 403, constraint="budget")


# -- attack 2: requiresOwnerApproval read only when a deal opens ---------------------------------------

@BOTH_WAYS
@pytest.mark.parametrize("refiled", ["before_any_signature", "between_the_signatures"])
def test_attack_2_owner_approval_filed_after_the_deal_opened_still_holds(store, protocol, refiled):
    """Attack 2: after an instant match (or an auction fill), the buyer's owner files a newer
    mandate requiring approval; both agents signed and the deal was confirmed with no approval.
    requiresOwnerApproval is read whenever a signature lands (design 2): the deal waits
    (awaiting_owner_approval, buyer in needsOwnerApproval) until the owner approves."""
    seller, buyer, _, deal_id, _ = _opened_deal(store, protocol)
    assert deal_document(buyer, deal_id)["needsOwnerApproval"] == []
    if refiled == "between_the_signatures":
        created(sign(buyer, deal_id, "buyer"), 200)
    store.clock.advance(minutes=1)
    buyer.file_mandate(maxSpend=300, issued=store.clock(), permissions={"requiresOwnerApproval": True})
    assert deal_document(buyer, deal_id)["status"] == "awaiting_signatures"  # allowed: not void
    if refiled == "before_any_signature":
        created(sign(buyer, deal_id, "buyer"), 200)
    document = created(sign(seller, deal_id, "seller"), 200)
    assert document["status"] == "awaiting_owner_approval", document
    assert "buyer" in document["needsOwnerApproval"], document
    assert deal_document(seller, deal_id)["status"] == "awaiting_owner_approval"
    assert created(approve(buyer, deal_id, "buyer"), 200)["status"] == "confirmed"


# -- attack 3: an embedded ownerMandate replayed -------------------------------------------------------

def test_attack_3_an_owner_floor_signed_for_another_listing_cannot_be_replayed(store):
    """Attack 3: the embedded ownerMandate signed only {minAcceptablePrice, publicKey}, so an
    old floor of 100 the owner signed for another listing, pasted into a revision of listing L
    (owner's floor 170), let L close by sealed bid at 107.50. Design 4: the owner's bytes carry
    listingId and issuedAt; an unbound floor is 422, one signed for another listing is 422 at
    /ownerMandate/listingId, an older one for L itself is 409, and L keeps its floor of 170."""
    seller = trader(store, new_id("seller"), minAcceptablePrice=100)
    buyer = trader(store, new_id("buyer"), maxSpend=200)
    # What owners signed before: bound to no listing, replayable anywhere.
    with nothing_changes(store):
        body = refused(seller.send("/market/listings", listing(seller, ask=180,
                                                              owner_mandate=old_style_owner_floor(seller, 100))), 422)
    assert body.get("path", "").startswith("/ownerMandate"), body

    listing_l = new_id("lst")
    older_for_l = owner_floor(seller, listing_l, 100, issued=store.clock() - timedelta(minutes=10))
    other = post_listing(seller, ask=120, floor=100)
    post_listing(seller, listing_id=listing_l, ask=180, floor=170)
    store.clock.advance(seconds=1)
    with nothing_changes(store):
        refused(seller.send("/market/listings", listing(seller, listing_id=listing_l, ask=110,
                                                        owner_mandate=other["ownerMandate"])),
                422, path="/ownerMandate/listingId")
        refused(seller.send("/market/listings", listing(seller, listing_id=listing_l, ask=110,
                                                        owner_mandate=older_for_l)), 409)
    held = seller.get(f"/market/listings/{listing_l}").json()
    assert (held["ownerMandate"]["minAcceptablePrice"], held["pricing"]["askPrice"]) == (170, 180), held

    request_id = agreed_request(seller, buyer, listing_l, "sealed_bid")
    bids = f"/market/contact/{request_id}/bids"
    created(buyer.send(bids, buyer.bid(request_id, "buyer", 115)), 202)
    refused(seller.send(bids, seller.bid(request_id, "seller", 100)), 403, error="mandate_violation",
            constraint="minAcceptablePrice")
    assert deal_count(store, listing_l) == 0


# -- attack 4: the item changes after the buyer commits ------------------------------------------------

def test_attack_4_the_item_cannot_change_under_the_buyer(store):
    """Attack 4: after the buyer's sealed bid on a nintendo_switch, the seller revised the same
    listing to name: empty_box, and the deal closed on it. Design 5: a revision of the item fails
    every open request on the listing (listing_revised, both told; the seller's closing bid is
    409, no deal); an instant match naming the version the buyer saw is 409 once it is stale; a
    pricing-only revision leaves the request open; the deal records the item committed to and
    the listingVersion."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=250)
    switch, box = item_block("nintendo_switch"), item_block("empty_box")
    listing_id = post_listing(seller, ask=180, floor=100, item=switch)["listingId"]
    assert store.http.get(f"/market/listings/{listing_id}").json()["listingVersion"] == 1
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    bids = f"/market/contact/{request_id}/bids"
    created(buyer.send(bids, buyer.bid(request_id, "buyer", 185)), 202)

    store.clock.advance(seconds=1)
    post_listing(seller, 200, listing_id=listing_id, ask=180, floor=100, item=box)
    assert store.http.get(f"/market/listings/{listing_id}").json()["listingVersion"] == 2
    refused(seller.send(bids, seller.bid(request_id, "seller", 150)), 409)
    assert deal_count(store, listing_id) == 0
    assert buyer.get(f"/market/contact/{request_id}").json()["state"] == "failed"
    for party in (buyer, seller):
        told = [m["body"] for m in party.inbox()["messages"] if m["kind"] == "notification"
                and m["body"].get("requestId") == request_id and m["body"].get("reason") == "listing_revised"]
        assert told, party.inbox()
    # An instant match on the version the buyer saw (the switch) is stale.
    with nothing_changes(store):
        refused(buyer.send(_instant_path(listing_id), instant(buyer, listing_id, 180, version=1)), 409)

    # A pricing-only revision leaves the request open; the deal records the switch committed to.
    other = post_listing(seller, ask=180, floor=100, item=switch)["listingId"]
    request_id = agreed_request(seller, buyer, other, "sealed_bid")
    bids = f"/market/contact/{request_id}/bids"
    created(buyer.send(bids, buyer.bid(request_id, "buyer", 185)), 202)
    store.clock.advance(seconds=1)
    post_listing(seller, 200, listing_id=other, ask=175, floor=100, item=switch)
    closed = created(seller.send(bids, seller.bid(request_id, "seller", 150)), 201)
    deal = deal_document(buyer, closed["dealId"])["deal"]
    assert deal["item"] == switch and deal["finalPrice"] == 167.5, deal

    # Knowing what it buys now (version 2, the box), the buyer gets exactly that.
    closed = created(buyer.send(_instant_path(listing_id), instant(buyer, listing_id, 180, version=2)))
    deal = deal_document(buyer, closed["dealId"])["deal"]
    assert (deal["item"], deal["listingVersion"]) == (box, 2), deal


# -- attack 5: a deal stuck forever --------------------------------------------------------------------

def _released(store, seller, buyer, listing_id, request_id, reason_notice: str, deal_id: str, *,
              request_fails: bool = True) -> None:
    """The listing is live again, the request failed, both parties told ``reason_notice``."""
    if listing_id is not None:
        assert store.http.get(f"/market/listings/{listing_id}").json()["status"] == "live"
        if request_fails:
            assert buyer.get(f"/market/contact/{request_id}").json()["state"] == "failed"
    for party in (buyer, seller):
        assert any(n.get("dealId") == deal_id for n in notices(party, reason_notice)), party.inbox()


def _expires_at(document) -> datetime:
    stamp = document.get("expiresAt") or document["deal"].get("expiresAt")
    assert stamp, document
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))


@BOTH_WAYS
def test_attack_5_an_unsigned_deal_expires(store, protocol):
    """Attack 5: a deal whose buyer never signs stays awaiting_signatures forever, the listing
    sold. Design 6: it expires deal_expiry_seconds (86,400) after it opened — shown as
    expiresAt, enforced on read, a signature after it is 409 — the listing is live again, the
    request failed, both parties get deal_expired."""
    opened = store.clock()
    seller, buyer, listing_id, deal_id, request_id = _opened_deal(store, protocol)
    created(sign(seller, deal_id, "seller"), 200)
    assert _expires_at(deal_document(buyer, deal_id)) == opened + timedelta(seconds=DEAL_EXPIRY_SECONDS)
    store.clock.advance(seconds=DEAL_EXPIRY_SECONDS - 1)
    assert deal_document(buyer, deal_id)["status"] == "awaiting_signatures"
    store.clock.advance(seconds=2)
    assert deal_document(seller, deal_id)["status"] == "expired"
    refused(sign(buyer, deal_id, "buyer"), 409)
    assert deal_document(buyer, deal_id)["status"] == "expired"
    _released(store, seller, buyer, listing_id, request_id, "deal_expired", deal_id)


@BOTH_WAYS
def test_attack_5_a_party_that_has_not_signed_cancels(store, protocol):
    """Attack 5: no cancel existed. Design 6: POST /market/deals/{id}/cancel — another agent
    403, a party that already signed 409, a party that has not signed cancels (cancelled, the
    listing live again, the request failed, both told deal_cancelled); signing it then is 409."""
    seller, buyer, listing_id, deal_id, request_id = _opened_deal(store, protocol)
    stranger = trader(store, new_id("buyer"), maxSpend=300)
    created(sign(seller, deal_id, "seller"), 200)
    with nothing_changes(store):
        refused(cancel(stranger, deal_id), 403)
        refused(cancel(seller, deal_id), 409)
    answer = cancel(buyer, deal_id)
    assert 200 <= answer.status_code < 300, answer.text
    assert deal_document(seller, deal_id)["status"] == "cancelled"
    refused(sign(buyer, deal_id, "buyer"), 409)
    _released(store, seller, buyer, listing_id, request_id, "deal_cancelled", deal_id)


@BOTH_WAYS
def test_attack_5_a_new_mandate_voids_the_pending_deal_it_forbids(store, protocol):
    """Attack 5: an instant match whose owner then files maxSpend 1 stayed awaiting_signatures
    with no way out. Design 2: filing the new mandate voids each pending deal it does not allow
    (void, listing released, both told deal_void); no one can sign it any more."""
    seller, buyer, listing_id, deal_id, request_id = _opened_deal(store, protocol)
    created(sign(seller, deal_id, "seller"), 200)
    store.clock.advance(minutes=1)
    buyer.file_mandate(maxSpend=1, issued=store.clock())
    assert deal_document(seller, deal_id)["status"] == "void"
    answer = sign(buyer, deal_id, "buyer")
    assert answer.status_code in (403, 409), answer.text
    assert deal_document(buyer, deal_id)["status"] == "void"
    # (design 2 does not say what becomes of the request of a void deal: not checked)
    _released(store, seller, buyer, listing_id, request_id, "deal_void", deal_id, request_fails=False)


# -- attack 6: the counterparty replays a party's signed offer -----------------------------------------

def test_attack_6_a_signed_offer_cannot_be_replayed_by_the_counterparty(store):
    """Attack 6: the counterparty re-sent the party's latest signed offer as that party's turn,
    burning turns. Design 4: offers (accept, reject too) carry the party's own sequence; an offer
    without one is 422; a replayed offer's sequence is spent, so it is 409 and changes nothing,
    and the party's real next offer still lands in its turn."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=250)
    listing_id = post_listing(seller, ask=200, floor=100)["listingId"]
    request_id = agreed_request(seller, buyer, listing_id, "natural_language")
    path = f"/market/contact/{request_id}/offers"
    unnumbered = {field: value for field, value in buyer.offer(request_id, "buyer", 150).items() if field != "sequence"}
    refused(buyer.send(path, unnumbered), 422)  # no sequence: replayable

    buyer_first = buyer.sign(offer(buyer, request_id, "buyer", 150, sequence=1))
    assert created(buyer.http.post(path, json=buyer_first), 200)["turn"] == 1
    assert created(seller.send(path, offer(seller, request_id, "seller", 195, sequence=1)), 200)["turn"] == 2
    with nothing_changes(store):  # the seller plays the buyer's turn with the buyer's old words
        refused(seller.http.post(path, json=buyer_first), 409)
    buyer_second = buyer.sign(offer(buyer, request_id, "buyer", 160, sequence=2))
    assert created(buyer.http.post(path, json=buyer_second), 200)["turn"] == 3
    with nothing_changes(store):
        refused(seller.send(path, offer(seller, request_id, "seller", 190, sequence=1)), 409)  # spent
        refused(seller.send(path, offer(seller, request_id, "seller", 190, sequence=3)), 409)  # skipped
    assert created(seller.send(path, offer(seller, request_id, "seller", 185, sequence=2)), 200)["turn"] == 4
    with nothing_changes(store):
        refused(seller.http.post(path, json=buyer_second), 409)
    closed = created(buyer.send(path, offer(buyer, request_id, "buyer", action="accept", sequence=3)), 201)
    assert closed["finalPrice"] == 185
    view = buyer.get(f"/market/contact/{request_id}").json()  # the replays took no turn
    assert [(o["turn"], o["party"]) for o in view["offers"][:4]] == [
        (1, "buyer"), (2, "seller"), (3, "buyer"), (4, "seller")], view
    assert len(view["offers"]) in (4, 5), view  # the accept may be listed as turn 5
