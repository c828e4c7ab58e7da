"""Real HTTP servers for end-to-end tests.

``ThreadedServer`` runs a haggler app under uvicorn in a thread of the test process (so a test
can inject a clock); ``ProcessServer`` runs ``haggler serve`` as a separate process (so a test
can kill it). Both listen on a free loopback port and stop by themselves.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import httpx

from haggler.server.threaded import ThreadedServer, free_port

__all__ = ["FakeClock", "ProcessServer", "ThreadedServer", "free_port"]


class FakeClock:
    """A settable clock for time-dependent rules: tests move time instead of sleeping."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
        self._lock = threading.Lock()

    def __call__(self) -> datetime:
        with self._lock:
            return self.now

    def advance(self, **kwargs: float) -> None:
        with self._lock:
            self.now += timedelta(**kwargs)


class ProcessServer:
    """``python -m haggler serve`` in a child process."""

    def __init__(self, *args: str, cwd: Path, port: int | None = None, env: dict[str, str] | None = None) -> None:
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.args = [sys.executable, "-m", "haggler", "serve", "--port", str(self.port), "--log-level", "warning", *args]
        self.cwd = cwd
        self.env = env or {}
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = cwd / f"server-{self.port}.log"

    def start(self, timeout: float = 120) -> "ProcessServer":
        """Start the server and wait until it answers: seconds when idle, far longer under load."""
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(self.args, cwd=self.cwd, stdout=log, stderr=subprocess.STDOUT,
                                     env={**os.environ, **self.env, "PYTHONUNBUFFERED": "1"})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}:\n{self.log()}")
            try:
                if httpx.get(f"{self.base}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server did not answer within {timeout}s:\n{self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: no shutdown handlers, no flushing — a crash."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)

    def __enter__(self) -> "ProcessServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
