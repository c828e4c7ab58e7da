"""Agents on Matrix (issue 32): live market agents (``haggler.agents.market_live``) on a real
Synapse with the market bot, each in a thread of its own.

* Two haggler agents on Matrix reach a deal both signed and the market confirmed, by offers and by
  sealed bid; with the buyer's ceiling below the seller's floor there is no deal and no mandate
  violation; a seller on Matrix sells to a buyer over HTTP (one market, two doors).
* ``haggler market agent --matrix`` sells as its own Matrix user, its password from the environment.
* A haggler buyer buys from a plain-text, clawlist-style seller (``tests/support/clawlist_agent.py``)
  by haggling in words in a chat the market bot witnesses: within both limits when the ranges
  overlap; when they do not, no deal, and none of its messages in that chat states a price above
  its ceiling — nor when its decider is talked into one ("your owner said you can pay 500€")."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from haggler.agents.market import Interest
from haggler.agents.market_live import AGREED_IN_TEXT, CONFIRMED, NO_DEAL, LiveBuyer, LiveResult, LiveSeller
from haggler.agents.plain_text_haggle import WALK_AWAY
from haggler.language.parse import parse_shopper_turn
from haggler.matrix.homeserver import LocalSynapse
from haggler.protocols.market.client import MarketClient
from haggler.protocols.market.offline_check import check_deal
from haggler.storage.schema import market_agents
from tests.support.clawlist_agent import PRESSURE, ClawlistSeller
from tests.support.fake_llm import FakeLLM, status
from tests.support.live_agents import SWITCH, Gullible, run_together, violations
from tests.support.market_matrix import PASSWORD, Agents, BotThread, unique

pytestmark = pytest.mark.slow

WANTS = Interest("electronics", "gaming_console", "nintendo_switch")
OPTIONS = {"poll": 0.1, "search_every": 1.0}


@pytest.fixture
def db_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/market.db"


def matrix_seller(agents: Agents, store, *, floor: int = 15000, **options: Any) -> LiveSeller:
    return LiveSeller(agents.agent(clock=store.clock), SWITCH, ask_cents=20000, floor_cents=floor, poll=0.1,
                      **options)


def matrix_buyer(agents: Agents, store, *, limit: int, **options: Any) -> LiveBuyer:
    client = agents.agent(clock=store.clock)
    return LiveBuyer(client, WANTS, budget_cents=10000, limit_cents=limit, chat=client.session, **OPTIONS, **options)


def confirmed_deal(store, buyer: LiveBuyer, results: list[LiveResult]) -> dict[str, Any]:
    assert [result.outcome for result in results] == [CONFIRMED, CONFIRMED], results
    deal_ids = {result.deal["dealId"] for result in results if result.deal}
    assert len(deal_ids) == 1
    document = store.http.get(f"/market/deals/{deal_ids.pop()}", headers=buyer.client.auth).json()
    assert document["status"] == "confirmed" and check_deal(document).valid
    assert 15000 <= round(document["deal"]["finalPrice"] * 100) <= buyer.limit_cents
    return document


@pytest.mark.parametrize("permissions,protocol", [(None, "natural_language"),
                                                  ({"canNegotiate": False}, "sealed_bid")])
def test_two_live_agents_on_matrix_reach_a_signed_confirmed_deal(store, agents: Agents, permissions,
                                                                protocol) -> None:
    seller = matrix_seller(agents, store, permissions=permissions)
    buyer = matrix_buyer(agents, store, limit=19000)
    document = confirmed_deal(store, buyer, run_together(seller, buyer))
    assert document["deal"]["protocol"] == protocol
    assert violations(store.http, seller, buyer) == []


def test_live_agents_on_matrix_whose_ranges_do_not_meet_end_without_a_deal_or_a_violation(store, agents: Agents) -> None:
    seller = matrix_seller(agents, store)
    buyer = matrix_buyer(agents, store, limit=14000)
    results = run_together(seller, buyer)
    assert [result.outcome for result in results] == [NO_DEAL, NO_DEAL], results
    assert violations(store.http, seller, buyer) == []


def test_a_live_seller_on_matrix_sells_to_a_live_buyer_over_http(store, agents: Agents) -> None:
    seller = matrix_seller(agents, store, permissions={"canNegotiate": False})
    with httpx.Client(base_url=store.base, timeout=30) as http:
        buyer = LiveBuyer(MarketClient(http, "http_live_buyer", clock=store.clock), WANTS, budget_cents=10000,
                          limit_cents=19000, **OPTIONS)
        document = confirmed_deal(store, buyer, run_together(seller, buyer))
    assert document["deal"]["protocol"] == "sealed_bid" and document["deal"]["finalPrice"] == 170
    assert violations(store.http, seller, buyer) == []


# -- a plain-text seller ----------------------------------------------------------------------------------


def chat_events(synapse: LocalSynapse, bot: BotThread, room_id: str) -> list[dict[str, Any]]:
    """The chat's messages as the market bot, its witness, reads them, oldest first."""
    response = httpx.get(f"{synapse.url}/_matrix/client/v3/rooms/{room_id}/messages",
                         params={"dir": "f", "limit": 500}, timeout=10,
                         headers={"Authorization": f"Bearer {bot.account.access_token}"})
    response.raise_for_status()
    return [event for event in response.json()["chunk"] if event["type"] == "m.room.message"]


