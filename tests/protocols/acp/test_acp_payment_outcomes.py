"""Payments without a plain yes or no, through ACP over real HTTP: 3-D Secure on the processor's own
page, a processor that does not answer, and a total that changed after the agent saw it; each answer
checked against ACP's schemas."""

from __future__ import annotations

from sqlalchemy import select

from haggler.payments.handler import ChargeResult, PaymentOutcome, PaymentUnavailable
from haggler.storage.schema import commerce_shipping_rates, orders

try:
    from tests.support.acp import conforms, headers, pay, ready_session
    from tests.support.processors import Scripted
except ImportError:  # pragma: no cover
    from support.acp import conforms, headers, pay, ready_session  # type: ignore[no-redef]
    from support.processors import Scripted  # type: ignore[no-redef]

THREE_DS = ChargeResult(PaymentOutcome.ACTION_REQUIRED, "pi_1", reason="The card issuer asks the buyer to authenticate",
                        action_url="https://pay.example/3ds/pi_1")


def use(store, processor: Scripted) -> Scripted:
    store.app.state.acp.sessions.handlers[processor.id] = processor
    return processor


def placed(store) -> list:
    with store.app.state.acp.db.read() as conn:
        return conn.execute(select(orders)).all()


def complete(store, session_id: str, key: str):
    return store.http.post(f"/checkout_sessions/{session_id}/complete", headers=headers(key), json=pay())


def test_three_d_secure_on_the_processors_page_is_requires_escalation(acp_store):
    processor = use(acp_store, Scripted(THREE_DS))
    session = ready_session(acp_store.http)
    answer = complete(acp_store, session["id"], "k-3ds-1")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    conforms(body, "CheckoutSession")
    assert body["status"] == "requires_escalation" and body["continue_url"] == THREE_DS.action_url
    [message] = [m for m in body["messages"] if m["type"] == "error"]
    assert (message["code"], message["resolution"]) == ("requires_3ds", "requires_buyer_input")
    assert placed(acp_store) == []
    processor.settle_all(ChargeResult(PaymentOutcome.SUCCEEDED, "pi_1"))
    done = complete(acp_store, session["id"], "k-3ds-2")
    assert done.status_code == 200 and done.json()["status"] == "completed"
    finished = done.json()
    conforms(finished.pop("order"), "Order")  # each on its own schema: see test_complete_charges_once_and_answers_completed_with_its_order
    conforms(finished, "CheckoutSession")
    assert "continue_url" not in finished
    [order] = placed(acp_store)
    assert order.payment_reference == "pi_1"


def test_no_answer_is_503_and_the_same_payment_settles_it(acp_store):
    use(acp_store, Scripted(PaymentUnavailable("timeout"), ChargeResult(PaymentOutcome.SUCCEEDED, "ch_1")))
    session = ready_session(acp_store.http)
    first = complete(acp_store, session["id"], "k-na-1")
    assert first.status_code == 503 and first.json()["type"] == "service_unavailable"
    read = acp_store.http.get(f"/checkout_sessions/{session['id']}", headers=headers()).json()
    assert read["status"] == "complete_in_progress"
    done = complete(acp_store, session["id"], "k-na-2")
    assert done.status_code == 200 and done.json()["status"] == "completed" and len(placed(acp_store)) == 1


def test_a_total_changed_since_it_was_shown_is_refused(acp_store):
    session = ready_session(acp_store.http)
    with acp_store.app.state.acp.db.write() as conn:
        conn.execute(commerce_shipping_rates.update().values(price_cents=commerce_shipping_rates.c.price_cents + 50))
    refused = complete(acp_store, session["id"], "k-tc-1")
    assert refused.status_code == 409 and refused.json()["code"] == "total_changed"
    conforms(refused.json(), "Error")
    read = acp_store.http.get(f"/checkout_sessions/{session['id']}", headers=headers()).json()
    done = complete(acp_store, session["id"], "k-tc-2")
    assert done.status_code == 200
    assert done.json()["totals"][-1]["amount"] == read["totals"][-1]["amount"] == session["totals"][-1]["amount"] + 50
