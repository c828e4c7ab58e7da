"""The market bot's Matrix client layer (haggler.matrix.connection) against a real Synapse: logging
in both ways, the market room found or made by its alias, a sync that outlasts homeserver restarts
and fills gaps, sends that wait out rate limits and are deduplicated by transaction id, refusals
that fail fast, and the private rooms the bot opens. Every wait is bounded by ``asyncio.wait_for``."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import httpx
import pytest

from haggler.matrix.connection import ACCESS_TOKEN_ENV, PASSWORD_ENV, Connection, MatrixError, MatrixLogin, SyncBatch
from haggler.matrix.homeserver import LocalSynapse
from haggler.server.threaded import free_port
from tests.support.matrix import unique

pytestmark = pytest.mark.slow

PASSWORD = "correct horse battery staple"
#: No test may take longer than this, whatever the homeserver does.
BOUND = 30.0

T = TypeVar("T")


def run(scene: Callable[[], Coroutine[Any, Any, T]], bound: float = BOUND) -> T:
    """Run ``scene`` in a fresh event loop, failing it after ``bound`` seconds."""
    return asyncio.run(asyncio.wait_for(scene(), bound))


def password_login(homeserver: LocalSynapse, localpart: str) -> MatrixLogin:
    """Register ``localpart`` and return a password login for it."""
    return MatrixLogin(homeserver.url, homeserver.register(localpart, PASSWORD).user_id, password=PASSWORD)


def text(body: str) -> dict[str, str]:
    return {"msgtype": "m.text", "body": body}


def bodies(batch: SyncBatch, room_id: str) -> list[str]:
    return [event.content["body"] for event in batch.events
            if event.room_id == room_id and event.type == "m.room.message" and "body" in event.content]


async def sync_until(matrix: Connection, since: str | None, found: Callable[[SyncBatch], bool]) -> str:
    """Sync from ``since`` until a batch satisfies ``found``; the position after it."""
    while True:
        batch = await matrix.sync(since, timeout_ms=5000)
        if found(batch):
            return batch.next_batch
        since = batch.next_batch


def client_api(homeserver: LocalSynapse, token: str) -> httpx.Client:
    return httpx.Client(base_url=f"{homeserver.url}/_matrix/client/v3", timeout=10,
                        headers={"Authorization": f"Bearer {token}"})


# -- logging in ------------------------------------------------------------------------------


def test_from_env_reads_a_secret_from_the_environment_and_refuses_without_one() -> None:
    with pytest.raises(ValueError) as refused:
        MatrixLogin.from_env("http://127.0.0.1:1", "@market:localhost", {})
    assert ACCESS_TOKEN_ENV in str(refused.value) and PASSWORD_ENV in str(refused.value)
    with pytest.raises(ValueError):
        MatrixLogin.from_env("http://127.0.0.1:1", "@market:localhost", {PASSWORD_ENV: ""})
    login = MatrixLogin.from_env("http://127.0.0.1:1", "@market:localhost", {PASSWORD_ENV: "hunter2"})
    assert (login.password, login.access_token, login.device_id) == ("hunter2", None, "HAGGLER")
    assert "hunter2" not in repr(login)
    token = MatrixLogin.from_env("http://127.0.0.1:1", "@market:localhost", {ACCESS_TOKEN_ENV: "syt_x"}, device_id="B")
    assert (token.access_token, token.device_id) == ("syt_x", "B") and "syt_x" not in repr(token)


def test_opens_with_a_password_or_an_access_token_and_refuses_bad_ones(synapse: LocalSynapse) -> None:
    name = unique("bot")
    account = synapse.register(name, PASSWORD)

    async def scene() -> None:
        async with Connection(MatrixLogin(synapse.url, account.user_id, password=PASSWORD)) as matrix:
            assert (matrix.user_id, matrix.device_id) == (account.user_id, "HAGGLER")
            assert await matrix.members(await matrix.create_room(invite=[])) == [account.user_id]
        token = MatrixLogin(synapse.url, account.user_id, access_token=account.access_token)
        async with Connection(token) as matrix:
            assert (matrix.user_id, matrix.device_id) == (account.user_id, account.device_id)
            assert (await matrix.sync(None, timeout_ms=0)).next_batch
        for wrong in (MatrixLogin(synapse.url, account.user_id, password="wrong"),
                      MatrixLogin(synapse.url, account.user_id, access_token="syt_not_a_token")):
            matrix = Connection(wrong)
            with pytest.raises(MatrixError) as refused:
                await matrix.open()
            await matrix.close()
            assert refused.value.errcode in {"M_FORBIDDEN", "M_UNKNOWN_TOKEN"} and not matrix.retries

    run(scene)


class GiveUp(Exception):
    """What a test's ``sleep`` raises to end an endless retry."""


