"""Issue 29, points 7 and 8, over real HTTP: one wrong-token throttle shared by every route that
takes a credential (the right token is never refused), and registrations, market messages and
contact requests limited per client address and per agent, with 429 + ``Retry-After`` naming
the limit and its option. The windows are passed with the store's clock, never slept out."""

from __future__ import annotations

import httpx
import pytest

from haggler.protocols.matching.settings import MatchingSettings
from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.server.clientip import holder, parse_networks
from haggler.server.limits import ClientLimits
from tests.support.market import (
    BOOK,
    Trader,
    agreed_request,
    bearer,
    created,
    listed,
    new_id,
    refused,
    seller_and_buyer,
    trader,
)

TOKEN = "operator-token-for-limit-tests-0123"
WRONG = "not-the-operator-token-0123456789"
#: A route of each surface that takes the operator token, as (method, path).
OPERATOR_ROUTES = [("GET", "/metrics"), ("GET", "/api/negotiations/insights"), ("GET", "/market/audit"),
                   ("POST", f"/market/books/{BOOK}/clear"), ("GET", "/admin")]


def limited_store(make_store, **limits: int):
    """A store with an operator token, the given client limits, and loopback held to them."""
    return make_store(matching=MatchingSettings(operator_token=TOKEN), client_limits=ClientLimits(**limits),
                      limits=StoreLimits(limit_loopback=True))


def call(store, route: tuple[str, str], token: str) -> httpx.Response:
    method, path = route
    return store.http.request(method, path, headers=bearer(token))


def assert_limited(response: httpx.Response, option: str) -> None:
    """A 429 with a Retry-After, whose error names the limit and the option that sets it."""
    assert response.status_code == 429, (response.status_code, response.text)
    assert int(response.headers["retry-after"]) >= 1
    assert "the limit is " in response.text and f"set with haggler serve {option}" in response.text


# -- credentials ----------------------------------------------------------------------------------


@pytest.mark.parametrize("route", OPERATOR_ROUTES, ids=[path for _, path in OPERATOR_ROUTES])
def test_operator_token_guesses_are_throttled_on_every_route(make_store, route):
    """Issue 29, attack 7: operator-token guessing was unthrottled on /metrics,
    /api/negotiations/insights and /market/audit (hundreds of guesses a second)."""
    store = limited_store(make_store, max_wrong_tokens=3)
    for _ in range(3):
        assert call(store, route, WRONG).status_code == 401
    assert_limited(call(store, route, WRONG), "--max-wrong-tokens")
    store.clock.advance(minutes=16)  # the window passes: wrong again is 401, not 429
    assert call(store, route, WRONG).status_code == 401


def test_the_throttle_is_shared_by_every_route_and_credential(make_store):
    """Issue 29, attack 7: guesses spread over the routes count as one, whichever credential
    they guess (the operator token, a market agent token, an exchange key, a match key)."""
    store = limited_store(make_store, max_wrong_tokens=4)
    assert call(store, ("GET", "/metrics"), WRONG).status_code == 401
    assert call(store, ("GET", "/api/negotiations/insights"), "hma_guess").status_code == 401
    assert call(store, ("GET", "/market/inbox"), "mkt_guess").status_code == 401
    assert call(store, ("GET", "/v1/wallets/me"), "guess").status_code == 401
    for route in OPERATOR_ROUTES + [("GET", "/market/inbox"), ("GET", "/v1/wallets/me")]:
        response = call(store, route, WRONG)
        assert response.status_code == 429 and int(response.headers["retry-after"]) >= 1, route


def test_the_right_token_is_never_locked_out(make_store):
    """Issue 29, attack 7: five wrong tokens from one address locked the real operator out of
    /admin for 15 minutes. However many wrong ones its address sent, the right token is served
    on every route (one token a second is compared from a blocked address), and so is a right
    agent token."""
    store = limited_store(make_store, max_wrong_tokens=3)
    agent = trader(store, new_id("agent"))
    for _ in range(20):
        call(store, ("GET", "/metrics"), WRONG)
    assert call(store, ("GET", "/metrics"), WRONG).status_code == 429
    for route in OPERATOR_ROUTES:
        store.clock.advance(seconds=1)
        assert call(store, route, TOKEN).status_code == 200, route
    store.clock.advance(seconds=1)
    assert call(store, ("GET", "/market/inbox"), agent.token).status_code == 200
    store.clock.advance(seconds=1)
    assert call(store, ("GET", "/metrics"), WRONG).status_code == 429  # and wrong ones are still refused


