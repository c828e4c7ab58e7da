#!/usr/bin/env python3
"""Speed of the matching service (spec 002, bilateral match negotiation): in process and over HTTP.

Two parts, each measured against a baseline taken in the same run:

1. **in process** — system–system negotiations straight through the service functions
   (``opportunities.create`` then ``negotiations.advance``, each in its own write transaction, as
   ``POST /api/opportunities`` does) on a fresh SQLite database, the labelled pairs of
   ``tests/agents/match_pairs.json`` round-robin. Baseline: the same negotiations with no storage
   at all, the system negotiator (``match_negotiator.decide``) called in a plain loop, half of it
   before the stored run and half after. ``storage_ratio`` = stored turns/s ÷ ``decide_per_s``:
   the share of the raw decider's speed left once every turn is stored.
2. **over HTTP** — a real ``haggler serve`` on a free loopback port with its own SQLite file,
   N users each with an enabled personal agent, and opportunities to them from system-only users
   (stored before the server starts, through the same service functions), so each agent has
   turns parked. N agents (asyncio, one keep-alive ``httpx.AsyncClient`` each) loop
   pickup → decide (the same system negotiator, on the pickup's turn context) → respond until
   nothing is parked for them: the latency of that round trip and turns/s. Baseline: the same
   N clients on ``GET /healthz``, half before and half after.

Ends with one line ``RESULT system_negotiations_per_s=... decide_per_s=... storage_ratio=...
pickup_respond_p50_ms=... pickup_respond_p99_ms=... agents=32 ...``. Bounded: negotiation counts,
``--max-turns`` and ``--duration-limit``; traffic goes to 127.0.0.1 only; the server is always
stopped. Exit status 0 unless the service failed (an error status, a broken response, a server
that died).

    .venv/bin/python benchmarks/matching_speed.py [--negotiations 640] [--agents 32]
        [--opportunities-per-agent 24] [--think-ms 0] [--duration-limit 60]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import httpx
from http_store import (  # the sibling benchmark: same server handling, baseline and statistics
    ServerFailed,
    Stats,
    StoreServer,
    check_limits,
    fmt,
    hammer_healthz,
    http_error,
    num,
    open_clients,
    run_timed,
    stop_on_signals,
)
from sqlalchemy import func, select

from haggler.agents.match_context import (
    MatchAction,
    MatchContext,
    MatchTurn,
    SeedAssessment,
    UserContext,
    UserIntent,
    parse_context,
)
from haggler.agents.match_negotiator import decide
from haggler.protocols.matching import negotiations, opportunities, participants
from haggler.protocols.matching.settings import MatchingSettings
from haggler.storage.database import Database, open_database
from haggler.storage.schema import a2a_artifacts, a2a_messages, a2a_tasks

ROOT = Path(__file__).resolve().parent.parent
PAIRS_FILE = ROOT / "tests" / "agents" / "match_pairs.json"
TERMINAL = (MatchAction.ACCEPT, MatchAction.REJECT)


def now() -> datetime:
    return datetime.now(timezone.utc)


def load_pairs(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["pairs"]


def user_body(side: dict[str, Any]) -> dict[str, Any]:
    return {"name": side["profile"].get("name", side["userId"]), "profile": side["profile"],
            "intents": side["intents"]}


def seed_body(pair: dict[str, Any], ids: dict[str, str]) -> dict[str, Any]:
    """The pair's seed assessment, its actors (if any) renamed to the users created for it."""
    seed = dict(pair["seed"])
    if seed.get("actors"):
        seed["actors"] = [{"userId": ids[a["userId"]], "role": a["role"]} for a in seed["actors"]]
    return seed


# ------------------------------------------------------------------------------- part 1: in process


@dataclass
class StoredUsers:
    """The two users created for one labelled pair."""

    source: str
    candidate: str
    seed: dict[str, Any]


def create_pair_users(db: Database, pairs: list[dict[str, Any]]) -> list[StoredUsers]:
    created = []
    with db.write() as conn:
        for pair in pairs:
            a, _ = participants.create_user(conn, user_body(pair["a"]), now())
            b, _ = participants.create_user(conn, user_body(pair["b"]), now())
            ids = {pair["a"]["userId"]: a["id"], pair["b"]["userId"]: b["id"]}
            created.append(StoredUsers(a["id"], b["id"], seed_body(pair, ids)))
    return created


