"""A throwaway Synapse homeserver on loopback, and shared-secret registration of its users.

:class:`LocalSynapse` writes a minimal configuration into a fresh temporary directory (SQLite,
one client listener on 127.0.0.1, no federation listener, registration closed except through the
shared secret), runs ``python -m synapse.app.homeserver`` as a child process and waits until the
client API answers. It is what the tests run against and what ``haggler market scenario`` starts
when it is given no homeserver: a real Synapse, so that what passes here passes against a
homeserver an operator runs.

Synapse is AGPL-3.0, so haggler never imports it: it is started with an interpreter that has it
installed (``sys.executable`` by default, from the ``haggler[matrix-homeserver]`` extra, or any
other given as ``python``), and spoken to over HTTP only. The configuration is written as JSON,
which Synapse's YAML reader reads as it is, so nothing here needs a YAML library either.

The process is stopped with SIGTERM, then SIGKILL after ``stop_timeout``; a small watchdog
process does the same, and removes the directory, should the process that started the homeserver
die without stopping it (SIGKILL, a CI timeout), so no Synapse outlives its owner.
:meth:`LocalSynapse.halt` and :meth:`LocalSynapse.resume` (or :meth:`LocalSynapse.restart`) stop
and start it again on the same port with its data kept: a homeserver restart as a bot sees it.
"""

from __future__ import annotations

import atexit
import base64
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Self

import httpx

from haggler.server.threaded import free_port

__all__ = ["HomeserverError", "LocalSynapse", "LOOSE_RATE_LIMITS", "MatrixAccount", "register_user",
           "registration_mac"]

#: Synapse's rate limits (its ``rc_*`` options) loosened so that a test suite, which registers,
#: logs in, joins and sends far faster than people do, is never throttled by accident. A test that
#: wants ``M_LIMIT_EXCEEDED`` overrides one of them (``rate_limits={"rc_message": {...}}``).
LOOSE_RATE_LIMITS: Mapping[str, Mapping[str, Any]] = {
    "rc_message": {"per_second": 1000, "burst_count": 1000},
    "rc_registration": {"per_second": 1000, "burst_count": 1000},
    "rc_login": {name: {"per_second": 1000, "burst_count": 1000}
                 for name in ("address", "account", "failed_attempts")},
    "rc_joins": {name: {"per_second": 1000, "burst_count": 1000} for name in ("local", "remote")},
    "rc_joins_per_room": {"per_second": 1000, "burst_count": 1000},
    "rc_invites": {name: {"per_second": 1000, "burst_count": 1000}
                   for name in ("per_room", "per_user", "per_issuer")},
    "rc_room_creation": {"per_second": 1000, "burst_count": 1000},
    "rc_admin_redaction": {"per_second": 1000, "burst_count": 1000},
}

#: Where a Synapse's client API says which versions of the spec it speaks: answered once it serves.
_READY_PATH = "/_matrix/client/versions"
_REGISTER_PATH = "/_synapse/admin/v1/register"


