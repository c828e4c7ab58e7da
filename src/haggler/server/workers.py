"""``haggler serve --workers N``: a small pre-fork supervisor.

Why not uvicorn's own ``workers=``: it starts each worker from an import string in a fresh
interpreter, so the store's configuration would have to be rebuilt there from the command line or
pickled across, and it holds objects that need not pickle (the LLM backend and its SDK clients, the
clock). Here the parent builds and checks the configuration once, binds the listening socket and
forks N workers. Each inherits the configuration as it is, builds the app — opening its own
``Database`` and so its own connection pool, after the fork: a pool opened before it would share
its sockets between processes — and serves the shared socket with ``uvicorn.Server``. The kernel
gives each new connection to whichever worker accepts it first.

The parent serves nothing and holds no database connection. It replaces a worker that dies (after
a pause when the worker died at start-up, so that a store that cannot start does not spin), and on
SIGTERM or SIGINT stops every worker with SIGTERM — each finishes what it is answering, within
uvicorn's graceful timeout — kills any that outlive that, and returns.

Work that must happen once per store runs before the fork (the caller migrates the database and
creates the signing key), or in the one worker that leads (``server/leader.py``).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sys
import time
from typing import Any, Callable

log = logging.getLogger("haggler.workers")

#: A worker that dies sooner than this after it started is restarted after ``RESTART_PAUSE``.
STARTUP_SECONDS = 5.0
RESTART_PAUSE = 1.0
#: How long stopped workers get beyond uvicorn's graceful timeout before they are killed.
STOP_MARGIN = 5.0
_STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


class _Stop(Exception):
    """SIGTERM or SIGINT reached the supervisor."""


def serve_workers(build_app: Callable[[], Any], *, host: str, port: int, workers: int,
                  uvicorn_options: dict[str, Any]) -> None:
    """Serve ``build_app()`` (called in each worker) from ``workers`` processes on one socket,
    until SIGTERM or SIGINT. ``uvicorn_options`` are ``uvicorn.Config``'s (log level, graceful
    timeout, ...), the same for every worker."""
    _log_to_stderr()
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.create_server((host, port), family=family, backlog=2048)
    running: dict[int, float] = {}  # worker pid → when it started

    def stop(*_: object) -> None:
        raise _Stop

    previous = {sig: signal.signal(sig, stop) for sig in _STOP_SIGNALS}
    try:
        for _ in range(workers):
            _start(listener, build_app, uvicorn_options, running)
        while True:
            pid, status = os.wait()
            started = running.pop(pid, None)
            if started is None:
                continue
            log.warning("worker %d %s; starting another", pid, _ended(status))
            if time.monotonic() - started < STARTUP_SECONDS:
                time.sleep(RESTART_PAUSE)
            _start(listener, build_app, uvicorn_options, running)
    except _Stop:
        pass
    finally:
        for sig in _STOP_SIGNALS:  # a second Ctrl-C must not cut the shutdown short
            signal.signal(sig, signal.SIG_IGN)
        _stop_all(running, float(uvicorn_options.get("timeout_graceful_shutdown") or 0) + STOP_MARGIN)
        listener.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _start(listener: socket.socket, build_app: Callable[[], Any], options: dict[str, Any],
           running: dict[int, float]) -> None:
    # Stop signals wait until the new pid is recorded, so that no worker is left unaccounted for.
    signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        pid = os.fork()
        if pid == 0:
            _worker(listener, build_app, options)  # never returns
        running[pid] = time.monotonic()
        log.info("worker %d started", pid)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)


def _worker(listener: socket.socket, build_app: Callable[[], Any], options: dict[str, Any]) -> None:
    """A worker's whole life: build the app, serve until told to stop, exit (never return into
    the parent's code)."""
    import uvicorn

    code = 1
    try:
        for sig in _STOP_SIGNALS:
            signal.signal(sig, signal.SIG_DFL)  # uvicorn installs its own while it serves
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _STOP_SIGNALS)
        server = uvicorn.Server(uvicorn.Config(build_app(), **options))
        server.run(sockets=[listener])
        code = 0 if server.started else 3
    except BaseException:  # noqa: BLE001 - whatever happens, a worker must not run the parent's code
        log.exception("worker %d failed", os.getpid())
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _stop_all(running: dict[int, float], patience: float) -> None:
    """SIGTERM every worker, wait up to ``patience`` seconds for them, then SIGKILL the rest."""
    for pid in running:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + patience
    while running and time.monotonic() < deadline:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid:
            running.pop(pid, None)
        else:
            time.sleep(0.05)
    for pid in running:
        log.warning("worker %d did not stop in %.0f s: killed", pid, patience)
        _signal(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    running.clear()


def _signal(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass  # already gone; waitpid reaps it


def _ended(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"was killed by {signal.Signals(os.WTERMSIG(status)).name}"
    return f"exited with status {os.waitstatus_to_exitcode(status)}"


def _log_to_stderr() -> None:
    """The supervisor's own lines, whatever logging the workers' uvicorn sets up."""
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s:     [supervisor] %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False