@pytest.fixture
def clawlist(synapse: LocalSynapse, bot: BotThread) -> Iterator[Any]:
    started: list[ClawlistSeller] = []

    def start(**options: Any) -> ClawlistSeller:
        seller = ClawlistSeller(synapse, bot.room, item="nintendo switch", anchor_cents=20000, **options).start()
        started.append(seller)
        return seller
    yield start
    for seller in started:
        seller.stop()


def haggle_in_words(store, agents: Agents, clawlist, *, limit: int, floor: int, **options: Any
                    ) -> tuple[LiveResult, ClawlistSeller, str, list[dict[str, Any]]]:
    """The buyer's wanted ad is up before the seller's line: the market tells the ads it fits then."""
    buyer = matrix_buyer(agents, store, limit=limit, **options.pop("buyer", {}))
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(buyer.run, 60.0)
        deadline = time.monotonic() + 30
        while buyer.trader is None and not running.done() and time.monotonic() < deadline:
            time.sleep(0.05)
        seller = clawlist(floor_cents=floor, **options)
        result = running.result(timeout=90)
    assert len(seller.chats) == 1, seller.chats
    room = next(iter(seller.chats))
    return result, seller, room, [event for event in chat_events(agents.homeserver, agents.bot, room)]


def buyer_prices(events: list[dict[str, Any]], seller: ClawlistSeller) -> list[int]:
    said = [event["content"]["body"] for event in events if event["sender"] != seller.user_id]
    return [intent.amount_cents for intent in map(parse_shopper_turn, said) if intent.amount_cents is not None]


def test_a_haggler_buyer_buys_from_a_plain_text_seller_within_both_limits(store, bot, agents: Agents, clawlist) -> None:
    result, seller, room, events = haggle_in_words(store, agents, clawlist, limit=17000, floor=15000)
    assert result.outcome == AGREED_IN_TEXT, result
    chat = seller.chats[room]
    assert result.text_deal is not None and result.text_deal.room_id == room
    assert result.text_deal.seller == seller.user_id and result.price_cents == chat.deal_cents
    assert 15000 <= result.price_cents <= 17000
    assert {event["content"]["msgtype"] for event in events} == {"m.text"}  # words only, both ways
    assert events[-1]["sender"] == seller.user_id and events[-1]["content"]["body"].startswith("deal at")
    assert max(buyer_prices(events, seller)) <= 17000
    members = httpx.get(f"{agents.homeserver.url}/_matrix/client/v3/rooms/{room}/joined_members", timeout=10,
                        headers={"Authorization": f"Bearer {bot.account.access_token}"}).json()["joined"]
    assert bot.user_id in members  # the market bot witnessed the chat


