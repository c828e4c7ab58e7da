"""The exchange's operator settings (kept apart from the routes so that configuration imports nothing heavy)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExchangeSettings:
    #: The deposit endpoint funds wallets out of thin air: fine for a sandbox, off in production.
    allow_deposits: bool = True
