"""The descriptor's ``limits`` block: every field is enforced (§2, §4 "respect the limits", §6 429)."""

from __future__ import annotations

import ipaddress
from datetime import timedelta

import pytest
from starlette.datastructures import Headers

from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.server.clientip import client_address, is_local_client, parse_networks


def test_s6_chat_starts_per_hour_per_ip_then_429_with_retry_after(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=3, limit_loopback=True))
    for _ in range(3):
        assert store.start().status_code == 201
    store.clock.advance(minutes=20)
    response = store.start()
    assert response.status_code == 429
    assert response.json()["error"] == ("too many chats started from your address: the limit is 3 chat starts "
                                        "per hour per client address, set with haggler serve "
                                        "--max-chat-starts-per-hour")
    retry = int(response.headers["retry-after"])
    assert 40 * 60 <= retry <= 40 * 60 + 1  # the oldest start leaves the window in 40 minutes
    # a widget on another site may read it: Retry-After is not a CORS-safelisted header
    assert response.headers["access-control-expose-headers"] == "Retry-After, X-Request-Id"
    store.clock.advance(seconds=retry)
    assert store.start().status_code == 201


def test_x_forwarded_for_from_an_untrusted_peer_does_not_dodge_the_limit(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=2))
    assert store.start(**{"X-Forwarded-For": "198.51.100.1"}).status_code == 201
    assert store.start(**{"X-Forwarded-For": "198.51.100.2"}).status_code == 201
    assert store.start(**{"X-Forwarded-For": "198.51.100.3"}).status_code == 429


def test_x_forwarded_for_from_a_trusted_proxy_identifies_clients(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=1),
                       trusted_proxies=parse_networks(["127.0.0.0/8"]))
    assert store.start(**{"X-Forwarded-For": "198.51.100.1"}).status_code == 201
    assert store.start(**{"X-Forwarded-For": "198.51.100.2"}).status_code == 201
    assert store.start(**{"X-Forwarded-For": "198.51.100.1"}).status_code == 429
    # a client cannot prepend a fake address: the proxy appends the real one last
    assert store.start(**{"X-Forwarded-For": "203.0.113.9, 198.51.100.1"}).status_code == 429


def start_with_forwarded_lines(store, *lines: str):
    """A chat start whose X-Forwarded-For comes as one header line per value, in this order."""
    pid = store.catalog.products[0].id
    return store.http.get("/api/store/chat/start", params={"product_id": pid},
                          headers=[("X-Forwarded-For", line) for line in lines])


def test_x_forwarded_for_sent_as_several_lines_is_one_list_and_the_proxys_line_counts(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=1),
                       trusted_proxies=parse_networks(["127.0.0.0/8"]))
    # HAProxy appends a line with the address it saw instead of extending the client's line.
    assert start_with_forwarded_lines(store, "203.0.113.9", "198.51.100.1").status_code == 201
    assert store.start(**{"X-Forwarded-For": "198.51.100.1"}).status_code == 429  # the same client
    assert start_with_forwarded_lines(store, "203.0.113.9", "198.51.100.2").status_code == 201  # another one


def test_a_forged_first_x_forwarded_for_line_does_not_dodge_the_limit(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=1),
                       trusted_proxies=parse_networks(["127.0.0.0/8"]))
    assert start_with_forwarded_lines(store, "198.51.100.1").status_code == 201
    for forged in ("203.0.113.10", "203.0.113.11, 203.0.113.12", "10.9.8.7"):
        refused = start_with_forwarded_lines(store, forged, "198.51.100.1")
        assert refused.status_code == 429, (forged, refused.text)


def test_a_client_on_this_machine_is_exempt_from_the_chat_start_limit_by_default(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=1))
    assert [store.start().status_code for _ in range(4)] == [201] * 4
    # the published limit is unchanged: it holds for every other client
    assert store.http.get("/negotiate.json").json()["limits"]["max_chat_starts_per_hour_per_ip"] == 1


def test_a_loopback_proxy_relaying_for_remote_clients_does_not_make_them_exempt(make_store):
    trusted = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=1),
                         trusted_proxies=parse_networks(["127.0.0.0/8"]))
    assert trusted.start(**{"X-Forwarded-For": "198.51.100.1"}).status_code == 201
    assert trusted.start(**{"X-Forwarded-For": "198.51.100.1"}).status_code == 429
    # a client on this machine behind the same proxy is still this machine
    assert [trusted.start(**{"X-Forwarded-For": "127.0.0.1"}).status_code for _ in range(2)] == [201, 201]
    # a proxy nobody declared with --trusted-proxy relays for clients nobody knows: all held to the limit
    undeclared = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=1))
    assert undeclared.start(**{"X-Forwarded-For": "198.51.100.1"}).status_code == 201
    assert undeclared.start(**{"X-Forwarded-For": "127.0.0.1"}).status_code == 429


@pytest.mark.parametrize(("peer", "header", "trusted", "local"), [
    ("127.0.0.1", None, [], True),
    ("127.8.9.10", None, [], True),
    ("::1", None, [], True),
    ("::ffff:127.0.0.1", None, [], True),
    ("10.0.0.5", None, [], False),
    ("testclient", None, [], False),
    (None, None, [], False),
    ("127.0.0.1", "203.0.113.9", [], False),
    ("127.0.0.1", "203.0.113.9", ["127.0.0.1/32"], False),
    ("127.0.0.1", "::1", ["127.0.0.1/32"], True),
    ("10.0.0.5", "127.0.0.1", ["10.0.0.0/8"], True),
])
def test_is_local_client(peer, header, trusted, local):
    headers = Headers(headers={"x-forwarded-for": header} if header else {})
    assert is_local_client(peer, headers, parse_networks(trusted)) is local


