"""A match negotiation's life: start, system turns, parking, pickup, respond, deadlines, outcome.

Spec 002 ("Flow", "Turn Delivery (Polling)", "Parked-turn lifecycle", "Outcome Determination").
The negotiation is an A2A task; its turns are messages; its outcome is an artifact. The task's
``state`` moves ``submitted`` → ``working`` → ``waiting_for_agent`` → ``claimed`` → ``working`` …
→ ``completed``. Turns are replayed into the engine on every change, so the engine decides
alternation and the cap and this module never counts turns itself.

Every change locks the task row first (``FOR UPDATE`` on PostgreSQL; SQLite writes are
serialized). Pickup is a compare-and-swap update on ``state``, so two agents of one user racing
for a turn get one claim; respond checks the claim on the row it holds locked, so a respond racing
a claim expiry has one winner.
Deadlines are stored timestamps, applied by :func:`enforce` whenever a task is touched and
to every task :func:`due_tasks` finds by the routes' sweep.

Negotiations v2 (docs/matching-api.md, "Negotiations v2") run on the same path: the task carries
its ``protocol_version``; :mod:`v2` holds the seat rules, and this module adds v2's steps — the
outreach screen before the first turn, the ``input_required`` pause of ``ask_user`` with its answer
window, the bargaining stance of system turns in a deadlock, and the wall clock of uncapped runs.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

import orjson
from sqlalchemy import Connection, bindparam, exists, insert, or_, select, union, update

from haggler.agents.match_context import (
    Assessment,
    MatchAction,
    MatchContext,
    MatchTurn,
    Roles,
    SeedAssessment,
    UserContext,
    parse_seed,
)
from haggler.agents.match_negotiator import decide
from haggler.engine import Negotiation, OutcomeKind, Rules
from haggler.errors import Conflict, Forbidden, NotFound
from haggler.protocols.fields import only, text
from haggler.protocols.matching import turns, v2
from haggler.protocols.matching.participants import Principal, context_json, user_context
from haggler.protocols.matching.settings import MatchingSettings
from haggler.server.responses import dump_json
from haggler.storage.database import lock_key
from haggler.storage.prepared import Prepared
from haggler.storage.rows import row_by_id, update_by_id
from haggler.storage.schema import a2a_artifacts, a2a_conversations, a2a_messages, a2a_tasks, match_users, opportunities

SUBMITTED, WORKING, WAITING, CLAIMED, COMPLETED = "submitted", "working", "waiting_for_agent", "claimed", "completed"
#: v2: a side paused to consult its own user (``ask_user``); the A2A state of the same name.
INPUT_REQUIRED = "input_required"
SYSTEM, PERSONAL = "system", "personal"
#: The states of a negotiation still running.
_OPEN = (SUBMITTED, WORKING, WAITING, CLAIMED, INPUT_REQUIRED)
TURN_CAP, TIMEOUT = "turn_cap", "timeout"
MAX_ANSWER_CHARS = 4000
OUTCOME_ARTIFACT = "negotiation-outcome"
#: Tasks the sweep handles per database transaction.
SWEEP_BATCH = 50


def participant(user_id: str) -> str:
    """A user's side in the A2A conversation (spec: "A2A Conversation Integration")."""
    return f"agent:{user_id}"


@dataclass(frozen=True, slots=True)
class StoredTurn:
    number: int
    turn: MatchTurn
    taken_by: str
    agent_id: str | None
    at: datetime
    message_id: str


# -- starting -------------------------------------------------------------------------------------

def start(conn: Connection, opportunity: dict[str, Any], *, source_personal: bool, candidate_personal: bool,
          settings: MatchingSettings, now: datetime) -> str:
    """Create the conversation and the ``submitted`` negotiation task; :func:`advance` runs it.
    Returns the task id, which is the negotiation id."""
    conversation_id, task_id = "ctx_" + secrets.token_urlsafe(12), "neg_" + secrets.token_urlsafe(12)
    source, candidate = opportunity["source_user_id"], opportunity["candidate_user_id"]
    conn.execute(insert(a2a_conversations).values(
        id=conversation_id, participants=json.dumps([participant(source), participant(candidate)]), created_at=now))
    version = _version_for(conn, source, candidate, settings)
    if version == v2.V2:
        max_turns = settings.v2_caps.for_sides(source_personal, candidate_personal)
        # Beyond Index: an uncapped v2 run has a wall-clock bound.
        expires_at = now + timedelta(seconds=settings.v2_wall_clock_seconds) if max_turns is None else None
    else:
        max_turns = settings.caps.for_sides(source_personal, candidate_personal)
        # The timeout is the safety valve of an uncapped personal-vs-personal negotiation only.
        both_personal = source_personal and candidate_personal
        expires_at = now + timedelta(seconds=settings.negotiation_timeout_seconds) if both_personal else None
    conn.execute(insert(a2a_tasks).values(
        id=task_id, conversation_id=conversation_id, type="negotiation", state=SUBMITTED,
        opportunity_id=opportunity["id"], source_user_id=source, candidate_user_id=candidate,
        source_personal=source_personal, candidate_personal=candidate_personal, max_turns=max_turns,
        expires_at=expires_at, protocol_version=version, created_at=now, updated_at=now))
    return task_id


