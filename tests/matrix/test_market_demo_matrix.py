"""The seeded market demo over Matrix (``haggler market demo --matrix``, issue 32): the same
traders, deciders and seed as over HTTP give the same deals, because both doors open onto the
same market service; and the command brings up its own homeserver, bot and agents."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import httpx
import pytest
from typer.testing import CliRunner

from haggler.agents.market_runtime import MarketDemo
from haggler.cli import app
from haggler.matrix.homeserver import LocalSynapse
from haggler.matrix.local_market import MatrixMarket
from haggler.protocols.market.offline_check import check_deal
from tests.support.market_matrix import homeserver_of
from tests.support.servers import FakeClock

pytestmark = pytest.mark.slow


def _deals(result) -> list[tuple]:
    return [(d.item, d.protocol, d.price_cents, d.status) for d in result.deals]


def test_the_seeded_demo_makes_the_same_deals_over_matrix_as_over_http(synapse: LocalSynapse, make_store) -> None:
    clock = FakeClock(datetime.now(timezone.utc))  # one instant for both runs: deadlines read alike
    store = make_store(clock=clock)
    with httpx.Client(base_url=store.base, timeout=30) as http:
        over_http = MarketDemo(http, sellers=6, buyers=6, seed=3, clock=clock).run()
    with MatrixMarket(homeserver=homeserver_of(synapse), clock=clock) as market:
        over_matrix = MarketDemo(None, sellers=6, buyers=6, seed=3, clock=clock, client=market.client).run()
    assert over_http.deals, "the seed should trade"
    assert _deals(over_matrix) == _deals(over_http)
    assert over_matrix.failures == over_http.failures and over_matrix.proposed == over_http.proposed
    for document in over_matrix.documents.values():
        assert check_deal(document).valid


def test_market_demo_matrix_brings_up_its_own_homeserver_and_prints_the_deals() -> None:
    result = CliRunner().invoke(app, ["market", "demo", "--matrix", "--sellers", "3", "--buyers", "3", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["sellers"] == 3 and data["deals"] and all(d["status"] == "confirmed" for d in data["deals"])


def test_market_demo_refuses_mixed_doors() -> None:
    result = CliRunner().invoke(app, ["market", "demo", "--matrix", "--server", "http://127.0.0.1:9"])
    assert result.exit_code != 0 and "--homeserver" in result.output
