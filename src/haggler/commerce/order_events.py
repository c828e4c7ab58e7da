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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, NamedTuple, Protocol

from sqlalchemy import Connection, and_, delete, insert, select, update

from haggler.storage.database import Database
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
#: The most events one sweep sends (the rest wait for the next).
SWEEP_BATCH = 50


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


def record(conn: Connection, door: str, order_id: str, kind: str, base: str | None, at: datetime, *,
           sent_after_answer: bool = True) -> str:
    """Record, in the caller's transaction, that ``door`` owes the event ``kind`` of ``order_id``;
    its id. ``sent_after_answer``: the request sends it once its answer is out (:meth:`OrderEvents.send`),
    so the sweep leaves it alone for :data:`HOLD`; otherwise it is due for the sweep at once."""
    found = event_id(door, order_id, kind)
    conn.execute(insert(order_events).values(id=found, door=door, order_id=order_id, kind=kind, base=base,
                                             created_at=at, next_at=at + HOLD if sent_after_answer else at,
                                             attempts=0))
    return found


def owed(conn: Connection, door: str, order_id: str, kind: str) -> bool:
    """Whether ``door``'s event ``kind`` of ``order_id`` was recorded already (sent or not)."""
    return conn.execute(select(order_events.c.id).where(order_events.c.id == event_id(door, order_id, kind))
                        ).first() is not None


@dataclass
class OrderEvents:
    """The events of the doors it serves (``doors``, by name), sent as the module's docstring says;
    ``default_base``: the links' base for events recorded without one (None: they wait for
    none and are given up, logged)."""

    db: Database
    clock: Callable[[], datetime]
    doors: Mapping[str, Door]
    default_base: str | None = None

    def send(self, event: str) -> bool:
        """Send ``event`` now, before it is due (its recorder just made it), unless a sender has held
        it already (this one is then a repeat: the sweep takes it from here); whether it was taken."""
        with self.db.read() as conn:
            row = conn.execute(select(order_events).where(order_events.c.id == event)).first()
        if row is None or row.door not in self.doors or not self._hold(row, order_events.c.held_by.is_(None)):
            return False
        return self._attempt(row)

    def _hold(self, row: Any, free: Any) -> bool:
        """Take ``row`` for one sender, on the condition ``free`` (never held, or due and held by
        nobody since it was read), unsent and not given up: its ``next_at`` moved past the attempt
        under a new token, which any other sender's condition then fails on."""
        with self.db.write() as conn:
            return bool(conn.execute(update(order_events).where(
                order_events.c.id == row.id, free, order_events.c.sent_at.is_(None),
                order_events.c.gave_up_at.is_(None)).values(next_at=self.clock() + HOLD,
                                                            held_by=secrets.token_hex(16))).rowcount)

    def after(self, event: str | None) -> Callable[[], bool] | None:
        """The work an answer leaves to do: send ``event`` once the answer is out (None: nothing)."""
        return None if event is None else (lambda: self.send(event))

    def deliver_due(self) -> int:
        """Send the events due now (up to :data:`SWEEP_BATCH`), each held first so that no other
        sender takes it; forget old finished ones. How many were taken."""
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
        def due_and_unchanged(row: Any) -> Any:
            same = order_events.c.held_by.is_(None) if row.held_by is None else order_events.c.held_by == row.held_by
            return and_(order_events.c.next_at <= now, same)
        return sum(self._attempt(row) for row in rows if self._hold(row, due_and_unchanged(row)))

    def _attempt(self, row: Any) -> bool:
        event = Event(row.id, row.door, row.order_id, row.kind, row.base, row.created_at)
        door = self.doors[event.door]
        try:
            outgoing = door.outgoing(event, event.base or self.default_base)
        except Exception as exc:  # a bug in one door must not stop the sweep's other events
            log.exception("order event %s (%s %s of %s) could not be made", event.id, event.door, event.kind,
                          event.order_id)
            return self._finish(event, row.attempts, gave_up=True, error=f"could not be made: {type(exc).__name__}")
        if outgoing is None:
            return self._finish(event, row.attempts, gave_up=True, error="nobody to send it to")
        what = f"{event.door} {event.kind} of order {event.order_id} ({event.id})"
        if door.delivery.post(outgoing.url, outgoing.body, outgoing.sign, what):
            return self._finish(event, row.attempts + 1, gave_up=False, error=None)
        return self._later(event, row.attempts + 1)

    def _finish(self, event: Event, attempts: int, *, gave_up: bool, error: str | None) -> bool:
        now = self.clock()
        with self.db.write() as conn:
            conn.execute(update(order_events).where(order_events.c.id == event.id).values(
                sent_at=None if gave_up else now, gave_up_at=now if gave_up else None, last_error=error,
                attempts=attempts))
        return not gave_up

    def _later(self, event: Event, attempts: int) -> bool:
        now = self.clock()
        if now - event.created_at >= GIVE_UP_AFTER:
            log.warning("order event %s (%s %s of order %s) given up: not taken in %d attempts over %s",
                        event.id, event.door, event.kind, event.order_id, attempts, GIVE_UP_AFTER)
            return self._finish(event, attempts, gave_up=True, error=f"not taken in {attempts} attempts")
        pause = min(FIRST_RETRY * 2 ** (attempts - 1), LONGEST_PAUSE)
        with self.db.write() as conn:
            conn.execute(update(order_events).where(order_events.c.id == event.id).values(
                next_at=now + pause, attempts=attempts, last_error="not taken"))
        return False


__all__ = ["Door", "Event", "Sender", "FIRST_RETRY", "GIVE_UP_AFTER", "HOLD", "MAIL", "OrderEvents", "Outgoing",
           "PLACED", "event_id",
           "owed", "record"]