def test_a_blocked_address_is_no_oracle(make_store):
    """Were the right token served at once from a blocked address, 429 against 200 would tell
    a guesser which guess was right, at full speed. From a blocked address one credential a
    second is compared: in a burst of fifty, the right token at the end is not even looked at
    (429 like the guesses, with Retry-After), and the next second it is served."""
    store = limited_store(make_store, max_wrong_tokens=3)
    for _ in range(4):
        call(store, ("GET", "/metrics"), WRONG)
    store.clock.advance(seconds=1)
    burst = [call(store, ("GET", "/metrics"), WRONG) for _ in range(49)] + [call(store, ("GET", "/metrics"), TOKEN)]
    assert {answer.status_code for answer in burst} == {429}
    assert all(int(answer.headers["retry-after"]) >= 1 for answer in burst)
    assert "one token a second" in burst[-1].json()["error"]
    store.clock.advance(seconds=1)
    assert call(store, ("GET", "/metrics"), TOKEN).status_code == 200


def test_wrong_keys_on_a_polling_agents_turn_routes_count(make_store):
    """A pickup and a respond check their key inside the write they take the turn in; a wrong key
    is counted all the same (not rolled back with the refused request), and the right key is still
    served afterwards."""
    store = limited_store(make_store, max_wrong_tokens=4)
    agents = "/api/agents/agt_x/negotiations"
    for path in (f"{agents}/pickup", f"{agents}/neg_x/respond") * 2:
        assert store.http.post(path, headers=bearer("hma_guess"), json={}).status_code == 401, path
    assert_limited(store.http.post(f"{agents}/pickup", headers=bearer(WRONG)), "--max-wrong-tokens")
    store.clock.advance(seconds=1)  # a blocked address has one credential a second compared
    user = store.http.post("/api/users", headers=bearer(TOKEN), json={"name": "Ada"}).json()
    store.clock.advance(seconds=1)
    agent = store.http.post(f"/api/users/{user['id']}/agents", headers=bearer(TOKEN), json={"name": "a"}).json()
    store.clock.advance(seconds=1)
    answer = store.http.post(f"/api/agents/{agent['id']}/negotiations/pickup", headers=bearer(agent["apiKey"]))
    assert answer.status_code == 204, answer.text


def test_a_missing_token_is_not_a_guess(make_store):
    store = limited_store(make_store, max_wrong_tokens=2)
    for _ in range(5):
        assert store.http.get("/metrics").status_code == 401
        assert store.http.get("/market/inbox").status_code == 401
    assert call(store, ("GET", "/metrics"), WRONG).status_code == 401


# -- registrations --------------------------------------------------------------------------------


def register_market(store) -> httpx.Response:
    agent = Trader(store.http, new_id("agent"), store.clock)
    return store.http.post("/market/agents", json={"agentId": agent.id, "publicKey": agent.public_key,
                                                    "ownerPublicKey": agent.owner_key})


def register_exchange(store) -> httpx.Response:
    return store.http.post("/v1/agents", json={"name": "spam"})


@pytest.mark.parametrize("register", [register_market, register_exchange], ids=["market", "exchange"])
def test_registrations_are_limited_per_address(make_store, register):
    """Issue 29, attack 8: open registration was unbounded (/v1/agents 551 registrations a second,
    /market/agents 376)."""
    store = limited_store(make_store, max_registrations_per_hour=3)
    for _ in range(3):
        created(register(store))
    assert_limited(register(store), "--max-registrations-per-hour")
    store.clock.advance(hours=1, seconds=1)
    created(register(store))


def test_both_registration_routes_share_one_count(make_store):
    store = limited_store(make_store, max_registrations_per_hour=2)
    created(register_market(store))
    created(register_exchange(store))
    assert_limited(register_market(store), "--max-registrations-per-hour")
    assert_limited(register_exchange(store), "--max-registrations-per-hour")


def test_loopback_is_exempt_from_the_write_limits_unless_asked(make_store):
    """Like the chat-start limit: a developer's own machine is not held to them without
    --limit-loopback (a wrong token still counts: the right one is never refused anyway)."""
    store = make_store(client_limits=ClientLimits(max_registrations_per_hour=1))
    for _ in range(3):
        created(register_market(store))


