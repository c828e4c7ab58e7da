"""The store's agents.json surface over real HTTP: the manifest (agents.json spec, "Top-Level
Structure" and "Validation"), every declared capability called exactly as declared, parameter
errors, sessions and the per-client rate limit."""

from __future__ import annotations

import base64
import hashlib
import json

import jsonschema
import pytest
from sqlalchemy import create_engine, select
from typer.testing import CliRunner

from haggler.cli import app as cli
from haggler.protocols.agents_json.capabilities import API, MAX_LIMIT, SESSION_PATH
from haggler.protocols.agents_json.schema import load_schema
from haggler.protocols.agents_json.settings import AgentsSettings
from haggler.protocols.agents_json.validate import validate_manifest
from haggler.protocols.ucp.settings import UcpSettings
from haggler.storage.schema import agent_sessions, rate_windows
from haggler.trust.keys import SigningKeys
from tests.conftest import SECRET_MARKERS

MANIFEST = "/.well-known/agents.json"


def manifest(store) -> dict:
    return store.http.get(MANIFEST).json()


def session(store, **body) -> str:
    response = store.http.post(SESSION_PATH, json=body or None)
    assert response.status_code == 201, response.text
    return response.json()["data"]["session_token"]


def assert_error(response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is False and isinstance(body["error"], str) and body["error"]
    for word in words:
        assert word in body["error"], (word, body["error"])


# -- the manifest ----------------------------------------------------------------------------------

def test_manifest_is_served_as_utf8_json_and_valid_against_the_schema(store):
    """Spec: 'The file MUST be served with Content-Type: application/json; charset=utf-8'."""
    response = store.http.get(MANIFEST)
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    doc = response.json()
    jsonschema.Draft7Validator(load_schema()).validate(doc)
    report = validate_manifest(doc)
    assert report.ok and not report.warnings, [p.message for p in report.errors + report.warnings]


def test_manifest_passes_the_five_validation_rules(store):
    """Spec, "Validation" 1-5, checked directly rather than through our own validator."""
    doc = manifest(store)
    assert doc["schema_version"] == "0.1.0"                                   # 1
    assert doc["site"]["name"] == store.catalog.store.name and doc["site"]["url"] == store.base  # 2
    assert isinstance(doc["capabilities"], list) and doc["capabilities"]      # 3
    for capability in doc["capabilities"]:                                    # 4
        assert {"name", "endpoint", "method"} <= set(capability)
    if any(c.get("requires_session") for c in doc["capabilities"]):           # 5
        assert doc["session"]["create"] and doc["session"]["ttl_seconds"] >= 60


def test_manifest_declares_the_store_capabilities(store):
    names = {c["name"] for c in manifest(store)["capabilities"]}
    assert {"search", "browse", "detail", "negotiate"} <= names
    browse = next(c for c in manifest(store)["capabilities"] if c["name"] == "browse")
    assert browse["params"]["sort"]["enum"] == ["price_asc", "price_desc", "newest"]
    assert set(browse["params"]["category"]["enum"]) == {p.kind for p in store.catalog.products}


def test_the_published_key_is_the_raw_ed25519_key_in_the_data_dir_and_survives_restarts(make_store, tmp_path):
    data_dir = tmp_path / "keys-here"
    first = manifest(make_store(data_dir=data_dir))["audit"]
    assert first["enabled"] is True and first["endpoint"] == f"{API}/audit"
    assert len(base64.b64decode(first["public_key"], validate=True)) == 32
    assert first["public_key"] == SigningKeys(data_dir).public_key_b64
    assert (data_dir / "audit" / "signing_key.pem").stat().st_mode & 0o077 == 0
    again = manifest(make_store(data_dir=data_dir))["audit"]
    assert again["public_key"] == first["public_key"]


def test_without_audit_no_key_is_made_or_published(make_store, tmp_path):
    """No audit, no audit key. (UCP, on by default, signs its webhooks with a P-256 key of its own
    in the same folder: with UCP off too, nothing at all is written.)"""
    doc = manifest(make_store(agents=AgentsSettings(audit_enabled=False), data_dir=tmp_path / "none"))
    assert doc["audit"] == {"enabled": False, "endpoint": f"{API}/audit"}
    assert not (tmp_path / "none" / "audit" / "signing_key.pem").exists()
    manifest(make_store(agents=AgentsSettings(audit_enabled=False), ucp=UcpSettings(enabled=False),
                        data_dir=tmp_path / "nothing"))
    assert not (tmp_path / "nothing").exists()


# -- every declared endpoint works as declared -----------------------------------------------------

def sample_value(store, name: str, spec: dict):
    if "enum" in spec:
        return spec["enum"][-1]
    if name in ("id", "item_id"):
        return store.catalog.products[1].id
    if name == "q":
        return store.catalog.products[1].name.split()[0]
    return {"integer": 1, "string": "x", "boolean": True}[spec["type"]]


def test_walk_the_manifest_and_call_every_capability_as_declared(store):
    token = session(store, agent_name="walker")
    for capability in manifest(store)["capabilities"]:
        params = {name: sample_value(store, name, spec) for name, spec in capability.get("params", {}).items()
                  if spec.get("required") or "enum" in spec}
        method, endpoint = capability["method"], capability["endpoint"]
        headers = {"X-Agent-Session": token} if capability.get("requires_session") else {}
        if capability["name"] == "checkout":  # the walk removed the item again: checkout needs one
            store.http.post(f"{API}/cart", json={"item_id": store.catalog.products[1].id, "quantity": 1},
                            headers=headers)
        if method in ("GET", "DELETE"):
            response = store.http.request(method, endpoint, params=params, headers=headers)
        else:
            response = store.http.request(method, endpoint, json=params, headers=headers)
        assert response.status_code == 200, (capability["name"], response.text)
        assert response.headers["content-type"] == "application/json; charset=utf-8"
        body = response.json()
        assert body["ok"] is True and "data" in body, capability["name"]
        if capability.get("requires_session"):
            assert_error(store.http.request(method, endpoint, params=params if method == "GET" else None),
                         401, "session")
        for wrong in {"GET", "POST", "PATCH", "PUT", "DELETE"} - {
                c["method"] for c in manifest(store)["capabilities"] if c["endpoint"] == endpoint}:
            assert store.http.request(wrong, endpoint).status_code == 405, (capability["name"], wrong)


def test_responses_never_carry_hidden_state(store):
    token = session(store)
    bodies = [store.http.get(f"{API}/browse", params={"limit": MAX_LIMIT}).text]
    for product in store.catalog.products:
        bodies.append(store.http.get(f"{API}/detail", params={"id": product.id}).text)
        bodies.append(store.http.get(f"{API}/negotiate", params={"id": product.id},
                                     headers={"X-Agent-Session": token}).text)
        bodies.append(store.http.get(f"{API}/search", params={"q": product.name}).text)
    text = "\n".join(bodies)
    for marker in SECRET_MARKERS:
        assert marker not in text
    for word in ("floor", "levers", "inventory_note", "merchant_persona", "supplier"):
        assert f'"{word}' not in text


# -- search, browse, detail ------------------------------------------------------------------------

def test_search_finds_every_word_name_matches_first_and_pages(store):
    data = store.http.get(f"{API}/search", params={"q": "VACUUM", "limit": 2}).json()["data"]
    vacuums = [p.id for p in store.catalog.products if "vacuum" in (p.name + p.description + p.subtitle).lower()]
    assert data["total"] == len(vacuums) and len(data["items"]) == 2 and data["has_more"] is True
    rest = store.http.get(f"{API}/search", params={"q": "VACUUM", "limit": 2, "page": 2}).json()["data"]
    assert {i["id"] for i in data["items"] + rest["items"]} == set(vacuums)
    assert rest["has_more"] is (4 < len(vacuums))
    assert store.http.get(f"{API}/search", params={"q": "vacuum zzzqqq"}).json()["data"]["total"] == 0


@pytest.mark.parametrize("sort", ["price_asc", "price_desc", "newest"])
def test_browse_sorts_and_filters(store, sort):
    kind = store.catalog.products[0].kind
    items = store.http.get(f"{API}/browse", params={"sort": sort, "limit": MAX_LIMIT}).json()["data"]["items"]
    assert len(items) == len(store.catalog.products)
    by_id = {p.id: p for p in store.catalog.products}
    keys = {"price_asc": lambda i: by_id[i["id"]].list_price_cents,
            "price_desc": lambda i: -by_id[i["id"]].list_price_cents,
            "newest": lambda i: -(by_id[i["id"]].year_made or 0)}[sort]
    assert [keys(i) for i in items] == sorted(keys(i) for i in items)
    filtered = store.http.get(f"{API}/browse", params={"category": kind}).json()["data"]["items"]
    assert filtered and all(by_id[i["id"]].kind == kind for i in filtered)


def test_detail_and_negotiate_point_at_the_product_and_its_chat(store):
    product = store.catalog.products[2]
    detail = store.http.get(f"{API}/detail", params={"id": product.id}).json()["data"]
    assert detail["id"] == product.id and detail["description"] == product.description
    pointer = store.http.get(f"{API}/negotiate", params={"id": product.id}).json()["data"]
    assert pointer["protocol"] == "negotiate.v1"
    started = store.http.get(pointer["start_chat"]["url"])
    assert started.status_code == 201 and started.json()["session_id"]
    assert pointer["start_chat"]["url"].endswith(f"product_id={product.id}")
    assert_error(store.http.get(f"{API}/detail", params={"id": "no-such-thing"}), 404, "no-such-thing")


# -- bad parameters ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path, params, named", [
    ("search", {"q": "x", "limit": "ten"}, "limit"),
    ("search", {"q": "x", "limit": "2.5"}, "limit"),
    ("search", {"q": "x", "page": "0"}, "page"),
    ("search", {"q": "x", "limit": str(MAX_LIMIT + 1)}, "limit"),
    ("search", {"q": "x", "limit": "0"}, "limit"),
    ("search", {}, "q"),
    ("search", {"q": "   "}, "q"),
    ("search", {"q": "x", "pge": "2"}, "pge"),
    ("browse", {"sort": "cheapest"}, "sort"),
    ("browse", {"category": "spaceships"}, "category"),
    ("browse", {"page": "-1"}, "page"),
    ("detail", {}, "id"),
])
def test_bad_parameters_get_400_naming_the_parameter(store, path, params, named):
    assert_error(store.http.get(f"{API}/{path}", params=params), 400, named)


