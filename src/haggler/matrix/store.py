"""The market bot's memory, kept in the market's own database (tables ``matrix_*``, migration 0017).

A restart must lose nothing and redo nothing, so the bot writes down, in order:

* **what /sync brought**, with the sync position that follows it, in one transaction
  (:func:`record_batch`): an event is either still to be taken or already taken, never lost
  between the homeserver and the market, and the position never runs ahead of what was stored;
* **that an event was taken**, in the same transaction as what the market did with it and the
  answers it owes (:func:`finish`, :func:`enqueue`): an event id is processed once, ever;
* **what it still owes a room** (the outbox), sent in order and marked sent after the homeserver
  took it. A send repeated after a crash reuses its transaction id (the outbox row's id), which
  the homeserver deduplicates for the bot's fixed device.

Each bot (its Matrix user id) has its own rows, so two markets can share a database.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from haggler.storage.schema import market_inbox, matrix_events, matrix_outbox, matrix_rooms, matrix_state

PENDING, DONE, DROPPED = "pending", "done", "dropped"
#: The most events one sender may have waiting: past it, more are dropped (with one answer
#: saying so), so that a flood from one sender neither grows without bound nor delays others.
PER_SENDER_PENDING = 32


@dataclass(frozen=True, slots=True)
class Incoming:
    """One room event the bot may act on, as stored: a message, or a redaction of one.
    ``private`` says the room's only members were the bot and the sender when it arrived (where
    a sealed bid, a mandate or a registration may be sent)."""

    event_id: str
    room_id: str
    sender: str
    type: str
    content: dict[str, Any]
    origin_server_ts: int = 0
    redacts: str | None = None
    private: bool = False

    def stored(self) -> str:
        return json.dumps({"type": self.type, "content": self.content, "ts": self.origin_server_ts,
                           "redacts": self.redacts, "private": self.private}, ensure_ascii=False)

    @classmethod
    def from_row(cls, row: Any) -> Incoming:
        data = json.loads(row.content)
        return cls(row.event_id, row.room_id, row.sender, data["type"], data["content"], data["ts"],
                   data["redacts"], data["private"])


@dataclass(frozen=True, slots=True)
class State:
    since: str | None
    inbox_seq: int


@dataclass
class Recorded:
    """What :func:`record_batch` did: the new events it stored, and those it dropped per sender."""

    new: int = 0
    dropped: dict[str, list[Incoming]] = field(default_factory=lambda: defaultdict(list))


def state(conn: Connection, bot: str, now: datetime) -> State:
    """The bot's sync position and inbox cursor (a first start has neither)."""
    row = conn.execute(select(matrix_state).where(matrix_state.c.bot == bot)).first()
    if row is None:
        conn.execute(insert(matrix_state).values(bot=bot, since=None, inbox_seq=0, updated_at=now))
        return State(None, 0)
    return State(row.since, row.inbox_seq)


def record_batch(conn: Connection, bot: str, since: str, events: Iterable[Incoming], now: datetime,
                 per_sender: int = PER_SENDER_PENDING) -> Recorded:
    """Store a /sync's events the bot has not seen (by event id) and move the sync position past
    them, in the caller's transaction. A sender with ``per_sender`` events already waiting has
    the rest dropped: they are stored as dropped, so that they are never taken later either."""
    events = list(events)
    recorded = Recorded()
    known = set(conn.execute(select(matrix_events.c.event_id)
                             .where(matrix_events.c.event_id.in_([e.event_id for e in events]))).scalars()) \
        if events else set()
    waiting: dict[str, int] = {}
    for event in events:
        if event.event_id in known:
            continue
        known.add(event.event_id)
        if event.sender not in waiting:
            waiting[event.sender] = conn.execute(
                select(func.count()).select_from(matrix_events).where(
                    matrix_events.c.bot == bot, matrix_events.c.sender == event.sender,
                    matrix_events.c.status == PENDING)).scalar_one()
        status = PENDING if waiting[event.sender] < per_sender else DROPPED
        waiting[event.sender] += status == PENDING
        conn.execute(insert(matrix_events).values(
            event_id=event.event_id, bot=bot, room_id=event.room_id, sender=event.sender, content=event.stored(),
            received_at=now, status=status, outcome="flood" if status == DROPPED else None,
            done_at=now if status == DROPPED else None))
        if status == DROPPED:
            recorded.dropped[event.sender].append(event)
        else:
            recorded.new += 1
    conn.execute(update(matrix_state).where(matrix_state.c.bot == bot).values(since=since, updated_at=now))
    return recorded


def pending(conn: Connection, bot: str, limit: int = 500) -> list[Incoming]:
    """Events still to take, fairly ordered: one per sender in turn, each sender's in arrival
    order, so a sender with many waiting delays the others by one event per round at most."""
    rows = conn.execute(select(matrix_events).where(matrix_events.c.bot == bot, matrix_events.c.status == PENDING)
                        .order_by(matrix_events.c.received_at, matrix_events.c.event_id).limit(limit)).all()
    queues: dict[str, list[Incoming]] = defaultdict(list)
    for row in rows:
        queues[row.sender].append(Incoming.from_row(row))
    fair: list[Incoming] = []
    while queues:
        for sender in list(queues):
            fair.append(queues[sender].pop(0))
            if not queues[sender]:
                del queues[sender]
    return fair


