"""The order events a checkout protocol owes its platform, kept in the database until the
platform's webhook receiver takes them.

UCP (order.md) and ACP (rfc.agentic_checkout.md §2.3) each require the business to tell the
platform about its orders. An event sent only from memory after the answer is lost when the
process stops first, or when the receiver is down for longer than a few quick retries; and an order
placed outside a request (``haggler checkout settle``, another process) would never be announced.
So an event is a row (``order_events``), written in the transaction that places or changes the
order (:func:`record`), and sent:

* at once, after the answer that placed the order (:meth:`OrderEvents.send`);
* and then by the store's sweep (:meth:`OrderEvents.deliver_due`, the leader only) while it is
  due: after :data:`FIRST_RETRY`, doubling up to :data:`LONGEST_PAUSE`, until the receiver takes
  it or :data:`GIVE_UP_AFTER` has passed since the order (then it is logged and left, marked).

What is sent is made when it is sent, by the door's :class:`Door` (its wire shape, its receiver, its
signature): the row holds which order and what happened to it, not a body, so the event carries the
order as it stands (both protocols send the full order). A sender holds a row by moving its
``next_at`` past the attempt (:data:`HOLD`) under a token of its own (``held_by``), so two workers
never send the same event at once;
one send may still repeat after a crash between the receiver's answer and the row's update, which
is why each event keeps one id for every attempt (receivers tell a repeat by it).
"""

from __future__ import annotations

import hashlib
import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

from sqlalchemy import Connection, and_, bindparam, delete, insert, select, update

from haggler.commerce.webhooks import Undeliverable
from haggler.storage.database import Database
from haggler.storage.prepared import Prepared
from haggler.storage.schema import order_events

log = logging.getLogger("haggler")

#: An order placed (UCP's ``order_placed``, ACP's ``order_create``, the buyer's confirmation mail).
PLACED = "placed"
#: The door of the buyer's confirmation mail (``haggler/order_mail.py``), owed by every order with an
#: address to send it to, whatever door the order came through.
MAIL = "mail"
#: How long a sender holds an event it is sending (longer than any attempt with its quick retries).
HOLD = timedelta(minutes=2)
#: The pause before the sweep's first retry, doubling after each up to :data:`LONGEST_PAUSE`.
FIRST_RETRY = timedelta(seconds=30)
LONGEST_PAUSE = timedelta(hours=1)
#: An event not taken this long after its order is given up (and logged): the platform has long
#: stopped waiting for it.
GIVE_UP_AFTER = timedelta(hours=24)
#: Sent and given-up events are kept this long for the operator to look at, then forgotten.
KEPT_FOR = timedelta(days=7)
#: The most events one sweep sends, and the longest it spends sending (the rest wait for the next).
SWEEP_BATCH = 50
SWEEP_SECONDS = 20.0


class Event(NamedTuple):
    """A recorded event: its id (the same on every attempt), the order, what happened, the base
    URL of the checkout it came through (None: the store's default) and when it was recorded."""

    id: str
    door: str
    order_id: str
    kind: str
    base: str | None
    created_at: datetime


class Outgoing(NamedTuple):
    """An event as its door sends it: where, the body, the headers made for one attempt."""

    url: str
    body: bytes
    sign: Callable[[bytes], Mapping[str, str]]


class Sender(Protocol):
    def post(self, url: str, body: bytes, sign: Callable[[bytes], Mapping[str, str]], what: str) -> bool:
        """Send ``body`` to ``url`` (with quick retries of its own); whether it was taken."""
        ...


class Door(Protocol):
    """A side of the order events: a protocol's webhooks, or the buyer's confirmation mail."""

    delivery: Sender

    def outgoing(self, event: Event, base: str | None) -> Outgoing | None:
        """The event as it is sent, links made from ``base`` (None: the store knows none); None
        when nobody is to receive it (the checkout named no webhook, the store has no receiver,
        the order has no buyer's address), or it needs links and has no base."""
        ...


def event_id(door: str, order_id: str, kind: str) -> str:
    """An event's id, one per door, order and kind (so recorded once), giving away nothing but itself."""
    return "evt_" + hashlib.sha256(f"{door}\n{order_id}\n{kind}".encode()).hexdigest()[:24]


