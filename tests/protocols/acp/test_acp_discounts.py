"""The discount extension (rfc.discount_extension.md) and a deal closed in chat used as an ACP
discount code: the agreed price, once across every door, before it expires, only for its product;
each refusal in the extension's rejection shape."""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

from sqlalchemy import select

from haggler.orders import order_for
from haggler.storage.schema import deal_redemptions, orders

try:
    from tests.support import ucp
    from tests.support.acp import conforms, create_body, headers, pay, ready_session
    from tests.support.checkout import close_a_deal
except ImportError:  # pragma: no cover
    import support.ucp as ucp  # type: ignore[no-redef]
    from support.acp import conforms, create_body, headers, pay, ready_session  # type: ignore[no-redef]
    from support.checkout import close_a_deal  # type: ignore[no-redef]


def totals(body: dict) -> dict[str, int]:
    return {t["type"]: t["amount"] for t in body["totals"]}


def rows(store, table) -> list:
    with store.app.state.acp.db.read() as conn:
        return conn.execute(select(table)).all()


def with_codes(store, product_id: str, *codes: str, quantity: int = 1) -> dict:
    answer = store.http.post("/checkout_sessions", headers=headers(),
                             json=create_body(product_id, quantity, discounts={"codes": list(codes)}))
    assert answer.status_code == 201, answer.text
    conforms(answer.json(), "CheckoutSession")
    return dict(answer.json())


def rejected(body: dict) -> dict:
    [entry] = body["discounts"]["rejected"]
    return dict(entry)


def test_a_code_is_applied_and_reflected_in_the_totals(acp_store):
    """§6.2: applied discounts are in discounts.applied and in totals[]; §4.2: each with a coupon."""
    body = with_codes(acp_store, "teapot", "TENOFF")
    [applied] = body["discounts"]["applied"]
    assert (applied["code"], applied["amount"], applied["coupon"]["name"]) == ("TENOFF", 450, "10% off")
    assert body["discounts"]["codes"] == ["TENOFF"] and body["discounts"]["rejected"] == []
    assert totals(body) == {"items_base_amount": 4500, "subtotal": 4500, "discount": 450, "total": 4050}


def test_codes_replace_the_ones_before_and_an_empty_list_clears_them(acp_store):
    """§6.1: replacement semantics; an empty array removes all codes; the deprecated coupons alias."""
    body = with_codes(acp_store, "teapot", "TENOFF")
    replaced = acp_store.http.post(f"/checkout_sessions/{body['id']}", headers=headers(),
                                   json={"discounts": {"codes": ["TWO100"]}}).json()
    assert [a["code"] for a in replaced["discounts"]["applied"]] == ["TWO100"] and totals(replaced)["total"] == 4300
    cleared = acp_store.http.post(f"/checkout_sessions/{body['id']}", headers=headers(),
                                  json={"discounts": {"codes": []}}).json()
    assert cleared["discounts"] == {"codes": [], "applied": [], "rejected": []} and totals(cleared)["total"] == 4500
    alias = acp_store.http.post(f"/checkout_sessions/{body['id']}", headers=headers(), json={"coupons": ["QUARTER"]})
    assert [a["code"] for a in alias.json()["discounts"]["applied"]] == ["QUARTER"]
    lower = acp_store.http.post(f"/checkout_sessions/{body['id']}", headers=headers(),
                                json={"discounts": {"codes": ["tenoff"]}}).json()
    assert [a["amount"] for a in lower["discounts"]["applied"]] == [450]  # §6.1: case-insensitive


def test_an_unknown_code_is_rejected_in_the_extensions_shape_and_warned_about(acp_store):
    """§7: rejected codes in discounts.rejected with a reason; SHOULD also be a warning in messages[]."""
    body = with_codes(acp_store, "teapot", "TENOFF", "NOSUCHCODE")
    assert rejected(body)["code"] == "NOSUCHCODE" and rejected(body)["reason"] == "discount_code_invalid"
    [warning] = body["messages"]
    assert (warning["type"], warning["code"], warning["param"]) == ("warning", "discount_code_invalid",
                                                                    "$.discounts.codes[1]")
    assert totals(body)["total"] == 4050  # the valid code still applies


def test_a_deal_closed_in_chat_brings_its_line_to_the_agreed_price_once(acp_store):
    product = acp_store.catalog.products[0]
    deal = close_a_deal(acp_store.http, product)
    agreed = round(deal["price"] * 100)
    assert agreed < product.list_price_cents
    ready = ready_session(acp_store.http, product.id, discounts={"codes": [deal["id"]]})
    [line] = ready["line_items"]
    line_totals = {t["type"]: t["amount"] for t in line["totals"]}
    assert line["unit_amount"] == product.list_price_cents and line_totals["total"] == agreed
    assert line_totals["items_discount"] == product.list_price_cents - agreed
    [applied] = ready["discounts"]["applied"]
    assert (applied["code"], applied["amount"]) == (deal["id"], product.list_price_cents - agreed)
    assert applied["allocations"] == [{"path": "$.line_items[0]", "amount": product.list_price_cents - agreed}]
    # §8.2: totals[items_discount] equals the sum of the lines' discounts.
    assert totals(ready)["items_discount"] == line_totals["items_discount"]
    assert totals(ready)["total"] == agreed + totals(ready)["fulfillment"]
    done = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(), json=pay())
    assert done.status_code == 200, done.text
    [order] = rows(acp_store, orders)
    assert (order.door, order.deal_id, order.total_cents) == ("acp", deal["id"], totals(ready)["total"])
    with acp_store.app.state.acp.db.read() as conn:
        lines = order_for(conn, order_id=order.id).lines
    assert [(li.unit_price_cents, li.deal_id, li.extras) for li in lines] == [(agreed, deal["id"], tuple(deal["extras"]))]
    # A second use is refused: the deal has reached its one use.
    second = with_codes(acp_store, product.id, deal["id"])
    assert rejected(second)["reason"] == "discount_code_usage_limit_reached"
    assert second["messages"][0]["code"] == "discount_code_usage_limit_reached"
    assert totals(second)["total"] == product.list_price_cents
    # Nor at the deal's page, which shows whoever holds the link nothing of the ACP buyer's order.
    page = urlsplit(deal["checkout_url"]).path
    shown = acp_store.http.get(page)
    assert shown.status_code == 409 and "bought this deal through the store&#x27;s ACP checkout" in shown.text
    assert order.id not in shown.text
    form = {"name": "Mallory Other", "email": "mallory@example.com", "address": "9 Elm St"}
    assert acp_store.http.post(page, data=form).status_code == 409
    assert len(rows(acp_store, deal_redemptions)) == 1 and len(rows(acp_store, orders)) == 1


