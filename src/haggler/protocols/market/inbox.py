"""Each agent's inbox (``GET /market/inbox?after=CURSOR``): direct messages from other agents and
the market's notifications, in the order they were delivered, resumable from any cursor.

The cursor is the delivery's sequence number, one increasing sequence for the whole market, so
an agent that read up to cursor ``c`` asks for ``after=c`` and misses nothing and sees nothing
twice, whatever was delivered to others in between.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select

from haggler.storage.prepared import Prepared
from haggler.storage.schema import market_inbox
from haggler.timestamps import utc_z

#: What a delivery is: a message another agent sent (``message``) or a market notice.
MESSAGE, NOTIFICATION = "message", "notification"
MAX_PAGE = 500
#: Every message and notice goes through here, several a negotiation turn: compiled once
#: (``storage/prepared.py``); ``seq`` is left to the database.
_DELIVER = Prepared(insert(market_inbox).values({name: bindparam(name) for name in ("agent_id", "kind", "body",
                                                                                     "created_at")}))


def deliver(conn: Connection, agent_id: str, kind: str, body: dict[str, Any], now: datetime) -> None:
    _DELIVER.run(conn, {"agent_id": agent_id, "kind": kind, "created_at": now,
                        "body": json.dumps(body, ensure_ascii=False, separators=(",", ":"))})


def notify(conn: Connection, agent_ids: tuple[str, ...] | list[str], event: str, now: datetime, **facts: Any) -> None:
    """One market notice ``{"event", ...facts}`` to each of ``agent_ids``."""
    for agent_id in agent_ids:
        deliver(conn, agent_id, NOTIFICATION, {"event": event, **facts}, now)


def read(conn: Connection, agent_id: str, after: int, limit: int) -> dict[str, Any]:
    """The page after ``after``: ``{"messages": [{cursor, kind, at, body}], "cursor"}``, where
    ``cursor`` is what to pass as ``after`` next (unchanged when nothing is new)."""
    rows = conn.execute(select(market_inbox).where(market_inbox.c.agent_id == agent_id, market_inbox.c.seq > after)
                        .order_by(market_inbox.c.seq).limit(limit)).all()
    messages = [{"cursor": row.seq, "kind": row.kind, "at": utc_z(row.created_at), "body": json.loads(row.body)}
                for row in rows]
    return {"messages": messages, "cursor": messages[-1]["cursor"] if messages else after}
