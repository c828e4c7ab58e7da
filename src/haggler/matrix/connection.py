"""The market bot's Matrix client: a small asyncio layer over matrix-nio's ``AsyncClient`` that a
long-running process can lean on.

A bot that runs for weeks meets a homeserver that restarts, proxies that answer 502, rate limits
and dropped connections. Each method here therefore retries what retrying can fix -- the
homeserver unreachable, a timeout, a 5xx, a 429 (after the ``retry_after_ms`` it asked for) --
with exponential backoff (0.5 s doubling to ``max_backoff``, with a little jitter so that many
clients do not come back in step), and raises :class:`MatrixError` at once for what it cannot
(``M_FORBIDDEN``, ``M_UNKNOWN_TOKEN``, ``M_NOT_FOUND``, ``M_TOO_LARGE`` ...). Every wait is counted
in :attr:`Connection.retries` and logged on ``haggler.matrix``, so an operator (or a test) can see
that it happened.

nio answers refusals with error response objects and raises aiohttp/OSError/TimeoutError on
connection trouble; both are mapped here. nio's own retrying is switched off
(``max_limit_exceeded=0, max_timeouts=0``): left on, it retries 429s and timeouts without any
bound, where the caller can neither see nor limit it.

``/sync`` is spoken raw (through nio's HTTP session) rather than through nio's ``SyncResponse``:
the bot wants events exactly as they are on the wire, to store and audit them, and has no use for
the copy of every room's state that nio would keep in memory. A gap in a resumed sync (a
``limited`` timeline, after a long downtime) is filled from ``/messages``, so that no message sent
while the bot was away is skipped.

Messages are sent unencrypted (the market's rooms are plain text): nio's end-to-end encryption
is switched off even where python-olm is installed.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from functools import partial
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote, urlencode

import aiohttp
from nio import (AsyncClient, AsyncClientConfig, ErrorResponse, JoinedMembersResponse, JoinResponse, LoginResponse,
                 RoomCreateResponse, RoomPreset, RoomRedactResponse, RoomResolveAliasResponse, RoomSendResponse,
                 RoomVisibility, WhoamiResponse)

__all__ = ["ACCESS_TOKEN_ENV", "Connection", "MatrixError", "MatrixLogin", "PASSWORD_ENV", "RoomEvent", "SyncBatch"]

#: Where :meth:`MatrixLogin.from_env` reads the bot's credentials: from the environment, never from
#: a command line, where every user of the machine could read them in the process list.
ACCESS_TOKEN_ENV = "HAGGLER_MATRIX_ACCESS_TOKEN"
PASSWORD_ENV = "HAGGLER_MATRIX_PASSWORD"

_log = logging.getLogger("haggler.matrix")

_CLIENT_API = "/_matrix/client/v3"
#: The first wait after a transient failure; each further one doubles, up to ``max_backoff``.
_FIRST_BACKOFF = 0.5

_Answer = TypeVar("_Answer")


@dataclass(frozen=True)
class MatrixLogin:
    """Who the bot is on which homeserver, and how it proves it: a password (a fresh login on the
    fixed device) or an access token (restored as it is). Neither secret shows in ``repr``."""

    homeserver: str
    user_id: str
    password: str | None = field(default=None, repr=False)
    access_token: str | None = field(default=None, repr=False)
    #: Fixed, because a homeserver deduplicates transaction ids per device: a bot that logs in again
    #: after a crash on the same device and resends with the same ``txn_id`` gets the first event
    #: back instead of a duplicate.
    device_id: str = "HAGGLER"

    def __post_init__(self) -> None:
        if not self.password and not self.access_token:
            raise ValueError(f"a Matrix login for {self.user_id} needs a password or an access token")

    @classmethod
    def from_env(cls, homeserver: str, user_id: str, environ: Mapping[str, str] = os.environ, *,
                 device_id: str = "HAGGLER") -> MatrixLogin:
        """The login with the secret from ``$HAGGLER_MATRIX_ACCESS_TOKEN`` or
        ``$HAGGLER_MATRIX_PASSWORD`` (the token is used when both are set); ``ValueError`` naming
        both when neither is."""
        access_token = environ.get(ACCESS_TOKEN_ENV) or None
        password = environ.get(PASSWORD_ENV) or None
        if access_token is None and password is None:
            raise ValueError(f"no Matrix credentials for {user_id}: set {ACCESS_TOKEN_ENV} or {PASSWORD_ENV} "
                             f"in the environment")
        return cls(homeserver, user_id, password=password, access_token=access_token, device_id=device_id)


@dataclass(frozen=True)
class RoomEvent:
    """One timeline event of a joined room, as the homeserver sent it (``source``), with the
    fields a bot reads pulled out. ``redacts`` is set on ``m.room.redaction`` events, whether the
    room version puts it at the top (v1-v10) or in the content (v11+)."""

    room_id: str
    event_id: str
    sender: str
    type: str
    content: dict[str, Any]
    origin_server_ts: int
    redacts: str | None
    unsigned: dict[str, Any]
    state_key: str | None = None
    source: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_source(cls, room_id: str, source: Mapping[str, Any]) -> RoomEvent:
        """Read an event dict defensively: any room member can put odd JSON in a timeline, and one
        such event must not stop the bot."""
        content = source.get("content")
        content = content if isinstance(content, dict) else {}
        unsigned = source.get("unsigned")
        redacts = source.get("redacts", content.get("redacts"))
        state_key = source.get("state_key")
        timestamp = source.get("origin_server_ts")
        return cls(room_id=room_id, event_id=str(source.get("event_id", "")), sender=str(source.get("sender", "")),
                   type=str(source.get("type", "")), content=content,
                   origin_server_ts=timestamp if isinstance(timestamp, int) else 0,
                   redacts=redacts if isinstance(redacts, str) else None,
                   unsigned=unsigned if isinstance(unsigned, dict) else {},
                   state_key=state_key if isinstance(state_key, str) else None, source=dict(source))


@dataclass(frozen=True)
class SyncBatch:
    """What one ``/sync`` brought. Store ``next_batch`` only once ``events`` are handled: the next
    sync from it starts after them."""

    next_batch: str
    #: Timeline events of joined rooms, each room's in order (all types: messages, redactions,
    #: memberships ...), a gap in a resumed sync filled from ``/messages``.
    events: list[RoomEvent]
    #: Rooms the user is invited to (see :meth:`Connection.accept_invite`).
    invites: list[str]
    #: Per room, the users this batch shows as joined (by their latest ``m.room.member`` in it):
    #: partial, as only memberships that changed come in a resumed sync; ask
    #: :meth:`Connection.members` for the whole list.
    members: dict[str, list[str]] = field(default_factory=dict)
    #: Rooms the user left or was removed from.
    left: list[str] = field(default_factory=list)


class MatrixError(Exception):
    """The homeserver refused in a way retrying cannot fix: ``errcode`` (``M_FORBIDDEN``,
    ``M_UNKNOWN_TOKEN`` ...), the HTTP ``status`` and the homeserver's ``message``."""

    def __init__(self, message: str, *, errcode: str | None = None, status: int | None = None) -> None:
        super().__init__(f"{status or '?'} {errcode or 'error'}: {message}")
        self.errcode = errcode
        self.status = status
        self.message = message


