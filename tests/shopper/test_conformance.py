"""``haggler check``'s engine against real servers: our own store, and a store with switchable defects."""

from __future__ import annotations

import json
import socket

import httpx
import pytest
from rich.console import Console
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.shopper.client import store_base
from haggler.shopper.conformance import CHECKS, ConformanceReport, run_checks
from haggler.shopper.conformance_report import print_report

try:
    from tests.support.broken_store import BrokenStore, Defects
    from tests.support.servers import ThreadedServer, free_port
except ImportError:  # pragma: no cover - rootdir-less invocation, as in conftest.py
    from support.broken_store import BrokenStore, Defects  # type: ignore[no-redef]
    from support.servers import ThreadedServer, free_port  # type: ignore[no-redef]


def problems(report: ConformanceReport) -> list[tuple[str, str, str]]:
    """Everything a clean store must not show: any fail, and any warn on a MUST."""
    return [(r.id, r.status, r.detail) for r in report.results
            if r.status == "fail" or (r.status == "warn" and r.level == "MUST")]


def failed_ids(report: ConformanceReport) -> set[str]:
    return {r.id for r in report.results if r.status == "fail"}


def check_broken(defects: Defects, **options) -> tuple[ConformanceReport, BrokenStore]:
    store = BrokenStore(defects, **options)
    with ThreadedServer(store.app) as server:
        report = run_checks(server.base, probe_rate_limit=True, timeout=10)
    return report, store


# -- the registry ------------------------------------------------------------------------------

def check_store(store: BrokenStore) -> ConformanceReport:
    with ThreadedServer(store.app) as server:
        return run_checks(server.base)


def test_check_ids_are_unique_and_well_formed():
    ids = [c.id for c in CHECKS]
    assert len(ids) == len(set(ids))
    for c in CHECKS:
        assert c.level in ("MUST", "SHOULD")
        assert c.section.startswith("§")
        assert c.title


# -- our own store ----------------------------------------------------------------------------

def test_our_store_passes_clean(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=50))
    report = run_checks(store.base)
    assert problems(report) == []
    assert report.must_failures == [] and report.ok
    statuses = {r.id: r.status for r in report.results}
    assert statuses["limits.rate_limit_xff"] == "skip"  # not probed without the flag
    assert {s for i, s in statuses.items() if i != "limits.rate_limit_xff"} == {"pass"}
    assert report.chat_starts <= 4
    assert report.halted is None
    assert report.protocol == "nash.v1" and report.to_json()["protocol"] == "nash.v1"
    assert report.result("discovery.document").detail == "found at /nash.json"
    assert report.result("discovery.protocol").detail == "nash_protocol: nash.v1"
    assert report.result("chat.checkout_url").detail.startswith(f"{store.base}/checkout/")


@pytest.mark.parametrize("limit_loopback", [True, False], ids=["loopback-limited", "loopback-exempt"])
def test_our_store_passes_the_rate_limit_probe(make_store, limit_loopback):
    """The probe's starts carry X-Forwarded-For from a peer the store does not trust, so they count
    against that peer even when it is loopback and loopback clients are exempt (the default):
    a developer probing their own store sees the limit hold, not a false "limit dodged". The
    checker's own two chat starts before the probe (its chat, and the nash.v1 deal probe) count
    only when loopback is limited."""
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=4, limit_loopback=limit_loopback))
    report = run_checks(store.base, probe_rate_limit=True)
    assert problems(report) == []
    probe = report.result("limits.rate_limit_xff")
    assert probe.status == "pass", probe.detail
    assert f"429 after {3 if limit_loopback else 5} starts" in probe.detail


def test_product_id_option_picks_the_chat_product(make_store):
    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=50))
    product = store.catalog.products[-1]
    report = run_checks(store.base + "/negotiate.json", product_id=product.id)
    assert problems(report) == []
    assert report.result("chat.start").status == "pass"


# -- the broken store ---------------------------------------------------------------------------

def test_the_flagless_broken_store_passes_clean():
    """It speaks negotiate.v1 only: nash.v1's two checks have nothing to check."""
    report, store = check_broken(Defects())
    assert problems(report) == []
    nash_only = {"discovery.names_agree", "chat.checkout_url"}
    assert all(r.status == "pass" for r in report.results if r.id not in nash_only), \
        [(r.id, r.status, r.detail) for r in report.results]
    assert {report.result(i).status for i in nash_only} == {"skip"}
    assert "checkout_url is nash.v1's" in report.result("chat.checkout_url").detail
    assert report.protocol == "negotiate.v1"
    assert report.result("discovery.document").detail == "found at /negotiate.json"
    assert store.rate_limited == 1  # the probe's 429, and nothing else


