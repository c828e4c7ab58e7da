"""Match negotiation (``/api``) as its operator sees it: opportunities, counted by status and listed.

The evaluator's score is shown: the operator's view, like the operator API's, includes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, select
from sqlalchemy.orm import aliased

from haggler.storage.schema import match_users, opportunities
from haggler.web.admin.paging import EVERYTHING, Page, Window

#: An opportunity's statuses (spec 002), in the order of its life.
STATUSES = ("negotiating", "pending", "accepted", "declined", "rejected", "stalled")


@dataclass(frozen=True, slots=True)
class OpportunityRow:
    id: str
    source: str
    candidate: str
    score: int
    status: str
    negotiation_id: str
    created_at: datetime
    updated_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "source": self.source, "candidate": self.candidate, "score": self.score,
                "status": self.status, "negotiation_id": self.negotiation_id,
                "created_at": self.created_at.isoformat(), "updated_at": self.updated_at.isoformat()}


def opportunities_by_status(conn: Connection) -> dict[str, int]:
    """Every status, 0 when none is in it (a status the code adds later is counted too)."""
    counts = dict.fromkeys(STATUSES, 0)
    for status, n in conn.execute(select(opportunities.c.status, func.count()).group_by(opportunities.c.status)):
        counts[status] = n
    return counts


_SOURCE = aliased(match_users, name="source")
_CANDIDATE = aliased(match_users, name="candidate")


def opportunities_page(conn: Connection, window: Window = EVERYTHING) -> Page[OpportunityRow]:
    """Opportunities, the most recently changed first, with both people's names."""
    o = opportunities.c
    query = (select(o.id, _SOURCE.c.name, _CANDIDATE.c.name, o.score, o.status, o.negotiation_id, o.created_at,
                    o.updated_at)
             .join(_SOURCE, _SOURCE.c.id == o.source_user_id).join(_CANDIDATE, _CANDIDATE.c.id == o.candidate_user_id)
             .order_by(o.updated_at.desc(), o.id).offset(window.offset or None).limit(window.limit))
    rows = [OpportunityRow(*row) for row in conn.execute(query)]
    return Page(rows, conn.execute(select(func.count()).select_from(opportunities)).scalar_one(), window)
