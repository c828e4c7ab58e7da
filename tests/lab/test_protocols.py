"""The lab's protocols (sealed bid, instant match, alternating, free text) and their comparison."""

from __future__ import annotations

import io
import json

import pytest

from haggler.lab.compare import compare_protocols, render_comparison, write_comparison, write_report_md
from haggler.lab.generate import single_issue
from haggler.lab.protocols import (
    FreeTextStore, alternating, instant_match, sealed_bid, sealed_bid_messages,
)
from haggler.lab.scenario import Scenario
from haggler.protocols.market.pricing import midpoint_cents


def _sc(list_price: int, floor: int, budget: int, id: str = "t") -> Scenario:
    return Scenario(id=id, list_price_cents=list_price, seller_reservation_cents=floor, buyer_reservation_cents=budget)


def test_sealed_bid_deals_at_the_midpoint_when_the_limits_overlap():
    record = sealed_bid(_sc(20_000, 15_500, 18_501))
    assert record.terms is not None
    assert record.terms.price_cents == midpoint_cents(18_501, 15_500) == 17_001  # 17000.5 rounds up
    assert (record.messages, record.rounds, record.protocol) == (2, 1, "sealed-bid")
    buyer, seller = sealed_bid_messages(_sc(20_000, 15_500, 18_501))
    assert buyer["maxPrice"] == 185.01 and seller["minPrice"] == 155 and buyer["type"] == "sealed_bid"
    assert record.words == sum(len(json.dumps(m).split()) for m in (buyer, seller))
    assert sealed_bid(_sc(20_000, 15_500, 15_500)).terms.price_cents == 15_500


def test_sealed_bid_fails_without_overlap():
    record = sealed_bid(_sc(20_000, 15_500, 15_499))
    assert record.terms is None and record.messages == 2 and record.words > 0


def test_instant_match_takes_the_list_price_within_budget_only():
    within = instant_match(_sc(20_000, 15_000, 20_000))
    assert within.terms is not None and within.terms.price_cents == 20_000
    assert (within.messages, within.rounds) == (1, 1)
    over = instant_match(_sc(20_000, 15_000, 19_999))
    assert over.terms is None and over.messages == 1


def test_alternating_counts_turns_and_json_words():
    record = alternating(_sc(20_000, 15_000, 18_000))
    assert record.terms is not None and 15_000 <= record.terms.price_cents <= 18_000
    assert record.messages >= 2 and record.words > 5 * record.messages
    assert (record.seller_name, record.buyer_name) == ("store-merchant", "default-shopper")


@pytest.fixture(scope="module")
def mixed():
    zopa = single_issue(10, seed=7, zopa=True, prefix="z")
    none = single_issue(5, seed=7, zopa=False, prefix="n")
    with FreeTextStore(zopa + none, seed=7) as store:
        yield zopa, none, [store.negotiate(s, seed=i) for i, s in enumerate(zopa + none)]


def test_free_text_deals_stay_within_both_reservations(mixed):
    zopa, none, records = mixed
    zopa_records = records[: len(zopa)]
    deals = [r for r in zopa_records if r.terms is not None]
    assert len(deals) >= 0.8 * len(zopa)
    for r in deals:
        assert r.scenario.seller_reservation_cents <= r.terms.price_cents <= r.scenario.buyer_reservation_cents
    for r in records:
        assert r.protocol == "free-text" and r.messages >= 3 and r.words > r.messages


def test_free_text_never_deals_without_a_zone(mixed):
    zopa, none, records = mixed
    assert all(r.terms is None for r in records[len(zopa):])


def test_free_text_store_rejects_unknown_scenarios():
    with FreeTextStore([_sc(20_000, 15_000, 18_000, id="a")]) as store:
        with pytest.raises(ValueError):
            store.negotiate(_sc(20_000, 15_000, 18_000, id="b"))


@pytest.fixture(scope="module")
def comparison():
    return compare_protocols(12, seed=3)


def test_compare_protocols_small_run(comparison):
    c = comparison
    assert [s.protocol for s in c.summaries] == ["alternating", "free-text", "sealed-bid", "instant-match"]
    zopa = sum(1 for s in c.scenarios if s.has_zopa)
    assert 0 < zopa < 12  # both kinds of scenario
    for s in c.summaries:
        assert s.runs == 12 and s.zopa_runs == zopa
        assert 0 <= s.success_rate <= 1 and s.irrational_deals == 0
        assert s.deals <= zopa and s.mean_wall_seconds >= 0
        if s.mean_seller_share is not None:
            assert s.mean_seller_share + s.mean_buyer_share == pytest.approx(1)
    sealed, instant = c.summary("sealed-bid"), c.summary("instant-match")
    assert sealed.success_rate_zopa == 1.0
    for talky in (c.summary("alternating"), c.summary("free-text")):
        assert talky.mean_messages > sealed.mean_messages > instant.mean_messages
        assert talky.mean_words > sealed.mean_words


