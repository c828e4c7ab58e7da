"""UCP 2026-01-11 checkout over real HTTP, each test naming the section of UCP's specification
(``docs/specification/*.md`` at tag v2026-01-11) whose rule it holds the store to."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from haggler.orders import order_for
from haggler.storage.database import open_database
from haggler.storage.schema import commerce_inventory, orders

try:
    from tests.support.ucp import completed_order, create_body, headers, pay, ready_checkout, shipping_to
except ImportError:  # pragma: no cover
    from support.ucp import completed_order, create_body, headers, pay, ready_checkout, shipping_to  # type: ignore[no-redef]


def totals(body: dict) -> dict[str, int]:
    return {t["type"]: t["amount"] for t in body["totals"]}


def stock(store, product_id: str) -> int:
    db = open_database(store.app.state.ucp.db.url, migrate=False)
    try:
        with db.read() as conn:
            return conn.execute(select(commerce_inventory.c.quantity)
                                .where(commerce_inventory.c.product_id == product_id)).scalar_one()
    finally:
        db.dispose()


def order_count(store) -> int:
    with store.app.state.ucp.db.read() as conn:
        return len(conn.execute(select(orders.c.id)).all())


# -- discovery and negotiation ----------------------------------------------------------------------


def test_profile_names_the_shopping_service_its_capabilities_and_handlers(ucp_store):
    """overview.md, "Discovery": /.well-known/ucp with the REST endpoint and the capabilities."""
    body = ucp_store.http.get("/.well-known/ucp").json()
    assert body["ucp"]["version"] == "2026-01-11"
    service = body["ucp"]["services"]["dev.ucp.shopping"]
    assert service["rest"]["endpoint"] == ucp_store.base
    names = {c["name"] for c in body["ucp"]["capabilities"]}
    assert names == {"dev.ucp.shopping.checkout", "dev.ucp.shopping.order", "dev.ucp.shopping.discount",
                     "dev.ucp.shopping.fulfillment", "dev.ucp.shopping.buyer_consent", "dev.ucp.shopping.ap2_mandate",
                     "org.haggler.negotiation"}
    assert {c["extends"] for c in body["ucp"]["capabilities"] if "extends" in c} == {"dev.ucp.shopping.checkout"}
    assert [h["id"] for h in body["payment"]["handlers"]] == ["mock_payment_handler", "google_pay", "shop_pay"]


def test_without_a_simulation_secret_nothing_simulated_is_offered(make_ucp_store):
    """The simulated handler takes no money: a store without a secret offers no handler and no
    /testing route, and a completion through the simulated handler is refused."""
    store = make_ucp_store(secret=None)
    assert store.http.get("/.well-known/ucp").json()["payment"]["handlers"] == []
    assert store.http.post("/testing/simulate-shipping/ord_x", headers={"Simulation-Secret": "x" * 20}).status_code == 404
    checkout = ready_checkout(store.http)
    answer = store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(), json=pay())
    assert answer.status_code == 400 and "not available" in answer.json()["detail"]
    assert order_count(store) == 0


def test_every_response_carries_the_ucp_version_and_active_capabilities(ucp_store):
    """overview.md, "Negotiation Protocol" 4: businesses MUST include the ucp field in every response."""
    body = ready_checkout(ucp_store.http)
    assert body["ucp"]["version"] == "2026-01-11"
    assert "dev.ucp.shopping.checkout" in {c["name"] for c in body["ucp"]["capabilities"]}


@pytest.mark.parametrize("version, status", [("2026-01-11", 201), ("2025-06-01", 201), ("2026-01-12", 400)])
def test_a_later_platform_version_is_refused(ucp_store, version, status):
    """overview.md, "Version Negotiation": platform version <= business version MUST be processed,
    a later one MUST get version_unsupported."""
    answer = ucp_store.http.post("/checkout-sessions", headers=headers(version=version), json=create_body())
    assert answer.status_code == status
    if status == 400:
        body = answer.json()
        assert body["status"] == "requires_escalation"
        assert body["messages"][0]["code"] == "version_unsupported"
        assert "2026-01-12" in body["detail"]
        # checkout.md, "Continue URL": MUST come with requires_escalation; the store's front page.
        assert body["continue_url"] == ucp_store.base + "/"
        assert ucp_store.http.get("/").status_code == 200


def test_a_request_without_ucp_agent_is_refused(ucp_store):
    """checkout-rest.md, "Specific Header Requirements": all requests MUST include UCP-Agent."""
    answer = ucp_store.http.post("/checkout-sessions", json=create_body())
    assert answer.status_code == 400 and "UCP-Agent" in answer.json()["detail"]


# -- line items and totals -------------------------------------------------------------------------


def test_prices_and_titles_come_from_the_store_not_the_agent(ucp_store):
    """checkout.md, "Create Checkout": product data SHOULD match the business's; totals are its own."""
    body = create_body("mug", 2)
    body["line_items"][0]["item"].update(title="Free mug", price=1)
    answer = ucp_store.http.post("/checkout-sessions", headers=headers(), json=body)
    assert answer.status_code == 201
    line = answer.json()["line_items"][0]
    assert line["item"] == {"id": "mug", "title": "Stoneware Mug", "price": 900}
    assert {t["type"]: t["amount"] for t in line["totals"]} == {"subtotal": 1800, "total": 1800}
    assert totals(answer.json()) == {"subtotal": 1800, "total": 1800}
    assert answer.json()["status"] == "incomplete"
    assert answer.json()["messages"][0]["severity"] == "recoverable"