def _version_for(conn: Connection, source: str, candidate: str, settings: MatchingSettings) -> str:
    """A continuation (the pair, either way round, negotiated before) keeps its predecessor's
    version, never re-stamped; a fresh negotiation takes the server's setting."""
    tasks = a2a_tasks.c
    prior = conn.execute(select(tasks.protocol_version).where(
        or_((tasks.source_user_id == source) & (tasks.candidate_user_id == candidate),
            (tasks.source_user_id == candidate) & (tasks.candidate_user_id == source)))
        .order_by(tasks.created_at.desc(), tasks.id.desc()).limit(1)).scalar()
    return prior or settings.protocol_version


# -- reading --------------------------------------------------------------------------------------

def task_row(conn: Connection, task_id: str, *, lock: bool = False) -> Any:
    return row_by_id(conn, a2a_tasks, task_id, "negotiation", lock=lock)


# The statements of a turn (pickup, respond, the system's turns, the view that answers) are compiled
# once and run on the driver (storage/prepared.py): built and run through SQLAlchemy on every call,
# they were most of a turn's server CPU.
_TURNS = Prepared(select(a2a_messages).where(a2a_messages.c.task_id == bindparam("task_id"))
                  .order_by(a2a_messages.c.seq))
_ARTIFACT = Prepared(select(a2a_artifacts.c.id, a2a_artifacts.c.data)
                     .where(a2a_artifacts.c.task_id == bindparam("task_id")))
#: Both sides of a negotiation, as a negotiator reads them (participants.user_context), in one statement.
_USERS = Prepared(select(match_users.c.id, match_users.c.name, match_users.c.profile, match_users.c.intents)
                  .where(or_(match_users.c.id == bindparam("source"), match_users.c.id == bindparam("candidate"))))
_SEED = Prepared(select(opportunities.c.seed, opportunities.c.discovery_query)
                 .where(opportunities.c.id == bindparam("opportunity_id")))
_INSERT_MESSAGE = Prepared(insert(a2a_messages))
_INSERT_ARTIFACT = Prepared(insert(a2a_artifacts))


#: How many stored turns and seeds, as parsed, :func:`_stored_turn` and :func:`_seed` keep.
PARSED_MEMO_SIZE = 4_096


def stored_turns(conn: Connection, task_id: str) -> list[StoredTurn]:
    rows = _TURNS.rows(conn, {"task_id": task_id})
    return [StoredTurn(row.seq, _stored_turn(row.sender, row.data), row.taken_by, row.agent_id, row.created_at,
                       row.id) for row in rows]


@lru_cache(maxsize=PARSED_MEMO_SIZE)
def _stored_turn(sender: str, data: str) -> MatchTurn:
    """A stored message's turn, parsed once per text: every request of a negotiation reads its
    whole history again, and a message is never changed once written (a :class:`MatchTurn` is
    immutable, so sharing one is safe)."""
    return turns.turn_from_json(sender, json.loads(data))


@lru_cache(maxsize=PARSED_MEMO_SIZE)
def _seed(seed_json: str) -> SeedAssessment:
    """An opportunity's stored seed, parsed once per text (every system turn reads it again)."""
    return parse_seed(json.loads(seed_json))


def artifact_of(conn: Connection, task_id: str) -> tuple[str, dict[str, Any]] | None:
    """The outcome artifact's id and data, once the negotiation has ended."""
    row = _ARTIFACT.row(conn, {"task_id": task_id})
    return None if row is None else (row.id, json.loads(row.data))


def _rules(task: Any) -> Rules:
    return Rules((task.source_user_id, task.candidate_user_id), strict_alternation=True, max_turns=task.max_turns)


def _negotiation(task: Any, history: list[StoredTurn]) -> Negotiation:
    return turns.replay(_rules(task), ((t.turn, t.at) for t in history))


def _is_personal(task: Any, user_id: str) -> bool:
    return bool(task.source_personal if user_id == task.source_user_id else task.candidate_personal)


def _other(task: Any, user_id: str) -> str:
    """The other side of the negotiation from ``user_id``'s."""
    return str(task.candidate_user_id if user_id == task.source_user_id else task.source_user_id)


@dataclass(frozen=True, slots=True)
class _Parties:
    """What every turn of one negotiation is decided from besides its history: both users and the
    opportunity's seed, as stored (JSON, read back only to park a turn) and parsed, and discovery
    query (read once per run of turns, not once per turn)."""

    users: dict[str, UserContext]
    seed_json: str
    seed: SeedAssessment
    discovery_query: str | None

    @classmethod
    def load(cls, conn: Connection, task: Any) -> "_Parties":
        found = {row.id: row for row in _USERS.rows(conn, {"source": task.source_user_id,
                                                           "candidate": task.candidate_user_id})}
        users = {}
        for user_id in (task.source_user_id, task.candidate_user_id):
            if user_id not in found:
                raise NotFound(f"unknown user: {user_id}")
            users[user_id] = user_context(found[user_id])
        opportunity = _SEED.row(conn, {"opportunity_id": task.opportunity_id})
        if opportunity is None:
            raise NotFound(f"unknown opportunity: {task.opportunity_id}")
        return cls(users, opportunity.seed, _seed(opportunity.seed), opportunity.discovery_query)

    def context(self, task: Any, speaker: str, history: list[StoredTurn]) -> MatchContext:
        return MatchContext(own=self.users[speaker], other=self.users[_other(task, speaker)], seed=self.seed,
                            history=tuple(t.turn for t in history), max_turns=task.max_turns)


