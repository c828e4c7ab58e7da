"""Opportunities: a proposed match, gated by its negotiation, then answered by both people.

Spec 002 ("Relationship to Opportunity Persistence"): the opportunity is stored with status
``negotiating`` before its negotiation runs, so both users can see it at once; the outcome moves
it to ``pending``, ``rejected`` or ``stalled``. A ``pending`` one becomes ``accepted`` when both
users accept it and ``declined`` when either declines. Negotiation never re-scores it: the
evaluator's score stays the opportunity's score.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select, update

from haggler.agents.match_context import ROLES
from haggler.agents.match_evaluator import DEFAULT_THRESHOLD, discover
from haggler.errors import Conflict, Forbidden, InvalidInput, NotFound
from haggler.protocols.fields import integer, json_object, only, text
from haggler.protocols.matching import a2a, negotiations, v2
from haggler.protocols.matching.participants import Principal, has_personal_agent, user_context, user_row
from haggler.protocols.matching.settings import MatchingSettings
from haggler.storage.prepared import Prepared
from haggler.storage.rows import row_by_id
from haggler.storage.schema import a2a_conversations, a2a_tasks, match_users, opportunities

NEGOTIATING, PENDING, ACCEPTED, DECLINED = "negotiating", "pending", "accepted", "declined"
MAX_DISCOVERED = 50


def parse_seed(value: object) -> dict[str, Any]:
    """A seed assessment (spec: "Seed Assessment"): ``score`` 0–100, ``reasoning``,
    ``valencyRole`` and optional ``actors`` [{userId, role}]."""
    seed = json_object(value, "seedAssessment")
    only(seed, ("score", "reasoning", "valencyRole", "actors"), where="seedAssessment")
    score = seed.get("score")
    if isinstance(score, float) and score.is_integer():
        score = int(score)
    out: dict[str, Any] = {
        "score": integer(score, "seedAssessment.score", low=0, high=100),
        "reasoning": text(seed.get("reasoning"), "seedAssessment.reasoning", max_length=4000),
        "valencyRole": text(seed.get("valencyRole"), "seedAssessment.valencyRole", max_length=40),
    }
    if out["valencyRole"] not in ROLES:
        raise InvalidInput(f"seedAssessment.valencyRole must be one of {', '.join(ROLES)}")
    if seed.get("actors") is not None:
        actors = seed["actors"]
        if not isinstance(actors, list) or len(actors) > 2:
            raise InvalidInput("seedAssessment.actors must be a list of at most two {userId, role}")
        out["actors"] = []
        for i, item in enumerate(actors):
            where = f"seedAssessment.actors[{i}]"
            actor = json_object(item, where)
            only(actor, ("userId", "role"), where=where)
            role = text(actor.get("role"), f"{where}.role", max_length=40)
            if role not in ROLES:
                raise InvalidInput(f"{where}.role must be one of {', '.join(ROLES)}")
            out["actors"].append({"userId": text(actor.get("userId"), f"{where}.userId", max_length=40), "role": role})
    return out


def create(conn: Connection, body: dict[str, Any], settings: MatchingSettings, now: datetime) -> dict[str, Any]:
    """Store the opportunity as ``negotiating`` and its negotiation as a ``submitted`` task
    (the caller runs it once this transaction has committed)."""
    only(body, ("sourceUserId", "candidateUserId", "seedAssessment", "discoveryQuery"))
    source = text(body.get("sourceUserId"), "sourceUserId", max_length=40)
    candidate = text(body.get("candidateUserId"), "candidateUserId", max_length=40)
    if source == candidate:
        raise InvalidInput("sourceUserId and candidateUserId must be different users")
    seed = parse_seed(body.get("seedAssessment"))
    for actor in seed.get("actors", []):
        if actor["userId"] not in (source, candidate):
            raise InvalidInput(f"seedAssessment.actors: {actor['userId']} is neither the source nor the candidate")
    query = _discovery_query(body)
    user_row(conn, source)
    user_row(conn, candidate)
    return _open(conn, source, candidate, seed, query, settings, now)


def _discovery_query(body: dict[str, Any]) -> str | None:
    query = body.get("discoveryQuery")
    return None if query is None else text(query, "discoveryQuery", max_length=1000)


def _open(conn: Connection, source: str, candidate: str, seed: dict[str, Any], query: str | None,
          settings: MatchingSettings, now: datetime) -> dict[str, Any]:
    row = {"id": "opp_" + secrets.token_urlsafe(12), "source_user_id": source, "candidate_user_id": candidate,
           "seed": json.dumps(seed), "score": seed["score"], "discovery_query": query, "status": NEGOTIATING,
           "created_at": now, "updated_at": now}
    task_id = negotiations.start(conn, row, source_personal=has_personal_agent(conn, source),
                                 candidate_personal=has_personal_agent(conn, candidate), settings=settings, now=now)
    conn.execute(insert(opportunities).values(**row, negotiation_id=task_id))
    return {"id": row["id"], "status": NEGOTIATING, "negotiationId": task_id}


def discover_for(conn: Connection, user_id: str, body: dict[str, Any], settings: MatchingSettings,
                 now: datetime) -> dict[str, Any]:
    """Score every other user against this one and open a negotiating opportunity for each at
    or above the threshold (spec: "Relationship to Opportunity Persistence", steps 1–2). Pairs
    that already have an opportunity, either way round, are skipped."""
    only(body, ("threshold", "limit", "discoveryQuery"))
    threshold = integer(body.get("threshold", DEFAULT_THRESHOLD), "threshold", low=0, high=100)
    limit = integer(body.get("limit", 10), "limit", low=1, high=MAX_DISCOVERED)
    query = _discovery_query(body)
    source = user_context(user_row(conn, user_id))
    paired: set[str] = set()
    for row in conn.execute(select(opportunities.c.source_user_id, opportunities.c.candidate_user_id).where(
            (opportunities.c.source_user_id == user_id) | (opportunities.c.candidate_user_id == user_id))):
        paired.update((row.source_user_id, row.candidate_user_id))
    others = [user_context(row) for row in conn.execute(select(match_users).order_by(match_users.c.id))
              if row.id != user_id and row.id not in paired]
    opened = []
    for found in discover(source, others, threshold=threshold, query=query, limit=limit):
        opened.append(_open(conn, user_id, found.user_id, found.seed.to_json(), query, settings, now))
    return {"opportunities": opened, "considered": len(others), "threshold": threshold}


def _row(conn: Connection, opportunity_id: str, *, lock: bool = False) -> Any:
    return row_by_id(conn, opportunities, opportunity_id, "opportunity", lock=lock)


def view(row: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": row.id, "sourceUserId": row.source_user_id, "candidateUserId": row.candidate_user_id,
        "seedAssessment": json.loads(row.seed), "score": row.score, "status": row.status,
        "negotiationId": row.negotiation_id,
        "answers": {"source": row.source_answer, "candidate": row.candidate_answer},
        "createdAt": row.created_at.isoformat(), "updatedAt": row.updated_at.isoformat(),
    }
    if row.discovery_query is not None:
        out["discoveryQuery"] = row.discovery_query
    if row.agreed_roles is not None:
        out["agreedRoles"] = json.loads(row.agreed_roles)
    return out


def get(conn: Connection, caller: Principal, opportunity_id: str) -> dict[str, Any]:
    return view(visible_row(conn, caller, opportunity_id))


def visible_row(conn: Connection, caller: Principal, opportunity_id: str) -> Any:
    """The opportunity's row, for a caller allowed to see it (404 / 403 otherwise)."""
    row = _row(conn, opportunity_id)
    if not caller.may_see(row.source_user_id, row.candidate_user_id):
        raise Forbidden("only the operator and the two users see this opportunity")
    if caller.user_id == row.candidate_user_id and negotiations.screened_from(
            negotiations.task_row(conn, row.negotiation_id), caller):
        raise NotFound(f"no opportunity {opportunity_id}")
    return row


