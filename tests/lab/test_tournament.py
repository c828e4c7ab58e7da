"""The round-robin tournament (haggler.lab.tournament)."""

from __future__ import annotations

import builtins
import csv
import dataclasses
import json
import statistics
from pathlib import Path

import pytest
from rich.console import Console

from haggler.agents.strategies import STRATEGIES
from haggler.lab import tournament as tournament_mod
from haggler.lab.generate import mixed_set
from haggler.lab.scenario_io import load_scenarios
from haggler.lab.tournament import (
    CSV_FIELDS, TournamentResult, main_tournament, render_ranking, run_tournament, strategy_roles,
    write_plots,
)

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SOME = ["linear", "hardliner", "store-merchant", "default-shopper", "accept-first"]


@pytest.fixture(scope="module")
def scenarios():
    return mixed_set(3, 11)


@pytest.fixture(scope="module")
def result(scenarios) -> TournamentResult:
    return run_tournament(SOME, scenarios)


def _comparable(rows):
    # Everything but the wall time, which is measured.
    return [tuple(v for k, v in row.items() if k != "wall_seconds") for row in rows]


def test_roles_of_the_registry():
    assert strategy_roles("store-merchant") == ("seller",)
    assert strategy_roles("default-shopper") == ("buyer",)
    assert set(strategy_roles("linear")) == {"seller", "buyer"}


def test_every_allowed_pair_over_every_scenario(result, scenarios):
    sellers = ["linear", "hardliner", "store-merchant", "accept-first"]
    buyers = ["linear", "hardliner", "default-shopper", "accept-first"]
    played = [(m.seller_name, m.buyer_name, m.scenario_id) for m in result.rows]
    expected = [(s, b, sc.id) for s in sellers for b in buyers for sc in scenarios]
    assert played == expected
    assert not any(m.buyer_name == "store-merchant" or m.seller_name == "default-shopper" for m in result.rows)
    assert {m.protocol for m in result.rows} == {"alternating"}
    assert result.sellers == sellers and result.buyers == buyers


def test_progress_is_reported_after_each_negotiation(scenarios):
    calls = []
    r = run_tournament(["linear", "conceder"], scenarios, progress=lambda done, total: calls.append((done, total)))
    total = 4 * len(scenarios)
    assert len(r.rows) == total
    assert calls == [(i, total) for i in range(1, total + 1)]


def test_all_strategies_by_default(scenarios):
    r = run_tournament(None, scenarios[:1])
    assert r.strategies == tuple(STRATEGIES)
    both = len(STRATEGIES) - 2  # less the seller-only and the buyer-only one
    assert len(r.rows) == (both + 1) ** 2


def test_ranking_is_sorted_and_matches_a_hand_aggregation(result):
    ranking = result.ranking()
    assert [s.strategy for s in ranking] != []
    assert {s.strategy for s in ranking} == set(SOME)
    means = [s.mean_utility for s in ranking]
    assert means == sorted(means, reverse=True)
    for s in ranking:
        as_seller = [m for m in result.rows if m.seller_name == s.strategy]
        as_buyer = [m for m in result.rows if m.buyer_name == s.strategy]
        utilities = [m.seller_utility for m in as_seller] + [m.buyer_utility for m in as_buyer]
        games = as_seller + as_buyer
        assert s.games == len(games)
        assert s.mean_utility == pytest.approx(statistics.fmean(utilities))
        assert s.agreement_rate == pytest.approx(sum(m.agreed for m in games) / len(games))
        assert s.mean_rounds == pytest.approx(statistics.fmean(m.rounds for m in games))
        if as_seller:
            assert s.mean_utility_as_seller == pytest.approx(statistics.fmean(m.seller_utility for m in as_seller))
        else:
            assert s.mean_utility_as_seller is None
        if as_buyer:
            assert s.mean_utility_as_buyer == pytest.approx(statistics.fmean(m.buyer_utility for m in as_buyer))
        else:
            assert s.mean_utility_as_buyer is None
    by_name = {s.strategy: s for s in ranking}
    assert by_name["store-merchant"].mean_utility_as_buyer is None
    assert by_name["default-shopper"].mean_utility_as_seller is None
    # No deal counts as 0: a hardliner against itself never agrees.
    assert all(not m.agreed and m.seller_utility == 0 == m.buyer_utility
               for m in result.rows if m.seller_name == m.buyer_name == "hardliner")


def test_matrix_cells(result, scenarios):
    matrix = result.matrix()
    assert set(matrix) == {(s, b) for s in result.sellers for b in result.buyers}
    cell = matrix[("linear", "default-shopper")]
    ms = [m for m in result.rows if (m.seller_name, m.buyer_name) == ("linear", "default-shopper")]
    assert cell.count == len(scenarios) == len(ms)
    assert cell.mean_seller_utility == pytest.approx(statistics.fmean(m.seller_utility for m in ms))
    assert cell.mean_buyer_utility == pytest.approx(statistics.fmean(m.buyer_utility for m in ms))


def test_csv_has_one_row_per_negotiation(result, tmp_path):
    path = result.write_csv(tmp_path / "results.csv")
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        assert tuple(reader.fieldnames) == CSV_FIELDS
    assert CSV_FIELDS[:4] == ("scenario_id", "protocol", "seller", "buyer")
    for needed in ("agreed", "price_cents", "seller_utility", "buyer_utility", "seller_share", "buyer_share",
                   "cb_margin_seller", "cb_margin_buyer", "pareto_distance", "nash_distance", "rounds",
                   "messages", "wall_seconds"):
        assert needed in CSV_FIELDS
    assert len(rows) == len(result.rows)
    for row, m in zip(rows, result.rows, strict=True):
        assert (row["scenario_id"], row["seller"], row["buyer"]) == (m.scenario_id, m.seller_name, m.buyer_name)
        assert row["agreed"] == str(int(m.agreed))
        assert float(row["seller_utility"]) == m.seller_utility
        assert row["price_cents"] == ("" if m.price_cents is None else str(m.price_cents))
        assert int(row["rounds"]) == m.rounds and int(row["messages"]) == m.messages >= m.rounds


