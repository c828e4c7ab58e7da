"""A cancel over price answered with the merchant agent's counter-offer (docs/checkout.md), through
UCP over real HTTP: a real negotiation's price, never under the floor, once per checkout, a code that
buys exactly that, and nothing when the reason, the line or the setting says no."""

from __future__ import annotations

from sqlalchemy import select

from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.protocols.ucp.settings import UcpSettings
from haggler.storage.schema import chats, deals

try:
    from tests.support.ucp import SECRET, create_body, headers, pay, seed, shipping_to
except ImportError:  # pragma: no cover
    from support.ucp import SECRET, create_body, headers, pay, seed, shipping_to  # type: ignore[no-redef]

PRICE = {"intent_trace": {"reason_code": "price_sensitivity", "trace_summary": "found it cheaper elsewhere"}}
NS = "org.haggler.negotiation"


def checkout(store, product_id: str, quantity: int = 1, **extra) -> dict:
    answer = store.http.post("/checkout-sessions", headers=headers(), json=create_body(
        product_id, quantity, fulfillment=shipping_to("US", "ground"), **extra))
    assert answer.status_code == 201, answer.text
    return answer.json()


def cancel(store, session_id: str, body: dict, key: str | None = None):
    return store.http.post(f"/checkout-sessions/{session_id}/cancel", headers=headers(key=key), json=body)


def rows(store, table) -> list:
    with store.app.state.ucp.db.read() as conn:
        return conn.execute(select(table)).all()


def test_a_cancel_over_price_gets_a_negotiated_code_that_buys_exactly_that(ucp_store):
    product = ucp_store.catalog.products[0]
    body = checkout(ucp_store, product.id)
    answer = cancel(ucp_store, body["id"], PRICE)
    assert answer.status_code == 200, answer.text
    canceled = answer.json()
    assert canceled["status"] == "canceled"
    offer = canceled[NS]["counter_offer"]
    [info] = [m for m in canceled["messages"] if m.get("code") == "counter_offer"]
    assert info["type"] == "info" and offer["code"] in info["content"]
    assert product.floor_cents <= offer["price"] < product.list_price_cents == offer["list_price"]
    assert offer["product_id"] == product.id and offer["checkout_url"].endswith(f"/checkout/{offer['code']}")
    [deal] = rows(ucp_store, deals)
    assert (deal.id, deal.price_cents) == (offer["code"], offer["price"])
    again = checkout(ucp_store, product.id, discounts={"codes": [offer["code"]]})
    [line] = again["line_items"]
    assert next(t["amount"] for t in line["totals"] if t["type"] == "total") == offer["price"]
    done = ucp_store.http.post(f"/checkout-sessions/{again['id']}/complete", headers=headers(), json=pay())
    assert done.status_code == 200 and done.json()["status"] == "completed"


def test_once_per_checkout_and_a_replay_gives_the_same_code(ucp_store):
    body = checkout(ucp_store, ucp_store.catalog.products[1].id)
    first = cancel(ucp_store, body["id"], PRICE, key="cancel-1").json()
    replay = cancel(ucp_store, body["id"], PRICE, key="cancel-1").json()
    assert replay[NS] == first[NS]
    assert cancel(ucp_store, body["id"], PRICE).status_code == 409
    assert len(rows(ucp_store, deals)) == 1


def test_no_counter_offer_without_a_price_reason_a_single_negotiable_unit_or_when_a_deal_is_applied(ucp_store):
    product = ucp_store.catalog.products[0]
    for reason in ({}, {"intent_trace": {"reason_code": "shipping_speed"}}):
        assert NS not in cancel(ucp_store, checkout(ucp_store, product.id)["id"], reason).json()
    assert NS not in cancel(ucp_store, checkout(ucp_store, product.id, 2)["id"], PRICE).json()  # a deal is one unit
    assert NS not in cancel(ucp_store, checkout(ucp_store, "mug")["id"], PRICE).json()  # not negotiable here
    offer = cancel(ucp_store, checkout(ucp_store, product.id)["id"], PRICE).json()[NS]["counter_offer"]
    with_deal = checkout(ucp_store, product.id, discounts={"codes": [offer["code"]]})
    assert NS not in cancel(ucp_store, with_deal["id"], PRICE).json()  # already negotiated
    assert len(rows(ucp_store, deals)) == 1
    bad = cancel(ucp_store, checkout(ucp_store, product.id)["id"], {"intent_trace": {"reason_code": 5}})
    assert bad.status_code == 400 and "intent_trace.reason_code" in bad.json()["detail"]


def test_never_under_the_floor_for_any_product(ucp_store):
    """The merchant agent's guards hold here as in any chat: price net of the extras' cost at or
    above the floor, for every product of the catalog."""
    for product in ucp_store.catalog.products:
        found = cancel(ucp_store, checkout(ucp_store, product.id)["id"], PRICE).json().get(NS)
        if found is None:
            continue
        offer = found["counter_offer"]
        assert offer["price"] - product.extras_cost(tuple(offer["extras"])) >= product.floor_cents, product.id
        assert offer["price"] <= product.list_price_cents
    assert len(rows(ucp_store, deals)) >= len(ucp_store.catalog.products) // 2  # most products do move


def test_off_with_the_setting(make_store, tmp_path):
    url = f"sqlite:///{tmp_path}/off.db"
    seed(url)
    store = make_store(db_url=url, ucp=UcpSettings(simulation_secret=SECRET), checkout_counter_offers=False)
    body = checkout(store, store.catalog.products[0].id)
    assert NS not in cancel(store, body["id"], PRICE).json() and rows(store, chats) == []


def test_counter_offers_count_against_the_callers_chat_starts(make_store, tmp_path):
    """Cancelling in a loop buys no more haggling than chatting: past the address's hourly chat
    starts the cancel still cancels, with no counter-offer."""
    url = f"sqlite:///{tmp_path}/limited.db"
    seed(url)
    store = make_store(db_url=url, ucp=UcpSettings(simulation_secret=SECRET),
                       limits=StoreLimits(max_chat_starts_per_hour_per_ip=2, limit_loopback=True))
    product = store.catalog.products[0]
    answers = [cancel(store, checkout(store, product.id)["id"], PRICE) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert [NS in a.json() for a in answers] == [True, True, False]
