"""Opening a database: URL handling, SQLite pragmas, write serialization, migrations.

Writes that must not interleave (two turns on one chat, two chat starts from one client)
run in :meth:`Database.write`. On SQLite that is ``BEGIN IMMEDIATE`` behind an in-process
lock — the lock keeps threads of one process from spinning in SQLite's busy handler, the
IMMEDIATE transaction keeps separate processes apart. On PostgreSQL, callers lock the rows
they change (``SELECT ... FOR UPDATE``) and advisory locks guard per-client counters.

A server keeps its chat turns off worker threads: on SQLite a write runs on the event loop when it
would not wait (:meth:`Database.without_waiting`), on PostgreSQL every turn does, its round trips
awaited there (:meth:`Database.run_on_loop`, on psycopg's asyncio connections). The code is the
same synchronous code either way.

No wait is unbounded: ``timeout`` (``haggler serve --db-timeout``) bounds the in-process write
lock and SQLite's busy handler together (the busy handler gets what the lock left), and on
PostgreSQL each lock wait (``lock_timeout``), each statement (``statement_timeout``), a pool
checkout and a connection attempt. A wait that runs out raises, the transaction rolls back, and
the error edge answers 503 (``storage/outages.py``).
"""

from __future__ import annotations

import math
import sqlite3
import threading
import time
from contextlib import AbstractContextManager, ExitStack, contextmanager
from contextvars import ContextVar
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.util import greenlet_spawn

from haggler.storage.outages import WriteLockTimeout

#: How long a request may wait on the database (a lock, a statement, a connection), in seconds.
DEFAULT_DB_TIMEOUT = 5.0
#: What is left of the timeout for SQLite's busy handler once a write holds the in-process lock:
#: the two waits share one bound. None: the whole timeout (the lock came without a real wait).
_busy_budget: ContextVar[float | None] = ContextVar("haggler_sqlite_busy_budget", default=None)
#: A wait on the in-process lock shorter than this leaves SQLite's busy timeout as it is, so an
#: uncontended write sets no pragma.
_NOTICEABLE_WAIT = 0.05


class DatabaseError(RuntimeError):
    """The database cannot be opened or migrated; the message says which and why."""


class WouldBlock(Exception):
    """A write inside :meth:`Database.without_waiting` found the database busy: nothing was done."""


#: SQLite's result code for a database locked by another connection.
_SQLITE_BUSY = 5

T = TypeVar("T")


def normalize_url(url: str) -> str:
    """Accept the URLs people write (``postgresql://``, ``postgres://``) and pick our drivers."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url[len("postgres://"):]
    if url.startswith("postgresql://"):
        url = "postgresql+psycopg://" + url[len("postgresql://"):]
    return url


def _sqlite_engine(url: str, *, background_checkpoints: bool, timeout: float) -> Engine:
    engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": timeout})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record):  # type: ignore[no-untyped-def]
        # The driver starts no transaction of its own: _sqlite_transaction begins each one.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode survives a process crash (SIGKILL) with every committed
        # transaction intact; only an OS crash could lose the last few.
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        record.info["busy_ms"] = math.ceil(timeout * 1000)
        cursor.execute(f"PRAGMA busy_timeout={record.info['busy_ms']}")
        if background_checkpoints:
            # The checkpoint (and its fsync) would otherwise run inside whichever commit
            # crosses the WAL threshold, stalling that turn; Database.checkpoint runs it aside.
            cursor.execute("PRAGMA wal_autocheckpoint=0")
        cursor.close()

    return engine


@contextmanager
def _sqlite_transaction(conn: Connection, begin: str, timeout: float) -> Iterator[Connection]:
    """A transaction on a SQLite connection ``conn``, opened by ``begin`` (``BEGIN IMMEDIATE`` for
    writes, so that two processes never both read and then write) sent straight to the driver (its
    error wrapped as SQLAlchemy's, like every other statement's); its busy handler waits what is
    left of ``timeout`` once the in-process lock was waited for. Not SQLAlchemy's "begin" event,
    the documented recipe: an engine with any event listener dispatches events around every
    statement it runs, and that cost more than a chat turn's statements themselves."""
    pooled = conn.connection
    driver = pooled.driver_connection
    budget = _busy_budget.get()
    busy_ms = math.ceil((timeout if budget is None else budget) * 1000)
    try:
        if pooled.info["busy_ms"] != busy_ms:  # the connect handler's record.info
            driver.execute(f"PRAGMA busy_timeout={busy_ms}")
            pooled.info["busy_ms"] = busy_ms
        driver.execute(begin)
    except sqlite3.Error as exc:
        raise DBAPIError.instance(begin, None, exc, sqlite3.Error) from exc
    with conn.begin():  # SQLAlchemy's bookkeeping: the driver's commit or rollback at the end
        yield conn


