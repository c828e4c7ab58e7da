"""Races on the match negotiation's polling API, on SQLite and PostgreSQL (spec 002, "Turn
Delivery (Polling)", "Parked-turn lifecycle"): two agents of one user picking up at once, a
respond racing the sweep that expires its claim, and two responds by one agent. Each race has
exactly one winner and leaves the negotiation in a state one of the racers alone could have made.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from haggler.errors import Conflict
from haggler.protocols.matching import negotiations
from haggler.protocols.matching.participants import Principal
from haggler.protocols.matching.routes import Matching
from haggler.protocols.matching.settings import MatchingSettings
from haggler.storage.database import Database, open_database
from haggler.storage.schema import opportunities
from tests.support.matching import (
    TOKEN,
    Caller,
    Operator,
    make_parties,
    open_in_db,
    pair,
    race,
    seconds,
    task_state,
    turn,
)
from tests.support.servers import FakeClock


PICKUP_ROUNDS = 24
EXPIRY_ROUNDS = 40
RESPOND_ROUNDS = 20
T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


@pytest.fixture
def api(make_store, db_url: str) -> Operator:
    return Operator(make_store(db_url=db_url, clock=FakeClock(T0), matching=MatchingSettings(operator_token=TOKEN)))


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = open_database(db_url)
    yield database
    database.dispose()


def _clients(agents: list[Caller]) -> list[httpx.Client]:
    return [agent.client() for agent in agents]


def test_two_agents_of_one_user_picking_up_at_once_get_one_claim_per_parked_turn(api: Operator) -> None:
    """Turn Delivery (Polling) / Parked-turn lifecycle, step 2: pickup compare-and-swaps the
    oldest waiting turn of the caller's user to claimed. Two agents of one user race, round
    after round, over one, two or three parked turns: every parked turn is claimed at most once,
    the oldest first; the agent that loses the race gets the next turn, or nothing (204)."""
    the_pair = pair("publisher-commissions-illustrator")
    counterparts = [api.user_id(the_pair["b"]) for _ in range(3)]  # no agent: the system negotiates for them
    for round_number in range(PICKUP_ROUNDS):
        parked = 1 + round_number % 3
        user = api.user_id(the_pair["a"])
        agents = [api.agent(user, name="laptop"), api.agent(user, name="phone")]
        waiting = []
        for counterpart in counterparts[:parked]:
            waiting.append(api.open_negotiation(user, counterpart, the_pair["seed"]))
            api.clock.advance(seconds=1)  # parked one after the other: "oldest" is well defined
        for negotiation_id in waiting:
            view = api.negotiation(negotiation_id)
            assert (view["state"], view["waitingFor"], view["turns"]) == ("waiting_for_agent", user, [])

        clients = _clients(agents)
        try:
            responses = race([lambda a=a, c=c: a.pickup(c) for a, c in zip(agents, clients)])
        finally:
            for client in clients:
                client.close()

        assert all(r.status_code in (200, 204) for r in responses), [(r.status_code, r.text) for r in responses]
        claims = {agent.id: r.json() for agent, r in zip(agents, responses) if r.status_code == 200}
        assert len(claims) == min(parked, 2), (parked, [(r.status_code, r.text) for r in responses])
        claimed = [claim["negotiationId"] for claim in claims.values()]
        assert len(set(claimed)) == len(claimed), claims  # never one turn to both agents
        assert set(claimed) == set(waiting[:len(claimed)])  # the oldest turns first
        for agent_id, claim in claims.items():
            assert (claim["claimedBy"], claim["turnNumber"]) == (agent_id, 1)

        for agent in agents:  # a repeated pickup returns the claim already held, or still nothing
            again = agent.pickup()
            if agent.id in claims:
                assert again.status_code == 200 and again.json()["negotiationId"] == claims[agent.id]["negotiationId"]
                assert again.json()["deadline"] == claims[agent.id]["deadline"]
            else:
                assert again.status_code == 204, again.text
        for negotiation_id in waiting:
            view = api.negotiation(negotiation_id)
            assert view["state"] == ("claimed" if negotiation_id in claimed else "waiting_for_agent"), view["state"]
            assert view["turns"] == []


def test_one_agent_picking_up_twice_at_once_holds_one_claim(api: Operator) -> None:
    """Parked-turn lifecycle, step 2, and the bilateral-match facts: a repeated pickup by the
    agent that already holds a claim returns that same claim. Two pickups of one agent at once
    (a poller retrying, two copies of one agent) over two parked turns must not claim both: both
    answers are the same claim, and the other turn stays waiting for the user's other agents."""
    the_pair = pair("publisher-commissions-illustrator")
    counterparts = [api.user_id(the_pair["b"]) for _ in range(2)]
    for _ in range(PICKUP_ROUNDS):
        user = api.user_id(the_pair["a"])
        agent, spare = api.agent(user, name="poller"), api.agent(user, name="spare")
        waiting = []
        for counterpart in counterparts:
            waiting.append(api.open_negotiation(user, counterpart, the_pair["seed"]))
            api.clock.advance(seconds=1)
        clients = _clients([agent, agent])
        try:
            responses = race([lambda c=c: agent.pickup(c) for c in clients])
        finally:
            for client in clients:
                client.close()
        assert [r.status_code for r in responses] == [200, 200], [(r.status_code, r.text) for r in responses]
        claims = [r.json() for r in responses]
        assert claims[0]["negotiationId"] == claims[1]["negotiationId"] == waiting[0], claims
        assert claims[0]["deadline"] == claims[1]["deadline"] and claims[0]["claimedBy"] == agent.id
        other = spare.claim()  # the second turn was left for another agent of the user
        assert (other["negotiationId"], other["claimedBy"]) == (waiting[1], spare.id)


