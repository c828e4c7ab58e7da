"""A store seeded with the tests' tea shop (tests/protocols/ucp/tea_shop), serving ACP with the
tests' key and offering the simulated payment handler (a simulation secret is set)."""

from __future__ import annotations

import pytest

from haggler.protocols.acp.settings import AcpSettings
from haggler.protocols.ucp.settings import UcpSettings

try:
    from tests.support.acp import KEY
    from tests.support.ucp import SECRET, seed
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.acp import KEY  # type: ignore[no-redef]
    from support.ucp import SECRET, seed  # type: ignore[no-redef]


@pytest.fixture
def make_acp_store(make_store, tmp_path):
    """``make_acp_store(db_url=None, key=KEY)``: a seeded store serving ACP (and UCP)."""
    def make(db_url: str | None = None, key: str | None = KEY):
        url = db_url or f"sqlite:///{tmp_path}/acp-{key is None}.db"
        seed(url)
        return make_store(db_url=url, ucp=UcpSettings(simulation_secret=SECRET), acp=AcpSettings(api_key=key))
    return make


@pytest.fixture
def acp_store(make_acp_store):
    return make_acp_store()