def _next_speaker(task: Any, history: list[StoredTurn]) -> str:
    # The initiating side presents the case; then the sides alternate. After an ask_user (v2)
    # the side that paused speaks again.
    if history and turns.is_pause(history[-1].turn):
        return history[-1].turn.speaker
    return _other(task, history[-1].turn.speaker) if history else str(task.source_user_id)


def _debate(history: list[StoredTurn]) -> list[StoredTurn]:
    """The turns of the debate: the history less v2's ask_user pauses."""
    return [t for t in history if not turns.is_pause(t.turn)]


def visible_history(task: Any, history: list[StoredTurn], viewer: str | None) -> list[StoredTurn]:
    """What ``viewer`` (a user id; None: the operator) sees of the history: a side's ask_user
    consults its own user and is invisible to the other side."""
    if viewer is None:
        return history
    return [t for t in history if not turns.is_pause(t.turn) or t.turn.speaker == viewer]


def _may_ask(task: Any, speaker: str, history: list[StoredTurn], settings: MatchingSettings) -> bool:
    """Whether ``ask_user`` is open to ``speaker`` now: v2 with the setting on, a personal side,
    at most once per side (the final-turn rule is :mod:`v2`'s)."""
    return (task.protocol_version == v2.V2 and settings.v2_ask_user and _is_personal(task, speaker)
            and not any(turns.is_pause(t.turn) and t.turn.speaker == speaker for t in history))


def seat_rules(task: Any, speaker: str, history: list[StoredTurn], settings: MatchingSettings) -> dict[str, Any]:
    """The v2 facts of ``speaker``'s next turn: seat, whether it is the final one, what it may say."""
    seat = v2.seat_of(task.source_user_id, speaker)
    debate = _debate(history)
    first, final = not debate, v2.is_final(task.max_turns, len(debate) + 1)
    allowed = v2.allowed(seat, first=first, final=final, ask_user=_may_ask(task, speaker, history, settings))
    return {"seat": seat, "finalTurn": final, "allowedActions": [a.value for a in allowed]}


# -- advancing ------------------------------------------------------------------------------------

def advance(conn: Connection, task_id: str, settings: MatchingSettings, now: datetime) -> None:
    """Run a ``submitted`` or ``working`` negotiation forward: the system negotiator takes every
    turn of a side without a personal agent, until the negotiation ends or a personal agent's
    turn is parked. Anything else (parked, claimed, completed) is left as it is."""
    task = task_row(conn, task_id, lock=True)
    if task.state in (SUBMITTED, WORKING):
        _resume(conn, task, settings, now)


def _resume(conn: Connection, task: Any, settings: MatchingSettings, now: datetime) -> None:
    """Mark the locked ``submitted`` or ``working`` task ``working`` and run it forward."""
    _set(conn, task.id, now, state=WORKING)
    _run(conn, task, settings, now, system_takes=False)


def _run(conn: Connection, task: Any, settings: MatchingSettings, now: datetime, *, system_takes: bool) -> None:
    """Take system turns until a personal turn is due (parked) or the negotiation ends.
    ``system_takes``: the next turn is a personal side's whose parked turn timed out. ``task`` is
    the locked row as read; only its fixed columns (sides, cap, opportunity) are used."""
    history = stored_turns(conn, task.id)
    _play(conn, task, history, _negotiation(task, history), settings, now, system_takes=system_takes)


def _play(conn: Connection, task: Any, history: list[StoredTurn], negotiation: Negotiation,
          settings: MatchingSettings, now: datetime, *, system_takes: bool) -> None:
    """:func:`_run` from the stored ``history`` and its ``negotiation`` in hand (a respond has
    both, having just taken its turn: reading and replaying them again cost a tenth of it).
    ``history`` grows by the turns taken."""
    parties = _Parties.load(conn, task)
    if task.protocol_version == v2.V2 and settings.v2_screen and not history and task.screen is None:
        decision = _screen(task, parties)
        _set(conn, task.id, now, screen=decision)
        if decision == v2.PASS:
            _finalize(conn, task, history, None, now, reason=v2.SCREENED_OUT)
            return
    while negotiation.outcome is None:
        speaker = _next_speaker(task, history)
        if _is_personal(task, speaker) and not system_takes:
            _park(conn, task, parties, speaker, history, settings, now)
            return
        system_takes = False
        turn = _system_turn(task, parties, speaker, history, settings)
        history.append(_record(conn, task, negotiation, history, turn, SYSTEM, None, now))
    _finalize(conn, task, history, negotiation, now)