def _expiry_round(db: Database, via: str, round_number: int, the_pair: dict[str, Any],
                  settings: MatchingSettings) -> str:
    """One round: the candidate's claimed turn 2, answered one second before its claim deadline
    while the claim expiry is applied at (or just after) that deadline. The answer is counter
    (the negotiation goes back to the source), accept or reject (it ends), in turn, so that an
    expiry applied over an answer would show. Returns which side won."""
    parties = make_parties(db, the_pair, T0)  # both personal
    task_id = open_in_db(db, parties, the_pair["seed"], settings, T0)
    source_agent, agent = parties.agents[parties.source][0], parties.agents[parties.candidate][0]
    with db.write() as conn:
        assert negotiations.pickup(conn, source_agent, settings, T0) is not None
        negotiations.respond(conn, source_agent, task_id, turn("propose", "My user mentors founders."), settings, T0)
    picked_at = T0 + timedelta(minutes=round_number)
    with db.write() as conn:
        claim = negotiations.pickup(conn, agent, settings, picked_at)
    assert claim is not None and (claim["negotiationId"], claim["turnNumber"]) == (task_id, 2)
    deadline = datetime.fromisoformat(claim["deadline"])
    assert deadline == picked_at + seconds(settings.claim_timeout_seconds)
    before, _ = task_state(db, task_id)
    early, late = deadline - seconds(1), deadline + seconds(round_number % 3)
    action = ("counter", "accept", "reject")[round_number % 3]
    body = turn(action, f"Round {round_number}: {action}.")

    if via == "functions":
        def answer() -> None:
            with db.write() as conn:
                negotiations.respond(conn, agent, task_id, body, settings, early)

        def expire() -> None:
            with db.write() as conn:
                negotiations.enforce(conn, task_id, settings, late)
    else:  # the service's own operations, as a respond request and the server's sweep run them
        principal = Principal("agent", user_id=agent.user_id, agent_id=agent.id)

        def answer() -> None:
            Matching(db, lambda: early, settings).respond(principal, agent.id, task_id, body)

        def expire() -> None:
            Matching(db, lambda: late, settings).sweep()

    def answered() -> bool:
        try:
            answer()
        except Conflict:
            return False
        return True

    # Either racer first in line, in turn, so that each gets its chances to win.
    if round_number % 2:
        _, won = race([expire, answered])
    else:
        won, _ = race([answered, expire])
    task, turns = task_state(db, task_id)
    with db.read() as conn:
        artifact = negotiations.artifact_of(conn, task_id)
        status = conn.execute(select(opportunities.c.status).where(opportunities.c.id == task.opportunity_id)).scalar()
    assert task.claimed_by is None and task.claim_deadline is None
    if won:  # the turn is stored once and the negotiation moved on: back to the source, or ended
        assert [(t.number, t.turn.action.value, t.taken_by, t.agent_id) for t in turns] == \
            [(1, "propose", "personal", source_agent.id), (2, action, "personal", agent.id)]
        if action == "counter":
            assert (task.state, task.waiting_user_id, artifact, status) == \
                ("waiting_for_agent", parties.source, None, "negotiating")
            assert (task.parked_at, task.park_deadline) == (early, early + seconds(settings.parked_timeout_seconds))
        else:
            assert (task.state, task.waiting_user_id, task.park_deadline) == ("completed", None, None)
            assert artifact is not None and artifact[1]["hasOpportunity"] == (action == "accept")
            assert artifact[1]["turnCount"] == 2
            assert status == ("pending" if action == "accept" else "rejected")
        return "respond"
    # The claim expired first: the turn is back in the queue as it was parked, and nothing was stored.
    assert [t.number for t in turns] == [1]
    assert (task.state, task.waiting_user_id, artifact, status) == \
        ("waiting_for_agent", parties.candidate, None, "negotiating")
    assert (task.parked_at, task.park_deadline) == (before.parked_at, before.park_deadline)
    with db.write() as conn:  # and it can be picked up again
        again = negotiations.pickup(conn, agent, settings, late)
    assert again is not None and (again["negotiationId"], again["turnNumber"]) == (task_id, 2)
    return "expiry"


