"""3-D Secure run by the buyer's agent, through ACP over real HTTP with the simulated handler's
``authentication_token`` (a card whose issuer asks for it): each MUST named by its section of
rfc.agentic_checkout.md (§4.4 Complete Session, §8 Validation Rules, §9.7), of
rfc.capability_negotiation.md and of rfc.discovery.md; every answer checked against ACP's schemas."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import select

from haggler.payments.simulated import AUTHENTICATION_TOKEN
from haggler.storage.schema import deal_redemptions, orders

try:
    from tests.support.acp import conforms, create_body, headers, pay, ready_session
    from tests.support.checkout import close_a_deal
except ImportError:  # pragma: no cover
    from support.acp import conforms, create_body, headers, pay, ready_session  # type: ignore[no-redef]
    from support.checkout import close_a_deal  # type: ignore[no-redef]

AUTHENTICATED = {"outcome": "authenticated", "outcome_details": {
    "three_ds_cryptogram": "AbCdEfGhIjKlMnOpQrStUvWxY0=", "electronic_commerce_indicator": "05",
    "transaction_id": "dsTransId_abc123", "version": "2.2.0"}}
#: The simulated acquirer as ACP's AuthenticationMetadata (payments/simulated.py: test values).
SIMULATED_METADATA = {"acquirer_details": {"acquirer_bin": "000000", "acquirer_country": "US",
                                           "acquirer_merchant_id": "haggler-simulated",
                                           "merchant_name": "haggler test store (simulated)"},
                      "directory_server": "visa"}


def rows(store, table) -> list:
    with store.app.state.acp.db.read() as conn:
        return conn.execute(select(table)).all()


def complete(store, session_id: str, body: dict[str, Any], key: str | None = None):
    return store.http.post(f"/checkout_sessions/{session_id}/complete", headers=headers(key), json=body)


def with_result(result: dict[str, Any] | None = None, token: str = AUTHENTICATION_TOKEN) -> dict[str, Any]:
    return {**pay(token), "authentication_result": result or AUTHENTICATED}


def read(store, session_id: str) -> dict[str, Any]:
    answer = store.http.get(f"/checkout_sessions/{session_id}", headers=headers())
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


@pytest.fixture
def waiting(acp_store) -> dict[str, Any]:
    """A session paying for a chat deal with the authentication token: authentication_required."""
    product = acp_store.catalog.products[0]
    deal = close_a_deal(acp_store.http, product)
    session = ready_session(acp_store.http, product.id, discounts={"codes": [deal["id"]]})
    answer = complete(acp_store, session["id"], pay(AUTHENTICATION_TOKEN))
    assert answer.status_code == 200, answer.text
    return {"session": session, "deal": deal, "answer": answer.json()}


def test_rfc_agentic_checkout_4_4_and_8_authentication_required_comes_with_authentication_metadata(
        acp_store, waiting) -> None:
    """§4.4: the server MUST set status authentication_required when 3-D Secure is required; §8: the
    response MUST then include authentication_metadata (the handler's acquirer and network)."""
    body = waiting["answer"]
    conforms(body, "CheckoutSession")
    assert body["status"] == "authentication_required"
    assert body["authentication_metadata"] == SIMULATED_METADATA
    conforms(body["authentication_metadata"], "AuthenticationMetadata")
    assert "continue_url" not in body and "order" not in body
    [message] = [m for m in body["messages"] if m["type"] == "error"]
    assert (message["code"], message["param"]) == ("requires_3ds", "$.authentication_metadata")
    again = read(acp_store, body["id"])  # a read says the same
    assert (again["status"], again["authentication_metadata"]) == ("authentication_required", SIMULATED_METADATA)
    assert rows(acp_store, orders) == [] and len(rows(acp_store, deal_redemptions)) == 1  # the deal is held


def test_rfc_agentic_checkout_4_4_and_9_7_complete_without_authentication_result_is_4xx_requires_3ds(
        acp_store, waiting) -> None:
    """§4.4, §9.7: complete while authentication_required without authentication_result: the server
    MUST answer 4XX in the Error shape, type invalid_request, code requires_3ds, param
    $.authentication_result. Nothing is charged and the session still waits."""
    session_id = waiting["answer"]["id"]
    refused = complete(acp_store, session_id, pay(AUTHENTICATION_TOKEN))
    assert refused.status_code == 400
    conforms(refused.json(), "Error")
    assert {k: refused.json()[k] for k in ("type", "code", "param")} == {
        "type": "invalid_request", "code": "requires_3ds", "param": "$.authentication_result"}
    assert read(acp_store, session_id)["status"] == "authentication_required" and rows(acp_store, orders) == []
    # whatever the payment: the result is what is missing
    other = complete(acp_store, session_id, pay("success_token"))
    assert (other.status_code, other.json()["code"]) == (400, "requires_3ds")


def test_rfc_agentic_checkout_4_4_the_authentication_result_completes_the_same_payment_once(
        acp_store, waiting) -> None:
    """§4.4: the client returns authentication_result with POST /complete; the response MUST be
    completed with an order. The result continues the payment that asked for it: one order, the deal
    bought once, and the same request replayed is the same answer, not a second charge."""
    session_id = waiting["answer"]["id"]
    done = complete(acp_store, session_id, with_result(), key="k-auth-done")
    assert done.status_code == 200, done.text
    body = done.json()
    assert body["status"] == "completed" and body["order"]["checkout_session_id"] == session_id
    conforms(body.pop("order"), "Order")
    conforms(body, "CheckoutSession")
    assert "authentication_metadata" not in body
    [order] = rows(acp_store, orders)
    assert (order.id, order.deal_id) == (done.json()["order"]["id"], waiting["deal"]["id"])
    assert len(rows(acp_store, deal_redemptions)) == 1
    replayed = complete(acp_store, session_id, with_result(), key="k-auth-done")
    assert replayed.headers["Idempotent-Replayed"] == "true" and replayed.json() == done.json()
    again = complete(acp_store, session_id, with_result())
    assert again.status_code == 409 and len(rows(acp_store, orders)) == 1


@pytest.mark.parametrize("outcome", ["denied", "rejected", "abandoned", "internal_error"])
def test_rfc_agentic_checkout_4_4_a_failed_authentication_is_declined_with_no_order_and_the_deal_back(
        acp_store, waiting, outcome: str) -> None:
    """§4.4: the client returns authentication_result whatever the outcome; a failed one is a decline
    (402 payment_declined): nothing charged, no order, the deal not redeemed, the session ready again."""
    session_id = waiting["answer"]["id"]
    declined = complete(acp_store, session_id, with_result({"outcome": outcome}))
    assert declined.status_code == 402 and declined.json()["code"] == "payment_declined"
    conforms(declined.json(), "Error")
    assert declined.json()["type"] == "processing_error" and outcome in declined.json()["message"]
    assert rows(acp_store, orders) == [] and rows(acp_store, deal_redemptions) == []
    after = read(acp_store, session_id)
    assert after["status"] == "ready_for_payment" and "authentication_metadata" not in after
    # the deal is there to buy again, with another card
    paid = complete(acp_store, session_id, pay("success_token"))
    assert paid.status_code == 200 and paid.json()["status"] == "completed"


@pytest.mark.parametrize(("result", "param"), [
    ("yes", "$.authentication_result"),
    ({}, "$.authentication_result.outcome"),
    ({"outcome": "ok"}, "$.authentication_result.outcome"),
    ({"outcome": "authenticated"}, "$.authentication_result.outcome_details"),
    ({"outcome": "authenticated", "outcome_details": "x"}, "$.authentication_result.outcome_details"),
    ({"outcome": "authenticated", "outcome_details": {**AUTHENTICATED["outcome_details"], "version": ""}},
     "$.authentication_result.outcome_details.version"),
    ({"outcome": "attempt_acknowledged",
      "outcome_details": {k: v for k, v in AUTHENTICATED["outcome_details"].items() if k != "transaction_id"}},
     "$.authentication_result.outcome_details.transaction_id"),
    ({"outcome": "authenticated", "outcome_details": {**AUTHENTICATED["outcome_details"],
                                                      "electronic_commerce_indicator": "5"}},
     "$.authentication_result.outcome_details.electronic_commerce_indicator"),
    ({**AUTHENTICATED, "status": "authenticated"}, "$.authentication_result.status"),
    ({"outcome": "authenticated", "outcome_details": {**AUTHENTICATED["outcome_details"], "eci x": "05"}},
     "$.authentication_result.outcome_details['eci x']"),
])
def test_an_authentication_result_not_of_acps_schema_is_400_naming_the_field(
        acp_store, waiting, result: Any, param: str) -> None:
    """AuthenticationResult (openapi.agentic_checkout.yaml): outcome from its enum, outcome_details
    required for authenticated, informational and attempt_acknowledged, with its four fields, the ECI
    from its enum, no other field. A bad one changes nothing."""
    session_id = waiting["answer"]["id"]
    refused = complete(acp_store, session_id, {**pay(AUTHENTICATION_TOKEN), "authentication_result": result})
    assert refused.status_code == 400, refused.text
    conforms(refused.json(), "Error")
    assert (refused.json()["type"], refused.json()["param"]) == ("invalid_request", param)
    assert read(acp_store, session_id)["status"] == "authentication_required" and rows(acp_store, orders) == []


def test_an_authentication_result_for_a_payment_that_never_asked_is_refused_and_charges_nothing(acp_store) -> None:
    session = ready_session(acp_store.http)
    refused = complete(acp_store, session["id"], with_result(token="success_token"))
    assert refused.status_code == 400 and refused.json()["param"] == "$.authentication_result"
    assert read(acp_store, session["id"])["status"] == "ready_for_payment" and rows(acp_store, orders) == []


def test_another_card_while_awaiting_authentication_is_refused_and_the_first_payment_goes_on(
        acp_store, waiting) -> None:
    """The hold takes only the payment that asked for 3-D Secure until it settles: the result with
    another card is 409 and charges nothing; the session cannot be canceled meanwhile."""
    session_id = waiting["answer"]["id"]
    other = complete(acp_store, session_id, with_result(token="success_token"))
    assert other.status_code == 409 and "another payment" in other.json()["message"]
    canceled = acp_store.http.post(f"/checkout_sessions/{session_id}/cancel", headers=headers(), json={})
    assert canceled.status_code == 409 and "authenticate" in canceled.json()["message"]
    done = complete(acp_store, session_id, with_result())
    assert done.status_code == 200 and len(rows(acp_store, orders)) == 1


@pytest.mark.parametrize(("declared", "answered"), [
    ({"interventions": {"supported": ["3ds", "biometric", "something_new"]}}, ["3ds"]),
    ({"interventions": {"supported": ["address_verification"]}}, []),
    ({"interventions": {"supported": []}}, []),
    ({"interventions": {"display_context": "native"}}, []),
    ({}, [])])
def test_rfc_capability_negotiation_7_1_the_session_answers_the_intersection_of_interventions(
        acp_store, declared: dict, answered: list) -> None:
    """rfc.capability_negotiation.md §7.1: sellers MUST compute and return the intersection of
    interventions.supported; the store supports 3ds (its simulated handler hands 3-D Secure to the
    agent); values it does not know are accepted (§6.4) and never offered."""
    created = acp_store.http.post("/checkout_sessions", headers=headers(),
                                  json={**create_body(), "capabilities": {"extensions": ["discount"], **declared}})
    assert created.status_code == 201, created.text
    conforms(created.json(), "CheckoutSession")
    assert created.json()["capabilities"]["interventions"] == {"supported": answered}
    [handler] = created.json()["capabilities"]["payment"]["handlers"]
    assert handler["config"]["supports_3ds"] is True
    kept = acp_store.http.post(f"/checkout_sessions/{created.json()['id']}", headers=headers(), json={})
    assert kept.json()["capabilities"]["interventions"] == {"supported": answered}  # kept by the session


def test_interventions_of_a_wrong_shape_are_400_naming_the_field(acp_store) -> None:
    refused = acp_store.http.post("/checkout_sessions", headers=headers(), json={
        **create_body(), "capabilities": {"interventions": {"supported": "3ds"}}})
    assert refused.status_code == 400 and refused.json()["param"] == "$.capabilities.interventions.supported"


def test_rfc_discovery_4_2_discovery_lists_3ds_among_intervention_types(acp_store) -> None:
    """rfc.discovery.md §4.2: intervention_types, which a seller SHOULD include when it supports
    interventions."""
    document = acp_store.http.get("/.well-known/acp.json").json()
    assert document["capabilities"]["intervention_types"] == ["3ds"]


def test_an_agent_that_declared_it_cannot_run_3ds_is_not_left_holding_a_payment_it_cannot_finish(acp_store) -> None:
    """An agent whose ``capabilities.interventions.supported`` leaves out 3ds could never send an
    authentication_result: with no processor page to send the buyer to, the payment is declined and
    the deal and the stock given back at once, not held until the store settles it by hand."""
    product = acp_store.catalog.products[0]
    deal = close_a_deal(acp_store.http, product)
    session = ready_session(acp_store.http, product.id, discounts={"codes": [deal["id"]]},
                            capabilities={"extensions": ["discount"], "interventions": {"supported": []}})
    declined = complete(acp_store, session["id"], pay(AUTHENTICATION_TOKEN))
    assert declined.status_code == 402, declined.text
    conforms(declined.json(), "Error")
    assert declined.json()["code"] == "payment_declined"
    assert rows(acp_store, orders) == [] and rows(acp_store, deal_redemptions) == []
    assert read(acp_store, session["id"])["status"] == "ready_for_payment"