def _system_turn(task: Any, parties: _Parties, speaker: str, history: list[StoredTurn],
                 settings: MatchingSettings) -> MatchTurn:
    """The system negotiator's turn for ``speaker``. Under v2 it decides in v1's words from the
    history in v1's words, and :func:`v2.system_turn` plays the verdict from the speaker's seat;
    in a deadlock (a setting) it decides in the bargaining stance: its final call, now."""
    context = parties.context(task, speaker, history)
    if task.protocol_version != v2.V2:
        return decide(context)
    run = v2.non_convergent_run(t.turn for t in history)
    deadlocked = settings.v2_deadlock and run >= settings.v2_deadlock_threshold
    return v2.play(decide, context, v2.seat_of(task.source_user_id, speaker),
                   final=v2.is_final(task.max_turns, len(_debate(history)) + 1),
                   deadlock_run=run if deadlocked else None)


def _screen(task: Any, parties: _Parties) -> str:
    """The outreach screen (v2, a setting): the initiator's advocate is asked for its verdict as
    if the counterparty had opened with nothing but the profiles and the seed; a reject — its
    user gets nothing from the match — is a pass."""
    initiator, counterparty = str(task.source_user_id), str(task.candidate_user_id)
    opening = MatchTurn(counterparty, MatchAction.PROPOSE,
                        Assessment(parties.seed.reasoning, Roles("peer", "peer")), None)
    context = MatchContext(own=parties.users[initiator], other=parties.users[counterparty], seed=parties.seed,
                           history=(opening,), max_turns=None, negotiation_id=task.id)
    return v2.screen(decide(context).action is MatchAction.REJECT)


def _record(conn: Connection, task: Any, negotiation: Negotiation, history: list[StoredTurn], turn: MatchTurn,
            taken_by: str, agent_id: str | None, now: datetime, *, ask_user: bool = False) -> StoredTurn:
    """Apply the turn to the engine (refusing it when it breaks a rule) and store it as a message
    numbered after ``history``. ``ask_user``: the v2 pause is open to the speaker."""
    turns.apply(negotiation, turn, now, personal=taken_by == PERSONAL, version=task.protocol_version,
                seat=v2.seat_of(task.source_user_id, turn.speaker), ask_user=ask_user)
    number = len(history) + 1
    # A pause is no engine turn: its time is its own, never before the last message's.
    at = max([now, *(t.at for t in history[-1:])]) if turns.is_pause(turn) else negotiation.turns[-1].at
    message_id = "msg_" + secrets.token_urlsafe(12)
    _INSERT_MESSAGE.run(conn, {"task_id": task.id, "seq": number, "id": message_id, "sender": turn.speaker,
                               "taken_by": taken_by, "agent_id": agent_id,
                               "data": dump_json(turn.to_json()).decode(), "created_at": at})
    return StoredTurn(number, turn, taken_by, agent_id, at, message_id)


def _park(conn: Connection, task: Any, parties: _Parties, speaker: str, history: list[StoredTurn],
          settings: MatchingSettings, now: datetime) -> None:
    """Park a personal agent's turn: its whole context is written down, with a fallback deadline."""
    debate = _debate(history)
    turn_context = {
        "negotiationId": task.id,
        "opportunityId": task.opportunity_id,
        "turnNumber": len(history) + 1,
        "maxTurns": task.max_turns,
        "counterpartyAction": debate[-1].turn.action.value if debate else None,
        "ownUser": context_json(parties.users[speaker]),
        "otherUser": context_json(parties.users[_other(task, speaker)]),
        "seedAssessment": json.loads(parties.seed_json),
        "history": [history_entry(t) for t in visible_history(task, history, speaker)],
    }
    if parties.discovery_query is not None:
        turn_context["discoveryQuery"] = parties.discovery_query
    if task.protocol_version == v2.V2:
        turn_context.update(protocolVersion=v2.V2, **seat_rules(task, speaker, history, settings))
        own = [c for c in consultations(task) if c["userId"] == speaker]
        if own:
            turn_context["consultations"] = own
        if settings.v2_deadlock:
            run = v2.non_convergent_run(t.turn for t in history)
            turn_context["deadlock"] = {"nonConvergentRun": run, "threshold": settings.v2_deadlock_threshold,
                                        "bargaining": run >= settings.v2_deadlock_threshold}
    _set(conn, task.id, now, state=WAITING, waiting_user_id=speaker, claimed_by=None, claim_deadline=None,
         parked_at=now, park_deadline=now + timedelta(seconds=settings.parked_timeout_seconds),
         # Compact, as every answer is written (a context is 2.4 kB: json took 24 µs, orjson 3);
         # contexts parked before are json's spaced form, read alike.
         turn_context=dump_json(turn_context).decode())


def history_entry(stored: StoredTurn) -> dict[str, Any]:
    """A turn as the history of a turn context carries it: ``parse_context`` reads it back."""
    return {"turnNumber": stored.number, "speaker": stored.turn.speaker, **stored.turn.to_json()}


