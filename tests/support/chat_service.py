"""The store's negotiate.v1 service in process, for tests that play whole chats without HTTP.

``chat_service(catalog, path, seed=...)``: a ``ChatService`` on a SQLite file under ``path``, its
clock stopped at one instant (no chat idles out mid-test) and its per-address chat-start limit
out of reach (a test starts hundreds of chats from one address). The shopper's tests and the
budget-guard tests share it, so they play against the same store.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from haggler.catalog import Catalog
from haggler.protocols.negotiate_v1.service import ChatService
from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.storage.database import open_database

#: The instant the service's clock stands at.
NOW = datetime(2026, 1, 1, 12, 0, tzinfo=timezone.utc)


def chat_service(catalog: Catalog, path: Path, *, seed: int) -> ChatService:
    """The service over ``catalog``, its database ``path/store.db``; ``seed`` fixes the store's
    secret margins and wording."""
    database = open_database(f"sqlite:///{path}/store.db")
    return ChatService(catalog, database, StoreLimits(max_chat_starts_per_hour_per_ip=10**6), lambda: NOW, seed=seed)
