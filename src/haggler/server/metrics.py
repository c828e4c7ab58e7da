"""Prometheus metrics at ``/metrics`` (the text format, ``prometheus-client``), for the operator.

Two kinds of figures:

- **this process's traffic**, counted as it happens: requests by route template, method and
  status, and their latency (measured by ``server/request_log.py``'s middleware, which also
  writes the access log from the same figures); the background sweeps by job and result; and
  whether this process leads the background jobs (``haggler_sweep_leader``, labelled with its pid:
  with ``--workers N`` each scrape is answered by whichever worker takes the connection, and the
  pid tells their counters apart);
- **the store's state**, read from the database at each scrape by :class:`StoreCollector`: chats
  by status and outcome, shopper turns, deals, the agreement rate, and the merchant model's calls,
  fallbacks and the guards' interventions. These live in the database, not in a process, so every
  worker reports the same values.

``/metrics`` takes the operator token as ``Authorization: Bearer`` (what a Prometheus scrape job's
``authorization`` setting sends; wrong ones count toward ``--max-wrong-tokens``, ``server/limits.py``)
and answers 403 on a store without one: the figures say how a
business is doing. It is not in the OpenAPI document.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from starlette.requests import Request
from starlette.responses import Response

from haggler.server.leader import Leadership
from haggler.server.limits import Limits
from haggler.storage.database import Database
from haggler.storage.schema import chat_model_usage, deals
from haggler.web.admin.store_reports import chat_counts

#: Latency buckets, seconds: fine below 50 ms, where a turn should be.
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.02, 0.035, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
#: The route label of a request no route matched (unknown paths must not grow the label set).
UNMATCHED = "unmatched"
METRICS_PATH = "/metrics"
#: Methods counted under their own name; any other is "other", so no client can grow the label set.
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class StoreCollector(Collector):
    """The store's figures, read from its database at each scrape."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def collect(self) -> Iterator[Any]:
        with self.db.read() as conn:
            counts = chat_counts(conn)
            deal_count = conn.execute(select(func.count()).select_from(deals)).scalar_one()
            usage = conn.execute(select(*(func.coalesce(func.sum(chat_model_usage.c[name]), 0) for name in
                                          ("calls", "fallbacks", "clamps", "rewrites")))).one()
        chats_family = GaugeMetricFamily("haggler_chats", "Chats by status and outcome", labels=["status", "outcome"])
        for (status, outcome), (n, _) in counts.by_state.items():
            chats_family.add_metric([status, outcome or ""], n)
        yield chats_family
        yield CounterMetricFamily("haggler_turns", "Shopper turns answered", value=counts.turns)
        yield CounterMetricFamily("haggler_deals", "Deals agreed in chat", value=deal_count)
        yield GaugeMetricFamily("haggler_agreement_rate", "Agreed chats / closed chats (0 before any closes)",
                                value=counts.agreement_rate or 0.0)
        for name, value, text in zip(("calls", "fallbacks", "clamps", "rewrites"), usage, (
                "Calls to the merchant's language model", "Turns the deterministic merchant took over from the model",
                "Model prices the guards raised to the owner's limit", "Model replies the guards rewrote"), strict=True):
            yield CounterMetricFamily(f"haggler_model_{name}", text, value=value)


class Metrics:
    """One store's registry: its traffic counters and the database collector."""

    def __init__(self, db: Database, operator_token: str | None, leadership: Leadership) -> None:
        self.operator_token = operator_token
        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("haggler_http_requests", "HTTP requests answered, by route template, method "
                                "and status", ["route", "method", "status"], registry=self.registry)
        self.latency = Histogram("haggler_http_request_duration_seconds", "Time to answer a request, by route "
                                 "template", ["route"], buckets=_BUCKETS, registry=self.registry)
        self.sweeps = Counter("haggler_sweeps", "Background sweep jobs run, by job and result (ok, failed)",
                              ["job", "result"], registry=self.registry)
        Gauge("haggler_sweep_leader", "1 while this process (pid) runs the background jobs for every worker, "
              "else 0", ["pid"], registry=self.registry).labels(str(os.getpid())).set_function(
                  lambda: float(leadership.leading))
        self.registry.register(StoreCollector(db))
        self._children: dict[tuple[str, str, int], tuple[Any, Any]] = {}

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        """Count one answer. The label children are kept per key: ``labels()`` takes a lock and
        builds a tuple on every call, which shows on a request path measured in tenths of a ms."""
        method = method if method in _METHODS else "other"  # a client picks the method: bound it
        key = (route, method, status)
        children = self._children.get(key)
        if children is None:
            children = self._children[key] = (self.requests.labels(route, method, str(status)),
                                               self.latency.labels(route))
        children[0].inc()
        children[1].observe(seconds)

    def endpoint(self, request: Request, limits: Limits) -> Response:
        """``GET /metrics``: the text format, for the operator only; a wrong token counts toward
        the store's wrong-token limit (``limits``), the right one is always let through."""
        header = request.headers.get("authorization", "")
        scheme, _, credential = header.partition(" ")
        if self.operator_token is None:
            return Response("metrics need the operator token (--operator-token)\n", 403, media_type="text/plain")
        if not header or not limits.operator(request, credential.strip() if scheme.lower() == "bearer" else "",
                                             self.operator_token):
            return Response("send the operator token: Authorization: Bearer <token>\n", 401,
                            headers={"WWW-Authenticate": "Bearer"}, media_type="text/plain")
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)
