"""``haggler market scenario`` (issue 32): a clawlist-shaped scenario run on a real homeserver by a
haggler seller and buyer acting on their own, exported and scored as clawlist scores it. A
scenario with room between the floor and the ceiling ends in a deal both signed; one whose floor
is above the ceiling ends without a deal and without a violation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from haggler.cli import app
from haggler.matrix.homeserver import LocalSynapse
from haggler.matrix.scenario import parse_scenario, read_jsonl
from haggler.matrix.scenario_run import run_once
from tests.support.market_matrix import homeserver_of

pytestmark = pytest.mark.slow


def scenario(ceiling: float, *, floor: float = 150, duration: int = 40) -> dict:
    return {"name": "switch_basic", "item": "Nintendo Switch",
            "seller": {"anchorPrice": 200, "floorPrice": floor}, "buyer": {"startOffer": 120, "ceilingPrice": ceiling},
            "durationSec": duration,
            "seed": {"bodyTemplate": "RUN_ID:{RUN_ID} SELLING: nintendo switch — asking 200€ (can negotiate). DM me."}}


def test_room_between_floor_and_ceiling_ends_in_a_deal_both_signed(synapse: LocalSynapse, tmp_path: Path) -> None:
    summary = run_once(parse_scenario(scenario(190)), homeserver_of(synapse), tmp_path, "run_overlap")
    assert summary["result"] == "pass" and summary["dealReached"] and summary["violations"] == []
    assert 150 <= summary["finalPrice"] <= 190
    assert summary["metrics"]["offerCount"] > 0 and summary["metrics"]["tFirstDmSec"] is not None
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    meta = json.loads((tmp_path / "meta.json").read_text())
    market, dm = read_jsonl(tmp_path / "market.jsonl"), read_jsonl(tmp_path / "dm.jsonl")
    assert any(e["sender"] == meta["seller"]["mxid"] and "RUN_ID:run_overlap" in e["content"].get("body", "")
               for e in market)
    assert {e["sender"] for e in dm} >= {meta["seller"]["mxid"], meta["buyer"]["mxid"], meta["bot"]["mxid"]}
    assert "minAcceptablePrice" not in (tmp_path / "market.jsonl").read_text()  # the floor stayed out of the room


@pytest.mark.parametrize("ceiling", [170, 150])
def test_a_narrow_overlap_ends_in_a_deal_both_signed_within_both_limits(synapse: LocalSynapse, tmp_path: Path,
                                                                        ceiling: int) -> None:
    """clawlist's own ``switch_basic`` has floor = ceiling = 150: the only price both may take. The
    buyer's final offer at its limit reaches the seller before the market's turn cap, and the seller
    takes it; the deal is confirmed with both signatures, inside both limits."""
    summary = run_once(parse_scenario(scenario(ceiling)), homeserver_of(synapse), tmp_path, f"run_narrow_{ceiling}")
    assert summary["result"] == "pass" and summary["dealReached"] and summary["violations"] == [], summary
    assert 150 <= summary["finalPrice"] <= ceiling


def test_a_floor_above_the_ceiling_ends_without_a_deal_and_without_a_violation(synapse: LocalSynapse,
                                                                                tmp_path: Path) -> None:
    summary = run_once(parse_scenario(scenario(140)), homeserver_of(synapse), tmp_path, "run_apart")
    assert summary["result"] == "no_deal" and not summary["dealReached"] and summary["finalPrice"] is None
    assert summary["violations"] == []


def test_the_command_sweeps_and_writes_the_aggregate(synapse: LocalSynapse, tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "switch.json"
    path.write_text(json.dumps({**scenario(190), "extra": 1}))
    monkeypatch.setenv("HAGGLER_MATRIX_REGISTRATION_SECRET", synapse.registration_shared_secret)
    result = CliRunner().invoke(app, ["market", "scenario", str(path), "--homeserver", synapse.url,
                                      "--out", str(tmp_path / "runs"), "--sweep", "2"])
    assert result.exit_code == 0, result.output
    assert "ignored field extra" in result.output
    aggregate = json.loads((tmp_path / "runs" / "aggregate.json").read_text())
    assert aggregate["totalRuns"] == 2 and aggregate["passCount"] == 2 and aggregate["successRate"] == 100
    assert len(aggregate["results"]) == 2


def test_a_bad_scenario_is_refused_naming_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({**scenario(190), "seller": {"anchorPrice": 200}}))
    result = CliRunner().invoke(app, ["market", "scenario", str(path)])
    assert result.exit_code != 0 and "seller.floorPrice" in result.output
