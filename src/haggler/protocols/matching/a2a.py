"""A negotiation in the A2A protocol's shapes, built with the ``a2a-sdk`` types.

Spec 002 ("A2A Conversation Integration"): a conversation (A2A ``contextId``) with two
participants ``agent:{userId}``, a task per negotiation, one message per turn whose data part has
``kind: "data"``, and an artifact with the outcome. The SDK's pydantic types (0.3.x; 1.x moved to
protobuf messages without ``kind``) serialize to the protocol's JSON, so the views here are A2A
documents any A2A client can read.

A2A's task states have no ``waiting_for_agent`` or ``claimed``: the A2A ``status.state`` is the
nearest A2A state (``input-required`` while a turn waits for an agent, ``working`` while one
holds it) and the spec's own state travels in ``metadata.negotiationState``. A v2 negotiation
paused by ``ask_user`` is ``input-required`` in A2A's own sense (``negotiationState``
``input_required``); ``metadata.protocolVersion`` says which protocol the task speaks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from a2a.types import Artifact, DataPart, Message, Part, Role, Task, TaskState, TaskStatus

from haggler.protocols.matching.negotiations import (
    CLAIMED,
    COMPLETED,
    INPUT_REQUIRED,
    OUTCOME_ARTIFACT,
    SUBMITTED,
    WAITING,
    WORKING,
    StoredTurn,
    participant,
)

_A2A_STATE = {SUBMITTED: TaskState.submitted, WORKING: TaskState.working, WAITING: TaskState.input_required,
              CLAIMED: TaskState.working, COMPLETED: TaskState.completed, INPUT_REQUIRED: TaskState.input_required}


def iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def message(task: Any, stored: StoredTurn) -> Message:
    return Message(message_id=stored.message_id, role=Role.agent, context_id=task.conversation_id, task_id=task.id,
                   parts=[Part(root=DataPart(data=stored.turn.to_json()))],
                   metadata={"sender": participant(stored.turn.speaker), "turnNumber": stored.number,
                             "takenBy": stored.taken_by, "at": iso(stored.at)})


def task_document(task: Any, history: list[StoredTurn], outcome: dict[str, Any] | None,
                  artifact_id: str | None) -> dict[str, Any]:
    """The negotiation as an A2A ``Task`` (JSON, camelCase, as on the wire)."""
    artifacts = None
    if outcome is not None and artifact_id is not None:
        artifacts = [Artifact(artifact_id=artifact_id, name=OUTCOME_ARTIFACT, parts=[Part(root=DataPart(data=outcome))])]
    document = Task(
        id=task.id, context_id=task.conversation_id,
        status=TaskStatus(state=_A2A_STATE[task.state], timestamp=iso(task.updated_at)),
        history=[message(task, stored) for stored in history] or None,
        artifacts=artifacts,
        metadata={"type": task.type, "negotiationState": task.state, "protocolVersion": task.protocol_version,
                  "opportunityId": task.opportunity_id,
                  "sourceUserId": task.source_user_id, "candidateUserId": task.candidate_user_id},
    )
    return document.model_dump(mode="json", by_alias=True, exclude_none=True)
