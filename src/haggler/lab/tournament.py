"""Round-robin tournament: every strategy against every other, in both roles, over a scenario set.

:func:`run_tournament` plays every ordered pair (seller strategy, buyer strategy) — each side
only in a role it can play (``StoreMerchant`` only sells, ``DefaultShopper`` only buys), a
strategy against itself included — over every scenario, through the alternating-offers
protocol, with a fresh decider per negotiation. :class:`TournamentResult` holds one
:class:`~haggler.lab.metrics.Metrics` per negotiation and derives the ranking, the
seller × buyer matrix and the CSV from them; :func:`write_plots` draws the heat map and the
agreement/utility trade-off; :func:`main_tournament` is the whole ``haggler lab tournament``
command.

Utilities are the scenarios' normalised utilities; a negotiation without agreement is worth 0
to both sides.
"""

from __future__ import annotations

import csv
import math
import os
import statistics
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from haggler.agents.strategies import STRATEGIES
from haggler.lab.alternating import run_alternating
from haggler.lab.metrics import Metrics, NegotiationRecord, ScenarioFacts, measure, scenario_facts
from haggler.lab.scenario import BUYER, SELLER, Scenario

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console

__all__ = [
    "CSV_FIELDS", "PROTOCOL", "CellTally", "PairCell", "StrategyStanding", "TournamentResult", "main_tournament",
    "render_ranking", "resolve_strategies", "run_tournament", "strategy_roles", "write_plots",
]

PROTOCOL = "alternating"

#: The columns of ``results.csv``, in order: one row per negotiation.
CSV_FIELDS = (
    "scenario_id", "protocol", "seller", "buyer", "agreed", "price_cents",
    "seller_utility", "buyer_utility", "seller_share", "buyer_share",
    "cb_margin_seller", "cb_margin_buyer", "pareto_distance", "nash_distance",
    "rounds", "messages", "wall_seconds", "had_zopa", "irrational",
)

_PLOTS_NEED = "plots need matplotlib: pip install 'haggler[lab]'"


# -- strategies -----------------------------------------------------------------------------------


def strategy_roles(name: str) -> tuple[str, ...]:
    """The roles the named strategy can play ("seller", "buyer")."""
    decider = STRATEGIES[name]()
    return tuple(getattr(decider, "roles", (SELLER, BUYER)))


def resolve_strategies(strategies: Iterable[str] | None) -> list[str]:
    """Validate strategy names (None or empty: all of them), dropping duplicates, keeping order.

    Raises :class:`ValueError` naming the unknown names and listing the valid ones.
    """
    names = list(dict.fromkeys(strategies or ()))
    if not names:
        return list(STRATEGIES)
    unknown = [n for n in names if n not in STRATEGIES]
    if unknown:
        raise ValueError(f"unknown strateg{'y' if len(unknown) == 1 else 'ies'} {', '.join(unknown)}; "
                         f"valid: {', '.join(STRATEGIES)}")
    return names


# -- the result -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StrategyStanding:
    """One strategy's line of the ranking. Means count no agreement as utility 0; ``None``
    where the strategy never played that role."""

    strategy: str
    #: Negotiations the strategy took part in, counting a self-play game once per side.
    games: int
    mean_utility_as_seller: float | None
    mean_utility_as_buyer: float | None
    #: Mean of its own side's utility over all its games, in either role.
    mean_utility: float
    agreement_rate: float
    mean_rounds: float


@dataclass(frozen=True, slots=True)
class PairCell:
    """One (seller strategy, buyer strategy) cell of the tournament matrix."""

    seller: str
    buyer: str
    count: int
    mean_seller_utility: float
    mean_buyer_utility: float
    agreement_rate: float


