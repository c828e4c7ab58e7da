"""The browser itself: Debian's Chromium starts under Playwright and renders the store's front."""

from __future__ import annotations


def test_the_store_front_renders_in_chromium(page, live_store) -> None:
    store = live_store()
    page.goto(store.base + "/")
    assert page.locator("h1").inner_text().strip()
    assert page.locator(".card").count() == 12
