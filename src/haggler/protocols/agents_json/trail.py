"""The store side of the audit trail: events recorded per call, artifacts signed at session end.

Every capability call appends one event to its session's hash chain inside the
call's own write transaction, so an effect and its audit record commit
together or not at all.  When the session ends (DELETE, checkout completion,
or expiry) ``finalize`` signs the stored chain once and keeps the artifact;
the artifact never changes afterwards, which is what makes it evidence.

Concurrency: appends to one session are serialised by locking the session row
(``SELECT ... FOR UPDATE`` on PostgreSQL; SQLite's write transactions are
exclusive already), and the (session_id, seq) primary key would reject a
duplicate seq even if a caller forgot the lock.  The same row lock orders
appends against finalization, so no event can land after the chain is signed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, and_, bindparam, delete, insert, select

from haggler.errors import Closed, NotFound, TooEarly
from haggler.storage.database import Database
from haggler.storage.prepared import Prepared
from haggler.storage.schema import agent_sessions, audit_artifacts, audit_events
from haggler.trust.chain import event_hash
from haggler.trust.keys import SigningKeys

from .audit import build_artifact, hash_token, make_event, utc_timestamp
from .sessions import end_session, is_active

#: The issue's retention promise: artifacts are kept at least this long after signing.
MIN_RETENTION = timedelta(days=30)
# Sessions ended per sweep transaction: long enough to amortise a commit, short
# enough that SQLite's single writer is not held up for long.
_SWEEP_BATCH = 100

_SELECT_SESSION = select(
    agent_sessions.c.id, agent_sessions.c.token_hash, agent_sessions.c.agent_name,
    agent_sessions.c.agent_version, agent_sessions.c.purpose, agent_sessions.c.created_at,
    agent_sessions.c.expires_at, agent_sessions.c.ended_at,
).where(agent_sessions.c.id == bindparam("session_id"))
# SQLite renders no FOR UPDATE: its write transactions are exclusive already. This and the
# next two run on every audited call: compiled once, run on the driver (``storage/prepared.py``).
_SELECT_SESSION_FOR_UPDATE = Prepared(_SELECT_SESSION.with_for_update())
_SELECT_LAST_EVENT = Prepared(
    select(audit_events.c.seq, audit_events.c.hash)
    .where(audit_events.c.session_id == bindparam("session_id"))
    .order_by(audit_events.c.seq.desc()).limit(1)
)
_INSERT_EVENT = Prepared(insert(audit_events))
# A session's end (its checkout, mostly) signs its trail: these too are compiled once.
_SELECT_EVENTS = Prepared(
    select(audit_events.c.event)
    .where(audit_events.c.session_id == bindparam("session_id")).order_by(audit_events.c.seq)
)
_SELECT_ARTIFACT = Prepared(select(audit_artifacts.c.artifact)
                            .where(audit_artifacts.c.session_id == bindparam("session_id")))
_INSERT_ARTIFACT = Prepared(insert(audit_artifacts))


class AuditTrail:
    """Records events, signs artifacts, serves them, expires and prunes them for one store."""

    def __init__(
        self, db: Database, keys: SigningKeys, site: dict[str, Any] | str, clock: Callable[[], datetime]
    ) -> None:
        self.db = db
        self.keys = keys
        self.site = site
        self.clock = clock

    # --- recording ------------------------------------------------------------

    def record(
        self,
        session_id: str,
        *,
        capability: str,
        method: str,
        params: Mapping[str, Any],
        policy_result: str | dict[str, Any],
        response_status: int,
    ) -> dict[str, Any]:
        """Append one call to the session's chain; return the event.

        The event is written in the caller's write transaction when one is open in this context
        (``Database.write()`` joins it), so a call's effect and its event commit together; in
        a transaction of its own otherwise. Params are redacted before they are stored. Raises
        NotFound for an unknown session and Closed for one that has ended or expired, since an
        event added then would be missing from (or contradict) the signed artifact.
        """
        now = self.clock()
        with self.db.write() as conn:
            session = self._lock_session(conn, session_id)
            if not is_active(session.ended_at, session.expires_at, now):
                raise Closed(f"session {session_id} has ended; its audit trail takes no more events")
            last = _SELECT_LAST_EVENT.row(conn, {"session_id": session_id})
            event = {
                **make_event(capability, method, params, policy_result, response_status, timestamp=utc_timestamp(now)),
                "prev_hash": last.hash if last else "",
            }
            _INSERT_EVENT.run(conn, {
                "session_id": session_id,
                "seq": last.seq + 1 if last else 1,
                "event": json.dumps(event, ensure_ascii=False),
                "hash": event_hash(event),
            })
        return event

    # --- signing ----------------------------------------------------------------

    def finalize(
        self,
        conn: Connection,
        session_id: str,
        *,
        ended_at: datetime,
        end_reason: str,
        session_token: str | None = None,
    ) -> dict[str, Any]:
        """End the session (if it is still open) and sign and store its artifact; return the artifact.

        Idempotent: once an artifact exists it is returned unchanged, because a
        published artifact that later changed would be worthless as evidence.
        A session already ended keeps its recorded ``ended_at`` and reason, so
        the artifact agrees with the session row.  ``session_token``, when the
        caller still holds it, is replaced by its hash wherever it occurs.
        """
        session = self._lock_session(conn, session_id)
        stored = _SELECT_ARTIFACT.row(conn, {"session_id": session_id})
        if stored is not None:
            return json.loads(stored.artifact)
        if session_token is not None and hash_token(session_token) != _token_hash(session):
            raise ValueError(f"the token given is not session {session_id}'s token")
        if session.ended_at is None:
            end_session(conn, session_id, end_reason, ended_at)
        else:
            ended_at = session.ended_at
        events = [json.loads(row.event) for row in _SELECT_EVENTS.rows(conn, {"session_id": session_id})]
        artifact = build_artifact(
            session_id=session_id,
            site=self.site,
            created_at=utc_timestamp(session.created_at),
            ended_at=utc_timestamp(ended_at),
            agent={
                "name": session.agent_name,
                "version": session.agent_version,
                "purpose": session.purpose,
                # The token is never stored, its hash is: the agent can recognise its session.
                "session_token_hash": _token_hash(session),
            },
            raw_events=events,
            signer=self.keys,
            session_token=session_token,
        )
        _INSERT_ARTIFACT.run(conn, {
            "session_id": session_id,
            "artifact": json.dumps(artifact, ensure_ascii=False),
            "created_at": self.clock(),
        })
        return artifact

    # --- serving ----------------------------------------------------------------

    def artifact(self, session_id: str) -> dict[str, Any]:
        """The signed artifact of an ended session.

        Raises NotFound for an unknown session (or one whose artifact was
        pruned) and TooEarly while the session is active.  A session past its
        deadline that the sweep has not reached yet is ended and signed now, so
        a reader never waits on the sweep's schedule.
        """
        with self.db.read() as conn:
            stored = _SELECT_ARTIFACT.row(conn, {"session_id": session_id})
            session = conn.execute(_SELECT_SESSION, {"session_id": session_id}).first()
        if stored is not None:
            return json.loads(stored.artifact)
        if session is None:
            raise NotFound(f"unknown session {session_id}")
        if session.ended_at is not None:
            # finalize ends and signs in one transaction, so an ended session without
            # an artifact has had it pruned (or ended while audit was off).
            raise NotFound(f"no audit artifact is kept for session {session_id}")
        if is_active(session.ended_at, session.expires_at, self.clock()):
            raise TooEarly(f"session {session_id} is still active; its audit artifact exists once it ends")
        with self.db.write() as conn:
            return self.finalize(conn, session_id, ended_at=session.expires_at, end_reason="expired")

    # --- housekeeping -------------------------------------------------------------

    def finalize_expired(self, now: datetime) -> int:
        """End and sign every session past its deadline that nobody ended; return how many this call did.

        Safe to run from several workers at once: each session is ended by a
        conditional UPDATE, and only the transaction whose UPDATE matched signs
        it.  Candidates are taken in id order so concurrent sweeps lock rows in
        the same order and cannot deadlock.
        """
        expired = (
            select(agent_sessions.c.id, agent_sessions.c.expires_at)
            .where(and_(agent_sessions.c.ended_at.is_(None), agent_sessions.c.expires_at <= now))
            .order_by(agent_sessions.c.id).limit(_SWEEP_BATCH)
        )
        count = 0
        while True:
            with self.db.write() as conn:
                batch = conn.execute(expired).all()
                for session_id, expires_at in batch:
                    if end_session(conn, session_id, "expired", expires_at):
                        self.finalize(conn, session_id, ended_at=expires_at, end_reason="expired")
                        count += 1
            # Every candidate is now ended by us or by a committed rival, so a batch
            # shorter than the limit means none are left.
            if len(batch) < _SWEEP_BATCH:
                return count

    def prune(self, now: datetime, keep: timedelta = MIN_RETENTION) -> int:
        """Delete artifacts signed more than ``keep`` before ``now``, with their events; return how many.

        ``keep`` below 30 days is refused: the store promises to keep artifacts
        at least that long, and a misconfigured retention must not break it silently.
        """
        if keep < MIN_RETENTION:
            raise ValueError(f"audit artifacts are kept at least {MIN_RETENTION.days} days; keep={keep} is shorter")
        old = select(audit_artifacts.c.session_id).where(audit_artifacts.c.created_at < now - keep)
        with self.db.write() as conn:
            conn.execute(delete(audit_events).where(audit_events.c.session_id.in_(old)))
            return conn.execute(delete(audit_artifacts).where(audit_artifacts.c.session_id.in_(old))).rowcount

    # --- helpers ------------------------------------------------------------------

    def _lock_session(self, conn: Connection, session_id: str) -> Any:
        """The session's row (a named row, see ``storage/prepared.py``), locked for the caller's transaction."""
        session = _SELECT_SESSION_FOR_UPDATE.row(conn, {"session_id": session_id})
        if session is None:
            raise NotFound(f"unknown session {session_id}")
        return session


def _token_hash(session: Any) -> str:
    """The stored SHA-256 hex of the token, in the ``sha256:<hex>`` form ``hash_token`` gives."""
    return "sha256:" + session.token_hash


__all__ = ["MIN_RETENTION", "AuditTrail"]