@dataclass
class CellTally:
    """What the ranking and the matrix need of one (seller, buyer) cell, negotiation by negotiation
    in play order: each side's utility (arrays of floats), and the counts. The means are
    ``math.fsum`` over these (as ``statistics.fmean`` over the rows), which is exact whatever
    the order of the terms, so tallies merged from several processes give the very figures one
    process gives."""

    seller_utilities: array = field(default_factory=lambda: array("d"))
    buyer_utilities: array = field(default_factory=lambda: array("d"))
    agreements: int = 0
    rounds: int = 0

    @property
    def count(self) -> int:
        return len(self.seller_utilities)

    def add(self, m: Metrics) -> None:
        self.seller_utilities.append(m.seller_utility)
        self.buyer_utilities.append(m.buyer_utility)
        self.agreements += m.agreed
        self.rounds += m.rounds

    def extend(self, other: "CellTally") -> None:
        self.seller_utilities.extend(other.seller_utilities)
        self.buyer_utilities.extend(other.buyer_utilities)
        self.agreements += other.agreements
        self.rounds += other.rounds


def _tallies(rows: Iterable[Metrics]) -> dict[tuple[str, str], CellTally]:
    tallies: dict[tuple[str, str], CellTally] = {}
    for m in rows:
        key = (m.seller_name, m.buyer_name)
        tally = tallies.get(key)
        if tally is None:
            tally = tallies[key] = CellTally()
        tally.add(m)
    return tallies


@dataclass(frozen=True)
class TournamentResult:
    #: Strategy names in the order given.
    strategies: tuple[str, ...]
    #: One entry per negotiation, in play order (seller, buyer, scenario); empty when the
    #: tournament was run with ``keep_rows=False`` (then only the tallies are kept).
    rows: tuple[Metrics, ...]
    #: The roles each strategy could play.
    roles: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: (seller, buyer) -> its cell's tally, in play order; None: made from the rows.
    cell_tallies: dict[tuple[str, str], CellTally] | None = None
    #: Scenarios played; None: counted from the rows.
    scenario_count: int | None = None

    @cached_property
    def tallies(self) -> dict[tuple[str, str], CellTally]:
        return self.cell_tallies if self.cell_tallies is not None else _tallies(self.rows)

    @property
    def negotiations(self) -> int:
        return sum(t.count for t in self.tallies.values())

    @property
    def scenarios_played(self) -> int:
        if self.scenario_count is not None:
            return self.scenario_count
        return len({m.scenario_id for m in self.rows})

    @property
    def sellers(self) -> list[str]:
        return [s for s in self.strategies if SELLER in self.roles.get(s, (SELLER, BUYER))]

    @property
    def buyers(self) -> list[str]:
        return [s for s in self.strategies if BUYER in self.roles.get(s, (SELLER, BUYER))]

    def ranking(self) -> list[StrategyStanding]:
        """Per strategy, best mean utility first (ties: better agreement rate, then name).

        Computed from the cells' tallies: the same figures as means over the rows, since
        ``statistics.fmean`` is ``math.fsum`` (exact) over the count."""
        tallies = self.tallies
        standings = []
        for name in self.strategies:
            as_seller = [t for (s, _), t in tallies.items() if s == name]
            as_buyer = [t for (_, b), t in tallies.items() if b == name]
            seller_n = sum(t.count for t in as_seller)
            buyer_n = sum(t.count for t in as_buyer)
            games = seller_n + buyer_n
            if not games:
                continue
            seller_u = [t.seller_utilities for t in as_seller]
            buyer_u = [t.buyer_utilities for t in as_buyer]
            standings.append(StrategyStanding(
                strategy=name,
                games=games,
                mean_utility_as_seller=_fsum(seller_u) / seller_n if seller_n else None,
                mean_utility_as_buyer=_fsum(buyer_u) / buyer_n if buyer_n else None,
                mean_utility=_fsum(seller_u + buyer_u) / games,
                agreement_rate=sum(t.agreements for t in as_seller + as_buyer) / games,
                mean_rounds=float(sum(t.rounds for t in as_seller + as_buyer)) / games,
            ))
        standings.sort(key=lambda s: (-s.mean_utility, -s.agreement_rate, s.strategy))
        return standings

    def matrix(self) -> dict[tuple[str, str], PairCell]:
        """(seller strategy, buyer strategy) → means over the scenarios, for pairs that played."""
        return {
            key: PairCell(
                seller=key[0], buyer=key[1], count=t.count,
                mean_seller_utility=math.fsum(t.seller_utilities) / t.count,
                mean_buyer_utility=math.fsum(t.buyer_utilities) / t.count,
                agreement_rate=t.agreements / t.count,
            )
            for key, t in self.tallies.items() if t.count
        }

    def csv_rows(self) -> list[dict[str, Any]]:
        return [_csv_row(m) for m in self.rows]

    def write_csv(self, path: str | Path) -> Path:
        """Write one row per negotiation (columns :data:`CSV_FIELDS`); empty cells for values
        that are undefined (no agreement, no surplus)."""
        if self.cell_tallies is not None and not self.rows and self.negotiations:
            raise ValueError("this tournament kept no rows (keep_rows=False): there is no CSV to write")
        path = Path(path)
        with path.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
            writer.writeheader()
            writer.writerows(self.csv_rows())
        return path


