"""The personal-agent runtime (``haggler match agent``) against a real matching server.

Every test talks HTTP to a store from ``make_store``: the runtime's requests, the turns it takes
and the conflicts it meets are the server's own. The server's clock is a FakeClock, so claim
expiry is a clock move, not a wait.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
from typing import Any

import httpx
import pytest

from haggler.agents.match_context import MatchContext, MatchTurn
from haggler.agents.match_negotiator import decide
from haggler.agents.match_runtime import AgentError, MatchAgentRuntime
from haggler.protocols.matching.settings import MatchingSettings
from tests.support.matching import Caller, JONAS, Operator, RACHEL, SEED, TOKEN

CLAIM_TIMEOUT = 600


@pytest.fixture
def matching(make_store, tmp_path):
    db_url = f"sqlite:///{tmp_path}/match.db"
    store = make_store(db_url=db_url,
                       matching=MatchingSettings(operator_token=TOKEN, claim_timeout_seconds=CLAIM_TIMEOUT))
    store.db_url = db_url
    return store


def runtime(store, agent: Caller, **kwargs: Any) -> MatchAgentRuntime:
    lines: list[str] = []
    kwargs.setdefault("log", lines.append)
    rt = MatchAgentRuntime(store.base, agent.id, agent.key, interval=0.01, **kwargs)
    rt.lines = lines  # type: ignore[attr-defined]
    return rt


def test_the_runtime_takes_a_parked_turn_and_the_negotiation_moves_on(matching):
    jonas, rachel = Operator(matching).user_id(JONAS), Operator(matching).user_id(RACHEL)
    jonas_agent = Operator(matching).agent(jonas)
    opportunity = Operator(matching).open(jonas, rachel, SEED)  # mixed: Jonas personal, Rachel system
    assert Operator(matching).negotiation(opportunity["negotiationId"])["waitingFor"] == jonas

    with runtime(matching, jonas_agent) as rt:
        assert rt.run(once=True) == 0

    done = Operator(matching).negotiation(opportunity["negotiationId"])
    assert done["state"] == "completed"
    assert [(t["speaker"], t["takenBy"]) for t in done["turns"]] == [
        (jonas, "personal"), (rachel, "system"), (jonas, "personal")]
    assert [t["action"] for t in done["turns"]] == ["propose", "counter", "accept"]
    assert rt.stats.pickups == rt.stats.responded == 2 and rt.stats.failures == rt.stats.conflicts == 0
    status = Operator(matching).opportunity(opportunity["id"])["status"]
    assert status == "pending"
    assert any("turn 1: propose" in line for line in rt.lines)
    assert any("turn 3: accept" in line and "pending" in line for line in rt.lines)


def test_the_runtime_polls_on_an_interval_until_interrupted(matching):
    jonas = Operator(matching).user_id(JONAS)
    jonas_agent = Operator(matching).agent(jonas)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    with runtime(matching, jonas_agent, sleep=sleep) as rt, pytest.raises(KeyboardInterrupt):
        rt.run()
    assert sleeps == [0.01, 0.01, 0.01]  # nothing waits: one interval between polls


def test_a_disabled_agent_does_not_poll(matching):
    jonas, rachel = Operator(matching).user_id(JONAS), Operator(matching).user_id(RACHEL)
    Operator(matching).agent(jonas)  # an enabled agent makes Jonas a personal participant; it never runs
    disabled = Operator(matching).agent(jonas, "disabled")
    opportunity = Operator(matching).open(jonas, rachel, SEED)
    sent: list[str] = []
    client = httpx.Client(timeout=10, event_hooks={"request": [lambda request: sent.append(
        f"{request.method} {request.url.path}")]})

    with client, runtime(matching, disabled, client=client, sleep=lambda _: pytest.fail("slept")) as rt:
        assert rt.run() == 0  # not once: a disabled agent returns at once all the same

    assert sent == [f"GET /api/agents/{disabled.id}"]
    assert any("disabled" in line and "not polling" in line for line in rt.lines)
    still = Operator(matching).negotiation(opportunity["negotiationId"])
    assert still["state"] == "waiting_for_agent" and still["waitingFor"] == jonas
    assert still["claimDeadline"] is None and len(still["turns"]) == 0


def test_a_lost_claim_is_a_409_and_the_runtime_carries_on(matching):
    jonas, rachel = Operator(matching).user_id(JONAS), Operator(matching).user_id(RACHEL)
    first, second = Operator(matching).agent(jonas), Operator(matching).agent(jonas)
    opportunity = Operator(matching).open(jonas, rachel, SEED)
    negotiation_id = opportunity["negotiationId"]

    def slow_decider(context: MatchContext) -> MatchTurn:
        """Deliberates past the claim timeout, while the user's other agent claims the turn."""
        matching.clock.advance(seconds=CLAIM_TIMEOUT + 1)
        taken = second.pickup()
        assert taken.status_code == 200 and taken.json()["claimedBy"] == second.id
        return decide(context)

    with runtime(matching, first, decider=slow_decider) as rt:
        assert rt.run(once=True) == 0  # the 409 is logged, then nothing waits for this agent

    assert rt.stats.conflicts == 1 and rt.stats.responded == 0 and rt.stats.failures == 0
    assert any("not taken" in line and "409" in line for line in rt.lines)
    held = Operator(matching).negotiation(negotiation_id)
    assert held["state"] == "claimed" and held["turns"] == []

    with runtime(matching, second) as winner:  # the agent holding the claim takes the turn
        assert winner.run(once=True) == 0
    assert Operator(matching).negotiation(negotiation_id)["state"] == "completed"
    assert winner.stats.responded == 2


