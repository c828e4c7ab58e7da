"""What a mandate bounds is money (issue 29; docs/market-api.md, "What a mandate bounds: money,
not a number"): ``maxSpend`` bounds each action's total (price × quantity + the listing's
shipping), ``budget`` the sum of an agent's pending and confirmed deals, ``quantityOnHand`` a
seller's units; auction fills are capped, never the mandate. Over HTTP, on a real store; the
budget races also on PostgreSQL."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import httpx
from sqlalchemy import update

from haggler.storage.schema import market_deals, market_orders, market_requests
from tests.support.market import (
    BOOK,
    agreed_request,
    created,
    database,
    listed,
    new_id,
    refused,
    rows,
    seller_and_buyer,
    trader,
    z,
)
from tests.support.matching import race


def _budget(euros):
    """A mandate's budget in AP2's payment.budget shape."""
    return {"max": euros, "currency": "EUR"}


def _instant(buyer, listing_id, price, **fields):
    return buyer.send(f"/market/listings/{listing_id}/instant_match", {**buyer.instant(listing_id, price), **fields})


def _place(agent, side, price, quantity):
    return created(agent.send(f"/market/books/{BOOK}/orders", agent.order(side, price, quantity)))


def _clear(store, agent):
    answer = store.http.post(f"/market/books/{BOOK}/clear", headers=agent.auth)
    assert answer.status_code == 200, answer.text
    return answer.json()["clearings"]


def _deals_of(store, buyer_id):
    return rows(store, market_deals, market_deals.c.buyer_id == buyer_id)


# -- maxSpend: the total --------------------------------------------------------------------------------


def test_max_spend_counts_the_listings_shipping(store):
    """maxSpend bounds ask + shippingCost: 190 + 15 is refused under 200 and taken under 205; the
    deal holds the shipping and the total, inside the bytes both parties sign."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=200)
    listing_id = listed(seller, ask=190, floor=100, shipping=15)
    refused(_instant(buyer, listing_id, 190), 403, error="mandate_violation", constraint="maxSpend")
    buyer.file_mandate(maxSpend=205, issued=store.clock())
    closed = created(_instant(buyer, listing_id, 190))
    assert (closed["finalPrice"], closed["total"]) == (190, 205)
    deal = buyer.deal(closed["dealId"])["deal"]
    assert (deal["finalPrice"], deal["quantity"], deal["shippingCost"], deal["total"]) == (190, 1, 15, 205)


def test_a_sealed_bid_and_an_offer_count_shipping_too(store):
    """A sealed bid's maxPrice and an offer are held to maxSpend with the shipping added."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=200)
    listing_id = listed(seller, ask=195, floor=100, shipping=20)
    sealed = agreed_request(seller, buyer, listing_id, "sealed_bid")
    refused(buyer.send(f"/market/contact/{sealed}/bids", buyer.bid(sealed, "buyer", 181)), 403, constraint="maxSpend")
    created(buyer.send(f"/market/contact/{sealed}/bids", buyer.bid(sealed, "buyer", 180)), 202)
    talk = agreed_request(seller, buyer, listed(seller, ask=195, floor=100, shipping=20), "natural_language")
    path = f"/market/contact/{talk}/offers"
    refused(buyer.send(path, buyer.offer(talk, "buyer", 180.01)), 403, constraint="maxSpend")
    assert buyer.send(path, buyer.offer(talk, "buyer", 180)).status_code == 200


def test_an_order_is_held_to_max_spend_on_its_total(store):
    """Attack 1 of issue 29, in our words: 200 units at 200 under maxSpend 200 is a total of
    40,000, refused when placed; one unit is fine."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=200)
    refused(buyer.send(f"/market/books/{BOOK}/orders", buyer.order("buy", 200, 200)), 403, constraint="maxSpend")
    _place(buyer, "buy", 200, 1)


# -- budget: across deals --------------------------------------------------------------------------------


def test_a_budget_bounds_the_sum_of_pending_and_confirmed_deals(store):
    """With budget 500, two matches of 200 fit and the third does not (pending deals count, and
    so do confirmed ones); the refusal changes nothing: the listing stays live."""
    seller = trader(store, new_id("seller"), minAcceptablePrice=100)
    buyer = trader(store, new_id("buyer"), maxSpend=200, budget=_budget(500))
    listing_ids = [listed(seller, ask=200, floor=100) for _ in range(3)]
    first = created(_instant(buyer, listing_ids[0], 200))["dealId"]
    created(_instant(buyer, listing_ids[1], 200))
    refused(_instant(buyer, listing_ids[2], 200), 403, constraint="budget")
    assert store.http.get(f"/market/listings/{listing_ids[2]}").json()["status"] == "live"
    for agent, party in ((buyer, "buyer"), (seller, "seller")):
        assert agent.sign_deal(first, party).status_code == 200
    refused(_instant(buyer, listing_ids[2], 200), 403, constraint="budget")
    assert sum(deal.total_cents for deal in _deals_of(store, buyer.id)) == 40000