def answer(conn: Connection, caller: Principal, opportunity_id: str, accept: bool, now: datetime) -> dict[str, Any]:
    """A user accepts or declines a pending opportunity (with the user's own key)."""
    if caller.kind != "user":
        raise Forbidden("accept and decline with the user's own key: the person answers, not an agent")
    row = _row(conn, opportunity_id, lock=True)
    if caller.user_id not in (row.source_user_id, row.candidate_user_id):
        raise Forbidden("this opportunity is not yours")
    if row.status != PENDING:
        raise Conflict(f"only a pending opportunity can be answered; this one is {row.status}")
    side = "source_answer" if caller.user_id == row.source_user_id else "candidate_answer"
    values: dict[str, Any] = {side: "accept" if accept else "decline", "updated_at": now}
    other = row.candidate_answer if side == "source_answer" else row.source_answer
    if not accept:
        values["status"] = DECLINED
    elif other == "accept":
        values["status"] = ACCEPTED
    conn.execute(update(opportunities).where(opportunities.c.id == opportunity_id).values(**values))
    return view(_row(conn, opportunity_id))


#: The view answers every respond: the task's row with its conversation's participants, in one
#: statement compiled once (storage/prepared.py).
_TASK_VIEWED = Prepared(select(a2a_tasks, a2a_conversations.c.participants)
                        .join(a2a_conversations, a2a_conversations.c.id == a2a_tasks.c.conversation_id)
                        .where(a2a_tasks.c.id == bindparam("task_id")))


