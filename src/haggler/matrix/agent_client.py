"""A market agent on Matrix: :class:`~haggler.protocols.market.client.MarketClient` with its
transport swapped from HTTP to a homeserver's rooms (``haggler market agent --matrix``).

Every message is built and signed exactly as over HTTP; only where it goes changes. What the
HTTP client would ``POST`` to a path is sent as a structured market message (``matrix/wire.py``):

* to the agent's **private room with the market bot** (made at start, the bot invited): its
  registration, mandate, listings and wanted ads (whose signed bytes carry the owner's floor or
  cap: the market room gets the bot's public view instead), contact requests, sealed bids
  (escrow: the bot alone reads them), instant matches, orders and deal signatures;
* to the **negotiation room** the bot opens for a request between two Matrix agents: protocol
  agreements and offers, so the two agents and the bot hold the negotiation in one DM.

The bot answers each message with a notice replying to it; :meth:`MatrixMarketClient.call`
returns the answer's body, or raises :class:`~haggler.protocols.market.client.MarketError` with
its status, as the HTTP client does. What the HTTP client would ``GET``: the inbox is what the
relay pushed to the agent's inbox room; a deal and the listings are asked of the bot (``deal``,
``listings``), which answers from the market itself.

matrix-nio is asynchronous and the market clients are not, so the Matrix side runs its own event
loop in a background thread; ``call`` waits on it.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import threading
import uuid
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from haggler.matrix import wire
from haggler.matrix.connection import Connection, MatrixLogin, SyncBatch
from haggler.protocols.market.client import MarketClient, MarketError
from haggler.trust.messages import sign_message

T = TypeVar("T")

#: Seconds to wait for the bot's answer to a message.
ANSWER_TIMEOUT = 30.0
#: Seconds to wait for the negotiation room of a request before using the private room.
ROOM_WAIT = 3.0

_ROUTES: tuple[tuple[re.Pattern[str], str], ...] = tuple((re.compile(pattern), kind) for pattern, kind in (
    (r"/market/agents", "register"), (r"/market/mandates", "mandate"), (r"/market/listings", "as_is"),
    (r"/market/wanted", "as_is"), (r"/market/contact", "as_is"),
    (r"/market/contact/(?P<request>[^/]+)/(agreement|offers)", "negotiation"),
    (r"/market/contact/[^/]+/bids", "as_is"), (r"/market/listings/[^/]+/instant_match", "as_is"),
    (r"/market/books/[^/]+/orders", "as_is"), (r"/market/books/(?P<item>[^/]+)/clear", "clear"),
    (r"/market/deals/(?P<deal>[^/]+)/signatures", "deal_signature"),
    (r"/market/deals/(?P<deal>[^/]+)/approvals", "owner_approval")))


class MatrixSession:
    """One agent's Matrix account, served by a background event loop: what the bot says to it
    (answers, inbox deliveries, public views, negotiation rooms), collected as it arrives."""

    def __init__(self, login: MatrixLogin, bot: str, market_room: str) -> None:
        self.login = login
        self.bot = bot
        self.market_room_alias = market_room
        self.connection = Connection(login)
        self.market_room = ""
        self.private_room = ""
        self.answers: dict[str, dict[str, Any]] = {}
        self.notices: list[dict[str, Any]] = []
        self.inbox: dict[int, dict[str, Any]] = {}
        self.negotiations: dict[str, str] = {}
        #: Plain text others (people, plain-text agents; not the bot) said, by room: (sender, text).
        self.said: dict[str, list[tuple[str, str]]] = {}
        self.changed = threading.Condition()
        #: Transaction ids of plain text: unique to this session, or a homeserver that saw the same
        #: id from this device before (an earlier run) would keep the old message for the new one.
        self._says = (f"say-{uuid.uuid4().hex}-{n}" for n in itertools.count(1))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"matrix {login.user_id}", daemon=True)
        self._syncing: Future[None] | None = None

    # -- life --------------------------------------------------------------------------------------------

    def start(self, timeout: float = 60.0) -> MatrixSession:
        """Log in, join the market room, open the private room with the bot and start listening."""
        self._thread.start()
        self.run(self._start(), timeout)
        return self

    async def _start(self) -> None:
        await self.connection.open()
        self.market_room = await self.connection.join(self.market_room_alias)
        since = (await self.connection.sync(None, 0)).next_batch
        self.private_room = await self.connection.create_room(invite=[self.bot], name="market: private",
                                                               direct=True)
        self._syncing = asyncio.run_coroutine_threadsafe(self._listen(since), self._loop)
        for _ in range(600):
            if self.bot in await self.connection.members(self.private_room):
                return
            await asyncio.sleep(0.1)
        raise TimeoutError(f"the market bot {self.bot} did not join {self.user_id}'s private room")

    @property
    def user_id(self) -> str:
        return self.login.user_id

    def close(self) -> None:
        if self._syncing is not None:
            self._syncing.cancel()
        try:
            self.run(self.connection.close(), 10)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    # -- listening ---------------------------------------------------------------------------------------

    async def _listen(self, since: str) -> None:
        while True:
            batch = await self.connection.sync(since, 10_000)
            for room_id in batch.invites:
                await self.connection.accept_invite(room_id)
            self._take(batch)
            self._hear(batch)
            since = batch.next_batch

    def _take(self, batch: SyncBatch) -> None:
        with self.changed:
            for event in batch.events:
                if event.sender != self.bot or event.type != "m.room.message":
                    continue
                content = event.content
                self.notices.append(content)
                answer = wire.uncarry(content.get(wire.ANSWER_KEY))
                replied = ((content.get("m.relates_to") or {}).get("m.in_reply_to") or {}).get("event_id")
                if isinstance(answer, dict) and replied:
                    self.answers[replied] = answer
                delivery = wire.uncarry(content.get(wire.INBOX_KEY))
                if isinstance(delivery, dict):
                    self.inbox[delivery["cursor"]] = delivery
                message = wire.uncarry(content.get(wire.CONTENT_KEY))
                if isinstance(message, dict) and message.get("type") == "contact_request":
                    self.negotiations[message["requestId"]] = event.room_id
            self.changed.notify_all()

    def _hear(self, batch: SyncBatch) -> None:
        """Keep the plain text of everyone but the bot and this agent: what a plain-text
        counterpart says in a chat. Read as the bot reads it (``wire.read_content``): a market
        message or an edit is not text."""
        with self.changed:
            for event in batch.events:
                if event.type != "m.room.message" or event.sender in (self.bot, self.user_id):
                    continue
                reading = wire.read_content(event.content)
                if isinstance(reading, wire.Text):
                    self.said.setdefault(event.room_id, []).append((event.sender, reading.text))
            self.changed.notify_all()

    def wait(self, ready: Callable[[], T | None], timeout: float) -> T | None:
        """The first non-None ``ready()`` within ``timeout`` seconds, re-checked as events arrive."""
        with self.changed:
            self.changed.wait_for(lambda: ready() is not None, timeout)
            return ready()

    # -- sending -----------------------------------------------------------------------------------------

    def send(self, room_id: str, content: dict[str, Any], txn_id: str) -> str:
        return self.run(self.connection.send(room_id, content, txn_id), ANSWER_TIMEOUT)

    # -- plain text (``haggler.agents.market_live.PlainTextChat``) -----------------------------------

    def texts(self, room_id: str, after: int = 0) -> list[tuple[str, str]]:
        """What others (not the bot) said in plain text in ``room_id``, from the ``after``-th line on."""
        with self.changed:
            return list(self.said.get(room_id, ())[after:])

    def open_chat(self, user: str) -> str:
        """A direct chat with ``user``, the market bot invited as witness: the room's id."""
        return self.run(self.connection.create_room(invite=[user, self.bot], name="market: chat", direct=True),
                        ANSWER_TIMEOUT)

    def say(self, room_id: str, text: str) -> None:
        """Plain text (``m.text``) in ``room_id``."""
        self.send(room_id, {"msgtype": "m.text", "body": text}, next(self._says))


