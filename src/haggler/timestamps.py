"""Timestamps on the wire: RFC 3339 in UTC with a ``Z``, the form the specs' examples use."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_z(moment: datetime) -> str:
    """``moment`` (timezone-aware) in UTC as RFC 3339 with a trailing ``Z``."""
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")
