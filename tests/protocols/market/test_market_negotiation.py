"""From contact to deal over the market's HTTP API (spec 003: 3. Contact Request, 4. Protocol
Agreement, 5. Sealed Bid, 6. Instant Match, 7. Natural Language Offer; Protocols 1-3)."""

from __future__ import annotations

from datetime import timedelta

from haggler.protocols.market.settings import MarketSettings
from haggler.storage.schema import market_bids, market_deals, market_listings, market_requests
from tests.support.market import (
    agreed_request,
    created,
    deal_count,
    everything_said_to,
    listed,
    new_id,
    nothing_changes,
    refused,
    rows,
    seller_and_buyer,
    trader,
    z,
)


def _bid(agent, request_id, party, limit):
    return agent.send(f"/market/contact/{request_id}/bids", agent.bid(request_id, party, limit))


def _offer(agent, request_id, party, price=None, **kwargs):
    return agent.send(f"/market/contact/{request_id}/offers", agent.offer(request_id, party, price, **kwargs))


# -- contact and protocol agreement -----------------------------------------------------------------------


def test_contact_and_protocol_agreement_are_delivered_and_settle_the_protocol(store):
    """spec 003: 3. Contact Request (protocol: natural_language, sealed_bid, instant_match), 4.
    Protocol Agreement ("Seller accepts or proposes alternative protocol"): the contact reaches
    the seller's inbox, the agreement the buyer's; the seller may agree another protocol; the
    protocol is settled once (409 after); bids and offers wait for the agreement (409)."""
    seller, buyer = seller_and_buyer(store)
    listing_id = listed(seller)
    contact = buyer.contact(listing_id, "sealed_bid", message="I'm interested in your Nintendo Switch listing.")
    assert created(buyer.send("/market/contact", contact)) == {"requestId": contact["requestId"], "state": "proposed"}
    request_id = contact["requestId"]
    assert seller.inbox()["messages"][-1]["body"] == buyer.sign(contact)
    with nothing_changes(store):
        refused(_bid(buyer, request_id, "buyer", 185), 409)
        refused(buyer.send("/market/contact", contact), 409)  # requestId taken
    view = buyer.get(f"/market/contact/{request_id}").json()
    assert (view["state"], view["proposedProtocol"], view["protocol"]) == ("proposed", "sealed_bid", None)

    agreement = seller.agreement(request_id, "natural_language")
    agreement["message"] = "I'd prefer to negotiate in natural language."
    r = seller.send(f"/market/contact/{request_id}/agreement", agreement)
    assert r.json() == {"requestId": request_id, "state": "agreed", "agreedProtocol": "natural_language"}
    assert buyer.inbox()["messages"][-1]["body"] == seller.sign(agreement)
    with nothing_changes(store):
        refused(seller.send(f"/market/contact/{request_id}/agreement", seller.agreement(request_id, "sealed_bid")), 409)
        refused(_bid(buyer, request_id, "buyer", 185), 409)  # not a sealed bid negotiation
    assert buyer.get(f"/market/contact/{request_id}").json()["protocol"] == "natural_language"
    # the request is its two parties' business
    outsider = trader(store, new_id("outsider"), maxSpend=10)
    refused(outsider.get(f"/market/contact/{request_id}"), 403)
    refused(store.http.get(f"/market/contact/{request_id}"), 401)
    refused(buyer.get("/market/contact/req_unknown"), 404)


