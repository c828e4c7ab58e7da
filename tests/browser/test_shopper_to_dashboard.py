"""The whole human side in Chromium, in one story: a shopper opens a product page, haggles through
the widget to a deal, follows the checkout link and places the order; the operator's dashboard,
open in another browser, then shows that deal, the order, and its deals-per-day bar one higher."""

from __future__ import annotations

from typing import Any

from haggler.protocols.matching.settings import MatchingSettings
from tests.browser.driver import DEAL_PRODUCT, haggle_to_deal, serious_accessibility_problems, todays_deals
from tests.support.admin import TOKEN


def sign_in(page: Any, base: str) -> None:
    page.goto(base + "/admin")
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(base + "/admin")


def test_a_shopper_haggles_buys_and_the_operator_sees_it(new_page, live_store) -> None:
    store = live_store(matching=MatchingSettings(operator_token=TOKEN))
    operator, shopper = new_page(), new_page()
    sign_in(operator, store.base)
    assert todays_deals(operator) == 0 and "None yet." in operator.locator("#table-recent-deals").inner_text()

    checkout_url = haggle_to_deal(shopper, store, DEAL_PRODUCT)
    shopper.get_by_role("link", name="Go to checkout").click()
    shopper.wait_for_url(checkout_url)
    assert shopper.get_by_role("heading", name="Your negotiated deal").is_visible()
    agreed = shopper.locator("#total").inner_text()
    assert serious_accessibility_problems(shopper) == []
    shopper.get_by_label("Full name").fill("Dorothy Vaughan")
    shopper.get_by_label("Email").fill("dorothy@example.com")
    shopper.get_by_label("Shipping address").fill("4 FORTRAN Way\nNewport News, VA")
    with shopper.expect_navigation():
        shopper.get_by_role("button", name=f"Place order · {agreed}").click()
    assert shopper.get_by_role("heading", name="Order placed").is_visible()
    order_id = shopper.locator("#order-id").inner_text()
    assert serious_accessibility_problems(shopper) == []

    operator.reload()
    assert todays_deals(operator) == 1  # the chart moved
    [row] = operator.locator("#table-recent-deals tbody tr").all()
    product = store.config.catalog.product(DEAL_PRODUCT)
    assert product is not None and product.name in row.inner_text() and agreed in row.inner_text()
    operator.goto(store.base + "/admin/orders")
    orders = operator.locator("#table-orders tbody tr")
    assert orders.count() == 1
    assert order_id in orders.first.inner_text() and "Dorothy Vaughan" in orders.first.inner_text()
    deal_id = checkout_url.rsplit("/", 1)[1]
    assert deal_id in orders.first.inner_text()