def _finalize(conn: Connection, task: Any, history: list[StoredTurn], negotiation: Negotiation | None,
              now: datetime, *, reason: str = TIMEOUT) -> None:
    """Write the outcome artifact, complete the task and move the opportunity on (spec:
    "Outcome Determination"). ``negotiation`` None: ``reason`` ended it — the timeout (the
    personal-vs-personal one, or v2's wall clock) or v2's screen (``screened_out``)."""
    kind = negotiation.outcome.kind if negotiation is not None and negotiation.outcome else None
    outcome = compute_outcome(task, history, kind, reason=reason)
    _INSERT_ARTIFACT.run(conn, {"id": "art_" + secrets.token_urlsafe(12), "task_id": task.id,
                                "name": OUTCOME_ARTIFACT, "data": json.dumps(outcome), "created_at": now})
    _set(conn, task.id, now, state=COMPLETED, waiting_user_id=None, claimed_by=None, claim_deadline=None,
         park_deadline=None, turn_context=None, answer_deadline=None)
    # accept → pending; reject, withdraw, decline and a screen's pass → rejected; cap, timeout → stalled.
    status = ("pending" if outcome["hasOpportunity"]
              else "stalled" if outcome.get("reason") in (TURN_CAP, TIMEOUT) else "rejected")
    update_by_id(conn, opportunities, task.opportunity_id, status=status, updated_at=now,
                 agreed_roles=json.dumps(outcome["agreedRoles"]) if outcome["hasOpportunity"] else None)


def compute_outcome(task: Any, history: list[StoredTurn], kind: OutcomeKind | None, *,
                    reason: str = TIMEOUT) -> dict[str, Any]:
    """``hasOpportunity``, ``agreedRoles`` (each side's ``ownUser`` from its own last turn),
    ``reasoning``, ``turnCount`` (turns of the debate: v2's ask_user pauses are not counted) and,
    without a terminal action, ``reason``."""
    history = _debate(history)
    count = len(history)
    if kind is OutcomeKind.AGREED:
        last_own: dict[str, str] = {}
        for stored in history:
            last_own[stored.turn.speaker] = stored.turn.assessment.suggested_roles.own_user
        roles = [{"userId": user, "role": last_own[user]} for user in (task.source_user_id, task.candidate_user_id)]
        return {"hasOpportunity": True, "agreedRoles": roles, "turnCount": count,
                "reasoning": f"Accepted on turn {count}: {history[-1].turn.assessment.reasoning}"}
    if kind is OutcomeKind.REJECTED:
        return {"hasOpportunity": False, "agreedRoles": [], "turnCount": count,
                "reasoning": f"Rejected on turn {count}: {history[-1].turn.assessment.reasoning}"}
    if kind is OutcomeKind.TURN_CAP:
        return {"hasOpportunity": False, "agreedRoles": [], "turnCount": count, "reason": TURN_CAP,
                "reasoning": f"The turn cap of {task.max_turns} was reached without accept or reject."}
    if reason == v2.SCREENED_OUT:
        return {"hasOpportunity": False, "agreedRoles": [], "turnCount": 0, "reason": v2.SCREENED_OUT,
                "reasoning": "The initiator's advocate passed at the outreach screen: its user gets nothing "
                             "from this match. The counterparty was never contacted."}
    return {"hasOpportunity": False, "agreedRoles": [], "turnCount": count, "reason": TIMEOUT,
            "reasoning": f"No resolution before the negotiation timed out at {task.expires_at.isoformat()} "
                         f"after {count} turns."}


def _set(conn: Connection, task_id: str, now: datetime, **values: Any) -> None:
    update_by_id(conn, a2a_tasks, task_id, updated_at=now, **values)


# -- deadlines ------------------------------------------------------------------------------------

def enforce(conn: Connection, task_id: str, settings: MatchingSettings, now: datetime) -> None:
    """Apply whatever deadline of this task has passed, in the spec's order: the negotiation
    timeout ends it; an unanswered claim returns to waiting; a turn parked too long is taken by
    the system negotiator. A ``submitted`` task left behind (a crash after its 201) is run."""
    task = task_row(conn, task_id, lock=True)
    if task.state == COMPLETED:
        return
    if task.expires_at is not None and task.expires_at <= now:
        _finalize(conn, task, stored_turns(conn, task.id), None, now)
        return
    state = task.state
    if state == CLAIMED and task.claim_deadline <= now:
        # Back in the queue with its original parking time and fallback deadline.
        _set(conn, task.id, now, state=WAITING, claimed_by=None, claim_deadline=None)
        state = WAITING
    if state == WAITING and task.park_deadline <= now:
        _set(conn, task.id, now, state=WORKING, waiting_user_id=None, park_deadline=None, turn_context=None)
        _run(conn, task, settings, now, system_takes=True)
    elif state == INPUT_REQUIRED and task.answer_deadline <= now:
        _answered(conn, task, None, settings, now)
    elif state in (SUBMITTED, WORKING):
        _resume(conn, task, settings, now)  # the row is locked and read already


def is_due(task: Any, now: datetime) -> bool:
    """Whether :func:`enforce` would change this task now (the same test as :func:`due_tasks`)."""
    if task.state == COMPLETED:
        return False
    return bool(task.state == SUBMITTED or (task.expires_at is not None and task.expires_at <= now)
                or (task.state == CLAIMED and task.claim_deadline <= now)
                or (task.state == WAITING and task.park_deadline <= now)
                or (task.state == INPUT_REQUIRED and task.answer_deadline <= now))


