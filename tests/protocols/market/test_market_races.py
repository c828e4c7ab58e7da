"""Racing actions on one listing, on SQLite and PostgreSQL (spec 003: 6. Instant Match, "Deal
closes in 1 message", "Seller auto-accepts (or rejects if listing is stale)"; Protocol 2: Sealed
Bid, "deal auto-closes"): whatever closes a listing — instant matches by several buyers, an
instant match against the closing sealed bid of another buyer's negotiation, two negotiations
closing at once — the listing gets exactly one deal, and every other racer a 409 that changed
nothing. Each round releases its racers together by a barrier, each on its own HTTP client, and
counts the deals in the database."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest

from haggler.storage.schema import market_bids, market_deals, market_listings, market_requests
from tests.support.market import agreed_request, created, deal_count, listed, new_id, rows, trader
from tests.support.matching import race

ROUNDS = 12
BUYERS = 4


@pytest.fixture
def store(make_store, db_url):
    return make_store(db_url=db_url)


@pytest.fixture
def clients(store):
    opened: list[httpx.Client] = []

    def client() -> httpx.Client:
        opened.append(httpx.Client(base_url=store.base, timeout=30))
        return opened[-1]

    yield client
    for each in opened:
        each.close()


def _market(store, buyers=BUYERS):
    seller = trader(store, new_id("seller"), minAcceptablePrice=100)
    return seller, [trader(store, new_id("buyer"), maxSpend=1000) for _ in range(buyers)]


def _sealed_waiting_for_the_seller(seller, buyer, listing_id, buyer_max=190):
    """A sealed-bid request on the listing with the buyer's bid in; the seller's bid closes it."""
    request_id = agreed_request(seller, buyer, listing_id, "sealed_bid")
    created(buyer.send(f"/market/contact/{request_id}/bids", buyer.bid(request_id, "buyer", buyer_max)), 202)
    return request_id


def _post(agent, path, message):
    """The racer's request, ready to be released by the barrier."""
    return lambda: agent.http.post(path, json=message)


def _one_deal(store, listing_id, responses):
    """Exactly one racer got the deal (201), every other a 409; one deal row, the listing sold."""
    codes = Counter(r.status_code for r in responses)
    assert codes == Counter({201: 1, 409: len(responses) - 1}), [(r.status_code, r.text) for r in responses]
    assert deal_count(store, listing_id) == 1
    [deal] = rows(store, market_deals, market_deals.c.listing_id == listing_id)
    [winner] = [r for r in responses if r.status_code == 201]
    assert winner.json()["dealId"] == deal.id
    assert rows(store, market_listings, market_listings.c.id == listing_id)[0].status == "sold"
    return deal


def test_racing_instant_matches_make_one_deal(store, clients):
    """spec 003: 6. Instant Match, Protocol 3: several buyers accept the same live ask at once;
    one deal, to the buyer whose answer is 201; the others are told the listing is sold (409)."""
    seller, buyers = _market(store)
    racers = [buyer.on(clients()) for buyer in buyers]
    winners = Counter()
    for _ in range(ROUNDS):
        listing_id = listed(seller, ask=180, floor=100)
        messages = [racer.sign(racer.instant(listing_id, 180)) for racer in racers]
        path = f"/market/listings/{listing_id}/instant_match"
        responses = race([_post(racer, path, message) for racer, message in zip(racers, messages, strict=True)])
        deal = _one_deal(store, listing_id, responses)
        [won] = [racer for racer, r in zip(racers, responses, strict=True) if r.status_code == 201]
        assert (deal.buyer_id, deal.price_cents, deal.protocol) == (won.id, 18000, "instant_match")
        winners[won.id] += 1
        losers = [m["requestId"] for m, r in zip(messages, responses, strict=True) if r.status_code == 409]
        assert not rows(store, market_requests, market_requests.c.id.in_(losers))  # a refusal leaves no request
    assert sum(winners.values()) == ROUNDS


def test_an_instant_match_racing_a_sealed_bid_close_makes_one_deal(store, clients):
    """spec 003: 5. Sealed Bid, 6. Instant Match: while one buyer's sealed-bid negotiation is
    closed by the seller's bid, another buyer instant-matches the listing; exactly one of them
    gets the deal. The losing sealed bid is not stored (its request stays open, one bid in);
    the losing instant match leaves no request."""
    seller, (patient, hasty) = _market(store, buyers=2)
    seller_racer, hasty_racer = seller.on(clients()), hasty.on(clients())
    outcomes = Counter()
    for round_number in range(ROUNDS):
        listing_id = listed(seller, ask=180, floor=100)
        request_id = _sealed_waiting_for_the_seller(seller, patient, listing_id)
        closing = seller.sign(seller.bid(request_id, "seller", 150))
        instant = hasty.sign(hasty.instant(listing_id, 180))
        calls = [_post(seller_racer, f"/market/contact/{request_id}/bids", closing),
                 _post(hasty_racer, f"/market/listings/{listing_id}/instant_match", instant)]
        if round_number % 2:  # either racer first in line, in turn
            sealed, matched = reversed(race(list(reversed(calls))))
        else:
            sealed, matched = race(calls)
        deal = _one_deal(store, listing_id, [sealed, matched])
        bids = {row.party for row in rows(store, market_bids, market_bids.c.request_id == request_id)}
        request = rows(store, market_requests, market_requests.c.id == request_id)[0]
        if sealed.status_code == 201:
            outcomes["sealed_bid"] += 1
            assert (deal.buyer_id, deal.price_cents, deal.protocol) == (patient.id, 17000, "sealed_bid")
            assert bids == {"buyer", "seller"} and request.state == "closed"
            assert not rows(store, market_requests, market_requests.c.id == instant["requestId"])
        else:
            outcomes["instant_match"] += 1
            assert (deal.buyer_id, deal.price_cents, deal.protocol) == (hasty.id, 18000, "instant_match")
            assert bids == {"buyer"} and request.state == "agreed"
    assert sum(outcomes.values()) == ROUNDS


def test_two_negotiations_closing_at_once_make_one_deal(store, clients):
    """spec 003: 5. Sealed Bid, 7. Natural Language Offer: two buyers negotiate the same listing;
    the seller's closing sealed bid on one and the other buyer's accept of the seller's offer on
    the other land at once; one deal."""
    seller, (bidder, haggler) = _market(store, buyers=2)
    seller_racer, haggler_racer = seller.on(clients()), haggler.on(clients())
    for round_number in range(ROUNDS):
        listing_id = listed(seller, ask=180, floor=100)
        sealed_id = _sealed_waiting_for_the_seller(seller, bidder, listing_id)
        offers_id = agreed_request(seller, haggler, listing_id, "natural_language")
        created(seller.send(f"/market/contact/{offers_id}/offers", seller.offer(offers_id, "seller", 175)), 200)
        closing = seller.sign(seller.bid(sealed_id, "seller", 150))
        accept = haggler.sign(haggler.offer(offers_id, "buyer", action="accept"))
        calls = [_post(seller_racer, f"/market/contact/{sealed_id}/bids", closing),
                 _post(haggler_racer, f"/market/contact/{offers_id}/offers", accept)]
        responses = race(calls if round_number % 2 == 0 else calls[::-1])
        deal = _one_deal(store, listing_id, responses)
        assert (deal.buyer_id, deal.protocol) in {(bidder.id, "sealed_bid"), (haggler.id, "natural_language")}