@pytest.mark.parametrize("product, quantity, words", [
    ("no_such_tea", 1, "not found"), ("kettle", 1, "Insufficient stock"), ("mug", 6, "Insufficient stock")])
def test_unknown_products_and_quantities_above_stock_are_refused(ucp_store, product, quantity, words):
    answer = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body(product, quantity))
    assert answer.status_code == 400
    assert words in answer.json()["detail"]
    assert answer.json()["messages"][0]["type"] == "error"


def test_an_update_replaces_the_lines_and_recomputes_the_totals(ucp_store):
    """checkout.md, "Update Checkout": the resource sent replaces the session's."""
    created = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body()).json()
    line_id = created["line_items"][0]["id"]
    update = {"id": created["id"], "line_items": [{"id": line_id, "item": {"id": "green_tea"}, "quantity": 3},
                                                  {"item": {"id": "mug"}, "quantity": 1}]}
    body = ucp_store.http.put(f"/checkout-sessions/{created['id']}", headers=headers(), json=update).json()
    assert [(li["item"]["id"], li["quantity"]) for li in body["line_items"]] == [("green_tea", 3), ("mug", 1)]
    assert body["line_items"][0]["id"] == line_id
    assert totals(body)["total"] == 3 * 1200 + 900
    too_many = {"line_items": [{"id": line_id, "item": {"id": "mug"}, "quantity": 99}]}
    answer = ucp_store.http.put(f"/checkout-sessions/{created['id']}", headers=headers(), json=too_many)
    assert answer.status_code == 400 and "stock" in answer.json()["detail"]


# -- discounts -------------------------------------------------------------------------------------


def test_discount_codes_stack_in_order_rounding_down_each_time(ucp_store):
    """discount.md, "Stacking Order" and "Impact on Line Items and Totals"."""
    created = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body("teapot", 1)).json()
    body = ucp_store.http.put(f"/checkout-sessions/{created['id']}", headers=headers(),
                              json={"discounts": {"codes": ["tenoff", "QUARTER", "TWO100"]}}).json()
    # 4500 → 4050 → 3037 (3037.5 rounded down) → 2837
    assert [(d["code"], d["amount"]) for d in body["discounts"]["applied"]] == [
        ("TENOFF", 450), ("QUARTER", 1013), ("TWO100", 200)]
    assert totals(body) == {"subtotal": 4500, "discount": 1663, "total": 2837}