def test_a_budget_counts_only_its_own_currency(store):
    """The budget is in the mandate's currency; a mandate whose budget names another is refused."""
    buyer = trader(store, new_id("buyer"))
    body = buyer.mandate(maxSpend=200, budget={"max": 500, "currency": "USD"})
    refused(store.http.post("/market/mandates", json=body), 422)
    body = buyer.mandate(maxSpend=200, budget={"type": "payment.budget", "max": 500, "currency": "EUR"})
    assert store.http.post("/market/mandates", json=body).status_code == 201


def test_racing_matches_never_overrun_a_budget(make_store, db_url):
    """Six instant matches on six listings, released together by a barrier, each on its own
    connection, against a budget that fits two: exactly two deals, the rest 403 budget."""
    store = make_store(db_url=db_url)
    seller = trader(store, new_id("seller"), minAcceptablePrice=100)
    buyer = trader(store, new_id("buyer"), maxSpend=200, budget=_budget(400))
    listing_ids = [listed(seller, ask=200, floor=100) for _ in range(6)]
    clients = [httpx.Client(base_url=store.base, timeout=30) for _ in listing_ids]
    try:
        racers = [buyer.on(client) for client in clients]
        messages = [racer.sign(racer.instant(listing_id, 200)) for racer, listing_id in zip(racers, listing_ids)]
        responses = race([lambda racer=racer, listing_id=listing_id, message=message: racer.http.post(
            f"/market/listings/{listing_id}/instant_match", json=message)
            for racer, listing_id, message in zip(racers, listing_ids, messages)])
    finally:
        for client in clients:
            client.close()
    assert Counter(r.status_code for r in responses) == Counter({201: 2, 403: 4}), [r.text for r in responses]
    assert sum(deal.total_cents for deal in _deals_of(store, buyer.id)) == 40000


# -- quantity on hand -------------------------------------------------------------------------------------


def test_a_seller_never_sells_more_than_it_has(store):
    """quantityOnHand 2: two listings sell; a third buyer's match is refused with the seller's
    mandate kept private (a plain 403), and logged for the seller."""
    seller = trader(store, new_id("seller"), minAcceptablePrice=100, quantityOnHand=2)
    buyers = [trader(store, new_id("buyer"), maxSpend=200) for _ in range(3)]
    listing_ids = [listed(seller, ask=150, floor=100) for _ in range(3)]
    for buyer, listing_id in zip(buyers[:2], listing_ids):
        created(_instant(buyer, listing_id, 150))
    answer = _instant(buyers[2], listing_ids[2], 150)
    assert answer.status_code == 403 and "quantityOnHand" not in answer.text, answer.text
    assert [e["detail"]["constraint"] for e in seller.audit() if e["event"] == "mandate_violation"] == \
        ["quantityOnHand"]


# -- the double auction: fills are capped ------------------------------------------------------------------


def test_a_fill_is_capped_by_what_the_buyer_may_still_spend(store):
    """A buy order of 10 at 100 placed under maxSpend 1000; the owner then lowers it to 350. The
    clearing fills 3 (3 × 100 ≤ 350 at the order's limit), and the other 7 stay in the book."""
    seller, buyer = seller_and_buyer(store, floor=50, max_spend=1000)
    order_id = _place(buyer, "buy", 100, 10)["orderId"]
    _place(seller, "sell", 50, 10)
    buyer.file_mandate(maxSpend=350, issued=store.clock())
    [clearing] = _clear(store, buyer)
    assert clearing["volume"] == 3
    [deal] = _deals_of(store, buyer.id)
    assert deal.quantity == 3 and deal.total_cents == 3 * deal.price_cents <= 35000
    [order] = rows(store, market_orders, market_orders.c.id == order_id)
    assert (order.status, order.remaining) == ("open", 7)


def test_an_agents_orders_share_its_budget_in_arrival_order(store):
    """Budget 500 across two buy orders of 3 at 100: the first fills 3, the second 2."""
    seller = trader(store, new_id("seller"), minAcceptablePrice=50)
    buyer = trader(store, new_id("buyer"), maxSpend=300, budget=_budget(500))
    first, second = _place(buyer, "buy", 100, 3)["orderId"], _place(buyer, "buy", 100, 3)["orderId"]
    _place(seller, "sell", 100, 10)
    _clear(store, buyer)
    filled = {row.id: row.quantity - row.remaining for row in rows(store, market_orders,
                                                                    market_orders.c.agent_id == buyer.id)}
    assert filled == {first: 3, second: 2}
    assert sum(deal.total_cents for deal in _deals_of(store, buyer.id)) == 50000


