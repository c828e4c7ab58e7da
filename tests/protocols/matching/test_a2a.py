"""The A2A task document (spec 002, "A2A Conversation Integration") against the ``a2a-sdk``
types it stands for: built as plain dicts for speed, it must be what the SDK's models serialize
to, key order included (``protocols/matching/a2a.py``)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace
from typing import Any

import pytest
from a2a.types import (
    Artifact,
    DataPart,
    Message,
    Part,
    Role,
    Task,
    TaskState,
    TaskStatus,
)

from haggler.agents.match_context import Assessment, MatchAction, MatchTurn, Roles
from haggler.protocols.matching import a2a, negotiations
from haggler.protocols.matching.negotiations import (
    OUTCOME_ARTIFACT,
    StoredTurn,
    participant,
)

AT = datetime(2026, 3, 1, 12, 0, tzinfo=timezone.utc)
_SDK_STATE = {"submitted": TaskState.submitted, "working": TaskState.working,
              "waiting_for_agent": TaskState.input_required, "claimed": TaskState.working,
              "completed": TaskState.completed, "input_required": TaskState.input_required}


def sdk_document(task: Any, history: list[StoredTurn], outcome: dict[str, Any] | None,
                 artifact_id: str | None) -> dict[str, Any]:
    """The document as the SDK's models build and dump it (the reference)."""
    artifacts = None
    if outcome is not None and artifact_id is not None:
        artifacts = [Artifact(artifact_id=artifact_id, name=OUTCOME_ARTIFACT, parts=[Part(root=DataPart(data=outcome))])]
    messages = [Message(message_id=s.message_id, role=Role.agent, context_id=task.conversation_id, task_id=task.id,
                        parts=[Part(root=DataPart(data=s.turn.to_json()))],
                        metadata={"sender": participant(s.turn.speaker), "turnNumber": s.number,
                                  "takenBy": s.taken_by, "at": a2a.iso(s.at)}) for s in history]
    document = Task(id=task.id, context_id=task.conversation_id,
                    status=TaskStatus(state=_SDK_STATE[task.state], timestamp=a2a.iso(task.updated_at)),
                    history=messages or None, artifacts=artifacts,
                    metadata={"type": task.type, "negotiationState": task.state,
                              "protocolVersion": task.protocol_version, "opportunityId": task.opportunity_id,
                              "sourceUserId": task.source_user_id, "candidateUserId": task.candidate_user_id})
    return document.model_dump(mode="json", by_alias=True, exclude_none=True)


def a_task(state: str, updated_at: datetime | None = AT) -> SimpleNamespace:
    return SimpleNamespace(id="neg_1", conversation_id="ctx_1", type="negotiation", state=state, protocol_version="v2",
                           opportunity_id="opp_1", source_user_id="usr_a", candidate_user_id="usr_b",
                           updated_at=updated_at)


def turns() -> list[StoredTurn]:
    roles = Roles("agent", "patient")
    return [StoredTurn(1, MatchTurn("usr_a", MatchAction.PROPOSE, Assessment("a fit", roles), None), "system", None,
                       AT, "msg_1"),
            StoredTurn(2, MatchTurn("usr_b", MatchAction.COUNTER, Assessment("why ü?", roles), "say more"),
                       "personal", "agt_1", AT + timedelta(seconds=3), "msg_2")]


OUTCOME = {"hasOpportunity": False, "agreedRoles": [], "turnCount": 2, "reason": None, "reasoning": "no"}


@pytest.mark.parametrize("state", sorted(negotiations.__dict__[n] for n in (
    "SUBMITTED", "WORKING", "WAITING", "CLAIMED", "COMPLETED", "INPUT_REQUIRED")))
def test_every_state_is_the_sdk_document(state):
    task = a_task(state)
    for history, outcome, artifact_id in (([], None, None), (turns(), None, None), (turns(), OUTCOME, "art_1"),
                                          (turns()[:1], OUTCOME, None)):
        ours = a2a.task_document(task, history, outcome, artifact_id)
        assert json.dumps(ours) == json.dumps(sdk_document(task, history, outcome, artifact_id))


def test_a_task_never_updated_has_no_timestamp_and_none_inside_data_stays():
    """exclude_none drops the models' own None fields, never a None inside metadata or data."""
    task = a_task("completed", updated_at=None)
    ours = a2a.task_document(task, turns(), OUTCOME, "art_1")
    assert ours["status"] == {"state": "completed"}
    assert ours["artifacts"][0]["parts"][0]["data"]["reason"] is None
    assert json.dumps(ours) == json.dumps(sdk_document(task, turns(), OUTCOME, "art_1"))