def test_a_nash_store_passes_clean_and_is_reported_as_nash():
    store = BrokenStore(nash=True)
    report = check_store(store)
    assert all(r.status == "pass" for r in report.results if r.id != "limits.rate_limit_xff"), \
        [(r.id, r.status, r.detail) for r in report.results]
    assert report.protocol == "nash.v1"
    assert report.result("discovery.document").detail == "found at /nash.json"
    assert store.chat_starts == 2  # the chat, and the deal probe


@pytest.mark.parametrize(("checkout_url", "phrase"), [
    ("missing", "has no checkout_url (only deal.checkout_url has one)"),
    ("relative", "checkout_url is not an absolute URL: '/checkout/"),
])
def test_a_nash_store_without_an_absolute_checkout_url_is_warned(checkout_url, phrase):
    """SHOULD, as in pier39's connector, which works without the field: a warning, not a failure."""
    report = check_store(BrokenStore(nash=True, checkout_url=checkout_url))
    result = report.result("chat.checkout_url")
    assert (result.level, result.status) == ("SHOULD", "warn")
    assert phrase in result.detail
    assert report.ok and problems(report) == []


def test_nash_and_negotiate_documents_that_disagree_are_warned():
    report = check_store(BrokenStore(nash=True, nash_differs=True))
    result = report.result("discovery.names_agree")
    assert result.status == "warn"
    assert "/nash.json and /negotiate.json differ (differing keys: store)" in result.detail
    assert report.result("discovery.identical").status == "pass"  # each name's two files agree


def test_a_nash_store_found_only_at_the_well_known_path_is_warned_about_the_base_file():
    def descriptor(request):  # type: ignore[no-untyped-def]
        return JSONResponse(nash_doc)

    store = BrokenStore(nash=True)
    with ThreadedServer(store.app) as server:
        nash_doc = httpx.get(f"{server.base}/nash.json").json()
    only_well_known = Starlette(routes=[Route("/.well-known/nash.json", descriptor)])
    with ThreadedServer(only_well_known) as server:
        report = run_checks(server.base)
    assert report.protocol == "nash.v1"
    assert report.result("discovery.document").detail == "found at /.well-known/nash.json"
    well_known = report.result("discovery.well_known")
    assert well_known.status == "warn" and "GET /nash.json answered 404" in well_known.detail


#: Each defect, the check ids that must fail for it (and no others), and a phrase of the detail.
DEFECTS = {
    "relative_next": ({"chat.next_absolute"}, "next is relative: /api/store/chat/"),
    "unknown_session_400": ({"errors.unknown_session_say", "errors.unknown_session_history"},
                            "400 instead of 404"),
    "unknown_session_empty_history": ({"errors.unknown_session_history"}, "200 with an empty history"),
    "unknown_product_400": ({"errors.unknown_product"}, "400 instead of 404"),
    "limits_missing_fields": ({"discovery.limits"}, "max_messages_per_chat, session_idle_ttl_seconds"),
    "floor_leak": ({"privacy.hidden_fields"}, "products[0].floor in GET /negotiate.json"),
    "rate_limit_on_xff": ({"limits.rate_limit_xff"}, "limit dodged with X-Forwarded-For"),
    "no_cors": ({"discovery.cors"}, "no Access-Control-Allow-Origin"),
    "wrong_content_type": ({"discovery.content_type"}, "text/plain"),
    "well_known_differs": ({"discovery.identical"}, "differ"),
    "wrong_protocol": ({"discovery.protocol"}, "'negotiate.v2'"),
    "closed_chat_200": ({"chat.closed_rejects"}, "answered 200 (expected 400)"),
    "html_errors": ({"errors.json_bodies"}, "<!doctype html>"),
}


def test_every_defect_flag_has_a_case():
    assert set(DEFECTS) == set(Defects.names())


@pytest.mark.parametrize("defect", list(DEFECTS))
def test_each_defect_is_flagged_by_exactly_its_check(defect):
    expected, phrase = DEFECTS[defect]
    report, _ = check_broken(Defects(**{defect: True}))
    assert failed_ids(report) == expected, problems(report)
    for check_id in expected:
        result = report.result(check_id)
        assert result.level == "MUST"
        assert phrase in result.detail
    assert not report.ok
    assert [r.id for r in report.must_failures] == [r.id for r in report.results if r.id in expected]
    assert not [r for r in report.results if r.status == "warn" and r.level == "MUST"]


def test_a_different_protocol_stops_the_chat_checks():
    report, store = check_broken(Defects(wrong_protocol=True))
    assert store.start_requests == 0
    after = [r for r in report.results if r.id.startswith(("chat.", "errors.", "limits.", "catalog."))]
    assert after and all(r.status == "skip" for r in after)
    assert "must refuse" in report.result("chat.start").detail


# -- staying within the store's limits ------------------------------------------------------------

