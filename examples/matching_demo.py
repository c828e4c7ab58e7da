#!/usr/bin/env python3
"""Match negotiation end to end on this machine: no API key, nothing beyond loopback.

Starts ``haggler serve`` (a free loopback port, a throwaway SQLite database, an operator token,
a short negotiation timeout), creates five people, gives three of them personal agents and runs
two of those agents as ``haggler match agent`` processes. Then it opens three opportunities and
prints how each negotiation ends:

1. Jonas and Rachel, both personal agents online: they negotiate → ``pending``;
2. Yusuf and Elif, no personal agents: the system negotiator argues both sides → ``rejected``;
3. Jonas and Noor, whose personal agent never polls: Noor's turn waits until the negotiation
   timeout → ``stalled`` (reason ``timeout``).

With ``--protocol v2`` the same three run under Negotiations v2 (Index Network's seats: the
initiator reaches out, counters or withdraws, only the counterparty accepts or declines) and the
timeout is v2's wall clock of an uncapped run; the outcomes are the same.

Exits 0 only when all three outcomes are seen and both agents stop cleanly on Ctrl-C; it takes
about the negotiation timeout (20 s by default) plus a few seconds on an idle machine, and stops
every process it started. Nothing in it races the clock: it waits for the server and for each
agent to be polling before it opens a negotiation (a slow start must not let the timeout end the
Jonas ↔ Rachel negotiation), and gives each process a generous bound to stop.

    python examples/matching_demo.py [--negotiation-timeout 20] [--interval 1] [--protocol v1|v2]
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

import httpx

from haggler.server.threaded import free_port

#: The people (after tests/agents/match_pairs.json): Jonas and Rachel complement each other, Yusuf
#: and Elif share keywords but neither can give the other anything, Noor would suit Jonas.
PEOPLE: dict[str, dict[str, Any]] = {
    "jonas": {"name": "Jonas", "profile": {
        "role": "Full-stack developer", "bio": "Shipped a scheduling SaaS used by 30 clinics, no sales motion yet.",
        "offers": ["full-stack development", "a working SaaS product"], "seeks": ["a co-founder to run sales"]},
        "intents": [{"description": "Find someone to own go-to-market and sales", "tags": ["gtm"]}]},
    "rachel": {"name": "Rachel", "profile": {
        "role": "Head of sales", "bio": "Built the first sales team at a vertical SaaS company.",
        "offers": ["B2B sales", "go-to-market"], "seeks": ["a technical co-founder with a product"]},
        "intents": [{"description": "Join a developer who has built something customers use"}]},
    "noor": {"name": "Noor", "profile": {
        "role": "Growth marketer", "bio": "Grew two B2B SaaS products from launch to their first thousand customers.",
        "offers": ["go-to-market", "growth marketing"], "seeks": ["a developer with a working product"]},
        "intents": [{"description": "Partner with a technical founder on a SaaS launch"}]},
    "yusuf": {"name": "Yusuf", "profile": {
        "role": "First-time founder", "bio": "Edtech for vocational schools.",
        "offers": ["edtech product"], "seeks": ["a mentor for fundraising"]},
        "intents": [{"description": "Learn how to pitch investors"}]},
    "elif": {"name": "Elif", "profile": {
        "role": "First-time founder", "bio": "Edtech marketplace for tutors.",
        "offers": ["tutor marketplace"], "seeks": ["fundraising mentorship"]},
        "intents": []},
}
#: Who gets a personal agent, and whether the demo runs it.
AGENTS = {"jonas": True, "rachel": True, "noor": False}
#: (label, source, candidate, seed, the opportunity status the demo expects).
PAIRS = [
    ("personal agent vs personal agent, one offline", "jonas", "noor",
     {"score": 74, "reasoning": "Noor takes SaaS products to market; Jonas has one without sales.",
      "valencyRole": "peer"}, "stalled"),
    ("personal agent vs personal agent", "jonas", "rachel",
     {"score": 79, "reasoning": "Jonas builds, Rachel sells SaaS.", "valencyRole": "peer"}, "pending"),
    ("system negotiator on both sides", "yusuf", "elif",
     {"score": 63, "reasoning": "Both first-time edtech founders preparing to fundraise.", "valencyRole": "peer"},
     "rejected"),
]


def haggler(*args: str) -> list[str]:
    return [sys.executable, "-m", "haggler", *args]


#: Seconds a child may take to start answering, or to stop: far beyond an idle machine's few
#: seconds, so that a loaded machine is slow rather than wrong (an agent killed before it can say
#: "stopped" is not a clean stop).
PATIENCE = 120


def stop(proc: subprocess.Popen[bytes], *, interrupt: bool) -> None:
    """Ctrl-C (or terminate) a child, then kill it if it does not go within :data:`PATIENCE`."""
    if proc.poll() is not None:
        return
    if interrupt and os.name == "posix":
        proc.send_signal(signal.SIGINT)
    else:
        proc.terminate()
    try:
        proc.wait(timeout=PATIENCE)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=PATIENCE)


def spawn(stack: ExitStack, args: list[str], log: Path, env: dict[str, str], *, interrupt: bool) -> subprocess.Popen[bytes]:
    out = stack.enter_context(open(log, "wb"))
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env={**env, "PYTHONUNBUFFERED": "1"})
    stack.callback(stop, proc, interrupt=interrupt)
    return proc


def wait_until(ready: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    """Poll ``ready()`` until it holds; give up (showing the child's log) when the child exits or
    after :data:`PATIENCE` seconds."""
    deadline = time.monotonic() + PATIENCE
    while not ready():
        if proc.poll() is not None:
            raise SystemExit(f"{what} exited with {proc.returncode}:\n{log.read_text(errors='replace')}")
        if time.monotonic() > deadline:
            raise SystemExit(f"{what} not ready within {PATIENCE}s:\n{log.read_text(errors='replace')}")
        time.sleep(0.1)


def healthy(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def created(response: httpx.Response) -> dict[str, Any]:
    if response.status_code != 201:
        raise SystemExit(f"{response.request.method} {response.request.url.path}: {response.status_code} {response.text}")
    return dict(response.json())


def describe(opportunity: dict[str, Any], negotiation: dict[str, Any], names: dict[str, str]) -> str:
    outcome = negotiation.get("outcome") or {}
    turns = " → ".join(f"{names[t['speaker']]}: {t['action']} ({t['takenBy']})" for t in negotiation["turns"])
    status = opportunity["status"]
    detail = ""
    if status == "pending":
        detail = "agreed roles " + ", ".join(f"{names[r['userId']]} {r['role']}" for r in opportunity.get("agreedRoles", []))
    elif outcome.get("reason"):
        detail = f"reason {outcome['reason']}"
    return f"{status}{f' ({detail})' if detail else ''} after {outcome.get('turnCount', 0)} turn(s): {turns or 'none'}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--negotiation-timeout", type=int, default=20,
                        help="seconds a personal-vs-personal negotiation may run (default 20)")
    parser.add_argument("--interval", type=float, default=1.0, help="the agents' polling interval (default 1 s)")
    parser.add_argument("--protocol", choices=("v1", "v2"), default="v1",
                        help="the negotiation protocol: v1, or v2 (Index Network's seats; the timeout is then "
                             "v2's wall clock of uncapped runs)")
    args = parser.parse_args()
    if not 1 <= args.negotiation_timeout <= 60:
        parser.error("--negotiation-timeout must be between 1 and 60 seconds")
    started = time.monotonic()

    with tempfile.TemporaryDirectory(prefix="haggler-match-demo-") as tmp, ExitStack() as stack:
        tmpdir = Path(tmp)
        token = secrets.token_urlsafe(24)
        env = {**os.environ, "HAGGLER_OPERATOR_TOKEN": token}
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        db = f"sqlite:///{tmpdir / 'match.db'}"
        server_log = tmpdir / "server.log"
        server = spawn(stack, haggler(
            "serve", "--port", str(port), "--db", db, "--data-dir", str(tmpdir / "data"), "--log-level", "warning",
            "--negotiation-timeout", str(args.negotiation_timeout),
            "--negotiation-protocol", args.protocol, "--v2-wall-clock", str(args.negotiation_timeout),
            # Longer than the demo: the system negotiator never takes Noor's turn; the timeout ends it.
            "--parked-timeout", "600"), server_log, env, interrupt=False)
        wait_until(lambda: healthy(base), "haggler serve", server, server_log)
        print(f"haggler serve on {base} (negotiation protocol {args.protocol}, "
              f"negotiation timeout {args.negotiation_timeout}s)")

        operator = stack.enter_context(httpx.Client(base_url=base, timeout=30,
                                                    headers={"Authorization": f"Bearer {token}"}))
        ids = {key: created(operator.post("/api/users", json=person))["id"] for key, person in PEOPLE.items()}
        names = {ids[key]: PEOPLE[key]["name"] for key in PEOPLE}
        agents: dict[str, tuple[subprocess.Popen[bytes], Path]] = {}
        for key, online in AGENTS.items():
            agent = created(operator.post(f"/api/users/{ids[key]}/agents", json={"name": f"{PEOPLE[key]['name']}'s agent"}))
            if not online:
                print(f"{PEOPLE[key]['name']} has a personal agent that never polls")
                continue
            log = tmpdir / f"agent-{key}.log"
            proc = spawn(stack, haggler("match", "agent", "--server", base, "--agent-id", agent["id"],
                                        "--interval", str(args.interval)),
                         log, {**env, "HAGGLER_AGENT_API_KEY": agent["apiKey"]}, interrupt=True)
            agents[key] = proc, log
        for key, (proc, log) in agents.items():  # started together, waited for in turn
            wait_until(lambda: "polling every" in log.read_text(errors="replace"),
                       f"{PEOPLE[key]['name']}'s agent", proc, log)
            print(f"{PEOPLE[key]['name']}'s personal agent is polling (haggler match agent)")

        opened = []
        for label, source, candidate, seed, expected in PAIRS:
            opportunity = created(operator.post("/api/opportunities", json={
                "sourceUserId": ids[source], "candidateUserId": ids[candidate], "seedAssessment": seed}))
            opened.append((label, source, candidate, expected, opportunity))
            print(f"opened {PEOPLE[source]['name']} ↔ {PEOPLE[candidate]['name']} ({label}): {opportunity['id']}")

        print("waiting for the negotiations to end ...")
        # The last outcome comes when the timeout has passed; the slack is for a loaded machine.
        deadline = time.monotonic() + args.negotiation_timeout + PATIENCE
        seen: dict[str, str] = {}
        while len(seen) < len(opened) and time.monotonic() < deadline:
            for label, source, candidate, expected, opportunity in opened:
                if opportunity["id"] in seen:
                    continue
                # Reading a negotiation applies any deadline that has passed (here: the timeout).
                negotiation = operator.get(f"/api/negotiations/{opportunity['negotiationId']}").json()
                if negotiation["state"] != "completed":
                    continue
                current = operator.get(f"/api/opportunities/{opportunity['id']}").json()
                seen[opportunity["id"]] = current["status"]
                if expected == "stalled" and (negotiation["outcome"] or {}).get("reason") != "timeout":
                    seen[opportunity["id"]] += " (not by timeout)"
                print(f"  {PEOPLE[source]['name']} ↔ {PEOPLE[candidate]['name']} ({label}): "
                      f"{describe(current, negotiation, names)}  [{time.monotonic() - started:.1f}s]")
            time.sleep(0.5)

        stack.close()  # stop the agents and the server before reading their logs and the database
        unclean = []
        for key, (proc, log) in agents.items():
            print(f"\n{PEOPLE[key]['name']}'s agent said:")
            for line in log.read_text(errors="replace").splitlines():
                print(f"  {line}")
            if proc.returncode != 0:  # the agent answers Ctrl-C with "stopped" and exit status 0
                unclean.append(f"{PEOPLE[key]['name']}'s agent did not stop cleanly on Ctrl-C (exit {proc.returncode})")
        insights = subprocess.run(haggler("match", "insights", "--db", db), capture_output=True, text=True,
                                  timeout=PATIENCE, env=env)
        print("\nhaggler match insights:\n" + insights.stdout.rstrip())

    missing = [f"{PEOPLE[s]['name']} ↔ {PEOPLE[c]['name']}: expected {e}, got {seen.get(o['id'], 'no outcome in time')}"
               for _, s, c, e, o in opened if seen.get(o["id"]) != e] + unclean
    elapsed = time.monotonic() - started
    if missing:
        print(f"\nFAILED after {elapsed:.1f}s:\n  " + "\n  ".join(missing))
        return 1
    print(f"\nall three outcomes seen (pending, rejected, stalled by timeout) in {elapsed:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
