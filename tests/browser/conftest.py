"""Browser fixtures: Playwright for Python driving Debian's Chromium against a real store.

``chromium``
    One headless Chromium (``/usr/bin/chromium``, installed by ``scripts/install-test-deps``)
    for the whole session. Tests are skipped when it is missing, unless
    ``HAGGLER_REQUIRE_BROWSER=1`` (as ``.ci/run`` sets), when they fail instead.
``page``
    A fresh browser context and page per test: no cookies or storage carried over.
``live_store``
    A factory: ``live_store(**config)`` serves the demo store (any ``StoreConfig`` field
    overridable) on a loopback port for the test and returns the running server.

Screenshots go to ``HAGGLER_SCREENSHOTS`` (default ``build/screenshots``); ``scripts/screenshots``
points it at ``docs/screenshots`` to refresh the README's pictures.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from haggler.catalog import load_catalog
from haggler.server.app import create_app
from haggler.server.config import StoreConfig
from haggler.server.threaded import ThreadedServer

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


@pytest.fixture(scope="session")
def chromium() -> Iterator[Any]:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} not installed (run scripts/install-test-deps)"
        if os.environ.get(REQUIRE_BROWSER_ENV, "").strip().lower() in {"1", "true", "yes", "on"}:
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
def page(chromium: Any) -> Iterator[Any]:
    context = chromium.new_context(viewport={"width": 1100, "height": 900})
    context.set_default_timeout(15_000)
    try:
        yield context.new_page()
    finally:
        context.close()


@pytest.fixture
def live_store(tmp_path: Path) -> Iterator[Callable[..., ThreadedServer]]:
    with ExitStack() as stack:
        def serve(**config: Any) -> ThreadedServer:
            config.setdefault("catalog", load_catalog())
            config.setdefault("db_url", f"sqlite:///{tmp_path / 'store.db'}")
            config.setdefault("data_dir", tmp_path / "data")
            config.setdefault("seed", 7)
            return stack.enter_context(ThreadedServer(create_app(StoreConfig(**config))))

        yield serve
