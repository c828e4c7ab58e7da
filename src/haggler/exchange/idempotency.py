"""``Idempotency-Key`` for every POST: a retried request is answered, not executed twice.

The first request with a key inserts an in-flight record (in a transaction of its own, so a
racing twin sees it at once); its response is stored in the same database transaction as its
effect, so "done" and "recorded" cannot disagree after a crash. Then:

* the same key with the same request replays the stored response (``Idempotent-Replayed: true``);
* the same key with a different request (method, path or body) is 422;
* the same key while the first request is still running is 409 with ``Retry-After``;
* a request that failed unexpectedly (a 500) forgets its key, so the client may retry it.

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

from haggler.errors import InFlight, InvalidInput, Unprocessable
from haggler.storage.database import Database
from haggler.storage.schema import idempotency_keys

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 255
#: An in-flight record older than this belongs to a request that died with its worker: taken over.
STALE_AFTER = timedelta(minutes=5)


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

    def begin(self, scope: str, key: str, fingerprint: str) -> tuple[Claim, Stored | None]:
        """Claim ``key`` for this request, or return the stored response of the first one.
        Raises Unprocessable for a different request, InFlight while the first one runs."""
        if not 1 <= len(key) <= MAX_KEY_LENGTH or not key.isprintable():
            raise InvalidInput(f"{HEADER} must be 1 to {MAX_KEY_LENGTH} printable characters")
        material = f"{scope}\0{key}".encode("utf-8")
        claim = Claim(scope, hashlib.sha256(material).hexdigest(),
                      hashlib.sha256(b"haggler idempotent response\0" + material).digest())
        now = self.clock()
        try:
            with self.db.write() as conn:
                conn.execute(insert(idempotency_keys).values(agent_id=scope, key=claim.key_hash,
                                                             request_hash=fingerprint, created_at=now))
            return claim, None
        except IntegrityError:
            pass
        with self.db.write() as conn:
            row = conn.execute(select(idempotency_keys).where(*self._match(claim)).with_for_update()).first()
            if row is None:  # the first request failed and forgot the key in between: ours now
                conn.execute(insert(idempotency_keys).values(agent_id=scope, key=claim.key_hash,
                                                             request_hash=fingerprint, created_at=now))
                return claim, None
            if row.request_hash != fingerprint:
                raise Unprocessable(f"this {HEADER} was already used for a different request")
            if row.status_code is not None:
                return claim, Stored(row.status_code, claim.open(row.body))
            if now - row.created_at < STALE_AFTER:
                raise InFlight(f"a request with this {HEADER} is still being processed; retry shortly")
            conn.execute(update(idempotency_keys).where(*self._match(claim)).values(created_at=now))
            return claim, None

    def finish(self, conn: Connection, claim: Claim, status: int, body: Any) -> None:
        """Store the response, in the caller's transaction (with the request's effect)."""
        conn.execute(update(idempotency_keys).where(*self._match(claim))
                     .values(status_code=status, body=claim.seal(body)))

    def finish_now(self, claim: Claim, status: int, body: Any) -> None:
        with self.db.write() as conn:
            self.finish(conn, claim, status, body)

    def forget(self, claim: Claim) -> None:
        with self.db.write() as conn:
            conn.execute(delete(idempotency_keys).where(*self._match(claim), idempotency_keys.c.status_code.is_(None)))

    @staticmethod
    def _match(claim: Claim) -> tuple[Any, ...]:
        return idempotency_keys.c.agent_id == claim.scope, idempotency_keys.c.key == claim.key_hash
