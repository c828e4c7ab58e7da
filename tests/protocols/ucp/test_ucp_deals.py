"""A deal closed in chat, bought through UCP with its id as a discount code: exactly the agreed
price, once across every door, before it expires, only for its product; each refusal in the
discount extension's rejection shape (discount.md, "Rejected Codes")."""

from __future__ import annotations

import threading
from datetime import timedelta
from urllib.parse import urlsplit

from sqlalchemy import select

from haggler.orders import order_for
from haggler.protocols.agents_json.capabilities import API, SESSION_PATH
from haggler.storage.schema import deal_redemptions, orders

try:
    from tests.support.checkout import close_a_deal
    from tests.support.ucp import create_body, headers, pay, shipping_to
except ImportError:  # pragma: no cover
    from support.checkout import close_a_deal  # type: ignore[no-redef]
    from support.ucp import create_body, headers, pay, shipping_to  # type: ignore[no-redef]

FORM = {"name": "Grace Hopper", "email": "grace@example.com", "address": "1 Compiler Court\nArlington, VA"}


def with_deal(store, product_id: str, code: str, quantity: int = 1) -> dict:
    answer = store.http.post("/checkout-sessions", headers=headers(), json=create_body(
        product_id, quantity, discounts={"codes": [code]}, fulfillment=shipping_to("US", "ground")))
    assert answer.status_code == 201, answer.text
    return answer.json()


def warning(body: dict) -> dict:
    return next(m for m in body["messages"] if m["type"] == "warning")


def ship(body: dict) -> int:
    return next(t["amount"] for t in body["totals"] if t["type"] == "fulfillment")


def rows(store, table) -> list:
    with store.app.state.ucp.db.read() as conn:
        return conn.execute(select(table)).all()


def test_a_deal_code_brings_its_line_to_the_agreed_price_and_is_bought_once(ucp_store):
    product = ucp_store.catalog.products[0]
    deal = close_a_deal(ucp_store.http, product)
    agreed = round(deal["price"] * 100)
    assert agreed < product.list_price_cents
    body = with_deal(ucp_store, product.id, deal["id"])
    line = body["line_items"][0]
    assert line["item"]["price"] == product.list_price_cents
    assert {t["type"]: t["amount"] for t in line["totals"]}["total"] == agreed
    assert body["discounts"]["applied"] == [{"code": deal["id"], "title": "Negotiated price",
                                             "amount": product.list_price_cents - agreed}]
    assert body["totals"][-1] == {"type": "total", "amount": agreed + ship(body)}
    done = ucp_store.http.post(f"/checkout-sessions/{body['id']}/complete", headers=headers(), json=pay())
    assert done.status_code == 200 and done.json()["totals"][-1]["amount"] == agreed + ship(body)
    [order] = rows(ucp_store, orders)
    assert (order.door, order.deal_id, order.total_cents) == ("ucp", deal["id"], agreed + ship(body))
    with ucp_store.app.state.ucp.db.read() as conn:
        placed = order_for(conn, order_id=order.id)
    assert [(li.unit_price_cents, li.deal_id, li.extras) for li in placed.lines] == [
        (agreed, deal["id"], tuple(deal["extras"]))]
    # Read again later, the completed checkout still shows its deal.
    again = ucp_store.http.get(f"/checkout-sessions/{body['id']}", headers=headers()).json()
    assert again["discounts"]["applied"][0]["code"] == deal["id"]
    # A second use, here or at the deal's page or in an agent's cart, is refused.
    second = with_deal(ucp_store, product.id, deal["id"])
    assert warning(second)["code"] == "discount_code_already_applied"
    assert second["totals"][-1]["amount"] == product.list_price_cents + ship(second)
    # The deal's page says it was bought, and shows nobody holding the link that order or its buyer.
    page = urlsplit(deal["checkout_url"]).path
    shown = ucp_store.http.get(page)
    assert shown.status_code == 409 and "This deal has been bought" in shown.text and "UCP" in shown.text
    assert order.id not in shown.text and "Order placed" not in shown.text
    again_at_page = ucp_store.http.post(page, data=FORM)
    assert again_at_page.status_code == 409 and "Grace" not in again_at_page.text
    token = ucp_store.http.post(SESSION_PATH, json={"agent_name": "cart"}).json()["data"]["session_token"]
    cart = ucp_store.http.post(f"{API}/cart", json={"item_id": product.id, "quantity": 1, "deal_id": deal["id"]},
                               headers={"X-Agent-Session": token})
    assert cart.status_code == 409
    assert len(rows(ucp_store, orders)) == 1 and len(rows(ucp_store, deal_redemptions)) == 1


