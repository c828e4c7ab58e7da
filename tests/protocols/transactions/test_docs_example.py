"""docs/exchange-api.md's worked example, run verbatim against a live store."""

from __future__ import annotations

from tests.support.docs import DOCS, fenced_blocks


def test_the_worked_example_runs_verbatim(store):
    blocks = fenced_blocks("exchange-api.md", "python")
    assert len(blocks) == 1, "the API reference has exactly one worked example"
    doc = DOCS / "exchange-api.md"
    exec(compile(blocks[0], str(doc), "exec"), {"BASE": store.base})  # its own asserts check each step