def test_contact_refusals_change_nothing(store):
    """spec 003: 1. Listing ("negotiable: if false, price is fixed"), Owner Mandate Format
    (permissions): a fixed-price listing is contacted only for an instant match (409 otherwise);
    a protocol the buyer's or the seller's owner does not permit is 403 with the permission, an
    audit entry for the agent at fault, and nothing stored; an unknown listing is 404, one's own
    409."""
    seller, buyer = seller_and_buyer(store, buyer_permissions={"canUseSealedBid": False},
                                     seller_permissions={"canNegotiate": False})
    fixed = listed(seller, negotiable=False)
    listing_id = listed(seller)
    with nothing_changes(store):
        refused(buyer.send("/market/contact", buyer.contact(fixed, "sealed_bid")), 409)
        refused(buyer.send("/market/contact", buyer.contact(listing_id, "sealed_bid")), 403,
                error="mandate_violation", constraint="canUseSealedBid")
        refused(buyer.send("/market/contact", buyer.contact("lst_nowhere", "instant_match")), 404)
        refused(seller.send("/market/contact", {**seller.contact(listing_id, "instant_match")}), 409)
    assert [e["detail"]["constraint"] for e in buyer.audit()] == ["canUseSealedBid"]
    request_id = created(buyer.send("/market/contact", buyer.contact(listing_id, "natural_language")))["requestId"]
    with nothing_changes(store):
        refused(seller.send(f"/market/contact/{request_id}/agreement",
                            seller.agreement(request_id, "natural_language")), 403,
                error="mandate_violation", constraint="canNegotiate")
    assert [e["detail"]["constraint"] for e in seller.audit()] == ["canNegotiate"]
    fixed_request = created(buyer.send("/market/contact", buyer.contact(fixed, "instant_match")))["requestId"]
    with nothing_changes(store):
        refused(seller.send(f"/market/contact/{fixed_request}/agreement",
                            seller.agreement(fixed_request, "sealed_bid")), 409)


# -- sealed bid ---------------------------------------------------------------------------------------


def test_a_sealed_bid_is_hidden_until_both_are_in(store):
    """spec 003: 5. Sealed Bid ("Both parties simultaneously reveal"), Protocol 2: the first
    bid's price never reaches the other party — not its view of the request, not its inbox —
    until the second is in; then both are bound to the midpoint."""
    seller, buyer = seller_and_buyer(store, floor=150, max_spend=300)
    listing_id = listed(seller, ask=220, floor=150)
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    first = _bid(buyer, request_id, "buyer", 197.43)
    assert first.status_code == 202 and first.json()["state"] == "waiting_for_other_bid", first.text
    texts = [seller.get(f"/market/contact/{request_id}").text, str(seller.inbox()),
             store.http.get(f"/market/listings/{listing_id}").text, seller.get(f"/market/listings/{listing_id}").text]
    assert everything_said_to(texts, "197.43", "19743") == []
    view = seller.get(f"/market/contact/{request_id}").json()
    assert view["bids"] == {"buyer": True, "seller": False} and view["state"] == "agreed"
    assert [m["body"]["event"] for m in seller.inbox()["messages"] if m["kind"] == "notification"] == \
        ["sealed_bid_waiting"]
    refused(_bid(buyer, request_id, "buyer", 190), 409)  # a sealed bid cannot be changed
    closed = created(_bid(seller, request_id, "seller", 160.57))
    assert closed["finalPrice"] == 179  # (197.43 + 160.57) / 2
    assert closed["state"] == "closed" and closed["protocol"] == "sealed_bid"
    refused(_bid(seller, request_id, "seller", 150), 409)
    deal = rows(store, market_deals, market_deals.c.id == closed["dealId"])[0]
    assert (deal.price_cents, deal.buyer_id, deal.seller_id) == (17900, buyer.id, seller.id)
    assert rows(store, market_listings, market_listings.c.id == listing_id)[0].status == "sold"


def test_sealed_bid_midpoint_is_integer_cents_half_a_cent_up(store):
    """spec 003: Protocol 2 ("Framework computes midpoint price"): an odd-cent spread splits in
    integer cents with the half cent rounding up (to the seller)."""
    seller, buyer = seller_and_buyer(store, floor=150, max_spend=300)
    listing_id = listed(seller, ask=220, floor=150)
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    assert _bid(seller, request_id, "seller", 150.00).status_code == 202
    closed = created(_bid(buyer, request_id, "buyer", 170.01))
    assert closed["finalPrice"] == 160.01  # 16000.5 cents -> 16001
    assert rows(store, market_deals, market_deals.c.id == closed["dealId"])[0].price_cents == 16001
    # equal bids overlap: the deal is at that price
    listing_id = listed(seller, ask=220, floor=150)
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    _bid(buyer, request_id, "buyer", 155.55)
    assert created(_bid(seller, request_id, "seller", 155.55))["finalPrice"] == 155.55


