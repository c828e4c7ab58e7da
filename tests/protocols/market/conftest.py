"""The market's HTTP tests share one store per test (a file that needs another, such as the races
on PostgreSQL too, defines its own ``store``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def store(make_store):
    """A running store with a fresh market, on SQLite."""
    return make_store()
