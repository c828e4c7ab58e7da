"""Every operation of ``/openapi.json`` under a fuzzer, on SQLite and PostgreSQL.

schemathesis generates requests from the store's own OpenAPI document (valid ones and broken
ones), sends them over HTTP to a real server, and fails on any 5xx, any response whose body does
not match the schema documented for its status, and any undocumented content type. The budget
and the seed are fixed (``--max-examples``, ``--seed``, deterministic generation), so a run is
repeatable. The caller holds an exchange API key and an agents.json session, so the fuzzer
reaches past authentication; the market is fuzzed again with a market agent's token.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import httpx
from fastapi import FastAPI

from haggler.catalog import parse_catalog
from haggler.protocols.agents_json.settings import AgentsSettings
from haggler.protocols.matching.settings import MatchingSettings
from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.protocols.transactions.settings import ExchangeSettings
from haggler.server.app import create_app
from haggler.server.config import StoreConfig
from tests.conftest import SECRET_MARKERS, secret_catalog_data
from tests.support.servers import ThreadedServer

OPERATOR_TOKEN = "fuzzing-operator-token-0123456789"
EXAMPLES = 25
SEED = 20261124
CHECKS = "not_a_server_error,response_schema_conformance,content_type_conformance"


def _cli() -> str:
    """The schemathesis command installed beside this interpreter (the test extra)."""
    found = Path(sys.executable).with_name("schemathesis")
    return str(found) if found.exists() else shutil.which("schemathesis") or "schemathesis"


def _credentials(base: str) -> list[str]:
    with httpx.Client(base_url=base, timeout=30) as http:
        key = http.post("/v1/agents", json={"name": "fuzzer"}).json()["apiKey"]
        http.post("/v1/wallets/me/deposit", json={"amountCents": 100_000}, headers={"Authorization": f"Bearer {key}"})
        token = http.post("/.well-known/agents/api/session", json={"agent_name": "fuzzer"}).json()["data"]
    return ["-H", f"Authorization: Bearer {key}", "-H", f"X-Agent-Session: {token['session_token']}"]


def _app(db_url: str, tmp_path: Path) -> FastAPI:
    # Limits high enough that the fuzzer reaches the operations rather than the rate limiter.
    return create_app(StoreConfig(
        catalog=parse_catalog(secret_catalog_data()), db_url=db_url, data_dir=tmp_path / "data", seed=5,
        limits=StoreLimits(max_chat_starts_per_hour_per_ip=10**6),
        agents=AgentsSettings(requests_per_minute=10**6, max_sessions=10**6), sweep_interval_seconds=None,
        exchange=ExchangeSettings(allow_deposits=True),  # the fuzzer's agent funds its wallet
        matching=MatchingSettings(operator_token=OPERATOR_TOKEN)))


def _fuzzer(server: ThreadedServer, tmp_path: Path) -> Callable[..., None]:
    def fuzz(*options: str) -> None:
        command = [_cli(), "run", f"{server.base}/openapi.json", "--checks", CHECKS, "--max-examples",
                   str(EXAMPLES), "--seed", str(SEED), "--generation-deterministic", "--no-color", *options]
        # In tmp_path: schemathesis keeps a crash cache in its working directory.
        result = subprocess.run(command, capture_output=True, text=True, timeout=900, check=False, cwd=tmp_path)
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]
        assert "passed" in result.stdout
    return fuzz


def test_every_operation_answers_as_documented(db_url: str, tmp_path: Path) -> None:
    with ThreadedServer(_app(db_url, tmp_path)) as server:
        fuzz = _fuzzer(server, tmp_path)
        fuzz(*_credentials(server.base))
        # The match negotiation API again as its operator, who reaches past the 401s.
        fuzz("--include-tag", "match negotiation", "-H", f"Authorization: Bearer {OPERATOR_TOKEN}")


def _market_trader(base: str) -> str:
    """A market with something in it (a listing, a wanted ad that it fits, a resting order, an
    audited refusal), so that what the fuzzer reads is not all empty; returns the buyer's token."""
    from tests.support.market import BOOK, Trader

    def clock() -> datetime:
        return datetime.now(timezone.utc)

    with httpx.Client(base_url=base, timeout=30) as http:
        seller, buyer = Trader(http, "fuzz_seller", clock), Trader(http, "fuzz_buyer", clock)
        for agent, constraints in ((seller, {"minAcceptablePrice": 100}), (buyer, {"maxSpend": 300})):
            agent.register()
            agent.file_mandate(**constraints)
        for response in (buyer.send("/market/wanted", buyer.wanted()),
                         seller.send("/market/listings", seller.listing(min_price=160)),
                         seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 150, 3))):
            assert response.status_code == 201, response.text
        refused = buyer.send(f"/market/books/{BOOK}/orders", buyer.order("buy", 400))  # above maxSpend: audited
        assert refused.status_code == 403, refused.text
        return buyer.token