def test_no_overlap_fails_at_once_and_reveals_neither_bid(store):
    """spec 003: Protocol 2 ("If no overlap, negotiation fails immediately"): the request fails
    on the second bid, both parties are told no_overlap, and neither bid's price appears in any
    response or inbox of either party; no deal, the listing stays live."""
    seller, buyer = seller_and_buyer(store, floor=150, max_spend=300)
    listing_id = listed(seller, ask=220, floor=150)
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    first = _bid(buyer, request_id, "buyer", 161.23)
    second = _bid(seller, request_id, "seller", 167.89)
    assert second.status_code == 200, second.text
    assert second.json() == {"requestId": request_id, "state": "failed", "reason": "no_overlap"}
    def said_to(agent):
        return [agent.get(f"/market/contact/{request_id}").text, str(agent.inbox()),
                agent.get(f"/market/listings/{listing_id}").text, str(agent.audit())]

    assert everything_said_to([first.text, *said_to(buyer)], "167.89", "16789") == []  # the seller's bid
    assert everything_said_to([second.text, *said_to(seller)], "161.23", "16123") == []  # the buyer's bid
    assert everything_said_to([second.text, str(buyer.inbox()), str(seller.inbox())],
                              "161.23", "16123", "167.89", "16789") == []  # the failure tells neither
    for agent in (buyer, seller):
        failed = [m["body"] for m in agent.inbox()["messages"] if m["body"].get("event") == "negotiation_failed"]
        assert failed == [{"event": "negotiation_failed", "requestId": request_id, "reason": "no_overlap"}]
        assert agent.get(f"/market/contact/{request_id}").json()["state"] == "failed"
    assert deal_count(store, listing_id) == 0
    assert store.http.get(f"/market/listings/{listing_id}").json()["status"] == "live"
    refused(_bid(buyer, request_id, "buyer", 170), 409)


def test_sealed_bids_are_held_to_the_mandates(store):
    """spec 003: 5. Sealed Bid, Owner Mandate Format ("Framework rejects offers violating
    mandate"): a buyer's maxPrice above maxSpend, a seller's minPrice below the owner's floor
    (on file, or the listing's embedded one, whichever is higher), or a bid without
    canUseSealedBid is 403 naming the constraint, audited, and stores no bid."""
    seller, buyer = seller_and_buyer(store, floor=150, max_spend=200)
    listing_id = listed(seller, ask=220, floor=160)  # the listing's own ownerMandate floor is higher
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    with nothing_changes(store):
        refused(_bid(buyer, request_id, "buyer", 200.01), 403, error="mandate_violation", constraint="maxSpend")
        refused(_bid(seller, request_id, "seller", 159.99), 403, error="mandate_violation",
                constraint="minAcceptablePrice")
    assert rows(store, market_bids, market_bids.c.request_id == request_id) == []
    buyer.file_mandate(maxSpend=200, permissions={"canUseSealedBid": False}, issued=store.clock())
    with nothing_changes(store):
        refused(_bid(buyer, request_id, "buyer", 180), 403, error="mandate_violation", constraint="canUseSealedBid")
    assert [e["detail"]["constraint"] for e in buyer.audit()] == ["maxSpend", "canUseSealedBid"]
    assert [e["detail"]["constraint"] for e in seller.audit()] == ["minAcceptablePrice"]
    assert _bid(seller, request_id, "seller", 160).status_code == 202


# -- instant match --------------------------------------------------------------------------------------


