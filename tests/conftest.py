"""Shared pytest fixtures.

Database fixtures
-----------------
``db_url``
    SQLAlchemy URL of a fresh, empty database; parametrized so a test using it
    runs once on SQLite (a file in ``tmp_path``) and once on PostgreSQL.
``postgres_url``
    SQLAlchemy URL of a fresh, empty PostgreSQL database (dropped afterwards).
``postgres_cluster``
    The session-wide throwaway PostgreSQL server (see ``tests/support/postgres.py``).
``own_postgres_cluster``
    A throwaway PostgreSQL server for one test, which may halt and resume it.

PostgreSQL tests are skipped when the server binaries are not installed
(``scripts/install-test-deps`` installs them).  With ``HAGGLER_REQUIRE_POSTGRES=1``
(as set by ``.ci/run``) they fail instead.

Matrix fixtures
---------------
``synapse``
    The session-wide throwaway Synapse homeserver (``haggler.matrix.homeserver.LocalSynapse``).
``make_synapse``
    Homeservers of the test's own: ``make_synapse(rate_limits=...)``, which it may restart.

They run Synapse with this interpreter (the test extra installs ``matrix-synapse``), or with
``$HAGGLER_SYNAPSE_PYTHON``; they are skipped when neither has it, and fail instead with
``HAGGLER_REQUIRE_SYNAPSE=1`` (as set by ``.ci/run``).
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from haggler.matrix.homeserver import LocalSynapse

try:  # `python -m pytest` from the repo root (scripts/test), or tests/ is a package
    from tests.support.postgres import PostgresCluster, find_pg_bin
except ImportError:  # rootdir-less invocation: pytest puts tests/ itself on sys.path
    from support.postgres import PostgresCluster, find_pg_bin  # type: ignore[no-redef]

REQUIRE_POSTGRES_ENV = "HAGGLER_REQUIRE_POSTGRES"


def ci_requires(env: str) -> bool:
    """Whether the environment variable ``env`` (``HAGGLER_REQUIRE_POSTGRES``, ``..._BROWSER``,
    ``..._MOUNT``, as ``.ci/run`` sets them) turns a test's skip into a failure."""
    return os.environ.get(env, "").strip().lower() in {"1", "true", "yes", "on"}


def _started_cluster() -> Iterator[PostgresCluster]:
    bin_dir = find_pg_bin()
    if bin_dir is None:
        message = "PostgreSQL binaries not installed (run scripts/install-test-deps)"
        if ci_requires(REQUIRE_POSTGRES_ENV):
            pytest.fail(f"{message}; {REQUIRE_POSTGRES_ENV}=1 is set", pytrace=False)
        pytest.skip(message)
    cluster = PostgresCluster(bin_dir)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL server shared by the whole test session."""
    yield from _started_cluster()


@pytest.fixture
def own_postgres_cluster() -> Iterator[PostgresCluster]:
    """A throwaway PostgreSQL server of the test's own: one it may stop and start again."""
    yield from _started_cluster()


@pytest.fixture
def postgres_url(request: pytest.FixtureRequest, postgres_cluster: PostgresCluster) -> Iterator[str]:
    """SQLAlchemy URL of a fresh PostgreSQL database, dropped after the test."""
    stem = re.sub(r"[^a-z0-9_]+", "_", request.node.name.lower()).strip("_")[:40]
    name = f"t_{stem}_{uuid.uuid4().hex[:12]}"
    url = postgres_cluster.create_database(name)
    yield url
    try:
        postgres_cluster.drop_database(name)  # WITH (FORCE): closes leaked connections
    except Exception:  # noqa: BLE001 - the whole cluster is thrown away at the end anyway
        pass