def test_an_unknown_code_is_left_out_with_a_warning(ucp_store):
    """discount.md, "Rejected Codes": a code that cannot apply is told in messages[] as a warning."""
    created = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body()).json()
    body = ucp_store.http.put(f"/checkout-sessions/{created['id']}", headers=headers(),
                              json={"discounts": {"codes": ["NOPE", "TENOFF"]}}).json()
    assert [d["code"] for d in body["discounts"]["applied"]] == ["TENOFF"]
    warning = next(m for m in body["messages"] if m["type"] == "warning")
    assert warning == {"type": "warning", "code": "discount_code_invalid", "path": "$.discounts.codes[0]",
                       "content": "Code 'NOPE' is not a valid discount code"}


def test_submitted_codes_replace_the_earlier_ones_and_an_empty_list_clears_them(ucp_store):
    """discount.md, "Operations": replacement semantics; ``"codes": []`` removes all codes."""
    created = ucp_store.http.post("/checkout-sessions", headers=headers(),
                                  json=create_body(discounts={"codes": ["TENOFF"]})).json()
    assert totals(created)["discount"] == 120
    path = f"/checkout-sessions/{created['id']}"
    replaced = ucp_store.http.put(path, headers=headers(), json={"discounts": {"codes": ["TWO100"]}}).json()
    assert [d["code"] for d in replaced["discounts"]["applied"]] == ["TWO100"]
    cleared = ucp_store.http.put(path, headers=headers(), json={"discounts": {"codes": []}}).json()
    assert "discount" not in totals(cleared) and "discounts" not in cleared


# -- fulfillment -----------------------------------------------------------------------------------


def test_options_follow_the_destination_country_and_the_chosen_one_is_added(ucp_store):
    created = ucp_store.http.post("/checkout-sessions", headers=headers(),
                                  json=create_body(fulfillment=shipping_to("US"))).json()
    group = created["fulfillment"]["methods"][0]["groups"][0]
    assert [(o["id"], o["totals"][0]["amount"]) for o in group["options"]] == [("ground", 600), ("air-us", 1600)]
    path = f"/checkout-sessions/{created['id']}"
    abroad = ucp_store.http.put(path, headers=headers(), json={"fulfillment": shipping_to("CA", "air-world")}).json()
    assert [o["id"] for o in abroad["fulfillment"]["methods"][0]["groups"][0]["options"]] == ["ground", "air-world"]
    assert totals(abroad) == {"subtotal": 1200, "fulfillment": 2600, "total": 3800}
    assert abroad["status"] == "ready_for_complete"
    # An option not offered for the destination is not kept.
    back = ucp_store.http.put(path, headers=headers(), json={"fulfillment": shipping_to("US", "air-world")}).json()
    assert "selected_option_id" not in back["fulfillment"]["methods"][0]["groups"][0]
    assert back["status"] == "incomplete"


@pytest.mark.parametrize("product, quantity", [("teapot", 1), ("green_tea", 9)])
def test_promotions_make_standard_shipping_free(ucp_store, product, quantity):
    body = ucp_store.http.post("/checkout-sessions", headers=headers(),
                               json=create_body(product, quantity, fulfillment=shipping_to("US", "ground"))).json()
    ground = body["fulfillment"]["methods"][0]["groups"][0]["options"][0]
    assert ground["id"] == "ground" and ground["title"] == "Free Ground" and ground["totals"][0]["amount"] == 0
    assert totals(body)["fulfillment"] == 0


