"""One market, two doors (issue 32): races between an HTTP buyer and a Matrix buyer for one
listing have one winner, on SQLite and PostgreSQL alike; and the bot rides out its homeserver
going away, answering what was sent meanwhile once it is back."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from sqlalchemy import func, select

from haggler.protocols.market.client import MarketClient, MarketError
from haggler.storage.schema import market_deals
from tests.support.market_matrix import Agents, BotThread
from tests.support.matching import race

pytestmark = pytest.mark.slow

SWITCH = {"category": "electronics", "subcategory": "gaming_console", "name": "nintendo_switch", "condition": "good"}
ROUNDS = 4


def outcome(call) -> int:
    try:
        call()
    except MarketError as exc:
        return exc.status
    return 201


def test_an_instant_match_raced_over_http_and_over_matrix_has_one_winner(store, bot: BotThread,
                                                                         agents: Agents) -> None:
    with httpx.Client(base_url=store.base, timeout=30) as http:
        seller = MarketClient(http, "door_seller", clock=store.clock)
        seller.register()
        seller.file_mandate({"minAcceptablePrice": 10000})
        http_buyer = MarketClient(httpx.Client(base_url=store.base, timeout=30), "door_http_buyer", clock=store.clock)
        http_buyer.register()
        http_buyer.file_mandate({"maxSpend": 100000})
        matrix_buyer = agents.agent("door_matrix_buyer", clock=store.clock)
        matrix_buyer.register()
        matrix_buyer.file_mandate({"maxSpend": 100000})
        for _ in range(ROUNDS):
            listing_id = seller.post_listing(SWITCH, ask=18000, floor=15000)["listingId"]
            results = race([lambda: outcome(lambda: http_buyer.instant_match(listing_id, 18000)),
                            lambda: outcome(lambda: matrix_buyer.instant_match(listing_id, 18000))])
            assert sorted(results) == [201, 409], results
            with bot.database.read() as conn:
                deals = conn.execute(select(func.count()).select_from(market_deals)
                                     .where(market_deals.c.listing_id == listing_id)).scalar_one()
            assert deals == 1
        http_buyer.http.close()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_the_bot_rides_out_its_homeserver_going_away(make_synapse, make_store, db_url) -> None:
    homeserver = make_synapse()
    store = make_store(db_url=db_url)
    bot = BotThread(homeserver, db_url, store.clock).start()
    agents = Agents(homeserver, bot)
    try:
        seller = agents.agent(clock=store.clock)
        seller.register()
        seller.file_mandate({"minAcceptablePrice": 15000})
        homeserver.halt()
        with ThreadPoolExecutor(1) as pool:
            posting = pool.submit(seller.post_listing, SWITCH, ask=18000, floor=15000)  # waits for the homeserver
            time.sleep(2)
            assert not posting.done()
            homeserver.resume()
            listing = posting.result(timeout=60)
        assert store.http.get(f"/market/listings/{listing['listingId']}").json()["status"] == "live"
        assert bot.bot is not None and bot.bot.connection.retries.get("unreachable", 0) > 0
    finally:
        agents.close()
        bot.close()
