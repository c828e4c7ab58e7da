from __future__ import annotations

from collections.abc import Iterator

import pytest

from haggler.storage.database import Database, open_database


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    """A fresh database on each backend (see ``db_url``), disposed afterwards."""
    database = open_database(db_url)
    yield database
    database.dispose()