def test_a_body_that_is_not_a_json_object_is_400(store):
    assert_error(store.http.post(SESSION_PATH, content=b"[1,2]"), 400, "object")
    assert_error(store.http.post(SESSION_PATH, content=b"{nope"), 400, "JSON")
    assert_error(store.http.post(SESSION_PATH, json={"agent_name": 7}), 400, "agent_name")
    assert_error(store.http.post(SESSION_PATH, json={"agent": "x"}), 400, "agent")


def test_unknown_api_paths_answer_in_the_envelope(store):
    assert_error(store.http.get(f"{API}/nothing-here"), 404)


# -- sessions ------------------------------------------------------------------------------------------

def test_session_create_returns_a_long_random_token_stored_only_hashed(store):
    response = store.http.post(SESSION_PATH, json={"agent_name": "bot", "agent_version": "1.2", "purpose": "buy"})
    assert response.status_code == 201
    data = response.json()["data"]
    token = data["session_token"]
    assert len(token) >= 32 and token != session(store)
    assert data["expires_at"] == (store.clock() + __import__("datetime").timedelta(seconds=1800)).isoformat() \
        .replace("+00:00", "Z")
    assert set(data["capabilities"]) >= {"search", "browse", "detail"}
    db_path = store.app.state.service.db.url
    rows = create_engine(db_path).connect().execute(select(agent_sessions)).all()
    assert token not in json.dumps([[str(v) for v in r] for r in rows])
    assert hashlib.sha256(token.encode()).hexdigest() in {r.token_hash for r in rows}
    assert {r.agent_name for r in rows} >= {"bot"}


