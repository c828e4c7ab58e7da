"""The market over Matrix, for tests: the market bot (``haggler.matrix.local_market.BotThread``)
on a test's homeserver and database, and market agents on Matrix (``MatrixMarketClient``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from haggler.matrix.agent_client import MatrixMarketClient, MatrixSession
from haggler.matrix.connection import MatrixLogin
from haggler.matrix.homeserver import LocalSynapse
from haggler.matrix.local_market import BotThread as _BotThread
from haggler.matrix.local_market import Homeserver
from haggler.storage.database import open_database

PASSWORD = "correct horse battery staple"


def unique(localpart: str) -> str:
    return f"{localpart}-{uuid.uuid4().hex[:8]}"


def homeserver_of(synapse: LocalSynapse) -> Homeserver:
    return Homeserver(synapse.url, synapse.registration_shared_secret)


class BotThread(_BotThread):
    """The bot on a test's Synapse and the database at ``db_url`` (which :meth:`close` lets go)."""

    def __init__(self, synapse: LocalSynapse, db_url: str, clock: Callable[[], datetime], **options: Any) -> None:
        super().__init__(homeserver_of(synapse), open_database(db_url), clock, **options)

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
