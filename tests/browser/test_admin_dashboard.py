"""The operator's dashboard in Chromium: signing in through the form, the charts drawn without a
line of JavaScript, a new deal moving them, and axe-core finding no serious or critical problem
on any page. Writes ``dashboard.png``."""

from __future__ import annotations

import httpx

from haggler.protocols.matching.settings import MatchingSettings
from haggler.protocols.negotiate_v1.settings import StoreLimits
from tests.browser.conftest import screenshot_dir
from tests.browser.driver import serious_accessibility_problems as serious
from tests.browser.driver import todays_deals
from tests.support.admin import ACCEPT, TOKEN, WALK_AWAY, offer, play

PAGES = ["/admin", "/admin/chats", "/admin/deals", "/admin/orders", "/admin/products", "/admin/exchange", "/admin/matching",
         "/admin/market"]


class Shopper:
    """Just enough of a store handle for ``play``: its HTTP client and a chat start."""

    def __init__(self, base: str) -> None:
        self.http = httpx.Client(base_url=base, timeout=30)

    def start(self, product_id: str) -> httpx.Response:
        return self.http.get("/api/store/chat/start", params={"product_id": product_id})


def test_the_dashboard_signs_in_draws_its_charts_and_passes_axe(page, live_store) -> None:
    store = live_store(matching=MatchingSettings(operator_token=TOKEN),
                       limits=StoreLimits(max_chat_starts_per_hour_per_ip=10**6))
    shopper = Shopper(store.base)
    for product_id, price in (("aerion-v12-cordless", 520), ("stillair-p400", None), ("crema-mini-openbox", 1040),
                              ("grindwell-conical-pro", None)):
        play(shopper, product_id, *((offer(price), ACCEPT) if price else ("deal",)))
    play(shopper, "halcyon-anc-900", WALK_AWAY)
    chat = play(shopper, "meridian-studio-ref", "hello")

    page.goto(store.base + "/admin")
    assert page.url.startswith(store.base + "/admin/login")
    assert serious(page) == []
    page.fill("#token", TOKEN)
    page.click("button[type=submit]")
    page.wait_for_url(store.base + "/admin")
    assert page.locator("#chart-deals-per-day rect.bar").count() == 14
    assert page.locator("#chart-discounts rect.bar").count() >= 8
    assert page.locator("#chart-outcomes rect.segment[data-label=agreed]").get_attribute("data-value") == "4"
    assert page.locator("#table-recent-deals tbody tr").count() == 4
    before = todays_deals(page)
    assert before == 4
    page.screenshot(path=str(screenshot_dir() / "dashboard.png"), full_page=True)

    for path in PAGES + [f"/admin/chats/{chat.chat_id}"]:
        page.goto(store.base + path)
        assert page.locator("main h1").count() == 1, path
        assert serious(page) == [], path

    play(shopper, "tidemark-r5-robot", "deal")
    page.goto(store.base + "/admin")
    assert todays_deals(page) == before + 1
    assert page.locator("#table-recent-deals tbody tr").first.inner_text().find("Tidemark") >= 0

    page.click("text=Log out")
    page.wait_for_url(store.base + "/admin/login")
    page.goto(store.base + "/admin/deals")
    assert page.url.startswith(store.base + "/admin/login")