def test_missing_unknown_and_expired_tokens_get_401(store):
    path = f"{API}/negotiate"
    params = {"id": store.catalog.products[0].id}
    token = session(store)
    assert store.http.get(path, params=params, headers={"X-Agent-Session": token}).status_code == 200
    assert_error(store.http.get(path, params=params, headers={"X-Agent-Session": "x" * 43}), 401, "unknown")
    store.clock.advance(seconds=1799)
    assert store.http.get(path, params=params, headers={"X-Agent-Session": token}).status_code == 200
    store.clock.advance(seconds=1)  # the TTL is a hard deadline from creation
    assert_error(store.http.get(path, params=params, headers={"X-Agent-Session": token}), 401, "expired")


def test_delete_ends_the_session(store):
    token = session(store)
    assert_error(store.http.delete(SESSION_PATH), 401)
    ended = store.http.delete(SESSION_PATH, headers={"X-Agent-Session": token})
    assert ended.status_code == 200 and ended.json()["data"]["ended"] is True
    assert_error(store.http.delete(SESSION_PATH, headers={"X-Agent-Session": token}), 401, "ended")


def test_max_sessions_per_client_then_429_until_one_ends(make_store):
    store = make_store(agents=AgentsSettings(max_sessions=2, session_ttl_seconds=600))
    first, _ = session(store), session(store)
    refused = store.http.post(SESSION_PATH)
    assert_error(refused, 429, "too many active sessions (2 of 2)", "the limit is 2 active agents.json sessions "
                 "per client address, set with haggler serve --max-sessions")
    assert 1 <= int(refused.headers["retry-after"]) <= 600
    store.http.delete(SESSION_PATH, headers={"X-Agent-Session": first})
    session(store)
    store.clock.advance(seconds=600)  # every session expired: room again
    session(store), session(store)


