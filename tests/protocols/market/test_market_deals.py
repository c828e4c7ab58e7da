"""Deals and the double auction over the market's HTTP API (spec 003: 8. Deal Confirmation,
Owner Mandate Format ("requiresOwnerApproval"), Protocol 4: Double Auction)."""

from __future__ import annotations

from datetime import timedelta

from haggler.protocols.market.auction import Order, Side, clear
from haggler.protocols.market.offline_check import check_deal
from haggler.storage.schema import market_deals, market_orders
from haggler.trust.messages import sign_deal
from tests.support.market import (
    BOOK,
    created,
    new_id,
    nothing_changes,
    refused,
    rows,
    seller_and_buyer,
    trader,
)

OTHER_BOOK = "electronics.gaming_console.playstation_5"


def _instant_deal(seller, buyer, ask=180):
    listing = seller.listing(ask=ask)
    created(seller.send("/market/listings", listing))
    done = created(buyer.send(f"/market/listings/{listing['listingId']}/instant_match",
                              buyer.instant(listing["listingId"], ask)))
    return done["dealId"]


def _signature(agent, key, deal_id, party, **change):
    deal = agent.deal(deal_id)["deal"]
    return sign_deal(key, {**deal, **change}, party)[party]["signature"]


def _post_signature(store, deal_id, party, signature, what="signatures"):
    return store.http.post(f"/market/deals/{deal_id}/{what}", json={"party": party, "signature": signature})


def _deal_row(store, deal_id):
    return rows(store, market_deals, market_deals.c.id == deal_id)[0]


# -- deal confirmation ------------------------------------------------------------------------------------


def test_both_signatures_confirm_the_deal(store):
    """spec 003: 8. Deal Confirmation ("Both parties' signatures prove commitment"): a closed deal
    awaits both signatures over the same bytes; with both it is confirmed, both parties are told,
    and the served document verifies offline."""
    seller, buyer = seller_and_buyer(store)
    deal_id = _instant_deal(seller, buyer)
    document = buyer.deal(deal_id)
    assert document["status"] == "awaiting_signatures" and document["needsOwnerApproval"] == []
    assert document["publicKeys"] == {"buyer": buyer.public_key, "seller": seller.public_key}
    deal = document["deal"]
    assert (deal["type"], deal["finalPrice"], deal["protocol"], deal["buyer"], deal["seller"]) == \
        ("deal_confirmed", 180, "instant_match", {"agentId": buyer.id}, {"agentId": seller.id})
    signed = buyer.sign_deal(deal_id, "buyer")
    assert signed.status_code == 200 and signed.json()["status"] == "awaiting_signatures", signed.text
    assert buyer.sign_deal(deal_id, "buyer").json()["status"] == "awaiting_signatures"  # the same signature again
    confirmed = seller.sign_deal(deal_id, "seller").json()
    assert confirmed["status"] == "confirmed"
    assert set(confirmed["deal"]["buyer"]) == set(confirmed["deal"]["seller"]) == {"agentId", "signature"}
    assert check_deal(confirmed).valid
    for agent in (buyer, seller):
        assert [m["body"]["dealId"] for m in agent.inbox()["messages"]
                if m["body"].get("event") == "deal_confirmed"] == [deal_id]