def _fsum(arrays: list[array]) -> float:
    """math.fsum over several arrays, as over their concatenation (fsum is exact: order is moot)."""
    return math.fsum(v for a in arrays for v in a)


def _csv_row(m: Metrics) -> dict[str, Any]:
    def num(v: float | None) -> str:
        return "" if v is None else repr(v)

    return {
        "scenario_id": m.scenario_id, "protocol": m.protocol,
        "seller": m.seller_name, "buyer": m.buyer_name,
        "agreed": int(m.agreed), "price_cents": "" if m.price_cents is None else m.price_cents,
        "seller_utility": num(m.seller_utility), "buyer_utility": num(m.buyer_utility),
        "seller_share": num(m.seller_share), "buyer_share": num(m.buyer_share),
        "cb_margin_seller": num(m.cb_margin_seller), "cb_margin_buyer": num(m.cb_margin_buyer),
        "pareto_distance": num(m.pareto_distance), "nash_distance": num(m.nash_distance),
        "rounds": m.rounds, "messages": m.messages, "wall_seconds": f"{m.wall_seconds:.6f}",
        "had_zopa": int(m.had_zopa), "irrational": int(m.irrational),
    }


# -- running --------------------------------------------------------------------------------------


def run_tournament(
    strategies: Sequence[str] | None,
    scenarios: Iterable[Scenario],
    *,
    progress: Callable[[int, int], None] | None = None,
    workers: int = 1,
    keep_rows: bool = True,
    chunk_size: int | None = None,
) -> TournamentResult:
    """Play every (seller strategy, buyer strategy) pair the roles allow over every scenario.

    ``workers`` > 1 splits the negotiations — in play order, in chunks of ``chunk_size``
    (default: about 40 chunks per worker, at most 25,000 negotiations each) — over that many
    processes and puts the results back in play order: the rows, the ranking and the matrix are
    the ones a single process gives (only the measured wall times differ). ``keep_rows=False``
    keeps only each cell's tally (utilities, agreements, rounds): the ranking and the matrix,
    the same figures, at 16 bytes per negotiation instead of a Metrics object — what a
    tournament of a million negotiations needs; there is then no CSV.

    ``progress(done, total)`` is called after each negotiation (with workers, after each chunk).
    Raises :class:`ValueError` for unknown names, or when no strategy can sell or none can buy.
    """
    names = resolve_strategies(strategies)
    scenarios = tuple(scenarios)
    roles = {n: strategy_roles(n) for n in names}
    sellers = [n for n in names if SELLER in roles[n]]
    buyers = [n for n in names if BUYER in roles[n]]
    if not sellers or not buyers:
        raise ValueError(f"a tournament needs a strategy that can sell and one that can buy; "
                         f"got {', '.join(names)}")
    if workers < 1:
        raise ValueError("workers must be at least 1")
    pairs = [(s, b) for s in sellers for b in buyers]
    total = len(pairs) * len(scenarios)
    if workers == 1 or total == 0:
        play = _Player(pairs, scenarios, keep_rows)
        rows, tallies = play(0, total, progress)
    else:
        rows, tallies = _play_in_processes(pairs, scenarios, keep_rows, workers, chunk_size, progress)
    return TournamentResult(strategies=tuple(names), rows=tuple(rows), roles=roles,
                            cell_tallies=tallies, scenario_count=len(scenarios))


