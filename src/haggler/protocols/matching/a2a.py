"""A negotiation in the A2A protocol's shapes: the JSON of the ``a2a-sdk`` types (0.3.x).

Spec 002 ("A2A Conversation Integration"): a conversation (A2A ``contextId``) with two
participants ``agent:{userId}``, a task per negotiation, one message per turn whose data part has
``kind: "data"``, and an artifact with the outcome. The documents here are what the SDK's pydantic
types (0.3.x; 1.x moved to protobuf messages without ``kind``) serialize to — camelCase, fields in
the models' order, unset optional fields left out — built as plain dicts: every respond answers
with one, and building and dumping the models cost a tenth of a match turn's server CPU. The test
``tests/protocols/matching/test_a2a.py`` holds them to the SDK's own serialization.

A2A's task states have no ``waiting_for_agent`` or ``claimed``: the A2A ``status.state`` is the
nearest A2A state (``input-required`` while a turn waits for an agent, ``working`` while one
holds it) and the spec's own state travels in ``metadata.negotiationState``. A v2 negotiation
paused by ``ask_user`` is ``input-required`` in A2A's own sense (``negotiationState``
``input_required``); ``metadata.protocolVersion`` says which protocol the task speaks.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

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

#: The A2A ``TaskState`` values (``a2a.types.TaskState``) of the negotiation's states.
_A2A_STATE = {SUBMITTED: "submitted", WORKING: "working", WAITING: "input-required", CLAIMED: "working",
              COMPLETED: "completed", INPUT_REQUIRED: "input-required"}


def iso(at: datetime | None) -> str | None:
    return None if at is None else at.isoformat()


def _without_none(document: dict[str, Any]) -> dict[str, Any]:
    """A model's fields as the SDK dumps them (``exclude_none``): a field that is None is left
    out (only the model's own fields: None inside ``metadata`` or ``data`` stays)."""
    return {key: value for key, value in document.items() if value is not None}


def _data_part(data: dict[str, Any]) -> dict[str, Any]:
    """An A2A ``Part`` holding a ``DataPart``."""
    return {"data": data, "kind": "data"}


def message(task: Any, stored: StoredTurn) -> dict[str, Any]:
    """A turn as an A2A ``Message`` (``role`` agent: each side speaks through its advocate)."""
    return _without_none({
        "contextId": task.conversation_id, "kind": "message", "messageId": stored.message_id,
        "metadata": {"sender": participant(stored.turn.speaker), "turnNumber": stored.number,
                     "takenBy": stored.taken_by, "at": iso(stored.at)},
        "parts": [_data_part(stored.turn.to_json())], "role": "agent", "taskId": task.id})


def task_document(task: Any, history: list[StoredTurn], outcome: dict[str, Any] | None,
                  artifact_id: str | None) -> dict[str, Any]:
    """The negotiation as an A2A ``Task`` (JSON, camelCase, as on the wire)."""
    artifacts = None
    if outcome is not None and artifact_id is not None:
        artifacts = [{"artifactId": artifact_id, "name": OUTCOME_ARTIFACT, "parts": [_data_part(outcome)]}]
    return _without_none({
        "artifacts": artifacts, "contextId": task.conversation_id,
        "history": [message(task, stored) for stored in history] or None, "id": task.id, "kind": "task",
        "metadata": {"type": task.type, "negotiationState": task.state, "protocolVersion": task.protocol_version,
                     "opportunityId": task.opportunity_id,
                     "sourceUserId": task.source_user_id, "candidateUserId": task.candidate_user_id},
        "status": _without_none({"state": _A2A_STATE[task.state], "timestamp": iso(task.updated_at)}),
    })