@pytest.mark.parametrize("limit", [1, 2, 3])
def test_chat_starts_stay_within_the_published_limit(limit):
    store = BrokenStore(max_chat_starts_per_hour_per_ip=limit)
    with ThreadedServer(store.app) as server:
        report = run_checks(server.base)
    assert store.start_requests <= limit
    assert report.chat_starts == store.start_requests
    assert store.rate_limited == 0
    assert problems(report) == []
    if limit == 1:
        skipped = report.result("errors.unknown_product")
        assert skipped.status == "skip" and "over the store's published limit of 1" in skipped.detail
    else:
        assert report.result("errors.unknown_product").status == "pass"


def test_messages_stay_within_the_published_limits():
    store = BrokenStore(max_messages_per_chat=3, max_message_length_chars=12)
    with ThreadedServer(store.app) as server:
        report = run_checks(server.base)
        (session,) = store.sessions.values()
    assert problems(report) == []
    shopper = [h["message"] for h in session.history if h["speaker"] == "shopper"]
    assert len(shopper) <= 3
    assert all(len(m) <= 12 for m in shopper)  # the one over-long probe was refused, not recorded
    assert report.result("errors.message_too_long").status == "pass"


def test_a_429_outside_the_probe_stops_the_checker(make_store):
    store = BrokenStore(max_chat_starts_per_hour_per_ip=2)
    with ThreadedServer(store.app) as server:
        import httpx
        for _ in range(2):  # someone else used this address's chat starts
            assert httpx.get(f"{server.base}/api/store/chat/start?product_id=brass-kettle").status_code == 201
        report = run_checks(server.base)
    assert store.start_requests == 3  # one 429, then no further start
    assert report.halted and "429" in report.halted and "Retry-After: 3600" in report.halted
    start = report.result("chat.start")
    assert start.status == "warn" and "429" in start.detail
    later = report.results[report.results.index(start) + 1:]
    network = [r for r in later if r.id not in ("errors.json_bodies", "privacy.hidden_fields")]
    assert network and all(r.status == "skip" for r in network if r.id != "limits.rate_limit_xff")
    assert failed_ids(report) == set()


def test_a_short_retry_after_is_waited_out_once():
    store = BrokenStore(max_chat_starts_per_hour_per_ip=1, retry_after_seconds=1)
    slept: list[float] = []
    with ThreadedServer(store.app) as server:
        import httpx
        httpx.get(f"{server.base}/api/store/chat/start?product_id=brass-kettle")
        report = run_checks(server.base, sleep=slept.append)
    assert slept == [1.0]
    assert store.start_requests == 3  # the first 429, one retry, then stop
    assert report.halted


# -- network trouble becomes results, never tracebacks ---------------------------------------------

def test_connection_refused_is_a_failed_check():
    report = run_checks(f"http://127.0.0.1:{free_port()}", timeout=2)
    discovery = report.result("discovery.document")
    assert discovery.status == "fail" and "GET /nash.json" in discovery.detail
    assert {r.id for r in report.must_failures} == {"discovery.document"}
    assert all(r.status == "skip" for r in report.results if r.id != "discovery.document")
    assert report.protocol is None


def test_a_silent_server_times_out_into_a_failed_check():
    with socket.socket() as listener:  # accepts connections (backlog) but never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        port = listener.getsockname()[1]
        report = run_checks(f"http://127.0.0.1:{port}", timeout=0.3)
    assert "no answer within 0.3s" in report.result("discovery.document").detail
    assert report.result("discovery.document").status == "fail"


# -- output ------------------------------------------------------------------------------------------

def test_report_json_and_table():
    report, _ = check_broken(Defects(relative_next=True))
    data = json.loads(json.dumps(report.to_json()))
    assert data["ok"] is False
    assert data["counts"]["fail"] == 1
    assert [r["id"] for r in data["results"]] == [c.id for c in CHECKS]
    row = next(r for r in data["results"] if r["id"] == "chat.next_absolute")
    assert row == {**row, "section": "§3.1", "level": "MUST", "status": "fail"}

    console = Console(record=True, width=200, color_system=None)
    print_report(report, console)
    text = console.export_text()
    assert "chat.next_absolute" in text and "FAIL" in text and "§3.1" in text
    assert "next is relative:" in text
    assert "does not conform" in text


@pytest.mark.parametrize(("given", "expected"), [
    ("http://127.0.0.1:8000/", "http://127.0.0.1:8000"),
    ("http://127.0.0.1:8000/negotiate.json", "http://127.0.0.1:8000"),
    ("shop.example", "https://shop.example"),
    ("https://shop.example/.well-known/negotiate.json", "https://shop.example"),
])
def test_store_base(given, expected):
    assert store_base(given) == expected