# -- the inbox ------------------------------------------------------------------------------------


def contact(buyer: Trader, listing_id: str) -> httpx.Response:
    return buyer.send("/market/contact", buyer.contact(listing_id, "natural_language"))


def test_contact_requests_into_one_inbox_are_bounded(make_store):
    """Issue 29, attack 8: one agent put 200 contact requests into a seller's inbox. Past the
    bound the request is refused (429), nothing of it is kept, and the inbox keeps what it has."""
    store = limited_store(make_store, max_contacts_per_hour=3)
    seller, buyer = seller_and_buyer(store)
    listing_id = listed(seller)
    for _ in range(3):
        created(contact(buyer, listing_id))
    refused_message = buyer.contact(listing_id, "natural_language")
    assert_limited(buyer.send("/market/contact", refused_message), "--max-contacts-per-hour")
    assert len(seller.inbox()["messages"]) == 3
    refused(buyer.get(f"/market/contact/{refused_message['requestId']}"), 404)
    store.clock.advance(hours=1, seconds=1)
    created(contact(buyer, listing_id))


def test_an_inbox_is_bounded_whoever_writes_to_it(make_store):
    """Many agents each sending few contact requests from one address still fill one inbox only
    up to the bound."""
    store = limited_store(make_store, max_contacts_per_hour=2)
    seller, first = seller_and_buyer(store)
    listing_id = listed(seller)
    created(contact(first, listing_id))
    created(contact(trader(store, new_id("buyer"), maxSpend=200), listing_id))
    response = contact(trader(store, new_id("buyer"), maxSpend=200), listing_id)
    assert_limited(response, "--max-contacts-per-hour")
    assert "inbox" in response.json()["error"]
    assert len(seller.inbox()["messages"]) == 2


def behind_proxy(make_store, **limits: int):
    """A limited store behind a trusted proxy on loopback: ``X-Forwarded-For`` names the client."""
    return make_store(matching=MatchingSettings(operator_token=TOKEN), client_limits=ClientLimits(**limits),
                      limits=StoreLimits(limit_loopback=True), trusted_proxies=parse_networks(["127.0.0.1/32"]))


def from_address(agent: Trader, address: str, path: str, message: dict) -> httpx.Response:
    return agent.http.post(path, json=agent.sign(message), headers={"X-Forwarded-For": address})


def test_one_address_cannot_use_up_a_sellers_inbox_for_everyone(make_store):
    """The inbox bound counts per sending address: an agent that spends it from its address
    leaves the seller reachable by buyers elsewhere."""
    store = behind_proxy(make_store, max_contacts_per_hour=2)
    seller, spammer = seller_and_buyer(store)
    listing_id = listed(seller)
    for _ in range(2):
        created(from_address(spammer, "203.0.113.7", "/market/contact", spammer.contact(listing_id, "sealed_bid")))
    assert_limited(from_address(spammer, "203.0.113.7", "/market/contact", spammer.contact(listing_id, "sealed_bid")),
                   "--max-contacts-per-hour")
    honest = trader(store, new_id("buyer"), maxSpend=200)
    created(from_address(honest, "198.51.100.9", "/market/contact", honest.contact(listing_id, "sealed_bid")))


