"""Agent sessions and the per-client request limit, both kept in the database so that every
worker of a store sees the same sessions and counts the same requests.

Tokens are 43 characters of ``secrets.token_urlsafe(32)`` (256 random bits) and are stored
only as their SHA-256: a database leak does not hand out live sessions. A session's TTL is a
hard deadline from its creation; activity never extends it.
"""

from __future__ import annotations

import math
import secrets
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from sqlalchemy import Connection, bindparam, delete, func, insert, select, update

from haggler.errors import InvalidInput, RateLimited, Unauthorized, limit_words
from haggler.storage.counters import count_one
from haggler.storage.database import Database, lock_key
from haggler.storage.prepared import Prepared
from haggler.storage.schema import agent_sessions, rate_windows
from haggler.trust.hashing import secret_hash

__all__ = ["AgentSession", "RateLimiter", "SessionService", "end_session", "is_active"]

AGENT_FIELDS = {"agent_name": 200, "agent_version": 100, "purpose": 1000}


def is_active(ended_at: datetime | None, expires_at: datetime, now: datetime) -> bool:
    """The one rule for a live session: nobody ended it and its hard deadline has not come."""
    return ended_at is None and now < expires_at


@dataclass(frozen=True, slots=True)
class AgentSession:
    id: str
    client: str
    agent_name: str | None
    agent_version: str | None
    purpose: str | None
    created_at: datetime
    expires_at: datetime
    ended_at: datetime | None
    end_reason: str | None

    def active(self, now: datetime) -> bool:
        return is_active(self.ended_at, self.expires_at, now)


@dataclass(frozen=True, slots=True)
class CreatedSession:
    session: AgentSession
    #: The bearer token: shown to the agent once, never stored.
    token: str


# Only a session nobody has ended yet: with two sweepers (or a sweep racing a DELETE)
# exactly one UPDATE matches, and only its transaction goes on to sign the trail.
# Compiled once, run on the driver (``storage/prepared.py``): every checkout ends its session.
_END_SESSION = Prepared(
    update(agent_sessions)
    .where(agent_sessions.c.id == bindparam("session_id"), agent_sessions.c.ended_at.is_(None))
    .values(ended_at=bindparam("ended_at"), end_reason=bindparam("end_reason"))
)


#: Every authenticated call reads its session by token, and every session's creation counts the
#: client's active sessions and inserts its own: compiled once, run on the driver
#: (``storage/prepared.py``).
_SELECT_BY_TOKEN = Prepared(select(agent_sessions).where(agent_sessions.c.token_hash == bindparam("token_hash")))
_ACTIVE_OF_CLIENT = Prepared(
    select(func.count(), func.min(agent_sessions.c.expires_at))
    .where(agent_sessions.c.client == bindparam("client"), agent_sessions.c.ended_at.is_(None),
           agent_sessions.c.expires_at > bindparam("now")))
_INSERT_SESSION = Prepared(insert(agent_sessions))


def end_session(conn: Connection, session_id: str, reason: str, at: datetime) -> bool:
    """Mark a session ended inside the caller's transaction; False when it already was."""
    return _END_SESSION.run(conn, {"session_id": session_id, "ended_at": at, "end_reason": reason}) == 1


def _row_to_session(row) -> AgentSession:  # type: ignore[no-untyped-def]
    return AgentSession(row.id, row.client, row.agent_name, row.agent_version, row.purpose, row.created_at,
                        row.expires_at, row.ended_at, row.end_reason)


