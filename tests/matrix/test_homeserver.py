"""The throwaway Synapse the Matrix tests run against (haggler.matrix.homeserver), driven by
matrix-nio as the market's agents will be: users registered only through the shared secret, the
market room found by its alias, messages through /sync, data kept across a restart, rate limits
that a test can tighten, a failed start explained, and no Synapse outliving its owner."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from nio import AsyncClient, JoinResponse, LoginResponse, RoomCreateResponse, RoomPreset, RoomResolveAliasResponse
from nio import RoomSendResponse, RoomVisibility, SyncResponse, WhoamiResponse

import haggler
from haggler.matrix.homeserver import HomeserverError, LocalSynapse, register_user
from tests.support.matrix import matrix_client, next_message, ok, unique

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery staple"


async def open_market(client: AsyncClient, alias: str = "market") -> str:
    """Create the public market room with the alias ``#alias:server``, listed in the directory."""
    created = await client.room_create(visibility=RoomVisibility.public, alias=alias, name="Market",
                                       preset=RoomPreset.public_chat)
    return ok(created, RoomCreateResponse).room_id


async def say(client: AsyncClient, room_id: str, body: str) -> None:
    ok(await client.room_send(room_id, "m.room.message", {"msgtype": "m.text", "body": body}), RoomSendResponse)


def test_a_buyer_joins_the_market_by_its_alias_and_hears_the_seller(synapse: LocalSynapse) -> None:
    seller = synapse.register(unique("seller"), PASSWORD)
    buyer = synapse.register(unique("buyer"), PASSWORD)
    assert seller.user_id.endswith(":localhost") and seller.access_token

    async def scene() -> None:
        async with matrix_client(synapse, seller) as selling, matrix_client(synapse, buyer) as buying:
            room_id = await open_market(selling)
            assert ok(await buying.join("#market:localhost"), JoinResponse).room_id == room_id
            before = ok(await buying.sync(timeout=0), SyncResponse).next_batch
            await say(selling, room_id, "SELLING: iPhone 13 — asking 400€. DM me.")
            heard = await next_message(buying, room_id, "SELLING: iPhone 13 — asking 400€. DM me.", since=before)
            assert heard.sender == seller.user_id

    asyncio.run(scene())
    listed = httpx.get(f"{synapse.url}/_matrix/client/v3/publicRooms", timeout=10,
                       headers={"Authorization": f"Bearer {buyer.access_token}"}).json()
    assert "#market:localhost" in [room.get("canonical_alias") for room in listed["chunk"]]


def test_users_are_registered_only_with_the_shared_secret(synapse: LocalSynapse) -> None:
    name = unique("mallory")
    with pytest.raises(HomeserverError) as refused:
        register_user(synapse.url, "not the secret", name, PASSWORD)
    assert refused.value.status == 403
    open_door = httpx.post(f"{synapse.url}/_matrix/client/v3/register", timeout=10,
                           json={"username": name, "password": PASSWORD, "auth": {"type": "m.login.dummy"}})
    assert open_door.status_code == 403 and open_door.json()["errcode"] == "M_FORBIDDEN"

    account = synapse.register(name, PASSWORD)  # the refusals created nobody
    assert account.user_id == synapse.user_id(name)
    with pytest.raises(HomeserverError) as taken:
        synapse.register(name, PASSWORD)
    assert (taken.value.status, taken.value.errcode) == (400, "M_USER_IN_USE")


