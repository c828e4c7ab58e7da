"""Accuracy of the deterministic match negotiator on the TUNING pairs only.

Plays each pair system against system under the cap of 6, once with each side opening (as
``tests/agents/test_match_negotiator.py`` does), and prints accuracy per class, per condition kind
(superficial pairs that fail a hard condition carry ``condition``), and the misread runs.

Reads only ``tests/agents/match_pairs_tune_v2.json`` and ``tests/agents/match_pairs.json`` — the
sets the negotiator may be tuned on. The held-out sets are measured elsewhere, never here.

Run: ``PYTHONPATH=src python benchmarks/match_tuning.py [--wrong]``
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from haggler.agents.match_context import MatchAction, parse_context
from haggler.agents.match_negotiator import decide

ROOT = Path(__file__).resolve().parent.parent
SETS = {"tune_v2": ROOT / "tests/agents/match_pairs_tune_v2.json",
        "old_labelled": ROOT / "tests/agents/match_pairs.json"}
CAP = 6


def play(pair: dict[str, Any], first: str, cap: int = CAP) -> list[dict[str, Any]]:
    """A system–system negotiation: two negotiators alternate until accept, reject or the cap."""
    opener, responder = (pair["a"], pair["b"]) if first == "a" else (pair["b"], pair["a"])
    history: list[dict[str, Any]] = []
    while len(history) < cap:
        own, other = (opener, responder) if len(history) % 2 == 0 else (responder, opener)
        ctx = parse_context({"ownUser": own, "otherUser": other, "seedAssessment": pair["seed"],
                             "history": history, "maxTurns": cap})
        turn = decide(ctx)
        history.append({"speaker": turn.speaker, **turn.to_json()})
        if turn.action in (MatchAction.ACCEPT, MatchAction.REJECT):
            break
    return history


def outcome(history: list[dict[str, Any]]) -> str:
    return {"accept": "pending", "reject": "rejected"}.get(history[-1]["action"], "stalled")


def right(pair: dict[str, Any], history: list[dict[str, Any]]) -> bool:
    """Good pairs must end pending (both accept); superficial and one-sided must end rejected."""
    return outcome(history) == ("pending" if pair["category"] == "good" else "rejected")


def measure(pairs: list[dict[str, Any]]) -> tuple[Counter[str], Counter[str], list[str]]:
    ok, total, wrong = Counter[str](), Counter[str](), []
    for pair in pairs:
        for first in "ab":
            history = play(pair, first)
            keys = ["all", pair["category"]] + ([f"condition:{pair['condition']}"] if pair.get("condition") else [])
            good = right(pair, history)
            for key in keys:
                total[key] += 1
                ok[key] += good
            if not good:
                wrong.append(f"{pair['id']} [{pair['category']}] ({first} opens): {outcome(history)}"
                             f" — {history[-1]['assessment']['reasoning'][:300]}")
    return ok, total, wrong


def main() -> None:
    for name, path in SETS.items():
        ok, total, wrong = measure(json.loads(path.read_text())["pairs"])
        print(f"== {name}: {ok['all']}/{total['all']} = {ok['all'] / total['all']:.1%}")
        for key in sorted(total):
            if key != "all":
                print(f"   {key:22} {ok[key]:3}/{total[key]:<3} = {ok[key] / total[key]:.1%}")
        if "--wrong" in sys.argv:
            print("\n".join("   x " + w for w in wrong))


if __name__ == "__main__":
    main()