#: Run by every order placed with a buyer's email (its confirmation mail) and every webhook owed:
#: compiled once and run on the driver (``storage/prepared.py``), the same columns as ever.
_RECORD = Prepared(insert(order_events).values(
    id=bindparam("id"), door=bindparam("door"), order_id=bindparam("order_id"), kind=bindparam("kind"),
    base=bindparam("base"), created_at=bindparam("created_at"), next_at=bindparam("next_at"),
    attempts=bindparam("attempts")))


def record(conn: Connection, door: str, order_id: str, kind: str, base: str | None, at: datetime, *,
           sent_after_answer: bool = True) -> str:
    """Record, in the caller's transaction, that ``door`` owes the event ``kind`` of ``order_id``;
    its id. ``sent_after_answer``: the request sends it once its answer is out (:meth:`OrderEvents.send`),
    so the sweep leaves it alone for :data:`HOLD`; otherwise it is due for the sweep at once."""
    found = event_id(door, order_id, kind)
    _RECORD.run(conn, {"id": found, "door": door, "order_id": order_id, "kind": kind, "base": base,
                       "created_at": at, "next_at": at + HOLD if sent_after_answer else at, "attempts": 0})
    return found


def owed(conn: Connection, door: str, order_id: str, kind: str) -> bool:
    """Whether ``door``'s event ``kind`` of ``order_id`` was recorded already (sent or not)."""
    return conn.execute(select(order_events.c.id).where(order_events.c.id == event_id(door, order_id, kind))
                        ).first() is not None


