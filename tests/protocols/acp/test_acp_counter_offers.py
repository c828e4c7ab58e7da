"""rfc.agentic_checkout.md §4.5 cancel with an ``intent_trace`` of ``price_sensitivity``: the
session is canceled, and the answer carries the merchant agent's counter-offer in ACP's own shapes
(an info message, and the offer in the merchant's ``metadata``), valid against ACP's schemas."""

from __future__ import annotations

try:
    from tests.support.acp import conforms, create_body, headers, ready_body
except ImportError:  # pragma: no cover
    from support.acp import conforms, create_body, headers, ready_body  # type: ignore[no-redef]

NS = "org.haggler.negotiation"


def test_a_price_sensitive_cancel_gets_a_counter_offer_in_acps_shapes(acp_store):
    product = acp_store.catalog.products[0]
    created = acp_store.http.post("/checkout_sessions", headers=headers(), json=ready_body(product.id)).json()
    answer = acp_store.http.post(f"/checkout_sessions/{created['id']}/cancel", headers=headers(), json={
        "intent_trace": {"reason_code": "price_sensitivity", "trace_summary": "too expensive"}})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    conforms(body, "CheckoutSession")
    assert body["status"] == "canceled"
    offer = body["metadata"][NS]["counter_offer"]
    assert product.floor_cents <= offer["price"] < product.list_price_cents
    [info] = [m for m in body["messages"] if m["type"] == "info"]
    assert offer["code"] in info["content"]
    again = acp_store.http.post("/checkout_sessions", headers=headers(), json=ready_body(
        product.id, discounts={"codes": [offer["code"]]})).json()
    assert again["discounts"]["applied"] and again["line_items"][0]["totals"][-1]["amount"] == offer["price"]


def test_other_reasons_get_none(acp_store):
    product = acp_store.catalog.products[0]
    for trace in (None, {"reason_code": "comparison"}, {"reason_code": "something_new"}):
        created = acp_store.http.post("/checkout_sessions", headers=headers(), json=create_body(product.id)).json()
        sent = {"intent_trace": trace} if trace else {}
        body = acp_store.http.post(f"/checkout_sessions/{created['id']}/cancel", headers=headers(), json=sent).json()
        assert body["status"] == "canceled" and "metadata" not in body
