"""The LLM shopper end to end: a real store process, the real ``anthropic`` and ``openai`` SDKs
over HTTP to a scripted provider (tests/support/fake_llm.py), the runner, ``haggler shop`` and
``haggler mcp``.

Every hostile answer — an offer above the budget, the budget stated in digits, words or spaced
digits, a message saying another price than the move, malformed JSON twice, an answer out of the
schema twice, a timeout, a 429, a 500, the token budget spent — is checked against the store's own
stored history: no offer above the budget, the budget in no form in any message, and the turns the
model could not write are exactly the deterministic agent's.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

import haggler
from haggler.language.leaks import reveals
from haggler.language.parse import parse_shopper_turn
from haggler.shopper.client import AsyncNegotiateClient
from haggler.shopper.negotiation import NegotiationResult, goal_for, listing_for, run_negotiation
from tests.support.fake_llm import INPUT_TOKENS, OUTPUT_TOKENS, FakeLLM, Reply, answer, slow, status
from tests.support.llm_store import backend_for
from tests.support.servers import ProcessServer

PRODUCT = "aerion-v9-refurb"  # listed at $379
BUDGET = 360
PROVIDERS = ["anthropic", "openai"]
#: Enough scripted replies for every turn of a negotiation, two calls a turn.
EVERY_TURN = 45
SRC = str(Path(haggler.__file__).resolve().parents[1])

ASK = {"action": "ask", "price": None, "message": "What's the best you can do on it?"}
OFFER_300 = {"action": "offer", "price": 300, "message": "Would you take $300?"}
WALK = {"action": "walk_away", "price": None, "message": "Thanks for your time, but I'll pass."}
ACCEPT_LIST = {"action": "accept", "price": 379, "message": "Deal at $379."}


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessServer]:
    """A store with a fixed seed: every chat goes the same way for the same shopper turns."""
    workdir = tmp_path_factory.mktemp("llm-shop-store")
    with ProcessServer("--max-chat-starts-per-hour", "1000", "--seed", "5", cwd=workdir) as server:
        yield server


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def negotiate(store: ProcessServer, *, budget: float = BUDGET, backend: Any = None,
              token_budget: int | None = 40_000, structured: bool = False) -> NegotiationResult:
    async def go() -> NegotiationResult:
        async with AsyncNegotiateClient() as client:
            info = await client.discover(store.base)
            goal = goal_for(listing_for(info, PRODUCT), budget, None, None)
            return await run_negotiation(client, info, PRODUCT, goal, seed=1, structured=structured,
                                         backend=backend, token_budget=token_budget)

    return asyncio.run(go())


def haggle(store: ProcessServer, fake: FakeLLM, provider: str, *replies: Reply, timeout: float = 5.0,
           **options: Any) -> NegotiationResult:
    fake.script(*replies)
    return negotiate(store, backend=backend_for(fake, provider, timeout=timeout), **options)


@pytest.fixture(scope="module")
def deterministic(store: ProcessServer) -> list[str]:
    """What the deterministic agent says in this negotiation, turn by turn."""
    return shopper_lines(negotiate(store))


def shopper_lines(result: NegotiationResult) -> list[str]:
    return [line.message for line in result.transcript if line.speaker == "shopper"]


def stored(store: ProcessServer, result: NegotiationResult) -> dict[str, Any]:
    return httpx.get(f"{store.base}/api/store/chat/{result.session_id}", timeout=10).json()


def assert_safe(store: ProcessServer, result: NegotiationResult, budget: float = BUDGET) -> list[str]:
    """What the store stored is what was sent; no message states the budget in any form or
    offers above it; no deal is above it. Returns the shopper's messages as stored."""
    budget_cents = round(budget * 100)
    history = stored(store, result)
    said = [entry["message"] for entry in history["history"] if entry["speaker"] == "shopper"]
    assert said == shopper_lines(result) and said
    for message in said:
        assert reveals(message, [budget_cents]) is None, message
        amount = parse_shopper_turn(message).amount_cents
        assert amount is None or amount < budget_cents, message
    if "deal" in history:
        assert round(history["deal"]["price"] * 100) <= budget_cents
    return said


