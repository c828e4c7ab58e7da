"""docs/exchange-api.md's worked example, run verbatim against a live store."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[3] / "docs" / "exchange-api.md"


def test_the_worked_example_runs_verbatim(store):
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    assert len(blocks) == 1, "the API reference has exactly one worked example"
    exec(compile(blocks[0], str(DOC), "exec"), {"BASE": store.base})  # its own asserts check each step
