"""A deal closed in chat, bought by a person at the merchant's ``checkout_url``: over real HTTP,
on SQLite and PostgreSQL — the page, the form and its problems, one order per deal however often
and however concurrently it is submitted, expiry, and a deal an agent's cart holds."""

from __future__ import annotations

import threading
import pytest
from sqlalchemy import create_engine, func, select

from haggler.money import decimal_string, format_money
from haggler.protocols.agents_json.capabilities import API, SESSION_PATH
from haggler.storage.schema import deal_redemptions, orders

from tests.support.checkout import close_a_deal
from tests.support.databases import locked_by_another_process

try:
    from tests.conftest import SECRET_MARKERS
except ImportError:  # pragma: no cover
    from conftest import SECRET_MARKERS  # type: ignore[no-redef]

FORM = {"name": "Grace Hopper", "email": "grace@example.com", "address": "1 Compiler Court\nArlington, VA"}


def path_of(store, deal: dict) -> str:
    return deal["checkout_url"].removeprefix(store.base)


def order_rows(store) -> list:
    engine = create_engine(store.app.state.service.db.url)
    try:
        with engine.connect() as conn:
            return list(conn.execute(select(orders)))
    finally:
        engine.dispose()


def test_the_page_shows_the_deal_and_a_labelled_form_and_nothing_hidden(store):
    product = store.catalog.products[0]
    deal = close_a_deal(store.http, product)
    page = store.http.get(path_of(store, deal))
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    text = page.text
    cents = round(deal["price"] * 100)
    assert product.name in text and format_money(cents) in text and format_money(product.list_price_cents) in text
    assert all(extra in text for extra in deal["extras"])
    assert f'action="/checkout/{deal["id"]}"' in text and f"Place order · {format_money(cents)}" in text
    for field in ("name", "email", "address"):
        assert f"<label for=buyer-{field}>" in text and f"id=buyer-{field} name={field} required" in text
    for marker in SECRET_MARKERS:
        assert marker not in text
    assert product.inventory_note not in text and decimal_string(product.floor_cents) not in text
    assert format_money(product.floor_cents) not in text
    assert all(lever.text not in text for lever in product.levers)


def test_submitting_places_one_order_and_shows_its_confirmation(db_url, make_store):
    store = make_store(db_url=db_url)
    deal = close_a_deal(store.http, store.catalog.products[0])
    url = path_of(store, deal)
    placed = store.http.post(url, data=FORM)
    assert placed.status_code == 303 and placed.headers["location"] == url
    shown = store.http.get(url)
    assert shown.status_code == 200 and "Order placed" in shown.text and "<form" not in shown.text
    assert "Grace Hopper" in shown.text and "g•••@example.com" in shown.text
    assert "grace@example.com" not in shown.text and "Compiler Court" not in shown.text  # the link is a bearer
    again = store.http.post(url, data={**FORM, "name": "Someone Else"})
    assert again.status_code == 303
    rows = order_rows(store)
    assert len(rows) == 1
    row = rows[0]
    assert row.id in shown.text and row.deal_id == deal["id"] and row.checkout_id is None
    assert (row.buyer_name, row.buyer_email, row.ship_to) == (FORM["name"], FORM["email"], FORM["address"])
    assert row.total_cents == round(deal["price"] * 100) and row.currency == deal["currency"]
    assert '"deal_id": "%s"' % deal["id"] in row.lines and all(extra in row.lines for extra in deal["extras"])


