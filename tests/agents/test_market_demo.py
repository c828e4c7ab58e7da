"""``haggler market demo``: built-in market agents trading over real HTTP (spec 003: Negotiation
Protocols, Phase 6), every deal within both owners' mandates and signed by both parties."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from haggler.agents.market_runtime import MarketDemo
from haggler.protocols.market.offline_check import check_deal


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from haggler.catalog import load_catalog
    from haggler.server.app import create_app
    from haggler.server.config import StoreConfig
    from haggler.server.threaded import ThreadedServer
    import httpx

    folder = tmp_path_factory.mktemp("market-demo")
    app = create_app(StoreConfig(catalog=load_catalog(None), db_url=f"sqlite:///{folder}/market.db",
                                 data_dir=folder / "data", sweep_interval_seconds=None))
    with ThreadedServer(app) as server, httpx.Client(base_url=server.base, timeout=30) as http:
        market = MarketDemo(http, sellers=24, buyers=24, seed=3)
        result = market.run()
        documents = {deal.deal_id: http.get(f"/market/deals/{deal.deal_id}", headers=_trader(market, deal.buyer)
                                            .client.auth).json() for deal in result.deals}
        yield market, result, documents


def _trader(market, agent_id):
    return next(t for t in [*market.buyers, *market.sellers] if t.client.id == agent_id)


def test_the_demo_uses_every_protocol_and_closes_deals(demo):
    """spec 003: Negotiation Protocols — buyers choose by the "use when" rules; all four appear."""
    _, result, _ = demo
    assert len(result.deals) >= 8
    assert set(result.protocol_mix) == {"natural_language", "sealed_bid", "instant_match", "double_auction"}


def test_every_deal_is_within_both_mandates_and_confirmed_by_both_signatures(demo):
    """spec 003: Owner Mandate Format, 8. Deal Confirmation — checked offline, independently."""
    market, result, documents = demo
    for deal in result.deals:
        buyer, seller = _trader(market, deal.buyer), _trader(market, deal.seller)
        assert seller.agent.mandate.min_acceptable_price <= deal.price_cents <= buyer.agent.mandate.max_spend
        assert deal.buyer_surplus >= 0 and deal.seller_surplus >= 0
        document = documents[deal.deal_id]
        assert document["status"] == "confirmed"
        assert check_deal(document).valid
        assert result.documents[deal.deal_id] == document  # what --deals writes is what the parties are served


def test_the_same_seed_replays_the_same_market(demo, make_store):
    """A seed fixes the items, prices, mandates and so every decision."""
    _, first, _ = demo
    store = make_store()
    again = MarketDemo(store.http, sellers=24, buyers=24, seed=3, clock=store.clock).run()
    assert [(d.item, d.protocol, d.price_cents) for d in again.deals] == \
        [(d.item, d.protocol, d.price_cents) for d in first.deals]


def test_market_demo_cli_prints_deals_and_json(tmp_path):
    result = subprocess.run([sys.executable, "-m", "haggler", "market", "demo", "--sellers", "6", "--buyers", "6",
                             "--seed", "3", "--json"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["sellers"] == 6 and data["buyers"] == 6
    assert sum(data["proposed"].values()) == 6
    deals = subprocess.run([sys.executable, "-m", "haggler", "market", "demo", "--sellers", "6", "--buyers", "6",
                            "--seed", "3", "--json", "--deals", "deals"], cwd=tmp_path, capture_output=True, text=True,
                           timeout=120)
    assert deals.returncode == 0, deals.stderr
    written = sorted(tmp_path.glob("deals/*.json"))
    assert [path.stem for path in written] == sorted(deal["deal_id"] for deal in json.loads(deals.stdout)["deals"])
    assert written and all(check_deal(json.loads(path.read_text())).valid for path in written)
    table = subprocess.run([sys.executable, "-m", "haggler", "market", "demo", "--sellers", "6", "--buyers", "6",
                            "--seed", "3"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert table.returncode == 0 and "Protocols" in table.stdout and "surplus: buyers" in table.stdout
    assert "HTTP Request" not in table.stdout + table.stderr