def negotiation_view(conn: Connection, caller: Principal, task_id: str,
                     stored: list[negotiations.StoredTurn] | None = None) -> dict[str, Any]:
    """The negotiation: conversation, A2A task, turns, outcome artifact and trace. ``stored``:
    its turns as the caller's transaction has just written them (a respond's), not read again."""
    task = _TASK_VIEWED.row(conn, {"task_id": task_id})
    if task is None:
        raise NotFound(f"unknown negotiation: {task_id}")
    negotiations.require_party(task, caller)
    viewer = None if caller.is_operator else caller.user_id
    if stored is None:
        stored = negotiations.stored_turns(conn, task_id)
    history = negotiations.visible_history(task, stored, viewer)
    # Only a completed negotiation has its outcome (written with the completion: _finalize).
    artifact = negotiations.artifact_of(conn, task_id) if task.state == negotiations.COMPLETED else None
    participants = json.loads(task.participants)
    view = {
        "id": task.id, "opportunityId": task.opportunity_id, "protocolVersion": task.protocol_version,
        "state": task.state, "maxTurns": task.max_turns,
        "waitingFor": task.waiting_user_id, "claimDeadline": a2a.iso(task.claim_deadline),
        "parkDeadline": a2a.iso(task.park_deadline), "expiresAt": a2a.iso(task.expires_at),
        "conversation": {"id": task.conversation_id, "participants": participants},
        "turns": [{**negotiations.history_entry(t), "participant": negotiations.participant(t.turn.speaker),
                   "takenBy": t.taken_by, "at": t.at.isoformat()} for t in history],
        "outcome": artifact[1] if artifact else None,
        # Spec "Trace Instrumentation": a turn's summary is its action name, never a score.
        "trace": [{"turn": t.number, "participant": negotiations.participant(t.turn.speaker),
                   "summary": t.turn.action.value} for t in history],
        "task": a2a.task_document(task, history, artifact[1] if artifact else None, artifact[0] if artifact else None),
    }
    if task.protocol_version == v2.V2:
        # Seats by user id; the screen's decision; each side sees its own consultations only.
        view["seats"] = {"initiator": task.source_user_id, "counterparty": task.candidate_user_id}
        view["screen"] = task.screen
        view["consultations"] = [c for c in negotiations.consultations(task) if viewer in (None, c["userId"])]
        view["answerDeadline"] = a2a.iso(task.answer_deadline)
    return view
