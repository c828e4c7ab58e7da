"""What a match negotiator sees and says: users, seed assessment, turns — and their JSON forms.

Spec 002 ("Turn structure", "Seed Assessment"). The structures are immutable and small so that a
turn can be decided from them alone (any worker, any time) and so that the same inputs always give
the same turn. :func:`parse_context` reads the JSON the matching service will hand over and names
the field at fault when something is malformed, because the negotiator will be fed by other
people's agents and a bare ``KeyError`` says nothing about which of them sent what.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from haggler.errors import InvalidInput

__all__ = [
    "ROLES", "Assessment", "MatchAction", "MatchContext", "MatchTurn", "Roles", "SeedAssessment",
    "UserContext", "UserIntent", "fingerprint", "memoized_by", "parse_context", "parse_seed", "per_user",
]

#: agent: gives what the other seeks; patient: receives it; peer: mutual exchange.
ROLES = ("agent", "patient", "peer")


class MatchAction(str, Enum):
    PROPOSE = "propose"    # first turn only: the initiating side presents the case
    COUNTER = "counter"    # partial agreement with named objections
    ACCEPT = "accept"      # the match serves this side's user
    REJECT = "reject"      # it does not
    QUESTION = "question"  # personal agents only; routes like counter
    # Negotiations v2 (protocols/matching/v2.py): the seat vocabularies. The negotiators decide in
    # v1's words; the matching service maps their verdicts onto the seat they play.
    OUTREACH = "outreach"  # v2, initiator seat, first turn: v1's propose
    WITHDRAW = "withdraw"  # v2, initiator seat: walks away (v1's reject)
    DECLINE = "decline"    # v2, counterparty seat: says no (v1's reject)
    ASK_USER = "ask_user"  # v2: a pause to consult one's own user; not a turn of the debate


_TERMINAL = (MatchAction.ACCEPT, MatchAction.REJECT, MatchAction.WITHDRAW, MatchAction.DECLINE)


@dataclass(frozen=True, slots=True)
class UserIntent:
    description: str
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UserContext:
    user_id: str
    #: Free-form profile: name, bio, skills, offers, seeks, role, location, stage, ...
    profile: Mapping[str, Any]
    intents: tuple[UserIntent, ...] = ()
    #: :func:`fingerprint`'s value once computed: a turn's decision reads one user through half a
    #: dozen memoized readings, and encoding the profile for each was a sixth of the decision.
    _fingerprint: Hashable = field(default=None, init=False, repr=False, compare=False)


def fingerprint(user: UserContext) -> Hashable:
    """What a user's reading depends on, hashable: its id, profile and intents. The profile is a
    free-form mapping, so a :class:`UserContext` has no hash of its own; its canonical JSON (C's
    encoder, keys sorted) stands for it, computed once per context (the structures are immutable:
    nothing changes a profile once it is in one)."""
    key = user._fingerprint
    if key is None:
        key = user.user_id, json.dumps(user.profile, sort_keys=True, default=str), user.intents
        object.__setattr__(user, "_fingerprint", key)
    return key


#: How many users' readings :func:`per_user` keeps, per function.
USER_MEMO_SIZE = 4_096

_R = TypeVar("_R")
_P = ParamSpec("_P")


def memoized_by(key: Callable[_P, Hashable], size: int) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """Memoize a pure function that returns an immutable value by ``key`` of its arguments, at
    most ``size`` values, least recently used first out (a server decides turns for as long as it
    runs, so nothing it keeps may grow without bound). ``key`` must stand for everything the
    value depends on, or one negotiation's value would leak into another's."""
    def memoize(compute: Callable[_P, _R]) -> Callable[_P, _R]:
        memo: OrderedDict[Hashable, _R] = OrderedDict()
        lock = threading.Lock()

        @wraps(compute)
        def memoized(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            found = key(*args, **kwargs)
            with lock:
                if found in memo:
                    memo.move_to_end(found)
                    return memo[found]
            value = compute(*args, **kwargs)
            with lock:
                memo[found] = value
                if len(memo) > size:
                    memo.popitem(last=False)
            return value
        return memoized
    return memoize


def per_user(reading: Callable[[UserContext], _R]) -> Callable[[UserContext], _R]:
    """Memoize ``reading`` (a pure function of one user that returns an immutable value) by the
    user's :func:`fingerprint` (:func:`memoized_by`). A match negotiation reads the same
    two users on every turn, and the matching service decides every system turn: reading their
    texts again each time was most of a turn's cost."""
    return memoized_by(fingerprint, USER_MEMO_SIZE)(reading)