def run_stored(db: Database, plan: list[StoredUsers], settings: MatchingSettings) -> tuple[float, list[str]]:
    """Each negotiation as the API runs it: the opportunity and its ``submitted`` task in one
    transaction, the negotiation's system turns in the next. Returns (seconds, negotiation ids)."""
    ids = []
    started = time.perf_counter()
    for users in plan:
        with db.write() as conn:
            opened = opportunities.create(conn, {"sourceUserId": users.source, "candidateUserId": users.candidate,
                                                 "seedAssessment": users.seed}, settings, now())
        with db.write() as conn:
            negotiations.advance(conn, opened["negotiationId"], settings, now())
        ids.append(opened["negotiationId"])
    return time.perf_counter() - started, ids


def memory_context(side: dict[str, Any]) -> UserContext:
    profile = dict(side["profile"])
    profile.setdefault("name", side["userId"])
    return UserContext(side["userId"], profile,
                       tuple(UserIntent(i["description"], tuple(i.get("tags", ()))) for i in side["intents"]))


def memory_negotiation(a: UserContext, b: UserContext, seed: SeedAssessment, cap: int | None) -> list[MatchTurn]:
    """One negotiation with no storage: the decider alone, alternating sides from the source,
    until accept, reject or the cap."""
    history: list[MatchTurn] = []
    own, other = a, b
    while True:
        turn = decide(MatchContext(own=own, other=other, seed=seed, history=tuple(history), max_turns=cap))
        history.append(turn)
        if turn.action in TERMINAL or (cap is not None and len(history) >= cap):
            return history
        own, other = other, own


def run_memory(plan: list[tuple[UserContext, UserContext, SeedAssessment]],
               cap: int | None) -> tuple[float, int, list[list[str]]]:
    """(seconds, decide calls, each negotiation's actions)."""
    calls = 0
    actions = []
    started = time.perf_counter()
    for a, b, seed in plan:
        history = memory_negotiation(a, b, seed, cap)
        calls += len(history)
        actions.append([t.action.value for t in history])
    return time.perf_counter() - started, calls, actions


@dataclass
class InProcess:
    negotiations: int
    stored_seconds: float
    stored_turns: int
    outcomes: dict[str, int]
    memory_seconds: float
    memory_calls: int
    same_turns: bool

    @property
    def negotiations_per_s(self) -> float:
        return self.negotiations / self.stored_seconds

    @property
    def turns_per_s(self) -> float:
        return self.stored_turns / self.stored_seconds

    @property
    def decide_per_s(self) -> float:
        return self.memory_calls / self.memory_seconds

    @property
    def storage_ratio(self) -> float:
        return self.turns_per_s / self.decide_per_s


def stored_actions(db: Database, task_ids: list[str]) -> tuple[list[list[str]], dict[str, int]]:
    """Each stored negotiation's actions, in order, and the outcomes by kind."""
    by_task: dict[str, list[str]] = {task_id: [] for task_id in task_ids}
    outcomes: dict[str, int] = {}
    with db.read() as conn:
        for row in conn.execute(select(a2a_messages.c.task_id, a2a_messages.c.data)
                                .order_by(a2a_messages.c.task_id, a2a_messages.c.seq)):
            if row.task_id in by_task:
                by_task[row.task_id].append(json.loads(row.data)["action"])
        for data in conn.execute(select(a2a_artifacts.c.data).where(a2a_artifacts.c.task_id.in_(task_ids))).scalars():
            outcome = json.loads(data)
            kind = "accepted" if outcome["hasOpportunity"] else outcome.get("reason", "rejected")
            outcomes[kind] = outcomes.get(kind, 0) + 1
        open_tasks = conn.execute(select(func.count()).select_from(a2a_tasks).where(
            a2a_tasks.c.id.in_(task_ids), a2a_tasks.c.state != negotiations.COMPLETED)).scalar_one()
    if open_tasks:
        raise ServerFailed(f"{open_tasks} system–system negotiations did not complete")
    return [by_task[task_id] for task_id in task_ids], outcomes


