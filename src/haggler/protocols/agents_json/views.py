"""The store's ``/.well-known/agents.json``: built from the same capability declarations the
API enforces, plus the session, rate-limit and audit settings the store runs with."""

from __future__ import annotations

from typing import Any, Iterable

from haggler.protocols.agents_json.capabilities import AUDIT_PATH, SESSION_PATH, Capability
from haggler.protocols.agents_json.settings import AgentsSettings

__all__ = ["SCHEMA_VERSION", "build_manifest"]

SCHEMA_VERSION = "0.1.0"


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
