"""Reading one row by its id, the way every protocol's routes need it: the row, or NotFound
naming what was asked for (``unknown user: usr_…``), optionally locked for a change."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Connection, Table, select

from haggler.errors import NotFound


def row_by_id(conn: Connection, table: Table, row_id: str, what: str, *, lock: bool = False) -> Any:
    """The row of ``table`` whose ``id`` is ``row_id``; ``lock`` takes it ``FOR UPDATE``
    (PostgreSQL; SQLite's write transactions are already exclusive)."""
    query = select(table).where(table.c.id == row_id)
    row = conn.execute(query.with_for_update() if lock else query).first()
    if row is None:
        raise NotFound(f"unknown {what}: {row_id}")
    return row
