"""Who may update a UCP order, and what, over real HTTP.

UCP 2026-01-11's REST binding defines no order update: order changes go from the business to the
platform by webhook (order.md, "Events"). UCP's conformance suite sends ``PUT /orders/{id}`` all the
same, so the store takes one from the platform that placed the order, into logs that order.md,
"Data Model", calls append-only. UCP's later order.md (2026-04-08, "Get Order", "Authorization")
gives a platform the orders it originated, and no others.
"""

from __future__ import annotations

import pytest

try:
    from tests.support.ucp import create_body, headers, pay, ready_checkout, shipping_to
except ImportError:  # pragma: no cover
    from support.ucp import create_body, headers, pay, ready_checkout, shipping_to  # type: ignore[no-redef]

PLACED_BY = "https://platform.example/profile.json"
STRANGER = "https://someone-else.example/profile.json"
REFUND = {"id": "r1", "type": "refund", "occurred_at": "2026-11-23T12:00:00Z", "status": "pending", "amount": 500}
SHIPPED = {"id": "e1", "type": "shipped", "occurred_at": "2026-11-22T12:00:00Z", "tracking_number": "T1",
           "line_items": [{"id": "li_x", "quantity": 1}]}


@pytest.fixture
def order_id(ucp_store) -> str:
    """An order of two mugs (total 2400: 1800 and 600 shipping), placed by :data:`PLACED_BY`."""
    checkout = ready_checkout(ucp_store.http, "mug", 2, profile=PLACED_BY)
    done = ucp_store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(PLACED_BY), json=pay())
    assert done.status_code == 200, done.text
    return str(done.json()["order"]["id"])


def put(store, order_id: str, body: dict, profile: str = PLACED_BY):
    return store.http.put(f"/orders/{order_id}", headers=headers(profile), json=body)


def logs(store, order_id: str) -> tuple[list, list]:
    order = store.http.get(f"/orders/{order_id}").json()
    return order["fulfillment"]["events"], order["adjustments"]


def test_only_the_platform_that_placed_the_order_updates_it(ucp_store, order_id):
    """2026-04-08 order.md, "Get Order", "Authorization": a platform reaches the orders it originated.
    Another profile is 403 (the permalink shows the order to anyone with its id: a 404 would hide
    nothing) and changes nothing, whatever it sends; the platform that placed it is heard."""
    forged = {**REFUND, "status": "completed", "amount": 999_999}
    for body in ({"adjustments": [forged]}, {"fulfillment": {"events": [SHIPPED]}}, {"adjustments": []}):
        refused = put(ucp_store, order_id, body, STRANGER)
        assert refused.status_code == 403, refused.text
        assert refused.json()["messages"][0]["code"] == "forbidden"
    assert logs(ucp_store, order_id) == ([], [])
    assert put(ucp_store, order_id, {"adjustments": [REFUND]}).status_code == 200
    assert logs(ucp_store, order_id)[1] == [REFUND]


def test_an_order_whose_checkout_named_no_profile_is_updated_by_nobody(ucp_store):
    """A checkout created with a UCP-Agent naming no profile has no platform to answer to: its
    order takes no update, not even from another caller that names none."""
    def bare() -> dict[str, str]:
        return {**headers(), "UCP-Agent": 'version="2026-01-11"'}
    created = ucp_store.http.post("/checkout-sessions", headers=bare(),
                                  json=create_body("mug", 1, fulfillment=shipping_to(option="ground")))
    assert created.status_code == 201, created.text
    done = ucp_store.http.post(f"/checkout-sessions/{created.json()['id']}/complete", headers=bare(), json=pay())
    order_id = done.json()["order"]["id"]
    assert ucp_store.http.put(f"/orders/{order_id}", headers=bare(), json={"adjustments": [REFUND]}).status_code == 403
    assert put(ucp_store, order_id, {"adjustments": [REFUND]}).status_code == 403


@pytest.mark.parametrize("change", [{"status": "completed"}, {"amount": 400}, {"description": "more"},
                                    {"occurred_at": "2026-11-23T12:00:00+00:00"}])
def test_a_recorded_adjustment_cannot_be_rewritten_even_by_its_platform(ucp_store, order_id, change):
    """order.md, "Adjustments": an append-only log. An entry whose id is recorded must come again as
    recorded, field for field (422 otherwise, and nothing changes)."""
    assert put(ucp_store, order_id, {"adjustments": [REFUND]}).status_code == 200
    rewritten = put(ucp_store, order_id, {"adjustments": [{**REFUND, **change}, {**REFUND, "id": "r2"}]})
    assert rewritten.status_code == 422 and "r1 cannot change once recorded" in rewritten.json()["detail"]
    assert logs(ucp_store, order_id)[1] == [REFUND]


def test_a_recorded_event_cannot_be_rewritten_nor_dropped(ucp_store, order_id):
    """order.md, "Fulfillment Events": an append-only log, the store's own entries included (a
    simulated shipment's)."""
    assert put(ucp_store, order_id, {"fulfillment": {"events": [SHIPPED]}}).status_code == 200
    assert put(ucp_store, order_id, {"fulfillment": {"events": [{**SHIPPED, "tracking_number": "T2"}]}}) \
        .status_code == 422
    assert put(ucp_store, order_id, {"fulfillment": {"events": []}}).status_code == 422
    assert ucp_store.http.post(f"/testing/simulate-shipping/{order_id}",
                               headers={"Simulation-Secret": "test-simulation-secret"}).status_code == 200
    events, _ = logs(ucp_store, order_id)
    store_own = events[1]
    assert put(ucp_store, order_id, {"fulfillment": {"events": [SHIPPED, {**store_own, "type": "delivered"}]}}) \
        .status_code == 422
    assert logs(ucp_store, order_id)[0] == [SHIPPED, store_own]


def test_new_entries_are_added_after_the_recorded_ones(ucp_store, order_id):
    """Append-only: the recorded entries stay first, as recorded, whatever order the update sends
    them in; an entry sent twice in one update is refused."""
    assert put(ucp_store, order_id, {"adjustments": [REFUND]}).status_code == 200
    credit = {"id": "c1", "type": "credit", "occurred_at": "2026-11-24T12:00:00Z", "status": "completed", "amount": 100}
    updated = put(ucp_store, order_id, {"adjustments": [credit, REFUND]})
    assert updated.status_code == 200 and updated.json()["adjustments"] == [REFUND, credit]
    twice = put(ucp_store, order_id, {"adjustments": [REFUND, credit, {**credit, "id": "c2"}, {**credit, "id": "c2"}]})
    assert twice.status_code == 422 and "c2 is sent twice" in twice.json()["detail"]
    assert logs(ucp_store, order_id)[1] == [REFUND, credit]


@pytest.mark.parametrize("amount,status", [(999_999, 422), (2401, 422), (-1, 422), (2400, 200), (0, 200)])
def test_an_adjustments_amount_is_a_whole_number_from_zero_to_the_orders_total(ucp_store, order_id, amount, status):
    """adjustment.json gives ``amount`` (minor units) no sign and no bound; no refund or credit of
    an order is worth more than the 2400 paid for it, nor less than nothing."""
    answer = put(ucp_store, order_id, {"adjustments": [{**REFUND, "amount": amount}]})
    assert answer.status_code == status, answer.text
    assert logs(ucp_store, order_id)[1] == ([{**REFUND, "amount": amount}] if status == 200 else [])