def in_process(pairs: list[dict[str, Any]], count: int, workdir: Path, warmup: int) -> InProcess:
    settings = MatchingSettings()
    cap = settings.caps.system_system
    db = open_database(f"sqlite:///{workdir / 'in-process.db'}")
    try:
        users = create_pair_users(db, pairs)
        plan = [users[i % len(users)] for i in range(count)]
        memory_plan = [(memory_context(p["a"]), memory_context(p["b"]),
                        SeedAssessment(int(p["seed"]["score"]), p["seed"]["reasoning"], p["seed"]["valencyRole"],
                                       tuple((a["userId"], a["role"]) for a in p["seed"].get("actors", []))))
                       for p in (pairs[i % len(pairs)] for i in range(count))]
        # Warm-up off the clock: imports, SQLAlchemy's statement cache, the decider's caches.
        run_memory(memory_plan[:warmup], cap)
        run_stored(db, plan[:warmup], settings)
        # Baseline in two halves around the stored run, so that drift hits both sides alike.
        half = len(memory_plan) // 2
        first = run_memory(memory_plan[:half], cap)
        stored_seconds, task_ids = run_stored(db, plan, settings)
        second = run_memory(memory_plan[half:], cap)
        actions, outcomes = stored_actions(db, task_ids)
    finally:
        db.dispose()
    return InProcess(negotiations=count, stored_seconds=stored_seconds,
                     stored_turns=sum(len(a) for a in actions), outcomes=outcomes,
                     memory_seconds=first[0] + second[0], memory_calls=first[1] + second[1],
                     same_turns=actions == first[2] + second[2])


# ----------------------------------------------------------------------------------- part 2: HTTP


@dataclass
class AgentKey:
    agent_id: str
    api_key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}


def seed_parked_turns(db_url: str, pairs: list[dict[str, Any]], agents: int,
                      per_agent: int) -> tuple[list[AgentKey], int]:
    """``agents`` users with an enabled agent each (the ``b`` sides of the pairs, round-robin) and
    ``per_agent`` opportunities to each from a system-only user (the same pair's ``a`` side), each
    negotiation run up to its first parked turn. Returns the agents' keys and how many turns are
    parked."""
    db = open_database(db_url)
    keys = []
    try:
        task_ids = []
        settings = MatchingSettings()
        with db.write() as conn:
            for i in range(agents):
                pair = pairs[i % len(pairs)]
                source, _ = participants.create_user(conn, user_body(pair["a"]), now())
                candidate, _ = participants.create_user(conn, user_body(pair["b"]), now())
                agent, key = participants.create_agent(conn, participants.OPERATOR, candidate["id"],
                                                       {"name": f"bench agent {i}"}, now())
                keys.append(AgentKey(agent["id"], key))
                seed = seed_body(pair, {pair["a"]["userId"]: source["id"], pair["b"]["userId"]: candidate["id"]})
                for _ in range(per_agent):
                    opened = opportunities.create(conn, {"sourceUserId": source["id"],
                                                         "candidateUserId": candidate["id"],
                                                         "seedAssessment": seed}, settings, now())
                    task_ids.append(opened["negotiationId"])
        for task_id in task_ids:
            with db.write() as conn:
                negotiations.advance(conn, task_id, settings, now())
        with db.read() as conn:
            parked = conn.execute(select(func.count()).select_from(a2a_tasks)
                                  .where(a2a_tasks.c.state == negotiations.WAITING)).scalar_one()
    finally:
        db.dispose()
    return keys, parked


@dataclass
class AgentRun:
    pickups: Stats = field(default_factory=Stats)
    responds: Stats = field(default_factory=Stats)
    round_trips: Stats = field(default_factory=Stats)
    decide_seconds: float = 0.0
    empty_pickups: int = 0          # 204: nothing parked for the agent (it stops)
    completed: int = 0              # negotiations a respond completed
    accepted: int = 0
    elapsed: float = 0.0
    cpu: tuple[float, float] = (math.nan, math.nan)
    stopped_by_limit: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def turns_per_s(self) -> float:
        return self.responds.requests / self.elapsed if self.elapsed > 0 else math.nan