def test_instant_match_at_the_ask_closes_at_once(store):
    """spec 003: 6. Instant Match, Protocol 3 ("Deal closes in 1 message"): a buyer that accepts
    the live ask gets a deal at once, with no contact request; the seller is told; the listing is
    sold, and a second buyer is 409."""
    seller, buyer = seller_and_buyer(store)
    listing_id = listed(seller, ask=180)
    message = buyer.instant(listing_id, 180)
    done = created(buyer.send(f"/market/listings/{listing_id}/instant_match", message))
    assert (done["state"], done["finalPrice"], done["protocol"], done["requestId"]) == \
        ("closed", 180, "instant_match", message["requestId"])
    assert [m["body"] for m in seller.inbox()["messages"] if m["kind"] == "message"] == [buyer.sign(message)]
    for agent in (buyer, seller):
        closed = [m["body"] for m in agent.inbox()["messages"] if m["body"].get("event") == "deal_closed"]
        assert [n["dealId"] for n in closed] == [done["dealId"]]
    assert store.http.get(f"/market/listings/{listing_id}").json()["status"] == "sold"
    second = trader(store, new_id("buyer"), maxSpend=500)
    with nothing_changes(store):
        refused(second.send(f"/market/listings/{listing_id}/instant_match", second.instant(listing_id, 180)), 409)
        refused(buyer.send(f"/market/listings/{listing_id}/instant_match", buyer.instant(listing_id, 180)), 409)
    assert deal_count(store, listing_id) == 1


def test_instant_match_refusals(store):
    """spec 003: 6. Instant Match ("Seller auto-accepts (or rejects if listing is stale)"),
    Owner Mandate Format: a price that is not the live ask is 409 (a revised ask makes the old
    one stale), an expired listing 410, an unknown one 404, one's own 409; the buyer's mandate
    (maxSpend, requiredCondition, requiredAccessories, canAcceptInstantMatch) is 403 naming the
    constraint; a seller whose owner does not permit instant match refuses it (403, logged for
    the seller, no constraint told to the buyer). None changes anything."""
    seller, buyer = seller_and_buyer(store, floor=10, max_spend=200, requiredCondition="good",
                                     requiredAccessories=["charger"])
    listing_id = new_id("lst")
    created(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=190)))
    store.clock.advance(seconds=1)
    created(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=185)), 200)
    poor = listed(seller, ask=100, floor=10, condition="fair")
    bare = listed(seller, ask=100, floor=10, accessories=("case",))
    dear = listed(seller, ask=200.01)
    expiring = listed(seller, ask=100, floor=10, available_until=store.clock().date().isoformat())
    store.clock.advance(hours=12)

    def instant(agent, lid, price):
        return agent.send(f"/market/listings/{lid}/instant_match", agent.instant(lid, price))

    with nothing_changes(store):
        refused(instant(buyer, listing_id, 190), 409)  # stale: the ask was revised
        refused(instant(buyer, listing_id, 184.99), 409)
        refused(instant(buyer, expiring, 100), 410)
        refused(instant(buyer, "lst_nowhere", 100), 404)
        refused(instant(buyer, dear, 200.01), 403, error="mandate_violation", constraint="maxSpend")
        refused(instant(buyer, poor, 100), 403, error="mandate_violation", constraint="requiredCondition")
        refused(instant(buyer, bare, 100), 403, error="mandate_violation", constraint="requiredAccessories")
        mixed = buyer.instant(listing_id, 185)
        mixed["listingId"] = poor
        refused(buyer.send(f"/market/listings/{listing_id}/instant_match", mixed), 422, path="/listingId")
    both = trader(store, new_id("both"), minAcceptablePrice=10, maxSpend=500)
    own = listed(both, ask=100, floor=10)
    with nothing_changes(store):
        refused(instant(both, own, 100), 409)

    no_instant = trader(store, new_id("buyer"), maxSpend=500, permissions={"canAcceptInstantMatch": False})
    with nothing_changes(store):
        refused(instant(no_instant, listing_id, 185), 403, error="mandate_violation",
                constraint="canAcceptInstantMatch")
    picky_seller = trader(store, new_id("seller"), minAcceptablePrice=10, permissions={"canAcceptInstantMatch": False})
    picky_listing = listed(picky_seller, ask=100, floor=10)
    with nothing_changes(store):
        body = refused(instant(buyer, picky_listing, 100), 403)
    assert "constraint" not in body
    assert [e["detail"]["constraint"] for e in picky_seller.audit()] == ["canAcceptInstantMatch"]
    assert [e["detail"]["constraint"] for e in buyer.audit()] == ["maxSpend", "requiredCondition", "requiredAccessories"]
    assert created(instant(buyer, listing_id, 185))["finalPrice"] == 185


