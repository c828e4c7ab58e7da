#!/usr/bin/env python3
"""negotiate.v1 turns against the bare endpoint, loaded by ``wrk`` (Debian's package), so that the
load generator is not the bottleneck: wrk is C and spends a fraction of a core where a Python
client would need more than the server.

Starts ``haggler serve`` (fresh SQLite in a temporary directory unless ``--db`` names one) and
runs, each for ``--seconds`` with ``--connections`` keep-alive connections (one wrk thread each):

1. **bare** — ``GET /healthz`` on the same stack, half before and half after phase 2 so that drift
   in the machine's speed hits both sides;
2. **turns** — every connection runs whole negotiate.v1 chats back to back through the ``next``
   URLs (``benchmarks/wrk/negotiate.lua``: a start, offers rising from 60% of list price, "deal").

Server CPU is read from ``/proc`` around each phase, so the cost of a request is reported beside
its rate. ``ratio`` is chat requests per second (starts and turns) over bare requests per second.
The last line is::

    RESULT tool=wrk connections=32 seconds=10 db=sqlite bare_rps=... chat_rps=... turns_per_s=...
           ratio=... p50_ms=... p99_ms=... bare_p50_ms=... bare_p99_ms=... cpu_ms_per_chat_request=...
           cpu_ms_per_bare=... starts=... turns=... deals=... errors=...

Bounded in time (each phase's ``--seconds``), loopback only; the server is always stopped.
Usage: ``.venv/bin/python benchmarks/wrk_store.py [--connections 32] [--seconds 10] [--db URL]``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from http_store import ServerFailed, StoreServer, _proc_cpu_seconds  # noqa: E402

SCRIPTS = Path(__file__).resolve().parent / "wrk"
GOAL_RATIO = 0.5
GOAL_P99_MS = 20.0
GOAL_TURNS_PER_S = 2000


@dataclass(frozen=True)
class Phase:
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu_s: float
    counts: dict[str, int]

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.server_cpu_s / self.requests if self.requests else float("nan")


def _fields(line_tag: str, output: str) -> dict[str, float]:
    found = re.search(rf"^{line_tag} (.*)$", output, re.M)
    if found is None:
        raise ServerFailed(f"wrk printed no {line_tag} line:\n{output}")
    return {k: float(v) for k, v in (pair.split("=") for pair in found.group(1).split())}


def run_wrk(server: StoreServer, script: str, path: str, connections: int, seconds: int) -> Phase:
    """One wrk run against ``path`` with ``script``; the server's CPU seconds around it."""
    before = _proc_cpu_seconds(server.pid)
    done = subprocess.run(
        ["wrk", "-t", str(connections), "-c", str(connections), "-d", f"{seconds}s", "--timeout", "10s",
         "-s", str(SCRIPTS / script), f"{server.base}{path}"],
        capture_output=True, text=True, timeout=seconds + 60, check=False)
    cpu = _proc_cpu_seconds(server.pid) - before
    server.check_alive()
    if done.returncode != 0:
        raise ServerFailed(f"wrk failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    latency = _fields("LATENCY", done.stdout)
    counts = {k: int(v) for k, v in _fields("COUNTS", done.stdout).items()} if "COUNTS " in done.stdout else {}
    return Phase(int(latency["requests"]), int(latency["errors"]), latency["seconds"], latency["p50_us"] / 1000,
                 latency["p99_us"] / 1000, cpu, counts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=32, help="keep-alive connections, one wrk thread each")
    parser.add_argument("--seconds", type=int, default=10, help="length of the turns phase in whole seconds "
                        "(the bare phase runs as long, in two halves)")
    parser.add_argument("--db", default=None, metavar="URL", help="database URL (default: fresh SQLite)")
    args = parser.parse_args(argv)
    if not 1 <= args.connections <= 256 or not 2 <= args.seconds <= 600:
        parser.error("--connections must be 1-256 and --seconds 2-600")
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk (Debian's package)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="haggler-wrk-") as tmp:
        db = args.db or f"sqlite:///{tmp}/store.db"
        server = StoreServer(db, Path(tmp), seed=1)
        try:
            server.start(timeout=30)
            half = args.seconds // 2  # wrk takes whole seconds
            bare_a = run_wrk(server, "bare.lua", "/healthz", args.connections, half)
            chats = run_wrk(server, "negotiate.lua", "/", args.connections, args.seconds)
            bare_b = run_wrk(server, "bare.lua", "/healthz", args.connections, half)
        except ServerFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            server.stop()
    bare_requests = bare_a.requests + bare_b.requests
    bare_seconds = bare_a.seconds + bare_b.seconds
    bare_rps = bare_requests / bare_seconds
    bare_cpu = 1000 * (bare_a.server_cpu_s + bare_b.server_cpu_s) / bare_requests
    turns_per_s = chats.counts.get("turns", 0) / chats.seconds
    ratio = chats.rps / bare_rps if bare_rps else 0.0
    errors = chats.errors + bare_a.errors + bare_b.errors + chats.counts.get("errors", 0)
    print(f"bare   {bare_rps:9.0f} req/s  p50 {max(bare_a.p50_ms, bare_b.p50_ms):6.2f} ms  "
          f"p99 {max(bare_a.p99_ms, bare_b.p99_ms):6.2f} ms  server CPU {bare_cpu:.3f} ms/request")
    print(f"chats  {chats.rps:9.0f} req/s  p50 {chats.p50_ms:6.2f} ms  p99 {chats.p99_ms:6.2f} ms  "
          f"server CPU {chats.cpu_ms_per_request:.3f} ms/request  ({turns_per_s:.0f} turns/s, "
          f"{chats.counts.get('starts', 0)} starts, {chats.counts.get('deals', 0)} deals)")
    print(f"goals: turns/s >= {GOAL_TURNS_PER_S}: {'met' if turns_per_s >= GOAL_TURNS_PER_S else 'not met'}; "
          f"ratio >= {GOAL_RATIO}: {'met' if ratio >= GOAL_RATIO else 'not met'} ({ratio:.2f}); "
          f"p99 < {GOAL_P99_MS:.0f} ms: {'met' if chats.p99_ms < GOAL_P99_MS else 'not met'}")
    dialect = "sqlite" if (args.db or "sqlite").startswith("sqlite") else "postgresql"
    print(f"RESULT tool=wrk connections={args.connections} seconds={args.seconds:g} db={dialect} "
          f"bare_rps={bare_rps:.0f} chat_rps={chats.rps:.0f} turns_per_s={turns_per_s:.0f} ratio={ratio:.3f} "
          f"p50_ms={chats.p50_ms:.2f} p99_ms={chats.p99_ms:.2f} "
          f"bare_p50_ms={max(bare_a.p50_ms, bare_b.p50_ms):.2f} bare_p99_ms={max(bare_a.p99_ms, bare_b.p99_ms):.2f} "
          f"cpu_ms_per_chat_request={chats.cpu_ms_per_request:.3f} cpu_ms_per_bare={bare_cpu:.3f} "
          f"starts={chats.counts.get('starts', 0)} turns={chats.counts.get('turns', 0)} "
          f"deals={chats.counts.get('deals', 0)} errors={errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