@pytest.mark.parametrize(("peer", "header", "trusted", "expected"), [
    ("10.0.0.5", "1.2.3.4", [], "10.0.0.5"),
    ("10.0.0.5", "1.2.3.4", ["10.0.0.0/8"], "1.2.3.4"),
    ("10.0.0.5", "9.9.9.9, 1.2.3.4", ["10.0.0.0/8"], "1.2.3.4"),
    ("10.0.0.5", "1.2.3.4, 10.0.0.7", ["10.0.0.0/8"], "1.2.3.4"),
    ("10.0.0.5", "not-an-ip", ["10.0.0.0/8"], "10.0.0.5"),
    ("8.8.8.8", "1.2.3.4", ["10.0.0.0/8"], "8.8.8.8"),
    ("::1", "2001:db8::1", ["::1/128"], "2001:db8::1"),
    ("10.0.0.5", None, ["10.0.0.0/8"], "10.0.0.5"),
])
def test_client_address(peer, header, trusted, expected):
    assert client_address(peer, header, parse_networks(trusted)) == expected


def test_parse_networks_names_the_bad_value():
    with pytest.raises(ValueError, match="nonsense"):
        parse_networks(["10.0.0.0/8", "nonsense"])
    assert parse_networks(["10.1.2.3"]) == (ipaddress.ip_network("10.1.2.3/32"),)


def test_messages_per_chat_last_message_wraps_up_and_closes(make_store):
    store = make_store(limits=StoreLimits(max_messages_per_chat=3))
    body = store.start().json()
    for _ in range(2):
        body = store.say(body["next"], "what's the warranty?").json()
        assert body["closed"] is False
    last_next = body["next"]
    body = store.say(last_next, "tell me about it").json()
    assert body["closed"] is True and body["next"] is None
    assert "deal" not in body
    assert len(body["message"]) > 20
    assert store.say(last_next, "one more?").json()["error"] == "this chat is closed"


def test_last_allowed_message_can_still_close_a_deal(make_store):
    store = make_store(limits=StoreLimits(max_messages_per_chat=2))
    body = store.start().json()
    body = store.say(body["next"], "hello").json()
    body = store.say(body["next"], "deal").json()
    assert body["closed"] is True and "deal" in body


def test_idle_ttl_closes_the_chat_and_history_stays_readable(make_store):
    store = make_store(limits=StoreLimits(session_idle_ttl_seconds=600))
    body = store.start().json()
    sid = body["session_id"]
    body = store.say(body["next"], "hi").json()
    store.clock.advance(seconds=599)
    body = store.say(body["next"], "still there?").json()
    assert body["closed"] is False
    store.clock.advance(seconds=600)
    response = store.say(body["next"], "hello?")
    assert response.status_code == 400 and response.json()["error"] == "this chat is closed"
    history = store.http.get(f"/api/store/chat/{sid}").json()
    assert history["closed"] is True
    assert len(history["history"]) == 5


def test_idle_chats_are_closed_by_the_sweep(make_store):
    store = make_store(limits=StoreLimits(session_idle_ttl_seconds=60))
    sids = [store.start().json()["session_id"] for _ in range(3)]
    store.clock.advance(seconds=30)
    service = store.app.state.service
    assert service.sweep() == 0
    store.clock.advance(seconds=30)
    assert service.sweep() == 3
    for sid in sids:
        assert store.http.get(f"/api/store/chat/{sid}").json()["closed"] is True


def test_message_length_limit_is_configurable(make_store):
    store = make_store(limits=StoreLimits(max_message_length_chars=10))
    body = store.start().json()
    assert store.say(body["next"], "0123456789").status_code == 200
    assert store.say(body["next"], "0123456789x").status_code == 400


def test_s6_retry_after_is_when_the_limiting_start_leaves_the_window_not_the_oldest(make_store):
    """An address over its limit (many starts recorded, as under a burst or a lowered limit) may
    start again once its limit-th most recent start is an hour old: an earlier one leaving the
    window changes nothing. The check reads that one start, however many are in the window."""
    from sqlalchemy import create_engine, insert

    from haggler.storage.schema import chat_starts

    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=3, limit_loopback=True))
    now = store.clock()
    engine = create_engine(store.app.state.service.db.url)
    with engine.begin() as conn:  # 500 starts 50 minutes ago, then 3 starts 10 minutes ago
        conn.execute(insert(chat_starts), [{"client_ip": "127.0.0.1", "at": now - timedelta(minutes=50)}] * 500
                     + [{"client_ip": "127.0.0.1", "at": now - timedelta(minutes=10)}] * 3)
    engine.dispose()
    response = store.start()
    assert response.status_code == 429
    assert 50 * 60 <= int(response.headers["retry-after"]) <= 50 * 60 + 1  # not the 10 minutes of the oldest
    store.clock.advance(minutes=11)  # the 500 have left the window; the 3 have not
    assert store.start().status_code == 429
    store.clock.advance(minutes=39, seconds=1)
    assert store.start().status_code == 201