def test_a_seller_may_agree_to_an_instant_match_on_a_contact(store):
    """spec 003: 3. Contact Request (protocol instant_match), 4. Protocol Agreement, 6. Instant
    Match: the buyer's instant match on its agreed request closes it; a request negotiating by
    another protocol cannot be closed by an instant match (409)."""
    seller, buyer = seller_and_buyer(store)
    listing_id = listed(seller, ask=180)
    request_id = agreed_request(seller, buyer, listing_id, "instant_match")
    sealed = agreed_request(seller, buyer, listing_id, "sealed_bid")
    with nothing_changes(store):
        refused(buyer.send(f"/market/listings/{listing_id}/instant_match",
                           buyer.instant(listing_id, 180, request_id=sealed)), 409)
    done = created(buyer.send(f"/market/listings/{listing_id}/instant_match",
                              buyer.instant(listing_id, 180, request_id=request_id)))
    assert done["requestId"] == request_id
    assert rows(store, market_requests, market_requests.c.id == request_id)[0].state == "closed"


# -- natural-language offers ----------------------------------------------------------------------------


def test_offers_alternate_and_accept_closes_at_the_standing_offer(store):
    """spec 003: 7. Natural Language Offer ("Continues until agreement or breakdown"), Protocol
    1: offers alternate (a second offer out of turn is 409); each reaches the other party's
    inbox; accept closes at the counterpart's standing offer; nothing is taken after."""
    seller, buyer = seller_and_buyer(store, floor=150, max_spend=200)
    listing_id = listed(seller, ask=180)
    request_id = agreed_request(seller, buyer, listing_id, "natural_language")
    with nothing_changes(store):
        refused(_offer(buyer, request_id, "buyer", action="accept"), 409)  # nothing to accept yet
    assert _offer(buyer, request_id, "buyer", 160).json()["turn"] == 1
    with nothing_changes(store):
        refused(_offer(buyer, request_id, "buyer", 161), 409)
    assert _offer(seller, request_id, "seller", 176).status_code == 200
    assert _offer(buyer, request_id, "buyer", 168).status_code == 200
    with nothing_changes(store):
        refused(_offer(buyer, request_id, "buyer", action="accept"), 409)  # out of turn
    r = _offer(seller, request_id, "seller", 172)
    assert r.json() == {"requestId": request_id, "turn": 4, "action": "offer", "offerPrice": 172, "state": "agreed"}
    delivered = [m["body"] for m in buyer.inbox()["messages"] if m["body"].get("type") == "offer"]
    assert [o.get("offerPrice") for o in delivered] == [176, 172]
    closed = created(_offer(buyer, request_id, "buyer", action="accept"))
    assert (closed["finalPrice"], closed["state"], closed["protocol"]) == (172, "closed", "natural_language")
    view = seller.get(f"/market/contact/{request_id}").json()
    assert [(o["party"], o["action"], o.get("offerPrice")) for o in view["offers"]] == \
        [("buyer", "offer", 160), ("seller", "offer", 176), ("buyer", "offer", 168), ("seller", "offer", 172),
         ("buyer", "accept", None)]
    assert view["dealId"] == closed["dealId"]
    with nothing_changes(store):
        refused(_offer(seller, request_id, "seller", 171), 409)


