"""Quality of haggler's two default agents against each other.

The shopper agent haggles with the store's merchant agent over every product of the demo
catalog, with budgets spread from below the floor to above list price, through the real
store app (in process, over httpx's ASGI transport: no sockets, same code path as HTTP).

Prints the deal rate where a deal was possible (budget above the floor; goal >= 95%), the deals
kept against the same run with no hidden floor margin (goal >= 99%),
deals where none was possible (must be 0), the buyer's share of the zone between floor and
budget, and turns per negotiation. Ends with one `RESULT key=value ...` line.

    .venv/bin/python benchmarks/shopper_vs_merchant.py [--seeds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx

from haggler.catalog import load_catalog
from haggler.protocols.negotiate_v1.settings import MerchantSettings, StoreLimits
from haggler.server.app import create_app
from haggler.server.config import StoreConfig
from haggler.shopper.client import AsyncNegotiateClient
from haggler.shopper.negotiation import NegotiationResult, goal_for, listing_for, run_negotiation

#: Budgets as points on the line floor (0.0) → list price (1.0); below 0 is under the floor.
BUDGET_POINTS = (-0.60, -0.25, -0.05, 0.0, 0.10, 0.25, 0.50, 0.75, 1.00, 1.25)


def budget_for(floor: int, list_price: int, point: float) -> int:
    return max(100, round(floor + point * (list_price - floor)))


async def run(seeds: int, structured: bool, floor_margin: float) -> list[tuple[int, int, NegotiationResult]]:
    catalog = load_catalog()
    with tempfile.TemporaryDirectory() as tmp:
        app = create_app(StoreConfig(catalog=catalog, db_url=f"sqlite:///{Path(tmp) / 'bench.db'}", data_dir=Path(tmp) / "data",
                                     limits=StoreLimits(max_chat_starts_per_hour_per_ip=10**9),
                                     merchant=MerchantSettings(floor_margin=floor_margin),
                                     allowed_hosts=("store.test",),
                                     sweep_interval_seconds=None))
        transport = httpx.ASGITransport(app=app)
        results = []
        async with AsyncNegotiateClient(transport=transport) as client:
            store = await client.discover("http://store.test")
            for product in catalog.products:
                for point in BUDGET_POINTS:
                    budget = budget_for(product.floor_cents, product.list_price_cents, point)
                    for seed in range(seeds):
                        goal = goal_for(listing_for(store, product.id), budget / 100, None,
                                        {"shipping": 30, "battery": 60})
                        result = await run_negotiation(client, store, product.id, goal, seed=seed,
                                                       structured=structured)
                        results.append((product.floor_cents, budget, result))
        app.state.service.db.dispose()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="negotiations per product and budget (default 3)")
    parser.add_argument("--structured", action="store_true", help="send JSON turns instead of free text")
    parser.add_argument("--floor-margin", type=float, default=MerchantSettings().floor_margin,
                        help="the merchant's hidden floor margin (default: the store's)")
    args = parser.parse_args()
    started = time.perf_counter()
    results = asyncio.run(run(args.seeds, args.structured, args.floor_margin))
    elapsed = time.perf_counter() - started
    # The same negotiations with no hidden margin (the merchant takes anything covering the floor):
    # what hiding the floor costs in deals, measured in the same run.
    baseline = asyncio.run(run(args.seeds, args.structured, 0.0))
    baseline_deals = sum(1 for f, b, r in baseline if b > f and r.agreed)

    # A budget exactly at the floor leaves a zone of zero width: the merchant never states its
    # floor and the shopper never offers its exact budget, so it counts as "no deal possible".
    possible = [(f, b, r) for f, b, r in results if b > f]
    impossible = [(f, b, r) for f, b, r in results if b <= f]
    deals = [(f, b, r) for f, b, r in possible if r.agreed]
    over_budget = sum(1 for f, b, r in results if r.agreed and r.price_cents is not None and r.price_cents > b)
    # Below the floor once the extras' cost is counted: what they cost the store comes off the price.
    catalog = load_catalog()
    below_floor = sum(1 for f, b, r in results if r.agreed and r.price_cents is not None
                      and r.price_cents - catalog.product(r.product_id).extras_cost(r.extras) < f)
    bad_deals = sum(1 for f, b, r in impossible if r.agreed)
    shares = [(b - r.price_cents) / (b - f) for f, b, r in deals if b > f and r.price_cents is not None]
    turns = [r.turns for _, _, r in results]
    deal_rate = len(deals) / len(possible) if possible else 0.0
    share = statistics.mean(shares) if shares else 0.0

    print(f"shopper agent vs merchant agent — {len(results)} negotiations "
          f"({'JSON' if args.structured else 'free-text'} turns), {elapsed:.1f}s")
    print(f"  deal possible (budget > floor): {len(possible)}   deals: {len(deals)}   rate {deal_rate:.1%}   (goal >= 95%)")
    print(f"  no deal possible: {len(impossible)}   deals anyway: {bad_deals}   (must be 0)")
    print(f"  deals above budget: {over_budget}   deals below floor: {below_floor}   (must be 0)")
    print(f"  buyer's share of the floor-to-budget zone: mean {share:.1%}")
    kept = len(deals) / baseline_deals if baseline_deals else 0.0
    print(f"  deals with the hidden floor margin {args.floor_margin:g}: {len(deals)}; with none: {baseline_deals}   "
          f"kept {kept:.1%}   (goal >= 99%)")
    print(f"  turns per negotiation: mean {statistics.mean(turns):.1f}, max {max(turns)}")
    by_point = {}
    for point in BUDGET_POINTS:
        rows = [(f, b, r) for f, b, r in results if b == budget_for(f, _list(r), point)]
        by_point[point] = sum(r.agreed for _, _, r in rows) / len(rows) if rows else 0.0
    print("  deal rate by budget (0 = floor, 1 = list): "
          + "  ".join(f"{p:+.2f}:{rate:.0%}" for p, rate in by_point.items()))
    print(f"RESULT negotiations={len(results)} possible={len(possible)} deals={len(deals)} deal_rate={deal_rate:.4f} "
          f"impossible={len(impossible)} deals_impossible={bad_deals} over_budget={over_budget} "
          f"below_floor={below_floor} buyer_share={share:.4f} turns_mean={statistics.mean(turns):.2f} "
          f"turns_max={max(turns)} structured={int(args.structured)} floor_margin={args.floor_margin:g} "
          f"deals_without_margin={baseline_deals} deals_kept={kept:.4f} seconds={elapsed:.2f}")


def _list(result: NegotiationResult) -> int:
    return result.list_price_cents


if __name__ == "__main__":
    main()
