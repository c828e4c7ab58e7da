"""The ACP merchant over real HTTP: sessions created, updated, read, completed and canceled as
rfc.agentic_checkout.md and ACP's OpenAPI document define them, each answer checked against ACP's own
schemas. A test for a MUST names the RFC's section."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from haggler.storage.schema import orders

try:
    from tests.support.acp import ADDRESS, KEY, conforms, create_body, headers, pay, ready_body, ready_session
except ImportError:  # pragma: no cover
    from support.acp import ADDRESS, KEY, conforms, create_body, headers, pay, ready_body, ready_session  # type: ignore[no-redef]


def totals(body: dict) -> dict[str, int]:
    return {t["type"]: t["amount"] for t in body["totals"]}


def placed(store) -> list:
    with store.app.state.acp.db.read() as conn:
        return conn.execute(select(orders)).all()


def test_create_prices_from_the_store_in_minor_units(acp_store):
    """§4.1: 201 with the authoritative cart; §3.1: amounts are integers in minor units."""
    answer = acp_store.http.post("/checkout_sessions", headers=headers(),
                                 json=create_body("green_tea", 2, line_items=[
                                     {"id": "green_tea", "name": "cheap", "unit_amount": 1, "quantity": 2}]))
    assert answer.status_code == 201, answer.text
    body = answer.json()
    conforms(body, "CheckoutSession")
    assert body["status"] == "not_ready_for_payment" and body["currency"] == "usd"
    [line] = body["line_items"]
    assert (line["item"]["id"], line["quantity"], line["unit_amount"]) == ("green_tea", 2, 1200)
    assert totals(body) == {"items_base_amount": 2400, "subtotal": 2400, "total": 2400}
    assert all(isinstance(t["amount"], int) for t in body["totals"] + line["totals"])
    assert body["fulfillment_options"] == [] and body["protocol"] == {"version": "2026-04-17"}
    handlers = body["capabilities"]["payment"]["handlers"]
    assert [h["id"] for h in handlers] == ["mock_payment_handler"]
    assert body["capabilities"]["extensions"][0]["name"] == "discount"


def test_an_address_brings_options_and_choosing_one_makes_it_ready(acp_store):
    created = acp_store.http.post("/checkout_sessions", headers=headers(), json=ready_body()).json()
    conforms(created, "CheckoutSession")
    assert created["status"] == "not_ready_for_payment"
    assert [o["id"] for o in created["fulfillment_options"]] == ["ground", "air-us"]  # US: its own express rate
    assert created["fulfillment_details"]["address"] == ADDRESS
    ready = ready_session(acp_store.http)
    conforms(ready, "CheckoutSession")
    assert ready["selected_fulfillment_options"][0]["option_id"] == "ground"
    assert totals(ready) == {"items_base_amount": 1200, "subtotal": 1200, "fulfillment": 600, "total": 1800}
    # The update named only the option: the address stayed.
    assert ready["fulfillment_details"]["address"] == ADDRESS
    # A new address where ground is still offered keeps the option chosen, with nothing to say.
    moved = acp_store.http.post(f"/checkout_sessions/{ready['id']}", headers=headers(), json={
        "fulfillment_details": {"address": {**ADDRESS, "line_one": "2 Engine St", "postal_code": "97202"}}}).json()
    assert moved["status"] == "ready_for_payment" and moved["fulfillment_details"]["address"]["line_one"] == "2 Engine St"
    assert moved["messages"] == []


def test_an_option_not_offered_is_not_selected(acp_store):
    """§8: selected_fulfillment_options[].option_id MUST match an element of fulfillment_options."""
    created = acp_store.http.post("/checkout_sessions", headers=headers(), json=ready_body()).json()
    answer = acp_store.http.post(f"/checkout_sessions/{created['id']}", headers=headers(), json={
        "selected_fulfillment_options": [{"type": "shipping", "option_id": "teleport", "item_ids": []}]})
    assert answer.status_code == 200
    body = answer.json()
    conforms(body, "CheckoutSession")
    assert "selected_fulfillment_options" not in body and body["status"] == "not_ready_for_payment"
    assert body["messages"][0]["param"] == "$.selected_fulfillment_options[0].option_id"


def test_get_returns_the_latest_state_and_404_for_an_unknown_id(acp_store):
    """§4.3: GET returns the authoritative state, or 404."""
    ready = ready_session(acp_store.http)
    got = acp_store.http.get(f"/checkout_sessions/{ready['id']}", headers=headers())
    assert got.status_code == 200 and got.json() == ready
    missing = acp_store.http.get("/checkout_sessions/chk_nope", headers=headers())
    assert missing.status_code == 404
    conforms(missing.json(), "Error")
    assert missing.json()["type"] == "invalid_request" and missing.json()["code"] == "not_found"


def test_complete_charges_once_and_answers_completed_with_its_order(acp_store):
    """§4.4: completion MUST create an order; the answer MUST have status completed and an order
    with id, checkout_session_id and permalink_url."""
    ready = ready_session(acp_store.http)
    done = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                               json={**pay(), "buyer": {"email": "ada@example.com", "first_name": "Ada",
                                                        "last_name": "Lovelace"}})
    assert done.status_code == 200, done.text
    body = done.json()
    # ACP's CheckoutSessionWithOrder cannot validate as written (its base closes additionalProperties
    # and does not list order): the session and the order are checked each against its own schema.
    order = body.pop("order")
    conforms(body, "CheckoutSession")
    conforms(order, "Order")
    assert body["status"] == "completed" and order["checkout_session_id"] == ready["id"]
    assert order["id"] and order["permalink_url"].endswith(f"/checkout_sessions/{ready['id']}")
    assert body["buyer"]["last_name"] == "Lovelace"
    [row] = placed(acp_store)
    assert (row.id, row.door, row.total_cents, row.payment_handler) == (order["id"], "acp", 1800, "mock_payment_handler")
    again = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(), json=pay())
    assert again.status_code == 409 and again.json()["type"] == "invalid_request"
    assert len(placed(acp_store)) == 1


def test_the_older_token_and_provider_pay_through_the_handler_the_provider_names(acp_store):
    ready = ready_session(acp_store.http)
    done = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                               json={"payment_data": {"token": "success_token", "provider": "mock_payment_handler"}})
    assert done.status_code == 200 and done.json()["status"] == "completed"


def test_a_declined_payment_leaves_no_order_and_the_session_payable(acp_store):
    """§4.4 names no status for a decline; ACP's OpenAPI document gives completion a 200 that is a
    session *with its order* (CheckoutSessionWithOrder) and otherwise a 4XX ``Error``. So a decline
    is a 4xx Error: 402, ``code: payment_declined`` (the messages' code for it) and ``type:
    processing_error``, the type ACP's own example of a declined payment carries
    (examples.mcp.agentic_checkout.json, error_payment_declined: the REST error in ``data``)."""
    ready = ready_session(acp_store.http)
    declined = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                                   json=pay("fail_token"))
    assert declined.status_code == 402
    conforms(declined.json(), "Error")
    assert (declined.json()["type"], declined.json()["code"]) == ("processing_error", "payment_declined")
    assert "param" not in declined.json()
    assert placed(acp_store) == []
    assert acp_store.http.get(f"/checkout_sessions/{ready['id']}", headers=headers()).json()["status"] == \
        "ready_for_payment"
    assert acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                               json=pay()).status_code == 200


def test_complete_before_ready_and_an_unknown_handler_are_refused(acp_store):
    created = acp_store.http.post("/checkout_sessions", headers=headers(), json=create_body()).json()
    early = acp_store.http.post(f"/checkout_sessions/{created['id']}/complete", headers=headers(), json=pay())
    assert early.status_code == 400 and early.json()["type"] == "invalid_request"
    ready = ready_session(acp_store.http)
    unknown = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                                  json=pay(handler_id="nobody"))
    assert unknown.status_code == 400 and "nobody" in unknown.json()["message"]
    purchase_order = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                                         json={"payment_data": {"purchase_order_number": "PO-1"}})
    assert purchase_order.status_code == 400 and purchase_order.json()["code"] == "unsupported"
    assert placed(acp_store) == []


def test_cancel_then_nothing_more_and_a_second_cancel_is_405(acp_store):
    """§2.2: cancel when not yet completed or canceled; the document answers 405 otherwise."""
    ready = ready_session(acp_store.http)
    canceled = acp_store.http.post(f"/checkout_sessions/{ready['id']}/cancel", headers=headers(),
                                   json={"intent_trace": {"reason_code": "price_sensitivity"}})
    assert canceled.status_code == 200 and canceled.json()["status"] == "canceled"
    conforms(canceled.json(), "CheckoutSession")
    twice = acp_store.http.post(f"/checkout_sessions/{ready['id']}/cancel", headers=headers(), json={})
    assert twice.status_code == 405 and twice.json()["code"] == "not_cancelable"
    update = acp_store.http.post(f"/checkout_sessions/{ready['id']}", headers=headers(), json={"buyer": {
        "email": "x@example.com"}})
    assert update.status_code == 409
    assert acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                               json=pay()).status_code == 409
    assert placed(acp_store) == []


def test_bad_fields_are_400_naming_them_by_jsonpath(acp_store):
    """§3.1: errors in the flat shape, ``param`` an RFC 9535 JSONPath."""
    for body, param in ((create_body(line_items=[{"id": "green_tea", "quantity": 0}]), "$.line_items[0].quantity"),
                        (create_body(line_items=[]), "$.line_items"),
                        (create_body(currency="dollars"), "$.currency"),
                        (ready_body(buyer={"first_name": "no email"}), "$.buyer.email"),
                        (ready_body(fulfillment_details={"address": {"line_one": "x"}}),
                         "$.fulfillment_details.address.name")):
        answer = acp_store.http.post("/checkout_sessions", headers=headers(), json=body)
        assert answer.status_code == 400, body
        conforms(answer.json(), "Error")
        assert answer.json()["param"] == param
    unknown = acp_store.http.post("/checkout_sessions", headers=headers(), json=create_body("unicorn"))
    assert unknown.status_code == 400 and "unicorn" in unknown.json()["message"]
    conforms(unknown.json(), "Error")


#: Each field an update may send as null, and the JSONPath the refusal names.
NULLS = (({"fulfillment_details": None}, "$.fulfillment_details"),
         ({"discounts": None}, "$.discounts"),
         ({"buyer": None}, "$.buyer"),
         ({"fulfillment_details": {"name": "Ada Lovelace", "address": None}}, "$.fulfillment_details.address"),
         ({"discounts": {"codes": None}}, "$.discounts.codes"),
         ({"coupons": None}, "$.coupons"),
         ({"selected_fulfillment_options": None}, "$.selected_fulfillment_options"),
         ({"buyer": {"email": "ada@example.com", "first_name": None}}, "$.buyer.first_name"))


@pytest.mark.parametrize(("body", "param"), NULLS, ids=[param for _, param in NULLS])
def test_null_in_an_update_is_400_naming_the_field_and_changes_nothing(acp_store, body, param):
    """§6.2: null is not absent ("null means clear this field"), but ACP's CheckoutSessionUpdateRequest
    allows null for none of these fields (none is nullable; the discount extension clears codes with
    an empty codes array): a 400 in ACP's error shape naming the field, not a 200 that clears nothing."""
    ready = ready_session(acp_store.http, discounts={"codes": ["TENOFF"]})
    assert ready["discounts"]["codes"] == ["TENOFF"] and ready["buyer"]["first_name"] == "Ada"
    answer = acp_store.http.post(f"/checkout_sessions/{ready['id']}", headers=headers(), json=body)
    assert answer.status_code == 400, answer.text
    conforms(answer.json(), "Error")
    assert (answer.json()["type"], answer.json()["code"], answer.json()["param"]) == ("invalid_request", "invalid",
                                                                                      param)
    assert "null" in answer.json()["message"]
    after = acp_store.http.get(f"/checkout_sessions/{ready['id']}", headers=headers()).json()
    assert after == ready


def test_null_at_create_and_at_complete_is_400_too(acp_store):
    """The create and complete request schemas allow no null either (a completion's buyer replaces
    the session's: null would clear it); nothing is created, nothing charged."""
    for field in ("buyer", "fulfillment_details", "discounts", "capabilities"):
        answer = acp_store.http.post("/checkout_sessions", headers=headers(), json=ready_body(**{field: None}))
        assert answer.status_code == 400 and answer.json()["param"] == f"$.{field}", field
        conforms(answer.json(), "Error")
    ready = ready_session(acp_store.http)
    answer = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                                 json={**pay(), "buyer": None})
    assert answer.status_code == 400 and answer.json()["param"] == "$.buyer"
    conforms(answer.json(), "Error")
    assert placed(acp_store) == []