def test_concurrent_submissions_make_one_order(db_url, make_store):
    store = make_store(db_url=db_url)
    deal = close_a_deal(store.http, store.catalog.products[0])
    url = path_of(store, deal)
    barrier = threading.Barrier(8)
    statuses: list[int] = []

    def submit(n: int) -> None:
        import httpx

        with httpx.Client(base_url=store.base, timeout=30) as http:
            barrier.wait()
            statuses.append(http.post(url, data={**FORM, "name": f"Buyer {n}"}).status_code)

    threads = [threading.Thread(target=submit, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses == [303] * 8
    rows = order_rows(store)
    assert len(rows) == 1 and rows[0].buyer_name.startswith("Buyer ")


@pytest.mark.parametrize(("field", "value", "why"), [
    ("email", "", "Email: required"),
    ("email", "grace@", "not an email address"),
    ("name", "x" * 201, "at most 200 characters"),
    ("name", "Grace\nHopper", "must be one line"),
    ("address", "1 Court\x00", "cannot be stored"),
])
def test_a_form_with_a_problem_is_shown_again_with_it_and_orders_nothing(store, field, value, why):
    deal = close_a_deal(store.http, store.catalog.products[0])
    answer = store.http.post(path_of(store, deal), data={**FORM, field: value})
    assert answer.status_code == 400 and why in answer.text
    assert f"aria-invalid=true aria-describedby=problem-{field}" in answer.text and "role=alert" in answer.text
    kept = "Grace Hopper" if field != "name" else "grace@example.com"
    assert kept in answer.text  # the other values are kept
    assert order_rows(store) == []


def test_values_are_escaped_when_the_form_is_shown_again(store):
    deal = close_a_deal(store.http, store.catalog.products[0])
    answer = store.http.post(path_of(store, deal), data={**FORM, "name": '"><script>alert(1)</script>', "email": ""})
    assert answer.status_code == 400
    assert "<script>alert(1)" not in answer.text and "&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in answer.text


@pytest.mark.parametrize(("body", "headers", "why"), [
    (b'{"name": "x"}', {"content-type": "application/json"}, "application/x-www-form-urlencoded"),
    (b"name=a&name=b&email=x%40y.z&address=c", {"content-type": "application/x-www-form-urlencoded"}, "more than once"),
    (b"name=%FF&email=x%40y.z&address=c", {"content-type": "application/x-www-form-urlencoded"}, "not valid UTF-8"),
])
def test_a_body_that_is_not_a_browser_form_gets_a_page_saying_so(store, body, headers, why):
    deal = close_a_deal(store.http, store.catalog.products[0])
    answer = store.http.post(path_of(store, deal), content=body, headers=headers)
    assert answer.status_code == 400 and answer.headers["content-type"].startswith("text/html") and why in answer.text
    assert order_rows(store) == []


def test_an_unknown_deal_or_cart_checkout_is_a_404_page(store):
    for answer in (store.http.get("/checkout/deal_nope"), store.http.post("/checkout/deal_nope", data=FORM),
                   store.http.get("/checkout/cart/nope"), store.http.post("/checkout/cart/nope", data=FORM)):
        assert answer.status_code == 404 and answer.headers["content-type"].startswith("text/html")
        assert "No such checkout" in answer.text
    assert order_rows(store) == []


def test_an_expired_deal_cannot_be_bought_but_a_bought_one_stays_confirmed(store):
    expired, bought = close_a_deal(store.http, store.catalog.products[0]), close_a_deal(store.http, store.catalog.products[1])
    assert store.http.post(path_of(store, bought), data=FORM).status_code == 303
    store.clock.advance(hours=24, seconds=1)
    for answer in (store.http.get(path_of(store, expired)), store.http.post(path_of(store, expired), data=FORM)):
        assert answer.status_code == 410 and "This deal has expired" in answer.text
        assert f"/store/p/{store.catalog.products[0].id}" in answer.text  # a way to haggle again
    assert "Order placed" in store.http.get(path_of(store, bought)).text
    assert [r.deal_id for r in order_rows(store)] == [bought["id"]]


def test_a_deal_is_bought_once_either_in_an_agents_cart_or_at_its_page(store):
    token = store.http.post(SESSION_PATH, json={"agent_name": "cart"}).json()["data"]["session_token"]
    headers = {"X-Agent-Session": token}
    in_cart, at_page = close_a_deal(store.http, store.catalog.products[0]), close_a_deal(store.http, store.catalog.products[1])
    added = store.http.post(f"{API}/cart", json={"item_id": store.catalog.products[0].id, "quantity": 1,
                                                 "deal_id": in_cart["id"]}, headers=headers)
    assert added.status_code == 200
    for answer in (store.http.get(path_of(store, in_cart)), store.http.post(path_of(store, in_cart), data=FORM)):
        assert answer.status_code == 409 and "shopping agent has put this deal in its cart" in answer.text
    assert store.http.post(path_of(store, at_page), data=FORM).status_code == 303
    refused = store.http.post(f"{API}/cart", json={"item_id": store.catalog.products[1].id, "quantity": 1,
                                                   "deal_id": at_page["id"]}, headers=headers)
    assert refused.status_code == 409 and "bought at its checkout page" in refused.json()["error"]
    assert [r.deal_id for r in order_rows(store)] == [at_page["id"]]


def test_a_cart_and_a_person_racing_for_one_deal_leave_one_redemption(db_url, make_store):
    store = make_store(db_url=db_url)
    deal = close_a_deal(store.http, store.catalog.products[0])
    token = store.http.post(SESSION_PATH, json={"agent_name": "racer"}).json()["data"]["session_token"]
    barrier = threading.Barrier(2)
    out: dict[str, int] = {}

    def run(name: str, send) -> None:
        import httpx

        with httpx.Client(base_url=store.base, timeout=30) as http:
            barrier.wait()
            out[name] = send(http).status_code

    racers = [
        threading.Thread(target=run, args=("page", lambda http: http.post(path_of(store, deal), data=FORM))),
        threading.Thread(target=run, args=("cart", lambda http: http.post(
            f"{API}/cart", json={"item_id": store.catalog.products[0].id, "quantity": 1, "deal_id": deal["id"]},
            headers={"X-Agent-Session": token}))),
    ]
    for t in racers:
        t.start()
    for t in racers:
        t.join()
    assert sorted(out.values()) in ([200, 409], [303, 409]), out  # exactly one of them got the deal
    engine = create_engine(store.app.state.service.db.url)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(deal_redemptions)).scalar_one() == 1
    engine.dispose()
    assert len(order_rows(store)) == (1 if out["page"] == 303 else 0)


def test_the_deal_lifetime_is_the_agents_cart_one(make_store):
    from haggler.protocols.agents_json.settings import AgentsSettings

    store = make_store(agents=AgentsSettings(deal_ttl_seconds=60))
    deal = close_a_deal(store.http, store.catalog.products[0])
    store.clock.advance(seconds=59)
    assert store.http.get(path_of(store, deal)).status_code == 200
    store.clock.advance(seconds=1)
    assert store.http.get(path_of(store, deal)).status_code == 410


def test_an_order_lands_while_another_process_holds_the_database(make_store, tmp_path):
    """The deal page places its order in the store's write lane: on the event loop when the
    database is free, in a worker thread when it is not. With SQLite's write lock held by another
    process, the submission waits in that thread (the event loop keeps answering) and its order
    is placed, once, when the lock is released."""
    import httpx

    db_path = tmp_path / "busy.db"
    store = make_store(db_url=f"sqlite:///{db_path}")
    deal = close_a_deal(store.http, store.catalog.products[0])
    url = path_of(store, deal)
    result: dict[str, httpx.Response] = {}

    def submit() -> None:
        with httpx.Client(base_url=store.base, timeout=30) as http:
            result["placed"] = http.post(url, data=FORM)

    buyer = threading.Thread(target=submit)
    with locked_by_another_process(db_path):
        buyer.start()
        buyer.join(0.5)
        assert buyer.is_alive()  # waiting for the lock, in a thread
        assert store.http.get("/healthz").status_code == 200  # the event loop is free
        assert order_rows(store) == []
    buyer.join(30)
    assert result["placed"].status_code == 303, result["placed"].text
    rows = order_rows(store)
    assert len(rows) == 1 and rows[0].deal_id == deal["id"] and rows[0].buyer_name == FORM["name"]
