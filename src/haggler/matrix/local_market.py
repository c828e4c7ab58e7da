"""A whole market on Matrix in one process: a homeserver (a throwaway local Synapse, or any Synapse
given its registration secret), the market bot in a thread of its own, and market agents on Matrix.

What ``haggler market demo --matrix`` and ``haggler market scenario`` run, and what the tests
drive: the bot and the agents are the real ones (real Matrix clients, the real market on a real
database); only their placement in one process is for convenience.
"""

from __future__ import annotations

import asyncio
import secrets
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from haggler.matrix import store
from haggler.matrix.agent_client import MatrixMarketClient, MatrixSession
from haggler.matrix.bot import MarketBot, market_on
from haggler.matrix.connection import Connection, MatrixLogin
from haggler.matrix.homeserver import LocalSynapse, MatrixAccount, register_user
from haggler.protocols.market.settings import MarketSettings
from haggler.server.config import utc_now
from haggler.storage.database import Database, open_database


@dataclass(frozen=True)
class Homeserver:
    """Where users come from: a homeserver's URL and its registration shared secret."""

    url: str
    registration_secret: str

    def register(self, localpart: str, password: str) -> MatrixAccount:
        return register_user(self.url, self.registration_secret, localpart, password)


class BotThread:
    """The market bot serving the market in ``database`` on ``homeserver``, in a thread with its
    own event loop; :meth:`stop` then :meth:`start` again is a restart."""

    def __init__(self, homeserver: Homeserver, database: Database, clock: Callable[[], datetime] = utc_now, *,
                 room: str | None = None, settings: MarketSettings | None = None, **bot_options: Any) -> None:
        self.homeserver = homeserver
        self.password = secrets.token_urlsafe(24)
        self.account = homeserver.register(_unique("market"), self.password)
        self.user_id = self.account.user_id
        self.room = room or f"#{_unique('market')}:{self.user_id.split(':', 1)[1]}"
        self.database = database
        self.market = market_on(database, settings, clock)
        self.bot_options = bot_options
        self.bot: MarketBot | None = None
        self.failure: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def start(self, timeout: float = 60.0) -> BotThread:
        ready = threading.Event()

        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            login = MatrixLogin(self.homeserver.url, self.user_id, password=self.password, device_id="HAGGLER_MARKET")
            self.bot = MarketBot(Connection(login), self.market, self.room, create_room=True, **self.bot_options)
            asyncio.create_task(self.bot.ready.wait()).add_done_callback(lambda _: ready.set())
            await self.bot.run(self._stop)

        def run() -> None:
            try:
                asyncio.run(main())
            except BaseException as exc:  # noqa: BLE001 - reported through .failure
                self.failure = exc
                ready.set()

        self.failure = None
        self._thread = threading.Thread(target=run, name="market bot", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or self.failure is not None:
            raise RuntimeError(f"the market bot did not start: {self.failure!r}")
        return self

    @property
    def market_room(self) -> str:
        assert self.bot is not None and self.bot.market_room, "the bot has not started"
        return self.bot.market_room

    def settle(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds until the bot owes nothing: every event taken, every
        inbox delivery relayed, the outbox sent. Whether it got there."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.database.read() as conn:
                if store.owes_nothing(conn, self.user_id):
                    return True
            time.sleep(0.1)
        return False

    def stop(self) -> None:
        thread, self._thread = self._thread, None
        if thread is not None and self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
            thread.join(30)
            if thread.is_alive():
                raise RuntimeError("the market bot did not stop")
        if self.failure is not None:
            raise RuntimeError(f"the market bot failed: {self.failure!r}")


class MatrixMarket:
    """A homeserver, a fresh market database, its bot, and agents made on demand (:meth:`client`).
    With no ``homeserver``, a throwaway Synapse is started (the ``haggler[matrix-homeserver]``
    extra) and stopped with the market."""

    def __init__(self, *, homeserver: Homeserver | None = None, db_url: str | None = None,
                 settings: MarketSettings | None = None, clock: Callable[[], datetime] = utc_now,
                 synapse_python: str | None = None) -> None:
        self._homeserver = homeserver
        self._db_url = db_url
        self._settings = settings
        self.clock = clock
        self._synapse_python = synapse_python
        self._stack = ExitStack()
        self.sessions: list[MatrixSession] = []

    def __enter__(self) -> Self:
        try:
            if self._homeserver is None:
                local = self._stack.enter_context(LocalSynapse(**({"python": self._synapse_python}
                                                                   if self._synapse_python else {})))
                self._homeserver = Homeserver(local.url, local.registration_shared_secret)
            if self._db_url is None:
                folder = Path(self._stack.enter_context(tempfile.TemporaryDirectory(prefix="haggler-matrix-")))
                self._db_url = f"sqlite:///{folder}/market.db"
            self.database = open_database(self._db_url)
            self._stack.callback(self.database.dispose)
            self.bot = BotThread(self._homeserver, self.database, self.clock, settings=self._settings).start()
            self._stack.callback(self.bot.stop)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        try:
            for session in self.sessions:
                session.close()
        finally:
            self._stack.close()

    @property
    def homeserver(self) -> Homeserver:
        assert self._homeserver is not None, "enter the market first"
        return self._homeserver

    def session(self, localpart: str) -> MatrixSession:
        """A new Matrix user, logged in, in the market room and in a private room with the bot."""
        password = secrets.token_urlsafe(24)
        account = self.homeserver.register(_unique(localpart), password)
        login = MatrixLogin(self.homeserver.url, account.user_id, password=password, device_id="HAGGLER_AGENT")
        session = MatrixSession(login, self.bot.user_id, self.bot.room).start()
        self.sessions.append(session)
        return session

    def client(self, agent_id: str, *, clock: Callable[[], datetime] | None = None) -> MatrixMarketClient:
        """A market agent on its own new Matrix user."""
        return MatrixMarketClient(self.session(agent_id.lower()), agent_id,
                                  clock=clock or self.clock)


def _unique(localpart: str) -> str:
    return f"{localpart}-{uuid.uuid4().hex[:8]}"
