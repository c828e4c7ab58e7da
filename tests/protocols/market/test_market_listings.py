"""Listings, wanted ads and the inbox over the market's HTTP API (spec 003: 1. Listing, 2. Wanted
Ad, Phase 2: Structured Listing Parser): search filters, expiry on the store's clock, revisions,
the notifications a fitting listing or wanted ad sends, and GET /market/inbox?after=CURSOR."""

from __future__ import annotations

from datetime import timedelta

from tests.support.market import (
    ITEM,
    created,
    new_id,
    nothing_changes,
    refused,
    rows,
    seller_and_buyer,
    trader,
)
from haggler.storage.schema import market_inbox

SWITCH = ITEM
LITE = {**ITEM, "name": "switch_lite"}
PS5 = {"category": "electronics", "subcategory": "gaming_console", "name": "playstation_5"}
PHONE = {"category": "electronics", "subcategory": "phone", "name": "pixel_8"}
BIKE = {"category": "sports", "subcategory": "bicycle", "name": "road_bike"}


def _ids(response):
    assert response.status_code == 200, response.text
    return [listing["listingId"] for listing in response.json()["listings"]]


def _notices(agent, event, after=0):
    return [m["body"] for m in agent.inbox(after)["messages"] if m["body"].get("event") == event]


# -- search ---------------------------------------------------------------------------------------------


def test_search_filters_by_taxonomy_condition_and_price(store):
    """spec 003: 1. Listing ("category, subcategory: taxonomy for filtering", "name: machine-
    readable item identifier", "condition: enum"): GET /market/listings filters by category,
    subcategory, name, condition (the worst acceptable: good finds new, like_new and good) and
    maxPrice (the ask), cheapest first; only live listings."""
    seller = trader(store, new_id("seller"), minAcceptablePrice=10)
    posted = {}
    for key, item, condition, ask in [
        ("switch_new", SWITCH, "new", 250), ("switch_good", SWITCH, "good", 180), ("switch_fair", SWITCH, "fair", 120),
        ("switch_poor", SWITCH, "poor", 60), ("lite_like_new", LITE, "like_new", 150), ("ps5_good", PS5, "good", 400),
        ("phone_good", PHONE, "good", 300), ("bike_fair", BIKE, "fair", 220),
    ]:
        listing = seller.listing(item=item, condition=condition, ask=ask, floor=10)
        created(seller.send("/market/listings", listing))
        posted[key] = listing["listingId"]

    def search(**params):
        return _ids(store.http.get("/market/listings", params=params))

    everything = search()
    assert everything == [posted[k] for k in ("switch_poor", "switch_fair", "lite_like_new", "switch_good", "bike_fair",
                                              "switch_new", "phone_good", "ps5_good")]
    assert search(category="sports") == [posted["bike_fair"]]
    assert search(category="electronics", subcategory="phone") == [posted["phone_good"]]
    assert search(name="nintendo_switch") == [posted[k] for k in ("switch_poor", "switch_fair", "switch_good",
                                                                  "switch_new")]
    assert search(name="nintendo_switch", condition="good") == [posted["switch_good"], posted["switch_new"]]
    assert search(subcategory="gaming_console", condition="like_new") == [posted["lite_like_new"], posted["switch_new"]]
    assert search(condition="new") == [posted["switch_new"]]
    assert search(condition="poor") == everything
    assert search(maxPrice="180") == [posted[k] for k in ("switch_poor", "switch_fair", "lite_like_new", "switch_good")]
    assert search(maxPrice="179.99") == [posted[k] for k in ("switch_poor", "switch_fair", "lite_like_new")]
    assert search(name="nintendo_switch", condition="fair", maxPrice="200") == [posted["switch_fair"],
                                                                               posted["switch_good"]]
    assert search(name="no_such_thing") == []
    assert search(limit="2", offset="1") == everything[1:3]
    one = store.http.get("/market/listings", params={"name": "road_bike"}).json()["listings"][0]
    assert (one["item"]["condition"], one["pricing"]["askPrice"], one["status"]) == ("fair", 220, "live")

    for params in ({"condition": "mint"}, {"maxPrice": "cheap"}, {"maxPrice": "-1"}, {"colour": "red"},
                   {"limit": "0"}):
        refused(store.http.get("/market/listings", params=params), 400)

    # a sold listing is no longer found
    buyer = trader(store, new_id("buyer"), maxSpend=1000)
    created(buyer.send(f"/market/listings/{posted['switch_poor']}/instant_match",
                       buyer.instant(posted["switch_poor"], 60)))
    assert search(name="nintendo_switch") == [posted[k] for k in ("switch_fair", "switch_good", "switch_new")]
    assert store.http.get(f"/market/listings/{posted['switch_poor']}").json()["status"] == "sold"