def test_a_restart_keeps_users_rooms_messages_and_sync_positions(make_synapse: Callable[..., LocalSynapse]) -> None:
    homeserver = make_synapse()
    seller = homeserver.register("seller", PASSWORD)
    buyer = homeserver.register("buyer", PASSWORD)

    async def before_restart() -> tuple[str, str]:
        async with matrix_client(homeserver, seller) as selling, matrix_client(homeserver, buyer) as buying:
            room_id = await open_market(selling)
            ok(await buying.join(homeserver.room_alias("market")), JoinResponse)
            await say(selling, room_id, "SELLING: bike, 120")
            await next_message(buying, room_id, "SELLING: bike, 120", since=None)
            return room_id, buying.next_batch

    async def after_restart(room_id: str, position: str) -> None:
        async with matrix_client(homeserver, seller) as selling:
            assert ok(await selling.whoami(), WhoamiResponse).user_id == seller.user_id  # its token still holds
            again = AsyncClient(homeserver.url, buyer.user_id)
            try:
                ok(await again.login(PASSWORD), LoginResponse)
                resolved = ok(await again.room_resolve_alias(homeserver.room_alias("market")), RoomResolveAliasResponse)
                assert resolved.room_id == room_id
                await next_message(again, room_id, "SELLING: bike, 120", since=None)  # the history, from scratch
                await say(selling, room_id, "SELLING: lamp, 15")
                # A client resuming from the position it had before the restart gets what came after, only.
                resumed = ok(await again.sync(timeout=10_000, since=position), SyncResponse)
                bodies = [getattr(event, "body", None) for event in resumed.rooms.join[room_id].timeline.events]
                assert "SELLING: lamp, 15" in bodies and "SELLING: bike, 120" not in bodies
            finally:
                await again.close()

    room_id, position = asyncio.run(before_restart())
    url, first_pid = homeserver.url, homeserver.pid
    homeserver.restart()
    assert homeserver.url == url and homeserver.pid not in (None, first_pid)
    asyncio.run(after_restart(room_id, position))


def test_message_rate_limits_can_be_tightened_to_see_limit_exceeded(make_synapse: Callable[..., LocalSynapse]) -> None:
    homeserver = make_synapse(rate_limits={"rc_message": {"per_second": 0.1, "burst_count": 2}})
    flooder = homeserver.register("flooder", PASSWORD)
    with httpx.Client(base_url=f"{homeserver.url}/_matrix/client/v3", timeout=10,
                      headers={"Authorization": f"Bearer {flooder.access_token}"}) as http:
        room_id = http.post("/createRoom", json={}).json()["room_id"]
        statuses = []
        for n in range(4):  # Synapse holds each refusal back for half a second: stop at the first
            answer = http.put(f"/rooms/{room_id}/send/m.room.message/t{n}", json={"msgtype": "m.text", "body": f"{n}"})
            statuses.append(answer.status_code)
            if answer.status_code == 429:
                break
    # Creating the room spent part of the burst too, so which send is refused first is Synapse's to
    # count; that one is refused, the way a bot must back off from, is this test's.
    assert statuses[0] == 200 and statuses[-1] == 429, statuses
    refusal = answer.json()
    assert refusal["errcode"] == "M_LIMIT_EXCEEDED" and refusal["retry_after_ms"] > 0


def test_a_homeserver_that_cannot_start_says_why_and_leaves_nothing(synapse: LocalSynapse) -> None:
    broken = LocalSynapse(python=synapse.python, server_name="not a server name!")
    with pytest.raises(HomeserverError, match="exited with status") as failed:
        broken.start()
    assert "not a server name!" in str(failed.value)  # Synapse's own words, from its log
    assert broken.base_dir is None and not broken.running


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet does not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


def test_a_homeserver_does_not_outlive_the_process_that_started_it(synapse: LocalSynapse) -> None:
    owner_code = ("import sys, time\n"
                  "from haggler.matrix.homeserver import LocalSynapse\n"
                  "homeserver = LocalSynapse(python=sys.argv[1]).start()\n"
                  "print(homeserver.pid, homeserver.base_dir, flush=True)\n"
                  "time.sleep(600)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(haggler.__file__).parents[1])}
    owner = subprocess.Popen([sys.executable, "-c", owner_code, synapse.python], stdout=subprocess.PIPE,
                             text=True, env=env)
    try:
        pid, base_dir = owner.stdout.readline().split()  # type: ignore[union-attr]
        assert _alive(int(pid)) and Path(base_dir).is_dir()
        owner.send_signal(signal.SIGKILL)  # no atexit, no finally: only the watchdog is left to clean up
        owner.wait(timeout=10)
        deadline = time.monotonic() + 20
        while (_alive(int(pid)) or Path(base_dir).exists()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(int(pid)), "Synapse outlived the process that started it"
        assert not Path(base_dir).exists()
    finally:
        owner.kill()
        owner.wait()
