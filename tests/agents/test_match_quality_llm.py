"""``benchmarks/match_quality.py --negotiator``: the LLM-backed match agent measured on the TUNING
pairs (a few of them) with scripted models behind the fake provider, and the real-model path with
the fake provider standing in for an OpenAI-compatible server (issue 30)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.fake_llm import FakeLLM
from tests.support.match_models import gullible

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "match_quality.py"


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    done = subprocess.run([sys.executable, str(BENCHMARK), "--pairs", "tuning", *args], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **(env or {})})
    lines = done.stdout.splitlines()
    assert lines and lines[-1].startswith("RESULT "), done.stdout + done.stderr
    return done.returncode, done.stdout, dict(item.split("=", 1) for item in lines[-1].split()[1:])


def test_scripted_models_are_measured_each_apart_and_the_malformed_one_is_the_system() -> None:
    code, out, result = run("--negotiator", "llm-scripted", "--limit", "4")
    assert code == 0, out
    for name in ("tune_v2", "old_labelled"):
        # (a) no usable answer ever: every turn is the system negotiator's, the figures its figures.
        assert result[f"malformed_{name}_accuracy"] == result[f"system_{name}_accuracy"]
        assert result[f"malformed_{name}_model_turns"] == "0"
        assert result[f"malformed_{name}_fallbacks_malformed"] == result[f"malformed_{name}_turns"] != "0"
        assert result[f"malformed_{name}_differs_from_system"] == "0"
        # (b) gullible: the model takes turns; the only ones taken from it are accepts over a condition.
        assert int(result[f"gullible_{name}_model_turns"]) > 0
        assert {k for k in result if k.startswith(f"gullible_{name}_fallbacks_")} <= {
            f"gullible_{name}_fallbacks_unmet_condition"}
        assert result[f"gullible_{name}_recall_good"] == "1.0000"
        # (c) rejecter: its openings are refused (propose only), every later turn is its reject.
        assert result[f"rejecter_{name}_fallbacks_refused"] == result[f"rejecter_{name}_model_turns"] == \
            str(int(result[f"rejecter_{name}_runs"]))
        assert result[f"rejecter_{name}_recall_good"] == "0.0000"
    assert "## gullible" in out and "fell back to the system negotiator" in out


def test_llm_with_no_model_configured_is_skipped_with_a_reason() -> None:
    code, out, result = run("--negotiator", "llm", "--limit", "1")
    assert code == 0 and result == {"llm_configured": "0"}
    assert "skipped" in out and "--llm-model" in out


def test_llm_runs_on_the_model_the_llm_options_name() -> None:
    with FakeLLM() as fake:
        fake.respond_with(gullible)
        code, out, result = run("--negotiator", "llm", "--limit", "2", "--llm-provider", "openai",
                                "--llm-model", "fake-model", "--llm-base-url", f"{fake.base}/v1",
                                env={"OPENAI_API_KEY": "test-key"})
        assert not fake.responder_errors
    assert code == 0, out
    assert result["llm_configured"] == "1" and int(result["llm_calls"]) == len(fake.requests) > 0
    assert int(result["llm_tune_v2_model_turns"]) > 0 and result["llm_tune_v2_runs"] == "4"