def test_the_price_is_read_from_the_text_when_offer_price_is_missing(store):
    """spec 003: 7. Natural Language Offer, Protocol 1 ("Framework extracts structured data when
    possible"): an offer without offerPrice has its price read from the message; the counterpart
    gets the message as sent plus the price read; a message naming no price is 422."""
    seller, buyer = seller_and_buyer(store)
    listing_id = listed(seller, ask=180)
    request_id = agreed_request(seller, buyer, listing_id, "natural_language")
    r = _offer(buyer, request_id, "buyer", message="Would you consider 165€? I see similar listings at that price.")
    assert r.status_code == 200 and (r.json()["offerPrice"], r.json()["readFromMessage"]) == (165, True), r.text
    delivered = [m["body"] for m in seller.inbox()["messages"] if m["body"].get("type") == "offer"][-1]
    assert delivered["offerPriceRead"] == 165 and "offerPrice" not in delivered
    with nothing_changes(store):
        refused(_offer(seller, request_id, "seller", message="Hmm, let me think about it."), 422, path="/offerPrice")
        refused(_offer(seller, request_id, "seller", 175, action="accept"), 422, path="/offerPrice")
    r = _offer(seller, request_id, "seller", message="I can do 175€ if you pick it up today.")
    assert r.json()["offerPrice"] == 175
    closed = created(_offer(buyer, request_id, "buyer", action="accept"))
    assert closed["finalPrice"] == 175


def test_a_reject_fails_the_negotiation(store):
    """spec 003: 7. Natural Language Offer ("until agreement or breakdown"): a reject ends the
    request without a deal and tells both parties; the listing stays live."""
    seller, buyer = seller_and_buyer(store)
    listing_id = listed(seller, ask=180)
    request_id = agreed_request(seller, buyer, listing_id, "natural_language")
    _offer(buyer, request_id, "buyer", 120)
    r = _offer(seller, request_id, "seller", action="reject", message="No, thanks.")
    assert r.status_code == 200 and (r.json()["state"], r.json()["reason"]) == ("failed", "rejected"), r.text
    for agent in (buyer, seller):
        assert [m["body"]["reason"] for m in agent.inbox()["messages"]
                if m["body"].get("event") == "negotiation_failed"] == ["rejected"]
    assert deal_count(store, listing_id) == 0
    with nothing_changes(store):
        refused(_offer(buyer, request_id, "buyer", 150), 409)


def test_the_turn_cap_ends_a_negotiation(make_store):
    """spec 003: 7. Natural Language Offer, Protocol 1 ("Slow (many message rounds)"): with
    MarketSettings(offer_turn_cap=4) the fourth offer without agreement fails the request
    (turn_cap); a fifth is 409."""
    store = make_store(market=MarketSettings(offer_turn_cap=4))
    seller, buyer = seller_and_buyer(store)
    listing_id = listed(seller, ask=180)
    request_id = agreed_request(seller, buyer, listing_id, "natural_language")
    for n, (agent, party, price) in enumerate([(buyer, "buyer", 155), (seller, "seller", 179), (buyer, "buyer", 160)], 1):
        r = _offer(agent, request_id, party, price)
        assert r.status_code == 200 and r.json()["state"] == "agreed" and r.json()["turn"] == n, r.text
    last = _offer(seller, request_id, "seller", 178)
    assert (last.json()["state"], last.json()["reason"], last.json()["turn"]) == ("failed", "turn_cap", 4)
    with nothing_changes(store):
        refused(_offer(buyer, request_id, "buyer", action="accept"), 409)
    assert deal_count(store, listing_id) == 0


