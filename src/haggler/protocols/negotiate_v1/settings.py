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