def test_a_signature_that_does_not_verify_is_401_and_not_recorded(store):
    """spec 003: 8. Deal Confirmation: a signature by another key (the other party's, the
    owner's), over other terms, or in the other party's place is 401 and not recorded; a
    malformed body is 422 naming the field; an unknown deal 404."""
    seller, buyer = seller_and_buyer(store)
    deal_id = _instant_deal(seller, buyer)
    attempts = [
        ("buyer", _signature(buyer, seller.key, deal_id, "buyer")),
        ("buyer", _signature(buyer, buyer.owner, deal_id, "buyer")),
        ("buyer", _signature(buyer, buyer.key, deal_id, "buyer", finalPrice=1)),
        ("seller", _signature(buyer, buyer.key, deal_id, "seller")),
        ("buyer", "0x" + "ab" * 64),
    ]
    with nothing_changes(store):
        for party, signature in attempts:
            refused(_post_signature(store, deal_id, party, signature), 401)
        good = _signature(buyer, buyer.key, deal_id, "buyer")
        refused(store.http.post(f"/market/deals/{deal_id}/signatures",
                                json={"party": "buyer", "signature": good, "note": "x"}), 422, path="/note")
        refused(_post_signature(store, deal_id, "owner", good), 422, path="/party")
        refused(_post_signature(store, deal_id, "buyer", "0x12"), 422, path="/signature")
        refused(_post_signature(store, "dl_nowhere", "buyer", good), 404)
    row = _deal_row(store, deal_id)
    assert (row.buyer_signature, row.seller_signature, row.status) == (None, None, "awaiting_signatures")
    assert buyer.sign_deal(deal_id, "buyer").status_code == 200


def test_owner_approval_holds_the_deal_until_the_owner_signs(store):
    """spec 003: Owner Mandate Format ("requiresOwnerApproval"): a deal of an agent whose mandate
    requires it is awaiting_owner_approval after both signatures, until POST
    /market/deals/{id}/approvals carries the owner key's signature over the same bytes; an
    approval by the agent's key is 401, one for a party that needs none 409."""
    seller, buyer = seller_and_buyer(store, buyer_permissions={"requiresOwnerApproval": True})
    deal_id = _instant_deal(seller, buyer)
    assert buyer.deal(deal_id)["needsOwnerApproval"] == ["buyer"]
    buyer.sign_deal(deal_id, "buyer")
    assert seller.sign_deal(deal_id, "seller").json()["status"] == "awaiting_owner_approval"
    with nothing_changes(store):
        refused(_post_signature(store, deal_id, "buyer", _signature(buyer, buyer.key, deal_id, "buyer"), "approvals"), 401)
        refused(_post_signature(store, deal_id, "buyer", _signature(buyer, seller.owner, deal_id, "buyer"),
                                "approvals"), 401)
        refused(_post_signature(store, deal_id, "seller", _signature(seller, seller.owner, deal_id, "seller"),
                                "approvals"), 409)
    assert buyer.deal(deal_id)["status"] == "awaiting_owner_approval"
    assert not [m for m in buyer.inbox()["messages"] if m["body"].get("event") == "deal_confirmed"]
    approved = buyer.sign_deal_as_owner(deal_id, "buyer")
    assert approved.status_code == 200 and approved.json()["status"] == "confirmed", approved.text
    assert approved.json()["ownerApprovals"]["buyer"]["publicKey"] == buyer.owner_key
    assert check_deal(approved.json()).valid

    # an approval given first waits for the signatures
    deal_id = _instant_deal(seller, buyer)
    assert buyer.sign_deal_as_owner(deal_id, "buyer").json()["status"] == "awaiting_signatures"
    buyer.sign_deal(deal_id, "buyer")
    assert seller.sign_deal(deal_id, "seller").json()["status"] == "confirmed"