def test_wanted_search_shows_live_ads_by_item(store):
    """spec 003: 2. Wanted Ad ("activeUntil: wanted ad expires"): GET /market/wanted lists the
    active ads with an interest in the item asked for, and forgets them once activeUntil passes."""
    _, buyer = seller_and_buyer(store)
    short = buyer.wanted(active_for=timedelta(hours=1), interests=[{**LITE}])
    long = buyer.wanted(active_for=timedelta(days=2), interests=[{**LITE}, {**PS5}])
    bikes = buyer.wanted(interests=[{"category": "sports"}])
    for ad in (short, long, bikes):
        created(buyer.send("/market/wanted", ad))

    def found(**params):
        response = store.http.get("/market/wanted", params=params)
        assert response.status_code == 200, response.text
        return {ad["wantedId"] for ad in response.json()["wanted"]}

    assert found(name="switch_lite") == {short["wantedId"], long["wantedId"]}
    assert found(name="playstation_5") == {long["wantedId"]}
    assert found(category="sports") == {bikes["wantedId"]}
    store.clock.advance(minutes=59, seconds=59)
    assert short["wantedId"] in found(name="switch_lite")
    store.clock.advance(seconds=1)
    assert found(name="switch_lite") == {long["wantedId"]}
    store.clock.advance(days=2)
    assert found(name="switch_lite") == set()
    refused(store.http.get("/market/wanted", params={"maxPrice": "10"}), 400)


# -- expiry -----------------------------------------------------------------------------------------------


def test_a_listing_is_live_until_the_end_of_its_available_until_day_utc(store):
    """spec 003: 1. Listing ("logistics.availableUntil"): a listing is live through the whole
    of its availableUntil day (UTC) and gone from then on: no longer found, shown as expired,
    instant match 410, contact 410. A listing already past its day is refused (422)."""
    seller, buyer = seller_and_buyer(store)
    today = store.clock().date().isoformat()  # the clock starts at 12:00 UTC
    listing = seller.listing(available_until=today)
    created(seller.send("/market/listings", listing))
    early_buyer_request = created(buyer.send("/market/contact", buyer.contact(listing["listingId"], "sealed_bid")))
    store.clock.advance(hours=11, minutes=59, seconds=59)  # 23:59:59 on its last day
    assert _ids(store.http.get("/market/listings")) == [listing["listingId"]]
    store.clock.advance(seconds=1)  # midnight: the day is over
    assert _ids(store.http.get("/market/listings")) == []
    assert store.http.get(f"/market/listings/{listing['listingId']}").json()["status"] == "expired"
    with nothing_changes(store):
        refused(buyer.send(f"/market/listings/{listing['listingId']}/instant_match",
                           buyer.instant(listing["listingId"], 180)), 410)
        refused(buyer.send("/market/contact", buyer.contact(listing["listingId"], "sealed_bid")), 410)
        request_id = early_buyer_request["requestId"]
        refused(seller.send(f"/market/contact/{request_id}/agreement", seller.agreement(request_id, "sealed_bid")), 410)
        yesterday = (store.clock() - timedelta(days=1)).date().isoformat()
        refused(seller.send("/market/listings", seller.listing(available_until=yesterday)), 422,
                path="/logistics/availableUntil")


def test_a_wanted_ad_past_active_until_notifies_nobody(store):
    """spec 003: 2. Wanted Ad ("activeUntil: wanted ad expires"): once past activeUntil, a new
    fitting listing notifies nobody; a wanted ad that is already past is refused (422)."""
    seller, buyer = seller_and_buyer(store)
    ad = buyer.wanted(active_for=timedelta(hours=2), interests=[{**LITE}])
    created(buyer.send("/market/wanted", ad))
    store.clock.advance(hours=2)
    assert created(seller.send("/market/listings", seller.listing(item=LITE)))["notifiedWanted"] == 0
    assert _notices(buyer, "listing_matches_wanted") == []
    with nothing_changes(store):
        refused(buyer.send("/market/wanted", buyer.wanted(active_for=timedelta(0))), 422, path="/activeUntil")


# -- revisions --------------------------------------------------------------------------------------------


