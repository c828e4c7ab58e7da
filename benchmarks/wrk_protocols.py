#!/usr/bin/env python3
"""Every protocol's negotiations under ``wrk``, each beside the bare endpoint, in one run.

``wrk_store.py`` measures negotiate.v1 chats; this sibling runs the same machinery (``haggler
serve`` started by ``StoreServer``, ``wrk`` with one keep-alive connection per thread, the serving
processes' CPU read from ``/proc`` around each phase, medians over ``--runs``) over a negotiation of
each protocol, whole, from its Lua script in ``benchmarks/wrk/``:

* **negotiate** — negotiate.v1 chats: a start, offers through the ``next`` URLs, "deal"
  (``negotiate.lua``, as ``wrk_store.py``);
* **match** — spec 002's polling agents: each connection is one user's agent, with turns parked
  for it before the clock (system-only users open opportunities to it, and the system proposes);
  it picks a turn up and responds — a counter, then an accept — until the negotiation ends
  (``match.lua``). A pickup + respond is a *turn*; its server CPU is the match goal's figure;
* **transactions** — the exchange: a transaction opened, four messages to an accept (the price
  held), completed (paid out), both parties' keys on one connection (``transactions.lua``);
* **market** — spec 003's natural-language protocol: the buyer's contact, the seller's protocol
  agreement, four offers to the seller's accept (a deal), the deal read back and signed by both
  parties to ``confirmed``; every message Ed25519-signed in the script over its RFC 8785 form
  (``market.lua``, ``wrk/signing.lua``: LuaJIT's FFI to the libcrypto wrk links), the agents,
  their mandates and one listing per negotiation stored before the clock;
* **agents_json** — an agents.json visit: session, negotiate pointer, a negotiate.v1 chat to a
  deal, cart, checkout and the order placed on the checkout page (``agents_json.lua``).

Before and after each protocol's phase a half of the bare phase (``GET /healthz``) runs, so a
drift in the machine's speed weighs on both sides; ``ratio`` is the protocol's requests/s over
the bare requests/s. After each phase the database is read back to check that the negotiations
the script counted as finished are finished there (a mismatch is an error): a fast server that
drops a negotiation's end must not pass.

Last line::

    RESULT tool=wrk connections=32 seconds=10 runs=N sqlite_1_bare_rps=.. sqlite_1_match_rps=..
           sqlite_1_match_ratio=.. sqlite_1_match_p50_ms=.. sqlite_1_match_p99_ms=..
           sqlite_1_match_cpu_ms_per_request=.. sqlite_1_match_cpu_ms_per_turn=.. ... errors=0

(medians over ``--runs``). ``--postgres`` runs the same on a throwaway durable PostgreSQL cluster
(``tests/support/postgres.py``), adding the database's CPU per request. Loopback only, bounded by
``--seconds`` per phase; servers and the cluster are always stopped. Exit status 1 when a request
failed or a check did not hold.

    .venv/bin/python benchmarks/wrk_protocols.py [--protocols negotiate,match,transactions,market,agents_json]
        [--runs 3] [--seconds 10] [--connections 32] [--postgres] [--workers 1] [--profile DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from http_store import ServerFailed, StoreServer, start_profiler, stop_profiler  # noqa: E402
from matching_speed import PAIRS_FILE, load_pairs, seed_parked_turns  # noqa: E402
from wrk_store import DURABLE, Phase, postmaster, run_wrk  # noqa: E402
from sqlalchemy import func, select  # noqa: E402

from haggler.protocols.matching import negotiations  # noqa: E402
from haggler.storage.database import open_database  # noqa: E402
from haggler.storage.schema import a2a_tasks, exchange_transactions, market_deals, orders  # noqa: E402

GOAL_RATIO = 0.5
GOAL_MATCH_TURN_CPU_MS = 1.0


@dataclass
class Protocol:
    """One protocol's phase: its script, what it needs stored before the server starts, what its
    counters call a finished negotiation, and the check of its database afterwards."""

    name: str
    script: str
    #: (database URL, work dir, connections, runs) → wrk's environment; before the server starts.
    prepare: Callable[[str, Path, int, int], dict[str, str]] | None = None
    #: Which COUNTS field is a finished negotiation.
    finished: str = "deals"
    #: (database URL) → finished negotiations stored so far; None: the counters are taken as they are.
    stored_finished: Callable[[str], int] | None = None
    #: Requests a turn takes (the match turn is a pickup and a respond).
    requests_per_turn: int = 1
    #: (database URL, work dir, connections, phase number) → more of wrk's environment, before each
    #: phase (the market: where each connection's unused listings start).
    before_phase: Callable[[str, Path, int, int], dict[str, str]] | None = None
    #: More ``haggler serve`` options this protocol needs.
    server_args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)


def finished_count(table: Any, *where: Any) -> Callable[[str], int]:
    """A protocol's ``stored_finished``: the rows of ``table`` matching ``where``, read from the
    database the server wrote."""
    def count(db_url: str) -> int:
        db = open_database(db_url, existing=True)
        try:
            with db.read() as conn:
                return conn.execute(select(func.count()).select_from(table).where(*where)).scalar_one()
        finally:
            db.dispose()
    return count


# -- match ----------------------------------------------------------------------------------------

#: Turns parked per agent for each measured second of each run: a turn takes a pickup and a respond,
#: and a negotiation two turns of the agent's. 30 ran out within a 5 s phase once a turn cost
#: about 2 ms of server CPU (32 agents then take ~500 turns/s), so this is twice that.
MATCH_TURNS_PER_AGENT_SECOND = 60


def prepare_match(db_url: str, workdir: Path, connections: int, seconds_total: int) -> dict[str, str]:
    """One agent per connection, each with negotiations parked for its user (the system proposed),
    written to the file the Lua script reads."""
    per_agent = max(8, MATCH_TURNS_PER_AGENT_SECOND * seconds_total // 2)
    keys, parked = seed_parked_turns(db_url, load_pairs(PAIRS_FILE), connections, per_agent)
    agents = workdir / "match-agents.txt"
    agents.write_text("".join(f"{key.agent_id} {key.api_key}\n" for key in keys), encoding="utf-8")
    print(f"match: {len(keys)} agents, {parked} turns parked", flush=True)
    return {"HAGGLER_WRK_AGENTS": str(agents)}


# -- transactions ---------------------------------------------------------------------------------

def prepare_transactions(db_url: str, workdir: Path, connections: int, seconds_total: int) -> dict[str, str]:
    """For each connection a provider with a negotiable service and a consumer with a wallet deep
    enough for every transaction it could open, stored through the exchange's own functions."""
    from datetime import datetime, timezone

    from haggler.protocols.transactions import accounts, ledger

    now = datetime.now(timezone.utc)
    db = open_database(db_url)
    lines = []
    try:
        with db.write() as conn:
            for i in range(connections):
                consumer, consumer_key = accounts.register(conn, f"bench consumer {i}", now)
                provider, provider_key = accounts.register(conn, f"bench provider {i}", now)
                service = accounts.create_service(conn, provider, {
                    "name": "Summarize a document", "description": "Up to 10 pages.", "basePriceCents": 500,
                    "priceModel": "negotiable", "sla": {"latencyMs": 2000, "timeoutMs": 30000, "retries": 2}}, now)
                ledger.deposit(conn, consumer.id, ledger.MAX_AMOUNT_CENTS, now)
                lines.append(f"{consumer_key} {provider_key} {service['id']}\n")
    finally:
        db.dispose()
    parties = workdir / "transactions-parties.txt"
    parties.write_text("".join(lines), encoding="utf-8")
    return {"HAGGLER_WRK_PARTIES": str(parties)}


