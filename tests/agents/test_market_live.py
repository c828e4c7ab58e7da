"""Live market agents over HTTP (issue 32; ``haggler.agents.market_live``): a seller and a buyer,
each acting on its own in a thread of its own against a real store, reach a deal both signed and
the market confirmed — by offers, by sealed bid, by instant match, in the double auction — or, when
the buyer's ceiling is below the seller's floor, no deal, and never a mandate violation.

The same agents over Matrix, and across the two doors, are in ``tests/matrix/test_market_agents_live.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from haggler.agents.market import Interest
from haggler.agents.market_live import CONFIRMED, NO_DEAL, TIMED_OUT, LiveBuyer, LiveResult, LiveSeller
from haggler.protocols.market.client import MarketClient
from haggler.protocols.market.offline_check import check_deal
from tests.support.live_agents import SWITCH, run_together, violations

WANTS = Interest("electronics", "gaming_console", "nintendo_switch")
FAST = {"poll": 0.05}


@pytest.fixture
def http(store) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=store.base, timeout=30) as client:
        yield client


@pytest.fixture
def store(make_store):
    return make_store()


def client(http: httpx.Client, store, role: str) -> MarketClient:
    return MarketClient(http, f"{role}_{uuid.uuid4().hex[:8]}", clock=store.clock)


def live_seller(http: httpx.Client, store, *, ask: int = 20000, floor: int = 15000, **options: Any) -> LiveSeller:
    return LiveSeller(client(http, store, "seller"), SWITCH, ask_cents=ask, floor_cents=floor, **FAST, **options)


def live_buyer(http: httpx.Client, store, *, limit: int, budget: int = 10000, **options: Any) -> LiveBuyer:
    return LiveBuyer(client(http, store, "buyer"), WANTS, budget_cents=min(budget, limit), limit_cents=limit,
                     search_every=0.5, **FAST, **options)


def assert_one_confirmed_deal(http: httpx.Client, seller: LiveSeller, buyer: LiveBuyer,
                              results: list[LiveResult], protocol: str) -> dict[str, Any]:
    """Both ended on the same deal, confirmed, signed by both over the terms (checked offline),
    at a price within both limits; neither broke its mandate on the way."""
    assert [result.outcome for result in results] == [CONFIRMED, CONFIRMED], results
    deal_ids = {result.deal["dealId"] for result in results if result.deal}
    assert len(deal_ids) == 1
    document = http.get(f"/market/deals/{deal_ids.pop()}", headers=buyer.client.auth).json()
    assert document["status"] == "confirmed" and check_deal(document).valid
    assert document["deal"]["protocol"] == protocol
    assert seller.floor_cents <= results[0].price_cents <= buyer.limit_cents
    assert violations(http, seller, buyer) == []
    return document


def test_offers_turn_by_turn_reach_a_signed_confirmed_deal(http, store) -> None:
    seller, buyer = live_seller(http, store), live_buyer(http, store, limit=19000)
    results = run_together(seller, buyer)
    assert_one_confirmed_deal(http, seller, buyer, results, "natural_language")
    offers = http.get(f"/market/contact/{results[0].deal['deal']['requestId']}", headers=buyer.client.auth).json()
    assert len(offers["offers"]) >= 3  # a negotiation, each side moving on the other's offer


@pytest.mark.parametrize("floor,limit", [(15000, 17000), (15000, 15000), (18000, 18100)])
def test_a_narrow_overlap_closes_by_offers_within_the_turn_cap(http, store, floor, limit) -> None:
    """The strategies are paced for a longer chat than the market's 20-message cap: before the
    final offer, the buyer walked at 169 from a seller asking 183 whose floor was 150. A walk-away
    while the counterpart's price is past the limit is first an offer at the limit (once), which the
    seller takes at its last turn — at a price inside both limits, never past either."""
    seller, buyer = live_seller(http, store, floor=floor), live_buyer(http, store, limit=limit)
    results = run_together(seller, buyer)
    document = assert_one_confirmed_deal(http, seller, buyer, results, "natural_language")
    offers = http.get(f"/market/contact/{document['deal']['requestId']}", headers=buyer.client.auth).json()["offers"]
    assert len(offers) <= 20 and offers[-1]["action"] == "accept"
    prices = {party: [round(o["offerPrice"] * 100) for o in offers if o["party"] == party and "offerPrice" in o]
              for party in ("buyer", "seller")}
    assert prices["buyer"] and prices["seller"]
    assert max(prices["buyer"]) <= limit and min(prices["seller"]) >= floor


def test_a_seller_that_may_not_haggle_agrees_to_a_sealed_bid_and_the_deal_closes_at_the_midpoint(http, store) -> None:
    seller = live_seller(http, store, permissions={"canNegotiate": False})
    buyer = live_buyer(http, store, limit=19000)
    results = run_together(seller, buyer)
    document = assert_one_confirmed_deal(http, seller, buyer, results, "sealed_bid")
    assert document["deal"]["finalPrice"] == 170  # (150 + 190) / 2


def test_a_buyer_with_room_to_spare_takes_the_ask_at_once(http, store) -> None:
    seller, buyer = live_seller(http, store), live_buyer(http, store, limit=30000)
    results = run_together(seller, buyer)
    document = assert_one_confirmed_deal(http, seller, buyer, results, "instant_match")
    assert document["deal"]["finalPrice"] == 200


@pytest.mark.parametrize("permissions,reason", [(None, "negotiation failed: "), ({"canNegotiate": False},
                                                                               "negotiation failed: no_overlap")])
def test_a_ceiling_below_the_floor_ends_without_a_deal_and_without_a_mandate_violation(
        http, store, permissions, reason) -> None:
    seller = live_seller(http, store, permissions=permissions)
    buyer = live_buyer(http, store, limit=14000)
    results = run_together(seller, buyer)
    assert [result.outcome for result in results] == [NO_DEAL, NO_DEAL], results
    assert all(reason in (result.reason or "") for result in results), results
    assert violations(http, seller, buyer) == []
    assert http.get(f"/market/listings/{seller.trader.listing['listingId']}").json()["status"] == "live"


def test_a_buyer_among_many_listings_bids_in_the_book_and_signs_what_the_clearing_gives(http, store) -> None:
    """Four other listings of the item: the double auction's "use when" (high liquidity)."""
    others = client(http, store, "others")
    others.register()
    others.file_mandate({"minAcceptablePrice": 16000})
    for _ in range(4):
        others.post_listing(SWITCH, ask=22000, floor=16000)
    live_seller(http, store).run(0.2)  # lists, and leaves: its unsold listing stays live
    buyer = live_buyer(http, store, limit=19000)
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(buyer.run, 30.0)
        book = "electronics.gaming_console.nintendo_switch"
        while not http.get(f"/market/books/{book}").json()["books"]:
            assert not running.done(), running.result()
            time.sleep(0.05)
        others.order(book, "sell", 16000)
        clearing = others.clear(book)["clearings"][0]
        assert clearing["volume"] == 1
        others.sign_deal(clearing["dealIds"][0], "seller")
        result = running.result(timeout=30)
    assert result.outcome == CONFIRMED and result.deal["deal"]["protocol"] == "double_auction"
    assert 16000 <= result.price_cents <= 19000 and violations(http, buyer) == []


