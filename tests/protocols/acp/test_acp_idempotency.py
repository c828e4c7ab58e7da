"""ACP's idempotency (rfc.agentic_checkout.md §6): the key required on every POST, the first answer
given again for the same body, 422 for another body, keys apart per endpoint."""

from __future__ import annotations

import json
import threading

from sqlalchemy import insert, select

from haggler.payments.handler import ChargeResult, PaymentOutcome
from haggler.storage.schema import checkout_sessions, idempotency_keys, orders

try:
    from tests.support.acp import KEY, conforms, create_body, headers, pay, ready_session
    from tests.support.processors import Held
except ImportError:  # pragma: no cover
    from support.acp import KEY, conforms, create_body, headers, pay, ready_session  # type: ignore[no-redef]
    from support.processors import Held  # type: ignore[no-redef]


def count(store, table) -> int:
    with store.app.state.acp.db.read() as conn:
        return len(conn.execute(select(table)).all())


def test_every_post_without_a_key_is_400_idempotency_key_required(acp_store):
    """§6.1: a POST without Idempotency-Key MUST be rejected, 400 idempotency_key_required."""
    ready = ready_session(acp_store.http)
    bare = {k: v for k, v in headers().items() if k != "Idempotency-Key"}
    for path, body in (("/checkout_sessions", create_body()), (f"/checkout_sessions/{ready['id']}", {}),
                       (f"/checkout_sessions/{ready['id']}/complete", pay()),
                       (f"/checkout_sessions/{ready['id']}/cancel", {})):
        answer = acp_store.http.post(path, headers=bare, json=body)
        assert answer.status_code == 400, path
        conforms(answer.json(), "Error")
        assert (answer.json()["type"], answer.json()["code"]) == ("invalid_request", "idempotency_key_required")
    assert count(acp_store, orders) == 0
    assert acp_store.http.get(f"/checkout_sessions/{ready['id']}", headers=headers()).json()["status"] == \
        "ready_for_payment"


def test_the_same_key_and_body_answer_the_first_answer_again(acp_store):
    """§6.3: same key and identical body MUST return the original response with the same status,
    SHOULD say Idempotent-Replayed; §6.2: key order and 1.0 vs 1 are the same body."""
    sent = headers()
    first = acp_store.http.post("/checkout_sessions", headers=sent, json=create_body("green_tea", 2))
    assert first.status_code == 201 and first.headers["Idempotency-Key"] == sent["Idempotency-Key"]
    assert "Idempotent-Replayed" not in first.headers
    assert first.headers["Request-Id"] == sent["Request-Id"]
    reordered = json.dumps({"currency": "usd", "capabilities": {"extensions": ["discount"]},
                            "line_items": [{"quantity": 2.0, "id": "green_tea"}]})
    again = acp_store.http.post("/checkout_sessions", headers={**sent, "Content-Type": "application/json"},
                                content=reordered)
    assert again.status_code == 201 and again.json() == first.json()
    assert again.headers["Idempotent-Replayed"] == "true"
    assert count(acp_store, checkout_sessions) == 1


def test_the_same_key_with_another_body_is_422_idempotency_conflict(acp_store):
    """§6.4: same key, different body: 422 idempotency_conflict; §6.2: null differs from absent."""
    sent = headers()
    assert acp_store.http.post("/checkout_sessions", headers=sent, json=create_body()).status_code == 201
    for other in (create_body("mug"), {**create_body(), "buyer": None}):
        answer = acp_store.http.post("/checkout_sessions", headers=sent, json=other)
        assert answer.status_code == 422
        conforms(answer.json(), "Error")
        assert (answer.json()["type"], answer.json()["code"]) == ("invalid_request", "idempotency_conflict")
    assert count(acp_store, checkout_sessions) == 1


def test_extension_fields_take_part_in_the_body_comparison(acp_store):
    """§6.7: when an ACP extension is active, extension-defined fields in the request body MUST
    participate in body comparison (§6.2). The discount extension is active for the session (the
    agent declared it, the store's answer lists it); the same key with a body that differs only in
    ``discounts`` is 422 idempotency_conflict and changes nothing; the identical body replays."""
    created = acp_store.http.post("/checkout_sessions", headers=headers(), json=create_body("teapot")).json()
    assert [e["name"] for e in created["capabilities"]["extensions"]] == ["discount"]
    path = f"/checkout_sessions/{created['id']}"
    sent = headers()
    first = acp_store.http.post(path, headers=sent, json={"discounts": {"codes": ["TENOFF"]}})
    assert first.status_code == 200 and first.json()["discounts"]["codes"] == ["TENOFF"]
    for other in ({"discounts": {"codes": ["TWO100"]}}, {"discounts": {"codes": ["TENOFF", "TWO100"]}},
                  {"discounts": {"codes": []}}, {"discounts": {}}, {}):
        answer = acp_store.http.post(path, headers=sent, json=other)
        assert answer.status_code == 422, other
        conforms(answer.json(), "Error")
        assert (answer.json()["type"], answer.json()["code"]) == ("invalid_request", "idempotency_conflict")
    again = acp_store.http.post(path, headers=sent, json={"discounts": {"codes": ["TENOFF"]}})
    assert again.status_code == 200 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    current = acp_store.http.get(path, headers=headers()).json()
    assert current["discounts"]["codes"] == ["TENOFF"] and current == first.json()
    # At create too: the same key, the same body but for discounts.
    key = headers()
    assert acp_store.http.post("/checkout_sessions", headers=key,
                               json=create_body("teapot", discounts={"codes": ["TENOFF"]})).status_code == 201
    conflict = acp_store.http.post("/checkout_sessions", headers=key,
                                   json=create_body("teapot", discounts={"codes": ["QUARTER"]}))
    assert conflict.status_code == 422 and conflict.json()["code"] == "idempotency_conflict"
    assert count(acp_store, checkout_sessions) == 2


