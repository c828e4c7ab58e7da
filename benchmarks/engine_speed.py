"""Speed of the negotiation engine: in-process alternating offers, negotiations per second.

Generates N seeded single-issue scenarios with a zone of possible agreement (20 rounds each),
runs each as structured alternating offers through the engine (:func:`run_alternating`) with a
Boulware seller against a conceder buyer — so most negotiations last many rounds — and prints
negotiations/s and turns/s on one core (pinned when the OS allows it). Goal (issue 33): >= 25,000
negotiations/s.

When NegMAS is importable (an optional, benchmark-only extra: it is AGPL, so ``src/`` never
imports it) the same scenarios also run through NegMAS's SAO mechanism with its time-based
negotiators, and the script prints the ratio. Goal: >= 100x. Ends with one line
``RESULT negotiations_per_s=... turns_per_s=... negmas_negotiations_per_s=... ratio=...``
("na" without NegMAS).

    .venv/bin/python benchmarks/engine_speed.py [--n 2000] [--seed 1] [--negmas-n 200] [--profile]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time

from haggler.agents.strategies import TimeDependent
from haggler.lab.alternating import run_alternating
from haggler.lab.scenario import Scenario
from pinning import pin_to_one_core

ROUNDS = 20
SELLER_E = 0.2   # Boulware
BUYER_E = 5.0    # conceder


def make_scenarios(n: int, seed: int) -> list[Scenario]:
    """Seeded single-issue scenarios, each with a ZOPA: list price $20–$2,000, the seller's
    floor at 50–90% of list, the buyer's budget between the floor and a bit above list."""
    rng = random.Random(seed)
    scenarios = []
    for i in range(n):
        list_price = rng.randrange(2_000, 200_000)
        floor = int(list_price * rng.uniform(0.5, 0.9))
        budget = floor + int((list_price * 1.05 - floor) * rng.uniform(0.02, 1.0))
        scenarios.append(Scenario(id=f"speed-{i}", list_price_cents=list_price, seller_reservation_cents=floor,
                                  buyer_reservation_cents=budget, max_rounds=ROUNDS))
    return scenarios


def run_haggler(scenarios: list[Scenario]) -> tuple[float, int, int]:
    """(seconds, turns, agreements)."""
    seller, buyer = TimeDependent(SELLER_E), TimeDependent(BUYER_E)
    turns = agreed = 0
    started = time.perf_counter()
    for scenario in scenarios:
        result = run_alternating(scenario, seller, buyer)
        turns += result.turns
        agreed += result.agreed
    return time.perf_counter() - started, turns, agreed


def run_negmas(scenarios: list[Scenario]) -> tuple[float, int, int] | None:
    """The same scenarios through NegMAS's SAOMechanism; None when NegMAS is not installed."""
    try:
        import negmas  # noqa: F401
        from negmas import SAOMechanism, make_issue
        from negmas.preferences import LinearAdditiveUtilityFunction as LUFun
        from negmas.sao import BoulwareTBNegotiator, ConcederTBNegotiator
    except Exception:  # noqa: BLE001 - any import problem means "not available"
        return None
    import warnings

    warnings.filterwarnings("ignore")
    turns = agreed = 0
    started = time.perf_counter()
    for s in scenarios:
        # Prices in whole dollars keep NegMAS's discrete outcome space small.
        lo, hi = s.seller_reservation_cents // 100 // 2, s.list_price_cents // 100 + 1
        issues = [make_issue(values=(lo, hi), name="price")]
        mechanism = SAOMechanism(issues=issues, n_steps=s.max_rounds)
        span = float(hi - lo)
        seller_u = LUFun(values={"price": lambda x, lo=lo, span=span: (x - lo) / span}, weights={"price": 1.0},
                         issues=issues, reserved_value=(s.seller_reservation_cents / 100 - lo) / span)
        buyer_u = LUFun(values={"price": lambda x, hi=hi, span=span: (hi - x) / span}, weights={"price": 1.0},
                        issues=issues, reserved_value=(hi - s.buyer_reservation_cents / 100) / span)
        mechanism.add(BoulwareTBNegotiator(name="seller"), ufun=seller_u)
        mechanism.add(ConcederTBNegotiator(name="buyer"), ufun=buyer_u)
        state = mechanism.run()
        turns += state.step
        agreed += state.agreement is not None
    return time.perf_counter() - started, turns, agreed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="negotiations (default 2000)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--negmas-n", type=int, default=200, help="negotiations run through NegMAS (default 200)")
    parser.add_argument("--repeat", type=int, default=3, help="timed repetitions; the best counts (default 3)")
    parser.add_argument("--profile", action="store_true", help="print a cProfile of one haggler pass")
    args = parser.parse_args()
    pinned = pin_to_one_core()
    scenarios = make_scenarios(args.n, args.seed)
    run_haggler(scenarios[:100])  # warm-up
    runs = [run_haggler(scenarios) for _ in range(max(1, args.repeat))]
    seconds, turns, agreed = min(runs)
    per_s = len(scenarios) / seconds
    turns_per_s = turns / seconds
    print(f"haggler: {len(scenarios)} negotiations ({pinned}), {turns / len(scenarios):.1f} turns each, "
          f"{agreed / len(scenarios):.0%} agreed; best of {len(runs)}: {seconds:.3f} s "
          f"(median {statistics.median(r[0] for r in runs):.3f} s)")
    print(f"haggler: {per_s:,.0f} negotiations/s, {turns_per_s:,.0f} turns/s (goal >= 25,000 negotiations/s)")
    if args.profile:
        import cProfile
        import pstats

        profiler = cProfile.Profile()
        profiler.enable()
        run_haggler(scenarios)
        profiler.disable()
        pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(15)

    negmas_per_s: float | None = None
    negmas = run_negmas(scenarios[: args.negmas_n])
    if negmas is None:
        print("negmas: not installed (optional, benchmark-only: pip install negmas)")
    else:
        n_seconds, n_turns, n_agreed = negmas
        count = min(len(scenarios), args.negmas_n)
        negmas_per_s = count / n_seconds
        print(f"negmas: {count} negotiations, {n_turns / count:.1f} steps each, {n_agreed / count:.0%} agreed; "
              f"{n_seconds:.3f} s: {negmas_per_s:,.1f} negotiations/s; ratio {per_s / negmas_per_s:,.0f}x (goal >= 100x)")
    ratio = f"{per_s / negmas_per_s:.1f}" if negmas_per_s else "na"
    print(f"RESULT negotiations_per_s={per_s:.0f} turns_per_s={turns_per_s:.0f} "
          f"negmas_negotiations_per_s={f'{negmas_per_s:.1f}' if negmas_per_s else 'na'} ratio={ratio}")


if __name__ == "__main__":
    main()