def test_a_known_customers_addresses_are_offered_and_a_new_one_is_saved(ucp_store):
    """fulfillment.md: destinations the business knows for the buyer; a new one gets an id and is
    offered again next time."""
    known = ucp_store.http.post("/checkout-sessions", headers=headers(),
                                json=create_body(buyer={"email": "ana@example.com"},
                                                 fulfillment={"methods": [{"type": "shipping"}]})).json()
    method = known["fulfillment"]["methods"][0]
    assert [d["id"] for d in method["destinations"]] == ["a_home", "a_work"]
    # The same place sent again is the saved address.
    same = {"methods": [{"type": "shipping", "destinations": [
        {"street_address": "1 elm st", "address_locality": "Portland", "address_region": "OR",
         "postal_code": "97201", "address_country": "US"}]}]}
    again = ucp_store.http.put(f"/checkout-sessions/{known['id']}", headers=headers(), json={"fulfillment": same})
    assert [d["id"] for d in again.json()["fulfillment"]["methods"][0]["destinations"]] == ["a_home"]
    # A new buyer's new address is saved under a new id.
    new = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body(
        buyer={"email": "new@example.com"}, fulfillment={"methods": [{"type": "shipping", "destinations": [
            {"street_address": "5 Pier", "address_country": "US", "postal_code": "10001"}]}]})).json()
    saved_id = new["fulfillment"]["methods"][0]["destinations"][0]["id"]
    assert saved_id.startswith("addr_")
    later = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body(
        buyer={"email": "new@example.com"}, fulfillment={"methods": [{"type": "shipping"}]})).json()
    assert [d["id"] for d in later["fulfillment"]["methods"][0]["destinations"]] == [saved_id]
    # Nobody known: no destinations.
    unknown = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body(
        buyer={"email": "who@example.com"}, fulfillment={"methods": [{"type": "shipping"}]})).json()
    assert unknown["fulfillment"]["methods"][0]["destinations"] is None


def test_buyer_and_consent_are_kept(ucp_store):
    """buyer-consent.md: the consent the platform sends is kept on the checkout."""
    buyer = {"first_name": "Ana", "email": "ana@example.com",
             "consent": {"marketing": True, "analytics": False, "sale_of_data": False}}
    created = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body(buyer=buyer)).json()
    got = ucp_store.http.get(f"/checkout-sessions/{created['id']}", headers=headers()).json()
    assert got["buyer"] == buyer
    # An update that does not send the buyer keeps it.
    ucp_store.http.put(f"/checkout-sessions/{created['id']}", headers=headers(), json={"discounts": {"codes": []}})
    assert ucp_store.http.get(f"/checkout-sessions/{created['id']}", headers=headers()).json()["buyer"] == buyer


# -- completing ------------------------------------------------------------------------------------


def test_completing_charges_places_one_order_and_never_echoes_the_credential(ucp_store):
    """checkout.md, "Complete Checkout": the checkout with order.id and permalink_url; overview.md,
    "Credential Flow": businesses MUST NOT echo credentials back."""
    checkout = ready_checkout(ucp_store.http, "mug", 2)
    before = stock(ucp_store, "mug")
    answer = ucp_store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(), json=pay())
    assert answer.status_code == 200
    body = answer.json()
    assert body["status"] == "completed"
    assert body["order"]["permalink_url"] == f"{ucp_store.base}/orders/{body['order']['id']}"
    assert "credential" not in answer.text
    assert stock(ucp_store, "mug") == before - 2
    with ucp_store.app.state.ucp.db.read() as conn:
        order = order_for(conn, session_id=checkout["id"])
    assert order is not None and order.door == "ucp" and order.total_cents == 1800 + 600
    assert order.payment_handler == "mock_payment_handler" and order.payment_reference.startswith("sim_")


def test_completing_before_fulfillment_is_chosen_is_refused(ucp_store):
    created = ucp_store.http.post("/checkout-sessions", headers=headers(), json=create_body()).json()
    answer = ucp_store.http.post(f"/checkout-sessions/{created['id']}/complete", headers=headers(), json=pay())
    assert answer.status_code == 400
    assert "Fulfillment address and option must be selected" in answer.json()["detail"]


def test_a_declined_payment_leaves_no_order_and_the_stock_where_it_was(ucp_store):
    checkout = ready_checkout(ucp_store.http, "mug", 1)
    before = stock(ucp_store, "mug")
    answer = ucp_store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(),
                                 json=pay("fail_token"))
    assert answer.status_code == 402 and answer.json()["messages"][0]["code"] == "payment_declined"
    assert order_count(ucp_store) == 0 and stock(ucp_store, "mug") == before
    session = ucp_store.http.get(f"/checkout-sessions/{checkout['id']}", headers=headers()).json()
    assert session["status"] == "ready_for_complete"
    # Another card then goes through.
    assert ucp_store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(),
                               json=pay()).status_code == 200