class _Transient(Exception):
    """A refusal worth retrying: ``reason`` is what :attr:`Connection.retries` counts it under,
    ``retry_after`` (seconds) what the homeserver asked for, if it did."""

    def __init__(self, reason: str, detail: str, retry_after: float | None = None) -> None:
        super().__init__(detail)
        self.reason = reason
        self.retry_after = retry_after


def _refusal(status: int | None, errcode: str | None, message: str, retry_after_ms: Any,
             headers: Mapping[str, str] | None) -> _Transient | MatrixError:
    """Sort a homeserver's refusal: rate limits and server errors pass, the rest (4xx) will not."""
    if status == 429 or errcode == "M_LIMIT_EXCEEDED":
        retry_after = retry_after_ms / 1000 if isinstance(retry_after_ms, int | float) and retry_after_ms >= 0 else None
        header = (headers or {}).get("Retry-After", "")
        if retry_after is None and header.isdigit():  # the spec's newer way to say it (v1.10)
            retry_after = float(header)
        return _Transient("M_LIMIT_EXCEEDED", f"{status} M_LIMIT_EXCEEDED: {message}", retry_after)
    if status is None or status == 408 or status >= 500:  # 408: a proxy's timeout
        return _Transient("server error", f"{status} {errcode or ''} {message}".strip())
    return MatrixError(message, errcode=errcode, status=status)


