"""The storefront in Chromium: every public page and the widget pass axe-core's serious and
critical checks, carry none of the merchant's hidden state, and the widget is pictured
mid-negotiation for the docs."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.browser.conftest import screenshot_dir
from tests.browser.driver import (
    LOW_OFFER,
    haggle_to_deal,
    open_product,
    serious_accessibility_problems,
)
from tests.support.hidden_state import assert_no_hidden_state


def test_the_front_page_lists_every_product_and_passes_axe(page, live_store) -> None:
    store = live_store()
    page.goto(store.base + "/")
    expect(page.get_by_role("main").get_by_role("listitem")).to_have_count(12)
    expect(page.get_by_role("link", name="Breeze HC3 Heat + Cool Purifying Fan")).to_be_visible()
    problems = serious_accessibility_problems(page)
    assert not problems, "\n".join(problems)


def test_the_widget_passes_axe_mid_negotiation_and_after_a_deal(page, live_store) -> None:
    store = live_store()
    widget = open_product(page, store)
    problems = serious_accessibility_problems(page)  # before the chat: the start button
    widget.start()
    widget.say(LOW_OFFER)
    expect(widget.chips.first).to_be_visible()
    widget.host.locator("section").screenshot(path=str(screenshot_dir() / "widget.png"))
    problems += serious_accessibility_problems(page)
    widget.quick_reply("Best price?")
    widget.accept()
    problems += serious_accessibility_problems(page)
    assert not problems, "\n".join(problems)


def test_no_public_page_or_widget_response_carries_hidden_state(page, live_store, traffic) -> None:
    """Spec §7 as the browser sees it: the front, every product page, the widget's script and
    every response of a whole haggle, scanned for floors, levers (text and cost), inventory
    notes and the persona. (Every other browser test's responses are scanned as it ends.)"""
    store = live_store()
    page.goto(store.base + "/")
    products = store.config.catalog.products
    for product in products:
        traffic.settle(page)
        expect(open_product(page, store, product.id).start_button).to_be_visible()
    traffic.settle(page)
    haggle_to_deal(page, store)
    traffic.settle(page)
    seen = traffic.from_(store.base)
    paths = {response.url.removeprefix(store.base).split("?")[0] for response in seen}
    assert {"/", "/widget.js", f"/store/p/{products[0].id}", "/api/store/chat/start"} <= paths
    assert sum(path.endswith("/message") for path in paths) == 1
    assert len([r for r in seen if r.url.endswith("/message")]) == 3
    for response in seen:
        assert response.body, response.url  # every body was read: the scan below misses nothing
        assert_no_hidden_state(response.body, products)