@contextmanager
def _pooled_sqlite_transaction(engine: Engine, begin: str, timeout: float) -> Iterator[Connection]:
    """:func:`_sqlite_transaction` on a connection of ``engine``'s pool, given back at the end."""
    with engine.connect() as conn, _sqlite_transaction(conn, begin, timeout):
        yield conn


class Database:
    """One database, as used by one process: engines, transactions, migrations."""

    def __init__(self, url: str, *, background_checkpoints: bool = False, timeout: float = DEFAULT_DB_TIMEOUT) -> None:
        """``background_checkpoints``: the owner promises to call :meth:`checkpoint`
        regularly (a server does, from a background task), so commits never checkpoint.
        ``timeout``: the longest wait on a lock, a statement or a connection, in seconds."""
        if not timeout > 0:
            raise DatabaseError(f"the database timeout must be a positive number of seconds, got {timeout}")
        self.url = normalize_url(url)
        self.timeout = timeout
        try:
            parsed = make_url(self.url)
        except Exception as exc:  # sqlalchemy raises ArgumentError with a terse message
            raise DatabaseError(f"not a database URL: {url!r}") from exc
        self.dialect = parsed.get_backend_name()
        if self.dialect == "sqlite":
            if parsed.database and parsed.database != ":memory:":
                Path(parsed.database).expanduser().resolve().parent.mkdir(parents=True, exist_ok=True)
            self._write_engine, self._read_engine = (
                _sqlite_engine(self.url, background_checkpoints=background_checkpoints, timeout=timeout)
                for _ in range(2))
        elif self.dialect == "postgresql":
            bound = math.ceil(timeout * 1000)
            # libpq's connect_timeout is whole seconds, and it treats anything under 2 as 2.
            connect_args = {"options": f"-c lock_timeout={bound} -c statement_timeout={bound}",
                            "connect_timeout": max(2, math.ceil(timeout))}
            options: dict[str, Any] = {"pool_pre_ping": True, "pool_timeout": timeout, "connect_args": connect_args}
            try:
                # Connections per process: at most 20 for the requests served in threads, and 20
                # for run_on_loop (chat turns), never more: a connection opened past the pool's size
                # would be closed again when it comes back, and opening one costs PostgreSQL a
                # process. A turn that finds the 20 busy waits on the loop for the next one.
                engine = create_engine(self.url, pool_size=10, max_overflow=10, **options)
                self._loop_engine = create_async_engine(self.url, pool_size=20, max_overflow=0, **options)
            except ImportError as exc:
                raise DatabaseError("PostgreSQL needs the psycopg driver: pip install 'haggler[postgres]'") from exc
            self._write_engine = self._read_engine = engine
        else:
            raise DatabaseError(f"unsupported database {self.dialect!r}: use sqlite:/// or postgresql://")
        self._write_lock = threading.Lock() if self.dialect == "sqlite" else None
        #: SQLite: the write engine's connection that writes run on (:meth:`_kept_transaction`).
        self._write_connection: Connection | None = None
        #: The write transaction open in the current context, joined by nested ``write()`` calls.
        self._open_write: ContextVar[Connection | None] = ContextVar(f"haggler_write_{id(self)}", default=None)
        self._no_waiting: ContextVar[bool] = ContextVar(f"haggler_no_waiting_{id(self)}", default=False)
        #: Inside run_on_loop: transactions use the asyncio engine.
        self._on_loop: ContextVar[bool] = ContextVar(f"haggler_on_loop_{id(self)}", default=False)

    @property
    def is_sqlite(self) -> bool:
        return self.dialect == "sqlite"

    @contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction for changes that must be serialized; commits on success.

        A ``write()`` opened while this context (thread or task) already holds one joins it
        instead of starting a second transaction: a caller can wrap a service call and its
        audit record in one outer ``write()`` so that both commit or neither does, without
        threading a connection through every service method. A joined write is not a savepoint:
        code must not catch a database error inside a joined write and carry on (PostgreSQL
        leaves the outer transaction aborted); let it propagate to the outermost ``write()``."""
        joined = self._open_write.get()
        if joined is not None:
            yield joined
            return
        with self._begin_without_waiting() if self._no_waiting.get() else self._begin() as conn:
            token = self._open_write.set(conn)
            try:
                yield conn
            finally:
                self._open_write.reset(token)

    @contextmanager
    def _begin(self) -> Iterator[Connection]:
        with self._write_locked(), self._write_transaction() as conn:
            yield conn

    def _write_transaction(self) -> AbstractContextManager[Connection]:
        """A write's transaction, the write lock held (SQLite: :meth:`_kept_transaction`)."""
        if not self.is_sqlite:
            return self._transaction(self._write_engine, "BEGIN IMMEDIATE")
        return self._kept_transaction()

    @contextmanager
    def _kept_transaction(self) -> Iterator[Connection]:
        """A SQLite write on the one connection kept checked out of the write engine's pool from
        one write to the next: the write lock lets one write at a time use it, and taking a
        connection from the pool and giving it back (SQLAlchemy's checkout, its reset on return)
        cost a polling agent's write more than its BEGIN IMMEDIATE and COMMIT. A write that fails
        gives the connection back, as every write did before: the pool's reset rolls back
        whatever the failure left, or discards a connection that cannot."""
        conn = self._write_connection
        if conn is None:
            conn = self._write_connection = self._write_engine.connect()
        try:
            with _sqlite_transaction(conn, "BEGIN IMMEDIATE", self.timeout):
                yield conn
        except BaseException:
            self._write_connection = None
            conn.close()
            raise

    def _transaction(self, engine: Engine, begin: str) -> AbstractContextManager[Connection]:
        if self.is_sqlite:
            return _pooled_sqlite_transaction(engine, begin, self.timeout)
        return (self._loop_engine.sync_engine if self._on_loop.get() else engine).begin()

    @property
    def runs_on_loop(self) -> bool:
        """Whether :meth:`run_on_loop` is available: PostgreSQL, through psycopg's asyncio API."""
        return not self.is_sqlite

    async def run_on_loop(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, plain synchronous code using :meth:`write` and :meth:`read`, run on the
        calling event loop with its database round trips awaited there (SQLAlchemy's greenlet
        bridge to psycopg's asyncio connections) instead of in a worker thread. A turn waits on
        PostgreSQL six times; in a thread each wait ended in a fight with the event loop for the
        GIL, which cost more CPU than the turn and most of its latency."""
        if not self.runs_on_loop:
            raise RuntimeError("run_on_loop needs PostgreSQL")
        return await greenlet_spawn(self._call_on_loop, fn, args)

    def _call_on_loop(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        token = self._on_loop.set(True)
        try:
            return fn(*args)
        finally:
            self._on_loop.reset(token)

    @contextmanager
    def _write_locked(self) -> Iterator[None]:
        """The in-process write lock (SQLite), waited for no longer than the timeout; what the
        wait took is taken off SQLite's busy timeout for the transaction that follows."""
        lock = self._write_lock
        if lock is None:
            yield
            return
        started = time.monotonic()
        if not lock.acquire(timeout=self.timeout):
            raise WriteLockTimeout(f"the database write lock was busy for {self.timeout:g} s")
        waited = time.monotonic() - started
        token = _busy_budget.set(max(self.timeout - waited, 0.001) if waited >= _NOTICEABLE_WAIT else None)
        try:
            yield
        finally:
            _busy_budget.reset(token)
            lock.release()

    @contextmanager
    def without_waiting(self) -> Iterator[None]:
        """Within it, a :meth:`write` that would wait — for this process's other writers or for
        another process's lock — raises :class:`WouldBlock` before doing anything. SQLite only:
        a server runs a short write on its event loop this way, and hands it to a thread (where
        waiting is harmless) only when the database is busy, so that the common turn does not pay
        for the hop to a thread and back."""
        if not self.is_sqlite:
            raise WouldBlock("only SQLite writes run without waiting")
        token = self._no_waiting.set(True)
        try:
            yield
        finally:
            self._no_waiting.reset(token)

    @contextmanager
    def _begin_without_waiting(self) -> Iterator[Connection]:
        assert self._write_lock is not None
        if not self._write_lock.acquire(blocking=False):
            raise WouldBlock("another write of this process is under way")
        try:
            # No time left for SQLite's busy handler: BEGIN IMMEDIATE fails at once when another
            # process writes (the same budget a write that waited for the lock gets what is left of).
            budget = _busy_budget.set(0.0)
            with ExitStack() as stack:
                stack.callback(_busy_budget.reset, budget)
                try:
                    conn = stack.enter_context(self._write_transaction())
                except OperationalError as exc:
                    if getattr(exc.orig, "sqlite_errorcode", None) == _SQLITE_BUSY:
                        raise WouldBlock("another process is writing") from exc
                    raise
                yield conn
        finally:
            self._write_lock.release()

    @contextmanager
    def read(self) -> Iterator[Connection]:
        """A read-only transaction (a consistent snapshot)."""
        with self._transaction(self._read_engine, "BEGIN") as conn:
            yield conn

    def in_batches(self, job: Callable[[Connection], int], batch: int) -> int:
        """Run ``job`` in write transactions of its own until it does fewer than ``batch`` things
        (it returns how many it did); the total. How a sweep works through a backlog without
        holding one long write that every request would queue behind."""
        done = 0
        while True:
            with self.write() as conn:
                count = job(conn)
            done += count
            if count < batch:
                return done

    def checkpoint(self) -> None:
        """Copy the SQLite write-ahead log into the database file without blocking writers
        (a PASSIVE checkpoint). Nothing to do on PostgreSQL."""
        if self.is_sqlite:
            with self._read_engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)")

    def migrate(self) -> None:
        """Bring the schema to the newest migration (safe to run on every start)."""
        try:
            with self._transaction(self._write_engine, "BEGIN IMMEDIATE") as conn:
                if self.dialect == "postgresql":
                    # A migration may take longer than a request may wait, and so may waiting for
                    # another process's migration: the request bounds do not apply to it.
                    conn.exec_driver_sql("SET LOCAL statement_timeout = 0")
                    conn.exec_driver_sql("SET LOCAL lock_timeout = 0")
                    # Two processes starting at once must not both create the tables.
                    conn.exec_driver_sql("SELECT pg_advisory_xact_lock(7240315)")
                config = alembic_config()
                config.attributes["connection"] = conn
                command.upgrade(config, "head")
        except Exception as exc:
            raise DatabaseError(f"cannot open or migrate {self.safe_url}: {exc}") from exc

    @property
    def safe_url(self) -> str:
        """The URL without its password, for messages and logs."""
        return make_url(self.url).render_as_string(hide_password=True)

    def dispose(self) -> None:
        """Close the pools. The asyncio engine's connections belong to the event loop that
        opened them: :meth:`dispose_on_loop` closes them there; here they are only dropped."""
        self._dispose_threaded()
        if not self.is_sqlite:
            self._loop_engine.sync_engine.dispose(close=False)

    async def dispose_on_loop(self) -> None:
        """Close the asyncio engine's connections, on the loop that opened them, then the rest."""
        if not self.is_sqlite:
            await self._loop_engine.dispose()
        self._dispose_threaded()

    def _dispose_threaded(self) -> None:
        self._give_back_write_connection()
        for engine in {self._write_engine, self._read_engine}:  # PostgreSQL's are one engine
            engine.dispose()

    def _give_back_write_connection(self) -> None:
        """Give the connection writes are kept on back to its pool (whose dispose closes it) once
        no write uses it: the write lock first. A write still under way in another thread (a
        sweep that the shutdown stopped waiting for) would otherwise have its connection closed
        under it, and SQLite crashes the process on a statement of a connection closed meanwhile.
        A write that holds the lock past the timeout keeps the connection; it is closed with the
        object."""
        lock = self._write_lock
        if lock is None or not lock.acquire(timeout=self.timeout):
            return
        try:
            conn, self._write_connection = self._write_connection, None
            if conn is not None:
                conn.close()
        finally:
            lock.release()


def lock_key(conn: Connection, key: str) -> None:
    """Serialize, across workers, the transactions that take the same ``key`` until they end
    (a PostgreSQL advisory lock; SQLite's write transactions are already exclusive)."""
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SELECT pg_advisory_xact_lock(hashtext(%s))", (key,))


def alembic_config() -> Config:
    config = Config()
    location = resources.files("haggler.storage").joinpath("migrations")
    config.set_main_option("script_location", str(location))
    return config


def open_database(url: str, *, migrate: bool = True, background_checkpoints: bool = False,
                  existing: bool = False, timeout: float = DEFAULT_DB_TIMEOUT) -> Database:
    """Open (and by default migrate) the database at ``url``. With ``existing``, only a haggler
    database that is already there: a command that reads a store's records must say that the
    path is wrong, not create an empty database there and report nothing in it."""
    if existing:
        _check_sqlite_file(url)
    database = Database(url, background_checkpoints=background_checkpoints, timeout=timeout)
    if existing:
        try:
            with database.read() as conn:
                known = inspect(conn).has_table("alembic_version")
        except Exception as exc:
            database.dispose()
            raise DatabaseError(f"cannot open {database.safe_url}: {exc}") from exc
        if not known:
            database.dispose()
            raise DatabaseError(f"{database.safe_url} is not a haggler database (no store has run on it: "
                                "haggler serve --db creates one)")
    if migrate:
        database.migrate()
    return database


def _check_sqlite_file(url: str) -> None:
    try:
        parsed = make_url(normalize_url(url))
    except Exception as exc:
        raise DatabaseError(f"not a database URL: {url!r}") from exc
    if parsed.get_backend_name() != "sqlite":
        return  # a server database that does not exist fails to connect, and says so
    name = parsed.database or ""
    if name in ("", ":memory:") or not Path(name).expanduser().is_file():
        raise DatabaseError(f"no database at {url} (check --db; haggler serve --db {url} creates one)")


__all__ = ["DEFAULT_DB_TIMEOUT", "Database", "DatabaseError", "WouldBlock", "alembic_config", "normalize_url", "open_database"]
