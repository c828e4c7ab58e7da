"""The market over Matrix, for tests: a market bot running in a thread of its own against a real
Synapse and a store's database, and market agents on Matrix (``MatrixMarketClient``)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from haggler.matrix.agent_client import MatrixMarketClient, MatrixSession
from haggler.matrix.bot import MarketBot, market_on
from haggler.matrix.connection import Connection, MatrixLogin
from haggler.matrix.homeserver import LocalSynapse
from haggler.protocols.market.settings import MarketSettings
from haggler.storage.database import Database, open_database

PASSWORD = "correct horse battery staple"


def unique(localpart: str) -> str:
    return f"{localpart}-{uuid.uuid4().hex[:8]}"


class BotThread:
    """A market bot on ``homeserver`` serving the market in ``db_url``, in a thread with its own
    event loop; :meth:`stop` and :meth:`start` again make a restart."""

    def __init__(self, homeserver: LocalSynapse, db_url: str, clock: Callable[[], datetime], *,
                 room: str | None = None, settings: MarketSettings | None = None, **bot_options: Any) -> None:
        self.homeserver = homeserver
        self.account = homeserver.register(unique("market"), PASSWORD)
        self.user_id = self.account.user_id
        self.room = room or f"#{unique('market')}:localhost"
        self.database: Database = open_database(db_url)
        self.market = market_on(self.database, settings, clock)
        self.bot_options = bot_options
        self.bot: MarketBot | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.failure: BaseException | None = None

    def start(self, timeout: float = 60.0) -> BotThread:
        ready = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            login = MatrixLogin(self.homeserver.url, self.user_id, password=PASSWORD, device_id="HAGGLER_MARKET")
            self.bot = MarketBot(Connection(login), self.market, self.room, create_room=True, **self.bot_options)
            waiting = asyncio.create_task(self.bot.ready.wait())
            waiting.add_done_callback(lambda _: ready.set())
            await self.bot.run(self._stop)

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:  # noqa: BLE001 - reported by the test through .failure
                self.failure = exc
                ready.set()

        self._thread = threading.Thread(target=run, name="market bot", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or self.failure is not None:
            raise AssertionError(f"the market bot did not start: {self.failure!r}")
        return self

    @property
    def market_room(self) -> str:
        assert self.bot is not None and self.bot.market_room
        return self.bot.market_room

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(30)
            assert not self._thread.is_alive(), "the market bot did not stop"
        self._thread = None
        if self.failure is not None:
            raise AssertionError(f"the market bot failed: {self.failure!r}")

    def close(self) -> None:
        try:
            self.stop()
        finally:
            self.database.dispose()


class Agents:
    """Market agents on Matrix for one test, closed after it."""

    def __init__(self, homeserver: LocalSynapse, bot: BotThread) -> None:
        self.homeserver = homeserver
        self.bot = bot
        self.sessions: list[MatrixSession] = []

    def session(self, localpart: str) -> MatrixSession:
        account = self.homeserver.register(unique(localpart), PASSWORD)
        login = MatrixLogin(self.homeserver.url, account.user_id, password=PASSWORD, device_id="AGENT")
        session = MatrixSession(login, self.bot.user_id, self.bot.room).start()
        self.sessions.append(session)
        return session

    def agent(self, agent_id: str | None = None, *, clock: Callable[[], datetime] | None = None) -> MatrixMarketClient:
        agent_id = agent_id or unique("agent")
        return MatrixMarketClient(self.session(agent_id), agent_id, clock=clock)

    def close(self) -> None:
        for session in self.sessions:
            session.close()