@dataclass(frozen=True, slots=True)
class SeedAssessment:
    """The opportunity evaluator's view: a starting point, never the verdict."""

    score: int
    reasoning: str
    valency_role: str
    #: (user id, role) pairs, when the evaluator named them.
    actors: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The seed as spec 002 shapes it (what :func:`parse_seed` reads back)."""
        return {"score": self.score, "reasoning": self.reasoning, "valencyRole": self.valency_role,
                "actors": [{"userId": user, "role": role} for user, role in self.actors]}


@dataclass(frozen=True, slots=True)
class Roles:
    own_user: str
    other_user: str

    def to_json(self) -> dict[str, str]:
        return {"ownUser": self.own_user, "otherUser": self.other_user}


@dataclass(frozen=True, slots=True)
class Assessment:
    reasoning: str
    suggested_roles: Roles


@dataclass(frozen=True, slots=True)
class MatchTurn:
    #: The user id of the side whose advocate took the turn.
    speaker: str
    action: MatchAction
    assessment: Assessment
    message: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The turn as spec 002 shapes it (without the speaker, which the caller records)."""
        data: dict[str, Any] = {
            "action": self.action.value,
            "assessment": {"reasoning": self.assessment.reasoning,
                           "suggestedRoles": self.assessment.suggested_roles.to_json()},
        }
        if self.message is not None:
            data["message"] = self.message
        return data


@dataclass(frozen=True, slots=True)
class MatchContext:
    """Everything one turn is decided from."""

    own: UserContext
    other: UserContext
    seed: SeedAssessment
    history: tuple[MatchTurn, ...] = ()
    #: The caller's turn cap (6 system–system, 8 mixed); None when unlimited.
    max_turns: int | None = None
    #: The negotiation the turn belongs to, when the caller names it (a parked turn does): what a
    #: decider that keeps per-negotiation state (an LLM's token budget) keys it by.
    negotiation_id: str | None = None

    def __post_init__(self) -> None:
        if self.own.user_id == self.other.user_id:
            raise InvalidInput("ownUser.userId and otherUser.userId must differ")
        for i, turn in enumerate(self.history):
            if turn.speaker not in (self.own.user_id, self.other.user_id):
                raise InvalidInput(f"history[{i}].speaker {turn.speaker!r} is neither user")
            if turn.action in _TERMINAL and i < len(self.history) - 1:
                raise InvalidInput(f"history[{i}].action {turn.action.value!r} ended the negotiation")
        if self.history and self.history[-1].action in _TERMINAL:
            raise InvalidInput(f"history[{len(self.history) - 1}].action "
                               f"{self.history[-1].action.value!r} ended the negotiation; no turn is due")
        if self.max_turns is not None and self.max_turns < 1:
            raise InvalidInput("maxTurns must be a positive number of turns, or absent for no cap")

    @property
    def turn_number(self) -> int:
        """The 1-based number of the turn being decided."""
        return len(self.history) + 1