def due_tasks(conn: Connection, now: datetime, *, user_id: str | None = None, limit: int = SWEEP_BATCH) -> list[str]:
    """Tasks with a deadline passed (or left ``submitted``), oldest first. With ``user_id``: only
    those that could put a turn in that user's queue or take one out of it — turns parked for the
    user, and starts not yet run that involve the user. Each part is a search of one index (a
    union rather than one OR), so completed negotiations piling up cost the sweep nothing."""
    if user_id is None:
        return list(conn.execute(_due(None, now, limit)).scalars())
    return [row.id for row in _DUE_FOR_USER.rows(conn, {"user_id": user_id, "now": now, "limit": limit})]


def _due(user_id: Any | None, now: Any, limit: Any) -> Any:
    """The query of :func:`due_tasks` (``user_id`` None: every user's); ``now`` and ``limit`` are
    values or bound parameters."""
    due = union(*_due_parts(a2a_tasks, user_id, now)).subquery()
    return select(due.c.id).order_by(due.c.created_at, due.c.id).limit(limit)


def _due_parts(table: Any, user_id: Any | None, now: Any) -> list[Any]:
    """The parts of :func:`_due`'s union, each a select of ``table`` (``a2a_tasks`` or an alias of
    it) finding one kind of due task through one index."""
    tasks = table.c
    # A start not yet run waits for no user: said, it is found through the pickup's index (the
    # deadlines' indexes hold no state: schema.py).
    parts = [select(tasks.id, tasks.created_at).where(tasks.waiting_user_id.is_(None), tasks.state == SUBMITTED)]
    if user_id is None:
        return parts + [
            select(tasks.id, tasks.created_at).where(tasks.state == CLAIMED, tasks.claim_deadline <= now),
            select(tasks.id, tasks.created_at).where(tasks.state == WAITING, tasks.park_deadline <= now),
            select(tasks.id, tasks.created_at).where(tasks.state == INPUT_REQUIRED, tasks.answer_deadline <= now),
            select(tasks.id, tasks.created_at).where(tasks.state.in_(_OPEN), tasks.expires_at <= now)]
    # Each deadline a part of its own, each a range of one index: a user may have hundreds of
    # turns parked, and one OR over them read every one on every pickup.
    mine = tasks.waiting_user_id == user_id
    parts[0] = parts[0].where(or_(tasks.source_user_id == user_id, tasks.candidate_user_id == user_id))
    parts += [select(tasks.id, tasks.created_at).where(mine, tasks.state == WAITING, tasks.park_deadline <= now),
              select(tasks.id, tasks.created_at).where(mine, tasks.state == CLAIMED, tasks.claim_deadline <= now),
              select(tasks.id, tasks.created_at).where(mine, tasks.state == INPUT_REQUIRED,
                                                       tasks.answer_deadline <= now)]
    # The negotiation timeout, through the expiry index: = for each state, not IN (a prepared
    # statement takes no list: storage/prepared.py).
    return parts + [select(tasks.id, tasks.created_at).where(tasks.state == state, tasks.expires_at <= now, mine)
                    for state in (WAITING, CLAIMED, INPUT_REQUIRED)]


_DUE_FOR_USER = Prepared(_due(bindparam("user_id"), bindparam("now"), bindparam("limit")))


# -- polling --------------------------------------------------------------------------------------

def lock_pickups(conn: Connection, agent: Any) -> None:
    """Serialize one agent's pickups until the transaction ends (the CAS only keeps two agents
    apart): otherwise two pickups of one agent at once both find no claim held and, on
    PostgreSQL, claim two turns. Taken before :func:`claim_if_clear` and :func:`pickup`."""
    lock_key(conn, f"match-pickup:{agent.id}")


def claim_if_clear(conn: Connection, agent: Any, settings: MatchingSettings, now: datetime, *,
                   due_at: datetime) -> dict[str, Any] | None:
    """A pickup's common case in one statement: claim the oldest turn waiting for the agent's
    user when the agent holds no claim and nothing of the user's is due at ``due_at`` (what
    :func:`due_tasks` would find for the user) — what :func:`due_tasks` and then :func:`pickup`
    would do, one statement instead of four. None: not that case (a claim held, nothing
    waiting, a deadline due, or a claim lost to another agent of the user); nothing was changed,
    and :func:`due_tasks` and :func:`pickup` decide as before. Call with :func:`lock_pickups` taken."""
    won = _CLAIM_IF_CLEAR.row(conn, _claim_params(agent, settings, now) | {"due_at": due_at})
    return None if won is None else claim_view(won)


