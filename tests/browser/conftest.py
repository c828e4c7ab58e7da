"""Browser fixtures: Playwright for Python driving Debian's Chromium against a real store.

``chromium``
    One headless Chromium (``/usr/bin/chromium``, installed by ``scripts/install-test-deps``)
    for the browser tests (closed when they are done). Tests are skipped when it is missing, unless
    ``HAGGLER_REQUIRE_BROWSER=1`` (as ``.ci/run`` sets), when they fail instead.
``new_page``
    A factory: each call opens a fresh browser context (no cookies or storage carried over: another
    shopper) and returns its page. ``page`` is one such page.
``traffic``
    Every response the test's browser contexts received, body included (``Traffic.responses``).
``live_store``
    A factory: ``live_store(**config)`` serves a store (any ``StoreConfig`` field overridable) on a
    loopback port for the test and returns a ``LiveStore`` (``.base``, ``.config``). Its catalog
    is the demo catalog with secrets planted in its hidden fields
    (``tests.conftest.secret_catalog_data``). When the test ends, every response the browser
    received from the store is scanned for the hidden state of spec §7 (floors, levers,
    inventory notes, persona): every body read before a navigation discarded it
    (``Traffic.settle``).
``other_site``
    A factory: ``other_site(html)`` serves one page from a second loopback server, an origin
    other than the store's, and returns its URL: a shop that embeds the store's widget.

Screenshots go to ``HAGGLER_SCREENSHOTS`` (default ``build/screenshots``); ``scripts/screenshots``
points it at ``docs/screenshots`` to refresh the README's pictures.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from haggler.catalog import parse_catalog
from haggler.server.app import create_app
from haggler.server.config import StoreConfig
from haggler.server.threaded import ThreadedServer
from tests.conftest import ci_requires, secret_catalog_data
from tests.support.hidden_state import assert_no_hidden_state

CHROMIUM = Path("/usr/bin/chromium")
REQUIRE_BROWSER_ENV = "HAGGLER_REQUIRE_BROWSER"
#: Without the background-networking flags, Chromium keeps dialling Google's hosts, which this
#: machine's closed network refuses; --no-sandbox because CI runs as root.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ROOT = Path(__file__).resolve().parents[2]


def screenshot_dir() -> Path:
    """Where the tests write their screenshots (created)."""
    where = Path(os.environ.get("HAGGLER_SCREENSHOTS") or ROOT / "build" / "screenshots")
    where.mkdir(parents=True, exist_ok=True)
    return where


@dataclass(frozen=True)
class Seen:
    url: str
    status: int
    #: None when the browser no longer had it to give (see ``Traffic.settle``).
    body: str | None


@dataclass
class Traffic:
    """The responses the browser received, with their bodies.

    A body is read when its response arrives, but the read completes later, and a navigation
    started before it completes discards the earlier document's bodies: call ``settle(page)``
    before navigating away when the bodies so far must all be kept.
    """

    responses: list[Seen] = field(default_factory=list)
    reading: int = 0

    def watch(self, context: Any) -> None:
        context.on("response", self._record)

    def _record(self, response: Any) -> None:
        from playwright.sync_api import Error

        self.reading += 1
        try:
            body: str | None = response.text()
        except Error:  # discarded by a navigation; or a redirect, which has no body
            body = None
        finally:
            self.reading -= 1
        self.responses.append(Seen(response.url, response.status, body))

    def settle(self, page: Any) -> None:
        """Wait until every body the browser has received so far is read."""
        while self.reading:
            page.wait_for_timeout(10)

    def from_(self, base: str) -> list[Seen]:
        return [seen for seen in self.responses if seen.url.startswith(base + "/")]


@dataclass(frozen=True)
class LiveStore:
    server: ThreadedServer
    config: StoreConfig

    @property
    def base(self) -> str:
        return self.server.base


@pytest.fixture(scope="package")
def chromium() -> Iterator[Any]:
    """Package-scoped, not session-scoped: Playwright's sync API runs an event loop in this thread
    while it is open, and every later test that calls ``asyncio.run`` would fail under it."""
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} not installed (run scripts/install-test-deps)"
        if ci_requires(REQUIRE_BROWSER_ENV):
            pytest.fail(f"{message}; {REQUIRE_BROWSER_ENV}=1 is set", pytrace=False)
        pytest.skip(message)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def traffic() -> Traffic:
    return Traffic()


@pytest.fixture
def new_page(chromium: Any, traffic: Traffic) -> Iterator[Callable[[], Any]]:
    with ExitStack() as stack:
        def open_page() -> Any:
            context = chromium.new_context(viewport={"width": 1100, "height": 900})
            stack.callback(context.close)
            context.set_default_timeout(15_000)
            traffic.watch(context)
            return context.new_page()

        yield open_page


@pytest.fixture
def page(new_page: Callable[[], Any]) -> Any:
    return new_page()


@pytest.fixture
def live_store(tmp_path: Path, traffic: Traffic) -> Iterator[Callable[..., LiveStore]]:
    served: list[LiveStore] = []
    with ExitStack() as stack:
        def serve(**config: Any) -> LiveStore:
            config.setdefault("catalog", parse_catalog(secret_catalog_data()))
            config.setdefault("db_url", f"sqlite:///{tmp_path / f'store-{len(served)}.db'}")
            config.setdefault("data_dir", tmp_path / "data")
            config.setdefault("seed", 7)
            store_config = StoreConfig(**config)
            served.append(LiveStore(stack.enter_context(ThreadedServer(create_app(store_config))), store_config))
            return served[-1]

        yield serve
        for store in served:
            for seen in traffic.from_(store.base):
                # Behind the operator token the owner sees margins over the floor; nowhere else.
                if seen.body is not None and not seen.url.startswith(store.base + "/admin"):
                    assert_no_hidden_state(seen.body, store.config.catalog.products)


@pytest.fixture
def other_site() -> Iterator[Callable[[str], str]]:
    with ExitStack() as stack:
        def serve(html: str) -> str:
            async def home(_: Request) -> HTMLResponse:
                return HTMLResponse(html)

            return stack.enter_context(ThreadedServer(Starlette(routes=[Route("/", home)]))).base + "/"

        yield serve