def test_an_ipv6_client_is_counted_by_its_64():
    """A host holds a whole /64 and may use a fresh address for every request: the limits count
    the network, and an IPv4 address (mapped or not) as itself."""
    assert holder("2001:db8:1:2::1") == holder("2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64"
    assert holder("2001:db8:1:3::1") != holder("2001:db8:1:2::1")
    assert holder("::ffff:203.0.113.7") == holder("203.0.113.7") == "203.0.113.7"


def test_registrations_from_one_ipv6_64_share_one_count(make_store):
    store = behind_proxy(make_store, max_registrations_per_hour=2)
    for n in range(2):
        created(store.http.post("/v1/agents", json={"name": "spam"}, headers={"X-Forwarded-For": f"2001:db8::{n + 1}"}))
    refused = store.http.post("/v1/agents", json={"name": "spam"}, headers={"X-Forwarded-For": "2001:db8::ffff"})
    assert_limited(refused, "--max-registrations-per-hour")


def test_one_agent_may_send_only_so_many_contact_requests(make_store):
    store = limited_store(make_store, max_contacts_per_hour=2)
    buyer = trader(store, new_id("buyer"), maxSpend=200)
    sellers = [trader(store, new_id("seller"), minAcceptablePrice=150) for _ in range(3)]
    listings = [listed(seller) for seller in sellers]
    created(contact(buyer, listings[0]))
    created(contact(buyer, listings[1]))
    response = contact(buyer, listings[2])
    assert_limited(response, "--max-contacts-per-hour")
    assert "sent too many contact requests" in response.json()["error"]
    assert sellers[2].inbox()["messages"] == []


def test_market_messages_are_limited_per_address(make_store):
    store = limited_store(make_store, max_agent_messages_per_hour=3)
    seller, buyer = seller_and_buyer(store)
    request_id = agreed_request(seller, buyer, listed(seller), "natural_language")  # a listing, a contact, an agreement
    response = buyer.send(f"/market/contact/{request_id}/offers", buyer.offer(request_id, "buyer", 160))
    assert_limited(response, "--max-agent-messages-per-hour")


def test_refused_market_messages_count_toward_the_limit(make_store):
    """A message the market refuses — malformed JSON, a schema violation, a signature that does
    not verify, an offer on an unknown request — is counted like any other: its count is kept
    when the action's transaction rolls back, so a client cannot send freely by sending junk."""
    store = limited_store(make_store, max_agent_messages_per_hour=4)
    seller, buyer = seller_and_buyer(store)
    listing = seller.listing()
    tampered = {**seller.sign(listing), "title": "not what was signed"}
    refusals = [store.http.post("/market/listings", content=b"{not json", headers={"content-type": "application/json"}),
                seller.send("/market/listings", {"type": "listing"}),
                seller.send("/market/listings", tampered, sign=False),
                buyer.send("/market/contact/rq_unknown/offers", buyer.offer("rq_unknown", "buyer", 160))]
    assert [r.status_code for r in refusals if r.status_code >= 400 and r.status_code != 429] == \
        [r.status_code for r in refusals], [r.text for r in refusals]
    assert_limited(seller.send("/market/listings", seller.listing()), "--max-agent-messages-per-hour")


def test_market_notices_are_never_refused_or_dropped(make_store):
    """With the seller's inbox at its bound, the market's own notices still arrive: a wanted ad
    that matches its listing, and an instant match's closed deal."""
    store = limited_store(make_store, max_contacts_per_hour=1)
    seller, buyer = seller_and_buyer(store)
    listing_id = listed(seller)
    created(contact(buyer, listing_id))
    assert contact(trader(store, new_id("buyer"), maxSpend=200), listing_id).status_code == 429
    created(buyer.send("/market/wanted", buyer.wanted()))
    created(buyer.send(f"/market/listings/{listing_id}/instant_match", buyer.instant(listing_id, 180)))
    events = [m["body"].get("event") for m in seller.inbox()["messages"] if m["kind"] == "notification"]
    assert "wanted_matches_listing" in events and "deal_closed" in events


@pytest.mark.parametrize("peer", ["127.0.0.1", "10.0.0.9", "::1", None])
@pytest.mark.parametrize("forwarded", [[], ["203.0.113.7"], ["203.0.113.7, 127.0.0.1"], ["198.51.100.1", "127.0.0.1"],
                                       ["not an address"], ["127.0.0.1"]])
@pytest.mark.parametrize("trusted", [(), ("127.0.0.1/32",), ("127.0.0.0/8", "::1/128")])
def test_a_request_s_client_is_resolved_once_as_each_check_resolves_it(peer, forwarded, trusted) -> None:  # type: ignore[no-untyped-def]
    """The client and its locality kept in the request's scope are what request_client and
    is_local_client say; the access log finds them there once a route asked, and only then."""
    from starlette.datastructures import Headers

    from haggler.server.clientip import is_local_client, known_client, request_client, resolved_client

    networks = parse_networks(list(trusted))
    scope = {"type": "http", "client": (peer, 5000) if peer else None,
             "headers": [(b"x-forwarded-for", line.encode()) for line in forwarded]}
    headers = Headers(scope=scope)
    assert known_client(scope) is None
    expected = (request_client(peer, headers, networks), is_local_client(peer, headers, networks))
    assert resolved_client(scope, networks) == expected
    assert known_client(scope) == expected[0]
    scope["headers"] = []  # kept: not worked out again
    assert resolved_client(scope, networks) == expected
