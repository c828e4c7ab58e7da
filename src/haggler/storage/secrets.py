"""Secrets a store draws once and keeps for good, shared by every worker through the database."""

from __future__ import annotations

import secrets
from datetime import datetime, timezone

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from haggler.storage.database import Database
from haggler.storage.schema import store_secrets


def store_secret(db: Database, name: str) -> bytes:
    """The store's secret called ``name`` (32 random bytes), drawn on first use.

    Two workers starting at once may both draw one; the primary key keeps the first insert
    and the other reads it back, so every worker ends up with the same secret.
    """
    query = select(store_secrets.c.value).where(store_secrets.c.name == name)
    with db.read() as conn:
        found = conn.execute(query).scalar_one_or_none()
    if found is None:
        try:
            with db.write() as conn:
                conn.execute(insert(store_secrets).values(name=name, value=secrets.token_hex(32),
                                                          created_at=datetime.now(timezone.utc)))
        except IntegrityError:
            pass  # another worker drew it first: use theirs
        with db.read() as conn:
            found = conn.execute(query).scalar_one()
    return bytes.fromhex(found)