class _Player:
    """Plays negotiations ``start`` to ``stop`` of a tournament, numbered in play order
    (pair-major: negotiation ``i`` is pair ``i // len(scenarios)`` on scenario
    ``i % len(scenarios)``), with each scenario's facts computed once."""

    def __init__(self, pairs: list[tuple[str, str]], scenarios: tuple[Scenario, ...], keep_rows: bool) -> None:
        self.pairs = pairs
        self.scenarios = scenarios
        self.keep_rows = keep_rows
        self._facts: list[ScenarioFacts | None] = [None] * len(scenarios)

    def __call__(self, start: int, stop: int, progress: Callable[[int, int], None] | None = None,
                 ) -> tuple[list[Metrics], dict[tuple[str, str], CellTally]]:
        scenarios, facts, keep_rows = self.scenarios, self._facts, self.keep_rows
        n = len(scenarios)
        total = len(self.pairs) * n
        rows: list[Metrics] = []
        tallies: dict[tuple[str, str], CellTally] = {}
        i = start
        while i < stop:
            pair_index, first = divmod(i, n)
            seller_name, buyer_name = self.pairs[pair_index]
            seller_factory, buyer_factory = STRATEGIES[seller_name], STRATEGIES[buyer_name]
            tally = tallies.setdefault((seller_name, buyer_name), CellTally())
            last = min(n, first + (stop - i))
            for k in range(first, last):
                scenario = scenarios[k]
                scenario_facts_ = facts[k]
                if scenario_facts_ is None:
                    scenario_facts_ = facts[k] = scenario_facts(scenario)
                result = run_alternating(scenario, seller_factory(), buyer_factory())
                metrics = measure(NegotiationRecord(
                    scenario=scenario,
                    terms=result.terms if result.agreed else None,
                    rounds=result.rounds,
                    messages=result.turns,
                    wall_seconds=result.wall_seconds,
                    protocol=PROTOCOL,
                    seller_name=seller_name,
                    buyer_name=buyer_name,
                ), scenario_facts_)
                tally.add(metrics)
                if keep_rows:
                    rows.append(metrics)
                if progress is not None:
                    progress(i + (k - first) + 1, total)
            i += last - first
        return rows, tallies


#: A Metrics' field values, in order: Metrics(*values) is the same row again.
_metrics_values = attrgetter(*(f.name for f in fields(Metrics)))

#: The worker process's player (set by _start_worker).
_WORKER: _Player | None = None


def _start_worker(pairs: list[tuple[str, str]], scenarios: tuple[Scenario, ...], keep_rows: bool) -> None:
    global _WORKER
    _WORKER = _Player(pairs, scenarios, keep_rows)


def _play_chunk(bounds: tuple[int, int]) -> tuple[list[tuple], dict[tuple[str, str], CellTally]]:
    """A worker's chunk: its rows as plain tuples (a tenth of the pickling cost of the dataclasses)."""
    assert _WORKER is not None
    rows, tallies = _WORKER(*bounds)
    return [_metrics_values(m) for m in rows], tallies


