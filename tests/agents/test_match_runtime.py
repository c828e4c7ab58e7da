"""The personal-agent runtime (``haggler match agent``) against a real matching server.

Every test talks HTTP to a store from ``make_store``: the runtime's requests, the turns it takes
and the conflicts it meets are the server's own. The server's clock is a FakeClock, so claim
expiry is a clock move, not a wait.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from haggler.agents.match_context import MatchContext, MatchTurn
from haggler.agents.match_negotiator import decide
from haggler.agents.match_runtime import AgentError, MatchAgentRuntime
from haggler.protocols.matching.settings import MatchingSettings

TOKEN = "operator-token-for-runtime-tests"
CLAIM_TIMEOUT = 600
OPERATOR = {"Authorization": f"Bearer {TOKEN}"}

JONAS = {"name": "Jonas", "profile": {
    "role": "Full-stack developer", "bio": "Shipped a scheduling SaaS used by 30 clinics, no sales motion yet.",
    "offers": ["full-stack development", "a working SaaS product"], "seeks": ["a co-founder to run sales"]},
    "intents": [{"description": "Find someone to own go-to-market and sales", "tags": ["gtm"]}]}
RACHEL = {"name": "Rachel", "profile": {
    "role": "Head of sales", "bio": "Built the first sales team at a vertical SaaS company.",
    "offers": ["B2B sales", "go-to-market"], "seeks": ["a technical co-founder with a product"]},
    "intents": [{"description": "Join a developer who has built something customers use"}]}
SEED = {"score": 79, "reasoning": "Jonas builds, Rachel sells SaaS.", "valencyRole": "peer"}


@pytest.fixture
def matching(make_store, tmp_path):
    db_url = f"sqlite:///{tmp_path}/match.db"
    store = make_store(db_url=db_url,
                       matching=MatchingSettings(operator_token=TOKEN, claim_timeout_seconds=CLAIM_TIMEOUT))
    store.db_url = db_url
    return store


def _created(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 201, response.text
    return response.json()


def user(store, person: dict[str, Any]) -> str:
    return _created(store.http.post("/api/users", json=person, headers=OPERATOR))["id"]


def agent(store, user_id: str, mode: str = "enabled") -> dict[str, Any]:
    return _created(store.http.post(f"/api/users/{user_id}/agents", headers=OPERATOR,
                                    json={"name": f"agent {mode}", "negotiationMode": mode}))


def negotiation(store, negotiation_id: str) -> dict[str, Any]:
    response = store.http.get(f"/api/negotiations/{negotiation_id}", headers=OPERATOR)
    assert response.status_code == 200, response.text
    return response.json()


def open_parked(store, source: str, candidate: str) -> dict[str, Any]:
    """Open an opportunity and wait for its negotiation to park a turn (it runs after the 201)."""
    opportunity = _created(store.http.post("/api/opportunities", headers=OPERATOR, json={
        "sourceUserId": source, "candidateUserId": candidate, "seedAssessment": SEED}))
    deadline = time.monotonic() + 10
    while negotiation(store, opportunity["negotiationId"])["state"] != "waiting_for_agent":
        assert time.monotonic() < deadline, "the negotiation never parked a turn"
        time.sleep(0.02)
    return opportunity


def runtime(store, agent_view: dict[str, Any], **kwargs: Any) -> MatchAgentRuntime:
    lines: list[str] = []
    kwargs.setdefault("log", lines.append)
    rt = MatchAgentRuntime(store.base, agent_view["id"], agent_view["apiKey"], interval=0.01, **kwargs)
    rt.lines = lines  # type: ignore[attr-defined]
    return rt


def test_the_runtime_takes_a_parked_turn_and_the_negotiation_moves_on(matching):
    jonas, rachel = user(matching, JONAS), user(matching, RACHEL)
    jonas_agent = agent(matching, jonas)
    opportunity = open_parked(matching, jonas, rachel)  # mixed: Jonas personal, Rachel system
    assert negotiation(matching, opportunity["negotiationId"])["waitingFor"] == jonas

    with runtime(matching, jonas_agent) as rt:
        assert rt.run(once=True) == 0

    done = negotiation(matching, opportunity["negotiationId"])
    assert done["state"] == "completed"
    assert [(t["speaker"], t["takenBy"]) for t in done["turns"]] == [
        (jonas, "personal"), (rachel, "system"), (jonas, "personal")]
    assert [t["action"] for t in done["turns"]] == ["propose", "counter", "accept"]
    assert rt.stats.pickups == rt.stats.responded == 2 and rt.stats.failures == rt.stats.conflicts == 0
    status = matching.http.get(f"/api/opportunities/{opportunity['id']}", headers=OPERATOR).json()["status"]
    assert status == "pending"
    assert any("turn 1: propose" in line for line in rt.lines)
    assert any("turn 3: accept" in line and "pending" in line for line in rt.lines)


def test_the_runtime_polls_on_an_interval_until_interrupted(matching):
    jonas = user(matching, JONAS)
    jonas_agent = agent(matching, jonas)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    with runtime(matching, jonas_agent, sleep=sleep) as rt, pytest.raises(KeyboardInterrupt):
        rt.run()
    assert sleeps == [0.01, 0.01, 0.01]  # nothing waits: one interval between polls


def test_a_disabled_agent_does_not_poll(matching):
    jonas, rachel = user(matching, JONAS), user(matching, RACHEL)
    agent(matching, jonas)  # an enabled agent makes Jonas a personal participant; it never runs
    disabled = agent(matching, jonas, "disabled")
    opportunity = open_parked(matching, jonas, rachel)
    sent: list[str] = []
    client = httpx.Client(timeout=10, event_hooks={"request": [lambda request: sent.append(
        f"{request.method} {request.url.path}")]})

    with client, runtime(matching, disabled, client=client, sleep=lambda _: pytest.fail("slept")) as rt:
        assert rt.run() == 0  # not once: a disabled agent returns at once all the same

    assert sent == [f"GET /api/agents/{disabled['id']}"]
    assert any("disabled" in line and "not polling" in line for line in rt.lines)
    still = negotiation(matching, opportunity["negotiationId"])
    assert still["state"] == "waiting_for_agent" and still["waitingFor"] == jonas
    assert still["claimDeadline"] is None and len(still["turns"]) == 0


def test_a_lost_claim_is_a_409_and_the_runtime_carries_on(matching):
    jonas, rachel = user(matching, JONAS), user(matching, RACHEL)
    first, second = agent(matching, jonas), agent(matching, jonas)
    opportunity = open_parked(matching, jonas, rachel)
    negotiation_id = opportunity["negotiationId"]

    def slow_decider(context: MatchContext) -> MatchTurn:
        """Deliberates past the claim timeout, while the user's other agent claims the turn."""
        matching.clock.advance(seconds=CLAIM_TIMEOUT + 1)
        taken = matching.http.post(f"/api/agents/{second['id']}/negotiations/pickup",
                                   headers={"Authorization": f"Bearer {second['apiKey']}"})
        assert taken.status_code == 200 and taken.json()["claimedBy"] == second["id"]
        return decide(context)

    with runtime(matching, first, decider=slow_decider) as rt:
        assert rt.run(once=True) == 0  # the 409 is logged, then nothing waits for this agent

    assert rt.stats.conflicts == 1 and rt.stats.responded == 0 and rt.stats.failures == 0
    assert any("not taken" in line and "409" in line for line in rt.lines)
    held = negotiation(matching, negotiation_id)
    assert held["state"] == "claimed" and held["turns"] == []

    with runtime(matching, second) as winner:  # the agent holding the claim takes the turn
        assert winner.run(once=True) == 0
    assert negotiation(matching, negotiation_id)["state"] == "completed"
    assert winner.stats.responded == 2


