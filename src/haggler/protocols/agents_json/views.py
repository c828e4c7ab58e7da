"""The store's ``/.well-known/agents.json``: built from the same capability declarations the
API enforces, plus the session, rate-limit and audit settings the store runs with."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from haggler.protocols.agents_json.capabilities import AUDIT_PATH, SESSION_PATH, Capability

__all__ = ["AgentsSettings", "SCHEMA_VERSION", "build_manifest"]

SCHEMA_VERSION = "0.1.0"


@dataclass(frozen=True)
class AgentsSettings:
    """What the agents.json surface runs with; every value is published and enforced."""

    session_ttl_seconds: int = 1800
    max_sessions: int = 5
    requests_per_minute: int = 60
    audit_enabled: bool = True
    #: How long a negotiated deal can be redeemed with cart.add.
    deal_ttl_seconds: int = 24 * 3600

    def __post_init__(self) -> None:
        if self.session_ttl_seconds < 60:
            raise ValueError("session_ttl_seconds must be at least 60 (agents.json)")
        for name in ("max_sessions", "requests_per_minute", "deal_ttl_seconds"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")


def build_manifest(*, site_name: str, site_url: str, description: str | None, capabilities: Iterable[Capability],
                   settings: AgentsSettings, public_key: str | None) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "site": {"name": site_name, "url": site_url},
        "capabilities": [c.published() for c in capabilities],
        "session": {"create": SESSION_PATH, "delete": SESSION_PATH, "ttl_seconds": settings.session_ttl_seconds},
        "rate_limit": {"requests_per_minute": settings.requests_per_minute, "max_sessions": settings.max_sessions},
        "audit": {"enabled": settings.audit_enabled, "endpoint": AUDIT_PATH},
    }
    if description:
        manifest["site"]["description"] = description
    if settings.audit_enabled and public_key:
        manifest["audit"]["public_key"] = public_key
    return manifest