# -- the rate limit ----------------------------------------------------------------------------------

def test_requests_per_minute_then_429_with_retry_after(make_store):
    store = make_store(agents=AgentsSettings(requests_per_minute=5))
    store.clock.advance(seconds=15)  # 45 s left in this minute
    for _ in range(5):
        assert store.http.get(f"{API}/browse").status_code == 200
    refused = store.http.get(f"{API}/detail", params={"id": store.catalog.products[0].id})
    assert_error(refused, 429, "the limit is 5 agents.json requests per minute per client address, set with "
                 "haggler serve --requests-per-minute")
    assert refused.headers["retry-after"] == "45"
    assert store.http.get(MANIFEST).status_code == 429  # the limit covers the whole surface
    store.clock.advance(seconds=45)
    assert store.http.get(f"{API}/browse").status_code == 200


def test_every_request_counts_once_refused_or_not(make_store):
    """The count rides in the request's own transaction; a refusal rolls that back, and the count
    is written again: a client gets no free requests by sending ones the store refuses."""
    store = make_store(agents=AgentsSettings(requests_per_minute=6))
    token = session(store)  # 1
    product = store.catalog.products[0].id
    assert_error(store.http.get(f"{API}/negotiate", params={"id": product}, headers={"X-Agent-Session": "x" * 43}),
                 401, "unknown")  # 2
    assert_error(store.http.get(f"{API}/browse", params={"sort": "sideways"}), 400)  # 3
    assert_error(store.http.post(f"{API}/cart", json={"item_id": "nope", "quantity": 1},
                                 headers={"X-Agent-Session": token}), 404)  # 4: the handler's refusal
    assert_error(store.http.post(SESSION_PATH, json={"agent_name": 5}), 400)  # 5
    assert store.http.get(f"{API}/browse").status_code == 200  # 6
    assert_error(store.http.get(f"{API}/browse"), 429)  # 7
    with create_engine(store.app.state.service.db.url).connect() as conn:
        assert conn.execute(select(rate_windows.c.count)).scalars().all() == [7]