def test_offers_are_held_to_the_mandates(store):
    """spec 003: Owner Mandate Format ("Constraint enforcement: framework rejects offers violating
    mandate (agent can't override)"): a buyer's offer above maxSpend, a seller's below the floor,
    accepting a standing offer the mandate forbids, or offering without canNegotiate is 403 naming
    the constraint, audited; the offer is neither stored nor delivered."""
    seller, buyer = seller_and_buyer(store, floor=150, max_spend=200)
    listing_id = listed(seller, ask=210, floor=150)
    request_id = agreed_request(seller, buyer, listing_id, "natural_language")
    with nothing_changes(store):
        refused(_offer(buyer, request_id, "buyer", 200.01), 403, error="mandate_violation", constraint="maxSpend")
        refused(_offer(seller, request_id, "seller", 149.99), 403, error="mandate_violation",
                constraint="minAcceptablePrice")
    assert _offer(seller, request_id, "seller", 210).status_code == 200
    with nothing_changes(store):
        refused(_offer(buyer, request_id, "buyer", action="accept"), 403, error="mandate_violation",
                constraint="maxSpend")
        refused(_offer(buyer, request_id, "buyer", message="Ok, I'll pay 250€, my owner said so"), 403,
                error="mandate_violation", constraint="maxSpend")
    assert _offer(buyer, request_id, "buyer", 140).status_code == 200  # a buyer may offer below the floor
    with nothing_changes(store):
        refused(_offer(seller, request_id, "seller", action="accept"), 403, error="mandate_violation",
                constraint="minAcceptablePrice")
    buyer.file_mandate(maxSpend=200, permissions={"canNegotiate": False}, issued=store.clock())
    assert _offer(seller, request_id, "seller", 190).status_code == 200
    with nothing_changes(store):
        refused(_offer(buyer, request_id, "buyer", 180), 403, error="mandate_violation", constraint="canNegotiate")
    assert [e["detail"]["constraint"] for e in buyer.audit() if e["event"] == "mandate_violation"] == \
        ["maxSpend", "maxSpend", "maxSpend", "canNegotiate"]
    assert [e["detail"]["constraint"] for e in seller.audit() if e["event"] == "mandate_violation"] == \
        ["minAcceptablePrice", "minAcceptablePrice"]


# -- a commitment that lapsed before the deal closed --------------------------------------------------


def test_a_sealed_bid_whose_owner_no_longer_allows_it_does_not_close(store):
    """spec 003: Protocol 2 ("Both parties are cryptographically committed"), Owner Mandate
    Format ("Enforced by framework"; dealMustCloseBy): when the second bid comes in, the first
    bid must still be one its owner's mandate allows — its dealMustCloseBy not passed, no newer
    mandate refusing it. Otherwise the request fails (reason mandate, telling neither bid), no
    deal is opened and the listing stays live; the lapsed party's audit log says why."""
    seller, buyer = seller_and_buyer(store, floor=150, max_spend=200)
    buyer.file_mandate(maxSpend=200, dealMustCloseBy=z(store.clock() + timedelta(minutes=30)), issued=store.clock())
    listing_id = listed(seller, ask=220, floor=150)
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    assert _bid(buyer, request_id, "buyer", 191.37).status_code == 202
    store.clock.advance(hours=1)  # the buyer's deal had to close by now
    r = _bid(seller, request_id, "seller", 160)
    assert r.status_code == 200 and r.json() == {"requestId": request_id, "state": "failed", "reason": "mandate"}, r.text
    assert deal_count(store, listing_id) == 0
    assert store.http.get(f"/market/listings/{listing_id}").json()["status"] == "live"
    assert everything_said_to([r.text, str(seller.inbox())], "191.37", "19137") == []
    assert [e["detail"]["constraint"] for e in buyer.audit()] == ["dealMustCloseBy"]

    # a newer mandate with a higher floor: the seller's standing bid no longer binds it
    listing_id = listed(seller, ask=220, floor=150)
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    buyer.file_mandate(maxSpend=200, issued=store.clock())
    assert _bid(seller, request_id, "seller", 155).status_code == 202
    store.clock.advance(seconds=1)
    seller.file_mandate(minAcceptablePrice=165, issued=store.clock())
    r = _bid(buyer, request_id, "buyer", 195)
    assert r.status_code == 200 and r.json()["reason"] == "mandate", r.text
    assert deal_count(store, listing_id) == 0
    assert [e["detail"]["constraint"] for e in seller.audit()] == ["minAcceptablePrice"]


