"""``Idempotency-Key`` for every POST: a retried request is answered, not executed twice.

The first request with a key inserts an in-flight record (in a transaction of its own, so a
racing twin sees it at once); its response is stored in the same database transaction as its
effect, so "done" and "recorded" cannot disagree after a crash. Then:

* the same key with the same request replays the stored response (``Idempotent-Replayed: true``);
* the same key with a different request (method, path or body) is 422;
* the same key while the first request is still running is 409 with ``Retry-After``;
* a request that failed unexpectedly (a 500) forgets its key, so the client may retry it;
* a key is remembered for 24 hours (the sweep prunes older ones); an in-flight record older than
  five minutes is taken over by a retry, and the overtaken request, should it wake, rolls back.

Keys are scoped per agent (an anonymous registration has a scope of its own). The database keeps
only a hash of the key, and the stored response is encrypted with a key derived from it: the
response to a registration holds an API key, which must not sit in the database readable.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Callable

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from haggler.errors import Conflict, InFlight, InvalidInput, Unprocessable
from haggler.storage.database import Database
from haggler.storage.schema import idempotency_keys
from haggler.trust.hashing import secret_hash

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
#: An in-flight record older than this belongs to a request that died with its worker: taken over.
STALE_AFTER = timedelta(minutes=5)
#: How long a key is remembered; older records are pruned by the sweep.
KEEP_FOR = timedelta(hours=24)


class Overtaken(Conflict):
    """A retry took this request's stale key over; this request must not commit."""


@dataclass(frozen=True, slots=True)
class Stored:
    status: int
    body: Any


@dataclass(frozen=True, slots=True)
class Claim:
    """The right to execute a request under a key; ``finish`` stores its response."""

    scope: str
    key_hash: str
    secret: bytes
    #: When this request claimed the key: a takeover changes it, so the overtaken request can
    #: neither store its response nor forget the key its successor now holds.
    claimed_at: datetime

    def seal(self, body: Any) -> str:
        nonce = os.urandom(12)
        sealed = AESGCM(self.secret).encrypt(nonce, json.dumps(body).encode("utf-8"), None)
        return base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, text: str) -> Any:
        raw = base64.b64decode(text)
        return json.loads(AESGCM(self.secret).decrypt(raw[:12], raw[12:], None))


def request_hash(method: str, path: str, body: bytes) -> str:
    """The fingerprint a reused key is compared by: method, path and the body's JSON value
    (so key order and whitespace do not matter), or its bytes when it is not JSON."""
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True, separators=(",", ":")).encode("utf-8") if body else b""
    except ValueError:
        canonical = body
    return hashlib.sha256(method.encode() + b"\0" + path.encode() + b"\0" + canonical).hexdigest()


class Idempotency:
    def __init__(self, db: Database, clock: Callable[[], datetime]) -> None:
        self.db = db
        self.clock = clock

    def begin(self, scope: str, key: str, fingerprint: str, *,
              replay_for: timedelta | None = None) -> tuple[Claim, Stored | None]:
        """Claim ``key`` for this request, or return the stored response of the first one.
        Raises Unprocessable for a different request, InFlight while the first one runs, and
        Conflict when the first response is older than ``replay_for`` (if given)."""
        if not 1 <= len(key) <= MAX_KEY_LENGTH or not key.isprintable():
            raise InvalidInput(f"{HEADER} must be 1 to {MAX_KEY_LENGTH} printable characters")
        material = f"{scope}\0{key}"
        now = self.clock()
        claim = Claim(scope, secret_hash(material),
                      hashlib.sha256(b"haggler idempotent response\0" + material.encode("utf-8")).digest(), now)
        new_row = {"agent_id": scope, "key": claim.key_hash, "request_hash": fingerprint, "created_at": now}
        try:
            with self.db.write() as conn:
                conn.execute(insert(idempotency_keys).values(**new_row))
            return claim, None
        except IntegrityError:
            pass
        with self.db.write() as conn:
            row = conn.execute(select(idempotency_keys).where(*self._match(claim)).with_for_update()).first()
            if row is None:  # the first request failed and forgot the key in between: ours now
                conn.execute(insert(idempotency_keys).values(**new_row))
                return claim, None
            if row.request_hash != fingerprint:
                raise Unprocessable(f"this {HEADER} was already used for a different request")
            if row.status_code is not None:
                if replay_for is not None and now - row.created_at > replay_for:
                    raise Conflict(f"this {HEADER} was used more than {replay_for.seconds // 60} minutes ago "
                                   "and is not replayed any more; send the request with a new key")
                return claim, Stored(row.status_code, claim.open(row.body))
            if now - row.created_at < STALE_AFTER:
                raise InFlight(f"a request with this {HEADER} is still being processed; retry shortly")
            conn.execute(update(idempotency_keys).where(*self._match(claim)).values(created_at=now))
            return claim, None

    def finish(self, conn: Connection, claim: Claim, status: int, body: Any) -> None:
        """Store the response, in the caller's transaction (with the request's effect). Raises
        Overtaken — rolling the effect back — when a retry has taken the key over meanwhile."""
        stored = conn.execute(update(idempotency_keys).where(*self._mine(claim))
                              .values(status_code=status, body=claim.seal(body))).rowcount
        if stored != 1:
            raise Overtaken(f"a retry with this {HEADER} took over while this request was stalled")

    def finish_now(self, claim: Claim, status: int, body: Any) -> None:
        try:
            with self.db.write() as conn:
                self.finish(conn, claim, status, body)
        except Overtaken:
            pass  # the retry that took over answers for the key

    def forget(self, claim: Claim) -> None:
        with self.db.write() as conn:
            conn.execute(delete(idempotency_keys).where(*self._mine(claim)))

    def prune(self, now: datetime) -> int:
        """Forget keys older than KEEP_FOR; returns how many."""
        with self.db.write() as conn:
            return conn.execute(delete(idempotency_keys).where(idempotency_keys.c.created_at < now - KEEP_FOR)).rowcount

    @classmethod
    def _mine(cls, claim: Claim) -> tuple[Any, ...]:
        """This claim's record, still in flight and not taken over."""
        return (*cls._match(claim), idempotency_keys.c.created_at == claim.claimed_at,
                idempotency_keys.c.status_code.is_(None))

    @staticmethod
    def _match(claim: Claim) -> tuple[Any, ...]:
        return idempotency_keys.c.agent_id == claim.scope, idempotency_keys.c.key == claim.key_hash
