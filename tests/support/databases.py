"""Helpers for tests of the storage layer itself: a write held open by another thread, SQLite's
write lock held by another process, and a database brought to a given migration."""

from __future__ import annotations

import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from alembic import command
from sqlalchemy import Connection

from haggler.storage.database import Database, alembic_config


@contextmanager
def locked_by_another_process(db_path: Path) -> Iterator[None]:
    """Another connection, as another process's would, holds the SQLite file's write lock
    (``BEGIN IMMEDIATE``) until the block ends; then it rolls back and closes."""
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        other.execute("ROLLBACK")
        other.close()


@contextmanager
def write_held(db: Database, inside: Callable[[Connection], object] = lambda conn: None) -> Iterator[None]:
    """Another thread holds a ``db.write()`` open (having run ``inside`` in it) until the block
    ends; then it commits and the thread is joined."""
    holding, release = threading.Event(), threading.Event()

    def hold() -> None:
        with db.write() as conn:
            inside(conn)
            holding.set()
            release.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert holding.wait(10), "the holder never got the write"
        yield
    finally:
        release.set()
        holder.join(10)


def upgrade_to(db: Database, revision: str) -> None:
    """Run the migrations up to ``revision`` (``"head"``: all) on ``db``."""
    with db.write() as conn:
        config = alembic_config()
        config.attributes["connection"] = conn
        command.upgrade(config, revision)


@contextmanager
def database_at(db_url: str, revision: str) -> Iterator[Database]:
    """The database at ``db_url`` brought to ``revision``, for a migration test to fill with the
    rows of that time before it upgrades further; disposed after the block."""
    db = Database(db_url)
    try:
        upgrade_to(db, revision)
        yield db
    finally:
        db.dispose()