def test_a_party_whose_mandate_forbids_the_deal_cannot_sign_it(store):
    """spec 003: Owner Mandate Format ("Enforced by framework", "Constrained action space: agent
    can't finalize deal above budget"): signing is confirming; a party whose mandate no longer
    allows the deal at the instant it signs (a passed dealMustCloseBy) is 403 naming the
    constraint, audited, and its signature is not recorded. A newer mandate with a lower
    maxSpend does not wait for the signature: filing it voids the deal (issue 29), so signing it
    is 409, and the void is audited."""
    seller, buyer = seller_and_buyer(store, max_spend=200)
    seller.file_mandate(minAcceptablePrice=150, dealMustCloseBy=(store.clock() + timedelta(hours=1)).isoformat(),
                        issued=store.clock() - timedelta(minutes=30))
    voided = _instant_deal(seller, buyer, ask=180)
    buyer.file_mandate(maxSpend=179.99, issued=store.clock())
    with nothing_changes(store):
        refused(buyer.sign_deal(voided, "buyer"), 409, error=f"deal {voided} is void")
    deal_id = _instant_deal(seller, buyer, ask=170)
    store.clock.advance(hours=1, seconds=1)
    with nothing_changes(store):
        refused(seller.sign_deal(deal_id, "seller"), 403, error="mandate_violation", constraint="dealMustCloseBy")
    assert [e["detail"] for e in buyer.audit()] == [{"action": "deal voided by a new mandate", "constraint": "maxSpend",
                                                     "dealId": voided}]
    assert [e["detail"]["constraint"] for e in seller.audit()] == ["dealMustCloseBy"]
    row = _deal_row(store, deal_id)
    assert (row.buyer_signature, row.seller_signature) == (None, None)


def test_only_the_parties_see_a_deal(store):
    """spec 003: 8. Deal Confirmation: GET /market/deals/{id} is for the deal's two parties."""
    seller, buyer = seller_and_buyer(store)
    deal_id = _instant_deal(seller, buyer)
    outsider = trader(store, new_id("outsider"), maxSpend=100)
    refused(outsider.get(f"/market/deals/{deal_id}"), 403)
    refused(store.http.get(f"/market/deals/{deal_id}"), 401)
    refused(buyer.get("/market/deals/dl_nowhere"), 404)
    assert seller.get(f"/market/deals/{deal_id}").json() == buyer.get(f"/market/deals/{deal_id}").json()


# -- the double auction -------------------------------------------------------------------------------------


def _place(agent, side, price, quantity=1, book=BOOK):
    message = agent.order(side, price, quantity, item=book)
    return message["orderId"], agent.send(f"/market/books/{book}/orders", message)


def test_orders_are_held_to_the_mandates(store):
    """spec 003: Protocol 4: Double Auction, Owner Mandate Format: a bid above maxSpend, an ask
    below the floor, an order without canNegotiate (price discovery) or in another currency is
    403 naming the constraint, audited, and not in the book; a malformed order is 422."""
    seller, buyer = seller_and_buyer(store, floor=150, max_spend=200)
    timid = trader(store, new_id("timid"), maxSpend=500, permissions={"canNegotiate": False})
    with nothing_changes(store):
        refused(_place(buyer, "buy", 200.01)[1], 403, error="mandate_violation", constraint="maxSpend")
        refused(_place(seller, "sell", 149.99)[1], 403, error="mandate_violation", constraint="minAcceptablePrice")
        refused(_place(buyer, "sell", 300)[1], 403, error="mandate_violation", constraint="minAcceptablePrice")
        refused(_place(timid, "buy", 100)[1], 403, error="mandate_violation", constraint="canNegotiate")
        dollars = buyer.order("buy", 100)
        dollars["currency"] = "USD"
        refused(buyer.send(f"/market/books/{BOOK}/orders", dollars), 403, error="mandate_violation",
                constraint="currency")
        refused(buyer.send(f"/market/books/{OTHER_BOOK}/orders", buyer.order("buy", 100)), 422, path="/item")
        refused(buyer.send(f"/market/books/{BOOK}/orders", buyer.order("buy", 0)), 422, path="/price")
        refused(buyer.send("/market/books/Not-A-Book/orders", buyer.order("buy", 100)), 400)
    assert [e["detail"]["constraint"] for e in buyer.audit()] == ["maxSpend", "minAcceptablePrice", "currency"]
    assert store.http.get(f"/market/books/{BOOK}").json()["books"] == []
    assert created(_place(buyer, "buy", 200)[1])["status"] == "open"
    assert created(_place(seller, "sell", 150)[1])["remaining"] == 1


