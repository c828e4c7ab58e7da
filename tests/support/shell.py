"""One bash session driven command by command, as a reader types into a terminal.

A variable one command sets (``T=$(curl ...)``) is there for the next, as in the reader's shell,
so a page's commands can be run in order and each one's exit status and output read on its own.
"""

from __future__ import annotations

import os
import secrets
import select
import signal
import subprocess
import time
from pathlib import Path


class ShellSession:
    """``bash`` in ``cwd``; :meth:`run` sends one command and returns its status and output.

    Each command reads standard input from ``/dev/null`` (a command that reads its input, such
    as a stdio MCP server, sees the end of it instead of the commands that follow). Everything
    the session started, background processes included, is ended by :meth:`close`.
    """

    def __init__(self, cwd: Path, env: dict[str, str]) -> None:
        self._bash = subprocess.Popen(["bash", "--noprofile", "--norc"], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self._pending = b""

    def run(self, command: str, timeout: float) -> tuple[int, str]:
        """Run ``command``; its exit status and everything it printed (stdout and stderr)."""
        marker = f"__done_{secrets.token_hex(8)}__"
        assert self._bash.stdin is not None
        self._bash.stdin.write(f"{{ {command}\n}} < /dev/null\n__status=$?; echo; echo {marker} $__status\n".encode())
        self._bash.stdin.flush()
        output = self._read_until(marker.encode(), timeout, command)
        body, _, status = output.rpartition(marker.encode())
        return int(status.strip()), body.decode(errors="replace").removesuffix("\n")

    def _read_until(self, marker: bytes, timeout: float, command: str) -> bytes:
        assert self._bash.stdout is not None
        fd = self._bash.stdout.fileno()
        deadline = time.monotonic() + timeout
        while True:
            end = self._pending.find(marker)
            if end != -1:
                newline = self._pending.find(b"\n", end)
                if newline != -1:
                    output, self._pending = self._pending[:newline], self._pending[newline + 1:]
                    return output
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no end within {timeout:.0f} s of: {command}\n{self._pending.decode(errors='replace')}")
            ready, _, _ = select.select([fd], [], [], left)
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise RuntimeError(f"bash exited while running: {command}\n{self._pending.decode(errors='replace')}")
                self._pending += chunk

    def close(self) -> None:
        """End the session and every process it started."""
        try:
            os.killpg(self._bash.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self._bash.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self._bash.pid, signal.SIGKILL)
            self._bash.wait()
