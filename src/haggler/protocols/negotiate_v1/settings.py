"""negotiate.v1's operator settings: the limits a store publishes and enforces (kept apart from the service so that
configuration imports nothing heavy)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StoreLimits:
    """The ``limits`` block of the descriptor; every field is enforced."""

    max_chat_starts_per_hour_per_ip: int = 8
    max_messages_per_chat: int = 30
    session_idle_ttl_seconds: int = 3600
    max_message_length_chars: int = 2000

    def __post_init__(self) -> None:
        for name in ("max_chat_starts_per_hour_per_ip", "max_messages_per_chat",
                     "session_idle_ttl_seconds", "max_message_length_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


@dataclass(frozen=True, slots=True)
class MerchantSettings:
    """How the store's merchant guards what it keeps hidden (none of it is published)."""

    #: The merchant sells no lower than its floor plus a secret share of the room between floor
    #: and list price, up to this fraction of it, drawn once per product from the store's secret:
    #: what it accepts and refuses then reveals that price, never the floor. 0 switches it off
    #: (the merchant then takes anything at or above the floor, and a patient shopper can find it).
    floor_margin: float = 0.05

    def __post_init__(self) -> None:
        if not 0 <= self.floor_margin <= 0.5:
            raise ValueError(f"floor_margin must be between 0 and 0.5 (a share of list price minus floor), "
                             f"got {self.floor_margin}")
