"""Outcomes pinned: every strategy pair, both openers, over seeded scenario sets.

The lab's hot path (``run_alternating``, the strategies' ``decide``, ``guard``, the engine's
``apply``) is tuned for speed; this pins what it computes. The digest covers each negotiation's
agreement, terms, rounds, turns, reason and closing side, and the tournament's metrics (all but
the wall time). A speed-up must leave it unchanged; a deliberate change of behaviour updates
the digest in the same commit, saying why.
"""

from __future__ import annotations

import hashlib
import random

from haggler.agents.strategies import STRATEGIES, TimeDependent
from haggler.lab.alternating import run_alternating
from haggler.lab.generate import mixed_set, single_issue
from haggler.lab.scenario import BUYER, SELLER, Scenario
from haggler.lab.tournament import run_tournament

OUTCOMES_DIGEST = "0e79109533550b9a8086f81f1431c8067a6d84985d5c4cc070792723fb6a12d2"
TOURNAMENT_DIGEST = "88614542e16890624d51b6f1434b5205665fca1878c0d6736f2e9fe7be48cfe5"


def _speed_scenarios(n: int, seed: int) -> list[Scenario]:
    """benchmarks/engine_speed.py's scenarios: single issue, a zone of agreement, 20 rounds."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        list_price = rng.randrange(2_000, 200_000)
        floor = int(list_price * rng.uniform(0.5, 0.9))
        budget = floor + int((list_price * 1.05 - floor) * rng.uniform(0.02, 1.0))
        out.append(Scenario(id=f"speed-{i}", list_price_cents=list_price, seller_reservation_cents=floor,
                            buyer_reservation_cents=budget, max_rounds=20))
    return out


def outcomes_digest() -> tuple[int, str]:
    digest = hashlib.sha256()
    count = 0

    def add(result) -> None:
        nonlocal count
        count += 1
        digest.update(repr((result.agreed, result.terms, result.rounds, result.turns, result.reason,
                            result.by)).encode())

    scenarios = (mixed_set(60, 7) + single_issue(20, seed=3, zopa=None, max_rounds=1)
                 + single_issue(20, seed=4, max_rounds=3))
    for first in (SELLER, BUYER):
        for s in STRATEGIES:
            for b in STRATEGIES:
                if s == "default-shopper" or b == "store-merchant":
                    continue
                for scenario in scenarios:
                    add(run_alternating(scenario, STRATEGIES[s](), STRATEGIES[b](), first=first))
    # One decider per side for a whole set, as the speed benchmark plays them.
    for seller_e in (0.1, 0.2, 1.0, 3.0):
        for buyer_e in (0.5, 5.0):
            seller, buyer = TimeDependent(seller_e), TimeDependent(buyer_e)
            for scenario in _speed_scenarios(300, 1):
                add(run_alternating(scenario, seller, buyer))
    return count, digest.hexdigest()


def tournament_digest() -> tuple[int, str]:
    result = run_tournament(None, mixed_set(12, 5))
    digest = hashlib.sha256()
    for row in result.csv_rows():
        digest.update(repr(sorted((k, v) for k, v in row.items() if k != "wall_seconds")).encode())
    for standing in result.ranking():
        digest.update(repr(standing).encode())
    return len(result.rows), digest.hexdigest()


def test_alternating_outcomes_are_pinned():
    assert outcomes_digest() == (18_600, OUTCOMES_DIGEST)


def test_tournament_results_are_pinned():
    assert tournament_digest() == (12 * 9 * 9, TOURNAMENT_DIGEST)