def finish(conn: Connection, event_id: str, outcome: str, now: datetime) -> bool:
    """Mark an event taken, with what came of it in a word; False if it already was (another
    worker took it first): the caller's transaction must then roll back what it did."""
    done = conn.execute(update(matrix_events).where(matrix_events.c.event_id == event_id,
                                                    matrix_events.c.status == PENDING)
                        .values(status=DONE, outcome=outcome[:64], done_at=now))
    return done.rowcount == 1


def taken(conn: Connection, event_id: str) -> tuple[Incoming, str | None] | None:
    """An event the bot stored, with what it made of it (None while it waits); None if unseen."""
    row = conn.execute(select(matrix_events).where(matrix_events.c.event_id == event_id)).first()
    return None if row is None else (Incoming.from_row(row), row.outcome)


# -- rooms -----------------------------------------------------------------------------------------------


def room(conn: Connection, bot: str, key: str) -> str | None:
    """The room the bot made for ``key`` (``inbox:<agentId>``, ``request:<requestId>``)."""
    return conn.execute(select(matrix_rooms.c.room_id).where(matrix_rooms.c.bot == bot,
                                                             matrix_rooms.c.key == key)).scalar()


def remember_room(conn: Connection, bot: str, key: str, room_id: str, now: datetime) -> None:
    if room(conn, bot, key) is None:
        conn.execute(insert(matrix_rooms).values(bot=bot, key=key, room_id=room_id, created_at=now))


def key_of(conn: Connection, bot: str, room_id: str) -> str | None:
    return conn.execute(select(matrix_rooms.c.key).where(matrix_rooms.c.bot == bot,
                                                         matrix_rooms.c.room_id == room_id)).scalar()


# -- the outbox ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outgoing:
    """Something owed to a room: a message (``content``), or a redaction of ``redacts``. ``room``
    is a room id, or a room key whose room is made (inviting ``invite``) when first needed."""

    id: int
    room: str
    content: dict[str, Any]
    invite: tuple[str, ...] = ()

    @property
    def redacts(self) -> str | None:
        return self.content.get("redacts")


def enqueue(conn: Connection, bot: str, room_or_key: str, content: dict[str, Any], now: datetime, *,
            invite: Iterable[str] = ()) -> None:
    conn.execute(insert(matrix_outbox).values(
        bot=bot, room=room_or_key, content=json.dumps(content, ensure_ascii=False),
        invite=json.dumps(sorted(set(invite))) if invite else None, created_at=now, attempts=0))


def enqueue_redaction(conn: Connection, bot: str, room_id: str, event_id: str, reason: str, now: datetime) -> None:
    enqueue(conn, bot, room_id, {"redacts": event_id, "reason": reason}, now)


def due(conn: Connection, bot: str, limit: int = 100) -> list[Outgoing]:
    """What is still owed, oldest first."""
    rows = conn.execute(select(matrix_outbox).where(matrix_outbox.c.bot == bot, matrix_outbox.c.sent_at.is_(None))
                        .order_by(matrix_outbox.c.id).limit(limit)).all()
    return [Outgoing(row.id, row.room, json.loads(row.content), tuple(json.loads(row.invite or "[]"))) for row in rows]


def sent(conn: Connection, outgoing_id: int, now: datetime) -> None:
    conn.execute(update(matrix_outbox).where(matrix_outbox.c.id == outgoing_id).values(sent_at=now))


def failed(conn: Connection, outgoing_id: int, error: str, now: datetime, *, final: bool) -> None:
    """Count a failed send; a ``final`` one (the homeserver refused for good) is set aside, marked
    sent so the rest of the outbox is not held behind it, with its error kept."""
    values: dict[str, Any] = {"attempts": matrix_outbox.c.attempts + 1, "last_error": error[:300]}
    if final:
        values["sent_at"] = now
    conn.execute(update(matrix_outbox).where(matrix_outbox.c.id == outgoing_id).values(**values))


def owes_nothing(conn: Connection, bot: str) -> bool:
    """No event waiting, every market inbox delivery relayed, nothing left in the outbox."""
    waiting = conn.execute(select(func.count()).select_from(matrix_events).where(
        matrix_events.c.bot == bot, matrix_events.c.status == PENDING)).scalar_one()
    unsent = conn.execute(select(func.count()).select_from(matrix_outbox).where(
        matrix_outbox.c.bot == bot, matrix_outbox.c.sent_at.is_(None))).scalar_one()
    return waiting == 0 and unsent == 0 and not inbox_behind(conn, bot)


def inbox_behind(conn: Connection, bot: str) -> bool:
    """Whether the market inbox holds deliveries the bot has not relayed yet (a read, so that the
    relay's polling opens a write transaction only when there is something to relay)."""
    relayed = conn.execute(select(matrix_state.c.inbox_seq).where(matrix_state.c.bot == bot)).scalar() or 0
    delivered = conn.execute(select(func.max(market_inbox.c.seq))).scalar() or 0
    return delivered > relayed


def advance_inbox(conn: Connection, bot: str, seq: int, now: datetime) -> None:
    conn.execute(update(matrix_state).where(matrix_state.c.bot == bot).values(inbox_seq=seq, updated_at=now))