def test_the_market_answers_as_documented(db_url: str, tmp_path: Path) -> None:
    """The market again (the first test meets it with a key it does not know): as a registered
    agent with a mandate, then as the operator, who reads everyone's audit log."""
    with ThreadedServer(_app(db_url, tmp_path)) as server:
        fuzz = _fuzzer(server, tmp_path)
        # filter_too_much is about generating input, never about the answers: after the coverage
        # phase, schemathesis rejects most of what it draws for GET /market/agents/{agent_id}.
        fuzz("--include-tag", "market", "--suppress-health-check=filter_too_much",
             "-H", f"Authorization: Bearer {_market_trader(server.base)}")
        fuzz("--include-path-regex", "^/market/(audit|books/)", "-H", f"Authorization: Bearer {OPERATOR_TOKEN}")


def test_the_document_describes_every_route(store) -> None:  # type: ignore[no-untyped-def]
    """Each operation has a summary and documented response bodies; request bodies are described;
    the Swagger UI page points at the document; nothing hidden is in it."""
    raw = store.http.get("/openapi.json")
    assert not any(marker in raw.text for marker in SECRET_MARKERS)  # the store's hidden fields stay hidden
    document = raw.json()
    operations = [(path, method, op) for path, ops in document["paths"].items() for method, op in ops.items()]
    assert len(operations) >= 40
    for path, method, op in operations:
        assert op.get("summary"), (method, path)
        # 204: no content; 303: see the page at Location; 304: not modified
        bodied = (r for status, r in op["responses"].items() if status not in {"204", "303", "304"})
        assert all(r.get("content") for r in bodied), (method, path)
    assert "requestBody" in document["paths"]["/v1/transactions"]["post"]
    assert "content" not in document["paths"]["/api/agents/{agent_id}/negotiations/pickup"]["post"]["responses"]["204"]
    assert document["paths"]["/api/store/chat/start"]["get"]["parameters"][0]["name"] == "product_id"
    # A database in trouble is 503 in each surface's error shape (server/errors.py).
    for path, method, shape in (("/api/store/chat/{session_id}/say", "get", "ErrorBody"),
                                ("/.well-known/agents/api/session", "post", "EnvelopeError")):
        outage = document["paths"][path][method]["responses"]["503"]["content"]["application/json"]["schema"]
        assert outage == {"$ref": f"#/components/schemas/{shape}"}
    assert "request_id" in document["components"]["schemas"]["ErrorBody"]["properties"]
    docs = store.http.get("/docs")
    assert docs.status_code == 200 and "/openapi.json" in docs.text


def test_two_wire_models_with_one_name_are_refused() -> None:
    """Components are keyed by class name, so a protocol's model must not shadow another's."""
    import pytest
    from fastapi import FastAPI

    from haggler.server.openapi import Operation, WireModel, install_openapi

    def shape(field: str) -> type[WireModel]:
        return type("Shape", (WireModel,), {"__annotations__": {field: int}})

    app = FastAPI()

    @app.get("/a")
    def a() -> None: ...

    @app.get("/b")
    def b() -> None: ...

    install_openapi(app, [{("get", "/a"): Operation("a", {200: shape("x")}),
                           ("get", "/b"): Operation("b", {200: shape("y")})}])
    with pytest.raises(ValueError, match="'Shape'"):
        app.openapi()