async def agent_loop(client: httpx.AsyncClient, agent: AgentKey, run: AgentRun, budget: itertools.count,
                     max_turns: int, think: float, start_after: float = 0.0) -> None:
    """Pick up, decide, respond, until nothing is parked for this agent (or the turn budget is
    spent), pausing ``think`` seconds after each respond; the first pickup waits ``start_after``."""
    base = f"/api/agents/{agent.agent_id}/negotiations"
    if start_after:
        await asyncio.sleep(start_after)
    while next(budget) < max_turns:
        t0 = time.perf_counter()
        response = await client.post(f"{base}/pickup", headers=agent.auth)
        t1 = time.perf_counter()
        if response.status_code == 204:
            run.empty_pickups += 1
            return
        if response.status_code != 200:
            run.errors.append(http_error(response, "pickup"))
            return
        claim = response.json()
        turn = decide(parse_context(claim))
        t2 = time.perf_counter()
        response = await client.post(f"{base}/{claim['negotiationId']}/respond", json=turn.to_json(),
                                     headers=agent.auth)
        t3 = time.perf_counter()
        if response.status_code != 200:
            run.errors.append(http_error(response, "respond"))
            return
        run.pickups.add(t1 - t0)
        run.decide_seconds += t2 - t1
        run.responds.add(t3 - t2)
        run.round_trips.add(t3 - t0)
        outcome = response.json().get("outcome")
        if outcome is not None:
            run.completed += 1
            run.accepted += bool(outcome["hasOpportunity"])
        if think:
            await asyncio.sleep(think)


async def run_agents(base: str, keys: list[AgentKey], max_turns: int, think: float, seconds: float,
                     server_pid: int) -> AgentRun:
    """The agents, each on its own connection. With ``think`` > 0 their first pickups are spread
    evenly over the first think time, so that they do not poll in lockstep."""
    run = AgentRun()
    budget = itertools.count()
    async with open_clients(base, len(keys)) as pool:
        timed = await run_timed([agent_loop(client, key, run, budget, max_turns, think, think * k / len(keys))
                                 for k, (client, key) in enumerate(zip(pool, keys))], seconds, server_pid)
    outcomes, run.elapsed, run.cpu, run.stopped_by_limit = timed.outcomes, timed.elapsed, timed.cpu, timed.stopped
    for outcome in outcomes:
        if isinstance(outcome, Exception) and not isinstance(outcome, asyncio.CancelledError):
            run.errors.append(f"{type(outcome).__name__}: {outcome}")
    return run


@dataclass
class OverHttp:
    agents: int
    parked: int
    run: AgentRun
    bare: list[tuple[Stats, float]]
    warmup_turns: int

    @property
    def bare_rps(self) -> float:
        requests = sum(stats.requests for stats, _ in self.bare)
        seconds = sum(elapsed for _, elapsed in self.bare)
        return requests / seconds if seconds > 0 else math.nan

    @property
    def requests_per_s(self) -> float:
        r = self.run
        return (r.pickups.requests + r.responds.requests + r.empty_pickups) / r.elapsed if r.elapsed > 0 else math.nan


