#!/usr/bin/env python3
"""negotiate.v1 turns against the bare endpoint, loaded by ``wrk`` (Debian's package), so that the
load generator is not the bottleneck: wrk is C and spends a fraction of a core where a Python
client would need more than the server.

Each *setup* is a database and a number of workers: ``haggler serve`` is started on it and runs,
each for ``--seconds`` with ``--connections`` keep-alive connections (one wrk thread each):

1. **bare** — ``GET /healthz`` on the same stack, half before and half after phase 2 so that drift
   in the machine's speed hits both sides;
2. **turns** — every connection runs whole negotiate.v1 chats back to back through the ``next``
   URLs (``benchmarks/wrk/negotiate.lua``: a start, offers rising from 60% of list price, "deal").

Server CPU (the serving processes, a supervisor's workers included) is read from ``/proc`` around
each phase, so the cost of a request is reported beside its rate. ``ratio`` is chat requests per
second (starts and turns) over bare requests per second.

By default one setup runs: SQLite, one worker (``--db`` or ``--postgres`` and ``--workers`` pick
another). ``--matrix`` runs issue 18's three in one run: SQLite with 1 worker, PostgreSQL with 1
and with 2; PostgreSQL is a throwaway cluster on loopback (``tests/support/postgres.py``) with
production durability (fsync, synchronous commit, full-page writes on). ``--soak SECONDS`` then
keeps chats going on the last setup at a quarter of the connections and prints each worker's
resident memory every ``--soak-sample`` seconds, and its growth after the first sample.

Saturated figures on a small shared machine move between runs (a p99 by several milliseconds), so
``--runs N`` measures each setup N times on the same server and reports the median of every figure
with its range; the goals are judged on the medians, and the ``RESULT`` line carries the medians
and each setup's range of turns/s and p99 (``..._min``/``..._max``).

The last line is ``RESULT`` with each setup's figures under its name (``sqlite_1``,
``postgresql_1``, ``postgresql_2``)::

    RESULT tool=wrk connections=32 seconds=10 sqlite_1_turns_per_s=... sqlite_1_ratio=... ...
           postgresql_2_over_1=... soak_seconds=... soak_growth_mb_max=...

Bounded in time (each phase's ``--seconds``, the soak's length), loopback only; servers and the
cluster are always stopped. Exit status 1 when a request failed.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import shutil
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from http_store import ServerFailed, StoreServer, _proc_cpu_seconds  # noqa: E402

SCRIPTS = Path(__file__).resolve().parent / "wrk"
GOAL_RATIO = 0.5
GOAL_P99_MS = 20.0
GOAL_PG_P99_MS = 50.0
GOAL_TURNS_PER_S = 2000
GOAL_TWO_WORKERS = 1.7
#: A production cluster's durability, not the test suite's fsync=off.
DURABLE = {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}


@dataclass(frozen=True)
class Phase:
    requests: int
    errors: int
    seconds: float
    p50_ms: float
    p99_ms: float
    server_cpu_s: float
    counts: dict[str, int]
    #: CPU seconds of the database server's processes (PostgreSQL's postmaster and backends), NaN for SQLite.
    db_cpu_s: float = float("nan")

    @property
    def rps(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0

    @property
    def cpu_ms_per_request(self) -> float:
        return 1000 * self.server_cpu_s / self.requests if self.requests else float("nan")

    @property
    def db_cpu_ms_per_request(self) -> float:
        return 1000 * self.db_cpu_s / self.requests if self.requests else float("nan")


@dataclass(frozen=True)
class Setup:
    name: str
    db_url: str
    workers: int
    #: The PostgreSQL postmaster's pid, whose processes' CPU is the database's cost.
    db_pid: int | None = None


@dataclass(frozen=True)
class Figures:
    """One setup's run: the bare phases together, the chats phase."""

    bare_rps: float
    bare_p50_ms: float
    bare_p99_ms: float
    bare_cpu_ms: float
    chats: Phase
    errors: int

    @property
    def turns_per_s(self) -> float:
        return self.chats.counts.get("turns", 0) / self.chats.seconds if self.chats.seconds else 0.0

    @property
    def ratio(self) -> float:
        return self.chats.rps / self.bare_rps if self.bare_rps else 0.0


def _fields(line_tag: str, output: str) -> dict[str, float]:
    found = re.search(rf"^{line_tag} (.*)$", output, re.M)
    if found is None:
        raise ServerFailed(f"wrk printed no {line_tag} line:\n{output}")
    return {k: float(v) for k, v in (pair.split("=") for pair in found.group(1).split())}


