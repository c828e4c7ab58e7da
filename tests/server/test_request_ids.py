"""Every answer carries ``X-Request-Id``, every error body the same id as ``request_id``, and
``haggler serve`` writes one JSON access log line per request (server/request_log.py)."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from haggler.protocols.agents_json.capabilities import API
from haggler.server.clientip import parse_networks
from tests.support.servers import ProcessServer

PRODUCT = "aerion-v12-cordless"


def test_every_answer_has_a_fresh_id_and_every_error_body_the_same(store) -> None:  # type: ignore[no-untyped-def]
    answers = [store.http.get("/healthz"), store.start(),
               store.http.get("/api/store/chat/nope/say", params={"message": "hi"}),  # the error edge: 404
               store.http.get(f"{API}/search"),  # agents.json's envelope: 400 without a session
               store.http.get("/healthz", headers={"Host": "evil.example"}),  # the request edge: 400
               store.http.post("/market/agents", json={"agentId": "x"})]  # a body with more fields: 422
    ids = [answer.headers["x-request-id"] for answer in answers]
    assert len(set(ids)) == len(ids) and all(len(i) == 16 for i in ids)
    assert [answer.status_code for answer in answers] == [200, 201, 404, 400, 400, 422]
    for answer in answers[2:]:
        assert answer.json()["request_id"] == answer.headers["x-request-id"], answer.text
    assert answers[3].json()["ok"] is False
    assert "path" in answers[5].json()


def test_an_incoming_id_is_kept_only_from_a_trusted_proxy_and_only_when_well_formed(make_store) -> None:  # type: ignore[no-untyped-def]
    untrusting = make_store()
    assert untrusting.http.get("/healthz", headers={"X-Request-Id": "from-anyone"}).headers["x-request-id"] != \
        "from-anyone"
    behind_proxy = make_store(trusted_proxies=parse_networks(["127.0.0.1/32"]))
    kept = behind_proxy.http.get("/api/store/chat/nope", headers={"X-Request-Id": "edge-7f3a:01"})
    assert kept.headers["x-request-id"] == "edge-7f3a:01" and kept.json()["request_id"] == "edge-7f3a:01"
    for forged in ("two words", "x" * 129, "a\"b"):
        assert behind_proxy.http.get("/healthz", headers={"X-Request-Id": forged}).headers["x-request-id"] != forged


def access_lines(server: ProcessServer) -> list[dict]:
    return [json.loads(line) for line in server.log().splitlines() if line.startswith("{")]


@pytest.mark.slow
def test_serve_writes_one_json_line_per_request_and_none_with_the_access_log_off(tmp_path: Path) -> None:
    with ProcessServer("--db", f"sqlite:///{tmp_path}/on.db", "--data-dir", str(tmp_path / "on"),
                       cwd=tmp_path) as server:
        with httpx.Client(base_url=server.base, timeout=10) as http:
            chat = http.get("/api/store/chat/start", params={"product_id": PRODUCT})
            turn = http.get(f"/api/store/chat/{chat.json()['session_id']}/say", params={"message": "hello"})
            missing = http.get("/no/such/page")
        answers = [chat, turn, missing]
    lines = [line for line in access_lines(server) if line["route"] != "/healthz"]  # the start-up probes
    assert [line["request_id"] for line in lines] == [a.headers["x-request-id"] for a in answers]
    assert [(line["method"], line["route"], line["status"]) for line in lines] == [
        ("GET", "/api/store/chat/start", 201), ("GET", "/api/store/chat/{session_id}/say", 200),
        ("GET", "/no/such/page", 404)]  # a route's template, never a chat's id; a path no route matched
    for line in lines:
        assert set(line) == {"time", "request_id", "method", "route", "status", "duration_ms", "client"}
        assert line["client"] == "127.0.0.1" and 0 < line["duration_ms"] < 10_000
        assert line["time"].endswith("Z")
    assert "GET /api/store/chat" not in server.log()  # uvicorn's own access log is off

    with ProcessServer("--db", f"sqlite:///{tmp_path}/off.db", "--data-dir", str(tmp_path / "off"),
                       "--access-log", "off", cwd=tmp_path) as quiet:
        assert httpx.get(f"{quiet.base}/negotiate.json", timeout=10).status_code == 200
    assert access_lines(quiet) == []


def test_a_forked_worker_draws_other_ids_than_its_parent() -> None:
    """Fresh ids come from the process's random generator: a worker forked from the supervisor
    must not repeat the ids its siblings draw."""
    import os

    from haggler.server.request_log import _fresh_id

    read_end, write_end = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child process
        os.write(write_end, " ".join(_fresh_id() for _ in range(50)).encode())
        os._exit(0)
    os.close(write_end)
    os.waitpid(child, 0)
    with os.fdopen(read_end) as pipe:
        in_child = set(pipe.read().split())
    in_parent = {_fresh_id() for _ in range(50)}
    assert len(in_child) == 50 and len(in_parent) == 50
    assert not in_child & in_parent
    assert all(len(rid) == 16 and int(rid, 16) >= 0 for rid in in_child | in_parent)


def test_a_handler_or_filter_added_to_the_access_logger_still_gets_every_line() -> None:
    """The access log writes its lines straight to its own handler only while logging would send
    them nowhere else, unchanged: a handler or a filter added later (an operator's, a test's)
    gets the lines through logging again, and takes them away when removed."""
    import asyncio
    import io
    import logging

    from haggler.server.request_log import RequestLog, enable_access_log

    log = enable_access_log()
    ours = log.handlers[0]
    stream, ours.stream = ours.stream, io.StringIO()
    seen: list[str] = []
    extra = logging.Handler()
    extra.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
    scope = {"type": "http", "method": "GET", "path": "/x", "client": ("127.0.0.1", 1), "headers": []}
    writer = RequestLog(None, metrics=None, access_log=True, trusted_proxies=())  # type: ignore[arg-type]

    async def three_lines() -> None:
        writer._log(log, scope, "one", "/x", 200, 0.001)
        log.addHandler(extra)
        try:
            writer._log(log, scope, "two", "/x", 200, 0.001)
            drop = logging.Filter("nobody")  # passes no record of haggler.access
            log.addFilter(drop)
            writer._log(log, scope, "hidden", "/x", 200, 0.001)
            log.removeFilter(drop)
        finally:
            log.removeHandler(extra)
        writer._log(log, scope, "three", "/x", 200, 0.001)

    try:
        asyncio.run(three_lines())
        ours.flush()
        written = [json.loads(line)["request_id"] for line in ours.stream.getvalue().splitlines()]
    finally:
        ours.stream = stream
    assert written == ["one", "two", "three"]
    assert [json.loads(line)["request_id"] for line in seen] == ["two"]
