"""docs/market-matrix.md's worked example, run verbatim: a seller agent speaking the homeserver's
client-server API with plain httpx to a running market bot, checked on the HTTP door."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from haggler.matrix.homeserver import LocalSynapse
from tests.support.docs import DOCS, fenced_blocks
from tests.support.market_matrix import PASSWORD, BotThread, unique

pytestmark = pytest.mark.slow

DOC = "market-matrix.md"


@pytest.fixture
def example() -> Any:
    blocks = fenced_blocks(DOC, "python")
    assert len(blocks) == 1, "the Matrix reference has exactly one worked example"
    text = (DOCS / DOC).read_text(encoding="utf-8")
    first_line = text[:text.index(blocks[0])].count("\n")
    return compile("\n" * first_line + blocks[0], str(DOCS / DOC), "exec")


def test_the_worked_example_runs_verbatim(synapse: LocalSynapse, make_store, tmp_path, example) -> None:
    db_url = f"sqlite:///{tmp_path}/market.db"
    store = make_store(db_url=db_url, clock=lambda: datetime.now(timezone.utc))
    bot = BotThread(synapse, db_url, lambda: datetime.now(timezone.utc)).start()
    try:
        for _ in range(2):  # its ids are fresh each run, so a reader can run it again
            seller = synapse.register(unique("seller"), PASSWORD)
            namespace = {"HOMESERVER": synapse.url, "TOKEN": seller.access_token, "BOT": bot.user_id,
                         "ROOM": bot.room, "BASE": store.base}
            exec(example, namespace)  # its own asserts check each step
            assert namespace["registered"]["matrixId"] == seller.user_id
    finally:
        bot.close()