@dataclass
class OrderEvents:
    """The events of the doors it serves (``doors``, by name), sent as the module's docstring says;
    ``default_base``: the links' base for events recorded without one (a session made before bases
    were kept). One that needs links and has no base is left to a sender that knows one (the
    store's sweep, given ``--public-url``), then given up."""

    db: Database
    clock: Callable[[], datetime]
    doors: Mapping[str, Door]
    default_base: str | None = None

    def send(self, event: str) -> bool:
        """Send ``event`` now, before it is due (its recorder just made it), unless a sender has held
        it already (this one is then a repeat: the sweep takes it from here); whether it was taken."""
        with self.db.read() as conn:
            row = conn.execute(select(order_events).where(order_events.c.id == event)).first()
        if row is None or row.door not in self.doors:
            return False
        token = self._hold(row, order_events.c.held_by.is_(None))
        return token is not None and self._attempt(row, token, last_chance=False)

    def after(self, event: str | None) -> Callable[[], bool] | None:
        """The work an answer leaves to do: send ``event`` once the answer is out (None: nothing)."""
        return None if event is None else (lambda: self.send(event))

    def after_placed(self, door: str, order_id: str | None) -> Callable[[], bool] | None:
        """:meth:`after` for ``door``'s event of an order placed (None without an order): the answer
        that placed it, or found it placed, sends it; one recorded and sent already is not sent again."""
        return self.after(event_id(door, order_id, PLACED) if order_id is not None else None)

    def deliver_due(self) -> int:
        """Send the events due now, at most :data:`SWEEP_BATCH` and for at most :data:`SWEEP_SECONDS`
        (receivers that do not answer must not hold up the store's other sweeps), each held first so
        that no other sender takes it; forget old finished ones. How many were taken."""
        now = self.clock()
        due = and_(order_events.c.sent_at.is_(None), order_events.c.gave_up_at.is_(None),
                   order_events.c.next_at <= now, order_events.c.door.in_(list(self.doors)))
        with self.db.write() as conn:
            conn.execute(delete(order_events).where(
                order_events.c.created_at < now - KEPT_FOR,
                (order_events.c.sent_at.is_not(None)) | (order_events.c.gave_up_at.is_not(None))))
            # Those of a door the store no longer serves (its key or receiver taken away) are let go.
            conn.execute(update(order_events).where(
                order_events.c.sent_at.is_(None), order_events.c.gave_up_at.is_(None),
                order_events.c.created_at < now - GIVE_UP_AFTER).values(gave_up_at=now, last_error="not sent in time"))
            rows = conn.execute(select(order_events).where(due).order_by(order_events.c.next_at)
                                .limit(SWEEP_BATCH)).all()
        taken, until = 0, time.monotonic() + SWEEP_SECONDS
        for row in rows:
            if time.monotonic() >= until:
                break
            same = order_events.c.held_by.is_(None) if row.held_by is None else order_events.c.held_by == row.held_by
            token = self._hold(row, and_(order_events.c.next_at <= now, same))
            if token is not None:
                taken += self._attempt(row, token, last_chance=True)
        return taken

    def _hold(self, row: Any, free: Any) -> str | None:
        """Take ``row`` for one sender, on the condition ``free`` (never held, or due and held by
        nobody since it was read), unsent and not given up: its ``next_at`` moved past the attempt
        under a new token, which any other sender's condition then fails on. The token (None: taken)."""
        token = secrets.token_hex(16)
        with self.db.write() as conn:
            held = conn.execute(update(order_events).where(
                order_events.c.id == row.id, free, order_events.c.sent_at.is_(None),
                order_events.c.gave_up_at.is_(None)).values(next_at=self.clock() + HOLD, held_by=token)).rowcount
        return token if held else None

    def _attempt(self, row: Any, token: str, *, last_chance: bool) -> bool:
        """One attempt (with the sender's quick retries) under the hold ``token``. ``last_chance``:
        whether an event that needs a base and has none is given up (the sweep) or left to the sweep."""
        event = Event(row.id, row.door, row.order_id, row.kind, row.base, row.created_at)
        done = _Done(self, event, token)
        door = self.doors[event.door]
        base = event.base or self.default_base
        what = f"{event.door} {event.kind} of order {event.order_id} ({event.id})"
        try:
            outgoing = door.outgoing(event, base)
            if outgoing is None:
                return False if base is None and not last_chance else done.give_up(row.attempts, "nobody to send it to")
            if door.delivery.post(outgoing.url, outgoing.body, outgoing.sign, what):
                return done.sent(row.attempts + 1)
        except Undeliverable as exc:
            log.warning("order event %s given up: %s", what, exc)
            return done.give_up(row.attempts + 1, str(exc)[:300])
        except Exception as exc:  # a bug in one door must not stop the sweep's other events
            log.exception("order event %s could not be sent", what)
            return done.give_up(row.attempts, f"could not be sent: {type(exc).__name__}")
        return done.later(row.attempts + 1)


@dataclass
class _Done:
    """How an attempt ends, written only while its sender still holds the event (its ``token``):
    one whose hold ran out and was taken over leaves the row to the sender that took it."""

    events: OrderEvents
    event: Event
    token: str

    def sent(self, attempts: int) -> bool:
        self._write(attempts=attempts, sent_at=self.events.clock(), last_error=None)
        return True

    def give_up(self, attempts: int, error: str) -> bool:
        self._write(attempts=attempts, gave_up_at=self.events.clock(), last_error=error)
        return False

    def later(self, attempts: int) -> bool:
        now, event = self.events.clock(), self.event
        if now - event.created_at >= GIVE_UP_AFTER:
            log.warning("order event %s (%s %s of order %s) given up: not taken in %d attempts over %s",
                        event.id, event.door, event.kind, event.order_id, attempts, GIVE_UP_AFTER)
            return self.give_up(attempts, f"not taken in {attempts} attempts")
        pause = min(FIRST_RETRY * 2 ** (attempts - 1), LONGEST_PAUSE)
        self._write(attempts=attempts, next_at=now + pause, last_error="not taken")
        return False

    def _write(self, **values: Any) -> None:
        with self.events.db.write() as conn:
            conn.execute(update(order_events).where(order_events.c.id == self.event.id,
                                                    order_events.c.held_by == self.token).values(**values))


__all__ = ["Door", "Event", "FIRST_RETRY", "GIVE_UP_AFTER", "HOLD", "MAIL", "OrderEvents", "Outgoing", "PLACED",
           "Sender", "event_id", "owed", "record"]