class SessionService:
    """Creates and authenticates sessions. The limits come from :class:`AgentsSettings`,
    which validates them (ttl of at least 60 seconds, at least one session)."""

    def __init__(self, db: Database, clock: Callable[[], datetime], *, ttl_seconds: int, max_sessions: int) -> None:
        self.db = db
        self.clock = clock
        self.ttl = timedelta(seconds=ttl_seconds)
        self.max_sessions = max_sessions

    def create(self, client: str, body: dict[str, Any]) -> CreatedSession:
        """Open a session for ``client``; refuses (429) past ``max_sessions`` active ones."""
        agent = _agent_fields(body)
        token = secrets.token_urlsafe(32)
        session_id = "ses_" + secrets.token_urlsafe(12)
        now = self.clock()
        with self.db.write() as conn:
            lock_key(conn, f"agent-session:{client}")
            counted = _ACTIVE_OF_CLIENT.first(conn, {"client": client, "now": now})
            assert counted is not None  # an aggregate gives one row
            active, soonest = counted
            if active >= self.max_sessions:
                wait = math.ceil((soonest - now).total_seconds()) if soonest else 60
                raise RateLimited(f"too many active sessions ({active} of {self.max_sessions}); end one with "
                                  "DELETE or wait for one to expire (" + limit_words(
                                      f"{self.max_sessions} active agents.json sessions per client address",
                                      "--max-sessions") + ")", wait)
            _INSERT_SESSION.run(conn, dict(id=session_id, token_hash=secret_hash(token), client=client, created_at=now,
                                           expires_at=now + self.ttl, ended_at=None, end_reason=None, **agent))
        return CreatedSession(AgentSession(session_id, client, agent["agent_name"], agent["agent_version"],
                                           agent["purpose"], now, now + self.ttl, None, None), token)

    def authenticate(self, token: str | None, conn: Connection | None = None) -> AgentSession:
        """The active session a token belongs to; Unauthorized otherwise. Read in ``conn``, the
        caller's transaction (a capability call reads it in the call's own), or in a read
        transaction of its own."""
        if not token:
            raise Unauthorized("this capability needs a session: create one and send its token in the "
                               "X-Agent-Session header")
        with self.db.read() if conn is None else nullcontext(conn) as reading:
            row = _SELECT_BY_TOKEN.row(reading, {"token_hash": secret_hash(token)})
        if row is None:
            raise Unauthorized("unknown session token")
        session = _row_to_session(row)
        if session.ended_at is not None:
            raise Unauthorized("this session has ended")
        if not session.active(self.clock()):
            raise Unauthorized("this session has expired")
        return session


def _agent_fields(body: dict[str, Any]) -> dict[str, str | None]:
    unknown = sorted(set(body) - set(AGENT_FIELDS))
    if unknown:
        raise InvalidInput(f"unknown parameter {unknown[0]!r} (parameters: {', '.join(AGENT_FIELDS)})")
    out: dict[str, str | None] = {}
    for name, limit in AGENT_FIELDS.items():
        value = body.get(name)
        if value is not None and not isinstance(value, str):
            raise InvalidInput(f"parameter {name!r} must be a string")
        if value is not None and len(value) > limit:
            raise InvalidInput(f"parameter {name!r} is too long (at most {limit} characters)")
        out[name] = value
    return out


class RateLimiter:
    """At most ``requests_per_minute`` requests per client in each clock minute, counted in
    the database with one atomic upsert per request (fixed windows: simple, and exact across
    workers). ``requests_per_minute`` comes from :class:`AgentsSettings`, which validates it."""

    WINDOW = timedelta(minutes=1)

    def __init__(self, db: Database, clock: Callable[[], datetime], requests_per_minute: int) -> None:
        self.db = db
        self.clock = clock
        self.limit = requests_per_minute

    def hit(self, client: str) -> None:
        """Count one request; RateLimited (with the seconds until the window turns) past the limit."""
        now = self.clock()
        start = now.replace(second=0, microsecond=0)
        with self.db.write() as conn:
            count = count_one(conn, client, start)
        if count > self.limit:
            wait = math.ceil((start + self.WINDOW - now).total_seconds())
            raise RateLimited("too many requests: " + limit_words(
                f"{self.limit} agents.json requests per minute per client address", "--requests-per-minute"), wait)

    def prune(self, before: datetime) -> int:
        with self.db.write() as conn:
            return conn.execute(delete(rate_windows).where(rate_windows.c.window_start < before)).rowcount

