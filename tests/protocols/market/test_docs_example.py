"""docs/market-api.md's worked example, run verbatim against a live server, and the deal it
saves checked offline by ``haggler market verify``, as the reference says."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest
from typer.testing import CliRunner

from haggler.cli import app as cli
from tests.support.docs import DOCS, fenced_blocks

DOC = "market-api.md"


def real_clock() -> datetime:
    """The example dates its mandates and deadlines by the real clock, as a client would: the
    server must keep the same time (the test stores' fake clock stands still at a fixed date)."""
    return datetime.now(timezone.utc)


@pytest.fixture
def example() -> Any:
    """The block, compiled so that a failing line is reported at its line in the document."""
    blocks = fenced_blocks(DOC, "python")
    assert len(blocks) == 1, "the market reference has exactly one worked example"
    text = (DOCS / DOC).read_text(encoding="utf-8")
    first_line = text[:text.index(blocks[0])].count("\n")
    return compile("\n" * first_line + blocks[0], str(DOCS / DOC), "exec")


def test_the_worked_example_runs_verbatim(make_store, example, tmp_path, monkeypatch):
    store = make_store(clock=real_clock)
    monkeypatch.chdir(tmp_path)  # the example saves deal.json in its working directory
    namespace = {"BASE": store.base}
    exec(example, namespace)  # its own asserts check each step

    result = CliRunner().invoke(cli, ["market", "verify", "deal.json"])
    assert result.exit_code == 0, result.output
    assert "valid: both parties signed these exact terms" in result.output

    # The example read the buyer's inbox once; from the cursor it kept, the rest of the story.
    later = store.http.get("/market/inbox", params={"after": namespace["cursor"]}, headers=namespace["buyer"]["auth"])
    assert [(m["kind"], m["body"].get("event") or m["body"]["type"]) for m in later.json()["messages"]] == [
        ("message", "protocol_agreement"), ("notification", "deal_closed"), ("notification", "deal_confirmed")]


def test_the_worked_example_runs_twice_on_one_server(make_store, example, tmp_path, monkeypatch):
    """Its ids are fresh each run, so a reader can run it again against the same server."""
    store = make_store(clock=real_clock)
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        exec(example, {"BASE": store.base})