def test_backoff_doubles_from_half_a_second_up_to_max_backoff_while_unreachable() -> None:
    waits: list[float] = []

    async def sleep(seconds: float) -> None:  # no homeserver on that port: record the waits instead
        waits.append(seconds)
        if len(waits) == 7:
            raise GiveUp

    nobody = MatrixLogin(f"http://127.0.0.1:{free_port()}", "@bot:localhost", password=PASSWORD)

    async def scene() -> None:
        matrix = Connection(nobody, max_backoff=4.0, sleep=sleep)
        try:
            with pytest.raises(GiveUp):
                await matrix.open()
        finally:
            await matrix.close()
        assert matrix.retries == {"unreachable": 7}

    run(scene, 10)
    for waited, planned in zip(waits, [0.5, 1, 2, 4, 4, 4, 4], strict=True):
        assert planned <= waited <= planned * 1.1  # plus up to 10 % jitter


def test_a_5xx_is_waited_out_not_raised(synapse: LocalSynapse) -> None:
    bot = password_login(synapse, unique("bot"))

    async def scene() -> Connection:
        async with Connection(bot, max_backoff=0.5) as matrix:
            # Synapse answers 502 when it cannot reach the alias's homeserver: worth another try.
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(matrix.join("#market:haggler.invalid"), 2)
            return matrix

    assert run(scene).retries["server error"] >= 2


# -- rooms -----------------------------------------------------------------------------------


def test_ensure_room_creates_the_alias_room_once_then_joins_it(synapse: LocalSynapse) -> None:
    alias = synapse.room_alias(unique("market"))
    bot, buyer = password_login(synapse, unique("bot")), password_login(synapse, unique("buyer"))

    async def scene() -> None:
        async with Connection(bot) as market, Connection(buyer) as buying:
            room_id = await market.ensure_room(alias, name="Market")
            assert await market.ensure_room(alias) == room_id  # the second start of the bot
            assert await buying.ensure_room(alias) == room_id  # anyone: joins, does not create
            assert await buying.resolve(alias) == room_id and await buying.resolve(room_id) == room_id
            assert sorted(await market.members(room_id)) == sorted([bot.user_id, buyer.user_id])

    run(scene)
    with client_api(synapse, synapse.register(unique("reader"), PASSWORD).access_token) as http:
        listed = http.get("/publicRooms").json()
    assert alias in [room.get("canonical_alias") for room in listed["chunk"]]