def test_an_expired_deal_and_a_deal_for_another_product_are_rejected(acp_store):
    first, other = acp_store.catalog.products[0], acp_store.catalog.products[1]
    deal = close_a_deal(acp_store.http, first)
    wrong = with_codes(acp_store, other.id, deal["id"])
    assert rejected(wrong)["reason"] == "discount_code_invalid" and wrong["discounts"]["applied"] == []
    assert totals(wrong)["total"] == other.list_price_cents
    acp_store.clock.advance(hours=24, seconds=1)
    expired = with_codes(acp_store, first.id, deal["id"])
    assert rejected(expired)["reason"] == "discount_code_expired"
    assert totals(expired)["total"] == first.list_price_cents


def test_a_failed_payment_leaves_no_order_and_no_redeemed_deal(acp_store):
    product = acp_store.catalog.products[0]
    deal = close_a_deal(acp_store.http, product)
    ready = ready_session(acp_store.http, product.id, discounts={"codes": [deal["id"]]})
    declined = acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                                   json=pay("fail_token"))
    assert declined.status_code == 402
    assert rows(acp_store, orders) == [] and rows(acp_store, deal_redemptions) == []
    # The deal is still there to buy.
    assert with_codes(acp_store, product.id, deal["id"])["discounts"]["rejected"] == []


def test_a_deal_bought_through_ucp_is_rejected_through_acp_and_the_other_way(acp_store):
    """One deal_redemptions guard across the doors: bought once, whichever protocol comes first."""
    first, second = acp_store.catalog.products[0], acp_store.catalog.products[1]
    via_ucp = close_a_deal(acp_store.http, first)
    checkout = ucp.ready_checkout(acp_store.http, first.id, discounts={"codes": [via_ucp["id"]]})
    assert acp_store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=ucp.headers(),
                               json=ucp.pay()).status_code == 200
    assert rejected(with_codes(acp_store, first.id, via_ucp["id"]))["reason"] == "discount_code_usage_limit_reached"

    via_acp = close_a_deal(acp_store.http, second)
    ready = ready_session(acp_store.http, second.id, discounts={"codes": [via_acp["id"]]})
    assert acp_store.http.post(f"/checkout_sessions/{ready['id']}/complete", headers=headers(),
                               json=pay()).status_code == 200
    again = acp_store.http.post("/checkout-sessions", headers=ucp.headers(), json=ucp.create_body(
        second.id, discounts={"codes": [via_acp["id"]]}, fulfillment=ucp.shipping_to("US", "ground")))
    assert any(m["code"] == "discount_code_already_applied" for m in again.json()["messages"])
    assert sorted(o.door for o in rows(acp_store, orders)) == ["acp", "ucp"]
    assert len(rows(acp_store, deal_redemptions)) == 2


def test_a_deal_taken_between_pricing_and_completion_is_not_sold_at_another_price(acp_store):
    """A session priced with the deal, whose deal is bought elsewhere before it completes, is refused
    (409) rather than charged the list price."""
    product = acp_store.catalog.products[0]
    deal = close_a_deal(acp_store.http, product)
    one = ready_session(acp_store.http, product.id, discounts={"codes": [deal["id"]]})
    two = ready_session(acp_store.http, product.id, discounts={"codes": [deal["id"]]})
    assert acp_store.http.post(f"/checkout_sessions/{one['id']}/complete", headers=headers(),
                               json=pay()).status_code == 200
    late = acp_store.http.post(f"/checkout_sessions/{two['id']}/complete", headers=headers(), json=pay())
    assert late.status_code == 409 and late.json()["code"] == "conflict"
    assert len(rows(acp_store, orders)) == 1


def test_acp_and_ucp_racing_for_one_deal_sell_it_once(make_acp_store, db_url):
    """The same deal_redemptions guard when two doors complete at the same moment (SQLite and PostgreSQL)."""
    store = make_acp_store(db_url=db_url)
    product = store.catalog.products[0]
    deal = close_a_deal(store.http, product)
    session = ready_session(store.http, product.id, discounts={"codes": [deal["id"]]})
    checkout = ucp.ready_checkout(store.http, product.id, discounts={"codes": [deal["id"]]})
    codes: dict[str, int] = {}

    def through_acp() -> None:
        codes["acp"] = store.http.post(f"/checkout_sessions/{session['id']}/complete", headers=headers(),
                                       json=pay()).status_code

    def through_ucp() -> None:
        codes["ucp"] = store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=ucp.headers(),
                                       json=ucp.pay()).status_code
    threads = [threading.Thread(target=through_acp), threading.Thread(target=through_ucp)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    [order] = rows(store, orders)
    assert len(rows(store, deal_redemptions)) == 1 and order.deal_id == deal["id"]
    assert sorted(codes.values()) == [200, 409] and codes[order.door] == 200
