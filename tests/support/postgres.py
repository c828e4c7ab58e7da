"""Throwaway PostgreSQL clusters for the test suite.

A :class:`PostgresCluster` runs ``initdb`` into a fresh temporary directory,
starts a server on a free loopback port with trust authentication and tears
everything down again on :meth:`PostgresCluster.stop`.  The server is tuned for
tests (``fsync=off``) and never touches the system's own clusters.

``initdb`` and ``postgres`` refuse to run as root, so when the test process is
root the server commands are run as the ``postgres`` system user instead.

Cleanup happens, in order of preference, through an explicit ``stop()`` (or the
context manager), an ``atexit`` hook, and a small watchdog process that stops
the server when the test process dies without running ``atexit`` (SIGTERM,
SIGKILL, a CI timeout, ...).

The PostgreSQL server binaries can be installed with ``scripts/install-test-deps``.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["PostgresCluster", "PostgresError", "find_pg_bin"]

#: Where Debian/Ubuntu install the server binaries (one directory per major version).
DEBIAN_PG_GLOB = "/usr/lib/postgresql/*/bin"
#: Environment variable that points at a specific PostgreSQL ``bin`` directory.
PG_BIN_ENV = "HAGGLER_PG_BIN"
#: Superuser created by ``initdb`` and used in the connection URLs.
SUPERUSER = "postgres"
#: Admin database that always exists in a fresh cluster.
ADMIN_DB = "postgres"
#: System user that runs the server when the tests run as root.
SYSTEM_USER = "postgres"

_DB_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


class PostgresError(RuntimeError):
    """The throwaway PostgreSQL cluster could not be set up or used."""


class _ServerExited(Exception):
    """The postmaster exited while we were waiting for it to accept connections."""


def _has_server_binaries(bindir: Path) -> bool:
    return all(os.access(bindir / name, os.X_OK) for name in ("initdb", "pg_ctl", "postgres"))


def _version_key(bindir: Path) -> tuple[int, ...]:
    # /usr/lib/postgresql/<version>/bin -> numeric version, e.g. (15,) or (9, 6)
    try:
        return tuple(int(part) for part in bindir.parent.name.split("."))
    except ValueError:
        return (-1,)


def find_pg_bin() -> Path | None:
    """Return the directory holding ``initdb``/``pg_ctl``/``postgres``, or ``None``.

    Looks at ``$HAGGLER_PG_BIN`` first, then the highest version under
    ``/usr/lib/postgresql/*/bin``, then ``pg_config --bindir``.
    """
    override = os.environ.get(PG_BIN_ENV)
    if override:
        path = Path(override)
        return path if _has_server_binaries(path) else None

    candidates = [
        path for path in Path("/").glob(DEBIAN_PG_GLOB.lstrip("/")) if _has_server_binaries(path)
    ]
    if candidates:
        return max(candidates, key=_version_key)

    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True, timeout=10
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return None
        if out and _has_server_binaries(Path(out)):
            return Path(out)
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no server log)"
    return "\n".join(text.splitlines()[-lines:]) or "(server log is empty)"


# Runs in a separate process (see PostgresCluster._spawn_watchdog).  It blocks on
# stdin, which is a pipe whose only writer is the test process: EOF means the
# test process either called stop() or died.  Then it makes sure the server is
# down and the directory is gone.
_WATCHDOG = r"""
import os, shutil, signal, subprocess, sys
pg_ctl, datadir, base, user = sys.argv[1:5]
try:
    sys.stdin.buffer.read()
except BaseException:
    pass
pidfile = os.path.join(datadir, "postmaster.pid")
if os.path.exists(pidfile):
    kwargs = {}
    if user:
        kwargs = dict(user=user, group=user, extra_groups=[])
    try:
        rc = subprocess.run([pg_ctl, "-D", datadir, "-m", "immediate", "-w", "-t", "20", "stop"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, cwd=base, timeout=40, **kwargs).returncode
    except Exception:
        rc = 1
    if rc != 0:
        try:  # last resort, only if the pid really is this cluster's postmaster
            with open(pidfile) as fh:
                pid = int(fh.readline())
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if datadir.encode() in fh.read():
                    os.kill(pid, signal.SIGKILL)
        except Exception:
            pass
shutil.rmtree(base, ignore_errors=True)
"""


class PostgresCluster:
    """A throwaway PostgreSQL server on 127.0.0.1 with trust authentication.

    >>> with PostgresCluster() as pg:          # doctest: +SKIP
    ...     url = pg.create_database("scratch")
    """

    def __init__(
        self,
        bin_dir: Path | str | None = None,
        *,
        start_timeout: float = 30.0,
        extra_settings: dict[str, str] | None = None,
    ) -> None:
        found = Path(bin_dir) if bin_dir is not None else find_pg_bin()
        if found is None or not _has_server_binaries(found):
            raise PostgresError(
                "PostgreSQL server binaries not found (run scripts/install-test-deps "
                f"or set {PG_BIN_ENV})"
            )
        self.bin_dir: Path = found
        self.start_timeout = start_timeout
        self.settings: dict[str, str] = {
            "listen_addresses": "127.0.0.1",
            "fsync": "off",
            "synchronous_commit": "off",
            "full_page_writes": "off",
            "max_connections": "200",
            "shared_buffers": "64MB",
        }
        self.settings.update(extra_settings or {})
        self.port: int | None = None
        self.base_dir: Path | None = None
        self._owner_pid: int | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._server: subprocess.Popen[bytes] | None = None
        self._run_as: str | None = SYSTEM_USER if os.geteuid() == 0 else None

    # -- paths / URLs -------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        if self.base_dir is None:
            raise PostgresError("cluster is not started")
        return self.base_dir / "data"

    @property
    def log_path(self) -> Path:
        if self.base_dir is None:
            raise PostgresError("cluster is not started")
        return self.base_dir / "server.log"

    @property
    def running(self) -> bool:
        return self.port is not None and self.base_dir is not None

    def url_for(self, dbname: str) -> str:
        """SQLAlchemy URL (psycopg 3 driver) for database ``dbname``."""
        if not self.running:
            raise PostgresError("cluster is not started")
        return f"postgresql+psycopg://{SUPERUSER}@127.0.0.1:{self.port}/{dbname}"

    @property
    def url(self) -> str:
        """SQLAlchemy URL for the cluster's ``postgres`` admin database."""
        return self.url_for(ADMIN_DB)

    def conninfo(self, dbname: str = ADMIN_DB) -> str:
        """libpq/psycopg connection string for ``dbname``."""
        if not self.running:
            raise PostgresError("cluster is not started")
        return f"host=127.0.0.1 port={self.port} user={SUPERUSER} dbname={dbname}"

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> PostgresCluster:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"port={self.port} dir={self.base_dir}" if self.running else "stopped"
        return f"<PostgresCluster {self.bin_dir} {state}>"

    def start(self) -> PostgresCluster:
        """initdb + start the server; returns ``self``.  No-op when already running."""
        if self.running:
            return self
        deadline = time.monotonic() + self.start_timeout
        self._owner_pid = os.getpid()
        atexit.register(self.stop)
        try:
            self._make_base_dir()
            self._spawn_watchdog()
            self._initdb()
            self._start_server(deadline)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server (immediate mode) and delete its directory.  Idempotent."""
        if self.base_dir is None:
            return
        if self._owner_pid is not None and os.getpid() != self._owner_pid:
            return  # a forked child running atexit handlers: not ours to stop
        base = self.base_dir
        server, self._server = self._server, None
        try:
            pidfile = base / "data" / "postmaster.pid"
            if pidfile.exists() or (server is not None and server.poll() is None):
                self._run(
                    [self._bin("pg_ctl"), "-D", str(base / "data"), "-m", "immediate",
                     "-w", "-t", "20", "stop"],
                    timeout=40,
                    check=False,
                )
            if server is not None:
                try:
                    server.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    server.kill()
                    server.wait(timeout=10)
        finally:
            shutil.rmtree(base, ignore_errors=True)
            self.base_dir = None
            self.port = None
            self._stop_watchdog()
            atexit.unregister(self.stop)

    def halt(self) -> None:
        """Shut the server down (``fast``: sessions are ended, as in a restart), keeping its data
        and its port, so that :meth:`resume` brings the same databases back where clients expect
        them: a database restart as a running application sees it."""
        if not self.running:
            raise PostgresError("cluster is not started")
        self._run([self._bin("pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "20", "stop"],
                  timeout=40)
        server, self._server = self._server, None
        if server is not None:
            server.wait(timeout=10)

    def resume(self) -> None:
        """Start the halted server again on the same port."""
        if not self.running or self._server is not None:
            raise PostgresError("resume() needs a cluster stopped by halt()")
        self._start_server(time.monotonic() + self.start_timeout, port=self.port)

    # -- databases ----------------------------------------------------------------------

    def create_database(self, name: str) -> str:
        """Create database ``name`` and return a SQLAlchemy URL for it."""
        self._check_db_name(name)
        self._admin_execute("CREATE DATABASE {}", name)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        """Drop database ``name``, terminating any connections still open to it."""
        self._check_db_name(name)
        self._admin_execute("DROP DATABASE IF EXISTS {} WITH (FORCE)", name)

    # -- internals ----------------------------------------------------------------------

    @staticmethod
    def _check_db_name(name: str) -> None:
        if not _DB_NAME_RE.match(name):
            raise ValueError(
                f"invalid database name {name!r}: use letters, digits and _ (max 63 chars)"
            )

    def _admin_execute(self, template: str, name: str) -> None:
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.conninfo(), autocommit=True, connect_timeout=10) as conn:
            conn.execute(sql.SQL(template).format(sql.Identifier(name)))

    def _bin(self, name: str) -> str:
        return str(self.bin_dir / name)

    def _user_kwargs(self) -> dict[str, Any]:
        if self._run_as is None:
            return {}
        return {"user": self._run_as, "group": self._run_as, "extra_groups": []}

    @staticmethod
    def _server_env() -> dict[str, str]:
        # PGDATA, PGPORT, ... from the caller's environment must not leak into our cluster.
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.setdefault("LC_ALL", "C.UTF-8")
        return env

    def _run(
        self, cmd: list[str], *, timeout: float, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            cmd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            cwd=self.base_dir,
            env=self._server_env(),
            timeout=timeout,
            **self._user_kwargs(),
        )
        if check and proc.returncode != 0:
            raise PostgresError(
                f"{' '.join(cmd)} failed with exit code {proc.returncode}:\n"
                f"{proc.stdout}{proc.stderr}"
            )
        return proc

    def _make_base_dir(self) -> None:
        if self._run_as is not None:
            import pwd

            try:
                pw = pwd.getpwnam(self._run_as)
            except KeyError:
                raise PostgresError(
                    f"running as root but there is no {self._run_as!r} system user to run "
                    "the PostgreSQL server as (initdb/postgres refuse to run as root)"
                ) from None
            # /tmp is world-traversable; the default tempdir may not be (e.g. TMPDIR=/root/tmp).
            base = Path(tempfile.mkdtemp(prefix="haggler-pg-", dir="/tmp"))
            os.chown(base, pw.pw_uid, pw.pw_gid)
        else:
            base = Path(tempfile.mkdtemp(prefix="haggler-pg-"))
        os.chmod(base, 0o700)
        self.base_dir = base

    def _spawn_watchdog(self) -> None:
        assert self.base_dir is not None
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, self._bin("pg_ctl"), str(self.data_dir),
             str(self.base_dir), self._run_as or ""],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # survive Ctrl-C / process-group kills of the tests
        )

    def _stop_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is None:
            return
        try:
            if watchdog.stdin is not None:
                watchdog.stdin.close()
            watchdog.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            watchdog.kill()

    def _initdb(self) -> None:
        self._run(
            [self._bin("initdb"), "-D", str(self.data_dir), "-U", SUPERUSER, "-A", "trust",
             "-E", "UTF8", "--no-locale", "--no-sync", "--no-instructions"],
            timeout=max(self.start_timeout, 60),
        )

    def _start_server(self, deadline: float, port: int | None = None) -> None:
        # The postmaster is started directly (not via ``pg_ctl start``) so that it is
        # our child: we notice at once if it dies during startup and reap it on stop.
        # A given port (a restart) is tried once: clients expect the server there.
        last_error = ""
        for _attempt in range(1 if port else 5):
            self.port = port or _free_port()
            settings = dict(self.settings, port=str(self.port),
                            unix_socket_directories=str(self.data_dir))
            cmd = [self._bin("postgres"), "-D", str(self.data_dir)]
            for key, value in settings.items():
                cmd += ["-c", f"{key}={value}"]
            with open(self.log_path, "wb") as log:
                self._server = subprocess.Popen(
                    cmd,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.base_dir,
                    env=self._server_env(),
                    start_new_session=True,  # a Ctrl-C must not shut it down under the tests
                    **self._user_kwargs(),
                )
            try:
                self._wait_until_ready(deadline)
                return
            except _ServerExited:
                self._server = None
                log_tail = _tail(self.log_path)
                last_error = f"--- server log (tail) ---\n{log_tail}"
                if "could not bind" in log_tail or "already in use" in log_tail:
                    continue  # lost a race for the port: try another one
                break
        raise PostgresError(f"PostgreSQL server ({self.bin_dir}) failed to start:\n{last_error}")

    def _wait_until_ready(self, deadline: float) -> None:
        import psycopg

        last: Exception | None = None
        while True:
            if self._server is None or self._server.poll() is not None:
                raise _ServerExited
            try:
                with psycopg.connect(self.conninfo(), connect_timeout=2) as conn:
                    conn.execute("select 1")
                return
            except psycopg.OperationalError as exc:
                last = exc
            if time.monotonic() >= deadline:
                raise PostgresError(
                    f"PostgreSQL server on 127.0.0.1:{self.port} is not accepting "
                    f"connections after {self.start_timeout:g}s: {last}\n"
                    f"--- server log (tail) ---\n{_tail(self.log_path)}"
                )
            time.sleep(0.1)
