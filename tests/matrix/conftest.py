"""The market bot's tests share one layout: a store on ``db_url`` (SQLite and PostgreSQL where a
file keeps the root ``db_url``; a file that needs SQLite only overrides it), the market bot on the
session's Synapse and that database, and agents on Matrix."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from haggler.matrix.homeserver import LocalSynapse
from tests.support.market_matrix import Agents, BotThread


@pytest.fixture
def store(make_store, db_url):
    return make_store(db_url=db_url)


@pytest.fixture
def bot(synapse: LocalSynapse, store, db_url) -> Iterator[BotThread]:
    running = BotThread(synapse, db_url, store.clock).start()
    yield running
    running.close()


@pytest.fixture
def agents(synapse: LocalSynapse, bot: BotThread) -> Iterator[Agents]:
    made = Agents(synapse, bot)
    yield made
    made.close()
