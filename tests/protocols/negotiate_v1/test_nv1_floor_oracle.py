"""§7 hidden merchant state, end to end: 50 chats from seven client addresses against a real store
find its hidden reserve, never its floor (the statistics over many stores are in
tests/agents/test_floor_oracle.py); a structured offer a fraction of a cent under a price is
rounded down, never up to it."""

from __future__ import annotations

import json

from haggler.agents.merchant import hidden_reserve
from haggler.protocols.negotiate_v1.settings import MerchantSettings, StoreLimits
from haggler.server.clientip import parse_networks
from haggler.storage.secrets import store_secret

CHATS = 50
ADDRESSES = [f"198.51.100.{n}" for n in range(1, 8)]  # 8 chat starts an hour each: 56 in all


def attack_store(make_store, **config):
    return make_store(limits=StoreLimits(), trusted_proxies=parse_networks(["127.0.0.0/8"]), **config)


def repeat_until_closed(store, product_id: str, price_cents: int, address: str) -> bool:
    """One chat from ``address``: the same structured offer until the chat closes; agreed?"""
    started = store.start(product_id, **{"X-Forwarded-For": address})
    assert started.status_code == 201, started.text
    next_url = started.json()["next"]
    message = json.dumps({"action": "offer", "price": price_cents / 100})
    while True:
        reply = store.say(next_url, message).json()
        if reply["closed"]:
            return "deal" in reply
        next_url = reply["next"]


def binary_search(store, product) -> int:
    low, high = product.list_price_cents // 2, product.list_price_cents
    for chat in range(CHATS):
        if high - low <= 1:
            break
        middle = (low + high) // 2
        if repeat_until_closed(store, product.id, middle, ADDRESSES[chat % len(ADDRESSES)]):
            high = middle
        else:
            low = middle
    return high


def test_s7_fifty_chats_from_seven_addresses_find_the_hidden_reserve_not_the_floor(make_store):
    store = attack_store(make_store)
    product = store.catalog.products[0]
    margin = MerchantSettings().floor_margin
    reserve = hidden_reserve(product, store_secret(store.app.state.service.db, "floor_margin"), margin)
    found = binary_search(store, product)
    assert found == reserve  # all the attack learns: a price somewhere in the margin above the floor
    assert product.floor_cents <= found <= product.floor_cents + margin * (product.list_price_cents - product.floor_cents)


def test_s7_without_the_margin_the_same_attack_finds_the_floor(make_store):
    """The control: the same 50 chats pin the floor to the cent when the margin is off."""
    store = attack_store(make_store, merchant=MerchantSettings(floor_margin=0))
    product = store.catalog.products[0]
    assert binary_search(store, product) == product.floor_cents


def test_s7_a_structured_offer_a_fraction_of_a_cent_short_is_rounded_down(make_store):
    """An offer of reserve − $0.005 is an offer of reserve − $0.01: repeated to the end of the
    chat it is refused, where rounding it up would have sold at the reserve."""
    store = attack_store(make_store)
    product = store.catalog.products[0]
    reserve = hidden_reserve(product, store_secret(store.app.state.service.db, "floor_margin"),
                             MerchantSettings().floor_margin)
    short = json.dumps({"action": "offer", "price": (reserve - 0.5) / 100})
    started = store.start(product.id).json()
    next_url, replies = started["next"], []
    while next_url:
        reply = store.say(next_url, short).json()
        replies.append(reply)
        next_url = reply["next"]
    assert "deal" not in replies[-1] and replies[-1]["closed"]
    assert repeat_until_closed(store, product.id, reserve, ADDRESSES[0])  # a whole cent more is taken