@pytest.mark.parametrize("credential", [
    {"type": "card", "card_number_type": "fpan", "number": "4242424242424242", "expiry_month": 12,
     "expiry_year": 2030, "cvc": "123"},
    None])
def test_a_card_credential_or_an_instrument_on_file_pays(ucp_store, credential):
    checkout = ready_checkout(ucp_store.http)
    payment = pay()
    if credential is None:
        del payment["payment_data"]["credential"]  # card_ok is on file with success_token
    else:
        payment["payment_data"]["credential"] = credential
    answer = ucp_store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(), json=payment)
    assert answer.status_code == 200 and answer.json()["status"] == "completed"


def test_an_ap2_checkout_mandate_is_kept_on_the_order_and_a_malformed_one_refused(ucp_store):
    """ap2-mandates.md, "Step 3: Submission": the mandate arrives in ap2.checkout_mandate. Where AP2
    was not negotiated (this platform's profile cannot even be read) it is kept as sent, not
    verified, as the conformance suite's completion with a placeholder mandate expects;
    test_ucp_ap2.py has the negotiated flow."""
    checkout = ready_checkout(ucp_store.http)
    path = f"/checkout-sessions/{checkout['id']}/complete"
    bad = ucp_store.http.post(path, headers=headers(), json=pay(ap2={"checkout_mandate": "not a jwt"}))
    assert bad.status_code == 400 and "ap2.checkout_mandate" in bad.json()["detail"]
    mandate = "eyJhbGciOiJFUzI1NiJ9.eyJjaGVja291dCI6MX0.c2ln~a2I"
    done = ucp_store.http.post(path, headers=headers(), json=pay(ap2={"checkout_mandate": mandate}))
    assert done.status_code == 200
    with ucp_store.app.state.ucp.db.read() as conn:
        assert order_for(conn, session_id=checkout["id"]).details["mandate"] == mandate


def test_a_completed_checkout_is_immutable_and_a_canceled_one_takes_nothing(ucp_store):
    """checkout.md, "Guidelines": after completed a checkout is immutable; "Cancel Checkout": a
    completed or canceled session SHOULD get an error."""
    done = ready_checkout(ucp_store.http)
    ucp_store.http.post(f"/checkout-sessions/{done['id']}/complete", headers=headers(), json=pay())
    canceled = ready_checkout(ucp_store.http)
    answer = ucp_store.http.post(f"/checkout-sessions/{canceled['id']}/cancel", headers=headers())
    assert answer.status_code == 200 and answer.json()["status"] == "canceled"
    for session in (done, canceled):
        path = f"/checkout-sessions/{session['id']}"
        for method, url, body in (("PUT", path, {"line_items": [{"item": {"id": "mug"}, "quantity": 1}]}),
                                  ("POST", path + "/complete", pay()), ("POST", path + "/cancel", {})):
            refused = ucp_store.http.request(method, url, headers=headers(), json=body)
            assert refused.status_code == 409, (method, url, refused.text)
    assert order_count(ucp_store) == 1


def test_an_unknown_session_is_404_in_ucps_error_shape(ucp_store):
    answer = ucp_store.http.get("/checkout-sessions/chk_nope", headers=headers())
    assert answer.status_code == 404
    assert set(answer.json()) == {"detail", "messages", "request_id"}


# -- idempotency -----------------------------------------------------------------------------------


def test_a_repeated_request_gets_the_first_answer_and_a_changed_one_409(ucp_store):
    """checkout-rest.md, "Specific Header Requirements", Idempotency-Key: the server MUST return the
    cached result for a duplicate key and 409 when the key is reused with different parameters."""
    key_headers = headers(key="same-key-1")
    first = ucp_store.http.post("/checkout-sessions", headers=key_headers, json=create_body())
    again = ucp_store.http.post("/checkout-sessions", headers=key_headers, json=create_body())
    assert (again.status_code, again.json()) == (first.status_code, first.json()) == (201, first.json())
    other = ucp_store.http.post("/checkout-sessions", headers=key_headers, json=create_body("mug"))
    assert other.status_code == 409
    # Another platform's key of the same spelling is its own.
    elsewhere = ucp_store.http.post("/checkout-sessions", json=create_body("mug"),
                                    headers=headers("https://other.example/profile.json", key="same-key-1"))
    assert elsewhere.status_code == 201 and elsewhere.json()["id"] != first.json()["id"]