def test_a_buyer_no_seller_answers_stops_at_its_duration(http, store) -> None:
    slept: list[float] = []
    buyer = live_buyer(http, store, limit=19000, sleep=slept.append)
    result = buyer.run(0.3)
    assert result.outcome == TIMED_OUT and slept and set(slept) == {0.05}
    assert result.to_json()["outcome"] == "timed_out" and result.deal is None


# -- haggler market agent ---------------------------------------------------------------------------------


@pytest.fixture
def real_time_store(make_store):
    """A store on the real clock: the command's agents date their messages by it."""
    return make_store(clock=lambda: datetime.now(timezone.utc))


def test_market_agent_command_sells_to_a_live_buyer_and_prints_the_deal(real_time_store, tmp_path) -> None:
    store = real_time_store
    command = subprocess.Popen([sys.executable, "-m", "haggler", "market", "agent", "--role", "seller",
                                "--item", "electronics.gaming_console.nintendo_switch", "--price", "200",
                                "--limit", "150", "--server", store.base, "--duration", "60", "--poll", "0.1",
                                "--json"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with httpx.Client(base_url=store.base, timeout=30) as http:
            buyer = LiveBuyer(MarketClient(http, "cli_buyer", clock=store.clock), WANTS, budget_cents=10000,
                              limit_cents=19000, search_every=0.5, **FAST)
            result = buyer.run(60.0)
        out, err = command.communicate(timeout=90)
    finally:
        command.kill()
    assert command.returncode == 0, err
    printed = json.loads(out)
    assert result.outcome == CONFIRMED and printed["outcome"] == CONFIRMED and printed["role"] == "seller"
    assert printed["deal"]["dealId"] == result.deal["dealId"] and 15000 <= printed["priceCents"] <= 19000
    assert printed["deal"]["status"] == "confirmed" and check_deal(printed["deal"]).valid


def test_market_agent_command_says_why_there_is_no_deal_and_exits_1(real_time_store) -> None:
    from haggler.cli import app

    args = ["market", "agent", "--role", "buyer", "--item", "electronics.gaming_console.nintendo_switch",
            "--price", "100", "--limit", "190"]
    outcome = CliRunner().invoke(app, [*args, "--server", real_time_store.base, "--duration", "0.5", "--poll", "0.1"])
    assert outcome.exit_code == 1 and "no deal (timed_out): no deal within 0.5 s" in outcome.stdout
    for wrong, said in ((["--server", real_time_store.base, "--matrix"], "give one door"), ([], "give one door"),
                        (["--matrix", "--homeserver", "http://127.0.0.1:9"], "--matrix needs --user, --room, --bot"),
                        (["--server", real_time_store.base, "--limit", "90"], "cannot be above its --limit"),
                        (["--server", real_time_store.base, "--limit", "190.001"], "whole number of cents")):
        refused = CliRunner().invoke(app, [*args, *wrong])
        assert refused.exit_code == 2 and said in refused.output, (wrong, refused.output)


def test_market_agent_command_on_a_model_asks_it_and_trades_as_the_built_in_agent_when_it_refuses(
        real_time_store, tmp_path) -> None:
    from tests.support.fake_llm import FakeLLM, status

    store = real_time_store
    with FakeLLM() as fake, httpx.Client(base_url=store.base, timeout=30) as http:
        fake.script(*[status(400, "no such model")] * 20)  # a 400 is not retried: each call fails at once
        command = subprocess.Popen(
            [sys.executable, "-m", "haggler", "market", "agent", "--role", "buyer", "--item",
             "electronics.gaming_console.nintendo_switch", "--price", "100", "--limit", "190", "--server", store.base,
             "--duration", "60", "--poll", "0.1", "--json", "--llm-provider", "anthropic", "--llm-model", "fake-model",
             "--llm-base-url", fake.base], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "ANTHROPIC_API_KEY": "test-key"})
        try:
            seller = live_seller(http, store, permissions={"canNegotiate": False})
            result = seller.run(60.0)
            out, err = command.communicate(timeout=90)
        finally:
            command.kill()
        assert command.returncode == 0, err
        assert fake.requests and all(path == "/v1/messages" for path, _ in fake.requests)  # it asked the model
    printed = json.loads(out)
    assert printed["outcome"] == result.outcome == CONFIRMED and printed["deal"]["deal"]["protocol"] == "sealed_bid"
    assert printed["priceCents"] == 17000  # the built-in agent's bid at its limit: (150 + 190) / 2
