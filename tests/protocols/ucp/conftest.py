"""A store seeded with the tests' tea shop, run with a simulation secret, and a platform."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from haggler.protocols.ucp.settings import UcpSettings

try:
    from tests.support.ucp import SECRET, Platform, seed
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.ucp import SECRET, Platform, seed  # type: ignore[no-redef]


@pytest.fixture
def make_ucp_store(make_store, tmp_path):
    """``make_ucp_store(db_url=None, secret=SECRET, **config)``: a seeded store serving UCP (a real
    store with ``secret=None``), with any other ``StoreConfig`` field given (its payment handlers)."""
    def make(db_url: str | None = None, secret: str | None = SECRET, **config):
        url = db_url or f"sqlite:///{tmp_path}/ucp-{secret is None}.db"
        seed(url)
        return make_store(db_url=url, ucp=UcpSettings(simulation_secret=secret), **config)
    return make


@pytest.fixture
def ucp_store(make_ucp_store):
    return make_ucp_store()


@pytest.fixture
def platform() -> Iterator[Platform]:
    with Platform() as p:
        yield p