def serving_pids(pid: int) -> list[int]:
    """``pid`` and every process below it (a supervisor's workers)."""
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        try:
            for task in Path(f"/proc/{current}/task").iterdir():
                queue.extend(int(child) for child in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def tree_cpu_seconds(pid: int) -> float:
    """CPU seconds of the serving processes now alive (a worker that died takes its seconds along)."""
    return sum(_proc_cpu_seconds(p) for p in serving_pids(pid))


def postmaster(cluster: object) -> int:
    """The pid of a throwaway cluster's postmaster (the first line of its postmaster.pid)."""
    return int((cluster.data_dir / "postmaster.pid").read_text().split()[0])  # type: ignore[attr-defined]


def resident_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def run_wrk(server: StoreServer, script: str, path: str, connections: int, seconds: int,
            db_pid: int | None = None, env: dict[str, str] | None = None) -> Phase:
    """One wrk run against ``path`` with ``script``; the serving processes' CPU seconds around it,
    and the database server's when ``db_pid`` names it. ``env`` is added to wrk's environment
    (a script reads its data files from there)."""
    before = tree_cpu_seconds(server.pid)
    db_before = tree_cpu_seconds(db_pid) if db_pid else float("nan")
    done = subprocess.run(
        ["wrk", "-t", str(connections), "-c", str(connections), "-d", f"{seconds}s", "--timeout", "10s",
         "-s", str(SCRIPTS / script), f"{server.base}{path}"],
        capture_output=True, text=True, timeout=seconds + 60, check=False,
        env={**os.environ, "HAGGLER_WRK_SCRIPTS": str(SCRIPTS), **(env or {})})
    cpu = tree_cpu_seconds(server.pid) - before
    db_cpu = tree_cpu_seconds(db_pid) - db_before if db_pid else float("nan")
    server.check_alive()
    if done.returncode != 0:
        raise ServerFailed(f"wrk failed ({done.returncode}):\n{done.stderr}{done.stdout}")
    latency = _fields("LATENCY", done.stdout)
    counts = {k: int(v) for k, v in _fields("COUNTS", done.stdout).items()} if "COUNTS " in done.stdout else {}
    return Phase(int(latency["requests"]), int(latency["errors"]), latency["seconds"], latency["p50_us"] / 1000,
                 latency["p99_us"] / 1000, cpu, counts, db_cpu)


def measure(server: StoreServer, connections: int, seconds: int, db_pid: int | None) -> Figures:
    half = max(1, seconds // 2)  # wrk takes whole seconds
    bare_a = run_wrk(server, "bare.lua", "/healthz", connections, half)
    chats = run_wrk(server, "negotiate.lua", "/", connections, seconds, db_pid)
    bare_b = run_wrk(server, "bare.lua", "/healthz", connections, half)
    bare_requests = bare_a.requests + bare_b.requests
    return Figures(
        bare_rps=bare_requests / (bare_a.seconds + bare_b.seconds),
        bare_p50_ms=max(bare_a.p50_ms, bare_b.p50_ms), bare_p99_ms=max(bare_a.p99_ms, bare_b.p99_ms),
        bare_cpu_ms=1000 * (bare_a.server_cpu_s + bare_b.server_cpu_s) / bare_requests,
        chats=chats, errors=chats.errors + bare_a.errors + bare_b.errors + chats.counts.get("errors", 0))


def soak(server: StoreServer, connections: int, seconds: int, sample: int) -> tuple[dict[int, float], int]:
    """Chats for ``seconds`` in runs of ``sample`` seconds; each worker's resident memory after
    each run. Returns each worker's growth after the first run (in MB) and the failed requests."""
    first: dict[int, float] = {}
    growth: dict[int, float] = {}
    errors = 0
    started = time.monotonic()
    while (left := int(seconds - (time.monotonic() - started))) >= 1:
        phase = run_wrk(server, "negotiate.lua", "/", connections, min(sample, left))
        errors += phase.errors + phase.counts.get("errors", 0)
        workers = serving_pids(server.pid)
        workers = workers[1:] if len(workers) > 1 else workers  # a supervisor serves nothing
        memory = {pid: resident_mb(pid) for pid in workers}
        for pid, mb in memory.items():
            first.setdefault(pid, mb)
            growth[pid] = mb - first[pid]
        elapsed = time.monotonic() - started
        print(f"soak {elapsed:5.0f} s  {phase.rps:6.0f} req/s  " +
              "  ".join(f"worker {pid}: {mb:6.1f} MB ({growth[pid]:+.1f})" for pid, mb in memory.items()), flush=True)
    return growth, errors


@dataclass(frozen=True)
class Summary:
    """A setup's runs: the median of each figure (goals are judged on these) and the range."""

    runs: tuple[Figures, ...]

    def median(self, figure: Callable[[Figures], float]) -> float:
        return statistics.median(figure(run) for run in self.runs)

    def span(self, figure: Callable[[Figures], float]) -> tuple[float, float]:
        values = [figure(run) for run in self.runs]
        return min(values), max(values)

    @property
    def turns_per_s(self) -> float:
        return self.median(lambda f: f.turns_per_s)

    @property
    def ratio(self) -> float:
        return self.median(lambda f: f.ratio)

    @property
    def p99_ms(self) -> float:
        return self.median(lambda f: f.chats.p99_ms)

    @property
    def errors(self) -> int:
        return sum(run.errors for run in self.runs)

    def result_fields(self, name: str, postgres: bool) -> list[str]:
        m = self.median
        fields = [f"{name}_bare_rps={m(lambda f: f.bare_rps):.0f}", f"{name}_chat_rps={m(lambda f: f.chats.rps):.0f}",
                  f"{name}_turns_per_s={self.turns_per_s:.0f}", f"{name}_ratio={self.ratio:.3f}",
                  f"{name}_p50_ms={m(lambda f: f.chats.p50_ms):.2f}", f"{name}_p99_ms={self.p99_ms:.2f}",
                  f"{name}_bare_p99_ms={m(lambda f: f.bare_p99_ms):.2f}",
                  f"{name}_cpu_ms_per_chat_request={m(lambda f: f.chats.cpu_ms_per_request):.3f}",
                  f"{name}_cpu_ms_per_bare={m(lambda f: f.bare_cpu_ms):.3f}"]
        if postgres:
            fields.append(f"{name}_db_cpu_ms_per_chat_request={m(lambda f: f.chats.db_cpu_ms_per_request):.3f}")
        if len(self.runs) > 1:
            low, high = self.span(lambda f: f.turns_per_s)
            p99_low, p99_high = self.span(lambda f: f.chats.p99_ms)
            fields += [f"{name}_runs={len(self.runs)}", f"{name}_turns_per_s_min={low:.0f}",
                       f"{name}_turns_per_s_max={high:.0f}", f"{name}_p99_ms_min={p99_low:.2f}",
                       f"{name}_p99_ms_max={p99_high:.2f}"]
        return fields


def report_summary(setup: Setup, summary: Summary) -> None:
    low, high = summary.span(lambda f: f.turns_per_s)
    p99_low, p99_high = summary.span(lambda f: f.chats.p99_ms)
    print(f"[{setup.name}] median of {len(summary.runs)} runs: {summary.turns_per_s:.0f} turns/s "
          f"({low:.0f}-{high:.0f}), p99 {summary.p99_ms:.2f} ms ({p99_low:.2f}-{p99_high:.2f}), "
          f"ratio {summary.ratio:.2f}", flush=True)


def report(setup: Setup, figures: Figures) -> None:
    chats = figures.chats
    print(f"[{setup.name}] bare  {figures.bare_rps:7.0f} req/s  p50 {figures.bare_p50_ms:6.2f} ms  "
          f"p99 {figures.bare_p99_ms:6.2f} ms  server CPU {figures.bare_cpu_ms:.3f} ms/request")
    print(f"[{setup.name}] chats {chats.rps:7.0f} req/s  p50 {chats.p50_ms:6.2f} ms  p99 {chats.p99_ms:6.2f} ms  "
          f"server CPU {chats.cpu_ms_per_request:.3f} ms/request"
          + (f" + database {chats.db_cpu_ms_per_request:.3f}" if setup.db_pid else "")
          + f"  ({figures.turns_per_s:.0f} turns/s, "
          f"{chats.counts.get('starts', 0)} starts, {chats.counts.get('deals', 0)} deals), ratio {figures.ratio:.2f}",
          flush=True)


def goals(results: dict[str, Summary]) -> list[str]:
    lines = []
    if "sqlite_1" in results:
        one = results["sqlite_1"]
        lines.append(f"SQLite, 1 worker: turns/s >= {GOAL_TURNS_PER_S}: {_met(one.turns_per_s >= GOAL_TURNS_PER_S)}; "
                     f"ratio >= {GOAL_RATIO}: {_met(one.ratio >= GOAL_RATIO)} ({one.ratio:.2f}); "
                     f"p99 < {GOAL_P99_MS:.0f} ms: {_met(one.p99_ms < GOAL_P99_MS)} ({one.p99_ms:.1f} ms)")
    for name in ("postgresql_1", "postgresql_2"):
        if name in results:
            p99 = results[name].p99_ms
            lines.append(f"{name}: p99 < {GOAL_PG_P99_MS:.0f} ms: {_met(p99 < GOAL_PG_P99_MS)} ({p99:.1f} ms)")
    if "postgresql_1" in results and "postgresql_2" in results:
        scale = results["postgresql_2"].turns_per_s / results["postgresql_1"].turns_per_s
        lines.append(f"PostgreSQL, 2 workers >= {GOAL_TWO_WORKERS}x 1: {_met(scale >= GOAL_TWO_WORKERS)} ({scale:.2f}x)")
    return lines


def _met(ok: bool) -> str:
    return "met" if ok else "not met"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", type=int, default=32, help="keep-alive connections, one wrk thread each")
    parser.add_argument("--seconds", type=int, default=10, help="length of the turns phase in whole seconds "
                        "(the bare phase runs as long, in two halves)")
    parser.add_argument("--db", default=None, metavar="URL", help="database URL (default: fresh SQLite)")
    parser.add_argument("--postgres", action="store_true", help="a throwaway durable PostgreSQL cluster")
    parser.add_argument("--workers", type=int, default=1, help="haggler serve --workers")
    parser.add_argument("--matrix", action="store_true", help="SQLite x1, PostgreSQL x1 and x2 in one run")
    parser.add_argument("--soak", type=int, default=0, metavar="SECONDS",
                        help="after the measurements, keep chats going this long on the last setup")
    parser.add_argument("--soak-sample", type=int, default=60, metavar="SECONDS", help="memory sample interval")
    parser.add_argument("--runs", type=int, default=1, help="measure each setup this many times; report medians")
    args = parser.parse_args(argv)
    if not 1 <= args.connections <= 256 or not 2 <= args.seconds <= 600:
        parser.error("--connections must be 1-256 and --seconds 2-600")
    if not 0 <= args.soak <= 3600 or not 5 <= args.soak_sample <= 600 or not 1 <= args.workers <= 16:
        parser.error("--soak must be 0-3600, --soak-sample 5-600 and --workers 1-16")
    if not 1 <= args.runs <= 9:
        parser.error("--runs must be 1-9")
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk (Debian's package)", file=sys.stderr)
        return 2
    results: dict[str, Summary] = {}
    errors = 0
    growth: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="haggler-wrk-") as tmp, ExitStack() as stack:
        cluster = None
        if args.matrix or args.postgres:
            from tests.support.postgres import PostgresCluster

            cluster = stack.enter_context(PostgresCluster(extra_settings=DURABLE))
        if args.matrix:
            setups = [Setup("sqlite_1", f"sqlite:///{tmp}/store.db", 1)]
            setups += [Setup(f"postgresql_{n}", cluster.create_database(f"bench_{n}"), n, postmaster(cluster))
                       for n in (1, 2)]
        else:
            url = args.db or (cluster.create_database("bench") if cluster else f"sqlite:///{tmp}/store.db")
            dialect = "sqlite" if url.startswith("sqlite") else "postgresql"
            setups = [Setup(f"{dialect}_{args.workers}", url, args.workers,
                            postmaster(cluster) if cluster and dialect == "postgresql" else None)]
        for index, setup in enumerate(setups):
            server = StoreServer(setup.db_url, Path(tmp), seed=1, workers=setup.workers)
            try:
                server.start(timeout=60)
                runs = []
                for _ in range(args.runs):
                    runs.append(measure(server, args.connections, args.seconds, setup.db_pid))
                    report(setup, runs[-1])
                summary = Summary(tuple(runs))
                if args.runs > 1:
                    report_summary(setup, summary)
                results[setup.name] = summary
                errors += summary.errors
                if args.soak and index == len(setups) - 1:
                    growth, soak_errors = soak(server, max(1, args.connections // 4), args.soak, args.soak_sample)
                    errors += soak_errors
            except ServerFailed as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 1
            finally:
                server.stop()
    for line in goals(results):
        print("goals: " + line)
    figures_line = [f"runs={args.runs}"]
    for name, summary in results.items():
        figures_line += summary.result_fields(name, postgres=name.startswith("postgresql"))
    if "postgresql_1" in results and "postgresql_2" in results:
        figures_line.append(f"postgresql_2_over_1={results['postgresql_2'].turns_per_s / results['postgresql_1'].turns_per_s:.2f}")
    if args.soak:
        figures_line += [f"soak_seconds={args.soak}", f"soak_growth_mb_max={max(growth.values(), default=0):.1f}"]
    print(f"RESULT tool=wrk connections={args.connections} seconds={args.seconds} " + " ".join(figures_line)
          + f" errors={errors}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