# -- market ---------------------------------------------------------------------------------------

#: Listings posted for each measured second of each run, shared out among the connections: a
#: negotiation takes nine requests and uses one listing up. 60 ran out on a quiet 2-core VM (73
#: negotiations a second, 658 requests/s); the goal's ratio of 0.5 is about 100 a second, and
#: each connection has only its own share.
MARKET_NEGOTIATIONS_PER_SECOND = 200
MARKET_ASK, MARKET_FLOOR, MARKET_MAX_SPEND = 100, 85, 100
#: The market counts every message per client address and every contact per agent; the script's
#: agents send thousands an hour, so the limits are raised out of reach (they are still counted).
MARKET_LIMITS = ("--max-agent-messages-per-hour", "1000000000", "--max-contacts-per-hour", "1000000000")


def prepare_market(db_url: str, workdir: Path, connections: int, seconds_total: int) -> dict[str, str]:
    """For each connection a seller and a buyer agent (their own keys, their owners' keys, an
    owner-signed mandate each) and the seller's listings, one per negotiation the connection could
    finish, each with its owner-signed floor: stored through the market's own functions, signed as
    an agent signs them."""
    import json
    from datetime import datetime, timedelta, timezone

    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

    from haggler.protocols.market import deals, identity, listings
    from haggler.protocols.market.audit import AuditEvents
    from haggler.timestamps import utc_z
    from haggler.trust.messages import encode_hex_public_key, sign_message

    now = datetime.now(timezone.utc)
    issued = utc_z(now - timedelta(minutes=1))
    permissions = {"canNegotiate": True, "canAcceptInstantMatch": True, "canUseSealedBid": True,
                   "requiresOwnerApproval": False}
    per_connection = max(8, -(-MARKET_NEGOTIATIONS_PER_SECOND * seconds_total // connections))
    item = {"category": "electronics", "subcategory": "gaming_console", "name": "nintendo_switch",
            "condition": "good", "description": "Barely used, with two controllers."}

    def agent(conn, agent_id: str, constraints: dict) -> tuple[Ed25519PrivateKey, Ed25519PrivateKey, str]:
        key, owner = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
        _, token = identity.register(conn, {"agentId": agent_id, "publicKey": encode_hex_public_key(key),
                                            "ownerPublicKey": encode_hex_public_key(owner)}, now)
        deals.file_mandate(conn, sign_message(owner, {
            "mandateVersion": "0.1.0", "issuedAt": issued, "agentId": agent_id,
            "constraints": {"currency": "EUR", **constraints}, "permissions": permissions,
            "publicKey": encode_hex_public_key(owner)}), AuditEvents(), now)
        return key, owner, token

    def raw(key: Ed25519PrivateKey) -> str:
        return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption()).hex()

    agents = []
    db = open_database(db_url)
    try:
        for i in range(connections):
            with db.write() as conn:
                seller_id, buyer_id = f"wrk-seller-{i}", f"wrk-buyer-{i}"
                seller_key, seller_owner, _ = agent(conn, seller_id, {"minAcceptablePrice": MARKET_FLOOR - 5})
                buyer_key, _, buyer_token = agent(conn, buyer_id, {"maxSpend": MARKET_MAX_SPEND})
                prefix = f"wrk-lst-{i}-"
                for k in range(1, per_connection + 1):
                    listing_id = f"{prefix}{k:06d}"
                    mandate = sign_message(seller_owner, {
                        "listingId": listing_id, "issuedAt": issued, "minAcceptablePrice": MARKET_FLOOR,
                        "publicKey": encode_hex_public_key(seller_owner)})
                    status, _ = listings.post_listing(conn, sign_message(seller_key, {
                        "type": "listing", "version": "0.1.0", "listingId": listing_id, "timestamp": utc_z(now),
                        "seller": {"agentId": seller_id}, "item": item,
                        "pricing": {"askPrice": MARKET_ASK, "currency": "EUR", "negotiable": True},
                        "ownerMandate": mandate}), AuditEvents(), now)
                    assert status == 201, status
            agents.append({"seller_id": seller_id, "seller_key": raw(seller_key), "buyer_id": buyer_id,
                           "buyer_token": buyer_token, "buyer_key": raw(buyer_key), "prefix": prefix,
                           "last": per_connection})
    finally:
        db.dispose()
    (workdir / "market-agents.json").write_text(json.dumps(agents), encoding="utf-8")
    print(f"market: {2 * connections} agents, {connections * per_connection} listings", flush=True)
    return {"HAGGLER_WRK_MARKET": str(workdir / "market-parties.txt")}


def market_phase(db_url: str, workdir: Path, connections: int, phase: int) -> dict[str, str]:
    """Before a phase: each connection starts at its seller's first listing still live (the
    earlier phases sold the ones before it), with request ids of this phase's own."""
    import json

    from haggler.storage.schema import market_listings

    agents = json.loads((workdir / "market-agents.json").read_text(encoding="utf-8"))
    db = open_database(db_url, existing=True)
    try:
        with db.read() as conn:
            c = market_listings.c
            first = dict(conn.execute(select(c.seller_id, func.min(c.id)).where(c.status == "live")
                                      .group_by(c.seller_id)).all())
    finally:
        db.dispose()
    lines = []
    for a in agents:
        live = first.get(a["seller_id"])
        start = int(live[len(a["prefix"]):]) if live else a["last"] + 1
        lines.append(f"{a['seller_id']} {a['seller_key']} {a['buyer_id']} {a['buyer_token']} {a['buyer_key']} "
                     f"{a['prefix']} {start} {a['last']} p{phase}\n")
    (workdir / "market-parties.txt").write_text("".join(lines), encoding="utf-8")
    return {}


# -- agents.json ----------------------------------------------------------------------------------

PROTOCOLS = {
    "negotiate": Protocol("negotiate", "negotiate.lua"),
    "match": Protocol("match", "match.lua", prepare=prepare_match, finished="completed",
                      stored_finished=finished_count(a2a_tasks, a2a_tasks.c.state == negotiations.COMPLETED),
                      requests_per_turn=2),
    "transactions": Protocol("transactions", "transactions.lua", prepare=prepare_transactions, finished="completed",
                             stored_finished=finished_count(exchange_transactions,
                                                            exchange_transactions.c.status == "completed")),
    "market": Protocol("market", "market.lua", prepare=prepare_market, finished="confirmed",
                       stored_finished=finished_count(market_deals, market_deals.c.status == "confirmed"),
                       before_phase=market_phase, server_args=MARKET_LIMITS),
    "agents_json": Protocol("agents_json", "agents_json.lua", finished="placed", stored_finished=finished_count(orders)),
}


# -- measuring ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Run:
    """One protocol's phase between two halves of the bare phase."""

    protocol: str
    bare: tuple[Phase, Phase]
    phase: Phase
    turns_per_request: float

    @property
    def bare_rps(self) -> float:
        return sum(p.requests for p in self.bare) / sum(p.seconds for p in self.bare)

    @property
    def bare_cpu_ms(self) -> float:
        return 1000 * sum(p.server_cpu_s for p in self.bare) / sum(p.requests for p in self.bare)

    @property
    def ratio(self) -> float:
        return self.phase.rps / self.bare_rps if self.bare_rps else 0.0

    @property
    def cpu_ms_per_turn(self) -> float:
        """Server CPU per turn: per request, times the requests a turn takes."""
        return self.phase.cpu_ms_per_request * self.turns_per_request


def measure(server: StoreServer, protocol: Protocol, connections: int, seconds: int, db_url: str,
            db_pid: int | None, workdir: Path, number: int, profile: Path | None = None) -> tuple[Run, list[str]]:
    """Phase ``number`` of ``protocol`` between two halves of the bare phase; the problems found.
    ``profile``: py-spy's collapsed stacks of the server during the protocol's phase go there."""
    half = max(1, seconds // 2)
    before = protocol.stored_finished(db_url) if protocol.stored_finished else 0
    env = dict(protocol.env)
    if protocol.before_phase is not None:
        env.update(protocol.before_phase(db_url, workdir, connections, number))
    bare_a = run_wrk(server, "bare.lua", "/healthz", connections, half)
    profiler = start_profiler(str(profile), server.pid) if profile is not None else None
    try:
        phase = run_wrk(server, protocol.script, "/", connections, seconds, db_pid, env=env)
    finally:
        if profiler is not None:
            stop_profiler(profiler, str(profile))
    bare_b = run_wrk(server, "bare.lua", "/healthz", connections, half)
    problems = []
    failed = phase.errors + phase.counts.get("errors", 0) + bare_a.errors + bare_b.errors
    if failed:
        problems.append(f"{protocol.name}: {failed} requests failed")
    finished = phase.counts.get(protocol.finished, 0)
    if protocol.stored_finished is not None:
        # wrk stops with a request in flight on each connection: the server may finish up to that
        # many negotiations whose answers the script never reads, and never fewer than it read.
        stored = protocol.stored_finished(db_url) - before
        if not finished <= stored <= finished + connections:
            problems.append(f"{protocol.name}: the script finished {finished} negotiations, the database {stored}")
    if finished == 0:
        problems.append(f"{protocol.name}: no negotiation finished")
    exhausted = phase.counts.get("exhausted", 0)
    if exhausted:
        problems.append(f"{protocol.name}: {exhausted} requests found no listing left "
                        f"(post more: MARKET_NEGOTIATIONS_PER_SECOND)")
    empty = phase.counts.get("empty", 0)
    if empty > phase.requests // 20:
        problems.append(f"{protocol.name}: {empty} of {phase.requests} pickups found nothing parked "
                        f"(park more turns: MATCH_TURNS_PER_AGENT_SECOND)")
    return Run(protocol.name, (bare_a, bare_b), phase, protocol.requests_per_turn), problems


def top_functions(path: Path, count: int = 25) -> list[str]:
    """The functions of py-spy's collapsed stacks (``stack;stack count`` a line) that the most
    samples passed through (inclusive) and ended in (self), as percentages of all samples; a
    frame's line number is dropped so that a function counts once per stack."""
    import re
    from collections import Counter

    inclusive: Counter[str] = Counter()
    own: Counter[str] = Counter()
    total = 0
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, samples = line.rpartition(" ")
        if not samples.isdigit():
            continue
        n = int(samples)
        total += n
        frames = [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";") if frame]
        for frame in set(frames):
            inclusive[frame] += n
        if frames:
            own[frames[-1]] += n
    if not total:
        return ["(no samples)"]
    lines = [f"{total} samples; inclusive % (self %) function"]
    for frame, n in inclusive.most_common(count):
        lines.append(f"{100 * n / total:5.1f}% ({100 * own[frame] / total:4.1f}%) {frame}")
    lines.append("most self time:")
    for frame, n in own.most_common(count // 2):
        lines.append(f"{100 * n / total:5.1f}% {frame}")
    return lines


def median(runs: list[Run], figure: Callable[[Run], float]) -> float:
    return statistics.median(figure(run) for run in runs)


def report(setup: str, run: Run) -> None:
    phase = run.phase
    counts = " ".join(f"{k} {v}" for k, v in phase.counts.items())
    print(f"[{setup}] {run.protocol:9} {phase.rps:7.0f} req/s  p50 {phase.p50_ms:6.2f} ms  p99 {phase.p99_ms:6.2f} ms  "
          f"server CPU {phase.cpu_ms_per_request:.3f} ms/request"
          + (f" + database {phase.db_cpu_ms_per_request:.3f}" if phase.db_cpu_s == phase.db_cpu_s else "")
          + f"  | bare {run.bare_rps:7.0f} req/s, {run.bare_cpu_ms:.3f} ms/request  | ratio {run.ratio:.2f}  ({counts})",
          flush=True)


def result_fields(setup: str, runs: dict[str, list[Run]], postgres: bool) -> list[str]:
    every = [run for group in runs.values() for run in group]
    fields = [f"{setup}_bare_rps={median(every, lambda r: r.bare_rps):.0f}",
              f"{setup}_bare_cpu_ms={median(every, lambda r: r.bare_cpu_ms):.3f}"]
    for name, group in runs.items():
        key = f"{setup}_{name}"
        fields += [f"{key}_rps={median(group, lambda r: r.phase.rps):.0f}",
                   f"{key}_ratio={median(group, lambda r: r.ratio):.3f}",
                   f"{key}_p50_ms={median(group, lambda r: r.phase.p50_ms):.2f}",
                   f"{key}_p99_ms={median(group, lambda r: r.phase.p99_ms):.2f}",
                   f"{key}_cpu_ms_per_request={median(group, lambda r: r.phase.cpu_ms_per_request):.3f}",
                   f"{key}_cpu_ms_per_turn={median(group, lambda r: r.cpu_ms_per_turn):.3f}"]
        if postgres:
            fields.append(f"{key}_db_cpu_ms_per_request={median(group, lambda r: r.phase.db_cpu_ms_per_request):.3f}")
    return fields


def goals(setup: str, runs: dict[str, list[Run]]) -> list[str]:
    lines = []
    for name, group in runs.items():
        ratio = median(group, lambda r: r.ratio)
        lines.append(f"{setup} {name}: ratio >= {GOAL_RATIO}: {'met' if ratio >= GOAL_RATIO else 'not met'} ({ratio:.2f})")
    if "match" in runs:
        cpu = median(runs["match"], lambda r: r.cpu_ms_per_turn)
        lines.append(f"{setup} match turn (pickup + respond) <= {GOAL_MATCH_TURN_CPU_MS} ms of server CPU: "
                     f"{'met' if cpu <= GOAL_MATCH_TURN_CPU_MS else 'not met'} ({cpu:.3f} ms)")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--protocols", default=",".join(PROTOCOLS), help=f"comma-separated, of: {', '.join(PROTOCOLS)}")
    parser.add_argument("--connections", type=int, default=32, help="keep-alive connections, one wrk thread each")
    parser.add_argument("--seconds", type=int, default=10, help="length of each protocol's phase, whole seconds "
                        "(the bare phase beside it as long, in two halves)")
    parser.add_argument("--runs", type=int, default=1, help="measure each protocol this many times; report medians")
    parser.add_argument("--postgres", action="store_true", help="a throwaway durable PostgreSQL cluster")
    parser.add_argument("--workers", type=int, default=1, help="haggler serve --workers")
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="py-spy the server through each protocol's first phase (.venv/bin/pip install "
                             "py-spy): collapsed stacks in DIR/<protocol>.txt and the top functions printed. "
                             "The profiler takes CPU too: read the figures of such a run as a profile, not a measure")
    args = parser.parse_args(argv)
    names = [n for n in args.protocols.split(",") if n]
    unknown = [n for n in names if n not in PROTOCOLS]
    if unknown or not names:
        parser.error(f"unknown protocol(s) {unknown}; choose from {', '.join(PROTOCOLS)}")
    if not 1 <= args.connections <= 256 or not 2 <= args.seconds <= 600 or not 1 <= args.runs <= 9:
        parser.error("--connections must be 1-256, --seconds 2-600 and --runs 1-9")
    if not 1 <= args.workers <= 16:
        parser.error("--workers must be 1-16")
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    if shutil.which("wrk") is None:
        print("wrk is not installed: apt-get install wrk (Debian's package)", file=sys.stderr)
        return 2
    problems: list[str] = []
    runs: dict[str, list[Run]] = {name: [] for name in names}
    dialect = "postgresql" if args.postgres else "sqlite"
    setup = f"{dialect}_{args.workers}"
    with tempfile.TemporaryDirectory(prefix="haggler-wrk-") as tmp, ExitStack() as stack:
        db_pid = None
        if args.postgres:
            from tests.support.postgres import PostgresCluster

            cluster = stack.enter_context(PostgresCluster(extra_settings=DURABLE))
            db_url, db_pid = cluster.create_database("bench"), postmaster(cluster)
        else:
            db_url = f"sqlite:///{tmp}/store.db"
        protocols = [PROTOCOLS[name] for name in names]
        for protocol in protocols:
            if protocol.prepare is not None:
                protocol.env = protocol.prepare(db_url, Path(tmp), args.connections, args.seconds * args.runs)
        server_args = tuple(arg for protocol in protocols for arg in protocol.server_args)
        server = StoreServer(db_url, Path(tmp), seed=1, workers=args.workers, extra_args=server_args)
        try:
            server.start(timeout=60)
            for number in range(args.runs):
                for protocol in protocols:
                    profile = args.profile / f"{protocol.name}.txt" if args.profile and number == 0 else None
                    run, found = measure(server, protocol, args.connections, args.seconds, db_url, db_pid,
                                         Path(tmp), number, profile)
                    if profile is not None and profile.exists():
                        print(f"[{setup}] {protocol.name} profile ({profile}):\n  "
                              + "\n  ".join(top_functions(profile)), flush=True)
                    runs[protocol.name].append(run)
                    problems += found
                    report(setup, run)
        except ServerFailed as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            server.stop()
    for line in goals(setup, runs):
        print("goals: " + line)
    for problem in problems:
        print("problem: " + problem, file=sys.stderr)
    print(f"RESULT tool=wrk connections={args.connections} seconds={args.seconds} runs={args.runs} "
          + " ".join(result_fields(setup, runs, args.postgres)) + f" errors={len(problems)}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