def test_keys_are_scoped_to_the_endpoint(acp_store):
    """§6.1: the same key on different endpoints is treated independently."""
    ready = ready_session(acp_store.http)
    key = "shared-key-1"
    assert acp_store.http.post(f"/checkout_sessions/{ready['id']}", headers=headers(key), json={}).status_code == 200
    done = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(key), json=pay())
    assert done.status_code == 200 and "Idempotent-Replayed" not in done.headers


def test_a_completion_replayed_charges_and_orders_nothing_more(acp_store):
    """§6.3: servers MUST NOT re-execute side effects on replay."""
    ready = ready_session(acp_store.http)
    sent = headers()
    first = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=sent, json=pay())
    again = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=sent, json=pay())
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"
    assert count(acp_store, orders) == 1


def test_a_refusal_is_kept_and_answered_again(acp_store):
    """§6.3 and §6.5: a 4xx is the original response (only a 5xx is not kept)."""
    ready = ready_session(acp_store.http)
    sent = headers()
    first = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=sent, json=pay("fail_token"))
    again = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=sent, json=pay("fail_token"))
    assert first.status_code == again.status_code == 402
    assert again.json() == first.json() and again.headers["Idempotent-Replayed"] == "true"


def test_answers_are_kept_at_least_24_hours_then_forgotten(acp_store):
    """§6.6: retained for at least 24 hours; after expiry the key is a new request."""
    sent = headers()
    first = acp_store.http.post("/checkout_sessions", headers=sent, json=create_body())
    acp_store.clock.advance(hours=24, seconds=1)
    kept = acp_store.http.post("/checkout_sessions", headers=sent, json=create_body())
    assert kept.headers.get("Idempotent-Replayed") == "true" and kept.json()["id"] == first.json()["id"]
    acp_store.clock.advance(hours=24)
    assert acp_store.app.state.acp.sweep() == 1
    fresh = acp_store.http.post("/checkout_sessions", headers=sent, json=create_body())
    assert fresh.status_code == 201 and fresh.json()["id"] != first.json()["id"]
    assert count(acp_store, idempotency_keys) == 1


def test_a_key_longer_than_255_characters_is_refused(acp_store):
    answer = acp_store.http.post("/checkout_sessions", headers=headers("k" * 256), json=create_body())
    assert answer.status_code == 400 and "255" in answer.json()["message"]
    assert answer.json()["type"] == "invalid_request" and count(acp_store, checkout_sessions) == 0


def test_a_key_whose_first_request_still_runs_is_409_in_flight(acp_store):
    """§6.4: same key while the original is processing: 409 idempotency_in_flight, Retry-After."""
    acp = acp_store.app.state.acp
    digest = acp.keys.fingerprint("POST /checkout_sessions", create_body())
    with acp.db.write() as conn:  # what the first request leaves while it runs
        conn.execute(insert(idempotency_keys).values(
            agent_id=acp.keys.owner(KEY, "/checkout_sessions"), key="running",
            request_hash=digest, created_at=acp_store.clock()))
    answer = acp_store.http.post("/checkout_sessions", headers=headers("running"), json=create_body())
    assert answer.status_code == 409 and int(answer.headers["Retry-After"]) >= 1
    conforms(answer.json(), "Error")
    assert answer.json()["code"] == "idempotency_in_flight" and count(acp_store, checkout_sessions) == 0


def test_a_key_whose_first_request_died_is_taken_over_after_a_while(acp_store):
    """A worker that died mid-request leaves its key in flight; a retry after STALE_AFTER runs."""
    acp = acp_store.app.state.acp
    digest = acp.keys.fingerprint("POST /checkout_sessions", create_body())
    with acp.db.write() as conn:
        conn.execute(insert(idempotency_keys).values(
            agent_id=acp.keys.owner(KEY, "/checkout_sessions"), key="orphan",
            request_hash=digest, created_at=acp_store.clock()))
    assert acp_store.http.post("/checkout_sessions", headers=headers("orphan"), json=create_body()).status_code == 409
    acp_store.clock.advance(minutes=5)
    retried = acp_store.http.post("/checkout_sessions", headers=headers("orphan"), json=create_body())
    assert retried.status_code == 201 and "Idempotent-Replayed" not in retried.headers


def test_a_completion_told_to_retry_in_a_moment_is_not_kept(acp_store):
    """§6.3 replays an answer, but a 409 that says another completion of the session is charging,
    with Retry-After, asks for the same request again in a moment: kept, it would be answered for a
    day. The same key then runs (here: the first completion was declined, so this one is charged)."""
    held = Held(ChargeResult(PaymentOutcome.DECLINED, reason="insufficient funds"))
    acp_store.app.state.acp.sessions.handlers[held.id] = held
    ready = ready_session(acp_store.http)
    path = f"/checkout_sessions/{ready['id']}/complete"
    first = threading.Thread(target=lambda: acp_store.http.post(path, headers=headers(), json=pay()))
    first.start()
    assert held.started.wait(10)
    sent = headers()
    busy = acp_store.http.post(path, headers=sent, json=pay())
    assert busy.status_code == 409 and int(busy.headers["Retry-After"]) >= 1
    held.go.set()
    first.join(10)
    again = acp_store.http.post(path, headers=sent, json=pay())
    assert again.status_code == 402 and "Idempotent-Replayed" not in again.headers
    assert len(held.charges) == 2
