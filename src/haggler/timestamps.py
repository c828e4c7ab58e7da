"""Timestamps on the wire: RFC 3339 in UTC with a ``Z``, the form the specs' examples use."""

from __future__ import annotations

from datetime import datetime, timezone


def utc_z(moment: datetime) -> str:
    """``moment`` (timezone-aware) in UTC as RFC 3339 with a trailing ``Z``."""
    return moment.astimezone(timezone.utc).isoformat().replace("+00:00", "Z")


def parse_rfc3339(text: str) -> datetime:
    """``text`` as a datetime (aware when it carries a zone); ValueError when it is not one.
    RFC 3339 allows a lower-case ``z`` for UTC, which :meth:`datetime.fromisoformat` does not
    read: the one place that knows it, for every reader of a market timestamp."""
    return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("z") else text)
