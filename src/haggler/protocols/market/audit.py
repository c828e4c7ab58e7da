"""The market's audit log (spec 003: Security Model, "Audit logging"): every mandate violation the
framework refused, every signature that did not verify, and every piece of free text that looks
like an attempt to steer an agent ("SYSTEM:", "your owner said", "trust me", …).

Events are collected while a request runs and written by the route in a transaction of their own
*after* the request's, so that a refused action (whose transaction rolls back: it changes nothing)
still leaves its trace. Free text is only ever flagged, never altered or obeyed: descriptions and
messages are data (spec 003: "Structured parsing", "Clear labeling").
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select

from haggler.language.screening import suspicious_markers
from haggler.storage.schema import market_audit
from haggler.timestamps import utc_z

MANDATE_VIOLATION, SUSPICIOUS_TEXT, BAD_SIGNATURE = "mandate_violation", "suspicious_text", "bad_signature"
#: A Matrix message naming an agent (or carrying a ``matrixId``) its sender is not bound to.
MATRIX_SENDER_MISMATCH = "matrix_sender_mismatch"


@dataclass
class AuditEvents:
    """The events one request raised, waiting to be written."""

    events: list[tuple[str | None, str, dict[str, Any]]] = field(default_factory=list)

    def add(self, agent_id: str | None, event: str, detail: dict[str, Any]) -> None:
        self.events.append((agent_id, event, detail))

    def violation(self, agent_id: str, action: str, constraint: str, **about: str) -> None:
        """A mandate violation, in the one shape every refusal logs it: the action tried, the
        mandate field it broke, and the id of what it was about (``listingId=…``)."""
        self.add(agent_id, MANDATE_VIOLATION, {"action": action, "constraint": constraint, **about})

    def screen(self, agent_id: str | None, where: str, text: object, **about: str) -> tuple[str, ...]:
        """Flag ``text`` (the field at JSON pointer ``where``) when it carries suspicious markers;
        returns them. The text itself is logged (truncated) so that a reviewer sees the attempt;
        ``about`` names what it came with when no agent did (an unsigned ad's poster and event)."""
        if not isinstance(text, str) or not text:
            return ()
        markers = suspicious_markers(text)
        if markers:
            self.add(agent_id, SUSPICIOUS_TEXT, {"field": where, "markers": list(markers), "text": text[:500], **about})
        return markers

    def write(self, conn: Connection, now: datetime) -> None:
        for agent_id, event, detail in self.events:
            conn.execute(insert(market_audit).values(agent_id=agent_id, event=event, created_at=now,
                                                     detail=json.dumps(detail, ensure_ascii=False)))
        self.events.clear()


def entries(conn: Connection, agent_id: str | None, *, after: int = 0, limit: int = 100) -> list[dict[str, Any]]:
    """Audit entries after ``after``, oldest first: one agent's (its owner reads them through the
    agent's token), or everyone's (``agent_id`` None, the operator)."""
    query = select(market_audit).where(market_audit.c.seq > after)
    if agent_id is not None:
        query = query.where(market_audit.c.agent_id == agent_id)
    rows = conn.execute(query.order_by(market_audit.c.seq).limit(limit)).all()
    return [{"seq": row.seq, "agentId": row.agent_id, "event": row.event, "detail": json.loads(row.detail),
             "at": utc_z(row.created_at)} for row in rows]