def _play_in_processes(pairs: list[tuple[str, str]], scenarios: tuple[Scenario, ...], keep_rows: bool, workers: int,
                       chunk_size: int | None, progress: Callable[[int, int], None] | None,
                       ) -> tuple[list[Metrics], dict[tuple[str, str], CellTally]]:
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    total = len(pairs) * len(scenarios)
    size = chunk_size or max(1, min(25_000, -(-total // (workers * 40))))
    chunks = [(start, min(total, start + size)) for start in range(0, total, size)]
    # fork shares the scenarios with the workers without pickling them; elsewhere (spawn) each
    # worker gets them pickled once, through the initializer.
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("fork" if "fork" in methods and os.name == "posix" else "spawn")
    rows: list[Metrics] = []
    tallies: dict[tuple[str, str], CellTally] = {key: CellTally() for key in pairs}
    done = 0
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=_start_worker,
                             initargs=(pairs, scenarios, keep_rows)) as pool:
        # map keeps play order: chunk results come back, and are merged, in the order played.
        for (start, stop), (chunk_rows, chunk_tallies) in zip(chunks, pool.map(_play_chunk, chunks), strict=True):
            if keep_rows:
                rows.extend(Metrics(*values) for values in chunk_rows)
            for key, tally in chunk_tallies.items():
                tallies[key].extend(tally)
            done += stop - start
            if progress is not None:
                progress(done, total)
    return rows, {key: t for key, t in tallies.items() if t.count}


# -- plots ----------------------------------------------------------------------------------------


def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise RuntimeError(_PLOTS_NEED) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def write_plots(result: TournamentResult, out_dir: str | Path) -> list[Path]:
    """Draw ``heatmap_utility.png`` and ``tradeoff.png`` into ``out_dir``; return their paths.

    Raises :class:`RuntimeError` when matplotlib is not installed.
    """
    plt = _pyplot()
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [_heatmap(plt, result, out / "heatmap_utility.png"), _tradeoff(plt, result, out / "tradeoff.png")]


def _heatmap(plt, result: TournamentResult, path: Path) -> Path:
    import numpy as np

    sellers, buyers, cells = result.sellers, result.buyers, result.matrix()
    panels = (
        ("seller's mean utility (row strategy)", "mean_seller_utility"),
        ("buyer's mean utility (column strategy)", "mean_buyer_utility"),
    )
    width = max(6.0, 0.9 * len(buyers) + 3.0)
    height = max(4.0, 0.6 * len(sellers) + 2.5)
    fig, axes = plt.subplots(1, 2, figsize=(2 * width, height), constrained_layout=True)
    cmap = plt.get_cmap("viridis").with_extremes(bad="#dddddd")
    image = None
    for ax, (title, attr) in zip(axes, panels, strict=True):
        grid = np.full((len(sellers), len(buyers)), np.nan)
        for i, s in enumerate(sellers):
            for j, b in enumerate(buyers):
                cell = cells.get((s, b))
                if cell is not None:
                    grid[i, j] = getattr(cell, attr)
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=1.0, aspect="auto")
        ax.set_xticks(range(len(buyers)), buyers, rotation=40, ha="right")
        ax.set_yticks(range(len(sellers)), sellers)
        ax.set_xlabel("buyer strategy")
        ax.set_ylabel("seller strategy")
        ax.set_title(title)
        for i in range(len(sellers)):
            for j in range(len(buyers)):
                v = grid[i, j]
                if math.isnan(v):
                    continue
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=8,
                        color="black" if v > 0.6 else "white")
    fig.colorbar(image, ax=list(axes), shrink=0.8, label="mean normalised utility (no deal = 0)")
    fig.suptitle(f"Tournament: seller × buyer strategy, {result.scenarios_played} scenarios, {PROTOCOL} offers")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _tradeoff(plt, result: TournamentResult, path: Path) -> Path:
    standings = result.ranking()
    fig, ax = plt.subplots(figsize=(7.5, 5.5), constrained_layout=True)
    xs = [s.agreement_rate for s in standings]
    ys = [s.mean_utility for s in standings]
    ax.scatter(xs, ys, s=60, c=range(len(standings)), cmap="tab10", zorder=3)
    # One label per distinct point (coinciding strategies share it); labels of close points
    # alternate above and below so they do not overprint.
    labels: dict[tuple[float, float], list[str]] = {}
    for s, x, y in zip(standings, xs, ys, strict=True):
        labels.setdefault((round(x, 2), round(y, 2)), []).append(s.strategy)
    placed: list[tuple[float, float]] = []
    for (x, y), group in labels.items():
        near = sum(1 for px, py in placed if abs(px - x) < 0.12 and abs(py - y) < 0.03)
        placed.append((x, y))
        if near % 2 == 0:
            offset, align = (6, 4), "left"
        else:
            offset, align = (-6, -12 * len(group)), "right"
        ax.annotate("\n".join(group), (x, y), textcoords="offset points", xytext=offset, ha=align, fontsize=9)
    ax.set_xlim(-0.05, 1.1)
    top = max(ys, default=0.0)
    ax.set_ylim(min(0.0, min(ys, default=0.0)) - 0.08, max(0.6, top + 0.08))
    ax.set_xlabel("agreement rate")
    ax.set_ylabel("mean utility of own side (no deal = 0)")
    ax.set_title("Agreement vs utility per strategy (both roles)")
    ax.grid(True, alpha=0.3)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# -- presenting -----------------------------------------------------------------------------------