def test_deterministic_for_a_seed():
    a = run_tournament(SOME, mixed_set(3, 5))
    b = run_tournament(SOME, mixed_set(3, 5))
    c = run_tournament(SOME, mixed_set(3, 6))
    assert _comparable(a.csv_rows()) == _comparable(b.csv_rows())
    assert _comparable(a.csv_rows()) != _comparable(c.csv_rows())
    assert a.ranking() == b.ranking()


def test_unknown_strategy_names_the_valid_ones(scenarios, tmp_path):
    with pytest.raises(ValueError, match="unknown strategy nope.*valid: .*boulware.*default-shopper"):
        run_tournament(["linear", "nope"], scenarios)
    with pytest.raises(ValueError, match="unknown strategy nope"):
        main_tournament(["nope"], 2, 1, tmp_path / "out", Console(file=None, record=True))
    assert not (tmp_path / "out").exists()


def test_needs_a_seller_and_a_buyer(scenarios):
    with pytest.raises(ValueError, match="sell.*buy"):
        run_tournament(["store-merchant"], scenarios)


def test_plots_are_png_files(result, tmp_path):
    paths = write_plots(result, tmp_path / "plots")
    assert [p.name for p in paths] == ["heatmap_utility.png", "tradeoff.png"]
    for p in paths:
        data = p.read_bytes()
        assert data[:8] == PNG_SIGNATURE
        assert len(data) > 1024


def test_plots_without_matplotlib(result, tmp_path, monkeypatch):
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError("no matplotlib")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(RuntimeError, match=r"plots need matplotlib: pip install 'haggler\[lab\]'"):
        write_plots(result, tmp_path)


def test_render_ranking(result):
    console = Console(record=True, width=140)
    render_ranking(result, console)
    text = console.export_text()
    assert "Tournament ranking" in text
    ranked = [s.strategy for s in result.ranking()]
    positions = [text.index(name) for name in ranked]
    assert positions == sorted(positions)


def test_main_tournament_writes_everything(tmp_path):
    console = Console(record=True, width=140)
    out = tmp_path / "run"
    r = main_tournament(["linear", "store-merchant", "default-shopper"], 2, 9, out, console)
    assert {p.name for p in out.iterdir()} == {"scenarios.json", "results.csv", "heatmap_utility.png",
                                               "tradeoff.png"}
    assert load_scenarios(out / "scenarios.json") == mixed_set(2, 9)
    assert json.loads((out / "scenarios.json").read_text())["scenarios"]
    with (out / "results.csv").open(newline="") as f:
        assert len(list(csv.DictReader(f))) == len(r.rows) == 2 * 2 * 2
    text = console.export_text()
    assert "Tournament ranking" in text and "results.csv" in text and str(out) in text.replace("\n", "")
    # The saved scenario set repeats the run.
    again = run_tournament(["linear", "store-merchant", "default-shopper"], load_scenarios(out / "scenarios.json"))
    assert _comparable(again.csv_rows()) == _comparable(r.csv_rows())


def _without_wall(m):
    return dataclasses.replace(m, wall_seconds=0.0)


def _figures(r):
    return r.ranking(), r.matrix(), r.negotiations, r.scenarios_played


@pytest.mark.parametrize("chunk_size", [None, 7, 1000])
def test_two_workers_give_what_one_process_gives(chunk_size):
    # The work is split in chunks across processes and put back in play order: the same rows
    # (all but the measured wall time), the same ranking and matrix, to the last bit.
    scenarios = mixed_set(6, 21)
    one = run_tournament(None, scenarios)
    calls = []
    two = run_tournament(None, scenarios, workers=2, chunk_size=chunk_size,
                         progress=lambda done, total: calls.append((done, total)))
    assert _comparable(two.csv_rows()) == _comparable(one.csv_rows())
    assert [_without_wall(m) for m in two.rows] == [_without_wall(m) for m in one.rows]
    assert _figures(two) == _figures(one)
    total = len(one.rows)
    assert calls[-1] == (total, total) and [d for d, _ in calls] == sorted(d for d, _ in calls)


@pytest.mark.parametrize("workers", [1, 2])
def test_without_rows_the_figures_are_the_same(workers):
    scenarios = mixed_set(5, 22)
    full = run_tournament(SOME, scenarios)
    lean = run_tournament(SOME, scenarios, workers=workers, keep_rows=False)
    assert lean.rows == ()
    assert _figures(lean) == _figures(full)
    # The ranking from the tallies is the hand aggregation over the rows, exactly.
    for s in full.ranking():
        games = [m.seller_utility for m in full.rows if m.seller_name == s.strategy] + \
                [m.buyer_utility for m in full.rows if m.buyer_name == s.strategy]
        assert s.mean_utility == statistics.fmean(games)
    with pytest.raises(ValueError, match="kept no rows"):
        lean.write_csv(Path("/nonexistent/results.csv"))


def test_workers_must_be_positive(scenarios):
    with pytest.raises(ValueError, match="workers"):
        run_tournament(SOME, scenarios, workers=0)


def test_module_exports():
    for name in tournament_mod.__all__:
        assert hasattr(tournament_mod, name)
    assert Path(tournament_mod.__file__).name == "tournament.py"