def _creators_privileged(room_version: str) -> bool:
    """Whether rooms of this version give their creator unlimited power (v12 on, MSC4289), which
    homeservers then refuse to see listed in ``m.room.power_levels``' ``users``."""
    return (room_version.isdigit() and int(room_version) >= 12) or room_version.startswith("org.matrix.hydra.")


class Connection:
    """A logged-in Matrix client whose calls ride out homeserver trouble (see the module's
    docstring). Use as ``async with Connection(login) as matrix:`` or :meth:`open` ... :meth:`close`.

    ``sleep`` is what waits between retries (a test may pass a fake); ``request_timeout`` bounds
    each request (a sync's long poll gets its ``timeout_ms`` on top); ``timeline_limit`` is how
    many events per room a sync brings before the rest is fetched as a gap.
    """

    def __init__(self, login: MatrixLogin, *, max_backoff: float = 30.0,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep, request_timeout: float = 30.0,
                 timeline_limit: int = 100, jitter: float = 0.1) -> None:
        self.login = login
        self.max_backoff = max_backoff
        self.request_timeout = request_timeout
        self.jitter = jitter
        #: How many times each kind of trouble was waited out: ``"unreachable"`` (connection refused
        #: or reset), ``"timeout"``, ``"server error"`` (5xx), ``"M_LIMIT_EXCEEDED"`` (429).
        self.retries: Counter[str] = Counter()
        self._sleep = sleep
        # Presence is left out: it would only wake the long poll for nothing the bot reads.
        self._filter = json.dumps({"room": {"timeline": {"limit": timeline_limit}}, "presence": {"types": []}},
                                  separators=(",", ":"))
        self._client: AsyncClient | None = None
        self._user_id = login.user_id
        self._room_version: str | None = None

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        traceback: TracebackType | None) -> None:
        await self.close()

    @property
    def user_id(self) -> str:
        """The bot's Matrix id, as the homeserver knows it once :meth:`open` has run."""
        return self._user_id

    @property
    def device_id(self) -> str:
        """The device the bot is logged in on (the token's own, when restored from one)."""
        return self._client.device_id if self._client is not None else self.login.device_id

    # -- session --------------------------------------------------------------------------------

    async def open(self) -> None:
        """Log in: with the password on the fixed device, or by restoring the access token (checked
        with ``/whoami``). Waits out an unreachable or overloaded homeserver; a wrong password or
        token raises :class:`MatrixError`, a token of another user ``ValueError``."""
        login = self.login
        if self._client is None:
            config = AsyncClientConfig(max_limit_exceeded=0, max_timeouts=0, request_timeout=self.request_timeout,
                                       encryption_enabled=False)
            self._client = AsyncClient(login.homeserver, login.user_id, device_id=login.device_id, config=config)
        client = self._client
        if login.access_token:
            client.restore_login(login.user_id, login.device_id, login.access_token)
            who = await self._call("whoami", client.whoami, WhoamiResponse)
            if who.user_id != login.user_id:
                raise ValueError(f"the access token given for {login.user_id} is {who.user_id}'s")
            client.restore_login(who.user_id, who.device_id or login.device_id, login.access_token)
            self._user_id = who.user_id
        else:
            assert login.password is not None  # MatrixLogin insists on one of the two
            password = login.password
            answer = await self._call("login", lambda: client.login(password, device_name="haggler"), LoginResponse)
            self._user_id = answer.user_id
        _log.info("logged in to %s as %s (device %s)", login.homeserver, self._user_id, client.device_id)

    async def close(self) -> None:
        """Close the HTTP session. It does not log out: logging out would delete the device, and
        with it the transaction ids that keep a resend after a restart from duplicating."""
        client, self._client = self._client, None
        if client is not None:
            await client.close()

    # -- rooms ----------------------------------------------------------------------------------

    async def resolve(self, room: str) -> str:
        """The room id of an alias (``#name:server``); a room id (``!x:server``) as it is."""
        if room.startswith("!"):
            return room
        if not room.startswith("#"):
            raise ValueError(f"not a room alias or id: {room!r}")
        answer = await self._call(f"resolve {room}", lambda: self._nio().room_resolve_alias(room),
                                  RoomResolveAliasResponse)
        return answer.room_id

    async def join(self, room: str) -> str:
        """Join a room by alias or id and return its id; joining a room the user is in is a no-op."""
        answer = await self._call(f"join {room}", lambda: self._nio().join(room), JoinResponse)
        return answer.room_id

    async def accept_invite(self, room_id: str) -> None:
        """Join a room the user was invited to (a :attr:`SyncBatch.invites` entry)."""
        await self.join(room_id)

    async def ensure_room(self, alias: str, *, name: str | None = None, topic: str | None = None) -> str:
        """Join the public room ``alias``, creating it first (public, in the room directory, with
        that alias) when it does not exist: the market room, whichever of its bots runs first. Two
        bots racing to create it both end up in the one that won."""
        try:
            return await self.join(alias)
        except MatrixError as missing:
            localpart, _, server = alias.removeprefix("#").partition(":")
            if missing.errcode != "M_NOT_FOUND" or server != self.user_id.partition(":")[2]:
                raise  # only an alias on the bot's own homeserver can be created by it
        try:
            answer = await self._call(f"create {alias}", lambda: self._nio().room_create(
                visibility=RoomVisibility.public, alias=localpart, name=name, topic=topic,
                preset=RoomPreset.public_chat), RoomCreateResponse)
        except MatrixError as taken:
            if taken.errcode != "M_ROOM_IN_USE":
                raise
            return await self.join(alias)  # another bot created it since the first try
        _log.info("created %s as %s", alias, answer.room_id)
        return answer.room_id

    async def create_room(self, *, invite: list[str], name: str | None = None, topic: str | None = None,
                          direct: bool = False) -> str:
        """Create a private room (joined by invitation only, its history visible to members from
        their invitation on) with ``invite`` invited: the bot at power 100 (or, in room versions
        from 12, as the creator, above any power level), the invitees at 0, so they may talk and
        redact their own messages but neither invite others nor redact theirs (``redact`` 50,
        ``invite`` 100). ``direct`` flags the invitations as a direct chat.

        A retry after an answer lost in transit may leave a second, unused room behind.
        """
        users = {user: 0 for user in invite}
        if not _creators_privileged(await self._default_room_version()):
            users[self.user_id] = 100
        power_levels = {"users": users, "users_default": 0, "events_default": 0, "redact": 50, "invite": 100}
        history = {"type": "m.room.history_visibility", "state_key": "", "content": {"history_visibility": "invited"}}
        answer = await self._call("create a room", lambda: self._nio().room_create(
            visibility=RoomVisibility.private, name=name, topic=topic, is_direct=direct, preset=RoomPreset.private_chat,
            invite=invite, initial_state=[history], power_level_override=power_levels), RoomCreateResponse)
        return answer.room_id

    async def members(self, room_id: str) -> list[str]:
        """The users joined to the room now (``/joined_members``)."""
        answer = await self._call(f"members of {room_id}", lambda: self._nio().joined_members(room_id),
                                  JoinedMembersResponse)
        return [member.user_id for member in answer.members]

    # -- events ---------------------------------------------------------------------------------

    async def send(self, room_id: str, content: dict[str, Any], txn_id: str, event_type: str = "m.room.message") -> str:
        """Send an event and return its id. ``txn_id`` goes to the homeserver, which answers a
        second send with the same id on the same device with the first event: resending an outbox
        entry after a crash cannot post it twice. Not being in the room, or an event too large,
        raises :class:`MatrixError` at once."""
        answer = await self._call(f"send to {room_id}", lambda: self._nio().room_send(
            room_id, event_type, content, tx_id=txn_id), RoomSendResponse)
        return answer.event_id

    async def redact(self, room_id: str, event_id: str, reason: str | None = None, *,
                     txn_id: str | None = None) -> None:
        """Redact an event (its content is stripped for everyone). One transaction id serves all
        the retries, so a retried redaction is not sent twice; pass ``txn_id`` to keep it across
        restarts too."""
        transaction = txn_id or uuid.uuid4().hex
        await self._call(f"redact {event_id}", lambda: self._nio().room_redact(
            room_id, event_id, reason, tx_id=transaction), RoomRedactResponse)

    async def sync(self, since: str | None, timeout_ms: int = 30000) -> SyncBatch:
        """The events after ``since`` (a stored :attr:`SyncBatch.next_batch`; ``None`` for a first
        sync, which brings recent history), waiting up to ``timeout_ms`` for some to arrive.

        It does not raise for transient trouble: it waits, with backoff, until the homeserver
        answers (cancel it, or wrap it in ``asyncio.wait_for``, to give up). :class:`MatrixError`
        means retrying will not help, e.g. ``M_UNKNOWN_TOKEN`` once the token is revoked.
        """
        query = {"timeout": str(timeout_ms), "filter": self._filter, **({"since": since} if since else {})}
        timeout = self.request_timeout + timeout_ms / 1000  # the long poll, and the usual margin
        body = await self._retrying("sync", partial(self._get, "/sync", query, timeout), timeout)
        if not isinstance(body.get("next_batch"), str):
            raise MatrixError(f"a /sync answer without next_batch: {str(body)[:200]}", status=200)
        rooms = body.get("rooms") if isinstance(body.get("rooms"), dict) else {}
        events: list[RoomEvent] = []
        members: dict[str, list[str]] = {}
        for room_id, room in (rooms.get("join") or {}).items():
            timeline = room.get("timeline") or {}
            raw = [event for event in timeline.get("events") or [] if isinstance(event, dict)]
            if since and timeline.get("limited") and timeline.get("prev_batch"):
                raw = await self._gap(room_id, timeline["prev_batch"], since) + raw
            events.extend(RoomEvent.from_source(room_id, event) for event in raw)
            membership: dict[str, Any] = {}
            for event in [*((room.get("state") or {}).get("events") or []), *raw]:
                if (isinstance(event, dict) and event.get("type") == "m.room.member"
                        and isinstance(event.get("state_key"), str)):
                    membership[event["state_key"]] = (event.get("content") or {}).get("membership")
            if any(state == "join" for state in membership.values()):
                members[room_id] = sorted(user for user, state in membership.items() if state == "join")
        return SyncBatch(next_batch=body["next_batch"], events=events, invites=list(rooms.get("invite") or {}),
                         members=members, left=list(rooms.get("leave") or {}))

    async def _gap(self, room_id: str, prev_batch: str, since: str) -> list[dict[str, Any]]:
        """The events of a ``limited`` timeline between ``since`` and ``prev_batch``, oldest first,
        paged backwards from ``/messages``. A refusal here is logged and the gap left: failing the
        whole sync for it would stop the bot on every later try as well."""
        path = f"/rooms/{quote(room_id, safe='')}/messages"
        older: list[dict[str, Any]] = []
        token = prev_batch
        try:
            while True:
                query = {"dir": "b", "from": token, "to": since, "limit": "100"}
                page = await self._retrying(f"fill a gap in {room_id}",
                                            partial(self._get, path, query, self.request_timeout), self.request_timeout)
                chunk = [event for event in page.get("chunk") or [] if isinstance(event, dict)]
                older.extend(chunk)
                if not chunk or not page.get("end") or page["end"] == token:
                    break
                token = page["end"]
        except MatrixError as refused:
            _log.warning("could not fill the gap before %s in %s, %d event(s) read: %s", prev_batch, room_id,
                         len(older), refused)
        older.reverse()
        return older

    # -- requests -------------------------------------------------------------------------------

    def _nio(self) -> AsyncClient:
        if self._client is None:
            raise RuntimeError("the Matrix connection is not open: await open() first")
        return self._client

    async def _default_room_version(self) -> str:
        """The version the homeserver gives new rooms (``/capabilities``), asked once."""
        if self._room_version is None:
            answer = await self._retrying("capabilities", partial(self._get, "/capabilities", {}, self.request_timeout),
                                          self.request_timeout)
            versions = (answer.get("capabilities") or {}).get("m.room_versions") or {}
            self._room_version = str(versions.get("default", "1"))
        return self._room_version

    async def _get(self, path: str, query: Mapping[str, str], timeout: float) -> dict[str, Any]:
        """One raw GET on the client API (for the answers wanted as JSON, not as nio objects)."""
        client = self._nio()
        target = f"{_CLIENT_API}{path}" + (f"?{urlencode(query)}" if query else "")
        response = await client.send("GET", target, headers={"Authorization": f"Bearer {client.access_token}"},
                                     timeout=timeout)
        async with response:
            try:
                body = await response.json(content_type=None)
            except ValueError:
                body = None
        if response.status == 200 and isinstance(body, dict):
            return body
        body = body if isinstance(body, dict) else {}
        raise _refusal(response.status, body.get("errcode"), str(body.get("error", response.reason)),
                       body.get("retry_after_ms"), response.headers)

    async def _call(self, what: str, request: Callable[[], Awaitable[Any]], expected: type[_Answer]) -> _Answer:
        """One nio call, retried: its answer if of the ``expected`` type, its error response sorted
        into waiting again or :class:`MatrixError`."""

        async def attempt() -> _Answer:
            answer = await request()
            if isinstance(answer, expected):
                return answer
            if isinstance(answer, ErrorResponse):
                transport = answer.transport_response
                raise _refusal(transport.status if transport is not None else None, answer.status_code, answer.message,
                               answer.retry_after_ms, transport.headers if transport is not None else None)
            raise MatrixError(f"{what}: unexpected answer {answer!r}")

        return await self._retrying(what, attempt, self.request_timeout)

    async def _retrying(self, what: str, attempt: Callable[[], Awaitable[_Answer]], timeout: float) -> _Answer:
        """Run ``attempt`` (each try bounded by ``timeout``) until it answers or is refused for
        good, waiting between tries: what the homeserver asked (429), else 0.5 s doubling to
        ``max_backoff``, each with up to ``jitter`` more."""
        failures = 0
        while True:
            try:
                return await asyncio.wait_for(attempt(), timeout)
            except _Transient as trouble:
                reason, detail, asked = trouble.reason, str(trouble), trouble.retry_after
            except TimeoutError:  # before OSError: it is one; aiohttp's read timeouts are too
                reason, detail, asked = "timeout", f"no answer within {timeout:g} s", None
            except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as error:
                reason, detail, asked = "unreachable", f"{type(error).__name__}: {error}", None
            failures += 1
            backoff = min(self.max_backoff, _FIRST_BACKOFF * 2 ** min(failures - 1, 30))
            delay = (asked if asked is not None else backoff) * (1 + self.jitter * random.random())
            self.retries[reason] += 1
            _log.warning("%s: %s (%s); retrying in %.2f s (try %d)", what, reason, detail, delay, failures + 1)
            await self._sleep(delay)

