"""Accuracy of the deterministic match negotiator on labelled pairs (issue 30).

Plays each pair system against system under the cap of 6, once with each side opening (as
``tests/agents/test_match_negotiator.py`` does): a good pair must end pending (both accept), a
superficial or one-sided pair rejected. Prints accuracy, each class's recall, a confusion table
(class × outcome: pending, rejected, stalled), accuracy per condition kind (the superficial pairs
that fail a hard condition carry ``condition``), and ends with one ``RESULT`` line.

``--pairs heldout`` (the default) is the held-out part, ``benchmarks/data/match_pairs_heldout_v2.json``:
written before tuning, never read while tuning — run it to report, not to tune. ``--pairs tuning``
is the sets the negotiator may be tuned on (``tests/agents/match_pairs_tune_v2.json`` and the old
``tests/agents/match_pairs.json``); only there does ``--wrong`` list the misread runs.

Run: ``.venv/bin/python benchmarks/match_quality.py [--pairs heldout|tuning] [--wrong]``
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from haggler.agents.match_context import MatchAction, parse_context
from haggler.agents.match_negotiator import decide

ROOT = Path(__file__).resolve().parent.parent
SETS = {"heldout": {"heldout_v2": ROOT / "benchmarks/data/match_pairs_heldout_v2.json"},
        "tuning": {"tune_v2": ROOT / "tests/agents/match_pairs_tune_v2.json",
                   "old_labelled": ROOT / "tests/agents/match_pairs.json"}}
OUTCOMES = ("pending", "rejected", "stalled")
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


def measure(pairs: list[dict[str, Any]]) -> tuple[Counter[str], Counter[str], Counter[tuple[str, str]], list[str]]:
    """Right runs and all runs by key (all, each class, each condition kind), the confusion
    counts (class, outcome), and a line per misread run."""
    ok, total, confusion, wrong = Counter[str](), Counter[str](), Counter[tuple[str, str]](), []
    for pair in pairs:
        for first in "ab":
            history = play(pair, first)
            keys = ["all", pair["category"]] + ([f"condition:{pair['condition']}"] if pair.get("condition") else [])
            good = right(pair, history)
            confusion[pair["category"], outcome(history)] += 1
            for key in keys:
                total[key] += 1
                ok[key] += good
            if not good:
                wrong.append(f"{pair['id']} [{pair['category']}] ({first} opens): {outcome(history)}"
                             f" — {history[-1]['assessment']['reasoning'][:300]}")
    return ok, total, confusion, wrong


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", choices=tuple(SETS), default="heldout")
    parser.add_argument("--wrong", action="store_true", help="list the misread runs (tuning pairs only)")
    args = parser.parse_args()
    if args.wrong and args.pairs != "tuning":
        parser.error("--wrong lists pair contents: only for --pairs tuning")
    figures = []
    for name, path in SETS[args.pairs].items():
        ok, total, confusion, wrong = measure(json.loads(path.read_text())["pairs"])
        print(f"== {name}: {ok['all']}/{total['all']} runs right = {ok['all'] / total['all']:.1%}")
        classes = sorted({category for category, _ in confusion})
        print(f"   {'class':12} " + " ".join(f"{o:>9}" for o in OUTCOMES) + "   recall")
        for category in classes:
            print(f"   {category:12} " + " ".join(f"{confusion[category, o]:>9}" for o in OUTCOMES)
                  + f"   {ok[category] / total[category]:.1%}")
        for key in sorted(k for k in total if k.startswith("condition:")):
            print(f"   {key:22} {ok[key]:3}/{total[key]:<3} = {ok[key] / total[key]:.1%}")
        if args.wrong:
            print("\n".join("   x " + w for w in wrong))
        figures.append(f"{name}_accuracy={ok['all'] / total['all']:.4f} {name}_runs={total['all']}")
        figures += [f"{name}_recall_{c}={ok[c] / total[c]:.4f}" for c in classes]
    print("RESULT " + " ".join(figures))


if __name__ == "__main__":
    main()
