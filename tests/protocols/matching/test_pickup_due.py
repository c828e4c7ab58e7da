"""A pickup claims in one statement only when nothing of its user's is due (``claim_if_clear``):
each kind of due deadline, planted next to a turn the statement could claim, must stop it and be
applied first, exactly as ``due_tasks`` finds it; so must a claim the agent already holds."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator

import pytest

from haggler.protocols.matching import negotiations, opportunities
from haggler.protocols.matching.participants import Principal
from haggler.protocols.matching.routes import Matching
from haggler.protocols.matching.settings import MatchingSettings
from haggler.storage.database import Database, open_database
from haggler.storage.rows import update_by_id
from haggler.storage.schema import a2a_tasks
from tests.support.matching import Parties, make_parties, open_in_db, pair, seconds
from tests.support.servers import FakeClock

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
NOW = T0 + timedelta(minutes=5)
SETTINGS = MatchingSettings()
PAST = NOW - seconds(1)


def _claimed(task_id: str, agent: Any, deadline: datetime) -> dict[str, Any]:
    return {"state": negotiations.CLAIMED, "claimed_by": agent.id, "claim_deadline": deadline}


def _input_required(task_id: str, user_id: str) -> dict[str, Any]:
    asked = [{"userId": user_id, "question": "Which city?", "askedAt": T0.isoformat(), "deadline": PAST.isoformat(),
              "answer": None, "answeredAt": None, "defaulted": False}]
    return {"state": negotiations.INPUT_REQUIRED, "park_deadline": None, "turn_context": None,
            "answer_deadline": PAST, "consultations": json.dumps(asked)}


#: How the oldest of the user's two parked turns is made due (or held), by kind; ``spare`` is the
#: user's other agent, ``agent`` the one picking up.
KINDS = {
    "park": lambda task_id, user_id, agent, spare: {"park_deadline": PAST},
    "claim": lambda task_id, user_id, agent, spare: _claimed(task_id, spare, PAST),
    "claim at the pickup's instant": lambda task_id, user_id, agent, spare: _claimed(task_id, spare, NOW),
    "answer": lambda task_id, user_id, agent, spare: _input_required(task_id, user_id),
    "expiry while waiting": lambda task_id, user_id, agent, spare: {"expires_at": PAST},
    "expiry while claimed": lambda task_id, user_id, agent, spare: {**_claimed(task_id, spare, NOW + seconds(60)),
                                                                    "expires_at": NOW},
    "expiry while input_required": lambda task_id, user_id, agent, spare: {**_input_required(task_id, user_id),
                                                                           "answer_deadline": NOW + seconds(60),
                                                                           "expires_at": PAST},
}


@pytest.fixture
def db(tmp_path) -> Iterator[Database]:
    database = open_database(f"sqlite:///{tmp_path}/due.db")
    yield database
    database.dispose()


def _two_parked(db: Database) -> tuple[Parties, list[str]]:
    """A system-only source and a candidate with two agents, two turns parked for the candidate
    (the first the older)."""
    the_pair = pair("good")
    parties = make_parties(db, the_pair, T0, source_agents=0, candidate_agents=2)
    parked = [open_in_db(db, parties, the_pair["seed"], SETTINGS, T0 + seconds(i)) for i in range(2)]
    with db.read() as conn:
        assert [negotiations.task_row(conn, t).state for t in parked] == [negotiations.WAITING] * 2
    return parties, parked


def _tasks(db: Database) -> list[Any]:
    with db.read() as conn:
        return list(conn.execute(a2a_tasks.select().order_by(a2a_tasks.c.id)))


@pytest.mark.parametrize("kind", KINDS)
def test_a_due_deadline_stops_the_one_statement_claim_and_is_applied_first(db: Database, kind: str) -> None:
    parties, (oldest, newer) = _two_parked(db)
    agent, spare = parties.agents[parties.candidate]
    with db.write() as conn:
        update_by_id(conn, a2a_tasks, oldest, **KINDS[kind](oldest, parties.candidate, agent, spare))
    before = _tasks(db)
    with db.write() as conn:
        due = negotiations.due_tasks(conn, NOW, user_id=parties.candidate)
        claimed = negotiations.claim_if_clear(conn, agent, SETTINGS, NOW, due_at=NOW)
    # Where due_tasks finds something, the statement claims nothing and changes nothing.
    assert due == [oldest]
    assert claimed is None
    assert _tasks(db) == before
    # The pickup applies it first: nothing of the user's is due once it has answered.
    found = Matching(db, FakeClock(NOW), SETTINGS).pickup(_principal(parties, agent), agent.id)
    with db.read() as conn:
        assert negotiations.due_tasks(conn, NOW, user_id=parties.candidate) == []
    assert found is not None and found["claimedBy"] == agent.id


def test_a_start_not_yet_run_stops_the_one_statement_claim(db: Database) -> None:
    parties, (oldest, _) = _two_parked(db)
    agent = parties.agents[parties.candidate][0]
    with db.write() as conn:
        started = opportunities.create(conn, {"sourceUserId": parties.source, "candidateUserId": parties.candidate,
                                              "seedAssessment": pair("good")["seed"]}, SETTINGS, T0)["negotiationId"]
    before = _tasks(db)
    with db.write() as conn:
        assert negotiations.due_tasks(conn, NOW, user_id=parties.candidate) == [started]
        assert negotiations.claim_if_clear(conn, agent, SETTINGS, NOW, due_at=NOW) is None
    assert _tasks(db) == before
    found = Matching(db, FakeClock(NOW), SETTINGS).pickup(_principal(parties, agent), agent.id)
    with db.read() as conn:
        assert negotiations.task_row(conn, started).state != negotiations.SUBMITTED
    assert found is not None and found["negotiationId"] == oldest


def test_a_held_claim_stops_the_one_statement_claim_and_is_returned(db: Database) -> None:
    parties, (oldest, newer) = _two_parked(db)
    agent = parties.agents[parties.candidate][0]
    with db.write() as conn:
        first = negotiations.claim_if_clear(conn, agent, SETTINGS, NOW, due_at=NOW)
    assert first is not None and first["negotiationId"] == oldest
    before = _tasks(db)
    with db.write() as conn:
        assert negotiations.claim_if_clear(conn, agent, SETTINGS, NOW + seconds(1), due_at=NOW + seconds(1)) is None
    assert _tasks(db) == before
    again = Matching(db, FakeClock(NOW + seconds(1)), SETTINGS).pickup(_principal(parties, agent), agent.id)
    assert again == first


def test_with_nothing_due_the_one_statement_claims_what_pickup_would(db: Database) -> None:
    parties, (oldest, _) = _two_parked(db)
    agent = parties.agents[parties.candidate][0]
    with db.write() as conn:
        assert negotiations.due_tasks(conn, NOW, user_id=parties.candidate) == []
        claimed = negotiations.claim_if_clear(conn, agent, SETTINGS, NOW, due_at=NOW)
        row = negotiations.task_row(conn, oldest)
    assert claimed is not None and claimed["negotiationId"] == oldest
    assert claimed == negotiations.claim_view(row)
    assert (row.state, row.claimed_by, row.updated_at, row.claim_deadline) == (
        negotiations.CLAIMED, agent.id, NOW, NOW + seconds(SETTINGS.claim_timeout_seconds))


def _principal(parties: Parties, agent: Any) -> Principal:
    return Principal("agent", user_id=parties.candidate, agent_id=agent.id)