class HomeserverError(RuntimeError):
    """The homeserver could not be started, or refused a request (``status`` and Matrix
    ``errcode`` then say how)."""

    def __init__(self, message: str, *, status: int | None = None, errcode: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.errcode = errcode


class MatrixAccount(NamedTuple):
    """A registered user: the Matrix id, and an access token and device already logged in."""

    user_id: str
    access_token: str
    device_id: str


def registration_mac(shared_secret: str, nonce: str, localpart: str, password: str, admin: bool) -> str:
    """Synapse's shared-secret registration MAC: HMAC-SHA1 under the secret of the nonce, user,
    password and ``admin``/``notadmin``, separated by NULs, as a hex digest."""
    message = b"\x00".join(part.encode() for part in (nonce, localpart, password, "admin" if admin else "notadmin"))
    return hmac.new(shared_secret.encode(), message, hashlib.sha1).hexdigest()


def register_user(base_url: str, shared_secret: str, localpart: str, password: str, *,
                  admin: bool = False, timeout: float = 30.0) -> MatrixAccount:
    """Register ``localpart`` on any Synapse through its shared-secret admin API (a one-time nonce,
    then the registration signed with :func:`registration_mac`), with nothing opened to the public.

    Raises :class:`HomeserverError` with Synapse's status and ``errcode`` when it refuses (a wrong
    secret is 403, a taken name 400 ``M_USER_IN_USE``).
    """
    with httpx.Client(base_url=base_url, timeout=timeout) as http:
        nonce = _answer(http.get(_REGISTER_PATH))["nonce"]
        body = {"nonce": nonce, "username": localpart, "password": password, "admin": admin,
                "mac": registration_mac(shared_secret, nonce, localpart, password, admin)}
        answer = _answer(http.post(_REGISTER_PATH, json=body))
    return MatrixAccount(answer["user_id"], answer["access_token"], answer["device_id"])


def _answer(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code != 200:
        errcode = body.get("errcode") if isinstance(body, dict) else None
        error = body.get("error") if isinstance(body, dict) else None
        raise HomeserverError(f"{response.request.method} {response.request.url.path}: {response.status_code} "
                              f"{errcode or ''} {error or response.text[:200]}".rstrip(),
                              status=response.status_code, errcode=errcode)
    return body


# Runs as its own process (LocalSynapse._spawn_watchdog). Its stdin is a pipe from the owner, who
# writes the pid of each Synapse it starts; at EOF (the owner stopped it, or died) it ends the last
# one, if that pid still runs this homeserver's configuration, and removes the directory.
_WATCHDOG = r"""
import os, shutil, signal, sys, time
config, base = sys.argv[1:3]
pid = None
for line in sys.stdin:
    pid = int(line)
def ours(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return config.encode() in fh.read()
    except OSError:
        return False
if pid is not None and ours(pid):
    try:
        os.killpg(pid, signal.SIGTERM)
        for _ in range(100):
            if not ours(pid):
                break
            time.sleep(0.1)
        else:
            os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
shutil.rmtree(base, ignore_errors=True)
"""


class LocalSynapse:
    """A Synapse on a free 127.0.0.1 port, its data in a temporary directory, for as long as the
    ``with`` lasts (or from :meth:`start` to :meth:`stop`).

    >>> with LocalSynapse() as synapse:                      # doctest: +SKIP
    ...     alice = synapse.register("alice", "secret")
    ...     synapse.url, alice.user_id                       # ('http://127.0.0.1:…', '@alice:localhost')
    """

    def __init__(self, *, python: str | os.PathLike[str] = sys.executable, server_name: str = "localhost",
                 rate_limits: Mapping[str, Mapping[str, Any]] | None = None,
                 start_timeout: float = 60.0, stop_timeout: float = 10.0) -> None:
        """``python`` is the interpreter that has ``matrix-synapse`` installed; ``rate_limits``
        replaces :data:`LOOSE_RATE_LIMITS`' entries by option (``rc_message``, ``rc_login``, ...)."""
        self.python = os.fspath(python)
        self.server_name = server_name
        self.rate_limits = {**LOOSE_RATE_LIMITS, **(rate_limits or {})}
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        #: The secret that registers users (:meth:`register`); new for each homeserver.
        self.registration_shared_secret = secrets.token_urlsafe(32)
        self.port: int | None = None
        self.base_dir: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._watchdog: subprocess.Popen[bytes] | None = None
        self._owner_pid: int | None = None

    # -- where it is ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """The client API's base URL (``http://127.0.0.1:PORT``)."""
        if self.port is None:
            raise HomeserverError("the homeserver is not started")
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """Whether the Synapse process is up (not before :meth:`start`, after :meth:`halt` or :meth:`stop`)."""
        return self.pid is not None

    @property
    def pid(self) -> int | None:
        """The Synapse process's id while it runs (a test may kill it as a crash would)."""
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    @property
    def log_path(self) -> Path:
        """Synapse's own log (what :class:`HomeserverError` quotes the end of when it fails)."""
        return self._dir() / "homeserver.log"

    @property
    def config_path(self) -> Path:
        return self._dir() / "homeserver.yaml"

    def user_id(self, localpart: str) -> str:
        return f"@{localpart}:{self.server_name}"

    def room_alias(self, name: str) -> str:
        return f"#{name}:{self.server_name}"

    def register(self, localpart: str, password: str, *, admin: bool = False) -> MatrixAccount:
        """Register a user with this homeserver's shared secret (see :func:`register_user`)."""
        return register_user(self.url, self.registration_shared_secret, localpart, password, admin=admin)

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"{self.url} in {self.base_dir}" if self.running else "not running"
        return f"<LocalSynapse {self.server_name} {state}>"

    def start(self) -> Self:
        """Write the configuration, start Synapse and wait until it answers; a no-op once started.

        A port taken by another process between choosing and binding it is retried on another;
        any other failure stops everything started and raises :class:`HomeserverError` with the
        end of Synapse's log.
        """
        if self.base_dir is not None:
            return self
        self._owner_pid = os.getpid()
        atexit.register(self.stop)
        try:
            self.base_dir = Path(tempfile.mkdtemp(prefix="haggler-synapse-"))
            self._spawn_watchdog()
            self._write_signing_key()
            for attempt in range(3):
                self.port = free_port()
                self._write_config()
                try:
                    self._launch()
                    break
                except _PortTaken:
                    if attempt == 2:
                        raise HomeserverError(f"no free port for Synapse after 3 tries\n{self._log_tail()}") from None
        except BaseException:
            self.stop()
            raise
        return self

    def halt(self) -> None:
        """Stop Synapse, keeping its data and port for :meth:`resume`."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=self.stop_timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def resume(self) -> None:
        """Start Synapse again after :meth:`halt`, on the same port, with the same data."""
        if self.base_dir is None:
            raise HomeserverError("resume() needs a homeserver started, then halted")
        if self.running:
            return
        try:
            self._launch()
        except _PortTaken:
            raise HomeserverError(f"port {self.port} was taken while the homeserver was halted") from None

    def restart(self) -> None:
        """:meth:`halt`, then :meth:`resume`: users, rooms and messages are all still there."""
        self.halt()
        self.resume()

    def stop(self) -> None:
        """Stop Synapse and delete its directory; idempotent."""
        if self.base_dir is None or os.getpid() != self._owner_pid:
            return  # never started, already stopped, or a forked child running atexit handlers
        try:
            self.halt()
        finally:
            self._stop_watchdog()
            shutil.rmtree(self.base_dir, ignore_errors=True)
            self.base_dir = None
            self.port = None
            atexit.unregister(self.stop)

    # -- internals --------------------------------------------------------------------------

    def _dir(self) -> Path:
        if self.base_dir is None:
            raise HomeserverError("the homeserver is not started")
        return self.base_dir

    def _write_signing_key(self) -> None:
        # Synapse's key file (signedjson's format): algorithm, key id, the Ed25519 seed in unpadded
        # base64. Written here rather than by `synapse.app.homeserver --generate-keys`, which would
        # cost a second start of Synapse's interpreter on every homeserver.
        seed = base64.b64encode(secrets.token_bytes(32)).decode().rstrip("=")
        (self._dir() / "signing.key").write_text(f"ed25519 a_{secrets.token_hex(2)} {seed}\n")

    def _write_config(self) -> None:
        base = self._dir()
        logging_config = {
            "version": 1,
            "formatters": {"precise": {"format": "%(asctime)s %(name)s %(levelname)s %(message)s"}},
            "handlers": {"file": {"class": "logging.FileHandler", "filename": str(self.log_path),
                                  "formatter": "precise"}},
            "root": {"level": "INFO", "handlers": ["file"]},
            "disable_existing_loggers": False,
        }
        (base / "log.config").write_text(json.dumps(logging_config, indent=1))
        config = {
            "server_name": self.server_name,
            "listeners": [{"port": self.port, "bind_addresses": ["127.0.0.1"], "type": "http", "tls": False,
                           "x_forwarded": False, "resources": [{"names": ["client"], "compress": False}]}],
            "database": {"name": "sqlite3", "args": {"database": str(base / "homeserver.db")}},
            "log_config": str(base / "log.config"),
            "media_store_path": str(base / "media_store"),
            "signing_key_path": str(base / "signing.key"),
            "registration_shared_secret": self.registration_shared_secret,
            "enable_registration": False,
            "macaroon_secret_key": secrets.token_urlsafe(32),
            "form_secret": secrets.token_urlsafe(32),
            "report_stats": False,
            # No federation: nothing to fetch keys from, and no warning about matrix.org as a key server.
            "trusted_key_servers": [],
            "suppress_key_server_warning": True,
            # The market's room is public and listed in the room directory, so anyone may publish one.
            "room_list_publication_rules": [{"action": "allow"}],
            "presence": {"enabled": False},
            **self.rate_limits,
        }
        self.config_path.write_text(json.dumps(config, indent=1))

    def _launch(self) -> None:
        """Start the process and wait until it answers; :class:`_PortTaken` if it could not bind."""
        base = self._dir()
        with open(base / "stderr.log", "ab") as stderr:
            self._process = subprocess.Popen(
                [self.python, "-m", "synapse.app.homeserver", "--config-path", str(self.config_path)],
                cwd=base, stdin=subprocess.DEVNULL, stdout=stderr, stderr=stderr,
                start_new_session=True,  # its own process group: a Ctrl-C to the tests is not also Synapse's
            )
        assert self._watchdog is not None and self._watchdog.stdin is not None
        self._watchdog.stdin.write(f"{self._process.pid}\n".encode())
        self._watchdog.stdin.flush()
        deadline = time.monotonic() + self.start_timeout
        with httpx.Client(timeout=5.0) as http:
            while True:
                if self._process.poll() is not None:
                    code, tail = self._process.returncode, self._log_tail()
                    self._process = None
                    if "Address already in use" in tail:
                        raise _PortTaken
                    hint = (f"\n{self.python} has no Synapse: install haggler[matrix-homeserver] there, "
                            "or pass the Python that has it" if "No module named 'synapse'" in tail else "")
                    raise HomeserverError(f"Synapse exited with status {code} while starting "
                                          f"({self.python} -m synapse.app.homeserver):\n{tail}{hint}")
                try:
                    if http.get(self.url + _READY_PATH).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    self.halt()
                    raise HomeserverError(f"Synapse did not answer {_READY_PATH} within "
                                          f"{self.start_timeout:g} s:\n{self._log_tail()}")
                time.sleep(0.1)

    def _log_tail(self, lines: int = 30) -> str:
        """The end of Synapse's stderr (an import or configuration error) and of its log."""
        parts = []
        for name in ("stderr.log", "homeserver.log"):
            try:
                text = (self._dir() / name).read_text(errors="replace").strip()
            except OSError:
                continue
            if text:
                parts.append(f"--- {name} ---\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts) or "(Synapse wrote no log)"

    def _spawn_watchdog(self) -> None:
        self._watchdog = subprocess.Popen(
            [sys.executable, "-c", _WATCHDOG, str(self.config_path), str(self._dir())],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True,  # outlives a signal to the owner's process group
        )

    def _stop_watchdog(self) -> None:
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is None:
            return
        if watchdog.stdin is not None:
            watchdog.stdin.close()
        try:
            watchdog.wait(timeout=self.stop_timeout + 5)
        except subprocess.TimeoutExpired:
            watchdog.kill()
            watchdog.wait()


class _PortTaken(Exception):
    """Synapse could not bind its port: another process took it after it was found free."""
