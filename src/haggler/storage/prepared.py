"""Statements of the turn path, compiled once and run on the database driver's cursor.

A chat turn runs three or four small statements. Through SQLAlchemy's ``Connection.execute``
each one pays for its cache key, an execution context and a result object: measured on SQLite,
about 60 µs for a turn's statements against 20 µs for the same statements on the driver, more
than the rest of the turn's database work. A :class:`Prepared` statement keeps what SQLAlchemy
gives it once — the SQL in the dialect's own words, the order of its parameters, the types'
conversions of parameters and results (``TypeEngine.bind_processor``/``result_processor``, so a
timestamp is stored and read exactly as SQLAlchemy would) — and runs it on the driver connection
under the caller's SQLAlchemy transaction. A driver error is raised as SQLAlchemy's
``DBAPIError``, like every other statement's, so the error edge and the outage checks
(``storage/outages.py``) see no difference.

Only for statements on the paths measured hot; everything else goes through SQLAlchemy as usual.
:meth:`Prepared.row` and :meth:`Prepared.rows` give a SELECT's rows as named tuples that read
like SQLAlchemy's ``Row`` (``row.state``, ``row[0]``, ``row._mapping``), so code written against
``Connection.execute`` takes them unchanged.
"""

from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Mapping, Sequence

from sqlalchemy import Connection, Table, bindparam, insert
from sqlalchemy.engine import Dialect
from sqlalchemy.exc import DBAPIError
from sqlalchemy.sql import Executable
from sqlalchemy.sql.compiler import SQLCompiler

__all__ = ["Prepared", "flattened", "multi_row_insert"]

Processor = Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class _Compiled:
    compiled: SQLCompiler
    sql: str
    #: Parameter names in the order the SQL takes them (positional paramstyles), else None.
    order: tuple[str, ...] | None
    binds: tuple[tuple[str, Processor], ...]
    #: (column index, conversion) for each result column the driver's value is not kept as it is
    #: (a row of a wide table converts its few timestamps, not every column).
    results: tuple[tuple[int, Processor], ...]
    #: The class of a named row: the result columns' keys.
    row_type: type
    #: The statement's arguments worked out without ``construct_params``: for each parameter the
    #: driver takes, in its order (by name for a named paramstyle), the key and name it may be
    #: given under, its bind parameter (for its default) and its conversion. None for a statement
    #: whose parameters need more than that (escaped names, collected or post-compiled ones).
    plan: tuple[tuple[str, str, Any, Processor | None], ...] | None
    #: For a positional statement that takes one parameter in several places (a union's parts
    #: each taking the same ``user_id``): where in :attr:`plan` each of the SQL's arguments comes
    #: from, the plan holding each parameter once. None when the plan is in the SQL's order.
    spread: tuple[int, ...] | None


def _row_type(keys: Sequence[str]) -> type:
    """A named tuple of ``keys`` with SQLAlchemy ``Row``'s ``_mapping``."""
    base = namedtuple("PreparedRow", keys, rename=True)  # type: ignore[misc]
    return type("PreparedRow", (base,), {"__slots__": (), "_mapping": property(lambda self: self._asdict())})


class Prepared:
    """One SQLAlchemy Core statement, compiled once per dialect, run on the driver."""

    def __init__(self, statement: Executable) -> None:
        self.statement = statement
        self._compiled: dict[type[Dialect], _Compiled] = {}

    def _for(self, dialect: Dialect) -> _Compiled:
        found = self._compiled.get(type(dialect))
        if found is None:
            compiled = self.statement.compile(dialect=dialect)
            assert isinstance(compiled, SQLCompiler)
            # By the names the parameters take in the SQL (an anonymous one's, as for a literal
            # None in ``values()``, is resolved: ``compiled.binds`` keys it by its template).
            binds = tuple((compiled.bind_names[bind], processor) for bind in compiled.binds.values()
                          if (processor := bind.type.dialect_impl(dialect).bind_processor(dialect)) is not None)
            # A SELECT's columns, or what an INSERT or UPDATE returns (RETURNING; none without).
            columns = getattr(self.statement, "exported_columns", ())
            results = tuple((index, processor) for index, column in enumerate(columns)
                            if (processor := column.type.dialect_impl(dialect).result_processor(dialect, None))
                            is not None)
            order = tuple(compiled.positiontup) if compiled.positional and compiled.positiontup else None
            once = None if order is None else tuple(dict.fromkeys(order))  # each parameter once
            spread = None if once == order else tuple(map(once.index, order))  # type: ignore[union-attr]
            found = _Compiled(compiled, compiled.string, order, binds, results,
                              _row_type([column.key for column in columns]), _plan(compiled, once, dict(binds)),
                              spread)
            self._compiled[type(dialect)] = found
        return found

    def _execute(self, conn: Connection, params: Mapping[str, Any]) -> tuple[Any, _Compiled]:
        """Run the statement in ``conn``'s transaction: the driver's cursor, to read from, and
        the statement as compiled for ``conn``'s dialect."""
        dialect = conn.dialect
        prepared = self._for(dialect)
        args: Any = (None if prepared.plan is None
                     else _arguments(prepared.plan, params, prepared.order is None, prepared.spread))
        if args is None:  # SQLAlchemy's own way, which also words a missing parameter's error
            values = prepared.compiled.construct_params(params)
            for name, processor in prepared.binds:
                values[name] = processor(values[name])
            args = values if prepared.order is None else tuple(map(values.__getitem__, prepared.order))
        # The DB-API connection: the driver's own, or SQLAlchemy's adapter of an asyncio driver
        # (whose calls await on the loop, under Database.run_on_loop).
        driver = conn.connection.dbapi_connection
        assert driver is not None
        cursor = driver.cursor()
        try:
            cursor.execute(prepared.sql, args)
        except dialect.loaded_dbapi.Error as exc:
            raise DBAPIError.instance(prepared.sql, args, exc, dialect.loaded_dbapi.Error,
                                      connection_invalidated=dialect.is_disconnect(exc, driver, cursor),
                                      dialect=dialect) from exc
        return cursor, prepared

    def first(self, conn: Connection, params: Mapping[str, Any]) -> tuple[Any, ...] | None:
        """The first row of a SELECT, its values converted as SQLAlchemy would, or None."""
        cursor, prepared = self._execute(conn, params)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        if row is None:
            return None
        return tuple(_converted(prepared.results, row))

    def row(self, conn: Connection, params: Mapping[str, Any]) -> Any:
        """The first row of a SELECT as a named row (see the module's docstring), or None."""
        cursor, prepared = self._execute(conn, params)
        try:
            row = cursor.fetchone()
        finally:
            cursor.close()
        return None if row is None else prepared.row_type._make(_converted(prepared.results, row))

    def rows(self, conn: Connection, params: Mapping[str, Any]) -> list[Any]:
        """Every row of a SELECT, as named rows."""
        cursor, prepared = self._execute(conn, params)
        try:
            found = cursor.fetchall()
        finally:
            cursor.close()
        make, results = prepared.row_type._make, prepared.results
        return [make(_converted(results, row)) for row in found]

    def run(self, conn: Connection, params: Mapping[str, Any]) -> int:
        """Run a statement that returns no rows; the number of rows it changed."""
        cursor, _ = self._execute(conn, params)
        try:
            return int(cursor.rowcount)
        finally:
            cursor.close()