def test_two_workers_on_one_database_share_the_limit(make_store, db_url):
    first = make_store(db_url=db_url, agents=AgentsSettings(requests_per_minute=6))
    second = make_store(db_url=db_url, clock=first.clock, agents=AgentsSettings(requests_per_minute=6))
    statuses = [(first if i % 2 else second).http.get(f"{API}/browse").status_code for i in range(8)]
    assert statuses == [200] * 6 + [429] * 2


# -- the validator command against our store ---------------------------------------------------------

def test_validate_manifest_command_passes_our_store_and_fails_a_broken_file(store, tmp_path):
    ok = CliRunner().invoke(cli, ["validate-manifest", store.base])
    assert ok.exit_code == 0, ok.output
    broken = manifest(store)
    del broken["capabilities"][0]["method"]
    broken["schema_version"] = "v1"
    path = tmp_path / "agents.json"
    path.write_text(json.dumps(broken), "utf-8")
    bad = CliRunner().invoke(cli, ["validate-manifest", str(path)])
    assert bad.exit_code == 1
    assert "rule 1" in bad.output and "rule 4" in bad.output and "method" in bad.output


# -- the audit trail over HTTP -----------------------------------------------------------------------

def test_a_sessions_calls_become_a_signed_trail_that_verifies_offline(store, tmp_path):
    from haggler.protocols.agents_json.audit import verify_artifact

    token = session(store, agent_name="auditee", purpose="find a vacuum")
    headers = {"X-Agent-Session": token}
    store.http.get(f"{API}/search", params={"q": "vacuum"}, headers=headers)
    store.http.get(f"{API}/detail", params={"id": "no-such-thing"}, headers=headers)  # refused: still recorded
    store.http.get(f"{API}/negotiate", params={"id": store.catalog.products[0].id}, headers=headers)
    store.http.get(f"{API}/search", params={"q": "x"}, headers=headers)
    session_id = next(iter(_session_ids(store)))
    early = store.http.get(f"{API}/audit/{session_id}")
    assert_error(early, 425)
    store.http.delete(SESSION_PATH, headers=headers)
    artifact = store.http.get(f"{API}/audit/{session_id}").json()
    assert [e["capability"] for e in artifact["events"]] == ["search", "detail", "negotiate", "search"]
    assert [e["response_status"] for e in artifact["events"]] == [200, 404, 200, 200]
    assert artifact["public_key"] == manifest(store)["audit"]["public_key"]
    assert verify_artifact(artifact, trusted_keys=[artifact["public_key"]]).ok
    assert token not in json.dumps(artifact)
    path = tmp_path / "a.json"
    path.write_text(json.dumps(artifact), "utf-8")
    assert CliRunner().invoke(cli, ["audit", "verify", f"{store.base}{API}/audit/{session_id}"]).exit_code == 0
    assert_error(store.http.get(f"{API}/audit/ses_unknown"), 404)


def test_an_expired_session_is_ended_and_signed_by_the_sweep(store):
    token = session(store)
    store.http.get(f"{API}/browse", headers={"X-Agent-Session": token})
    session_id = next(iter(_session_ids(store)))
    store.clock.advance(seconds=1800)
    assert store.app.state.agents.sweep() == 1
    artifact = store.http.get(f"{API}/audit/{session_id}").json()
    assert [e["capability"] for e in artifact["events"]] == ["browse"]


def test_audit_off_means_404(make_store, tmp_path):
    store = make_store(agents=AgentsSettings(audit_enabled=False), data_dir=tmp_path / "off")
    session(store)
    session_id = next(iter(_session_ids(store)))
    assert_error(store.http.get(f"{API}/audit/{session_id}"), 404, "not enabled")


def _session_ids(store) -> list[str]:
    engine = create_engine(store.app.state.service.db.url)
    with engine.connect() as conn:
        return [r.id for r in conn.execute(select(agent_sessions.c.id))]