def render_ranking(result: TournamentResult, console: "Console") -> None:
    """Print the ranking as a Rich table."""
    from rich.table import Table

    def fmt(v: float | None) -> str:
        return "—" if v is None else f"{v:.3f}"

    table = Table(title=f"Tournament ranking ({result.negotiations} negotiations, {result.scenarios_played} scenarios)")
    table.add_column("#", justify="right")
    table.add_column("strategy")
    table.add_column("mean utility", justify="right")
    table.add_column("as seller", justify="right")
    table.add_column("as buyer", justify="right")
    table.add_column("agreement", justify="right")
    table.add_column("mean rounds", justify="right")
    table.add_column("games", justify="right")
    for rank, s in enumerate(result.ranking(), 1):
        table.add_row(str(rank), s.strategy, fmt(s.mean_utility), fmt(s.mean_utility_as_seller),
                      fmt(s.mean_utility_as_buyer), f"{s.agreement_rate:.0%}", f"{s.mean_rounds:.1f}",
                      str(s.games))
    console.print(table)


def main_tournament(
    strategies: Sequence[str] | None,
    n_scenarios: int,
    seed: int | str,
    out_dir: str | Path,
    console: "Console",
    *,
    workers: int = 1,
    write_rows: bool = True,
) -> TournamentResult:
    """``haggler lab tournament``: generate ``mixed_set(n_scenarios, seed)``, save it as
    ``scenarios.json``, play the tournament with a progress bar (on ``workers`` processes), print
    the ranking and write ``results.csv`` (unless ``write_rows`` is false: then only the tallies
    are kept, as a tournament of millions of negotiations needs) and the plots into ``out_dir``.

    Raises :class:`ValueError` for unknown strategy names (before anything is written) and
    :class:`RuntimeError` when matplotlib is missing (after the CSV is written).
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from haggler.lab.generate import mixed_set
    from haggler.lab.scenario_io import save_scenarios

    names = resolve_strategies(strategies)
    scenarios = mixed_set(n_scenarios, seed)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    scenarios_path = save_scenarios(out / "scenarios.json", scenarios)

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                  MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                  transient=not console.is_terminal) as bar:
        task = bar.add_task("negotiating", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        result = run_tournament(names, scenarios, progress=advance, workers=workers, keep_rows=write_rows)

    render_ranking(result, console)
    written = [scenarios_path]
    if write_rows:
        written.append(result.write_csv(out / "results.csv"))
    try:
        written += write_plots(result, out)
    finally:
        console.print(f"Wrote {', '.join(str(p) for p in written)}")
    return result
