"""The agents.json surface's operator settings (kept apart from the routes so that configuration imports nothing heavy)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True)
class AgentsSettings:
    """What the agents.json surface runs with; every value is published and enforced."""

    session_ttl_seconds: int = 1800
    max_sessions: int = 5
    requests_per_minute: int = 60
    audit_enabled: bool = True
    #: How long a negotiated deal can be redeemed with cart.add.
    deal_ttl_seconds: int = 24 * 3600

    @property
    def deal_ttl(self) -> timedelta:
        """How long a deal can be bought, in an agent's cart or at its own checkout page."""
        return timedelta(seconds=self.deal_ttl_seconds)

    def __post_init__(self) -> None:
        if self.session_ttl_seconds < 60:
            raise ValueError("session_ttl_seconds must be at least 60 (agents.json)")
        for name in ("max_sessions", "requests_per_minute", "deal_ttl_seconds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