def _field(data: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(data, Mapping):
        raise InvalidInput(f"{where} must be an object")
    if key not in data:
        raise InvalidInput(f"{where}.{key} is required")
    value = data[key]
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        raise InvalidInput(f"{where}.{key} has the wrong type")
    return value


def _strings(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{where} must be a list of strings")
    return tuple(value)


def _user(data: Any, where: str) -> UserContext:
    user_id = _field(data, "userId", where, str)
    profile = _field(data, "profile", where, Mapping)
    intents = []
    for i, item in enumerate(_field(data, "intents", where, list)):
        at = f"{where}.intents[{i}]"
        description = _field(item, "description", at, str)
        tags = _strings(item.get("tags", []), f"{at}.tags")
        intents.append(UserIntent(description, tags))
    return UserContext(user_id, profile, tuple(intents))


def parse_seed(data: Any) -> SeedAssessment:
    """A :class:`SeedAssessment` from its JSON form (``score``, ``reasoning``, ``valencyRole``,
    optional ``actors`` [{userId, role}]); InvalidInput names the malformed field."""
    where = "seedAssessment"
    score = _field(data, "score", where, (int, float))
    if not 0 <= score <= 100:
        raise InvalidInput(f"{where}.score must be between 0 and 100")
    actors = []
    for i, actor in enumerate(data.get("actors") or []):
        at = f"{where}.actors[{i}]"
        actors.append((_field(actor, "userId", at, str), _field(actor, "role", at, str)))
    return SeedAssessment(int(score), _field(data, "reasoning", where, str),
                          _field(data, "valencyRole", where, str), tuple(actors))


def _action(value: Any, where: str) -> MatchAction:
    try:
        return MatchAction(value)
    except ValueError:
        raise InvalidInput(f"{where} must be one of {', '.join(a.value for a in MatchAction)}") from None


def _turn(data: Any, where: str) -> MatchTurn:
    assessment = _field(data, "assessment", where, Mapping)
    roles = _field(assessment, "suggestedRoles", f"{where}.assessment", Mapping)
    for key in ("ownUser", "otherUser"):
        if _field(roles, key, f"{where}.assessment.suggestedRoles", str) not in ROLES:
            raise InvalidInput(f"{where}.assessment.suggestedRoles.{key} must be one of {', '.join(ROLES)}")
    message = data.get("message")
    if message is not None and not isinstance(message, str):
        raise InvalidInput(f"{where}.message must be a string")
    return MatchTurn(
        _field(data, "speaker", where, str),
        _action(_field(data, "action", where, str), f"{where}.action"),
        Assessment(_field(assessment, "reasoning", f"{where}.assessment", str),
                   Roles(roles["ownUser"], roles["otherUser"])),
        message,
    )


def parse_context(data: Mapping[str, Any]) -> MatchContext:
    """A :class:`MatchContext` from JSON: ``ownUser``, ``otherUser`` (each ``userId``, ``profile``,
    ``intents``), ``seedAssessment``, optional ``history`` (turns with a ``speaker`` user id) and
    ``maxTurns``, ``negotiationId``. Raises :class:`~haggler.errors.InvalidInput` naming the malformed field."""
    if not isinstance(data, Mapping):
        raise InvalidInput("the negotiation context must be an object")
    history = data.get("history") or []
    if not isinstance(history, list):
        raise InvalidInput("history must be a list of turns")
    max_turns = data.get("maxTurns")
    if max_turns is not None and (not isinstance(max_turns, int) or isinstance(max_turns, bool)):
        raise InvalidInput("maxTurns must be an integer")
    negotiation_id = data.get("negotiationId")
    if negotiation_id is not None and not isinstance(negotiation_id, str):
        raise InvalidInput("negotiationId must be a string")
    return MatchContext(
        own=_user(data.get("ownUser"), "ownUser"),
        other=_user(data.get("otherUser"), "otherUser"),
        seed=parse_seed(data.get("seedAssessment")),
        history=tuple(_turn(t, f"history[{i}]") for i, t in enumerate(history)),
        max_turns=max_turns,
        negotiation_id=negotiation_id,
    )
