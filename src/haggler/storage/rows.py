"""Reading one row by its id, the way every protocol's routes need it: the row, or NotFound
naming what was asked for (``unknown user: usr_…``), optionally locked for a change; and changing
some of its columns. Both are compiled once (``storage/prepared.py``): every protocol's turn reads
and updates rows by id, and building the statement again each time cost more than running it."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Table, bindparam, select, update

from haggler.errors import NotFound
from haggler.storage.prepared import Prepared


@lru_cache(maxsize=128)
def _by_id(table: Table, lock: bool) -> Prepared:
    query = select(table).where(table.c.id == bindparam("row_id"))
    return Prepared(query.with_for_update() if lock else query)


def find_by_id(conn: Connection, table: Table, row_id: str, *, lock: bool = False) -> Any:
    """The row of ``table`` whose ``id`` is ``row_id``, or None; ``lock`` takes it ``FOR UPDATE``
    (PostgreSQL; SQLite's write transactions are already exclusive)."""
    return _by_id(table, lock).row(conn, {"row_id": row_id})


def row_by_id(conn: Connection, table: Table, row_id: str, what: str, *, lock: bool = False) -> Any:
    """:func:`find_by_id`, or NotFound naming what was asked for."""
    row = find_by_id(conn, table, row_id, lock=lock)
    if row is None:
        raise NotFound(f"unknown {what}: {row_id}")
    return row


def update_by_id(conn: Connection, table: Table, row_id: str, **values: Any) -> int:
    """Set ``values`` (column → value) on the row of ``table`` whose ``id`` is ``row_id``;
    returns the rows changed (0 or 1)."""
    return _update(table, tuple(sorted(values))).run(conn, {**values, "row_id": row_id})


@lru_cache(maxsize=256)
def _update(table: Table, columns: tuple[str, ...]) -> Prepared:
    """The UPDATE of ``columns``, one per table and set of columns."""
    return Prepared(update(table).where(table.c.id == bindparam("row_id"))
                    .values({name: bindparam(name) for name in columns}))