def test_cancel_only_ones_own_order_once(store):
    """spec 003: Protocol 4: Double Auction: DELETE /market/books/{item}/orders/{id} takes the
    caller's own open order out of the book; another agent's is 403, a second cancel 409, an
    unknown order (or one in another book) 404."""
    seller, buyer = seller_and_buyer(store, max_spend=510)  # 3 at 170
    order_id, r = _place(buyer, "buy", 170, 3)
    created(r)
    path = f"/market/books/{BOOK}/orders/{order_id}"
    with nothing_changes(store):
        refused(store.http.delete(path, headers=seller.auth), 403)
        refused(store.http.delete(path), 401)
        refused(store.http.delete(f"/market/books/{OTHER_BOOK}/orders/{order_id}", headers=buyer.auth), 404)
        refused(store.http.delete(f"/market/books/{BOOK}/orders/ord_nowhere", headers=buyer.auth), 404)
    cancelled = store.http.delete(path, headers=buyer.auth)
    assert cancelled.status_code == 200 and cancelled.json() == {"orderId": order_id, "item": BOOK,
                                                                  "status": "cancelled", "remaining": 3}
    with nothing_changes(store):
        refused(store.http.delete(path, headers=buyer.auth), 409)
    assert store.http.get(f"/market/books/{BOOK}").json()["books"] == []