# -- the model's turns, sent as written ---------------------------------------------------------------


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_models_turns_are_sent_verbatim(store: ProcessServer, fake: FakeLLM, provider: str) -> None:
    result = haggle(store, fake, provider, answer(ASK), answer(OFFER_300), answer(WALK))
    said = assert_safe(store, result)
    assert said == [ASK["message"], OFFER_300["message"], WALK["message"]]
    assert result.outcome == "walked_away"
    assert result.llm is not None and result.llm.model_turns == 3 and result.llm.fallbacks == ()
    assert (result.llm.usage.calls, result.llm.usage.total_tokens) == (3, 3 * (INPUT_TOKENS + OUTPUT_TOKENS))
    assert result.to_json()["llm"]["model_turns"] == 3


@pytest.mark.parametrize("structured", [False, True])
def test_the_models_acceptance_names_its_price_and_makes_the_deal(store: ProcessServer, fake: FakeLLM,
                                                                 structured: bool) -> None:
    result = haggle(store, fake, "anthropic", answer(ASK), answer(ACCEPT_LIST), budget=400, structured=structured)
    said = assert_safe(store, result, budget=400)
    if structured:
        assert [json.loads(m) for m in said] == [{"action": "best_price"}, {"action": "offer", "price": 379}]
    else:
        assert said == [ASK["message"], ACCEPT_LIST["message"]]
    assert (result.outcome, result.price_cents) == ("deal", 379_00) and result.checkout_url


# -- hostile answers: the deterministic agent takes the turns -------------------------------------------


HOSTILE = {
    "over_ceiling": answer({"action": "offer", "price": 370, "message": "Would you take $370?"}),
    "states_budget": answer({"action": "offer", "price": 300, "message": "Would you take $300? I can't go past $360."}),
    "states_budget_in_words": answer({"action": "offer", "price": 300,
                                      "message": "Would you take $300? Not a cent over three hundred sixty."}),
    "states_budget_in_spaced_digits": answer({"action": "offer", "price": 300,
                                              "message": "Would you take $300? 3 6 0 is my line."}),
    "mismatch": answer({"action": "offer", "price": 300, "message": "I'll pay $900 for it."}),
    "malformed": answer("{'action': 'offer', price: 300"),
    "out_of_schema": answer({"action": "offer", "message": "Would you take $300?"}),
    "rate_limited": status(429),
    "server_error": status(500),
}
REASON = {"states_budget_in_words": "states_budget", "states_budget_in_spaced_digits": "states_budget",
          "out_of_schema": "malformed"}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_a_hostile_answer_every_turn_leaves_the_negotiation_to_the_deterministic_agent(
        store: ProcessServer, fake: FakeLLM, deterministic: list[str], provider: str, case: str) -> None:
    result = haggle(store, fake, provider, *[HOSTILE[case]] * EVERY_TURN)
    said = assert_safe(store, result)
    assert said == deterministic
    assert result.llm is not None and result.llm.model_turns == 0
    reason = REASON.get(case, case)
    assert [f.turn for f in result.llm.fallbacks] == list(range(1, result.turns + 1))
    if case in ("rate_limited", "server_error"):
        # A provider that is down three times in a row is rested (llm/base.py Breaker): the later
        # turns fall back at once, nothing sent.
        assert [f.reason for f in result.llm.fallbacks] == [reason] * 3 + ["suspended"] * (result.turns - 3)
        assert len(fake.requests) == 3
        return
    assert {f.reason for f in result.llm.fallbacks} == {reason}
    calls_a_turn = 2 if reason == "malformed" else 1  # one retry of a malformed answer
    assert len(fake.requests) == calls_a_turn * result.turns


def test_a_model_too_slow_for_its_timeout_leaves_the_turn_to_the_deterministic_agent(
        store: ProcessServer, fake: FakeLLM, deterministic: list[str]) -> None:
    result = haggle(store, fake, "openai", slow(3, answer(OFFER_300)), answer(ASK), timeout=0.5)
    said = assert_safe(store, result)
    assert said[0] == deterministic[0] != OFFER_300["message"]
    assert said[1] == ASK["message"]
    assert result.llm is not None and result.llm.fallbacks[0].reason == "timeout"
    assert result.llm.fallbacks[0].turn == 1 and result.llm.model_turns == 1