def test_an_empty_line_two_is_no_second_line_and_null_is_refused(acp_store):
    """The RFC's own create example sends ``line_two: ""``; ACP's Address allows no null there."""
    created = acp_store.http.post("/checkout_sessions", headers=headers(), json=ready_body(
        fulfillment_details={"name": "Ada Lovelace", "address": {**ADDRESS, "line_two": ""}}))
    assert created.status_code == 201, created.text
    assert created.json()["fulfillment_details"]["address"]["line_one"] == ADDRESS["line_one"]
    refused = acp_store.http.post("/checkout_sessions", headers=headers(), json=ready_body(
        fulfillment_details={"name": "Ada Lovelace", "address": {**ADDRESS, "line_two": None}}))
    assert refused.status_code == 400 and refused.json()["param"] == "$.fulfillment_details.address.line_two"


def test_a_body_that_is_not_json_is_an_acp_error(acp_store):
    answer = acp_store.http.post("/checkout_sessions", headers={**headers(), "Content-Type": "application/json"},
                                 content=b"{nope")
    assert answer.status_code == 400
    conforms(answer.json(), "Error")
    assert answer.headers["X-Request-Id"]  # the request's id is in the header, not the closed body


def test_the_bearer_key_is_required_and_checked(acp_store):
    """§3.1 and §7: Authorization: Bearer is required."""
    for sent in ({k: v for k, v in headers().items() if k != "Authorization"}, headers(api_key="wrong-key-0123456789"),
                 {**headers(), "Authorization": f"Basic {KEY}"}):
        answer = acp_store.http.post("/checkout_sessions", headers=sent, json=create_body())
        assert answer.status_code == 401 and answer.headers["WWW-Authenticate"].startswith("Bearer")
        conforms(answer.json(), "Error")
        assert answer.json()["code"] == "unauthorized"
        assert acp_store.http.get("/checkout_sessions/chk_x", headers=sent).status_code == 401
    assert placed(acp_store) == []