def test_the_book_shows_depth_by_price_level_only(store):
    """spec 003: Protocol 4: Double Auction: GET /market/books/{item} is open quantity by price
    level, best first, with no agent or order ids; an agent does not rest orders on both sides."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=300)
    other_buyer = trader(store, new_id("buyer"), maxSpend=600)  # 4 at 140.50
    other_seller = trader(store, new_id("seller"), minAcceptablePrice=100)
    ids = [_place(buyer, "buy", 150, 2), _place(other_buyer, "buy", 150, 1), _place(other_buyer, "buy", 140.5, 4),
           _place(seller, "sell", 190, 1), _place(other_seller, "sell", 185, 2), _place(seller, "sell", 190, 5)]
    for _, r in ids:
        created(r)
    depth = store.http.get(f"/market/books/{BOOK}")
    assert depth.json() == {"item": BOOK, "books": [{
        "currency": "EUR",
        "bids": [{"price": 150, "quantity": 3}, {"price": 140.5, "quantity": 4}],
        "asks": [{"price": 185, "quantity": 2}, {"price": 190, "quantity": 6}]}]}
    for secret in [order_id for order_id, _ in ids] + [buyer.id, seller.id, other_buyer.id, other_seller.id]:
        assert secret not in depth.text
    both = trader(store, new_id("both"), minAcceptablePrice=100, maxSpend=300)
    created(_place(both, "buy", 120)[1])
    with nothing_changes(store):
        refused(_place(both, "sell", 400)[1], 409)  # it has a bid resting in this book


def test_clearing_trades_every_compatible_pair_at_one_uniform_midpoint_price(store):
    """spec 003: Protocol 4: Double Auction ("Framework computes market-clearing price", "Matches
    buyers/sellers at equilibrium price", "All compatible deals close simultaneously"): POST
    /market/books/{item}/clear trades the most volume at the k = 0.5 midpoint of the marginal
    pair; every fill is a deal at that one price, within each order's limit; what is left does
    not cross; clearing again trades nothing."""
    sellers = [trader(store, new_id("seller"), minAcceptablePrice=1) for _ in range(4)]
    buyers = [trader(store, new_id("buyer"), maxSpend=1000) for _ in range(4)]
    orders = [(sellers[0], "sell", 100, 2), (sellers[1], "sell", 110.01, 1), (sellers[2], "sell", 125, 3),
              (sellers[3], "sell", 160, 1), (buyers[0], "buy", 150, 2), (buyers[1], "buy", 130, 1),
              (buyers[2], "buy", 118.5, 2), (buyers[3], "buy", 90, 5)]
    placed = {}
    for seq, (agent, side, price, quantity) in enumerate(orders, 1):
        order_id, r = _place(agent, side, price, quantity)
        created(r)
        placed[order_id] = (agent, side, round(price * 100), quantity, seq)
    expected = clear(Order(oid, Side(side), cents, qty, seq) for oid, (_, side, cents, qty, seq) in placed.items())
    # marginal pair: buy 130.00, sell 110.01; the odd-cent midpoint 120.005 rounds up
    assert (expected.volume, expected.price) == (3, 12001)

    refused(store.http.post(f"/market/books/{BOOK}/clear"), 401)
    result = store.http.post(f"/market/books/{BOOK}/clear", headers=buyers[0].auth)
    assert result.status_code == 200, result.text
    [clearing] = result.json()["clearings"]
    assert (clearing["price"], clearing["volume"], clearing["trades"]) == (120.01, 3, len(expected.trades))
    deals = {row.id: row for row in rows(store, market_deals, market_deals.c.listing_id == f"book:{BOOK}")}
    assert set(deals) == set(clearing["dealIds"])
    made = sorted((row.buyer_id, row.seller_id, row.price_cents) for row in deals.values())
    assert made == sorted((placed[b][0].id, placed[s][0].id, expected.price) for b, s, _, _ in expected.trades)
    for row in deals.values():
        assert row.protocol == "double_auction" and row.status == "awaiting_signatures"
    for buy_id, sell_id, _, price in expected.trades:
        assert placed[buy_id][2] >= price >= placed[sell_id][2]
    left = rows(store, market_orders, market_orders.c.status == "open")
    best_bid = max(row.price_cents for row in left if row.side == "buy")
    best_ask = min(row.price_cents for row in left if row.side == "sell")
    assert best_bid < best_ask
    again = store.http.post(f"/market/books/{BOOK}/clear", headers=buyers[0].auth).json()["clearings"]
    assert (again[0]["volume"], again[0]["trades"], again[0]["price"]) == (0, 0, None)
    # a fill of more than one unit is one deal for that quantity, signed like any other
    [two] = [row for row in deals.values() if row.buyer_id == buyers[0].id and row.seller_id == sellers[0].id]
    document = buyers[0].deal(two.id)
    assert document["deal"]["quantity"] == 2 and document["deal"]["listingId"] == f"book:{BOOK}"
    buyers[0].sign_deal(two.id, "buyer")
    assert sellers[0].sign_deal(two.id, "seller").json()["status"] == "confirmed"


def test_scheduled_clearing_clears_every_book_with_both_sides(store):
    """spec 003: Protocol 4: Double Auction ("Multiple buyers + sellers submit bids/asks to
    framework"): Market.clear_all, the scheduled call, clears every book with open orders on both
    sides; an order whose agent's mandate no longer allows it is cancelled and audited instead of
    traded."""
    seller, buyer = seller_and_buyer(store, floor=100, max_spend=300)
    other_buyer = trader(store, new_id("buyer"), maxSpend=300)
    for agent, side, price, book in [(seller, "sell", 120, BOOK), (buyer, "buy", 130, BOOK),
                                     (seller, "sell", 200, OTHER_BOOK), (other_buyer, "buy", 210, OTHER_BOOK),
                                     (buyer, "buy", 250, "sports.bicycle.road_bike")]:
        created(_place(agent, side, price, book=book)[1])
    other_buyer.file_mandate(maxSpend=205, issued=store.clock())  # its resting 210 bid is no longer allowed
    market = store.app.state.market
    assert market.clear_all() == 1
    [deal] = rows(store, market_deals)
    assert (deal.buyer_id, deal.seller_id, deal.price_cents, deal.listing_id) == (buyer.id, seller.id, 12500,
                                                                                   f"book:{BOOK}")
    statuses = {row.item: row.status for row in rows(store, market_orders, market_orders.c.agent_id == other_buyer.id)}
    assert statuses == {OTHER_BOOK: "cancelled"}
    assert [(e["event"], e["detail"]["constraint"]) for e in other_buyer.audit()] == [("mandate_violation", "maxSpend")]
    assert market.clear_all() == 0