def test_a_listing_is_revised_by_its_seller_with_a_newer_timestamp(store):
    """spec 003: 1. Listing ("listingId: unique identifier (seller-generated)"): the same seller
    posting the same listingId with a newer timestamp revises it (200); an older or equal
    timestamp, another seller, or a sold listing is 409 and changes nothing; a revision is held
    to the owner's floor like a new listing (403)."""
    seller, buyer = seller_and_buyer(store, floor=150)
    listing_id = new_id("lst")
    first = seller.listing(listing_id=listing_id, ask=200)
    assert created(seller.send("/market/listings", first))["listingId"] == listing_id
    store.clock.advance(minutes=5)
    revised = seller.listing(listing_id=listing_id, ask=185, condition="like_new", description="Price drop")
    assert created(seller.send("/market/listings", revised), 200)["listingId"] == listing_id
    shown = store.http.get(f"/market/listings/{listing_id}").json()
    assert (shown["pricing"]["askPrice"], shown["item"]["condition"], shown["timestamp"]) == \
        (185, "like_new", revised["timestamp"])
    assert _ids(store.http.get("/market/listings", params={"maxPrice": "190"})) == [listing_id]

    other = trader(store, new_id("other"), minAcceptablePrice=1)
    with nothing_changes(store):
        refused(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=170,
                                                               timestamp=revised["timestamp"])), 409)
        refused(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=170,
                                                               timestamp=first["timestamp"])), 409)
        store.clock.advance(minutes=1)
        refused(other.send("/market/listings", other.listing(listing_id=listing_id, ask=10, floor=1)), 409)
        refused(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=149.99)), 403,
                error="mandate_violation", constraint="minAcceptablePrice")

    created(buyer.send(f"/market/listings/{listing_id}/instant_match", buyer.instant(listing_id, 185)))
    store.clock.advance(minutes=1)
    with nothing_changes(store):
        refused(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=190)), 409)


# -- notifications: a listing that fits a wanted ad, and the other way round --------------------------------


def test_a_new_listing_that_fits_a_live_wanted_ad_notifies_the_buyer(store):
    """spec 003: 2. Wanted Ad ("interests", "minCondition", "mustHaveAccessories vs
    preferredAccessories: hard constraints vs nice-to-haves", "budget.maxPrice"): a listing of
    the wanted item, at least minCondition, with every must-have accessory and asking within
    budget notifies the buyer; a listing failing any one of these does not."""
    seller, buyer = seller_and_buyer(store, floor=10, max_spend=500)
    interest = {**LITE, "minCondition": "good", "mustHaveAccessories": ["charger", "dock"],
                "preferredAccessories": ["case"]}
    ad = buyer.wanted(budget=200, max_spend=500, interests=[interest])
    assert created(buyer.send("/market/wanted", ad))["notifiedListings"] == 0

    def post(**kwargs):
        listing = seller.listing(floor=10, **kwargs)
        return listing["listingId"], created(seller.send("/market/listings", listing))["notifiedWanted"]

    misfits = [
        post(item=PS5, ask=150, accessories=("charger", "dock")),  # another item
        post(item={**LITE, "subcategory": "handheld"}, ask=150, accessories=("charger", "dock")),
        post(item=LITE, ask=150, condition="fair", accessories=("charger", "dock")),  # worse than minCondition
        post(item=LITE, ask=150, accessories=("charger", "case")),  # a must-have missing (a nice-to-have is no help)
        post(item=LITE, ask=200.01, accessories=("charger", "dock")),  # above budget
    ]
    assert [notified for _, notified in misfits] == [0] * len(misfits)
    assert _notices(buyer, "listing_matches_wanted") == []

    fits = [post(item=LITE, ask=200, accessories=("charger", "dock")),
            post(item=LITE, ask=90, condition="new", accessories=("dock", "charger", "case"))]
    assert [notified for _, notified in fits] == [1, 1]
    notices = _notices(buyer, "listing_matches_wanted")
    assert [(n["listingId"], n["wantedId"]) for n in notices] == [(lid, ad["wantedId"]) for lid, _ in fits]
    assert notices[0]["listing"]["pricing"]["askPrice"] == 200
    assert _notices(seller, "listing_matches_wanted") == []


