"""The exchange's operator settings (kept apart from the routes so that configuration imports nothing heavy)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ExchangeSettings:
    #: The deposit endpoint funds wallets out of thin air: a sandbox feature, so off unless the
    #: operator asks for it (``--sandbox-deposits``) — a store started from a guide must not hand
    #: out free money.
    allow_deposits: bool = False