def test_create_room_invites_with_the_specified_power_levels_and_redact_strips_content(synapse: LocalSynapse) -> None:
    bot = password_login(synapse, unique("bot"))
    buyer = synapse.register(unique("buyer"), PASSWORD)

    async def scene() -> tuple[str, str]:
        async with Connection(bot) as market, \
                Connection(MatrixLogin(synapse.url, buyer.user_id, access_token=buyer.access_token)) as buying:
            since = (await buying.sync(None, timeout_ms=0)).next_batch
            room_id = await market.create_room(invite=[buyer.user_id], name="Deal", topic="iPhone 13", direct=True)
            await sync_until(buying, since, lambda batch: room_id in batch.invites)
            await buying.accept_invite(room_id)
            assert sorted(await market.members(room_id)) == sorted([bot.user_id, buyer.user_id])
            event_id = await buying.send(room_id, text("my card number is 4111 1111 1111 1111"), unique("txn"))
            await market.redact(room_id, event_id, reason="a card number")
            return room_id, event_id

    room_id, event_id = run(scene)
    with client_api(synapse, buyer.access_token) as http:
        events = {(event["type"], event["state_key"]): event for event in http.get(f"/rooms/{room_id}/state").json()}
        redacted = http.get(f"/rooms/{room_id}/event/{event_id}").json()
        timeline = http.get(f"/rooms/{room_id}/messages", params={"dir": "f", "limit": 50}).json()["chunk"]
    state = {key: event["content"] for key, event in events.items()}
    levels = state[("m.room.power_levels", "")]
    assert state[("m.room.join_rules", "")]["join_rule"] == "invite"
    assert state[("m.room.history_visibility", "")]["history_visibility"] == "invited"
    assert state[("m.room.name", "")]["name"] == "Deal" and state[("m.room.topic", "")]["topic"] == "iPhone 13"
    invitation, = (event["content"] for event in timeline if event["type"] == "m.room.member"
                   and event["state_key"] == buyer.user_id and event["content"]["membership"] == "invite")
    assert invitation["is_direct"] is True
    assert (levels["events_default"], levels["redact"], levels["invite"]) == (0, 50, 100)
    assert levels["users"][buyer.user_id] == 0 and levels.get("users_default", 0) == 0
    version = state[("m.room.create", "")].get("room_version", "1")
    if version.isdigit() and int(version) >= 12:
        assert bot.user_id not in levels["users"]  # the creator, above every power level (MSC4289)
    else:
        assert levels["users"][bot.user_id] == 100
    assert redacted["content"] == {} and "redacted_because" in redacted["unsigned"]


# -- sending ---------------------------------------------------------------------------------


def test_a_send_with_the_same_txn_id_lands_once_even_after_a_new_login(synapse: LocalSynapse) -> None:
    bot = password_login(synapse, unique("bot"))

    async def scene() -> None:
        async with Connection(bot) as market:
            room_id = await market.create_room(invite=[])
            since = (await market.sync(None, timeout_ms=0)).next_batch
            first = await market.send(room_id, text("SELLING: lamp, 15"), "outbox-1")
            assert await market.send(room_id, text("SELLING: lamp, 15"), "outbox-1") == first
        async with Connection(bot) as restarted:  # a crash, a new login on the same device, a resend
            assert await restarted.send(room_id, text("SELLING: lamp, 15"), "outbox-1") == first
            batch = await restarted.sync(since, timeout_ms=0)
            assert bodies(batch, room_id) == ["SELLING: lamp, 15"]

    run(scene)


def test_a_send_the_homeserver_refuses_raises_at_once(synapse: LocalSynapse) -> None:
    owner, outsider = password_login(synapse, unique("owner")), password_login(synapse, unique("outsider"))

    async def scene() -> None:
        async with Connection(owner) as owning, Connection(outsider) as outside:
            room_id = await owning.create_room(invite=[])
            started = time.monotonic()
            with pytest.raises(MatrixError) as not_in_room:
                await asyncio.wait_for(outside.send(room_id, text("hello?"), unique("txn")), 10)
            assert (not_in_room.value.status, not_in_room.value.errcode) == (403, "M_FORBIDDEN")
            with pytest.raises(MatrixError) as too_large:
                await asyncio.wait_for(owning.send(room_id, text("x" * 70_000), unique("txn")), 10)
            assert too_large.value.errcode == "M_TOO_LARGE"
            assert time.monotonic() - started < 5 and not outside.retries and not owning.retries

    run(scene)


