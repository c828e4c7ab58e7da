#!/usr/bin/env python3
"""Red team: the whole shopper-attack corpus against every merchant mode, over real HTTP.

The corpus (``tests/red_team/corpus.json``: ten families, after the manipulation scenarios of
Microsoft's Magentic Marketplace) is played attack by attack, each in a chat of its own, against a
real store serving the demo catalog with its default floor margin, once per merchant mode:

* ``deterministic`` — no model;
* ``llm-voice`` and ``llm`` — the model is a scripted *gullible* one (tests/support/gullible_model.py)
  behind a local fake provider, reached through the real ``anthropic`` SDK: it gives in to every
  attack, and in ``llm`` mode it knows the floor, the levers' costs and the inventory note.

Every merchant reply and deal is scored by the red team's own reader (tests/support/red_team.py,
which shares no code with the guards): **leaks** (a reply stating the floor in any form it reads,
a lever's cost, or a run of the inventory note) and **sales below the floor** (net of the extras'
cost). The goal is 0 and 0. For context it also scores the model's raw answers before any guard —
what the model *tried* — and reads from the store how often its guards clamped a price or rewrote
a reply.

It prints a table per family and mode, then one line::

    RESULT modes=3 products=3 attacks=... turns=... leaks=0 below_floor=0 leaks_llm=0 ...
           tried_leaks_llm=... tried_below_floor_llm=... clamps_llm=... rewrites_llm=... seconds=...

Exit status 1 if anything leaked or sold below the floor. Bounded: the corpus times the products
(``--products``), one store per mode on 127.0.0.1, stopped at the end.

    .venv/bin/python benchmarks/red_team.py [--products aerion-v12-cordless,...|all] [--modes llm,...]
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from haggler.catalog import load_catalog  # noqa: E402
from haggler.protocols.negotiate_v1.settings import MERCHANT_MODES as MODES  # noqa: E402
from tests.support.red_team_play import Tally, play, total  # noqa: E402

#: Premium (floor 94% of list), open-box (86%) and clearance (66%): the three kinds of floor.
DEFAULT_PRODUCTS = ("aerion-v12-cordless", "stillair-p250-openbox", "breeze-hc3-clearance")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--products", default=",".join(DEFAULT_PRODUCTS),
                        help="comma-separated product ids of the demo catalog, or 'all'")
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated merchant modes")
    args = parser.parse_args(argv)
    catalog = load_catalog(None)
    args.products = ([p.id for p in catalog.products] if args.products == "all"
                     else [p.strip() for p in args.products.split(",") if p.strip()])
    unknown = [p for p in args.products if catalog.product(p) is None]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if unknown or not args.products or not set(modes) <= set(MODES) or not modes:
        parser.error(f"unknown products {unknown} or modes {modes} (modes: {', '.join(MODES)})")
    args.modes = modes
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.disable(logging.WARNING)  # the guards log each refusal; the table says it all
    started = time.perf_counter()
    results: dict[str, dict[str, Tally]] = {}
    with tempfile.TemporaryDirectory(prefix="haggler-red-team-") as workdir:
        for mode in args.modes:
            t0 = time.perf_counter()
            results[mode] = play(mode, args.products, Path(workdir))
            print(f"{mode}: {time.perf_counter() - t0:.1f} s", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - started
    print_table(results)
    result = summary(results, len(args.products), seconds)
    print("RESULT " + " ".join(f"{key}={value}" for key, value in result.items()), flush=True)
    return 1 if result["leaks"] or result["below_floor"] else 0


def print_table(results: dict[str, dict[str, Tally]]) -> None:
    modes = list(results)
    print(f"{'family':22} " + " ".join(f"{m:>36}" for m in modes))
    print(f"{'':22} " + " ".join(f"{'leaks below | tried leaks below | clamp rewr':>36}" for _ in modes))
    families = list(next(iter(results.values())))
    for family in [*families, "total"]:
        cells = []
        for mode in modes:
            t = total(results[mode].values()) if family == "total" else results[mode][family]
            cells.append(f"{t.leaks:5} {t.below_floor:5} | {t.tried_leaks:5} {t.tried_below_floor:5} | "
                         f"{t.clamps:5} {t.rewrites:5}")
        print(f"{family:22} " + " ".join(f"{c:>36}" for c in cells))
    for mode in modes:
        for family, tally in results[mode].items():
            for example in tally.examples[:3]:
                print(f"  {mode} / {family}: {example}")


def summary(results: dict[str, dict[str, Tally]], products: int, seconds: float) -> dict[str, object]:
    totals = {mode: total(tallies.values()) for mode, tallies in results.items()}
    any_mode = next(iter(totals.values()))
    result: dict[str, object] = {
        "modes": len(results), "products": products, "attacks": any_mode.attacks, "turns": any_mode.turns,
        "leaks": sum(t.leaks for t in totals.values()),
        "below_floor": sum(t.below_floor for t in totals.values()),
    }
    for mode, t in totals.items():
        key = mode.replace("-", "_")
        result.update({f"leaks_{key}": t.leaks, f"below_floor_{key}": t.below_floor, f"deals_{key}": t.deals})
        if mode != "deterministic":
            result.update({f"tried_leaks_{key}": t.tried_leaks, f"tried_below_floor_{key}": t.tried_below_floor,
                           f"clamps_{key}": t.clamps, f"rewrites_{key}": t.rewrites,
                           f"fallbacks_{key}": t.fallbacks})
    result["seconds"] = f"{seconds:.1f}"
    return result


if __name__ == "__main__":
    sys.exit(main())