@pytest.fixture(
    params=[
        pytest.param("sqlite", id="sqlite"),
        pytest.param("postgresql", id="postgresql", marks=pytest.mark.postgres),
    ]
)
def db_url(request: pytest.FixtureRequest, tmp_path) -> str:
    """SQLAlchemy URL of a fresh, empty database; runs the test on each backend."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/haggler.db"
    return request.getfixturevalue("postgres_url")


# -- Matrix homeservers -------------------------------------------------------------------

REQUIRE_SYNAPSE_ENV = "HAGGLER_REQUIRE_SYNAPSE"
#: An interpreter with matrix-synapse installed, to run the homeservers with instead of this one.
SYNAPSE_PYTHON_ENV = "HAGGLER_SYNAPSE_PYTHON"


def _synapse_python() -> str:
    """The interpreter to run Synapse with; skips (or, in CI, fails) the test when there is none."""
    python = os.environ.get(SYNAPSE_PYTHON_ENV)
    if python:
        return python
    try:
        importlib.metadata.version("matrix-synapse")
    except importlib.metadata.PackageNotFoundError:
        message = (f"matrix-synapse is not installed (pip install 'haggler[matrix-homeserver]', "
                   f"or set {SYNAPSE_PYTHON_ENV} to a Python that has it)")
        if ci_requires(REQUIRE_SYNAPSE_ENV):
            pytest.fail(f"{message}; {REQUIRE_SYNAPSE_ENV}=1 is set", pytrace=False)
        pytest.skip(message)
    return sys.executable


@pytest.fixture(scope="session")
def synapse() -> Iterator[LocalSynapse]:
    """A throwaway Synapse shared by the whole test session: register users with unique names, as
    other tests share it."""
    with LocalSynapse(python=_synapse_python()) as homeserver:
        yield homeserver


@pytest.fixture
def make_synapse() -> Iterator[Callable[..., LocalSynapse]]:
    """Start homeservers of the test's own, ``make_synapse(**LocalSynapse options)``: ones it may
    halt and restart, or give rate limits of their own; all stopped after the test."""
    python = _synapse_python()
    with ExitStack() as stack:
        yield lambda **options: stack.enter_context(LocalSynapse(python=python, **options))


# -- stores -------------------------------------------------------------------------------

try:
    from tests.support.servers import FakeClock, ThreadedServer
except ImportError:  # pragma: no cover - see the postgres import above
    from support.servers import FakeClock, ThreadedServer  # type: ignore[no-redef]

#: Values planted in the test catalog's hidden fields; none may ever appear in a response.
SECRET_MARKERS = ("SECRET-SUPPLIER-7731", "PERSONA-SECRET-ZEBRA", "NOTE-SECRET-QUARTZ")


def secret_catalog_data() -> dict:
    """The demo catalog, with private fields (named ``x_``/``x-``, as a catalog must name its own
    fields) a store might keep next to the public ones."""
    import json
    from importlib import resources

    data = json.loads(resources.files("haggler").joinpath("data/demo_catalog.json").read_text("utf-8-sig"))
    data["store"]["x-owner-phone"] = "SECRET-SUPPLIER-7731 store phone"
    for product in data["products"]:
        product["x_supplier_cost"] = 123.45
        product["x_supplier_contact"] = "SECRET-SUPPLIER-7731"
        product["merchant_persona"] = "PERSONA-SECRET-ZEBRA: a jovial haggler"
        product["inventory_note"] = product.get("inventory_note", "") + " NOTE-SECRET-QUARTZ"
    return data


class Store:
    """A running store on a real loopback HTTP server, with its clock and an HTTP client."""

    def __init__(self, server: ThreadedServer, clock: FakeClock, catalog, app) -> None:
        import httpx

        self.server = server
        self.base = server.base
        self.clock = clock
        self.catalog = catalog
        self.app = app
        self.http = httpx.Client(base_url=server.base, timeout=30)

    def start(self, product_id: str | None = None, **headers: str):
        pid = product_id or self.catalog.products[0].id
        return self.http.get("/api/store/chat/start", params={"product_id": pid}, headers=headers)

    def say(self, next_url: str, message: str):
        from urllib.parse import quote

        return self.http.get(next_url.replace("{url_encoded_message}", quote(message, safe="")))


@pytest.fixture
def make_store(tmp_path):
    """Start stores: ``make_store(db_url=..., limits=StoreLimits(...), ...)``."""
    from haggler.catalog import parse_catalog
    from haggler.server.app import create_app
    from haggler.server.config import StoreConfig

    stack = ExitStack()

    def _make(*, db_url: str | None = None, catalog=None, clock: FakeClock | None = None, **config) -> Store:
        clock = clock or FakeClock()
        catalog = catalog or parse_catalog(secret_catalog_data())
        config.setdefault("sweep_interval_seconds", None)
        config.setdefault("data_dir", tmp_path / f"data-{id(clock)}")
        app = create_app(StoreConfig(catalog=catalog, db_url=db_url or f"sqlite:///{tmp_path}/store-{id(clock)}.db",
                                     clock=clock, **config))
        server = stack.enter_context(ThreadedServer(app))
        store = Store(server, clock, catalog, app)
        stack.callback(store.http.close)
        return store

    with stack:
        yield _make


@pytest.fixture
def store(make_store) -> Store:
    """A store with the secret-laden demo catalog on SQLite."""
    return make_store()