async def http_phases(server: StoreServer, keys: list[AgentKey], warm: AgentKey, parked: int,
                      args: argparse.Namespace, deadline: float) -> OverHttp:
    # Warm-up off the clock: one agent of its own takes all its turns.
    warm_run = await run_agents(server.base, [warm], 1000, 0.0, max(1.0, deadline - time.perf_counter()), server.pid)
    if warm_run.errors:
        raise ServerFailed("warm-up agent failed: " + "; ".join(warm_run.errors[:3]))
    remaining = deadline - time.perf_counter()
    half = max(0.25, min(args.baseline_seconds, remaining * 0.2) / 2)
    bare = []
    stats, elapsed, _ = await hammer_healthz(server.base, len(keys), half, args.baseline_max_requests // 2, server.pid)
    bare.append((stats, elapsed))
    remaining = deadline - time.perf_counter() - half
    if remaining <= 1:
        raise ServerFailed("no time left for the agents: raise --duration-limit")
    run = await run_agents(server.base, keys, args.max_turns, args.think_ms / 1000, remaining, server.pid)
    server.check_alive()
    stats, elapsed, _ = await hammer_healthz(server.base, len(keys), half, args.baseline_max_requests // 2, server.pid)
    bare.append((stats, elapsed))
    errors = [e for stats, _ in bare for e in stats.errors]
    if errors:
        raise ServerFailed("/healthz failed: " + "; ".join(errors[:3]))
    return OverHttp(len(keys), parked, run, bare, warm_run.responds.requests)


def over_http(pairs: list[dict[str, Any]], args: argparse.Namespace, workdir: Path, deadline: float) -> OverHttp:
    db_url = f"sqlite:///{workdir / 'http.db'}"
    print(f"storing {args.agents} users with agents and {args.agents * args.opportunities_per_agent} "
          f"opportunities ...", file=sys.stderr, flush=True)
    keys, parked = seed_parked_turns(db_url, pairs, args.agents + 1, args.opportunities_per_agent)
    warm, keys = keys[-1], keys[:-1]
    parked -= args.opportunities_per_agent  # the warm-up agent's
    server = StoreServer(db_url, workdir, seed=None)
    server.args += ["--data-dir", str(workdir / "data")]
    try:
        server.start(timeout=min(30.0, max(1.0, deadline - time.perf_counter())))
        print(f"server pid {server.pid} on {server.base}: {args.agents} agents, {parked} turns parked "
              f"(limit {args.duration_limit:g}s) ...", file=sys.stderr, flush=True)
        result = asyncio.run(http_phases(server, keys, warm, parked, args, deadline))
        server.check_alive()
    except (ServerFailed, httpx.HTTPError, OSError, ValueError, KeyError) as exc:
        raise ServerFailed(f"{type(exc).__name__}: {exc}\n{server.log_tail()}") from exc
    finally:
        server.stop()
    if result.run.errors:
        raise ServerFailed(f"{len(result.run.errors)} failed requests, e.g.:\n  "
                           + "\n  ".join(result.run.errors[:5]) + "\n" + server.log_tail())
    return result


# ------------------------------------------------------------------------------------- reporting


def report(local: InProcess, http: OverHttp, args: argparse.Namespace) -> dict[str, str]:
    print()
    print(f"haggler matching benchmark — {os.cpu_count()} CPUs; SQLite")
    print()
    per_neg = local.stored_turns / local.negotiations
    print(f"1. in process: {local.negotiations} system–system negotiations "
          f"({per_neg:.2f} turns each; outcomes {', '.join(f'{k} {v}' for k, v in sorted(local.outcomes.items()))})")
    print(f"   stored (create + advance)  {fmt(local.negotiations_per_s, 1)} negotiations/s   "
          f"{fmt(local.turns_per_s, 1)} turns/s   {fmt(1000 / local.turns_per_s, 3)} ms a turn")
    print(f"   decide alone (baseline)    {fmt(local.decide_per_s / per_neg, 1)} negotiations/s   "
          f"{fmt(local.decide_per_s, 1)} decide calls/s   {fmt(1000 / local.decide_per_s, 3)} ms a call")
    print(f"   storage_ratio = stored turns/s ÷ decide calls/s = {fmt(local.storage_ratio, 3)}   "
          f"(storage costs {fmt(1000 / local.turns_per_s - 1000 / local.decide_per_s, 3)} ms a turn on top "
          f"of deciding; same turns with and without storage: {'yes' if local.same_turns else 'NO'})")
    run = http.run
    turns = run.responds.requests
    mean_decide_ms = 1000 * run.decide_seconds / turns if turns else math.nan
    print()
    print(f"2. over HTTP: {http.agents} agents polling a real server, {http.parked} turns parked "
          f"(+{http.warmup_turns} warm-up turns off the clock), think {args.think_ms:g} ms")
    header = ["", "requests", "p50 ms", "p90 ms", "p99 ms", "max ms"]
    rows = [["pickup (POST, 200)", run.pickups], ["respond (POST)", run.responds],
            ["pickup → decide → respond", run.round_trips]]
    table = [header] + [[label, f"{s.requests:,}", *(fmt(s.ms(q), 2) for q in (50, 90, 99, 100))]
                        for label, s in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("   " + "  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row)))
    server_s, client_s = run.cpu
    requests = run.pickups.requests + run.responds.requests + run.empty_pickups
    print(f"   turns {turns:,} in {fmt(run.elapsed, 2)} s: {fmt(run.turns_per_s, 1)} turns/s; "
          f"{run.completed:,} negotiations completed ({run.accepted:,} with an opportunity); "
          f"{run.empty_pickups} agents finished (204)")
    print(f"   decide in the agent: {fmt(mean_decide_ms, 3)} ms a turn (inside the round trip)")
    print(f"   server CPU {fmt(100 * server_s / run.elapsed, 0)}% of a core, {fmt(1000 * server_s / turns if turns else math.nan, 2)} "
          f"ms a turn; load generator CPU {fmt(100 * client_s / run.elapsed, 0)}%")
    ratio = http.requests_per_s / http.bare_rps if http.bare_rps > 0 else math.nan
    print(f"   requests/s {fmt(http.requests_per_s, 1)} ÷ bare /healthz req/s {fmt(http.bare_rps, 1)} "
          f"= http_ratio {fmt(ratio, 3)}")
    if not args.think_ms:
        print(f"   closed loop: each agent sends its next request as soon as the last is answered, so the round "
              f"trip is mostly queueing (Little's law: {http.agents} agents ÷ {fmt(run.turns_per_s, 0)} turns/s "
              f"= {fmt(1000 * http.agents / run.turns_per_s if run.turns_per_s > 0 else math.nan, 1)} ms)")
    if run.stopped_by_limit:
        print(f"   note: stopped by --duration-limit {args.duration_limit:g}s before every parked turn was taken")
    return {
        "system_negotiations_per_s": num(local.negotiations_per_s, 1),
        "system_turns_per_s": num(local.turns_per_s, 1),
        "decide_per_s": num(local.decide_per_s, 1),
        "storage_ratio": num(local.storage_ratio, 3),
        "pickup_respond_p50_ms": num(run.round_trips.ms(50), 2),
        "pickup_respond_p99_ms": num(run.round_trips.ms(99), 2),
        "agents": str(http.agents),
        "agent_turns": str(turns),
        "agent_turns_per_s": num(run.turns_per_s, 1),
        "pickup_p50_ms": num(run.pickups.ms(50), 2),
        "respond_p50_ms": num(run.responds.ms(50), 2),
        "bare_rps": num(http.bare_rps, 1),
        "http_ratio": num(ratio, 3),
        "think_ms": f"{args.think_ms:g}",
        "db": "sqlite",
    }


# ------------------------------------------------------------------------------------------ main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--negotiations", type=int, default=640,
                        help="part 1: system–system negotiations, the labelled pairs round-robin (default 640)")
    parser.add_argument("--agents", type=int, default=32, help="part 2: concurrent polling agents (default 32)")
    parser.add_argument("--opportunities-per-agent", type=int, default=24,
                        help="part 2: opportunities parked for each agent before the clock starts (default 24)")
    parser.add_argument("--max-turns", type=int, default=20_000,
                        help="part 2: cap on the turns taken, all agents together (default 20000)")
    parser.add_argument("--think-ms", type=float, default=0.0, metavar="MS",
                        help="part 2: each agent's pause after a respond, before its next pickup (default 0: "
                             "closed loop)")
    parser.add_argument("--duration-limit", type=float, default=60.0, metavar="SECONDS",
                        help="part 2: hard cap from server start to stop, baseline included (default 60)")
    parser.add_argument("--baseline-seconds", type=float, default=4.0,
                        help="part 2: length of the /healthz baseline, half before and half after (default 4)")
    parser.add_argument("--baseline-max-requests", type=int, default=200_000,
                        help="part 2: request cap of the baseline, both halves together (default 200000)")
    parser.add_argument("--pairs", type=Path, default=PAIRS_FILE, help="labelled pairs (default tests/agents/"
                                                                       "match_pairs.json)")
    args = parser.parse_args(argv)
    check_limits(parser, args, ("negotiations", "agents", "opportunities_per_agent", "max_turns",
                                "baseline_max_requests"))
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    stop_on_signals()
    pairs = load_pairs(args.pairs)
    workdir = Path(tempfile.mkdtemp(prefix="haggler-matching-bench-"))
    try:
        print(f"part 1: {args.negotiations} system–system negotiations in process ...", file=sys.stderr, flush=True)
        local = in_process(pairs, args.negotiations, workdir, warmup=min(32, args.negotiations))
        started = time.perf_counter()
        # Keep a little of the budget for stopping the server (graceful, then SIGKILL).
        deadline = started + args.duration_limit - min(12.0, 0.1 * args.duration_limit)
        http = over_http(pairs, args, workdir, deadline)
    except ServerFailed as exc:
        print(f"failed: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr, flush=True)
        return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result = report(local, http, args)
    sys.stdout.flush()
    print("RESULT " + " ".join(f"{key}={value}" for key, value in result.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
