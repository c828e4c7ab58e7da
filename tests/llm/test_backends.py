"""The LLM backends with the real ``anthropic`` and ``openai`` SDK clients over real HTTP, against
a local fake provider (tests/support/fake_llm.py) scripted with good and hostile answers."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest
from pydantic import BaseModel, Field

from haggler.llm import (
    AnthropicBackend,
    Conversation,
    LLMBackend,
    LLMSetupError,
    Message,
    ModelUnavailable,
    OpenAIBackend,
    Prices,
    make_backend,
)
from tests.support.fake_llm import (
    INPUT_TOKENS,
    OUTPUT_TOKENS,
    FakeLLM,
    Reply,
    answer,
    garbage,
    slow,
    status,
    text,
)

PROVIDERS = ["anthropic", "openai"]
#: The client timeout of the case about a model too slow for it (whose reply takes 3x this: a
#: loaded machine only makes it later). Every other case answers at once but gets PATIENT, so
#: that a loaded machine cannot turn its 429 or valid answer into a timeout.
TIMEOUT = 0.5
PATIENT = 60.0


class Move(BaseModel):
    action: str = Field(pattern="^(offer|accept|walk_away)$")
    price_cents: int = Field(ge=0)
    message: str


GOOD = {"action": "offer", "price_cents": 1850, "message": "How about 18.50?"}
MISSING_FIELD = {"action": "offer", "message": "no price"}
SYSTEM = "You are a shopper."
MESSAGES = [Message("user", "The price is 20.00.")]


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def build(provider: str, fake: FakeLLM, **options: object) -> LLMBackend:
    base = fake.base if provider == "anthropic" else f"{fake.base}/v1"
    options = {"api_key": "test-key", "base_url": base, "timeout": PATIENT, "max_retries": 0,
               **options}
    return make_backend(provider, "fake-model", **options)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_valid_answer_parses_and_its_tokens_are_counted(provider: str, fake: FakeLLM) -> None:
    fake.script(answer(GOOD))
    conversation = Conversation()
    result = build(provider, fake).complete(SYSTEM, MESSAGES, Move, conversation)
    assert result.value == Move(**GOOD)
    assert (result.usage.input_tokens, result.usage.output_tokens) == (INPUT_TOKENS, OUTPUT_TOKENS)
    assert conversation.usage.total_tokens == INPUT_TOKENS + OUTPUT_TOKENS
    assert conversation.usage.calls == 1


def test_anthropic_forces_a_single_tool_with_the_models_schema(fake: FakeLLM) -> None:
    fake.script(answer(GOOD))
    build("anthropic", fake).complete(SYSTEM, MESSAGES, Move)
    [(path, body)] = fake.requests
    assert path == "/v1/messages"
    assert body["system"] == SYSTEM
    [tool] = body["tools"]
    assert tool["input_schema"] == Move.model_json_schema()
    assert body["tool_choice"] == {"type": "tool", "name": tool["name"]}


def test_openai_asks_for_a_json_schema_response_format(fake: FakeLLM) -> None:
    fake.script(answer(GOOD))
    build("openai", fake).complete(SYSTEM, MESSAGES, Move)
    [(path, body)] = fake.requests
    assert path == "/v1/chat/completions"
    assert body["messages"][0] == {"role": "system", "content": SYSTEM}
    assert body["response_format"]["json_schema"]["schema"] == Move.model_json_schema()
    assert "tools" not in body


def test_openai_falls_back_to_a_tool_call_when_response_format_is_refused(fake: FakeLLM) -> None:
    fake.script(status(400, "response_format json_schema is not supported"), answer(GOOD),
                answer(GOOD))
    backend = build("openai", fake)
    assert backend.complete(SYSTEM, MESSAGES, Move).value == Move(**GOOD)
    assert "response_format" in fake.requests[0][1]
    assert fake.requests[1][1]["tool_choice"]["function"]["name"] == "answer"
    backend.complete(SYSTEM, MESSAGES, Move)  # the fallback sticks: no more refused requests
    assert "tools" in fake.requests[2][1] and "response_format" not in fake.requests[2][1]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("bad", [answer("{not json"), answer(MISSING_FIELD), text("I offer 18.50"),
                                 answer({**GOOD, "action": "give it away"})],
                         ids=["malformed-json", "missing-field", "no-structure", "out-of-schema"])
def test_one_malformed_answer_is_retried(provider: str, bad: object, fake: FakeLLM) -> None:
    fake.script(bad, answer(GOOD))  # type: ignore[arg-type]
    conversation = Conversation()
    result = build(provider, fake).complete(SYSTEM, MESSAGES, Move, conversation)
    assert result.value == Move(**GOOD)
    assert len(fake.requests) == 2
    assert result.usage.calls == 2  # the wasted attempt's tokens count too
    assert conversation.usage.total_tokens == 2 * (INPUT_TOKENS + OUTPUT_TOKENS)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_two_malformed_answers_make_the_model_unavailable(provider: str, fake: FakeLLM) -> None:
    fake.script(answer("{not json"), answer(MISSING_FIELD), answer(GOOD))
    with pytest.raises(ModelUnavailable) as caught:
        build(provider, fake).complete(SYSTEM, MESSAGES, Move)
    assert caught.value.reason == "malformed"
    assert len(fake.requests) == 2 and fake.pending == 1


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("body", ["<html>bad gateway</html>", "[]", '{"hello": 1}',
                                  '{"content": 5, "choices": 5}'],
                         ids=["not-json", "a-list", "other-object", "wrong-types"])
def test_a_200_that_is_not_the_apis_shape_is_malformed_not_a_crash(provider: str, body: str,
                                                                   fake: FakeLLM) -> None:
    fake.script(garbage(body), garbage(body), answer(GOOD))
    with pytest.raises(ModelUnavailable) as caught:
        build(provider, fake).complete(SYSTEM, MESSAGES, Move)
    assert caught.value.reason == "malformed"
    assert len(fake.requests) == 2  # retried once, like any malformed answer


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(("reply", "reason"), [
    (status(429, "slow down"), "rate_limited"),
    (status(500), "server_error"),
    (status(503), "server_error"),
    (status(529, "overloaded"), "server_error"),
    (status(408), "timeout"),
    (status(401, "bad key"), "rejected"),
    (slow(TIMEOUT * 3, answer(GOOD)), "timeout"),
], ids=["429", "500", "503", "529", "408", "401", "timeout"])
def test_provider_failures_are_one_typed_error_quickly(provider: str, reply: Reply, reason: str,
                                                       fake: FakeLLM) -> None:
    fake.script(reply, answer(GOOD))
    backend = build(provider, fake, timeout=TIMEOUT if reply.delay else PATIENT)
    started = time.monotonic()
    with pytest.raises(ModelUnavailable) as caught:
        backend.complete(SYSTEM, MESSAGES, Move)
    assert caught.value.reason == reason
    assert len(fake.requests) == 1  # not retried: the deterministic agent takes the turn
    # Nor waited for: an SDK's retry backoff runs to seconds. Generous for a loaded machine; that the
    # slow reply was cut short by the timeout is the reason above, not this bound.
    assert time.monotonic() - started < 10


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unreachable_provider_is_a_typed_error(provider: str) -> None:
    from haggler.server.threaded import free_port
    backend = make_backend(provider, "fake-model", api_key="k", timeout=PATIENT, max_retries=0,
                           base_url=f"http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(ModelUnavailable) as caught:
        backend.complete(SYSTEM, MESSAGES, Move)
    assert caught.value.reason == "unreachable"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_token_budget_stops_further_calls(provider: str, fake: FakeLLM) -> None:
    per_call = INPUT_TOKENS + OUTPUT_TOKENS
    fake.script(answer(GOOD), answer(GOOD), answer(GOOD))
    conversation = Conversation(token_budget=2 * per_call)
    backend = build(provider, fake)
    backend.complete(SYSTEM, MESSAGES, Move, conversation)
    backend.complete(SYSTEM, MESSAGES, Move, conversation)
    assert conversation.exhausted and conversation.remaining == 0
    with pytest.raises(ModelUnavailable) as caught:
        backend.complete(SYSTEM, MESSAGES, Move, conversation)
    assert caught.value.reason == "budget_exhausted"
    assert len(fake.requests) == 2 and fake.pending == 1  # no request was sent


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_budget_left_caps_the_answers_length(provider: str, fake: FakeLLM) -> None:
    fake.script(answer(GOOD), answer(GOOD), answer(GOOD))
    budget = INPUT_TOKENS + OUTPUT_TOKENS + 5
    backend = build(provider, fake, max_tokens=300)
    backend.complete(SYSTEM, MESSAGES, Move, Conversation())
    conversation = Conversation(token_budget=budget)
    backend.complete(SYSTEM, MESSAGES, Move, conversation)
    backend.complete(SYSTEM, MESSAGES, Move, conversation)
    assert [body["max_tokens"] for _, body in fake.requests] == [300, budget, 5]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_budget_also_stops_the_malformed_retry(provider: str, fake: FakeLLM) -> None:
    fake.script(answer("{not json"), answer(GOOD))
    conversation = Conversation(token_budget=INPUT_TOKENS + OUTPUT_TOKENS)
    with pytest.raises(ModelUnavailable) as caught:
        build(provider, fake).complete(SYSTEM, MESSAGES, Move, conversation)
    assert caught.value.reason == "budget_exhausted"
    assert len(fake.requests) == 1


@pytest.mark.parametrize(("provider", "cls", "env"), [
    ("anthropic", AnthropicBackend, "ANTHROPIC_API_KEY"), ("openai", OpenAIBackend, "OPENAI_API_KEY")])
def test_a_missing_key_names_the_env_var_and_the_extra(provider: str, cls: type, env: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(env, raising=False)
    with pytest.raises(LLMSetupError) as caught:
        cls("fake-model")
    assert env in str(caught.value) and "haggler[llm]" in str(caught.value)
    monkeypatch.setenv(env, "from-env")
    cls("fake-model")  # the environment variable is enough


@pytest.mark.parametrize(("provider", "env"), [("anthropic", "ANTHROPIC_API_KEY"),
                                               ("openai", "OPENAI_API_KEY")])
def test_a_missing_sdk_names_the_extra_and_the_env_var(provider: str, env: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, provider, None)  # `import anthropic` now raises ImportError
    with pytest.raises(LLMSetupError) as caught:
        make_backend(provider, "fake-model", api_key="k")
    assert "pip install 'haggler[llm]'" in str(caught.value) and env in str(caught.value)


def test_an_unknown_provider_is_a_setup_error() -> None:
    with pytest.raises(LLMSetupError):
        make_backend("gemini", "x")


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cost_is_counted_in_integer_nano_dollars(provider: str, fake: FakeLLM) -> None:
    prices = Prices.per_million_usd(3, "0.15")
    assert prices == Prices(input=3000, output=150)
    fake.script(answer("{not json"), answer(GOOD))
    conversation = Conversation()
    result = build(provider, fake, prices=prices).complete(SYSTEM, MESSAGES, Move, conversation)
    per_call = INPUT_TOKENS * 3000 + OUTPUT_TOKENS * 150
    assert result.usage.cost_nanousd == conversation.usage.cost_nanousd == 2 * per_call


def test_haggler_llm_imports_without_the_sdks() -> None:
    import subprocess
    code = ("import sys; sys.modules['anthropic'] = None; sys.modules['openai'] = None\n"
            "import haggler.llm\n"
            "try:\n    haggler.llm.make_backend('openai', 'm', api_key='k')\n"
            "except haggler.llm.LLMSetupError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=60, check=True)
    assert "pip install 'haggler[llm]'" in result.stdout


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_provider_that_keeps_failing_is_rested_then_probed_again(provider: str, fake: FakeLLM) -> None:
    from haggler.llm.base import Breaker

    now = [100.0]
    backend = build(provider, fake)
    backend.breaker = Breaker(failures=3, rest=30.0, clock=lambda: now[0])
    fake.script(status(500), status(503), status(429), answer(GOOD))
    for _ in range(3):
        with pytest.raises(ModelUnavailable):
            backend.complete(SYSTEM, MESSAGES, Move)
    with pytest.raises(ModelUnavailable) as suspended:
        backend.complete(SYSTEM, MESSAGES, Move)
    assert suspended.value.reason == "suspended" and len(fake.requests) == 3  # nothing sent while resting
    now[0] += 31
    assert backend.complete(SYSTEM, MESSAGES, Move).value.price_cents == 1850  # the probe gets through
    fake.script(status(500), answer(GOOD))
    with pytest.raises(ModelUnavailable):
        backend.complete(SYSTEM, MESSAGES, Move)
    assert backend.complete(SYSTEM, MESSAGES, Move).value.price_cents == 1850  # one failure is no streak


def test_malformed_answers_do_not_rest_the_provider(fake: FakeLLM) -> None:
    backend = build("anthropic", fake)
    fake.script(*[answer("{bad")] * 6, answer(GOOD))
    for _ in range(3):
        with pytest.raises(ModelUnavailable) as exc:
            backend.complete(SYSTEM, MESSAGES, Move)
        assert exc.value.reason == "malformed"
    assert backend.complete(SYSTEM, MESSAGES, Move).value.action == "offer"
