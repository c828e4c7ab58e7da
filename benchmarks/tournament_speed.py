"""Speed of a lab tournament: a million negotiations, on every core.

Generates the tournament's scenario set (:func:`haggler.lab.generate.mixed_set`: half single-issue,
half with extras, three in four with a zone of agreement) just large enough that every
(seller, buyer) pair of the chosen strategies over every scenario makes ``--negotiations``
negotiations, and plays it with :func:`haggler.lab.tournament.run_tournament` over ``--workers``
processes, keeping each cell's tally rather than a row per negotiation (``keep_rows=False``:
the ranking and the matrix, the same figures a single process with rows gives). Goal (issue 33):
1,000,000 negotiations in under 2 minutes on the 2-core VM.

The default strategies are the seven classic ones (time-dependent, tit-for-tat, hardliner,
accept-first): 49 pairs x 20,409 scenarios = 1,000,041 negotiations. ``--strategies all`` adds
the store's merchant and the default shopper, which run haggler's own agents (about ten times
slower a negotiation): 64 pairs x 15,625 scenarios = 1,000,000.

The time counts everything: generating the scenarios, playing, merging and ranking. Ends with
one line ``RESULT negotiations=... seconds=... negotiations_per_s=... workers=...``.

    .venv/bin/python benchmarks/tournament_speed.py [--negotiations 1000000] [--workers 2]
        [--strategies classic|all|a,b,c] [--seed 0] [--check 2000]
"""

from __future__ import annotations

import argparse
import math
import os
import time

from haggler.agents.strategies import STRATEGIES
from haggler.lab.generate import mixed_set
from haggler.lab.tournament import resolve_strategies, run_tournament, strategy_roles

CLASSIC = [name for name in STRATEGIES if name not in ("store-merchant", "default-shopper")]


def pairs_of(names: list[str]) -> int:
    sellers = sum(1 for n in names if "seller" in strategy_roles(n))
    buyers = sum(1 for n in names if "buyer" in strategy_roles(n))
    return sellers * buyers


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--negotiations", type=int, default=1_000_000, help="at least this many (default 1,000,000)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: every core)")
    parser.add_argument("--strategies", default="classic", help="classic (default), all, or comma-separated names")
    parser.add_argument("--seed", type=int, default=0, help="seed of the scenario set")
    parser.add_argument("--check", type=int, default=0, metavar="N",
                        help="first play the first N scenarios with 1 process and with --workers, and check "
                             "the figures are the same (off by default)")
    args = parser.parse_args()
    if args.strategies == "classic":
        names = CLASSIC
    elif args.strategies == "all":
        names = list(STRATEGIES)
    else:
        names = resolve_strategies(s.strip() for s in args.strategies.split(",") if s.strip())
    pairs = pairs_of(names)
    n_scenarios = math.ceil(args.negotiations / pairs)
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"tournament: {len(names)} strategies ({pairs} pairs) x {n_scenarios:,} scenarios = "
          f"{pairs * n_scenarios:,} negotiations on {args.workers} worker(s); "
          f"load average before: {' '.join(f'{x:.2f}' for x in load) if load else 'na'}")

    if args.check:
        check = mixed_set(args.check, args.seed)
        one = run_tournament(names, check, keep_rows=False)
        many = run_tournament(names, check, keep_rows=False, workers=args.workers)
        same = one.ranking() == many.ranking() and one.matrix() == many.matrix()
        print(f"check: {args.check} scenarios, 1 process vs {args.workers}: "
              f"{'same ranking and matrix' if same else 'DIFFERENT'}")
        if not same:
            raise SystemExit(1)

    started = time.perf_counter()
    scenarios = mixed_set(n_scenarios, args.seed)
    generated = time.perf_counter()
    result = run_tournament(names, scenarios, workers=args.workers, keep_rows=False)
    played = time.perf_counter()
    ranking = result.ranking()
    ended = time.perf_counter()
    seconds = ended - started
    negotiations = result.negotiations
    print(f"scenarios generated in {generated - started:.1f} s, played in {played - generated:.1f} s, "
          f"ranked in {ended - played:.2f} s")
    for rank, s in enumerate(ranking, 1):
        print(f"  {rank}. {s.strategy:22s} mean utility {s.mean_utility:.3f}  agreement {s.agreement_rate:.0%}  "
              f"games {s.games:,}")
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    print(f"{negotiations:,} negotiations in {seconds:.1f} s: {negotiations / seconds:,.0f} negotiations/s "
          f"(goal: 1,000,000 in < 120 s); load average after: {' '.join(f'{x:.2f}' for x in load) if load else 'na'}")
    print(f"RESULT negotiations={negotiations} seconds={seconds:.1f} negotiations_per_s={negotiations / seconds:.0f} "
          f"workers={args.workers}")


if __name__ == "__main__":
    main()
