"""What an ``idempotency-key`` keeps, over real HTTP: checkout-rest.md, "Specific Header
Requirements", Idempotency-Key: the server MUST store the key with the operation result for at least
24 hours and return the cached result for a duplicate key. A refusal is a result; an answer that
does not know the outcome (5xx) or asks to come back in a moment is not."""

from __future__ import annotations

from sqlalchemy import select

from haggler.payments.handler import ChargeResult, PaymentOutcome, PaymentUnavailable
from haggler.storage.schema import orders

try:
    from tests.support.processors import Scripted
    from tests.support.ucp import create_body, headers, pay, ready_checkout
except ImportError:  # pragma: no cover
    from support.processors import Scripted  # type: ignore[no-redef]
    from support.ucp import create_body, headers, pay, ready_checkout  # type: ignore[no-redef]

PROFILE = "https://platform.example/profile.json"


def use(store, processor: Scripted) -> Scripted:
    store.app.state.ucp.sessions.handlers[processor.id] = processor
    return processor


def placed(store) -> int:
    with store.app.state.ucp.db.read() as conn:
        return len(conn.execute(select(orders.c.id)).all())


def test_a_declined_completion_sent_again_with_its_key_is_declined_again_not_charged_again(ucp_store):
    """The cached result of a 402 is the 402: the processor is asked once. A new attempt (another
    card) takes a new key."""
    processor = use(ucp_store, Scripted(ChargeResult(PaymentOutcome.DECLINED, reason="insufficient funds"),
                                        ChargeResult(PaymentOutcome.SUCCEEDED, "ch_2")))
    checkout = ready_checkout(ucp_store.http)
    path = f"/checkout-sessions/{checkout['id']}/complete"
    sent = headers(key="complete-1")
    first = ucp_store.http.post(path, headers=sent, json=pay("card-a"))
    again = ucp_store.http.post(path, headers=sent, json=pay("card-a"))
    assert first.status_code == again.status_code == 402
    assert again.json() == first.json() and first.json()["messages"][0]["code"] == "payment_declined"
    assert len(processor.charges) == 1
    assert ucp_store.http.post(path, headers=headers(key="complete-2"), json=pay("card-b")).status_code == 200
    assert placed(ucp_store) == 1


def test_a_refusal_is_the_keys_answer_even_once_the_checkout_has_changed(ucp_store):
    """A completion refused (400: nothing chosen to ship by) is answered the same for its key after
    the checkout became ready: the key named that attempt, which is over."""
    created = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body("mug", 1)).json()
    path = f"/checkout-sessions/{created['id']}/complete"
    first = ucp_store.http.post(path, headers=headers(key="too-early"), json=pay())
    assert first.status_code == 400
    ready = {"fulfillment": {"methods": [{"type": "shipping", "destinations": [
        {"id": "d1", "street_address": "9 Quay Rd", "postal_code": "12345", "address_country": "US"}],
        "selected_destination_id": "d1", "groups": [{"selected_option_id": "ground"}]}]}}
    updated = ucp_store.http.put(f"/checkout-sessions/{created['id']}", headers=headers(), json=ready)
    assert updated.json()["status"] == "ready_for_complete"
    again = ucp_store.http.post(path, headers=headers(key="too-early"), json=pay())
    assert (again.status_code, again.json()) == (400, first.json()) and placed(ucp_store) == 0
    assert ucp_store.http.post(path, headers=headers(key="ready-now"), json=pay()).status_code == 200


def test_a_completion_whose_outcome_is_unknown_runs_again_with_its_key(ucp_store):
    """A 503 (the processor did not answer) is no result: the same completion with the same key asks
    the processor again, under the same payment key, and places the order."""
    processor = use(ucp_store, Scripted(PaymentUnavailable("timeout"), ChargeResult(PaymentOutcome.SUCCEEDED, "ch_1")))
    checkout = ready_checkout(ucp_store.http)
    path = f"/checkout-sessions/{checkout['id']}/complete"
    sent = headers(key="complete-unknown")
    assert ucp_store.http.post(path, headers=sent, json=pay()).status_code == 503
    settled = ucp_store.http.post(path, headers=sent, json=pay())
    assert settled.status_code == 200 and settled.json()["status"] == "completed"
    assert len(processor.charges) == 2 and len({c.idempotency_key for c in processor.charges}) == 1
    assert placed(ucp_store) == 1


def test_keys_are_scoped_by_the_profile_a_caller_claims(ucp_store):
    """What holds, UCP-Agent being a claim (docs/ucp.md, "Idempotency"): a caller naming the same
    profile and sending the same key with the very same request is answered the stored answer;
    with any other request, 409 and nothing of the stored answer; under another profile the key is
    its own. The stored answer is no more than the key's holder could read already: the key is a
    random value the platform chose, and a session's id, which a replay of any other write needs in
    its path, is what reads a session."""
    key = "d9b2c1e0-platforms-own-random-key"
    first = ucp_store.http.post("/checkout-sessions", headers=headers(PROFILE, key), json=create_body("mug", 1))
    assert first.status_code == 201
    same_claim = ucp_store.http.post("/checkout-sessions", headers=headers(PROFILE, key), json=create_body("mug", 1))
    assert (same_claim.status_code, same_claim.json()) == (201, first.json())
    probing = ucp_store.http.post("/checkout-sessions", headers=headers(PROFILE, key), json=create_body("mug", 2))
    assert probing.status_code == 409 and first.json()["id"] not in probing.text
    elsewhere = ucp_store.http.post("/checkout-sessions", headers=headers("https://other.example/p.json", key),
                                    json=create_body("mug", 1))
    assert elsewhere.status_code == 201 and elsewhere.json()["id"] != first.json()["id"]