def pickup(conn: Connection, agent: Any, settings: MatchingSettings, now: datetime) -> dict[str, Any] | None:
    """Claim the oldest turn waiting for the agent's user (a compare-and-swap on ``state``), or
    return the claim this agent already holds. None: nothing waits. Call with
    :func:`lock_pickups` taken."""
    held = _HELD.row(conn, {"user_id": agent.user_id, "agent_id": agent.id, "now": now})
    if held is not None:
        return claim_view(task_row(conn, held.id))
    lost: list[str] = []
    while True:
        # The oldest turn still waiting. An UPDATE that lost waited for the winner's commit, so
        # the next SELECT sees that turn claimed; ``lost`` only guards against looping on it.
        if lost:
            task_id = conn.execute(_waiting(agent.user_id).where(a2a_tasks.c.id.not_in(lost))).scalar()
        else:
            row = _WAITING.row(conn, {"user_id": agent.user_id})
            task_id = None if row is None else row.id
        if task_id is None:
            return None
        won = _CLAIM.row(conn, _claim_params(agent, settings, now) | {"task_id": task_id})
        if won is not None:
            return claim_view(won)
        lost.append(task_id)  # another agent of this user claimed it first: try the next one


def _claim_params(agent: Any, settings: MatchingSettings, now: datetime) -> dict[str, Any]:
    return {"user_id": agent.user_id, "agent_id": agent.id, "now": now,
            "deadline": now + timedelta(seconds=settings.claim_timeout_seconds)}


def _waiting(user_id: Any, table: Any = a2a_tasks) -> Any:
    """The oldest turn waiting for ``user_id``, in ``table`` (``a2a_tasks`` or an alias of it)."""
    return (select(table.c.id).where(table.c.waiting_user_id == user_id, table.c.state == WAITING)
            .order_by(table.c.parked_at, table.c.created_at, table.c.id).limit(1))


def _held(table: Any) -> Any:
    """The claim the agent ``agent_id`` of the user ``user_id`` holds at ``now``, in ``table``
    (``a2a_tasks`` or an alias). A claimed turn is always its claimer's user's (a claim takes
    only a turn waiting for that user, and the turn stays the user's until the claim ends), so
    the claims are searched among the user's, through the pickup's index: searched by the claim
    deadline, every pickup read the row of every claim any agent held."""
    return select(table.c.id).where(table.c.waiting_user_id == bindparam("user_id"), table.c.state == CLAIMED,
                                    table.c.claimed_by == bindparam("agent_id"),
                                    table.c.claim_deadline > bindparam("now"))


def _claim(*where: Any) -> Any:
    """The claim of a waiting turn of ``user_id`` by ``agent_id`` at ``now``, where ``where`` also holds."""
    return (update(a2a_tasks).where(*where, a2a_tasks.c.state == WAITING,
                                    a2a_tasks.c.waiting_user_id == bindparam("user_id"))
            .values(state=CLAIMED, claimed_by=bindparam("agent_id"), updated_at=bindparam("now"),
                    claim_deadline=bindparam("deadline"))
            # What claim_view shows, returned by the claim itself rather than read again after it.
            .returning(a2a_tasks.c.turn_context, a2a_tasks.c.claimed_by, a2a_tasks.c.claim_deadline,
                       a2a_tasks.c.park_deadline))


_WAITING = Prepared(_waiting(bindparam("user_id")))
_HELD = Prepared(_held(a2a_tasks).order_by(a2a_tasks.c.parked_at, a2a_tasks.c.id).limit(1))
_CLAIM = Prepared(_claim(a2a_tasks.c.id == bindparam("task_id")))
# The subqueries read the table through an alias of their own: a2a_tasks itself would be the
# updated row's (correlated), not the table's.
_OTHERS = a2a_tasks.alias("others")
_CLAIM_IF_CLEAR = Prepared(_claim(
    a2a_tasks.c.id == _waiting(bindparam("user_id"), _OTHERS).scalar_subquery(),
    ~exists(_held(_OTHERS)),
    *(~exists(part) for part in _due_parts(_OTHERS, bindparam("user_id"), bindparam("due_at")))))


def claim_view(task: Any) -> dict[str, Any]:
    """What a pickup answers: the parked turn context plus the claim."""
    context = orjson.loads(task.turn_context)
    return {**context, "claimedBy": task.claimed_by, "deadline": task.claim_deadline.isoformat(),
            "parkDeadline": task.park_deadline.isoformat()}


def respond(conn: Connection, agent: Any, task_id: str, body: dict[str, Any], settings: MatchingSettings,
            now: datetime, *, task: Any | None = None) -> list[StoredTurn]:
    """Take the claimed turn — ``claimed`` by this agent, the claim unexpired, as the task's
    locked row says — store it, then finish, take the system's turn or park the counterpart's.
    The claim's end is written with the task's next state in one update (:func:`_park`,
    :func:`_finalize` or :func:`_pause`; every path of the turn ends in one of them, and a refused
    turn rolls the transaction back): a separate ``claimed`` → ``working`` update first rewrote
    every index of the row's state once more a respond. Returns the history as stored now, for
    the view that answers (which need not read it again). ``task``: the task's row as the caller
    locked and read it in this transaction, not read again."""
    turn = turns.parse_turn(body, agent.user_id)  # a malformed body is a 400 before anything is touched
    if task is None:
        task = task_row(conn, task_id, lock=True)
    if agent.user_id not in (task.source_user_id, task.candidate_user_id):
        raise Forbidden("this negotiation is not your user's")
    if task.state != CLAIMED or task.claimed_by != agent.id:
        raise Conflict(_not_yours(task))
    if task.expires_at is not None and task.expires_at <= now:
        raise Conflict("the negotiation timed out; it takes no more turns")
    if task.claim_deadline <= now:
        raise Conflict("your claim on this turn expired; pick the turn up again")
    history = stored_turns(conn, task_id)
    negotiation = _negotiation(task, history)
    may_ask = _may_ask(task, agent.user_id, history, settings)
    history.append(_record(conn, task, negotiation, history, turn, PERSONAL, agent.id, now, ask_user=may_ask))
    if turns.is_pause(turn):
        _pause(conn, task, turn, settings, now)
    elif negotiation.outcome is not None:
        _finalize(conn, task, history, negotiation, now)
    else:
        _play(conn, task, history, negotiation, settings, now, system_takes=False)
    return history


