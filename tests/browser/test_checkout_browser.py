"""A person buys a deal at the merchant's checkout link in Chromium: the form by keyboard alone,
a problem shown and fixed, one order placed, the confirmation — each page scanned by axe-core."""

from __future__ import annotations

import httpx
from sqlalchemy import create_engine, select

from haggler.storage.schema import orders
from tests.browser.driver import serious_accessibility_problems as serious
from tests.support.checkout import close_a_deal


def test_a_person_buys_a_deal_by_keyboard_and_sees_one_order(page, live_store, tmp_path):
    store = live_store(db_url=f"sqlite:///{tmp_path / 'shop.db'}")
    with httpx.Client(base_url=store.base, timeout=30) as http:
        deal = close_a_deal(http, store.config.catalog.product("aerion-v12-cordless"))
    page.goto(deal["checkout_url"])
    assert page.get_by_role("heading", name="Your negotiated deal").is_visible()
    assert serious(page) == []

    page.get_by_label("Full name").focus()
    page.keyboard.type("Katherine Johnson")
    page.keyboard.press("Tab")
    page.keyboard.type("katherine@")  # not yet an address
    page.keyboard.press("Tab")
    page.keyboard.type("1 Orbit Lane\nHampton, VA")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent").startswith("Place order")
    # The browser's own check stops an invalid email before it is sent; the store checks again.
    page.evaluate("document.querySelector('form.buyer').noValidate = true")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    assert page.get_by_role("alert").is_visible() and "not an email address" in page.content()
    assert page.get_by_label("Full name").input_value() == "Katherine Johnson"  # kept
    assert serious(page) == []

    page.get_by_label("Email").fill("katherine@example.com")
    with page.expect_navigation():
        page.get_by_label("Email").press("Enter")
    assert page.get_by_role("heading", name="Order placed").is_visible()
    order_id = page.locator("#order-id").inner_text()
    assert serious(page) == []
    page.reload()  # post/redirect/get: a reload shows the same order and sends nothing
    assert page.locator("#order-id").inner_text() == order_id

    engine = create_engine(f"sqlite:///{tmp_path / 'shop.db'}")
    with engine.connect() as conn:
        rows = list(conn.execute(select(orders.c.id, orders.c.deal_id, orders.c.buyer_name, orders.c.ship_to)))
    engine.dispose()
    assert rows == [(order_id, deal["id"], "Katherine Johnson", "1 Orbit Lane\nHampton, VA")]