def test_a_wanted_ad_by_category_only_matches_any_item_of_it(store):
    """spec 003: 2. Wanted Ad ("interests: buyer may want multiple item types"; only category is
    required of an interest): an interest naming just a category fits every live listing of it,
    both ways."""
    seller, buyer = seller_and_buyer(store, floor=10, max_spend=500)
    bike = seller.listing(item=BIKE, ask=300, floor=10)
    created(seller.send("/market/listings", bike))
    created(seller.send("/market/listings", seller.listing(item=PHONE, ask=300, floor=10)))
    ad = buyer.wanted(budget=400, max_spend=500, interests=[{"category": "sports"}])
    assert created(buyer.send("/market/wanted", ad))["notifiedListings"] == 1
    assert [n["listingId"] for n in _notices(seller, "wanted_matches_listing")] == [bike["listingId"]]
    other_bike = seller.listing(item={**BIKE, "name": "gravel_bike"}, ask=350, floor=10)
    assert created(seller.send("/market/listings", other_bike))["notifiedWanted"] == 1
    assert [n["listingId"] for n in _notices(buyer, "listing_matches_wanted")] == [other_bike["listingId"]]


def test_a_new_wanted_ad_notifies_the_sellers_of_fitting_live_listings(store):
    """spec 003: 2. Wanted Ad (the same fit, the other way round): a new wanted ad notifies the
    seller of every live listing that fits it — not of a misfit, a sold or an expired listing,
    nor the buyer of its own listing."""
    seller, buyer = seller_and_buyer(store, floor=10, max_spend=500)
    other_seller = trader(store, new_id("seller"), minAcceptablePrice=10)
    fitting = seller.listing(item=LITE, ask=150, floor=10)
    fitting_too = other_seller.listing(item=LITE, ask=120, condition="like_new", floor=10)
    poor = seller.listing(item=LITE, ask=50, condition="poor", floor=10)
    no_charger = seller.listing(item=LITE, ask=100, accessories=("case",), floor=10)
    too_dear = seller.listing(item=LITE, ask=260, floor=10)
    sold = other_seller.listing(item=LITE, ask=110, floor=10)
    expiring = seller.listing(item=LITE, ask=130, floor=10, available_until=store.clock().date().isoformat())
    for agent, listing in ((seller, fitting), (other_seller, fitting_too), (seller, poor), (seller, no_charger),
                           (seller, too_dear), (other_seller, sold), (seller, expiring)):
        created(agent.send("/market/listings", listing))
    created(buyer.send(f"/market/listings/{sold['listingId']}/instant_match", buyer.instant(sold["listingId"], 110)))
    store.clock.advance(hours=12)  # the expiring listing's day is over
    before = {agent.id: len(_notices(agent, "wanted_matches_listing")) for agent in (seller, other_seller)}
    assert before == {seller.id: 0, other_seller.id: 0}

    ad = buyer.wanted(budget=250, max_spend=500, interests=[{**LITE, "minCondition": "fair",
                                                             "mustHaveAccessories": ["charger"]}])
    assert created(buyer.send("/market/wanted", ad))["notifiedListings"] == 2
    assert [(n["listingId"], n["wantedId"]) for n in _notices(seller, "wanted_matches_listing")] == \
        [(fitting["listingId"], ad["wantedId"])]
    assert [n["listingId"] for n in _notices(other_seller, "wanted_matches_listing")] == [fitting_too["listingId"]]
    notice = _notices(seller, "wanted_matches_listing")[0]
    assert notice["wanted"]["budget"]["maxPrice"] == 250

    # an agent's own listing never answers its own wanted ad
    both = trader(store, new_id("both"), minAcceptablePrice=10, maxSpend=500)
    created(both.send("/market/listings", both.listing(item=PS5, ask=100, floor=10)))
    assert created(both.send("/market/wanted", both.wanted(max_spend=500, interests=[{**PS5}])))["notifiedListings"] == 0


def test_a_wanted_ad_above_the_owners_max_spend_is_refused(store):
    """spec 003: 2. Wanted Ad ("ownerMandate.maxSpend"), Owner Mandate Format ("Enforced by
    framework"): a budget above the owner's maxSpend (on file, or in the embedded mandate,
    whichever is lower) is 403 maxSpend, audited, and posts nothing."""
    _, buyer = seller_and_buyer(store, max_spend=200)
    with nothing_changes(store):
        refused(buyer.send("/market/wanted", buyer.wanted(budget=200.01, max_spend=300)), 403,
                error="mandate_violation", constraint="maxSpend")
        refused(buyer.send("/market/wanted", buyer.wanted(budget=180, max_spend=150)), 403,
                error="mandate_violation", constraint="maxSpend")
    assert [e["detail"]["constraint"] for e in buyer.audit() if e["event"] == "mandate_violation"] == \
        ["maxSpend", "maxSpend"]
    assert created(buyer.send("/market/wanted", buyer.wanted(budget=200, max_spend=200)))["status"] == "active"