def test_answered_keys_are_kept_a_day_and_more_then_forgotten(ucp_store):
    """checkout-rest.md: store the key with the result for at least 24 hours."""
    key_headers = headers(key="kept-key")
    first = ucp_store.http.post("/checkout-sessions", headers=key_headers, json=create_body()).json()
    ucp_store.clock.advance(hours=47)
    assert ucp_store.app.state.ucp.sweep() == 0
    assert ucp_store.http.post("/checkout-sessions", headers=key_headers, json=create_body()).json() == first
    ucp_store.clock.advance(hours=2)
    assert ucp_store.app.state.ucp.sweep() == 1
    again = ucp_store.http.post("/checkout-sessions", headers=key_headers, json=create_body())
    assert again.status_code == 201 and again.json()["id"] != first["id"]


def test_a_repeated_completion_charges_and_orders_once(ucp_store, platform):
    checkout = ready_checkout(ucp_store.http, profile=platform.profile_url)
    key_headers = headers(platform.profile_url, key="complete-once")
    path = f"/checkout-sessions/{checkout['id']}/complete"
    first = ucp_store.http.post(path, headers=key_headers, json=pay())
    second = ucp_store.http.post(path, headers=key_headers, json=pay())
    assert first.status_code == second.status_code == 200 and first.json() == second.json()
    assert ucp_store.http.post(path, headers=key_headers, json=pay("fail_token")).status_code == 409
    assert order_count(ucp_store) == 1
    platform.wait_for("order_placed")
    assert [e["event_type"] for e in platform.events] == ["order_placed"]


