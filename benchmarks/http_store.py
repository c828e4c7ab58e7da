#!/usr/bin/env python3
"""End-to-end HTTP benchmark of a negotiate.v1 store (``haggler serve``).

Starts a real ``haggler serve`` process on a free loopback port (fresh SQLite database in a
temporary directory unless ``--db`` names one), then measures three phases with the same load
generator (asyncio + one ``httpx.AsyncClient`` per simulated client, HTTP keep-alive):

1. **baseline** — N clients hammer ``GET /healthz`` (a bare JSON endpoint on the same
   FastAPI + uvicorn stack) for a fixed time: the stack's requests/s without any store work.
   Half of it runs before phase 2 and half after, so drift in machine speed hits both sides.
2. **saturated negotiations** — N shoppers run complete negotiations through the hypermedia
   ``next`` URLs with a simple scripted haggler, each sending its next request as soon as the
   previous reply arrives: the store's throughput (and the ``ratio`` to the baseline). Its
   latency is mostly queueing (Little's law: ≈ N ÷ throughput).
3. **paced negotiations** — the same N shoppers and script, but each pauses ``--think-ms``
   between a reply and its next request, as real agents do: the turn latency a shopper sees
   when the store is busy but not overloaded; the latency goal is judged here.

It prints a table, the goal checks, and as its very last line::

    RESULT shoppers=32 negotiations=400 turns=... deals=... negotiations_per_s=... turns_per_s=...
           bare_rps=... ratio=... p50_ms=... p99_ms=... db=sqlite think_ms=250 paced_turns_per_s=...
           paced_p50_ms=... paced_p99_ms=...

(on one line; the keys without ``paced`` are from the saturated phase). Everything is bounded:
the request count (``--negotiations``, ``--paced-negotiations`` and the baseline's time and
request caps) and the wall time (``--duration-limit``); traffic goes to 127.0.0.1 only; the
server is always stopped (also on Ctrl-C or SIGTERM). The exit status is 0 unless the server
failed (did not start, died, or answered with errors).

Usage::

    .venv/bin/python benchmarks/http_store.py [--shoppers 32] [--negotiations 400]
        [--think-ms 250] [--paced-negotiations 160]
        [--db sqlite:///path.db | postgresql://user@host/db] [--duration-limit 120]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Coroutine

import httpx

HOST = "127.0.0.1"
PLACEHOLDER = "{url_encoded_message}"

# Goals (informational: they never change the exit status).
GOAL_RATIO = 0.5
GOAL_P99_MS = 20.0
GOAL_SHOPPERS = 32

# The scripted shopper.
OPENING_FRACTION = 0.60   # first offer: 60% of list price
RAISE_FRACTION = 0.05     # each turn: +5% of list price
ACCEPT_WITHIN = 0.03      # say "deal" when the merchant's price is within 3% of our last offer
MAX_OFFER_TURNS = 12      # ... or after 12 offers


class ServerFailed(RuntimeError):
    """The store under test did not start, died, or answered with errors."""


# --------------------------------------------------------------------------------------- stats


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending list; NaN when empty."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[min(rank, len(sorted_values)) - 1]


@dataclass
class Stats:
    requests: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds
    errors: list[str] = field(default_factory=list)

    def add(self, seconds: float) -> None:
        self.requests += 1
        self.latencies.append(seconds)

    def ms(self, q: float) -> float:
        return percentile(sorted(self.latencies), q) * 1000


@dataclass
class NegotiationRun:
    """The results of one negotiation phase (saturated or paced)."""

    think: float = 0.0         # seconds each shopper paused before each request but its first
    starts: Stats = field(default_factory=Stats)
    turns: Stats = field(default_factory=Stats)
    negotiations: int = 0      # completed: the chat reached closed=true
    incomplete: int = 0        # cut off by the duration limit
    deals: int = 0
    elapsed: float = 0.0
    cpu: tuple[float, float] = (math.nan, math.nan)  # CPU seconds: (server, load generator)
    stopped_by_limit: bool = False

    @property
    def turns_per_s(self) -> float:
        return self.turns.requests / self.elapsed if self.elapsed > 0 else math.nan


@dataclass
class CpuSample:
    """CPU seconds used so far by the server process and by this load generator."""

    server: float
    client: float
    wall: float


def _proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc; NaN where unavailable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return math.nan


def cpu_sample(server_pid: int) -> CpuSample:
    return CpuSample(_proc_cpu_seconds(server_pid), time.process_time(), time.perf_counter())


# -------------------------------------------------------------------------------------- server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Linux: the server gets SIGTERM if this benchmark dies without cleaning up (SIGKILL)."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class StoreServer:
    """``python -m haggler serve`` as a child process on a free loopback port."""

    def __init__(self, db_url: str, workdir: Path, seed: int | None, workers: int = 1,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.base = f"http://{HOST}:{self.port}"
        self.args = [sys.executable, "-m", "haggler", "serve", "--host", HOST, "--port", str(self.port),
                     "--db", db_url, "--max-chat-starts-per-hour", "1000000", "--log-level", "warning",
                     # wrk_store.py's shoppers each start from their own address (X-Forwarded-For).
                     "--trusted-proxy", f"{HOST}/32"]
        if seed is not None:
            self.args += ["--seed", str(seed)]
        if workers != 1:
            self.args += ["--workers", str(workers)]
        self.args += extra_args  # more ``haggler serve`` options (wrk_protocols.py: the market's limits)
        self.log_path = workdir / "server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self, timeout: float) -> None:
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.args, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                # Its own session: a Ctrl-C in the terminal reaches only us, and we stop it.
                start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,
            )
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                self.check_alive()
                try:
                    r = client.get(f"{self.base}/healthz")
                    if r.status_code == 200 and r.json() == {"ok": True}:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        raise ServerFailed(f"server did not answer /healthz within {timeout:.0f}s\n{self.log_tail()}")

    def check_alive(self) -> None:
        if self.proc is not None and self.proc.poll() is not None:
            raise ServerFailed(f"server exited with status {self.proc.returncode}\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no server log)"
        tail = "\n".join(text.splitlines()[-lines:])
        return f"last lines of the server log:\n{tail}" if tail else "(the server log is empty)"

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.terminate()  # uvicorn shuts down gracefully on SIGTERM
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


# ------------------------------------------------------------------------------------- clients


def new_client(base: str) -> httpx.AsyncClient:
    # One keep-alive connection per simulated client.
    return httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(10.0),
                             limits=httpx.Limits(max_connections=1, max_keepalive_connections=1))


def http_error(response: httpx.Response, what: str) -> str:
    return f"{what}: HTTP {response.status_code} {response.text[:200]!r}"


@contextlib.asynccontextmanager
async def open_clients(base: str, n: int) -> AsyncIterator[list[httpx.AsyncClient]]:
    """``n`` clients with their connections already open: creating a client (it builds an SSL
    context) and connecting stay outside every measurement."""
    async with contextlib.AsyncExitStack() as stack:
        clients = [await stack.enter_async_context(new_client(base)) for _ in range(n)]
        for response in await asyncio.gather(*(client.get("/healthz") for client in clients)):
            if response.status_code != 200:
                raise ServerFailed(http_error(response, "/healthz"))
        yield clients


async def hammer_healthz(base: str, clients: int, seconds: float, max_requests: int,
                         server_pid: int) -> tuple[Stats, float, tuple[float, float]]:
    """Phase 1: ``clients`` closed-loop clients GET /healthz for ``seconds`` (or until
    ``max_requests`` were sent). Returns the stats, the elapsed wall time and the CPU used."""
    stats = Stats()
    budget = itertools.count()

    async def one_client(client: httpx.AsyncClient, stop_at: float) -> None:
        while time.perf_counter() < stop_at and next(budget) < max_requests:
            if await timed_get(client, stats, "/healthz", 200, "/healthz") is None:
                return

    async with open_clients(base, clients) as pool:
        before = cpu_sample(server_pid)
        await asyncio.gather(*(one_client(client, before.wall + seconds) for client in pool))
        after = cpu_sample(server_pid)
    return stats, after.wall - before.wall, cpu_delta(before, after)


async def timed_get(client: httpx.AsyncClient, stats: Stats, url: str, status: int, what: str,
                    **kwargs: Any) -> httpx.Response | None:
    """GET ``url``, adding its latency to ``stats``; None (and an error in ``stats``) when the
    response status is not ``status``."""
    t0 = time.perf_counter()
    response = await client.get(url, **kwargs)
    elapsed = time.perf_counter() - t0
    if response.status_code != status:
        stats.errors.append(http_error(response, what))
        return None
    stats.add(elapsed)
    return response


def say_url(next_url: str, message: str) -> str:
    return next_url.replace(PLACEHOLDER, urllib.parse.quote(message, safe=""))


def money(amount: float) -> str:
    return f"${amount:.2f}"


async def negotiate(client: httpx.AsyncClient, product_id: str, list_price: float, result: NegotiationRun,
                    max_requests: int, think: float = 0.0) -> None:
    """One full negotiation with the scripted haggler, pausing ``think`` seconds between each
    reply and the next turn (outside the timed request)."""
    response = await timed_get(client, result.starts, "/api/store/chat/start", 201, f"start {product_id}",
                               params={"product_id": product_id})
    if response is None:
        return
    body = response.json()
    next_url: str | None = body["next"]
    my_offer = round(OPENING_FRACTION * list_price, 2)
    offers_made = 0
    message = f"I can offer {money(my_offer)}"
    for _ in range(max_requests):  # bounded even against a store that never closes
        assert next_url is not None
        if think:
            await asyncio.sleep(think)
        response = await timed_get(client, result.turns, say_url(next_url, message), 200, f"say {product_id}")
        if response is None:
            return
        body = response.json()
        if body["closed"]:
            result.negotiations += 1
            if body.get("deal"):
                result.deals += 1
            return
        next_url = body["next"]
        if message == "deal":  # the store ignored an accept: give up on this chat
            result.turns.errors.append(f"say {product_id}: 'deal' did not close the chat")
            return
        offers_made += 1
        merchant_price = (body.get("offer") or {}).get("price")
        next_offer = round(my_offer + RAISE_FRACTION * list_price, 2)
        if offers_made >= MAX_OFFER_TURNS or (
                merchant_price is not None
                and (merchant_price <= my_offer * (1 + ACCEPT_WITHIN) or merchant_price <= next_offer)):
            message = "deal"
        else:
            my_offer = next_offer
            message = f"I can offer {money(my_offer)}"
    result.turns.errors.append(f"say {product_id}: chat not closed after {max_requests} turns")


async def run_negotiations(base: str, shoppers: int, total: int, products: list[tuple[str, float]],
                           max_turns: int, seconds: float, server_pid: int,
                           think: float = 0.0) -> NegotiationRun:
    """Phases 2 and 3: ``shoppers`` concurrent shoppers run ``total`` negotiations between them,
    picking products round-robin. With ``think`` > 0 each shopper pauses that long between a
    reply and its next request (a turn or its next chat start), and the shoppers' first
    requests are spread evenly over the first ``think`` seconds so that they do not arrive in
    lockstep; with 0 it is a closed loop. Negotiations still running after ``seconds`` are
    cancelled (their turns so far still count)."""
    result = NegotiationRun(think=think)
    tickets = itertools.count()

    async def shopper(client: httpx.AsyncClient, pause: float) -> None:
        while (i := next(tickets)) < total:
            if pause:
                await asyncio.sleep(pause)
            pause = think
            product_id, list_price = products[i % len(products)]
            try:
                await negotiate(client, product_id, list_price, result, max_turns, think)
            except asyncio.CancelledError:
                result.incomplete += 1
                raise

    async with open_clients(base, shoppers) as pool:
        timed = await run_timed([shopper(client, think * k / shoppers) for k, client in enumerate(pool)],
                                seconds, server_pid)
    outcomes, result.elapsed, result.cpu = timed.outcomes, timed.elapsed, timed.cpu
    for outcome in outcomes:
        if isinstance(outcome, Exception):  # transport errors, bad JSON: the server failed
            result.turns.errors.append(f"{type(outcome).__name__}: {outcome}")
    result.stopped_by_limit = timed.stopped
    return result


# ------------------------------------------------------------------------------------- running


@dataclass
class Baseline:
    label: str
    stats: Stats
    elapsed: float
    cpu: tuple[float, float]


@dataclass
class Report:
    shoppers: int
    db_kind: str
    baselines: list[Baseline]  # before and after the saturated negotiations
    saturated: NegotiationRun
    paced: NegotiationRun

    @property
    def bare_requests(self) -> int:
        return sum(b.stats.requests for b in self.baselines)

    @property
    def bare_elapsed(self) -> float:
        return sum(b.elapsed for b in self.baselines)

    @property
    def bare_rps(self) -> float:
        return self.bare_requests / self.bare_elapsed if self.bare_elapsed > 0 else math.nan

    @property
    def errors(self) -> list[str]:
        return [e for b in self.baselines for e in b.stats.errors] + [
            e for run in (self.saturated, self.paced) for e in run.starts.errors + run.turns.errors]


@dataclass
class TimedRun:
    outcomes: list[Any]
    #: Whether the time limit stopped any client before it finished.
    stopped: bool
    elapsed: float
    cpu: tuple[float, float]


async def run_timed(clients: list[Coroutine[Any, Any, Any]], seconds: float, server_pid: int) -> TimedRun:
    """Run the clients concurrently for at most ``seconds`` (the rest are cancelled), measuring
    wall time and the server's and this process's CPU over exactly that span."""
    before = cpu_sample(server_pid)
    tasks = [asyncio.create_task(client) for client in clients]
    try:
        _, pending = await asyncio.wait(tasks, timeout=seconds)
    finally:
        for task in tasks:
            task.cancel()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        after = cpu_sample(server_pid)
    return TimedRun(list(outcomes), bool(pending), after.wall - before.wall, cpu_delta(before, after))


def cpu_delta(before: CpuSample, after: CpuSample) -> tuple[float, float]:
    """CPU seconds used over the interval by (the server, this load generator)."""
    return after.server - before.server, after.client - before.client


async def run_phases(server: StoreServer, args: argparse.Namespace, deadline: float) -> Report:
    async with httpx.AsyncClient(base_url=server.base, timeout=10.0) as client:
        discovery = (await client.get("/negotiate.json")).raise_for_status().json()
        products = [(p["id"], float(p["list_price"])) for p in discovery["products"]]
        max_messages = int(discovery.get("limits", {}).get("max_messages_per_chat", 30))
        if not products:
            raise ServerFailed("the store lists no products")
        # Warm up the code paths (SQLAlchemy statement caches, first imports) off the clock.
        warm = NegotiationRun()
        await negotiate(client, products[0][0], products[0][1], warm, max_messages)
        if warm.starts.errors or warm.turns.errors:
            raise ServerFailed("warm-up negotiation failed: " + "; ".join(warm.starts.errors + warm.turns.errors))

    # Phase 1: the bare stack — half of it before the negotiations and half after, so that a
    # drift in machine speed during the run (shared VMs) affects both sides of the ratio alike.
    remaining = deadline - time.perf_counter()
    half = max(0.5, min(args.baseline_seconds, remaining * 0.25) / 2)
    baselines = [await run_baseline(server, args, "before", half)]

    # Phase 2: saturated negotiations, cut off in time for the second baseline and phase 3.
    think = args.think_ms / 1000
    remaining = deadline - time.perf_counter() - half
    paced_reserve = min(paced_time_bound(args.paced_negotiations, args.shoppers, think), remaining / 2)
    if remaining - paced_reserve <= 1:
        raise ServerFailed("no time left for the negotiation phases: raise --duration-limit")
    profiler = start_profiler(args.profile, server.pid) if args.profile else None
    try:
        saturated = await run_negotiations(server.base, args.shoppers, args.negotiations, products,
                                           max_messages + 1, remaining - paced_reserve, server.pid)
    finally:
        if profiler is not None:
            stop_profiler(profiler, args.profile)
    server.check_alive()

    baselines.append(await run_baseline(server, args, "after", half))

    # Phase 3: paced negotiations (think time between turns), in whatever time is left.
    remaining = deadline - time.perf_counter()
    if remaining <= 1:
        raise ServerFailed("no time left for the paced phase: raise --duration-limit")
    paced = await run_negotiations(server.base, args.shoppers, args.paced_negotiations, products,
                                   max_messages + 1, remaining, server.pid, think)
    server.check_alive()
    return Report(args.shoppers, args.db_kind, baselines, saturated, paced)


def paced_time_bound(negotiations: int, shoppers: int, think: float) -> float:
    """Generous wall time of the paced phase: every negotiation at the script's longest (a start
    and MAX_OFFER_TURNS + 1 turns, each after a think pause) plus 20 ms of latency a request."""
    rounds = math.ceil(negotiations / shoppers)
    return rounds * (MAX_OFFER_TURNS + 2) * (think + 0.02) + think


async def run_baseline(server: StoreServer, args: argparse.Namespace, label: str, seconds: float) -> Baseline:
    stats, elapsed, cpu = await hammer_healthz(server.base, args.shoppers, seconds,
                                               max(1, args.baseline_max_requests // 2), server.pid)
    server.check_alive()
    if stats.errors:
        raise ServerFailed("/healthz failed: " + "; ".join(stats.errors[:5]))
    return Baseline(label, stats, elapsed, cpu)


def start_profiler(path: str, pid: int) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the server during the saturated phase (``--profile``); SVG flame graph for a .svg
    path, collapsed stacks ("raw", one stack;count per line) otherwise."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not os.access(exe, os.X_OK):
        print("--profile: py-spy not found (.venv/bin/pip install py-spy); profiling skipped",
              file=sys.stderr, flush=True)
        return None
    fmt_ = "flamegraph" if path.endswith(".svg") else "raw"
    proc = subprocess.Popen([exe, "record", "--pid", str(pid), "--rate", "250", "--gil", "--format", fmt_, "-o", path],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True)
    time.sleep(0.5)  # let it attach
    return proc


def stop_profiler(proc: subprocess.Popen[bytes] | None, path: str) -> None:
    if proc is None:
        return
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        _, err = proc.communicate(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        err = b"py-spy did not stop in time"
    ok = Path(path).exists()
    print(f"--profile: {'wrote ' + path if ok else 'py-spy failed: ' + err.decode(errors='replace')[-300:]}",
          file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ printing


def fmt(value: float, digits: int = 1) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:,.{digits}f}"


def num(value: float, digits: int) -> str:
    """A value for the RESULT line: no thousands separators, ``nan`` when unknown."""
    return "nan" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def print_report(r: Report, args: argparse.Namespace) -> dict[str, str]:
    sat, paced = r.saturated, r.paced
    bare_rps = r.bare_rps
    wall = sat.elapsed
    turns_per_s = sat.turns_per_s
    neg_per_s = sat.negotiations / wall if wall > 0 else math.nan
    requests2 = sat.starts.requests + sat.turns.requests
    req2_per_s = requests2 / wall if wall > 0 else math.nan
    ratio = turns_per_s / bare_rps if bare_rps > 0 else math.nan
    p50, p99 = sat.turns.ms(50), sat.turns.ms(99)
    paced_p50, paced_p99 = paced.turns.ms(50), paced.turns.ms(99)
    paced_label = f"paced {args.think_ms:g} ms think"

    def per_s(count: int, seconds: float) -> float:
        return count / seconds if seconds > 0 else math.nan

    def latency_cols(stats: Stats, seconds: float) -> list[str]:
        return [f"{stats.requests:,}", fmt(seconds, 2), fmt(per_s(stats.requests, seconds)),
                *(fmt(stats.ms(q), 2) for q in (50, 90, 99, 100))]

    def cpu_cols(cpu: tuple[float, float], seconds: float, requests: int) -> list[str]:
        server_s, client_s = cpu
        return [fmt(100 * server_s / seconds, 0) + "%" if seconds > 0 else "n/a",
                fmt(1000 * server_s / requests, 2) if requests else "n/a",
                fmt(100 * client_s / seconds, 0) + "%" if seconds > 0 else "n/a"]

    def run_rows(run: NegotiationRun, label: str) -> list[list[str]]:
        requests = run.starts.requests + run.turns.requests
        return [[f"chat start (GET), {label}", *latency_cols(run.starts, run.elapsed), "", "", ""],
                [f"say turn (GET), {label}", *latency_cols(run.turns, run.elapsed), "", "", ""],
                [f"all requests, {label}", f"{requests:,}", fmt(run.elapsed, 2),
                 fmt(per_s(requests, run.elapsed)), "", "", "", "", *cpu_cols(run.cpu, run.elapsed, requests)]]

    header = ["", "requests", "wall s", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms",
              "server CPU", "srv ms/req", "loadgen CPU"]
    rows = [
        *([f"baseline /healthz, {b.label}", *latency_cols(b.stats, b.elapsed),
           *cpu_cols(b.cpu, b.elapsed, b.stats.requests)] for b in r.baselines),
        *run_rows(sat, "saturated"),
        *run_rows(paced, paced_label),
    ]
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    line = "  ".join("-" * w for w in widths)

    def show(row: list[str]) -> None:
        print("  ".join(str(c).ljust(widths[0]) if i == 0 else str(c).rjust(widths[i]) for i, c in enumerate(row)))

    def completed(run: NegotiationRun, planned: int) -> str:
        return (f"{run.negotiations:,} completed of {planned:,} planned"
                + (f", {run.incomplete} cut off by --duration-limit" if run.stopped_by_limit else ""))

    print()
    print(f"haggler HTTP store benchmark — {r.shoppers} concurrent clients, db={r.db_kind}, "
          f"{os.cpu_count()} CPUs shared by server and load generator")
    print(line)
    show(header)
    print(line)
    for row in rows:
        show(row)
    print(line)
    print("server CPU / loadgen CPU: share of one core during the phase; srv ms/req: server CPU time per request")
    print()
    done = sat.negotiations
    print("saturated (closed loop: each shopper sends its next request as soon as the reply arrives)")
    print(f"  negotiations  {completed(sat, args.negotiations)}")
    print(f"  deals         {sat.deals:,} ({fmt(100 * sat.deals / done if done else math.nan, 0)}% of completed)")
    per_negotiation = sat.turns.requests / done if done else math.nan
    print(f"  turns         {sat.turns.requests:,} ({fmt(per_negotiation, 1)} per negotiation)")
    print(f"  negotiations/s {fmt(neg_per_s, 1)}   turns/s {fmt(turns_per_s, 1)}   "
          f"bare req/s {fmt(bare_rps, 1)} (both baselines together)")
    print(f"  ratio turns/s ÷ bare req/s = {fmt(ratio, 3)}   "
          f"(all saturated requests/s ÷ bare req/s = {fmt(req2_per_s / bare_rps if bare_rps > 0 else math.nan, 3)})")
    queueing = (f"{r.shoppers} shoppers ÷ {fmt(req2_per_s, 0)} requests/s "
                f"= {fmt(1000 * r.shoppers / req2_per_s if req2_per_s > 0 else math.nan, 1)} ms mean")
    print(f"  turn latency p50 {fmt(p50, 2)} ms   p99 {fmt(p99, 2)} ms   (Little's law: {queueing})")
    print(f"{paced_label} (each shopper pauses {args.think_ms:g} ms between a reply and its next request)")
    print(f"  negotiations  {completed(paced, args.paced_negotiations)}")
    print(f"  turns         {paced.turns.requests:,}   turns/s {fmt(paced.turns_per_s, 1)}")
    print(f"  turn latency p50 {fmt(paced_p50, 2)} ms   p99 {fmt(paced_p99, 2)} ms")
    print()
    at_goal_load = r.shoppers == GOAL_SHOPPERS
    note = "" if at_goal_load else f" (goals are defined at {GOAL_SHOPPERS} shoppers; this run used {r.shoppers})"

    def verdict(value: float, goal: float) -> str:
        return "met" if value < goal else "not met"

    print(f"goals{note}:")
    print(f"  throughput ratio >= {GOAL_RATIO}: {'met' if ratio >= GOAL_RATIO else 'not met'} ({fmt(ratio, 3)})")
    print(f"  p99 turn latency < {GOAL_P99_MS:g} ms at {GOAL_SHOPPERS} shoppers:")
    print(f"    saturated: {fmt(p99, 2)} ms ({verdict(p99, GOAL_P99_MS)}; closed-loop queueing: {queueing})")
    print(f"    paced with {args.think_ms:g} ms think: {fmt(paced_p99, 2)} ms ({verdict(paced_p99, GOAL_P99_MS)}; "
          f"what shoppers that think between turns see)")
    for name, run in (("saturated", sat), ("paced", paced)):
        if run.stopped_by_limit:
            print(f"note: the {name} phase was stopped by --duration-limit {args.duration_limit:g}s")

    return {
        "shoppers": str(r.shoppers),
        "negotiations": str(done),
        "turns": str(sat.turns.requests),
        "deals": str(sat.deals),
        "negotiations_per_s": num(neg_per_s, 2),
        "turns_per_s": num(turns_per_s, 1),
        "bare_rps": num(bare_rps, 1),
        "ratio": num(ratio, 3),
        "p50_ms": num(p50, 2),
        "p99_ms": num(p99, 2),
        "db": r.db_kind,
        "think_ms": f"{args.think_ms:g}",
        "paced_turns_per_s": num(paced.turns_per_s, 1),
        "paced_p50_ms": num(paced_p50, 2),
        "paced_p99_ms": num(paced_p99, 2),
    }


# ---------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shoppers", type=int, default=32, help="concurrent clients in every phase (default 32)")
    parser.add_argument("--negotiations", type=int, default=400,
                        help="negotiations in the saturated phase (default 400)")
    parser.add_argument("--think-ms", type=float, default=250.0, metavar="MS",
                        help="paced phase: each shopper's pause between a reply and its next request "
                             "(default 250)")
    parser.add_argument("--paced-negotiations", type=int, default=160,
                        help="negotiations in the paced phase (default 160)")
    parser.add_argument("--db", default=None, metavar="URL",
                        help="database URL (sqlite:///file.db or postgresql://user@host/db); default: a fresh "
                             "SQLite file in a temporary directory ('sqlite' means the same)")
    parser.add_argument("--duration-limit", type=float, default=120.0, metavar="SECONDS",
                        help="hard cap on the whole run, server start and stop included (default 120)")
    parser.add_argument("--baseline-seconds", type=float, default=5.0,
                        help="length of the /healthz baseline, split in halves run before and after the "
                             "negotiations (default 5)")
    parser.add_argument("--baseline-max-requests", type=int, default=200_000,
                        help="request cap of the baseline, both halves together (default 200000)")
    parser.add_argument("--seed", type=int, default=1,
                        help="the server's --seed, for reproducible conversations (default 1; -1: none)")
    parser.add_argument("--profile", default=None, metavar="PATH",
                        help="sample the server with py-spy during the saturated phase: flame graph for *.svg, "
                             "collapsed stacks otherwise (needs py-spy)")
    parser.add_argument("--startup-timeout", type=float, default=30.0, help="seconds to wait for /healthz")
    args = parser.parse_args(argv)
    check_limits(parser, args, ("shoppers", "negotiations", "paced_negotiations", "baseline_max_requests"))
    if args.db and args.db != "sqlite" and not args.db.startswith(("sqlite:", "postgres://", "postgresql")):
        parser.error("--db must be a sqlite:/// or postgresql:// URL")
    return args


def check_limits(parser: argparse.ArgumentParser, args: argparse.Namespace, counts: tuple[str, ...]) -> None:
    """The options every benchmark here shares: each of ``counts`` at least 1, --duration-limit,
    --think-ms and --baseline-seconds in range; a bad one is a usage error."""
    for name in counts:
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.duration_limit < 10:
        parser.error("--duration-limit must be at least 10 seconds")
    if not 0 <= args.think_ms <= 60_000:
        parser.error("--think-ms must be between 0 and 60000")
    if args.baseline_seconds <= 0:
        parser.error("--baseline-seconds must be positive")


def _raise_keyboard_interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_on_signals() -> None:
    """SIGTERM and SIGINT both raise KeyboardInterrupt, so that the server is always stopped."""
    signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started with SIGINT ignored


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    # Keep a little of the budget for stopping the server (graceful, then SIGKILL).
    deadline = started + args.duration_limit - min(12.0, 0.1 * args.duration_limit)
    stop_on_signals()
    workdir = Path(tempfile.mkdtemp(prefix="haggler-bench-"))
    db_url = args.db if args.db and args.db != "sqlite" else f"sqlite:///{workdir / 'bench.db'}"
    args.db_url = db_url
    args.db_kind = "postgresql" if db_url.startswith(("postgres://", "postgresql")) else "sqlite"
    server = StoreServer(db_url, workdir, None if args.seed == -1 else args.seed)
    report: Report | None = None
    failure: str | None = None
    try:
        print(f"starting haggler serve on {server.base} (db={args.db_kind}) ...", file=sys.stderr, flush=True)
        server.start(timeout=min(args.startup_timeout, max(1.0, deadline - time.perf_counter())))
        print(f"server pid {server.pid}; running: {args.negotiations} saturated negotiations between two "
              f"halves of a {args.baseline_seconds:g}s /healthz baseline, then {args.paced_negotiations} "
              f"paced ones ({args.think_ms:g} ms think), with {args.shoppers} shoppers "
              f"(limit {args.duration_limit:g}s) ...", file=sys.stderr, flush=True)
        report = asyncio.run(run_phases(server, args, deadline))
        errors = report.errors
        if errors:
            failure = f"{len(errors)} failed requests, e.g.:\n  " + "\n  ".join(errors[:5])
    except ServerFailed as exc:
        failure = str(exc)
    except KeyboardInterrupt:
        print("interrupted: stopping the server", file=sys.stderr, flush=True)
        server.stop()
        return 130
    except (httpx.HTTPError, OSError, ValueError, KeyError) as exc:
        failure = f"{type(exc).__name__}: {exc}"
    finally:
        server.stop()
        if failure and "server log" not in failure:
            failure += "\n" + server.log_tail()
        shutil.rmtree(workdir, ignore_errors=True)
    if failure:
        print(f"server failed: {failure}", file=sys.stderr, flush=True)
    if report is None:
        return 1
    result = print_report(report, args)
    sys.stdout.flush()
    print("RESULT " + " ".join(f"{key}={value}" for key, value in result.items()), flush=True)
    return 1 if failure else 0


if __name__ == "__main__":
    sys.exit(main())
