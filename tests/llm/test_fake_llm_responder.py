"""tests/support/fake_llm.py's responder: a stand-in model answering whatever is not scripted,
through the real SDK clients (the red-team benchmark puts the gullible model there)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from haggler.llm import LLMBackend, Message, ModelUnavailable, make_backend
from tests.support.fake_llm import FakeLLM, Reply, answer, status

PROVIDERS = ["anthropic", "openai"]


class Wording(BaseModel):
    message: str


def echo_system(path: str, body: dict[str, Any]) -> Reply:
    """Answers with the system prompt it was sent, whichever API carried it."""
    if path.endswith("/messages"):
        return answer({"message": body["system"]})
    return answer({"message": body["messages"][0]["content"]})


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def build(provider: str, fake: FakeLLM, **options: object) -> LLMBackend:
    base = fake.base if provider == "anthropic" else f"{fake.base}/v1"
    return make_backend(provider, "fake-model", api_key="k", base_url=base, timeout=2.0, max_retries=0,
                        **options)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_responder_answers_when_nothing_is_scripted(provider: str, fake: FakeLLM) -> None:
    fake.respond_with(echo_system)
    result = build(provider, fake).complete("SYSTEM TEXT", [Message("user", "hi")], Wording)
    assert result.value.message == "SYSTEM TEXT"
    assert len(fake.requests) == 1 and fake.responder_errors == []


def test_the_responder_reads_openai_tool_requests_too(fake: FakeLLM) -> None:
    fake.respond_with(echo_system)
    result = build("openai", fake, structured="tools").complete("S", [Message("user", "hi")], Wording)
    assert result.value.message == "S"
    assert "tools" in fake.requests[0][1]


def test_scripted_replies_go_first_and_script_keeps_the_responder(fake: FakeLLM) -> None:
    fake.respond_with(echo_system)
    fake.script(answer({"message": "scripted"}))
    backend = build("anthropic", fake)
    assert backend.complete("S", [Message("user", "hi")], Wording).value.message == "scripted"
    assert backend.complete("S", [Message("user", "hi")], Wording).value.message == "S"
    fake.script(status(429, "slow down"))  # a provider error in front of the responder
    with pytest.raises(ModelUnavailable) as raised:
        backend.complete("S", [Message("user", "hi")], Wording)
    assert raised.value.reason == "rate_limited"
    assert backend.complete("S", [Message("user", "hi")], Wording).value.message == "S"


def test_without_a_responder_an_empty_queue_is_a_server_error(fake: FakeLLM) -> None:
    fake.respond_with(echo_system)
    fake.respond_with(None)
    with pytest.raises(ModelUnavailable) as raised:
        build("anthropic", fake).complete("S", [Message("user", "hi")], Wording)
    assert raised.value.reason == "server_error"


def test_a_responder_that_raises_is_a_500_and_its_error_is_kept(fake: FakeLLM) -> None:
    def broken(path: str, body: dict[str, Any]) -> Reply:
        raise KeyError("no FLOOR line")

    fake.respond_with(broken)
    with pytest.raises(ModelUnavailable) as raised:
        build("anthropic", fake).complete("S", [Message("user", "hi")], Wording)
    assert raised.value.reason == "server_error"
    assert [type(e) for e in fake.responder_errors] == [KeyError]
