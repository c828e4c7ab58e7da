"""The merchant is no floor oracle: what it accepts and refuses, over any number of chats, locates
its hidden reserve (the floor plus a secret share of the room), never the floor itself.

The attacks are the ones that found the floor to the cent before the hidden margin existed:
repeating one offer per chat and binary-searching the price over chats, and creeping up in small
steps from many starting points. Each gets 50 chats. The attacker knows our code and the margin
setting, but not the store's secret.

Stated tolerance: after 50 chats the floor is still anywhere within ``floor_margin`` of the room
(list price minus floor) below what the attacker found — ±2.5% of the room at the default 0.05 —
and its best estimate is off by a sixteenth of that margin or more for at least half the stores
(a uniform draw fails that with odds below 1 in 5,000 over 24 stores).
(±5% of list price is out of reach: shoppers with a budget 10% of the room above the floor must
still get deals, so an attacker running our own shopper at a range of budgets brackets the floor
within 10% of the room whatever the merchant does.)
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable

import pytest

from haggler.agents.merchant import hidden_reserve
from haggler.catalog import Product, load_catalog
from haggler.protocols.negotiate_v1.settings import MerchantSettings
from tests.support.merchant_chat import Chat

CATALOG = load_catalog()
#: A narrow room ($38.62 on $649.99), a middling one and a wide one.
PRODUCTS = [CATALOG.product(pid) for pid in ("aerion-v12-cordless", "crema-forte-dual-boiler", "breeze-hc3-clearance")]
MARGIN = MerchantSettings().floor_margin
CHATS = 50
#: Stores with different secrets (the draws are fixed, so the test is deterministic).
SECRETS = [hashlib.sha256(f"store {k}".encode()).digest() for k in range(24)]

Probe = Callable[[int], tuple[bool, int | None]]


def store_probe(product: Product, reserve: int, deals: list[Chat]) -> Callable[[Callable[[Chat], None]], Chat]:
    """Play one chat with the store's merchant (reserve as the store sets it) by ``script``."""
    def play(script: Callable[[Chat], None]) -> Chat:
        chat = Chat(product, reserve_cents=reserve)
        script(chat)
        outcome = chat.negotiation.outcome
        if outcome is not None and outcome.agreed:
            deals.append(chat)
        return chat
    return play


def agreed_price(chat: Chat) -> int | None:
    outcome = chat.negotiation.outcome
    return outcome.terms.price_cents if outcome is not None and outcome.agreed else None


def repeat_binary_search(product: Product, play: Callable[[Callable[[Chat], None]], Chat]) -> int:
    """One offer per chat, repeated until the chat closes; binary search over chats for the
    lowest price that gets accepted. Returns that price."""
    def repeat(price: int) -> Callable[[Chat], None]:
        def script(chat: Chat) -> None:
            while not chat.closed:
                chat.offer(price)
        return script

    low, high = product.list_price_cents // 2, product.list_price_cents
    for _ in range(CHATS):
        if high - low <= 1:
            break
        middle = (low + high) // 2
        if agreed_price(play(repeat(middle))) is not None:
            high = middle
        else:
            low = middle
    return high


def creep_from_many_starts(product: Product, play: Callable[[Callable[[Chat], None]], Chat]) -> int:
    """Each chat starts at a different offer and creeps up 0.1% of list per message; the lowest
    price any chat agreed at. Returns it (list price when none agreed)."""
    lst = product.list_price_cents
    step = max(1, lst // 1000)
    lowest = lst
    for k in range(CHATS):
        start = lst * (80 + k * 20 // CHATS) // 100  # 80% .. 100% of list

        def script(chat: Chat, price: int = start) -> None:
            while not chat.closed:
                chat.offer(price)
                price += step

        price = agreed_price(play(script))
        if price is not None:
            lowest = min(lowest, price)
    return lowest


ATTACKS = [repeat_binary_search, creep_from_many_starts]


def best_estimate(product: Product, found: int) -> float:
    """The attacker's best guess of the floor from the price it found, knowing the margin: the
    middle of the floors that would put the reserve there."""
    half = MARGIN / 2
    return (found - half * product.list_price_cents) / (1 - half)


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda a: a.__name__)
@pytest.mark.parametrize("product", PRODUCTS, ids=lambda p: p.id)
def test_attacks_locate_the_reserve_never_the_floor(product: Product, attack) -> None:
    room = product.list_price_cents - product.floor_cents
    errors = []
    for secret in SECRETS:
        reserve = hidden_reserve(product, secret, MARGIN)
        deals: list[Chat] = []
        found = attack(product, store_probe(product, reserve, deals))
        # no deal, in any chat, clears less than the floor plus the cost of its extras
        for chat in deals:
            terms = chat.negotiation.outcome.terms
            assert terms.price_cents - product.extras_cost(terms.extras) >= reserve >= product.floor_cents
        assert found >= reserve, f"{attack.__name__} got below the hidden reserve: {found} < {reserve}"
        errors.append(abs(best_estimate(product, found) - product.floor_cents))
    # the floor stays hidden: half the stores or more leave the best guess a sixteenth of the
    # margin off or worse, and some a quarter or worse
    assert statistics.median(errors) >= MARGIN * room / 16, (errors, MARGIN * room)
    assert max(errors) >= MARGIN * room / 4, (errors, MARGIN * room)


@pytest.mark.parametrize("product", PRODUCTS, ids=lambda p: p.id)
def test_without_the_margin_the_binary_search_finds_the_floor_to_the_cent(product: Product) -> None:
    """The control: the attack is real. With no hidden margin (floor_margin=0, the merchant before
    it existed), 50 chats of repeated offers pin the floor exactly."""
    reserve = hidden_reserve(product, SECRETS[0], 0)
    assert reserve == product.floor_cents
    assert repeat_binary_search(product, store_probe(product, reserve, [])) == product.floor_cents


def test_hidden_reserve_is_the_floor_plus_a_secret_share_of_the_room() -> None:
    product = PRODUCTS[0]
    room = product.list_price_cents - product.floor_cents
    reserves = [hidden_reserve(product, secret, MARGIN) for secret in SECRETS]
    assert all(product.floor_cents <= r <= product.floor_cents + MARGIN * room for r in reserves)
    # each store draws its own (a few may coincide: this room holds only ~190 cent values)
    assert len(set(reserves)) >= len(reserves) - 3
    assert max(reserves) - min(reserves) >= MARGIN * room / 2
    assert hidden_reserve(product, SECRETS[0], MARGIN) == reserves[0], "a store keeps its draw"
    other = PRODUCTS[1]
    shares = {(hidden_reserve(p, SECRETS[0], MARGIN) - p.floor_cents) / (MARGIN * (p.list_price_cents - p.floor_cents))
              for p in (product, other)}
    assert len(shares) == 2, "each product draws its own share"