# -- ask_user (v2) --------------------------------------------------------------------------------

def consultations(task: Any) -> list[dict[str, Any]]:
    """The task's ask_user consultations, oldest first: ``userId``, ``question``, ``askedAt``,
    ``deadline``, ``answer`` (None while open), ``answeredAt``, ``defaulted``."""
    return list(json.loads(task.consultations)) if task.consultations else []


def _pause(conn: Connection, task: Any, turn: MatchTurn, settings: MatchingSettings, now: datetime) -> None:
    """The side that asked waits for its own user: ``input_required`` until the answer or the window.
    The claim its respond took ends here too (its parked turn's deadline and context with it)."""
    deadline = now + timedelta(seconds=settings.v2_ask_user_window_seconds)
    asked = consultations(task) + [{
        "userId": turn.speaker, "question": turn.message or turn.assessment.reasoning, "askedAt": now.isoformat(),
        "deadline": deadline.isoformat(), "answer": None, "answeredAt": None, "defaulted": False}]
    _set(conn, task.id, now, state=INPUT_REQUIRED, waiting_user_id=turn.speaker, claimed_by=None, claim_deadline=None,
         park_deadline=None, turn_context=None, answer_deadline=deadline, consultations=json.dumps(asked))


def answer(conn: Connection, caller: Principal, task_id: str, body: dict[str, Any], settings: MatchingSettings,
           now: datetime) -> None:
    """The user answers its side's open ``ask_user`` (with the user's key, or its agent's relaying
    it); the side's turn is parked again with the answer in its context."""
    only(body, ("answer",))
    reply = text(body.get("answer"), "answer", max_length=MAX_ANSWER_CHARS)
    task = task_row(conn, task_id, lock=True)
    require_party(task, caller)
    if caller.user_id is None:
        raise Forbidden("the user answers a consultation (with the user's key, or its agent's), not the operator")
    if task.state != INPUT_REQUIRED or task.waiting_user_id != caller.user_id:
        raise Conflict(f"the negotiation is {task.state} and no question of it waits for your answer")
    _answered(conn, task, reply, settings, now)


def _answered(conn: Connection, task: Any, reply: str | None, settings: MatchingSettings, now: datetime) -> None:
    """Close the open consultation — with the user's ``reply``, or (None) the conservative default
    once the window has lapsed — and hand the turn back to the side that asked."""
    asked = consultations(task)
    asked[-1].update(answer=reply if reply is not None else v2.DEFAULT_ANSWER, answeredAt=now.isoformat(),
                     defaulted=reply is None)
    _set(conn, task.id, now, state=WORKING, waiting_user_id=None, answer_deadline=None,
         consultations=json.dumps(asked))
    _run(conn, task_row(conn, task.id), settings, now, system_takes=False)


def _not_yours(task: Any) -> str:
    """Why a respond finds no claim of the caller's on the task."""
    if task.state == COMPLETED:
        return "the negotiation is over; it takes no more turns"
    if task.state == CLAIMED:
        return "another agent holds the claim on this turn"
    return f"the negotiation is {task.state}: pick the turn up before responding"


def waiting_for(conn: Connection, user_id: str) -> list[Any]:
    """The tasks whose parked turn is the user's (waiting or claimed), oldest first: their id,
    opportunity, state and parking times (not the turn contexts, which a list does not show)."""
    tasks = a2a_tasks.c
    return list(conn.execute(select(tasks.id, tasks.opportunity_id, tasks.state, tasks.parked_at,
                                    tasks.park_deadline)
                             .where(tasks.waiting_user_id == user_id, tasks.state.in_((WAITING, CLAIMED)))
                             .order_by(tasks.parked_at, tasks.created_at, tasks.id)))


def require_party(task: Any, caller: Principal) -> None:
    if not caller.may_see(task.source_user_id, task.candidate_user_id):
        raise Forbidden("only the operator and the two users see this negotiation")
    if screened_from(task, caller):
        raise NotFound(f"no negotiation {task.id}")


def screened_from(task: Any, caller: Principal) -> bool:
    """Whether a v2 screen's pass hides the negotiation from ``caller``: the counterparty never
    learns of an outreach its initiator passed on."""
    return task.screen == v2.PASS and not caller.is_operator and caller.user_id == task.candidate_user_id