def test_network_trouble_backs_off_and_keeps_going(matching):
    jonas = Operator(matching).user_id(JONAS)
    jonas_agent = Operator(matching).agent(jonas)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 1:
            matching.server.__exit__(None, None, None)  # the server goes away between polls
        if len(sleeps) == 5:
            raise KeyboardInterrupt

    with runtime(matching, jonas_agent, sleep=sleep, max_backoff=0.1) as rt, pytest.raises(KeyboardInterrupt):
        rt.run()
    assert sleeps == [0.01, 0.02, 0.04, 0.08, 0.1]  # one idle interval, then doubling up to the cap
    assert rt.stats.network_errors == 4
    assert sum("server trouble" in line for line in rt.lines) == 4


def test_unreachable_server_with_once_is_an_error():
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with MatchAgentRuntime(f"http://127.0.0.1:{port}", "agt_x", "hma_x", log=lambda _: None) as rt:
        with pytest.raises(AgentError, match="cannot reach"):
            rt.run(once=True)


def test_a_wrong_key_is_an_error_not_a_loop(matching):
    jonas = Operator(matching).user_id(JONAS)
    jonas_agent = Operator(matching).agent(jonas)
    with runtime(matching, dataclasses.replace(jonas_agent, key="hma_not-a-key")) as rt:
        with pytest.raises(AgentError, match="401"):
            rt.run()


def test_a_failing_decider_is_logged_and_retried_once(matching):
    jonas, rachel = Operator(matching).user_id(JONAS), Operator(matching).user_id(RACHEL)
    jonas_agent = Operator(matching).agent(jonas)
    opportunity = Operator(matching).open(jonas, rachel, SEED)

    def broken(context: MatchContext) -> MatchTurn:
        raise RuntimeError("the model is down")

    with runtime(matching, jonas_agent, decider=broken) as rt:
        assert rt.run(once=True) == 1
    assert rt.stats.failures == 2  # tried, then the same turn once more, then gave up on it
    assert any("the model is down" in line for line in rt.lines)
    assert Operator(matching).negotiation(opportunity["negotiationId"])["state"] == "claimed"


# -- the command ------------------------------------------------------------------------------------

def haggler(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "haggler", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_haggler_match_agent_once_and_insights(matching):
    jonas, rachel = Operator(matching).user_id(JONAS), Operator(matching).user_id(RACHEL)
    jonas_agent = Operator(matching).agent(jonas)
    disabled = Operator(matching).agent(rachel, "disabled")
    opportunity = Operator(matching).open(jonas, rachel, SEED)

    off = haggler("match", "agent", "--server", matching.base, "--agent-id", disabled.id,
                  env={"HAGGLER_AGENT_API_KEY": disabled.key})
    assert off.returncode == 0, off.stderr
    assert "disabled" in off.stdout

    result = haggler("match", "agent", "--server", matching.base, "--agent-id", jonas_agent.id,
                     "--api-key", jonas_agent.key, "--once")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "turn 1: propose" in result.stdout and "turn 3: accept" in result.stdout
    assert Operator(matching).negotiation(opportunity["negotiationId"])["state"] == "completed"

    bad = haggler("match", "agent", "--server", matching.base, "--agent-id", jonas_agent.id,
                  "--api-key", "hma_wrong", "--once")
    assert bad.returncode == 1 and "401" in bad.stderr and "Traceback" not in bad.stderr

    db = matching.db_url
    data = json.loads(haggler("match", "insights", "--db", db, "--json").stdout)
    assert data["negotiations"] == 1 and data["byMatchType"]["peer"]["accepted"] == 1
    assert data["turnCounts"] == {"mixed": {"3": 1}}
    table = haggler("match", "insights", "--db", db)
    assert table.returncode == 0 and "1 completed negotiation" in table.stdout and "mixed" in table.stdout


def test_haggler_match_agent_refuses_bad_options():
    result = haggler("match", "agent", "--server", "localhost:8000", "--agent-id", "a", "--api-key", "k")
    assert result.returncode == 2 and "--server" in result.stderr and "Traceback" not in result.stderr
    result = haggler("match", "agent", "--server", "http://x", "--agent-id", "a", "--api-key", "k", "--interval", "0")
    assert result.returncode == 2 and "--interval" in result.stderr


def test_ctrl_c_stops_an_agent_started_with_sigint_ignored(matching):
    # A shell's background job (`nohup haggler match agent ... &`) starts with SIGINT ignored, and
    # Python then installs no Ctrl-C handler; the agent restores it, so Ctrl-C still stops it.
    import signal
    import time

    agent = Operator(matching).agent(Operator(matching).user_id(JONAS))
    proc = subprocess.Popen([sys.executable, "-m", "haggler", "match", "agent", "--server", matching.base,
                             "--agent-id", agent.id, "--api-key", agent.key, "--interval", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    try:
        deadline = time.monotonic() + 60
        while "polling every" not in (line := proc.stdout.readline()):
            assert line and time.monotonic() < deadline, proc.stderr.read()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "stopped" in out
