"""Idempotency keys for the agentic checkout protocols: the first answer to a key is kept, with a
fingerprint of the request, and given again when the same request comes back with that key.

Protocol-neutral: each protocol says whose keys are kept apart (``owner``: at most 40 characters,
its prefix first, so that its sweep touches only its own), what the request is (``what``: method and
path), and how it words a refusal (``refusal``: a domain error as its status and body). Which status
and error code a reused or in-flight key gets is the protocol's too: this module raises
:class:`KeyReused` and :class:`KeyInFlight`.

Which answers are kept is the same for both protocols. A request that was answered, success or
refusal, is done: its answer is kept and given again for its key, so that a retry of a declined
payment is told "declined" again rather than charged again (UCP's REST binding: "store the key with
the operation result", "return the cached result for duplicate keys"; ACP §6.3: "the original
response with the same HTTP status code"). Not kept, so that the same request sent again runs
again: a 5xx (ACP §6.5 MUST NOT cache it; the outcome is not known, as with a processor that did not
answer), an unexpected failure, and a refusal that asks to retry in a moment (:data:`RETRY_LATER`:
a session being completed by another request, a rate limit), which would otherwise be answered
for a day to a client told to come back in a second.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from haggler.errors import HagglerError, InFlight, InvalidInput, RateLimited, Unprocessable
from haggler.storage.database import Database
from haggler.storage.schema import idempotency_keys
from haggler.storage.secrets import store_secret

#: The longest key kept (the column's width, and both protocols' limit).
LONGEST_KEY = 255
#: A first request still "in flight" after this long died with its worker (a checkout's completion
#: is done well within it): a retry with its key takes the key over instead of waiting forever.
STALE_AFTER = timedelta(minutes=5)
#: Refusals that ask the caller to try again in a moment (they carry ``Retry-After``): never kept.
RETRY_LATER: tuple[type[HagglerError], ...] = (InFlight, RateLimited)


class Kept(NamedTuple):
    """An answer as kept against a key: its status and JSON body; ``replayed`` when it was
    kept from an earlier request rather than just made. ``after``: work due once the answer is
    sent (an order webhook), never kept, so that a replay does it no second time."""

    status: int
    body: dict[str, Any]
    replayed: bool = False
    after: Callable[[], object] | None = None


class KeyReused(Unprocessable):
    """The key was used before for a different request."""


class KeyInFlight(InFlight):
    """The first request with the key is still being processed."""


def _canonical(value: Any) -> Any:
    """A JSON value with integral floats as integers (``1.0`` and ``1`` are the same request)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical(v) for v in value]
    return value


#: The store secret that keys request fingerprints (see :meth:`IdempotencyKeys.fingerprint`).
FINGERPRINT_SECRET = "checkout_request_fingerprints"


class IdempotencyKeys:
    def __init__(self, db: Database, clock: Callable[[], datetime], prefix: str, ttl: timedelta) -> None:
        """``prefix``: the owners' common start (``acp:``); ``ttl``: how long an answer is kept."""
        self.db = db
        self.clock = clock
        self.prefix = prefix
        self.ttl = ttl
        self._secret: bytes | None = None

    def fingerprint(self, what: str, body: Any) -> str:
        """The request's fingerprint: ``what`` and its body, whatever the body's spacing or key order.
        An HMAC under a store secret, not a bare hash: the body may carry a payment credential, and
        the fingerprint is stored for days, where a hash of a card could be reversed by trying every
        code."""
        if self._secret is None:  # drawn in its own transaction, before the key's
            self._secret = store_secret(self.db, FINGERPRINT_SECRET)
        canonical = json.dumps(_canonical(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hmac.new(self._secret, (what + "\n" + canonical).encode(), hashlib.sha256).hexdigest()

    def owner(self, *scope: str) -> str:
        """The owner for a scope (an identity, an endpoint): the prefix and a digest of the scope."""
        return self.prefix + hashlib.sha256("\n".join(scope).encode()).hexdigest()[:32]

    def run(self, owner: str, key: str, what: str, body: Any, run: Callable[[], Kept],
            refusal: Callable[[HagglerError], Kept]) -> Kept:
        """The answer kept for ``key``, or ``run``'s, kept; a domain error ``run`` raises is kept as
        ``refusal`` words it, unless it is not final (see the module's docstring: then it is raised
        and the key forgotten). Raises KeyReused when the key was used for another request,
        KeyInFlight while its first request is still running."""
        if not key.strip() or len(key) > LONGEST_KEY:
            raise InvalidInput(f"the idempotency key must be 1 to {LONGEST_KEY} characters")
        digest = self.fingerprint(what, body)
        where = (idempotency_keys.c.agent_id == owner) & (idempotency_keys.c.key == key)
        try:
            with self.db.write() as conn:
                row = conn.execute(select(idempotency_keys).where(where)).first()
                now = self.clock()
                if row is not None and (row.created_at + self.ttl <= now or (
                        row.status_code is None and row.created_at + STALE_AFTER <= now)):
                    conn.execute(delete(idempotency_keys).where(where))  # expired or abandoned: a new request
                    row = None
                if row is not None:
                    if row.request_hash != digest:
                        raise KeyReused("this idempotency key was already used with a different request")
                    if row.status_code is None:
                        raise KeyInFlight("the first request with this idempotency key is still being processed")
                    return Kept(row.status_code, json.loads(row.body), replayed=True)
                conn.execute(insert(idempotency_keys).values(agent_id=owner, key=key, request_hash=digest,
                                                             created_at=now))
        except IntegrityError:
            raise KeyInFlight("the first request with this idempotency key is still being processed") from None
        try:
            try:
                answer = run()
            except HagglerError as exc:
                answer = refusal(exc)
                if isinstance(exc, RETRY_LATER) or answer.status >= 500:
                    raise
        except BaseException:
            with self.db.write() as conn:
                conn.execute(delete(idempotency_keys).where(where))
            raise
        with self.db.write() as conn:
            conn.execute(update(idempotency_keys).where(where).values(status_code=answer.status,
                                                                     body=json.dumps(answer.body)))
        return answer

    def sweep(self) -> int:
        """Forget this prefix's keys older than the ttl, answered or abandoned (the store's background
        sweep); how many."""
        with self.db.write() as conn:
            return conn.execute(delete(idempotency_keys).where(
                idempotency_keys.c.agent_id.startswith(self.prefix, autoescape=True),
                idempotency_keys.c.created_at < self.clock() - self.ttl)).rowcount


__all__ = ["FINGERPRINT_SECRET", "IdempotencyKeys", "Kept", "KeyInFlight", "KeyReused", "LONGEST_KEY", "RETRY_LATER",
           "STALE_AFTER"]
