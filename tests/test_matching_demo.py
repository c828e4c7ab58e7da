"""examples/matching_demo.py as a user runs it: a server, two personal-agent processes, three
negotiations and their three outcomes (about 25 s on an idle machine: it waits out a 20 s
negotiation timeout). Nothing here is about speed: on a loaded machine the demo takes longer,
waits for its children to start and to stop, and must print the same outcomes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[1] / "examples" / "matching_demo.py"


@pytest.mark.slow
def test_the_matching_demo_shows_pending_rejected_and_stalled(tmp_path):
    # The demo bounds each of its waits itself; this bound only keeps a hung demo from hanging the suite.
    result = subprocess.run([sys.executable, str(DEMO)], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    # Both agents poll before the first negotiation opens, however slowly they started.
    opened = out.index("opened Jonas")
    assert -1 < out.find("Jonas's personal agent is polling") < opened
    assert -1 < out.find("Rachel's personal agent is polling") < opened
    assert "Jonas ↔ Rachel (personal agent vs personal agent): pending" in out
    assert "Jonas: propose (personal)" in out and "Rachel: counter (personal)" in out
    assert "Yusuf ↔ Elif (system negotiator on both sides): rejected" in out
    assert "Yusuf: propose (system) → Elif: reject (system)" in out
    assert "Jonas ↔ Noor (personal agent vs personal agent, one offline): stalled (reason timeout)" in out
    assert "all three outcomes seen" in out
    assert out.count("stopped") == 2  # both agent processes shut down on Ctrl-C, each given time to say so
    assert "completed negotiations" in out  # haggler match insights ran on the demo's database
    assert list(tmp_path.iterdir()) == []  # nothing left behind in the working directory


#: What the demo prints under v2: the seats' words, and the same three outcomes as under v1.
V2_LINES = ("negotiation protocol v2",
            "Jonas ↔ Rachel (personal agent vs personal agent): pending", "Jonas: outreach (personal)",
            "Rachel: accept (personal)", "Yusuf: outreach (system) → Elif: decline (system)",
            "Yusuf ↔ Elif (system negotiator on both sides): rejected",
            "Jonas ↔ Noor (personal agent vs personal agent, one offline): stalled (reason timeout)",
            "all three outcomes seen")


@pytest.mark.slow
def test_the_matching_demo_speaks_v2_with_the_same_outcomes(tmp_path):
    """The demo under Negotiations v2 (--protocol v2): seat vocabularies, and the stalled run ends
    on v2's wall clock of an uncapped negotiation."""
    result = subprocess.run([sys.executable, str(DEMO), "--protocol", "v2"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=900)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line for line in V2_LINES if line not in result.stdout] == [], result.stdout
    assert not any(tmp_path.iterdir())