class MatrixMarketClient(MarketClient):
    """A market agent whose messages travel over Matrix (see the module's docstring)."""

    def __init__(self, session: MatrixSession, agent_id: str, *, key: Ed25519PrivateKey | None = None,
                 owner: Ed25519PrivateKey | None = None, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(None, agent_id, key=key, owner=owner, clock=clock)  # type: ignore[arg-type]
        self.session = session
        self._txns = itertools.count(1)

    def call(self, method: str, path: str, body: Any = None, *, sign: bool = False,
             expect: tuple[int, ...] = (200, 201, 202)) -> Any:
        payload = sign_message(self.key, body) if sign else body
        if method == "GET":
            return self._read(path)
        message, room = self._route(path, payload)
        return self._exchange(message, room, expect)

    def _exchange(self, message: dict[str, Any], room: str, expect: tuple[int, ...]) -> Any:
        """Send ``message`` to ``room`` and wait for the bot's answer to it."""
        event_id = self.session.send(room, wire.market_content(message, f"{message['type']} from {self.id}"),
                                     f"{self.id}-{next(self._txns)}-{id(self)}")
        answer = self.session.wait(lambda: self.session.answers.get(event_id), ANSWER_TIMEOUT)
        if answer is None:
            raise MarketError(504, {"error": f"the market bot did not answer within {ANSWER_TIMEOUT:g} s"})
        status, data = answer.get("status", 500), answer.get("body")
        if status not in expect:
            raise MarketError(status, data)
        return data

    def _route(self, path: str, payload: Any) -> tuple[dict[str, Any], str]:
        """The message a ``POST path`` becomes, and the room it goes to."""
        for pattern, kind in _ROUTES:
            match = pattern.fullmatch(path)
            if match is None:
                continue
            if kind == "register":
                return {"type": "register", **payload}, self.session.private_room
            if kind == "mandate":
                return {"type": "mandate", "mandate": payload}, self.session.private_room
            if kind == "clear":
                return {"type": "clear", "item": match["item"]}, self.session.private_room
            if kind in ("deal_signature", "owner_approval"):
                return {"type": kind, "dealId": match["deal"], **payload}, self.session.private_room
            if kind == "negotiation":
                request = match["request"]
                room = self.session.wait(lambda: self.session.negotiations.get(request), ROOM_WAIT)
                return payload, room or self.session.private_room
            return payload, self.session.private_room
        raise ValueError(f"no Matrix message for POST {path}")

    def _read(self, path: str) -> Any:
        """What a ``GET`` reads: the inbox from the agent's inbox room (pushed to it), a deal and
        the listings by asking the bot, which answers from the market itself."""
        url = urlsplit(path)
        query = {name: values[-1] for name, values in parse_qs(url.query).items()}
        if url.path == "/market/inbox":
            after = int(query.get("after", 0))
            with self.session.changed:
                messages = [{"cursor": cursor, "kind": delivery["kind"], "body": delivery["body"]}
                            for cursor, delivery in sorted(self.session.inbox.items()) if cursor > after]
            return {"messages": messages, "cursor": messages[-1]["cursor"] if messages else after}
        deal = re.fullmatch(r"/market/deals/([^/]+)", url.path)
        if deal:
            return self._ask({"type": "deal", "dealId": deal[1]})
        if url.path == "/market/listings":
            return self._ask({"type": "listings", "query": query})
        raise ValueError(f"no Matrix reading for GET {path}")

    def _ask(self, message: dict[str, Any]) -> Any:
        return self._exchange(message, self.session.private_room, (200,))
