"""The labelled match pairs (``tests/agents/match_pairs*.json``), for every test that measures
against them: the negotiator's accuracy and the evaluator's separation use the same pairs."""

from __future__ import annotations

import json
from pathlib import Path

_DIR = Path(__file__).resolve().parent.parent / "agents"


def load_pairs(name: str) -> list[dict]:
    """The ``pairs`` of one labelled file: ``match_pairs.json`` (the set the negotiator was built
    on) or ``match_pairs_heldout.json`` (written after it, measured only)."""
    return json.loads((_DIR / name).read_text())["pairs"]


PAIRS = load_pairs("match_pairs.json")
HELDOUT = load_pairs("match_pairs_heldout.json")
