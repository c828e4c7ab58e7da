"""`haggler lab` commands as a researcher runs them."""

from __future__ import annotations

import csv
import subprocess
import sys

PNG = b"\x89PNG\r\n\x1a\n"


def lab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "haggler", "lab", *args], capture_output=True, text=True, timeout=300)


def test_tournament_writes_results_scenarios_and_plots(tmp_path):
    out = tmp_path / "t"
    result = lab("tournament", "--strategies", "boulware,conceder,accept-first", "--scenarios", "3", "--seed", "1",
                 "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "boulware" in result.stdout and "conceder" in result.stdout
    with open(out / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 3 * 3 * 3  # 3 scenarios x 3 sellers x 3 buyers
    assert (out / "scenarios.json").exists()
    for png in out.glob("*.png"):
        assert png.read_bytes().startswith(PNG)
    assert len(list(out.glob("*.png"))) >= 2


def test_tournament_on_two_workers_without_a_csv(tmp_path):
    out = tmp_path / "t"
    result = lab("tournament", "--strategies", "boulware,conceder", "--scenarios", "4", "--seed", "1",
                 "--workers", "2", "--no-csv", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "16 negotiations, 4 scenarios" in result.stdout
    assert (out / "scenarios.json").exists() and not (out / "results.csv").exists()
    assert len(list(out.glob("*.png"))) == 2
    assert lab("tournament", "--workers", "0", "--out", str(tmp_path)).returncode == 2


def test_tournament_refuses_unknown_strategies(tmp_path):
    result = lab("tournament", "--strategies", "boulware,telepathy", "--out", str(tmp_path))
    assert result.returncode == 2 and "telepathy" in result.stderr


def test_compare_protocols_writes_a_report(tmp_path):
    out = tmp_path / "p"
    result = lab("compare-protocols", "--runs", "6", "--seed", "2", "--out", str(out))
    assert result.returncode == 0, result.stderr
    for name in ("sealed", "instant", "free"):
        assert name in result.stdout.lower()
    assert (out / "comparison.csv").exists()
    assert len([p for p in out.glob("*.png") if p.read_bytes().startswith(PNG)]) >= 5
    assert list(out.glob("*.md"))


def test_compare_protocols_report_option(tmp_path):
    out, report = tmp_path / "charts", tmp_path / "comparison.md"
    result = lab("compare-protocols", "--runs", "4", "--seed", "2", "--out", str(out), "--report", str(report))
    assert result.returncode == 0, result.stderr
    text = report.read_text()
    assert "![protocols_time](charts/protocols_time.png)" in text and not (out / "report.md").exists()