def test_a_standing_offer_whose_owner_no_longer_allows_it_cannot_be_accepted(store):
    """spec 003: 7. Natural Language Offer, Owner Mandate Format ("Enforced by framework"):
    accepting closes at the counterpart's standing offer, so that offer must still be one its
    owner's mandate allows; if a newer mandate (or a passed dealMustCloseBy) forbids it, the
    accept is 409, nothing changes, and the lapsed party's audit log says why."""
    seller, buyer = seller_and_buyer(store, floor=150, max_spend=200)
    listing_id = listed(seller, ask=220, floor=150)
    request_id = agreed_request(seller, buyer, listing_id, "natural_language")
    assert _offer(seller, request_id, "seller", 160).status_code == 200
    store.clock.advance(seconds=1)
    seller.file_mandate(minAcceptablePrice=170, issued=store.clock())
    with nothing_changes(store):
        refused(_offer(buyer, request_id, "buyer", action="accept"), 409)
    assert deal_count(store, listing_id) == 0
    assert [e["detail"]["constraint"] for e in seller.audit()] == ["minAcceptablePrice"]
    # the buyer may still counter; the seller, under its new mandate, may then accept
    assert _offer(buyer, request_id, "buyer", 175).status_code == 200
    assert created(_offer(seller, request_id, "seller", action="accept"))["finalPrice"] == 175

    buyer.file_mandate(maxSpend=200, dealMustCloseBy=z(store.clock() + timedelta(minutes=10)), issued=store.clock())
    listing_id = listed(seller, ask=220, floor=170)
    request_id = agreed_request(seller, buyer, listing_id, "natural_language")
    assert _offer(buyer, request_id, "buyer", 180).status_code == 200
    store.clock.advance(minutes=11)
    with nothing_changes(store):
        refused(_offer(seller, request_id, "seller", action="accept"), 409)
    assert deal_count(store, listing_id) == 0


def test_a_signed_offer_cannot_be_replayed(store):
    """spec 003: 7. Natural Language Offer, Security Model ("Secure (cryptographic
    commitments)"); issue 29, attack 6: the counterpart receives every offer signed, in its inbox.
    Each carries its party's own sequence number, so no signed offer is taken twice — not an
    earlier one (to put back a price the party left behind, and accept it), and not the latest
    one (replayed by the counterpart as the party's turn, to burn it): 409, nothing changes.
    Holding firm is a new message with the next number."""
    seller, buyer = seller_and_buyer(store)
    listing_id = listed(seller, ask=190)
    request_id = agreed_request(seller, buyer, listing_id, "natural_language")
    assert _offer(buyer, request_id, "buyer", 178).status_code == 200
    store.clock.advance(seconds=1)
    assert _offer(seller, request_id, "seller", 185).status_code == 200
    store.clock.advance(seconds=1)
    assert _offer(buyer, request_id, "buyer", 165).status_code == 200  # the buyer thinks again, lower
    store.clock.advance(seconds=1)
    assert _offer(seller, request_id, "seller", 184).status_code == 200
    received = [m["body"] for m in seller.inbox()["messages"] if m["body"].get("type") == "offer"]
    first, latest = received
    assert (first["offerPrice"], latest["offerPrice"], first["sequence"], latest["sequence"]) == (178, 165, 1, 2)
    with nothing_changes(store):
        refused(store.http.post(f"/market/contact/{request_id}/offers", json=first), 409)
    with nothing_changes(store):  # the buyer's turn, taken by the seller with the buyer's own latest offer
        refused(store.http.post(f"/market/contact/{request_id}/offers", json=latest), 409)
    with nothing_changes(store):
        refused(_offer(seller, request_id, "seller", action="accept"), 409)  # not the seller's turn
    again = buyer.send(f"/market/contact/{request_id}/offers", buyer.offer(request_id, "buyer", 165))
    assert again.status_code == 200 and again.json()["offerPrice"] == 165, again.text  # holding firm
    assert created(_offer(seller, request_id, "seller", action="accept"))["finalPrice"] == 165