def test_twenty_sends_under_a_tight_rate_limit_all_land_in_order(make_synapse: Callable[..., LocalSynapse],
                                                                caplog: pytest.LogCaptureFixture) -> None:
    homeserver = make_synapse(rate_limits={"rc_message": {"per_second": 5, "burst_count": 3}})
    bot = password_login(homeserver, "bot")

    async def scene() -> None:
        async with Connection(bot) as market:
            room_id = await market.create_room(invite=[])
            since = (await market.sync(None, timeout_ms=0)).next_batch
            sent = [await market.send(room_id, text(f"offer {n}"), f"offer-{n}") for n in range(20)]
            assert market.retries["M_LIMIT_EXCEEDED"] > 0
            batch = await market.sync(since, timeout_ms=0)
            assert bodies(batch, room_id) == [f"offer {n}" for n in range(20)]
            assert [event.event_id for event in batch.events if event.type == "m.room.message"] == sent

    with caplog.at_level(logging.WARNING, logger="haggler.matrix"):
        run(scene)
    assert any("M_LIMIT_EXCEEDED" in record.getMessage() and "retrying in" in record.getMessage()
               for record in caplog.records)


# -- syncing ---------------------------------------------------------------------------------


def test_a_sync_resumed_after_a_homeserver_restart_brings_only_what_came_after(
        make_synapse: Callable[..., LocalSynapse]) -> None:
    homeserver = make_synapse()
    bot, buyer = password_login(homeserver, "bot"), password_login(homeserver, "buyer")

    async def before() -> tuple[str, str]:
        async with Connection(bot) as market, Connection(buyer) as buying:
            room_id = await market.ensure_room(homeserver.room_alias("market"))
            await buying.join(room_id)
            await buying.send(room_id, text("SELLING: bike, 120"), "b1")
            position = await sync_until(market, None, lambda batch: "SELLING: bike, 120" in bodies(batch, room_id))
            return room_id, position

    async def after(room_id: str, position: str) -> None:
        async with Connection(bot) as market, Connection(buyer) as buying:
            await buying.send(room_id, text("SELLING: lamp, 15"), "b2")
            batch = await market.sync(position, timeout_ms=5000)
            assert bodies(batch, room_id) == ["SELLING: lamp, 15"]

    room_id, position = run(before)
    homeserver.halt()
    homeserver.resume()
    run(lambda: after(room_id, position))


def test_a_sync_started_while_the_homeserver_is_down_waits_and_returns_once_it_is_back(
        make_synapse: Callable[..., LocalSynapse]) -> None:
    homeserver = make_synapse()
    bot, buyer = password_login(homeserver, "bot"), password_login(homeserver, "buyer")

    async def scene() -> None:
        async with Connection(bot, max_backoff=1.0) as market, Connection(buyer, max_backoff=1.0) as buying:
            room_id = await market.create_room(invite=[buyer.user_id])
            await buying.accept_invite(room_id)
            position = (await market.sync(None, timeout_ms=0)).next_batch
            await asyncio.to_thread(homeserver.halt)
            waiting = asyncio.create_task(market.sync(position, timeout_ms=10_000))
            await asyncio.sleep(1.5)
            assert not waiting.done() and market.retries["unreachable"] >= 2
            await asyncio.to_thread(homeserver.resume)
            await buying.send(room_id, text("back: still selling the bike"), "b1")  # its own connection was cut too
            batches = [await asyncio.wait_for(waiting, 15)]
            while "back: still selling the bike" not in bodies(batches[-1], room_id):
                batches.append(await market.sync(batches[-1].next_batch, timeout_ms=5000))
            assert [body for batch in batches for body in bodies(batch, room_id)] == ["back: still selling the bike"]

    run(scene)


def test_a_resumed_sync_fills_a_gap_longer_than_the_timeline_limit(synapse: LocalSynapse) -> None:
    bot, buyer = password_login(synapse, unique("bot")), password_login(synapse, unique("buyer"))

    async def scene() -> None:
        async with Connection(bot, timeline_limit=3) as market, Connection(buyer) as buying:
            room_id = await market.create_room(invite=[buyer.user_id])
            position = (await market.sync(None, timeout_ms=0)).next_batch
            await buying.accept_invite(room_id)  # while the bot was away: a join and eight offers
            for n in range(8):
                await buying.send(room_id, text(f"offer {n}"), f"offer-{n}")
            batch = await market.sync(position, timeout_ms=0)
            assert bodies(batch, room_id) == [f"offer {n}" for n in range(8)]
            assert [event.type for event in batch.events][0] == "m.room.member"
            assert batch.members[room_id] == [buyer.user_id]

    run(scene)
