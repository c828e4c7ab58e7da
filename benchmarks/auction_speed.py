"""Speed of the double auction's clearing (spec 003: Protocol 4: Double Auction), orders per second.

Builds seeded random order books of 10k, 100k and 1M orders (string ids, buys and sells with
overlapping limit ranges, 1–100 units each, ~5% of orders cancelled again as the book fills),
clears each with :func:`haggler.protocols.market.auction.clear` on one core (pinned when the OS
allows), best of ``--repeat`` calls, and prints orders/s: the book's resting orders ÷ the time of
one clearing call. It also times filling the book (adds and cancels) and clearing from a plain
list of orders, and the end-to-end rate (fill + clear). Goal from the issue: >= 1M orders/s
cleared for books of 10k–1M orders.

On books up to ``--reference-max`` orders it also clears with the obviously-correct reference
(``tests/support/auction_reference.py``: every candidate price, unit-by-unit matching), checks
that the trades are the same, and prints the speed ratio measured in the same run. Ends with one
line ``RESULT orders_per_s_1m=... orders_per_s_100k=... orders_per_s_10k=...
reference_ratio_10k=... same_trades=yes|no fill_ops_per_s_...=... fill_and_clear_ops_per_s_...=...``.

    .venv/bin/python benchmarks/auction_speed.py [--sizes 10000,100000,1000000] [--seed 1] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import random
import sys
import time
from pathlib import Path

from haggler.protocols.market.auction import OrderBook, clear
from pinning import pin_to_one_core

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support, for the reference
from tests.support.auction_reference import reference_clear  # noqa: E402

CANCEL_SHARE = 0.05


def make_ops(n: int, seed: int) -> list[tuple]:
    """``n`` adds, a cancel of a random earlier live order after ~5% of them. Buys' limits are
    $90–$108, sells' $92–$110 (integer cents), so about half of each side crosses."""
    rng = random.Random(seed)
    ops: list[tuple] = []
    live: list[str] = []
    for i in range(n):
        if rng.random() < 0.5:
            ops.append(("add", f"o{i}", "buy", rng.randint(9_000, 10_800), rng.randint(1, 100)))
        else:
            ops.append(("add", f"o{i}", "sell", rng.randint(9_200, 11_000), rng.randint(1, 100)))
        live.append(f"o{i}")
        if rng.random() < CANCEL_SHARE:
            k = rng.randrange(len(live))
            live[k], live[-1] = live[-1], live[k]
            ops.append(("cancel", live.pop()))
    return ops


def fill(ops: list[tuple]) -> tuple[OrderBook, float]:
    book = OrderBook()
    add, cancel = book.add, book.cancel
    started = time.perf_counter()
    for op in ops:
        if op[0] == "add":
            add(op[1], op[2], op[3], op[4])
        else:
            cancel(op[1])
    return book, time.perf_counter() - started


def timed(fn, arg, repeat: int):
    best, result = float("inf"), None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn(arg)
        best = min(best, time.perf_counter() - started)
    return best, result


def label(n: int) -> str:
    return f"{n // 1_000_000}m" if n % 1_000_000 == 0 else f"{n // 1_000}k" if n % 1_000 == 0 else str(n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="orders added per book (comma-separated)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3, help="timed clearing calls per book; the best counts")
    parser.add_argument("--reference-max", type=int, default=10_000,
                        help="compare with the reference on books up to this many orders (default 10000)")
    args = parser.parse_args()
    pinned = pin_to_one_core()
    print(f"auction clearing, {pinned}, best of {args.repeat}; orders/s = resting orders / one clear() call")
    sizes = [int(size) for size in args.sizes.split(",")]
    result: dict[str, str] = {}
    extra: dict[str, str] = {}
    same = True
    for n in sizes:
        key = label(n)
        ops = make_ops(n, args.seed)
        cancels = len(ops) - n
        book, fill_s = fill(ops)
        resting = len(book)
        clear_s, clearing = timed(clear, book, args.repeat)
        orders = list(book.orders())
        list_s, from_list = timed(clear, orders, args.repeat)
        same_list = from_list == clearing
        per_s = resting / clear_s
        print(f"{key:>4}: {n:,} adds + {cancels:,} cancels -> {resting:,} resting; volume {clearing.volume:,} in "
              f"{len(clearing.trades):,} trades at {clearing.price} cents")
        print(f"      clear(book) {clear_s * 1e3:8.1f} ms = {per_s:12,.0f} orders/s   (goal >= 1,000,000)")
        print(f"      clear(list) {list_s * 1e3:8.1f} ms = {resting / list_s:12,.0f} orders/s   "
              f"(same clearing: {'yes' if same_list else 'NO'})")
        print(f"      fill book   {fill_s * 1e3:8.1f} ms = {len(ops) / fill_s:12,.0f} adds+cancels/s; "
              f"fill + clear = {len(ops) / (fill_s + clear_s):,.0f} ops/s")
        result[f"orders_per_s_{key}"] = f"{per_s:.0f}"
        extra[f"fill_ops_per_s_{key}"] = f"{len(ops) / fill_s:.0f}"
        extra[f"fill_and_clear_ops_per_s_{key}"] = f"{len(ops) / (fill_s + clear_s):.0f}"
        same = same and same_list
        if n <= args.reference_max:
            ref_s, (price, volume, trades) = timed(reference_clear, orders, 1)
            agree = (price, volume, trades) == (clearing.price, clearing.volume, list(clearing.trades))
            same = same and agree
            print(f"      reference   {ref_s * 1e3:8.1f} ms = {resting / ref_s:12,.0f} orders/s; "
                  f"ratio {ref_s / clear_s:,.0f}x; same trades: {'yes' if agree else 'NO'}")
            result[f"reference_ratio_{key}"] = f"{ref_s / clear_s:.0f}"
        del book, orders, clearing, from_list
        gc.collect()
    order = {label(n): -n for n in sizes}  # the largest book first
    keys = sorted(result, key=lambda k: (k.startswith("reference"), order[k.rsplit("_", 1)[1]]))
    extras = sorted(extra, key=lambda k: (k.startswith("fill_and"), order[k.rsplit("_", 1)[1]]))
    print("RESULT " + " ".join(f"{k}={result[k]}" for k in keys) + f" same_trades={'yes' if same else 'no'} "
          + " ".join(f"{k}={extra[k]}" for k in extras))


if __name__ == "__main__":
    main()