def test_racing_completions_place_one_order(make_ucp_store, db_url):
    """Nothing charged twice, one order, whichever completion wins (SQLite and PostgreSQL)."""
    import threading

    store = make_ucp_store(db_url=db_url)
    checkout = ready_checkout(store.http, "teapot", 1)
    before = stock(store, "teapot")
    codes: list[int] = []

    def complete() -> None:
        codes.append(store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(),
                                     json=pay()).status_code)
    threads = [threading.Thread(target=complete) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert codes.count(200) == 1 and set(codes) <= {200, 409}
    assert order_count(store) == 1 and stock(store, "teapot") == before - 1


# -- orders, webhooks, simulation ------------------------------------------------------------------


def test_an_order_holds_its_lines_expectation_and_totals(ucp_store):
    """order.md, "Data Model": immutable lines, expectations (how and where), events, adjustments."""
    checkout, order_id = completed_order(ucp_store)
    order = ucp_store.http.get(f"/orders/{order_id}", headers=headers()).json()
    assert order["checkout_id"] == checkout["id"]
    assert order["line_items"][0]["quantity"] == {"total": 2, "fulfilled": 0}
    assert order["line_items"][0]["status"] == "processing"
    expectation = order["fulfillment"]["expectations"][0]
    assert expectation["description"] == "Ground" and expectation["destination"]["address_country"] == "US"
    assert {t["type"]: t["amount"] for t in order["totals"]} == {"subtotal": 1800, "fulfillment": 600, "total": 2400}
    # The permalink answers without a platform's header too; a later version is still refused.
    assert ucp_store.http.get(order["permalink_url"]).json() == order
    assert ucp_store.http.get(f"/orders/{order_id}", headers=headers(version="2099-01-01")).status_code == 400


def test_order_events_and_adjustments_are_kept_append_only_and_checked(ucp_store):
    """order.md, "Fulfillment Events" and "Adjustments": append-only logs; a malformed entry is 422."""
    _, order_id = completed_order(ucp_store)
    order = ucp_store.http.get(f"/orders/{order_id}", headers=headers()).json()
    line = order["line_items"][0]
    order["fulfillment"]["events"] = [{"id": "e1", "occurred_at": "2026-11-22T12:00:00Z", "type": "shipped",
                                       "line_items": [{"id": line["id"], "quantity": 2}], "tracking_number": "T1"}]
    order["adjustments"] = [{"id": "r1", "type": "refund", "occurred_at": "2026-11-23T12:00:00Z",
                             "status": "pending", "amount": 500}]
    updated = ucp_store.http.put(f"/orders/{order_id}", headers=headers(), json=order)
    assert updated.status_code == 200
    assert updated.json()["fulfillment"]["events"][0]["tracking_number"] == "T1"
    assert updated.json()["line_items"][0]["status"] == "fulfilled"
    assert updated.json()["adjustments"][0]["amount"] == 500
    for change in ({"adjustments": {"id": "r2"}},
                   {"adjustments": [{**order["adjustments"][0], "status": "maybe"}]},
                   {"adjustments": []},
                   {"fulfillment": {"events": [{"id": "e2", "type": "shipped", "occurred_at": "yesterday",
                                                "line_items": []}]}}):
        assert ucp_store.http.put(f"/orders/{order_id}", headers=headers(), json=change).status_code == 422, change
    assert ucp_store.http.get(f"/orders/{order_id}", headers=headers()).json()["adjustments"][0]["id"] == "r1"


def test_webhooks_tell_the_platform_the_order_placed_and_shipped(ucp_store, platform):
    """order.md, "Events" and "Guidelines": the full order on each event, to the profile's webhook_url."""
    checkout, order_id = completed_order(ucp_store, platform)
    placed = platform.wait_for("order_placed")
    assert placed["checkout_id"] == checkout["id"] and placed["order"]["id"] == order_id
    assert placed["order"]["fulfillment"]["expectations"][0]["destination"]["street_address"] == "9 Quay Rd"
    shipped = ucp_store.http.post(f"/testing/simulate-shipping/{order_id}", headers={"Simulation-Secret": "test-simulation-secret"})
    assert shipped.status_code == 200
    event = platform.wait_for("order_shipped")
    assert event["order"]["id"] == order_id
    assert [e["type"] for e in event["order"]["fulfillment"]["events"]] == ["shipped"]


@pytest.mark.parametrize("secret", [None, "wrong-secret-value", "test-simulation-secre"])
def test_simulation_needs_the_secret(ucp_store, secret):
    _, order_id = completed_order(ucp_store)
    answer = ucp_store.http.post(f"/testing/simulate-shipping/{order_id}",
                                 headers={"Simulation-Secret": secret} if secret else {})
    assert answer.status_code == 403
    assert ucp_store.http.get(f"/orders/{order_id}", headers=headers()).json()["fulfillment"]["events"] == []


def test_haggler_orders_shows_the_door_a_ucp_order_came_through(ucp_store, tmp_path):
    import json
    import subprocess
    import sys

    _, order_id = completed_order(ucp_store)
    url = ucp_store.app.state.ucp.db.url
    shown = subprocess.run([sys.executable, "-m", "haggler", "orders", "--db", url, "--json"], capture_output=True,
                           text=True, timeout=60, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    [order] = json.loads(shown.stdout)["items"]
    assert (order["order_id"], order["source"]) == (order_id, "ucp")
    table = subprocess.run([sys.executable, "-m", "haggler", "orders", "--db", url], capture_output=True, text=True,
                           timeout=60, cwd=tmp_path)
    assert order_id in table.stdout and " ucp " in table.stdout


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'{"line_items": "three"}'])
def test_bodies_and_answers_are_json(ucp_store, body):
    """checkout-rest.md, "Content Types": request and response bodies MUST be valid JSON; a body
    that is not is refused in UCP's error shape."""
    answer = ucp_store.http.post("/checkout-sessions", content=body,
                                 headers={**headers(), "Content-Type": "application/json"})
    assert answer.status_code == 400
    assert answer.headers["content-type"].startswith("application/json")
    assert answer.json()["messages"][0]["type"] == "error" and answer.json()["detail"]