@pytest.mark.parametrize("via", ["functions", "service"])
def test_respond_racing_the_claim_expiry_has_one_winner(db: Database, via: str) -> None:
    """Parked-turn lifecycle, steps 3 and 5: respond compare-and-swaps claimed → working while
    the claim is unexpired; the claim expiry returns an unanswered claim to waiting_for_agent.
    Raced round after round (respond at one second before the deadline, the expiry at or after
    it; ``functions``: respond against enforce, ``service``: Matching.respond against
    Matching.sweep, each with its own clock), exactly one wins and the state is consistent."""
    the_pair = pair("fundraising-mentor-and-first-time-founder")
    settings = MatchingSettings()
    winners = Counter(_expiry_round(db, via, n, the_pair, settings) for n in range(EXPIRY_ROUNDS))
    assert sum(winners.values()) == EXPIRY_ROUNDS, winners


def test_two_responds_by_one_agent_store_one_turn(api: Operator) -> None:
    """Parked-turn lifecycle, step 3: respond moves claimed → working only once. The claiming
    agent sends two different answers at once, turn after turn of one uncapped personal-vs-personal
    negotiation: one is stored (the 200's), the other is 409 and leaves no trace; the last turn
    races accept against reject and the outcome is the winner's."""
    the_pair = pair("fundraising-mentor-and-first-time-founder")
    source, candidate = api.user_id(the_pair["a"]), api.user_id(the_pair["b"])
    agents = {source: api.agent(source), candidate: api.agent(candidate)}
    negotiation_id = api.open_negotiation(source, candidate, the_pair["seed"])
    opportunity_id = api.negotiation(negotiation_id)["opportunityId"]
    clients = _clients(list(agents.values()))
    try:
        for number in range(1, RESPOND_ROUNDS + 1):
            speaker, other = (source, candidate) if number % 2 else (candidate, source)
            agent = agents[speaker]
            claim = agent.claim()
            assert (claim["negotiationId"], claim["turnNumber"]) == (negotiation_id, number)
            if number == 1:
                bodies = [turn("propose", "first pitch"), turn("propose", "second pitch")]
            elif number == RESPOND_ROUNDS:
                bodies = [turn("accept", "final: accept"), turn("reject", "final: reject")]
            else:
                bodies = [turn("counter", f"counter on turn {number}"), turn("question", f"question on turn {number}")]
            responses = race([lambda b=b, c=c: agent.respond(negotiation_id, b, c) for b, c in zip(bodies, clients)])

            assert sorted(r.status_code for r in responses) == [200, 409], [(r.status_code, r.text) for r in responses]
            winner = 0 if responses[0].status_code == 200 else 1
            view = api.negotiation(negotiation_id)
            assert len(view["turns"]) == number, view["turns"]
            last = view["turns"][-1]
            assert (last["turnNumber"], last["speaker"], last["takenBy"]) == (number, speaker, "personal")
            assert (last["action"], last["message"]) == (bodies[winner]["action"], bodies[winner]["message"])
            assert responses[winner].json()["turns"] == view["turns"]
            if number < RESPOND_ROUNDS:
                assert (view["state"], view["waitingFor"], view["outcome"]) == ("waiting_for_agent", other, None)
                assert agent.pickup().status_code == 204  # nothing left claimed or waiting for this agent
    finally:
        for client in clients:
            client.close()

    accepted = view["turns"][-1]["action"] == "accept"
    assert view["state"] == "completed"
    assert (view["outcome"]["hasOpportunity"], view["outcome"]["turnCount"]) == (accepted, RESPOND_ROUNDS)
    assert "reason" not in view["outcome"]
    assert api.opportunity(opportunity_id)["status"] == ("pending" if accepted else "rejected")
