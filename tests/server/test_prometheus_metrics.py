"""``/metrics``: the Prometheus text format behind the operator token — this process's requests by
route template, method and status with their latency, the sweeps run, and the store's own figures
read from its database (chats, turns, deals, agreement rate)."""

from __future__ import annotations

import json
import time

from prometheus_client.parser import text_string_to_metric_families

from haggler.protocols.matching.settings import MatchingSettings

TOKEN = "metrics-operator-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def scrape(store) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = store.http.get("/metrics", headers=AUTH)
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain; version=")
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(response.text) for sample in family.samples}


def value(samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def test_metrics_need_the_operator_token(make_store):
    closed = make_store()
    assert closed.http.get("/metrics", headers=AUTH).status_code == 403
    store = make_store(matching=MatchingSettings(operator_token=TOKEN))
    assert store.http.get("/metrics").status_code == 401
    assert store.http.get("/metrics", headers={"Authorization": "Bearer wrong-token-0123456789"}).status_code == 401
    assert store.http.get("/metrics", headers=AUTH).status_code == 200
    assert "/metrics" not in json.dumps(store.http.get("/openapi.json").json()["paths"])


def test_requests_are_counted_by_route_template_and_the_stores_figures_by_its_database(make_store):
    store = make_store(matching=MatchingSettings(operator_token=TOKEN))
    products = store.catalog.products
    agreed = store.start(products[0].id).json()
    store.say(agreed["next"], "how about $300?")
    store.say(agreed["next"], "deal")
    walked = store.start(products[1].id).json()
    store.say(walked["next"], json.dumps({"action": "walk_away"}))
    store.start(products[2].id)  # still open
    store.http.get("/no/such/page")
    store.http.get("/api/store/chat/%00")  # refused at the edge, before any route
    for method in ("PROPFIND", "PURGE", "MKCOL"):  # a client picks methods: they must not become labels
        store.http.request(method, "/negotiate.json")

    samples = scrape(store)
    requests = "haggler_http_requests_total"
    assert value(samples, requests, route="/api/store/chat/start", method="GET", status="201") == 3
    assert value(samples, requests, route="/api/store/chat/{session_id}/say", method="GET", status="200") == 3
    assert value(samples, requests, route="unmatched", method="GET", status="404") == 1
    assert value(samples, requests, route="unmatched", method="GET", status="400") == 1
    assert value(samples, requests, route="/negotiate.json", method="other", status="405") == 3
    assert not any(m in str(labels) for _, labels in samples for m in ("PROPFIND", "PURGE", "MKCOL"))
    assert value(samples, "haggler_http_request_duration_seconds_count", route="/api/store/chat/start") == 3
    assert value(samples, "haggler_http_request_duration_seconds_sum", route="/api/store/chat/start") > 0
    assert agreed["session_id"] not in store.http.get("/metrics", headers=AUTH).text  # templates, never ids

    assert value(samples, "haggler_chats", status="closed", outcome="agreed") == 1
    assert value(samples, "haggler_chats", status="closed", outcome="rejected") == 1
    assert value(samples, "haggler_chats", status="open", outcome="") == 1
    assert value(samples, "haggler_turns_total") == 3
    assert value(samples, "haggler_deals_total") == 1
    assert value(samples, "haggler_agreement_rate") == 0.5  # 1 agreed of 2 closed; the open chat not counted


def test_every_background_sweep_is_counted_by_job(make_store):
    store = make_store(matching=MatchingSettings(operator_token=TOKEN), sweep_interval_seconds=0.05)
    deadline = time.monotonic() + 60  # generous: a loaded machine is slow, not wrong
    jobs = ("chats", "agent_sessions", "exchange", "matching", "market")
    while time.monotonic() < deadline:
        samples = scrape(store)
        if all(value(samples, "haggler_sweeps_total", job=job, result="ok") >= 2 for job in jobs):
            break
        time.sleep(0.05)
    assert all(value(samples, "haggler_sweeps_total", job=job, result="ok") >= 2 for job in jobs), samples
    assert not any(name == "haggler_sweeps_total" and ("result", "failed") in labels for name, labels in samples)


def test_the_model_figures_are_the_sums_of_every_chats_usage(tmp_path):
    from datetime import datetime, timezone

    from prometheus_client import generate_latest

    from haggler.server.leader import SoleProcess
    from haggler.server.metrics import Metrics
    from haggler.storage import chats as repo
    from haggler.storage.database import open_database

    db = open_database(f"sqlite:///{tmp_path}/m.db")
    now = datetime(2026, 11, 25, tzinfo=timezone.utc)
    spent = {"a": repo.ModelUsageRow(3, 100, 50, 7, fallbacks=1, clamps=2, rewrites=0),
             "b": repo.ModelUsageRow(4, 80, 20, 3, fallbacks=0, clamps=1, rewrites=5)}
    with db.write() as conn:
        for chat_id, usage in spent.items():
            repo.create_chat(conn, chat_id=chat_id, product_id="p", seed=1, client_ip="127.0.0.1", now=now)
            repo.add_model_usage(conn, chat_id, usage)
            repo.add_model_usage(conn, chat_id, usage)  # added, not replaced
    text = generate_latest(Metrics(db, TOKEN, SoleProcess()).registry).decode()
    db.dispose()
    samples = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples if not s.labels}
    assert samples["haggler_model_calls_total"] == 2 * (3 + 4)
    assert samples["haggler_model_fallbacks_total"] == 2 * 1
    assert samples["haggler_model_clamps_total"] == 2 * (2 + 1)
    assert samples["haggler_model_rewrites_total"] == 2 * 5
