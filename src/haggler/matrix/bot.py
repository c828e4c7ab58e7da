"""The market bot: the market as a participant of a Matrix homeserver (``haggler market matrix``).

Four loops share one connection (``matrix/connection.py``) and the market's database:

* **sync** long-polls the homeserver, joins the rooms it is invited to (an agent's direct
  message), and stores each batch's new events with the next sync position in one transaction
  (``matrix/store.py``): after a restart it resumes from that position and, events being keyed
  by id, never takes one twice;
* **work** takes the stored events, one sender in turn (a flood from one sender waits behind
  everyone else's next event, and past :data:`~haggler.matrix.store.PER_SENDER_PENDING` waiting
  is dropped with one answer), through the door (``matrix/door.py``);
* **relay** turns the market's inbox deliveries into room messages (``matrix/relay.py``);
* **send** empties the outbox in order, making the rooms it names when first needed.

The homeserver going away, or rate-limiting the bot, is the connection's to ride out (it backs
off and retries, honouring ``retry_after_ms``); meanwhile events and answers wait in the
database. Database work runs in worker threads, off the event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from datetime import datetime

from haggler.matrix import relay, store, wire
from haggler.matrix.connection import Connection, MatrixError, RoomEvent, SyncBatch
from haggler.matrix.door import MarketDoor
from haggler.matrix.store import Incoming
from haggler.protocols.market.routes import Market
from haggler.protocols.market.settings import MarketSettings
from haggler.server.config import utc_now
from haggler.server.limits import ClientLimits, Limits
from haggler.storage.database import Database

log = logging.getLogger("haggler.matrix")

#: Seconds between looks at the market's inbox for deliveries made through the other door.
RELAY_INTERVAL = 0.5
#: How long one /sync waits on the homeserver for something new.
SYNC_TIMEOUT_MS = 10_000
#: The events one /sync may bring per room: enough that a busy room's burst is not cut short.
TIMELINE_LIMIT = 500


def market_on(db: Database, settings: MarketSettings | None = None,
              clock: Callable[[], datetime] = utc_now) -> Market:
    """The market as the bot serves it: the HTTP API's own service on the same database. Its
    per-address limits never apply (the door has no address); per-agent contact limits do,
    counted by Matrix user."""
    limits = Limits(db, clock, ClientLimits(), client_of=lambda request: "matrix", is_local=lambda request: False,
                    limit_loopback=False)
    return Market(db, clock, limits, settings)


class MarketBot:
    """Runs the market over one Matrix account, in ``room`` (an alias or a room id)."""

    def __init__(self, connection: Connection, market: Market, room: str, *, create_room: bool = False,
                 relay_interval: float = RELAY_INTERVAL, per_sender: int = store.PER_SENDER_PENDING) -> None:
        self.connection = connection
        self.market = market
        self.room = room
        self.create_room = create_room
        self.relay_interval = relay_interval
        self.per_sender = per_sender
        self.market_room: str | None = None
        self._members: dict[str, frozenset[str]] = {}
        self._work = asyncio.Event()
        self._send = asyncio.Event()
        #: Set when the bot is told to stop. The loops check it besides being cancelled: Python
        #: 3.11's ``asyncio.wait_for`` can swallow a cancellation that lands as its call completes
        #: (gh-86296), and a loop that missed it would run on.
        self._stopping = asyncio.Event()
        self.ready = asyncio.Event()

    @property
    def user_id(self) -> str:
        return self.connection.user_id

    def _now(self) -> datetime:
        return self.market.clock()

    async def run(self, stop: asyncio.Event) -> None:
        """Serve until ``stop`` is set."""
        await self.connection.open()
        self.market_room = await (self.connection.ensure_room(self.room) if self.create_room
                                  else self.connection.join(self.room))
        door = MarketDoor(self.market, self.user_id, self.market_room)
        log.info("market bot %s serving %s (%s)", self.user_id, self.room, self.market_room)
        self._work.set()
        self._send.set()
        self.ready.set()
        self._stopping = stop
        loops = [asyncio.create_task(loop) for loop in
                 (self._sync_loop(), self._work_loop(door), self._relay_loop(), self._send_loop())]
        stopped = asyncio.create_task(stop.wait())
        try:
            done, _ = await asyncio.wait([stopped, *loops], return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                if task is not stopped and not stop.is_set():
                    task.result()  # a loop that ended on its own failed: say why
        finally:
            for task in (stopped, *loops):
                task.cancel()
            await asyncio.gather(stopped, *loops, return_exceptions=True)
            await self.connection.close()

    # -- sync --------------------------------------------------------------------------------------------

    async def _sync_loop(self) -> None:
        since = await asyncio.to_thread(self._read_since)
        while not self._stopping.is_set():
            batch = await self.connection.sync(since, SYNC_TIMEOUT_MS)
            for room_id in batch.invites:
                try:
                    await self.connection.accept_invite(room_id)
                except MatrixError as exc:
                    log.warning("could not join %s: %s", room_id, exc)
            incoming = await self._incoming(batch)
            recorded = await asyncio.to_thread(self._record, batch.next_batch, incoming)
            since = batch.next_batch
            if recorded.new or recorded.dropped:
                self._work.set()
            if recorded.dropped:
                await asyncio.to_thread(self._tell_flooded, recorded.dropped)
                self._send.set()

    def _read_since(self) -> str | None:
        with self.market.db.write() as conn:
            return store.state(conn, self.user_id, self._now()).since

    def _record(self, since: str, events: list[Incoming]) -> store.Recorded:
        with self.market.db.write() as conn:
            store.state(conn, self.user_id, self._now())
            return store.record_batch(conn, self.user_id, since, events, self._now(), self.per_sender)

    async def _incoming(self, batch: SyncBatch) -> list[Incoming]:
        """The batch's events the market may act on, each marked private or not as its room's
        membership stood (membership changes in the batch are read afresh)."""
        for event in batch.events:
            if event.type == "m.room.member":
                self._members.pop(event.room_id, None)
        out: list[Incoming] = []
        for event in batch.events:
            if event.sender == self.user_id or event.type not in ("m.room.message", "m.room.redaction"):
                continue
            out.append(Incoming(event.event_id, event.room_id, event.sender, event.type, dict(event.content),
                                event.origin_server_ts, event.redacts, await self._private(event)))
        return out

    async def _private(self, event: RoomEvent) -> bool:
        if event.room_id == self.market_room:
            return False
        members = self._members.get(event.room_id)
        if members is None:
            try:
                members = frozenset(await self.connection.members(event.room_id))
            except MatrixError:
                members = frozenset()
            self._members[event.room_id] = members
        return members == {self.user_id, event.sender}

    def _tell_flooded(self, dropped: dict[str, list[Incoming]]) -> None:
        with self.market.db.write() as conn:
            for sender, events in dropped.items():
                first = events[0]
                store.enqueue(conn, self.user_id, first.room_id, wire.answer_content(
                    429, {"error": "too many of your messages are waiting",
                          "reason": f"{len(events)} dropped, unread: at most {self.per_sender} of one sender's "
                                    "messages wait; send them again once the market has answered"},
                    f"refused 429: {len(events)} of your messages were dropped unread (too many waiting)",
                    about={"event_id": first.event_id, "content": first.content}), self._now())

    # -- work --------------------------------------------------------------------------------------------

    async def _work_loop(self, door: MarketDoor) -> None:
        while not self._stopping.is_set():
            await self._work.wait()
            self._work.clear()
            while True:
                events = await asyncio.to_thread(self._pending)
                if not events:
                    break
                for event in events:
                    try:
                        await asyncio.to_thread(door.take, event)
                    except Exception:  # noqa: BLE001 - one event's failure must not stop the market
                        log.exception("event %s from %s failed; it is set aside", event.event_id, event.sender)
                        await asyncio.to_thread(self._set_aside, event)
                    self._send.set()

    def _pending(self) -> list[Incoming]:
        with self.market.db.read() as conn:
            return store.pending(conn, self.user_id)

    def _set_aside(self, event: Incoming) -> None:
        with self.market.db.write() as conn:
            store.finish(conn, event.event_id, "error", self._now())

    # -- relay -------------------------------------------------------------------------------------------

    async def _relay_loop(self) -> None:
        assert self.market_room is not None
        room = self.market_room
        while not self._stopping.is_set():
            while await asyncio.to_thread(self._relay_once, room):
                self._send.set()
            await asyncio.sleep(self.relay_interval)

    def _relay_once(self, room: str) -> int:
        with self.market.db.read() as conn:
            if not store.inbox_behind(conn, self.user_id):
                return 0
        with self.market.db.write() as conn:
            return relay.relay(conn, self.user_id, room, self._now())

    # -- send --------------------------------------------------------------------------------------------

    async def _send_loop(self) -> None:
        while not self._stopping.is_set():
            await self._send.wait()
            self._send.clear()
            while True:
                owed = await asyncio.to_thread(self._due)
                if not owed:
                    break
                for outgoing in owed:
                    await self._deliver(outgoing)

    def _due(self) -> list[store.Outgoing]:
        with self.market.db.read() as conn:
            return store.due(conn, self.user_id)

    async def _deliver(self, outgoing: store.Outgoing) -> None:
        try:
            room_id = await self._room_of(outgoing.room, outgoing.invite)
            if outgoing.redacts:
                await self.connection.redact(room_id, outgoing.redacts, outgoing.content.get("reason"))
            else:
                await self.connection.send(room_id, outgoing.content, f"haggler-{outgoing.id}")
        except MatrixError as exc:
            log.warning("the homeserver refused outbox item %s for %s: %s", outgoing.id, outgoing.room, exc)
            await asyncio.to_thread(self._settle, outgoing.id, str(exc))
            return
        await asyncio.to_thread(self._settle, outgoing.id, None)

    def _settle(self, outgoing_id: int, error: str | None) -> None:
        with self.market.db.write() as conn:
            if error is None:
                store.sent(conn, outgoing_id, self._now())
            else:
                store.failed(conn, outgoing_id, error, self._now(), final=True)

    async def _room_of(self, room: str, invite: Iterable[str]) -> str:
        """A room id as is; a room key's room, made (inviting ``invite``) the first time."""
        if room.startswith("!"):
            return room
        known = await asyncio.to_thread(self._known_room, room)
        if known is not None:
            return known
        created = await self.connection.create_room(invite=list(invite), name=_room_name(room),
                                                    direct=room.startswith("inbox:"))
        await asyncio.to_thread(self._remember, room, created)
        return created

    def _known_room(self, key: str) -> str | None:
        with self.market.db.read() as conn:
            return store.room(conn, self.user_id, key)

    def _remember(self, key: str, room_id: str) -> None:
        with self.market.db.write() as conn:
            store.remember_room(conn, self.user_id, key, room_id, self._now())


def _room_name(key: str) -> str:
    kind, _, ident = key.partition(":")
    return f"market inbox of {ident}" if kind == "inbox" else f"market negotiation {ident}"
