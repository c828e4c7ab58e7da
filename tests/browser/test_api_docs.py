"""``/docs`` in Chromium on a machine with no internet: every request to a host other than the
store's is refused (and recorded), and Swagger UI still draws the store's operations."""

from __future__ import annotations

from urllib.parse import urlsplit

from playwright.sync_api import expect


def test_the_docs_page_renders_with_the_network_cut_off_and_asks_nothing_of_other_hosts(page, live_store) -> None:
    store = live_store()
    store_host = urlsplit(store.base).netloc
    elsewhere: list[str] = []

    def only_the_store(route) -> None:
        if urlsplit(route.request.url).netloc == store_host:
            route.continue_()
        else:
            elsewhere.append(route.request.url)
            route.abort()

    page.context.route("**/*", only_the_store)
    # A script or style the page's Content-Security-Policy refused would show as a console error.
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))

    page.goto(store.base + "/docs")
    name = store.config.catalog.store.name
    expect(page).to_have_title(f"{name} - Swagger UI")
    expect(page.locator(".information-container .title")).to_contain_text(name)
    start = page.locator(".opblock-get", has=page.locator(".opblock-summary-path", has_text="/api/store/chat/start"))
    expect(start).to_contain_text("Start a chat about one product")
    start.locator(".opblock-summary-control").click()  # Swagger UI's own script opens it: it runs
    expect(start.locator(".parameters")).to_contain_text("product_id")

    assert elsewhere == []
    assert errors == []
