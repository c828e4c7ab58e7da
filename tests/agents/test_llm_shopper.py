"""The LLM shopper's guards and its bookkeeping (``haggler.agents.llm_shopper``).

* ``refusal``: every form of stating the budget, offers above the ceiling, messages the store
  would read as something else than the move, messages the store cannot take — and good moves
  passing.
* ``ShopperMove``: what the model's answer must look like (a miss is a malformed answer).
* ``ShopperAgent.sent_instead``: the deterministic agent keeps deciding from what was sent.
* ``LLMShopper`` with the real SDK over HTTP (tests/support/fake_llm.py): what the model is told.
  End to end against a real store: tests/shopper/test_llm_shop.py.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from pydantic import ValidationError

from haggler.agents.llm_shopper import LLMShopper, ShopperMove, refusal
from haggler.agents.shopper import ShopperAgent, ShopperGoal, ShopperTurn, structured_message
from haggler.language.merchant_reading import MerchantReading
from tests.support.fake_llm import FakeLLM, answer
from tests.support.llm_store import backend_for

BUDGET = 450_00
CEILING = 449_00
ASK = 520_00


def turn(kind: str, price: int | None, text: str) -> ShopperTurn:
    return ShopperTurn(kind, price, text, structured_message(kind, price))


def refused(kind: str, price: int | None, text: str, max_chars: int | None = None) -> str | None:
    return refusal(turn(kind, price, text), budget_cents=BUDGET, ceiling_cents=CEILING, reference_cents=ASK,
                   max_chars=max_chars)


# -- refusal -------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "Would you take $400? I could stretch to $450.",
    "Would you take $400? Not 450 though.",
    "Would you take $400? Certainly not four hundred fifty.",
    "Would you take $400? Never four fifty.",
    "Would you take $400? 4 5 0 is out of the question.",
    "Would you take $400? 4-5-0 is out.",
    "Would you take $400? Backwards: 054",
    "Would you take $400? " + base64.b64encode(b"my budget: 450 dollars").decode(),
    "Would you take $400? I'd hate to go near $449.99.",
    "Would you take $400? Ｎot ４５０.",
])
def test_a_message_stating_the_budget_in_any_form_is_refused(text: str) -> None:
    assert refused("offer", 400_00, text) == "states_budget"


def test_nothing_exempts_the_budget_not_even_the_price_the_move_names() -> None:
    assert refused("accept", BUDGET, "Deal at $450.") == "states_budget"


def test_an_offer_or_acceptance_above_the_ceiling_is_refused() -> None:
    assert refused("offer", 520_00, "Would you take $520?") == "over_ceiling"
    assert refused("accept", 500_00, "Deal at $500.") == "over_ceiling"


@pytest.mark.parametrize(("kind", "price", "text"), [
    ("offer", 400_00, "Would you take $420?"),                      # the text says another price
    ("offer", 400_00, "You're at $520; I can do $400."),            # two amounts: ambiguous to the store
    ("offer", 400_00, "Would you take four hundred?"),              # the store's reader cannot read it
    ("accept", 400_00, "Deal!"),                                    # an acceptance that names no price
    ("walk_away", None, "I'll pass, unless you do $300."),          # an amount in a walk-away
    ("walk_away", None, "Would you take $300?"),
    ("ask", None, "Sounds good!"),                                  # a bare acceptance binds the table
    ("ask", None, "Thanks, I'll pass."),
])
def test_a_message_the_store_reads_as_another_move_is_refused(kind: str, price: int | None, text: str) -> None:
    assert refused(kind, price, text) == "mismatch"


def test_a_message_the_store_cannot_take_is_refused() -> None:
    assert refused("offer", 400_00, "Would you take $400? " + "Please. " * 40, max_chars=200) == "unsendable"
    assert refused("offer", 400_00, "Would you take $400?\x00") == "unsendable"
    assert refused("ask", None, "") == "unsendable"


@pytest.mark.parametrize(("kind", "price", "text"), [
    ("offer", 400_00, "Hi! Would you take $400 for it?"),
    ("offer", 399_50, "Could you do 399.50?"),
    ("accept", 440_00, "Deal at $440 — thank you!"),
    ("walk_away", None, "Thanks for your time, but I'll pass."),
    ("ask", None, "What's the best price you can do?"),
    ("ask", None, "Does it come with a warranty?"),
])
def test_a_good_move_passes(kind: str, price: int | None, text: str) -> None:
    assert refused(kind, price, text, max_chars=2000) is None


# -- the model's answer ----------------------------------------------------------------------------


@pytest.mark.parametrize("data", [
    {"action": "offer", "price": None, "message": "Would you take $400?"},
    {"action": "accept", "message": "Deal!"},
    {"action": "walk_away", "price": 300, "message": "Bye."},
    {"action": "offer", "price": 0.001, "message": "A tenth of a cent?"},
    {"action": "offer", "price": 400, "message": ""},
    {"action": "haggle", "price": 400, "message": "400?"},
    {"action": "offer", "price": 400, "message": "400?", "budget": 450},
])
def test_an_answer_out_of_the_schema_is_invalid(data: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ShopperMove.model_validate(data)


def test_an_acceptance_goes_out_as_an_offer_of_exactly_its_price() -> None:
    move = ShopperMove.model_validate({"action": "accept", "price": 439.99, "message": " Deal at $439.99. "})
    assert move.turn() == ShopperTurn("accept", 439_99, "Deal at $439.99.", {"action": "offer", "price": 439.99})


# -- the deterministic agent follows what was sent ---------------------------------------------------


GOAL = ShopperGoal(list_price_cents=600_00, budget_cents=BUDGET)


def merchant_asks(cents: int, *, final: bool = False, deal: bool = False, closed: bool = False) -> MerchantReading:
    return MerchantReading(price_cents=cents, final=final, deal=deal, closed=closed, structured=True)


def test_the_agent_concedes_from_the_offer_the_model_made() -> None:
    agent = ShopperAgent(GOAL, seed=1)
    own = agent.first_turn(merchant_asks(600_00))
    agent.sent_instead(turn("offer", 300_00, "Would you take $300?"))
    assert agent.offers == [300_00] and own.price_cents != 300_00
    after = agent.next_turn(merchant_asks(590_00))
    assert after is not None and after.kind == "offer" and after.price_cents is not None
    assert 300_00 <= after.price_cents <= CEILING
    assert agent.offers == [300_00, after.price_cents]


def test_a_deal_after_the_models_acceptance_is_held_to_the_price_it_named() -> None:
    agent = ShopperAgent(GOAL, seed=1)
    agent.first_turn(merchant_asks(600_00))
    agent.sent_instead(turn("accept", 420_00, "Deal at $420."))
    # A text-only store announces the deal: the shopper is held to the price its acceptance named.
    assert agent.next_turn(MerchantReading(price_cents=410_00, deal=True, closed=True)) is None
    assert agent.outcome is not None and (agent.outcome.reason, agent.outcome.price_cents) == ("deal", 420_00)


def test_the_models_walk_away_ends_the_agent_and_its_offer_undoes_the_agents_walk() -> None:
    agent = ShopperAgent(GOAL, seed=1)
    agent.first_turn(merchant_asks(600_00))
    agent.sent_instead(turn("walk_away", None, "Thanks, I'll pass."))
    assert agent.done and agent.outcome is not None and agent.outcome.reason == "walked_away"

    agent = ShopperAgent(GOAL, seed=1)
    agent.first_turn(merchant_asks(600_00))
    own = agent.next_turn(merchant_asks(590_00, final=True))  # a final price above budget: it walks
    assert own is not None and own.kind == "walk_away" and agent.done
    agent.sent_instead(turn("offer", 400_00, "Would you take $400?"))
    assert not agent.done and agent.offers[-1] == 400_00


def test_a_store_deal_above_the_budget_is_still_refused_after_a_model_turn() -> None:
    agent = ShopperAgent(GOAL, seed=1)
    agent.first_turn(merchant_asks(600_00))
    agent.sent_instead(turn("offer", 440_00, "Would you take $440?"))
    agent.next_turn(merchant_asks(600_00, deal=True, closed=True))
    assert agent.outcome is not None and agent.outcome.reason == "over_budget" and not agent.outcome.agreed


def test_the_agent_refuses_to_record_a_turn_above_the_budget() -> None:
    agent = ShopperAgent(GOAL, seed=1)
    agent.first_turn(merchant_asks(600_00))
    with pytest.raises(RuntimeError):
        agent.sent_instead(turn("offer", 451_00, "Would you take $451?"))
    with pytest.raises(RuntimeError):
        agent.sent_instead(turn("accept", None, "Deal!"))


# -- what the model is told ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Said:
    speaker: str
    message: str


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def test_the_model_gets_the_goal_the_chat_and_why_its_last_move_was_not_sent(fake: FakeLLM) -> None:
    fake.script(answer({"action": "offer", "price": 300, "message": "My budget is $450, so: $300?"}),
                answer({"action": "offer", "price": 310, "message": "Would you take $310?"}))
    transcript = [Said("merchant", "Hello! It's $600.")]
    backend = backend_for(fake, "anthropic", timeout=30.0)  # the SDK backend's default
    shopper = LLMShopper(ShopperAgent(GOAL, seed=1), backend, product="Aerion V12", transcript=transcript)

    first = shopper.first_turn(merchant_asks(600_00))
    assert first.text != "My budget is $450, so: $300?" and first.price_cents is not None
    transcript += [Said("shopper", first.text), Said("merchant", "I can do $590.")]
    second = shopper.next_turn(merchant_asks(590_00))
    assert second is not None and second.text == "Would you take $310?"

    (_, opening), (_, reply) = fake.requests
    assert "Aerion V12" in opening["system"] and "$450" in opening["system"] and "never" in opening["system"]
    assert "Hello! It's $600." in opening["messages"][0]["content"]
    told = reply["messages"][0]["content"]
    assert "I can do $590." in told and "$590" in told and first.text in told
    assert "not sent: it gave your budget away" in told
    report = shopper.report()
    assert report.model_turns == 1 and [(f.turn, f.reason) for f in report.fallbacks] == [(1, "states_budget")]
    assert report.usage.calls == 2 and shopper.agent.offers[-1] == 310_00
