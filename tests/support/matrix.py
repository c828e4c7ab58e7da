"""Matrix clients for the tests: matrix-nio's ``AsyncClient``, logged in as a user registered on
a :class:`~haggler.matrix.homeserver.LocalSynapse`, and the waits a test needs on top of it."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from nio import AsyncClient, RoomMessageText, SyncResponse

from haggler.matrix.homeserver import LocalSynapse, MatrixAccount

Answer = TypeVar("Answer")


def unique(localpart: str) -> str:
    """A localpart no other test on the session's homeserver has taken."""
    return f"{localpart}-{uuid.uuid4().hex[:8]}"


def ok(response: Any, kind: type[Answer]) -> Answer:
    """``response`` as the answer ``kind`` it should be: nio returns an error response, not an
    exception, when the homeserver refuses, and this shows what it said."""
    assert isinstance(response, kind), f"expected {kind.__name__}, got {response!r}"
    return response


@asynccontextmanager
async def matrix_client(homeserver: LocalSynapse, account: MatrixAccount) -> AsyncIterator[AsyncClient]:
    """An ``AsyncClient`` on ``homeserver`` with ``account``'s access token, closed afterwards."""
    client = AsyncClient(homeserver.url)
    client.restore_login(account.user_id, account.device_id, account.access_token)
    try:
        yield client
    finally:
        await client.close()


async def next_message(client: AsyncClient, room_id: str, body: str, *, since: str | None,
                       timeout: float = 20.0) -> RoomMessageText:
    """The first text message ``body`` in ``room_id`` that ``client``'s ``/sync`` brings from
    ``since`` (a long poll, so it returns as soon as the homeserver has it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = ok(await client.sync(timeout=int((deadline - time.monotonic()) * 1000), since=since), SyncResponse)
        room = answer.rooms.join.get(room_id)
        for event in room.timeline.events if room is not None else ():
            if isinstance(event, RoomMessageText) and event.body == body:
                return event
        since = answer.next_batch
    raise AssertionError(f"{client.user_id} did not receive {body!r} in {room_id} within {timeout:g} s")