def test_network_trouble_backs_off_and_keeps_going(matching):
    jonas = user(matching, JONAS)
    jonas_agent = agent(matching, jonas)
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
    jonas = user(matching, JONAS)
    jonas_agent = agent(matching, jonas)
    with runtime(matching, {**jonas_agent, "apiKey": "hma_not-a-key"}) as rt:
        with pytest.raises(AgentError, match="401"):
            rt.run()


def test_a_failing_decider_is_logged_and_retried_once(matching):
    jonas, rachel = user(matching, JONAS), user(matching, RACHEL)
    jonas_agent = agent(matching, jonas)
    opportunity = open_parked(matching, jonas, rachel)

    def broken(context: MatchContext) -> MatchTurn:
        raise RuntimeError("the model is down")

    with runtime(matching, jonas_agent, decider=broken) as rt:
        assert rt.run(once=True) == 1
    assert rt.stats.failures == 2  # tried, then the same turn once more, then gave up on it
    assert any("the model is down" in line for line in rt.lines)
    assert negotiation(matching, opportunity["negotiationId"])["state"] == "claimed"


# -- the command ------------------------------------------------------------------------------------

def haggler(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "haggler", *args], capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def test_haggler_match_agent_once_and_insights(matching):
    jonas, rachel = user(matching, JONAS), user(matching, RACHEL)
    jonas_agent = agent(matching, jonas)
    disabled = agent(matching, rachel, "disabled")
    opportunity = open_parked(matching, jonas, rachel)

    off = haggler("match", "agent", "--server", matching.base, "--agent-id", disabled["id"],
                  env={"HAGGLER_AGENT_API_KEY": disabled["apiKey"]})
    assert off.returncode == 0, off.stderr
    assert "disabled" in off.stdout

    result = haggler("match", "agent", "--server", matching.base, "--agent-id", jonas_agent["id"],
                     "--api-key", jonas_agent["apiKey"], "--once")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "turn 1: propose" in result.stdout and "turn 3: accept" in result.stdout
    assert negotiation(matching, opportunity["negotiationId"])["state"] == "completed"

    bad = haggler("match", "agent", "--server", matching.base, "--agent-id", jonas_agent["id"],
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
