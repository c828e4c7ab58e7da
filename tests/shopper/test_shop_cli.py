"""`haggler shop` and the negotiation runner, against a real store process."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from haggler.cli import parse_values
from haggler.money import format_money
from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.shopper.client import AsyncNegotiateClient
from haggler.shopper.negotiation import goal_for, listing_for, run_negotiation

try:
    from tests.support.servers import ProcessServer, ThreadedServer
except ImportError:  # pragma: no cover
    from support.servers import ProcessServer, ThreadedServer  # type: ignore[no-redef]


def shop(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "haggler", "shop", *args], capture_output=True, text=True,
                          input=stdin, timeout=120)


@pytest.fixture(scope="module")
def store_process(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("shop-store")
    with ProcessServer("--max-chat-starts-per-hour", "1000", "--seed", "5", cwd=workdir) as server:
        yield server


def test_shop_json_reports_a_deal_within_budget(store_process):
    result = shop(store_process.base, "--product", "stillair-p400", "--budget", "540", "--values", "shipping=30",
                  "--json", "--seed", "1")
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["outcome"] == "deal"
    assert 500 <= outcome["price"] <= 540
    assert outcome["saving"] == pytest.approx(outcome["list_price"] - outcome["price"])
    assert outcome["protocol"] == "nash.v1"  # found at /nash.json
    assert outcome["checkout_url"] == f"{store_process.base}/checkout/{outcome['deal_id']}"
    shopper = [line["message"] for line in outcome["transcript"] if line["speaker"] == "shopper"]
    assert len(shopper) == outcome["turns"] and not any("540" in line for line in shopper)


def test_shop_walks_away_when_the_store_will_not_come_under_budget(store_process):
    result = shop(store_process.base, "--product", "stillair-p400", "--budget", "300", "--json")
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert outcome["outcome"] == "walked_away" and outcome["price"] is None


def test_shop_shows_the_conversation_and_a_summary(store_process):
    result = shop(store_process.base, "--product", "aerion-v12-cordless", "--budget", "640")
    assert result.returncode == 0, result.stderr
    assert "Dana Okafor:" in result.stdout and "you:" in result.stdout
    assert "outcome" in result.stdout and "saving vs list" in result.stdout
    assert "protocol" in result.stdout and "nash.v1" in result.stdout  # the version found, in the summary


def test_shop_interactive_uses_the_persons_words(store_process):
    result = shop(store_process.base, "--product", "aerion-v12-cordless", "--budget", "640", "--interactive",
                  stdin="\nno thanks, bye\n")
    assert result.returncode == 0, result.stderr
    assert "your turn>" in result.stdout
    assert "you: no thanks, bye" in result.stdout
    assert "walked away" in result.stdout


def test_shop_errors_are_clear(store_process):
    result = shop(store_process.base, "--product", "nope", "--budget", "100")
    assert result.returncode == 2 and "does not list 'nope'" in result.stderr
    result = shop(store_process.base, "--product", "stillair-p400", "--budget", "100", "--values", "shipping")
    assert result.returncode == 2 and "keyword=amount" in result.stderr
    result = shop("http://127.0.0.1:1", "--product", "x", "--budget", "100")
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_parse_values():
    assert parse_values("shipping=30, battery=80.5") == {"shipping": 30.0, "battery": 80.5}
    assert parse_values(None) == {}
    with pytest.raises(ValueError):
        parse_values("shipping=lots")


def test_runner_haggles_by_text_and_by_structure_with_the_same_result(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=50), seed=3)
    product = store.catalog.products[0]

    async def go(structured: bool):
        async with AsyncNegotiateClient() as client:
            info = await client.discover(store.base)
            goal = goal_for(listing_for(info, product.id), 640, None, {"battery": 80})
            return await run_negotiation(client, info, product.id, goal, seed=9, structured=structured)

    text, structured = asyncio.run(go(False)), asyncio.run(go(True))
    assert text.outcome == structured.outcome == "deal"
    assert text.price_cents == structured.price_cents <= 64000
    assert format_money(text.price_cents) in text.transcript[-1].message


def test_the_runner_surfaces_the_closing_replys_top_level_checkout_url():
    """A nash.v1 store names where to pay at the top of the closing reply; that is the link the
    result gives, even when the structured deal carries another (here: the store's old page)."""
    def descriptor(request: Request) -> JSONResponse:
        base = str(request.base_url).rstrip("/")
        return JSONResponse({
            "nash_protocol": "nash.v1", "store": {"name": "Tiny"},
            "endpoints": {"start_chat": {"method": "GET", "url_template": f"{base}/start?product_id={{product_id}}"},
                          "send_message": {"method": "GET",
                                           "url_template": f"{base}/chat/{{session_id}}/say?message={{url_encoded_message}}"},
                          "read_history": {"method": "GET", "url_template": f"{base}/chat/{{session_id}}"}},
            "products": [{"id": "p1", "name": "Widget", "list_price": 100, "currency": "USD"}],
            "limits": {"max_messages_per_chat": 10, "currency": "USD"}})

    def start(request: Request) -> JSONResponse:
        return JSONResponse({"session_id": "s1", "greeting": "Hello! The widget is $100.",
                             "next": f"{str(request.base_url).rstrip('/')}/chat/s1/say?message={{url_encoded_message}}",
                             "offer": {"price": 100, "currency": "USD", "extras": []}}, status_code=201)

    def say(request: Request) -> JSONResponse:
        return JSONResponse({"message": "Done: $90, deal.", "closed": True, "next": None,
                             "deal": {"id": "d1", "price": 90, "currency": "USD", "extras": [],
                                      "checkout_url": "https://old.example/checkout/d1"},
                             "checkout_url": "https://pay.example/checkout/d1"})

    async def go():
        async with AsyncNegotiateClient() as client:
            info = await client.discover(server.base)
            goal = goal_for(listing_for(info, "p1"), 95, None, None)
            return await run_negotiation(client, info, "p1", goal, seed=1)

    app = Starlette(routes=[Route("/nash.json", descriptor), Route("/start", start), Route("/chat/s1/say", say)])
    with ThreadedServer(app) as server:
        result = asyncio.run(go())
    assert (result.outcome, result.protocol, result.price_cents) == ("deal", "nash.v1", 9000)
    assert result.checkout_url == result.to_json()["checkout_url"] == "https://pay.example/checkout/d1"
