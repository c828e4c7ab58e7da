"""Driving the haggling widget as a shopper does, and reading what it shows.

``Widget(page)`` finds the widget on any page (the store's product page or another site that
embeds it) through its open shadow root, which Playwright's locators pierce; ``open_product``
opens a product's page on the store and finds its widget. ``haggle_to_deal`` is the whole happy path, for tests that need a deal to go on from (the checkout's, say).
"""

from __future__ import annotations

from typing import Any

import httpx
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

#: A product whose merchant puts an extra on the table at the first low offer (seed 7).
DEAL_PRODUCT = "breeze-hc3-clearance"
#: The low offer that brings the extra.
LOW_OFFER = "350"

#: The speaker and words of each line the log shows as recorded (not a message still sending).
_TRANSCRIPT = """host => [...host.shadowRoot.querySelectorAll('.log .line:not(.pending)')].map(li => ({
    speaker: li.classList.contains('shopper') ? 'shopper' : 'merchant', message: li.lastChild.textContent}))"""
#: The element that has focus, looking inside shadow roots: what a keyboard user is on.
_FOCUSED = """() => { let node = document.activeElement;
    while (node && node.shadowRoot && node.shadowRoot.activeElement) node = node.shadowRoot.activeElement;
    return node ? (node.getAttribute('aria-label') || node.textContent || node.id || node.tagName).trim() : ''; }"""


class Widget:
    def __init__(self, page: Any) -> None:
        self.page = page
        self.host = page.locator(".haggler-widget")
        self.start_button = page.get_by_role("button", name="Start haggling")
        self.input = page.get_by_label("Your offer or message")
        self.send_button = page.get_by_role("button", name="Send", exact=True)
        self.accept_button = page.get_by_role("button", name="Accept")
        self.walk_button = page.get_by_role("button", name="Walk away")
        self.new_chat_button = page.get_by_role("button", name="Start a new chat")
        self.lines = self.host.locator(".log .line:not(.pending)")
        self.price = self.host.locator(".offer .price")
        self.chips = self.host.locator(".offer .chips li")
        self.status = self.host.locator(".status")
        self.countdown = self.host.locator(".countdown")
        self.checkout_link = page.get_by_role("link", name="Go to checkout")
        self.closed_note = self.host.locator(".closed p")

    def start(self) -> None:
        self.start_button.click()
        expect(self.lines).to_have_count(1)

    def say(self, text: str) -> None:
        """Type into the offer field and send; returns once the seller's answer is shown."""
        before = self.lines.count()
        self.input.fill(text)
        self.send_button.click()
        expect(self.lines).to_have_count(before + 2)

    def quick_reply(self, label: str) -> None:
        before = self.lines.count()
        self.page.get_by_role("button", name=label).click()
        expect(self.lines).to_have_count(before + 2)

    def accept(self) -> str:
        """Accept the offer on the table; returns the checkout link the widget then shows."""
        self.accept_button.click()
        expect(self.checkout_link).to_be_visible()
        return str(self.checkout_link.get_attribute("href"))

    def haggle_to_deal(self) -> str:
        """Start, offer low, ask the best price, accept: the checkout URL of the deal."""
        self.start()
        self.say(LOW_OFFER)
        self.quick_reply("Best price?")
        return self.accept()

    def transcript(self) -> list[dict[str, str]]:
        return list(self.host.evaluate(_TRANSCRIPT))

    def session_id(self) -> str:
        """The chat the widget keeps in the browser's storage for this store and product."""
        found = self.page.evaluate("() => Object.entries(localStorage).filter(([k]) => k.startsWith('haggler-chat:'))")
        assert len(found) == 1, found
        return str(found[0][1])


def open_product(page: Any, store: Any, product_id: str = DEAL_PRODUCT) -> Widget:
    """Open ``product_id``'s page on ``store``: the widget on it."""
    page.goto(f"{store.base}/store/p/{product_id}")
    return Widget(page)


def haggle_to_deal(page: Any, store: Any, product_id: str = DEAL_PRODUCT) -> str:
    """Open ``product_id``'s page on ``store`` and haggle through its widget to a deal; returns
    the deal's checkout URL as the widget links it (the store's ``deal.checkout_url``)."""
    return open_product(page, store, product_id).haggle_to_deal()


def server_history(store: Any, session_id: str) -> dict[str, Any]:
    """The store's own record of a chat (§3.3), to hold what the widget shows against."""
    response = httpx.get(f"{store.base}/api/store/chat/{session_id}", timeout=10)
    assert response.status_code == 200, response.text
    return dict(response.json())


def focused(page: Any) -> str:
    """The name of what has the keyboard focus (inside the widget's shadow root too)."""
    return str(page.evaluate(_FOCUSED))


def tab_to(page: Any, name: str, *, limit: int = 40) -> None:
    """Press Tab until the focus is on the control named ``name`` (its label starts with it)."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        if focused(page).startswith(name):
            return
    raise AssertionError(f"{name!r} is not reachable with Tab (focus ended on {focused(page)!r})")


def serious_accessibility_problems(page: Any) -> list[str]:
    """axe-core's violations of impact serious or critical on the page as it stands, one line
    each (rule, impact, the elements), for the failure message."""
    results = Axe().run(page)
    return [f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']]}"
            for v in results.response["violations"] if v["impact"] in {"serious", "critical"}]


def todays_deals(page: Any) -> int:
    """Today's bar (UTC) of the dashboard's deals-per-day chart, on the overview as it stands."""
    return int(page.locator("#chart-deals-per-day rect.bar").last.get_attribute("data-value"))