def _plan(compiled: SQLCompiler, order: tuple[str, ...] | None,
          processors: Mapping[str, Processor]) -> tuple[tuple[str, str, Any, Processor | None], ...] | None:
    """:attr:`_Compiled.plan` of ``compiled``: what ``construct_params`` does for each bind
    parameter (SQLAlchemy 2's ``SQLCompiler.construct_params``: the value under the parameter's
    key, else under its name, else its own value), laid out once; then the bind processor, and
    the driver's order (``order``: each parameter once, as it first appears in the SQL). Every statement here runs thousands of times a second on the turn path,
    and ``construct_params`` walked the statement's parameters and their attributes each time."""
    if (compiled.escaped_bind_names or getattr(compiled, "_collected_params", None)
            or getattr(compiled, "_render_postcompile", False)):
        return None
    by_name: dict[str, tuple[str, str, Any, Processor | None]] = {}
    for bind, name in compiled.bind_names.items():
        first = by_name.setdefault(name, (bind.key, name, bind, processors.get(name)))[2]
        # One parameter used in several places (a union's parts each take the same ``user_id``)
        # is several copies of one bind parameter, all under its name: construct_params gives them
        # the value under that name, as the plan does. Two different ones under one name are left
        # to SQLAlchemy.
        if first is not bind and (first.key, first.required, first.value) != (bind.key, bind.required, bind.value):
            return None
    if order is None:
        return tuple(by_name.values())
    if not set(order) <= set(by_name):
        return None
    return tuple(by_name[name] for name in order)


def _arguments(plan: tuple[tuple[str, str, Any, Processor | None], ...], params: Mapping[str, Any],
               named: bool, spread: tuple[int, ...] | None = None) -> Any:
    """The driver's arguments for ``params`` by ``plan``: a tuple in the SQL's order (``spread``
    over it, see :attr:`_Compiled.spread`), or a dict for a named paramstyle; None when a
    required parameter is missing (``construct_params`` then raises its own error)."""
    values = []
    for key, name, bind, processor in plan:
        if key in params:
            value = params[key]
        elif name in params:
            value = params[name]
        elif bind.required:
            return None
        else:
            value = bind.effective_value if bind.callable else bind.value
        values.append(value if processor is None else processor(value))
    if named:
        return {name: value for (_, name, _, _), value in zip(plan, values)}
    return tuple(values) if spread is None else tuple(map(values.__getitem__, spread))


def _converted(results: Sequence[tuple[int, Processor]], row: Sequence[Any]) -> Sequence[Any]:
    """The driver's ``row`` with ``results``' conversions applied (the row itself when none)."""
    if not results:
        return row
    values = list(row)
    for index, convert in results:
        values[index] = convert(values[index])
    return values


@lru_cache(maxsize=32)
def multi_row_insert(table: Table, count: int) -> Prepared:
    """One INSERT of ``count`` rows into every column of ``table`` (one statement, one round
    trip, on every database), taking the parameters :func:`flattened` makes of the rows; built
    once for each table and count."""
    return Prepared(insert(table).values([{column.name: bindparam(f"{column.name}_{index}", type_=column.type)
                                           for column in table.columns} for index in range(count)]))


def flattened(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The parameters of a :func:`multi_row_insert` for ``rows``."""
    return {f"{name}_{index}": value for index, row in enumerate(rows) for name, value in row.items()}
