"""The exchange's tests fund wallets: their stores run with sandbox deposits (``haggler serve
--sandbox-deposits``), off by default, unless a test gives its own ``ExchangeSettings``."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from haggler.protocols.transactions.settings import ExchangeSettings


@pytest.fixture
def make_store(make_store: Callable[..., Any]) -> Callable[..., Any]:
    def _make(**config: Any) -> Any:
        config.setdefault("exchange", ExchangeSettings(allow_deposits=True))
        return make_store(**config)

    return _make