def test_a_deal_bought_at_its_page_is_refused_here(ucp_store):
    product = ucp_store.catalog.products[1]
    deal = close_a_deal(ucp_store.http, product)
    assert ucp_store.http.post(urlsplit(deal["checkout_url"]).path, data=FORM).status_code == 303
    assert warning(with_deal(ucp_store, product.id, deal["id"]))["code"] == "discount_code_already_applied"


def test_an_expired_deal_another_products_line_or_two_units_are_refused(ucp_store):
    first, other = ucp_store.catalog.products[0], ucp_store.catalog.products[1]
    deal = close_a_deal(ucp_store.http, first)
    wrong_product = with_deal(ucp_store, other.id, deal["id"])
    assert warning(wrong_product)["code"] == "discount_code_invalid"
    assert warning(wrong_product)["path"] == "$.discounts.codes[0]"
    assert "discounts" in wrong_product and wrong_product["discounts"]["applied"] == []
    assert warning(with_deal(ucp_store, first.id, deal["id"], quantity=2))["code"] == "discount_code_invalid"
    ucp_store.clock.advance(hours=24, seconds=1)
    expired = with_deal(ucp_store, first.id, deal["id"])
    assert warning(expired)["code"] == "discount_code_expired"
    assert expired["totals"][-1]["amount"] == first.list_price_cents + ship(expired)


def test_a_declined_payment_gives_the_deal_back(ucp_store):
    product = ucp_store.catalog.products[0]
    deal = close_a_deal(ucp_store.http, product)
    body = with_deal(ucp_store, product.id, deal["id"])
    declined = ucp_store.http.post(f"/checkout-sessions/{body['id']}/complete", headers=headers(),
                                   json=pay("fail_token"))
    assert declined.status_code == 402
    assert rows(ucp_store, deal_redemptions) == [] and rows(ucp_store, orders) == []
    assert ucp_store.http.post(urlsplit(deal["checkout_url"]).path, data=FORM).status_code == 303


def test_a_deal_lost_between_update_and_completion_charges_nothing(ucp_store):
    """A deal that expired since the checkout was priced is not sold at another price: the
    completion is refused and the agent told to update the codes."""
    product = ucp_store.catalog.products[0]
    deal = close_a_deal(ucp_store.http, product)
    ucp_store.clock.advance(hours=23)
    body = with_deal(ucp_store, product.id, deal["id"])
    assert body["discounts"]["applied"][0]["code"] == deal["id"]
    ucp_store.clock.advance(hours=1, seconds=1)  # the deal has expired, the checkout has not
    done = ucp_store.http.post(f"/checkout-sessions/{body['id']}/complete", headers=headers(), json=pay())
    assert done.status_code == 409 and "expired" in done.json()["detail"]
    assert rows(ucp_store, deal_redemptions) == [] and rows(ucp_store, orders) == []


def test_ucp_and_the_deals_page_racing_leave_one_redemption(make_ucp_store, db_url):
    store = make_ucp_store(db_url=db_url)
    product = store.catalog.products[0]
    deal = close_a_deal(store.http, product)
    body = with_deal(store, product.id, deal["id"])
    codes: dict[str, int] = {}

    def ucp() -> None:
        codes["ucp"] = store.http.post(f"/checkout-sessions/{body['id']}/complete", headers=headers(),
                                       json=pay()).status_code

    def page() -> None:
        codes["page"] = store.http.post(urlsplit(deal["checkout_url"]).path, data=FORM).status_code
    threads = [threading.Thread(target=ucp), threading.Thread(target=page)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(rows(store, deal_redemptions)) == 1
    placed = rows(store, orders)
    assert len(placed) == 1 and placed[0].deal_id == deal["id"]
    # The page that comes second shows the order already placed (303 to it, or the page itself once
    # the order is there) or that an agent holds the deal (409); a UCP completion that comes second
    # is refused.
    assert codes["ucp"] in (200, 409) and codes["page"] in (200, 303, 409)
    assert codes["ucp"] == (200 if placed[0].door == "ucp" else 409)


def test_deal_ttl_is_the_stores_deal_lifetime(make_ucp_store):
    assert make_ucp_store().app.state.ucp.sessions.deal_ttl == timedelta(hours=24)