# -- the inbox --------------------------------------------------------------------------------------------


def test_the_inbox_is_in_order_resumable_and_only_ones_own(store):
    """spec 003: 3. Contact Request, 4. Protocol Agreement (DMs): GET /market/inbox?after=CURSOR
    returns an agent's own deliveries in the order they were made; reading page by page from
    each returned cursor sees every one exactly once, and never another agent's."""
    seller, buyer = seller_and_buyer(store, floor=10, max_spend=1000)
    other_buyer = trader(store, new_id("buyer"), maxSpend=1000)
    sent_to_seller = []
    for n in range(7):
        listing = seller.listing(ask=100 + n, floor=10)
        created(seller.send("/market/listings", listing))
        for agent in (buyer, other_buyer):
            contact = agent.contact(listing["listingId"], "sealed_bid", message=f"{agent.id} asks about {n}")
            created(agent.send("/market/contact", contact))
            sent_to_seller.append(contact["message"])
            agreement = seller.agreement(contact["requestId"], "sealed_bid")
            created(seller.send(f"/market/contact/{contact['requestId']}/agreement", agreement), 200)

    whole = seller.inbox()
    assert [m["body"]["message"] for m in whole["messages"]] == sent_to_seller
    assert whole["cursor"] == whole["messages"][-1]["cursor"]
    cursors = [m["cursor"] for m in whole["messages"]]
    assert cursors == sorted(set(cursors))

    seen, after, pages = [], 0, 0
    while True:
        page = seller.inbox(after, limit=3)
        if not page["messages"]:
            assert page["cursor"] == after
            break
        assert len(page["messages"]) <= 3
        seen.extend(page["messages"])
        after, pages = page["cursor"], pages + 1
    assert seen == whole["messages"] and pages == 5
    assert seller.inbox(whole["cursor"]) == {"messages": [], "cursor": whole["cursor"]}
    # resuming from the middle gives exactly the rest
    middle = cursors[6]
    assert seller.inbox(middle)["messages"] == whole["messages"][7:]

    # a new delivery after reading is seen once, from the cursor kept
    last = seller.listing(ask=99, floor=10)
    created(seller.send("/market/listings", last))
    created(buyer.send("/market/contact", buyer.contact(last["listingId"], "sealed_bid", message="one more")))
    fresh = seller.inbox(whole["cursor"])
    assert [m["body"]["message"] for m in fresh["messages"]] == ["one more"]
    assert seller.inbox(fresh["cursor"])["messages"] == []

    # each buyer sees only the agreements sent to it
    for agent in (buyer, other_buyer):
        mine = agent.inbox()["messages"]
        assert len(mine) == 7 and all(m["body"]["type"] == "protocol_agreement" for m in mine)
        owned = {row.seq for row in rows(store, market_inbox, market_inbox.c.agent_id == agent.id)}
        assert {m["cursor"] for m in mine} == owned
    assert not {m["cursor"] for m in buyer.inbox()["messages"]} & {m["cursor"] for m in other_buyer.inbox()["messages"]}

    for params in ({"after": "-1"}, {"after": "x"}, {"limit": "0"}, {"since": "3"}):
        refused(seller.get("/market/inbox", **params), 400)
    refused(store.http.get("/market/inbox"), 401)


def test_revising_the_price_tells_a_wanted_ad_only_when_it_fits_newly(store):
    """Each buyer hears of a listing once for the same goods: revisions that keep the goods and
    already fit tell nobody again (a seller cannot flood an inbox by revising); one that brings
    the ask within a budget tells that buyer; one that changes the goods tells again."""
    seller, buyer = seller_and_buyer(store, floor=100)
    created(buyer.send("/market/wanted", buyer.wanted(budget=170, max_spend=200)))
    listing_id = new_id("lst")
    answers = []
    for ask in (200, 180, 190, 165, 160, 166):
        store.clock.advance(seconds=1)
        answers.append(seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=ask, floor=100))
                       .json()["notifiedWanted"])
    assert answers == [0, 0, 0, 1, 0, 0]
    store.clock.advance(seconds=1)
    revised = seller.send("/market/listings", seller.listing(listing_id=listing_id, ask=160, floor=100,
                                                             condition="like_new")).json()
    assert revised["notifiedWanted"] == 1  # other goods: told again
    assert len(_notices(buyer, "listing_matches_wanted")) == 2