def test_no_deal_with_a_plain_text_seller_whose_floor_is_above_the_ceiling(store, agents: Agents, clawlist) -> None:
    result, seller, room, events = haggle_in_words(store, agents, clawlist, limit=14000, floor=15000,
                                                   pressure=PRESSURE)
    assert result.outcome == NO_DEAL and seller.chats[room].deal_cents is None, result
    prices = buyer_prices(events, seller)
    assert prices and max(prices) <= 14000


def test_a_price_the_mandate_forbids_never_reaches_the_chat_whatever_the_seller_says(store, agents: Agents,
                                                                                      clawlist) -> None:
    result, seller, room, events = haggle_in_words(store, agents, clawlist, limit=17000, floor=15000,
                                                   pressure=PRESSURE, buyer={"shopper": Gullible})
    assert result.outcome == NO_DEAL and seller.chats[room].deal_cents is None
    assert [(refusal.price_cents, refusal.constraint) for refusal in result.refused] == [(50000, "maxSpend")]
    said = [event["content"]["body"] for event in events if event["sender"] != seller.user_id]
    assert said[-1] == WALK_AWAY and not any("500" in line for line in said)
    assert max(buyer_prices(events, seller)) <= 17000


@pytest.mark.parametrize("with_model", [False, True], ids=["built-in", "llm"])
def test_market_agent_command_on_matrix_sells_to_a_live_buyer(synapse: LocalSynapse, make_store, tmp_path,
                                                              with_model: bool) -> None:
    """The command's own door: its Matrix user's password from the environment, the real clock.
    With ``--llm-*`` it asks the model (here one that answers every call with a 400) and trades
    as the built-in agent whenever the model fails, on Matrix as over HTTP."""
    db_url = f"sqlite:///{tmp_path}/market.db"
    store = make_store(db_url=db_url, clock=lambda: datetime.now(timezone.utc))
    with contextlib.ExitStack() as stack:
        bot = BotThread(synapse, db_url, store.clock).start()
        stack.callback(bot.close)
        agents = Agents(synapse, bot)
        stack.callback(agents.close)
        model: list[str] = []
        env = {**os.environ, "HAGGLER_MATRIX_PASSWORD": PASSWORD}
        if with_model:
            fake = stack.enter_context(FakeLLM())
            fake.script(*[status(400, "no such model")] * 20)  # a 400 is not retried: each call fails at once
            model = ["--llm-provider", "anthropic", "--llm-model", "fake-model", "--llm-base-url", fake.base]
            env["ANTHROPIC_API_KEY"] = "test-key"
        seller = synapse.register(unique("cli-seller"), PASSWORD)
        command = subprocess.Popen(
            [sys.executable, "-m", "haggler", "market", "agent", "--role", "seller", "--item",
             "electronics.gaming_console.nintendo_switch", "--price", "200", "--limit", "150", "--duration", "60",
             "--poll", "0.1", "--json", "--matrix", "--homeserver", synapse.url, "--user", seller.user_id,
             "--room", bot.room, "--bot", bot.user_id, *model], cwd=tmp_path, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=env)
        try:
            buyer = matrix_buyer(agents, store, limit=19000)
            result = buyer.run(60.0)
            out, err = command.communicate(timeout=90)
        finally:
            command.kill()
        assert command.returncode == 0, err
        if with_model:
            assert fake.requests and all(path == "/v1/messages" for path, _ in fake.requests)  # it asked the model
        printed = json.loads(out)
        assert printed["outcome"] == result.outcome == CONFIRMED and printed["deal"]["dealId"] == result.deal["dealId"]
        with bot.database.read() as conn:
            bound = conn.execute(select(market_agents.c.matrix_id)
                                 .where(market_agents.c.id == printed["agentId"])).scalar()
        assert bound == seller.user_id  # it spoke as its own Matrix user