def test_a_sell_order_is_capped_by_the_quantity_on_hand(store):
    """A seller with 3 on hand asks 3 (4 is refused when placed); one unit then sells by instant
    match elsewhere. The clearing trades 2, and 1 stays in the book."""
    seller = trader(store, new_id("seller"), minAcceptablePrice=50, quantityOnHand=3)
    buyer = trader(store, new_id("buyer"), maxSpend=1000)
    refused(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 100, 4)), 403,
            constraint="quantityOnHand")
    order_id = _place(seller, "sell", 100, 3)["orderId"]
    created(_instant(buyer, listed(seller, ask=100, floor=50), 100))
    _place(buyer, "buy", 100, 3)
    [clearing] = _clear(store, buyer)
    assert clearing["volume"] == 2
    [order] = rows(store, market_orders, market_orders.c.id == order_id)
    assert order.remaining == 1


# -- the mandate in force when the deal is signed -------------------------------------------------------------


def test_a_lowered_budget_voids_the_newest_pending_deals_first(store):
    """Three pending deals of 200; the owner lowers the budget to 400: the newest is void (its
    listing live again, its signature 409), the two oldest stand and may still be signed."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=200)
    listing_ids = [listed(seller, ask=200, floor=100) for _ in range(3)]
    deal_ids = []
    for listing_id in listing_ids:
        store.clock.advance(seconds=1)
        deal_ids.append(created(_instant(buyer, listing_id, 200))["dealId"])
    store.clock.advance(seconds=1)
    buyer.file_mandate(maxSpend=200, budget=_budget(400), issued=store.clock())
    assert [buyer.deal(deal_id)["status"] for deal_id in deal_ids] == ["awaiting_signatures"] * 2 + ["void"]
    assert store.http.get(f"/market/listings/{listing_ids[2]}").json()["status"] == "live"
    refused(buyer.sign_deal(deal_ids[2], "buyer"), 409)
    assert buyer.sign_deal(deal_ids[0], "buyer").status_code == 200
    assert [e["detail"]["constraint"] for e in buyer.audit() if e["event"] == "mandate_violation"] == ["budget"]


# -- context: the embedded ownerMandate, the goods ------------------------------------------------------------


def test_an_owner_mandate_signed_for_another_listing_is_refused(store):
    """An embedded ownerMandate names the listing it is for, inside the owner's signature."""
    seller, _ = seller_and_buyer(store, floor=100)
    other = seller.listing(floor=100)
    body = seller.listing(floor=100)
    body["ownerMandate"] = other["ownerMandate"]
    answer = seller.send("/market/listings", body)
    assert answer.status_code == 422 and answer.json()["path"] == "/ownerMandate/listingId", answer.text


def test_a_revision_cannot_carry_an_older_owner_mandate(store):
    """The owner raised the floor to 170 (a newer ownerMandate); a revision with the older one
    (floor 100) is 409."""
    seller, _ = seller_and_buyer(store, floor=100)
    listing_id = new_id("lst")
    old = seller.listing(listing_id=listing_id, ask=200, floor=100)
    store.clock.advance(seconds=1)
    created(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=200, floor=170)))
    store.clock.advance(seconds=1)
    refused(seller.send("/market/listings", {**old, "timestamp": seller.now()}), 409)


def test_a_wanted_ads_owner_mandate_is_bound_to_it(store):
    _, buyer = seller_and_buyer(store)
    body = buyer.wanted()
    body["ownerMandate"] = buyer.wanted()["ownerMandate"]
    answer = buyer.send("/market/wanted", body)
    assert answer.status_code == 422 and answer.json()["path"] == "/ownerMandate/wantedId", answer.text