def test_comparison_files(comparison, tmp_path):
    from rich.console import Console

    buf = io.StringIO()
    render_comparison(comparison, Console(file=buf, width=200))
    assert "Sealed bid" in buf.getvalue() and "Free text" in buf.getvalue()
    paths = write_comparison(comparison, tmp_path)
    names = [p.name for p in paths]
    assert names == ["comparison.csv", "protocols_time.png", "protocols_messages.png", "protocols_words.png",
                     "protocols_success.png", "protocols_surplus.png"]
    for p in paths[1:]:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = paths[0].read_text().splitlines()
    assert len(rows) == 5 and rows[0].startswith("protocol,")
    report = write_report_md(comparison, tmp_path, paths).read_text()
    assert "| Sealed bid |" in report and "![protocols_words](protocols_words.png)" in report
    assert "12 scenarios" in report and "[`comparison.csv`](comparison.csv)" in report


def test_report_elsewhere_links_relative_to_itself(comparison, tmp_path):
    """How docs/protocol-comparison.md is made: the report beside its chart folder, every link
    resolving from the report's own folder, and the command that regenerates it in the text."""
    import re

    out = tmp_path / "docs" / "charts"
    paths = write_comparison(comparison, out)
    report_path = write_report_md(comparison, out, paths, tmp_path / "docs" / "comparison.md")
    assert report_path == tmp_path / "docs" / "comparison.md" and not (out / "report.md").exists()
    text = report_path.read_text()
    links = re.findall(r"\]\(([^)]+)\)", text)
    assert len(links) == 6 and all(link.startswith("charts/") for link in links)
    assert all((report_path.parent / link).is_file() for link in links)
    assert f"--report {report_path.as_posix()}" in text


def test_scenario_product_levers_state_their_value_so_the_merchant_can_read_it():
    from haggler.catalog import parse_lever
    from haggler.lab.protocols import scenario_product
    from haggler.lab.scenario import Extra

    scenario = Scenario("lv-1", 10_000, 8_000, 9_500,
                        (Extra("express_shipping", 1_250, 3_000), Extra("warranty", 120_000, 150_000)))
    levers = scenario_product(scenario)["levers"]
    assert [parse_lever(text).value_cents for text in levers] == [1_250, 120_000]
    assert levers[0].startswith("express shipping (~$12.50")


@pytest.fixture(scope="module")
def multi():
    from haggler.lab.generate import multi_issue

    scenarios = multi_issue(16, seed=11, zopa=True, prefix="mi")
    with FreeTextStore(scenarios, seed=11) as store:
        yield scenarios, [store.negotiate(s, seed=i) for i, s in enumerate(scenarios)]


def test_multi_issue_free_text_deals_earn_the_sellers_reservation_net_of_extras(multi):
    """The store's merchant counts an extra's cost against its floor exactly as the scenario
    counts it against the seller's reservation: no free-text deal leaves the seller short."""
    scenarios, records = multi
    deals = [r for r in records if r.terms is not None]
    assert len(deals) >= len(scenarios) // 2
    assert any(r.terms.extras for r in deals), "some deals include extras"
    for r in deals:
        assert r.scenario.acceptable_to_seller(r.terms), (r.scenario, r.terms)
        assert r.terms.price_cents <= r.scenario.buyer_reservation_cents


def test_multi_issue_store_merchant_never_needs_the_guard():
    """As a decider, the store's merchant proposes only terms its reservation allows once the
    extras' cost is counted: the framework's guard finds nothing to clamp."""
    from haggler.agents.decider import guard
    from haggler.agents.strategies import StoreMerchant
    from haggler.lab.generate import multi_issue

    class Watched(StoreMerchant):
        clamped = 0
        decisions = 0

        def decide(self, view):  # type: ignore[no-untyped-def]
            decision = super().decide(view)
            Watched.decisions += 1
            if guard(decision, view) != decision:
                Watched.clamped += 1
            return decision

    scenarios = multi_issue(24, seed=5, zopa=True, prefix="mg")
    records = [alternating(s, seller=Watched()) for s in scenarios]
    assert Watched.decisions > 100 and Watched.clamped == 0
    for r in records:
        if r.terms is not None:
            assert r.scenario.acceptable_to_seller(r.terms)
