"""``haggler serve --merchant llm-voice|llm``: the real command, with its model a local fake
provider reached through the real SDK, and the errors an operator sees when something is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from haggler.storage import chats as repo
from haggler.storage.database import open_database
from tests.support.fake_llm import INPUT_TOKENS, OUTPUT_TOKENS, FakeLLM, answer
from tests.support.servers import ProcessServer


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


def serve_fails(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    result = subprocess.run([sys.executable, "-m", "haggler", "serve", "--port", "1", *args], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60, env={**clean, **(env or {})})
    assert result.returncode == 2 and "Traceback" not in result.stderr
    return " ".join(result.stderr.replace("│", " ").split())


@pytest.mark.parametrize(("args", "needle"), [
    (("--merchant", "llm"), "--merchant llm needs --llm-provider and --llm-model"),
    (("--merchant", "llm-voice", "--llm-provider", "anthropic"), "needs both --llm-provider"),
    (("--llm-provider", "openai", "--llm-model", "m"), "need --merchant llm-voice or --merchant llm"),
    (("--merchant", "clever"), "unknown merchant mode 'clever'"),
    (("--merchant", "llm", "--llm-provider", "mistral", "--llm-model", "m"), "unknown LLM provider 'mistral'"),
    (("--merchant", "llm", "--llm-provider", "anthropic", "--llm-model", "m"), "ANTHROPIC_API_KEY"),
    (("--merchant", "llm", "--llm-provider", "openai", "--llm-model", "m"), "haggler[llm]"),
    (("--merchant-skill", "no-such-skill.md"), "cannot read the merchant skill"),
    (("--merchant", "llm", "--llm-provider", "openai", "--llm-model", "m", "--llm-prices", "3"),
     "--llm-prices takes two amounts in USD per million tokens"),
])
def test_serve_names_what_an_llm_merchant_is_missing(tmp_path: Path, args: tuple[str, ...], needle: str) -> None:
    assert needle in serve_fails(tmp_path, *args)


@pytest.mark.slow
def test_serve_runs_a_voiced_merchant_on_an_openai_compatible_server(tmp_path: Path, fake: FakeLLM) -> None:
    skill = tmp_path / "SKILL.md"
    skill.write_text("---\nname: cobalt-merchant\ndescription: \"Dana, warm and brief\"\n---\nBe warm.\n")
    fake.script(answer({"message": "That's well under what it sells for — could you come up a little?"}))
    with ProcessServer("--merchant", "llm-voice", "--llm-provider", "openai", "--llm-model", "local-llama",
                       "--llm-base-url", f"{fake.base}/v1", "--merchant-skill", str(skill), "--llm-prices", "3,15",
                       cwd=tmp_path, env={"OPENAI_API_KEY": "ollama"}) as server:
        descriptor = httpx.get(f"{server.base}/negotiate.json").json()
        assert descriptor["merchant_skill"] == {"name": "cobalt-merchant", "description": "Dana, warm and brief"}
        start = httpx.get(f"{server.base}/api/store/chat/start", params={"product_id": "aerion-v12-cordless"}).json()
        reply = httpx.get(start["next"].split("?")[0], params={"message": "Would you take 200?"}).json()
    assert reply["message"] == "That's well under what it sells for — could you come up a little?"
    assert fake.requests[0][1]["model"] == "local-llama"
    db = open_database(f"sqlite:///{tmp_path / 'haggler.db'}")
    try:
        with db.read() as conn:
            usage = repo.model_usage(conn, start["session_id"])
    finally:
        db.dispose()
    # $3 and $15 per million tokens, in nano-dollars: 11 input and 7 output tokens
    assert (usage.calls, usage.cost_nanousd) == (1, INPUT_TOKENS * 3_000 + OUTPUT_TOKENS * 15_000)