def test_changing_the_goods_fails_the_open_requests_and_a_price_change_does_not(store):
    """A revision of the pricing keeps the negotiation; one of the item fails it (both told
    listing_revised) and the next message on it is 409. The deal holds the item as agreed."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=250)
    listing_id = listed(seller, ask=200, floor=100)
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    created(buyer.send(f"/market/contact/{request_id}/bids", buyer.bid(request_id, "buyer", 190)), 202)
    store.clock.advance(seconds=1)
    created(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=195, floor=100)), 200)
    store.clock.advance(seconds=1)
    box = {"category": "electronics", "subcategory": "gaming_console", "name": "empty_box"}
    created(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=195, floor=100, item=box)), 200)
    assert store.http.get(f"/market/listings/{listing_id}").json()["listingVersion"] == 3
    refused(seller.send(f"/market/contact/{request_id}/bids", seller.bid(request_id, "seller", 150)), 409)
    for agent in (buyer, seller):
        notices = [m["body"] for m in agent.inbox()["messages"] if m["body"].get("event") == "negotiation_failed"]
        assert notices == [{"event": "negotiation_failed", "requestId": request_id, "reason": "listing_revised"}]
    fresh = agreed_request(seller, buyer, listing_id, "sealed_bid")
    created(buyer.send(f"/market/contact/{fresh}/bids", buyer.bid(fresh, "buyer", 190)), 202)
    deal_id = created(seller.send(f"/market/contact/{fresh}/bids", seller.bid(fresh, "seller", 150)))["dealId"]
    deal = buyer.deal(deal_id)["deal"]
    assert deal["item"]["name"] == "empty_box" and deal["listingVersion"] == 3


def test_an_instant_match_on_a_version_it_did_not_read_is_409(store):
    seller, buyer = seller_and_buyer(store, floor=100)
    listing_id = listed(seller, ask=180, floor=100)
    store.clock.advance(seconds=1)
    created(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=180, floor=100,
                                                           condition="fair")), 200)
    refused(_instant(buyer, listing_id, 180, listingVersion=1), 409)
    assert created(_instant(buyer, listing_id, 180, listingVersion=2))["total"] == 180


def test_a_request_that_began_during_a_revision_still_meets_the_new_goods_with_409(store):
    """A contact written while a revision of the goods commits (on PostgreSQL the revision cannot
    see it to fail it) is bound to the goods it read: every later message on it is 409. Made here
    by giving an open request the hash of other goods."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=250)
    listing_id = listed(seller, ask=200, floor=100)
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    with database(store).write() as conn:
        conn.execute(update(market_requests).where(market_requests.c.id == request_id).values(item_hash="0" * 64))
    refused(buyer.send(f"/market/contact/{request_id}/bids", buyer.bid(request_id, "buyer", 190)), 409)
    refused(_instant(buyer, listing_id, 200, requestId=request_id), 409)


# -- checked at the moment of commitment ---------------------------------------------------------------


def test_a_deal_is_checked_against_both_mandates_when_it_would_be_confirmed(store):
    """The buyer signs within its mandate (dealMustCloseBy in an hour); the seller signs two hours
    later. The buyer's mandate no longer allows the deal at that moment, though nothing was
    refiled: the deal ends void instead of confirmed, its listing live again."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=200,
                                     dealMustCloseBy=z(store.clock() + timedelta(hours=1)))
    listing_id = listed(seller, ask=180, floor=100)
    deal_id = created(_instant(buyer, listing_id, 180))["dealId"]
    assert buyer.sign_deal(deal_id, "buyer").status_code == 200
    store.clock.advance(hours=2)
    answer = seller.sign_deal(deal_id, "seller")
    assert answer.status_code == 200 and answer.json()["status"] == "void", answer.text
    assert store.http.get(f"/market/listings/{listing_id}").json()["status"] == "live"
    assert [(e["detail"]["action"], e["detail"]["constraint"]) for e in buyer.audit()
            if e["event"] == "mandate_violation"] == [("deal voided at confirmation", "dealMustCloseBy")]


def test_a_mandate_dated_ahead_voids_at_once_what_it_will_forbid(store):
    """The buyer signed at 180; its owner files maxSpend 160 dated a minute ahead. Were it left
    until it is in force, the seller's signature could confirm a deal it forbids: it is void now."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=200)
    deal_id = created(_instant(buyer, listed(seller, ask=180, floor=100), 180))["dealId"]
    assert buyer.sign_deal(deal_id, "buyer").status_code == 200
    buyer.file_mandate(maxSpend=160, issued=store.clock() + timedelta(minutes=1))
    assert buyer.deal(deal_id)["status"] == "void"
    store.clock.advance(minutes=2)
    refused(seller.sign_deal(deal_id, "seller"), 409)


def test_a_listing_named_like_a_book_is_still_a_listing(store):
    """A seller may name a listing ``book:…``; a deal on it is a listing's deal (released when
    cancelled, held to the listing's facts), told apart from an auction fill by its protocol."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=200, requiredCondition="good")
    listing_id = listed(seller, ask=180, floor=100, listing_id="book:electronics.gaming_console.nintendo_switch")
    deal_id = created(_instant(buyer, listing_id, 180))["dealId"]
    assert buyer.sign_deal(deal_id, "buyer").status_code == 200  # the listing's condition is read
    cancel = store.http.post(f"/market/deals/{deal_id}/cancel", headers=seller.auth)
    assert cancel.status_code == 200 and store.http.get(f"/market/listings/{listing_id}").json()["status"] == "live"