def test_api_version_is_required_and_validated(acp_store):
    """§2.1: the client MUST send API-Version, the server MUST validate it."""
    missing = acp_store.http.post("/checkout_sessions", headers=headers(version=None), json=create_body())
    assert missing.status_code == 400 and missing.json()["code"] == "missing_api_version"
    old = acp_store.http.post("/checkout_sessions", headers=headers(version="2025-09-29"), json=create_body())
    assert old.status_code == 400 and old.json()["code"] == "unsupported_api_version"
    assert "2026-04-17" in old.json()["message"]
    conforms(old.json(), "Error")
    assert acp_store.http.get("/checkout_sessions/x", headers=headers(version=None)).status_code == 400


def test_without_a_key_the_store_does_not_serve_acp(make_acp_store):
    """No key configured: ACP's paths answer 404, discovery's "the seller does not support ACP"."""
    store = make_acp_store(key=None)
    assert store.http.get("/.well-known/acp.json").status_code == 404
    assert store.http.post("/checkout_sessions", headers=headers(), json=create_body()).status_code == 404


def test_discovery_is_public_and_cacheable(acp_store):
    """rfc.discovery.md §4.1: no authentication, Cache-Control of at least an hour."""
    answer = acp_store.http.get("/.well-known/acp.json")
    assert answer.status_code == 200
    assert answer.headers["Cache-Control"] == "public, max-age=3600"
    body = answer.json()
    assert body["protocol"]["name"] == "acp" and body["protocol"]["supported_versions"][-1] == "2026-04-17"
    assert body["api_base_url"] == str(acp_store.http.base_url).rstrip("/")
    assert body["transports"] == ["rest"] and body["capabilities"]["services"] == ["checkout"]
    assert [e["name"] for e in body["capabilities"]["extensions"]] == ["discount", "org.haggler.negotiation"]
    assert all(set(e) <= {"name", "spec", "schema"} for e in body["capabilities"]["extensions"])  # DiscoveryExtension