def test_a_spent_token_budget_ends_in_the_deterministic_agent_not_an_error(
        store: ProcessServer, fake: FakeLLM) -> None:
    per_call = INPUT_TOKENS + OUTPUT_TOKENS
    result = haggle(store, fake, "anthropic", *[answer(ASK), answer(OFFER_300)] * 10, token_budget=2 * per_call - 1)
    said = assert_safe(store, result)
    assert said[:2] == [ASK["message"], OFFER_300["message"]] and len(said) > 2
    assert len(fake.requests) == 2  # nothing is asked of the model once the budget is spent
    assert result.llm is not None and result.llm.usage.total_tokens == 2 * per_call
    assert {f.reason for f in result.llm.fallbacks} == {"budget_exhausted"}
    assert result.outcome in ("deal", "walked_away", "gave_up", "merchant_closed")


# -- haggler shop and haggler mcp ------------------------------------------------------------------------


def run_haggler(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    return subprocess.run([sys.executable, "-m", "haggler", *args], capture_output=True, text=True, timeout=120,
                          env={**clean, "PYTHONPATH": SRC, **env})


def test_haggler_shop_on_a_model(store: ProcessServer, fake: FakeLLM) -> None:
    fake.script(answer(ASK), answer(ACCEPT_LIST))
    result = run_haggler("shop", store.base, "--product", PRODUCT, "--budget", "400", "--json",
                         "--llm-provider", "openai", "--llm-model", "fake-model", "--llm-base-url", f"{fake.base}/v1",
                         "--llm-timeout", "5", OPENAI_API_KEY="test-key")
    assert result.returncode == 0, result.stderr
    outcome = json.loads(result.stdout)
    assert (outcome["outcome"], outcome["price"]) == ("deal", 379)
    said = [line["message"] for line in outcome["transcript"] if line["speaker"] == "shopper"]
    assert said == [ASK["message"], ACCEPT_LIST["message"]]
    assert outcome["llm"] == {"provider": "openai", "model": "fake-model", "input_tokens": 2 * INPUT_TOKENS,
                              "output_tokens": 2 * OUTPUT_TOKENS, "calls": 2, "cost_nanousd": 0,
                              "model_turns": 2, "fallbacks": []}


def test_haggler_shop_shows_what_the_model_did(store: ProcessServer, fake: FakeLLM) -> None:
    fake.script(answer(ASK), answer(ACCEPT_LIST))
    result = run_haggler("shop", store.base, "--product", PRODUCT, "--budget", "400",
                         "--llm-provider", "anthropic", "--llm-model", "fake-model", "--llm-base-url", fake.base,
                         ANTHROPIC_API_KEY="test-key")
    assert result.returncode == 0, result.stderr
    assert "fake-model: wrote 2 turns" in result.stdout and "rule-based turns" in result.stdout


@pytest.mark.parametrize(("options", "needles"), [
    (("--llm-provider", "anthropic", "--llm-model", "m"), ("ANTHROPIC_API_KEY", "haggler[llm]")),
    (("--llm-provider", "openai", "--llm-model", "m"), ("OPENAI_API_KEY", "haggler[llm]")),
    (("--llm-provider", "anthropic"), ("--llm-provider", "--llm-model")),
])
def test_haggler_shop_without_a_key_or_a_model_says_what_is_missing(options: tuple[str, ...],
                                                                     needles: tuple[str, ...]) -> None:
    result = run_haggler("shop", "http://127.0.0.1:1", "--product", PRODUCT, "--budget", "400", *options)
    assert result.returncode == 2
    assert all(needle in result.stderr for needle in needles), result.stderr
    assert "Traceback" not in result.stderr


def test_haggler_mcp_negotiate_runs_on_the_model(store: ProcessServer, fake: FakeLLM) -> None:
    fake.script(answer(ASK), answer(ACCEPT_LIST))
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "haggler", "mcp", "--allow-private", "--llm-provider", "anthropic", "--llm-model", "fake-model",
              "--llm-base-url", fake.base],
        env={"PYTHONPATH": SRC, "ANTHROPIC_API_KEY": "test-key"})

    async def go() -> Any:
        async with Client(server) as client:
            return await client.call_tool("negotiate", {"store": store.base, "product_id": PRODUCT, "budget": 400})

    called = asyncio.run(go())
    assert not called.is_error, called.content
    result = called.structured_content or json.loads(called.content[0].text)
    result = result.get("result", result)
    assert (result["outcome"], result["price"]) == ("deal", 379)
    assert [line["message"] for line in result["transcript"] if line["speaker"] == "shopper"] == \
        [ASK["message"], ACCEPT_LIST["message"]]
    assert result["llm"]["model_turns"] == 2 and result["llm"]["provider"] == "anthropic"
