"""A turn of a match negotiation: reading one from a request, and the spec's turn rules on top
of the engine's (spec 002, "Actions", "Turn structure", "Turn cap").

The engine enforces alternation, the cap and that nothing follows a terminal turn. This module
adds what is particular to match negotiation: ``propose`` opens and only opens, ``question``
belongs to personal agents. A match has no price, so each non-terminal turn puts the speaker's
suggested roles on the table as the engine's terms and ``accept`` agrees to the counterpart's.
A v2 negotiation's seat rules come from :mod:`v2`; its ``ask_user`` pause is stored with the turns
but is no turn of the engine's (it neither alternates nor counts toward the cap).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from haggler.agents.match_context import ROLES, Assessment, MatchAction, MatchTurn, Roles
from haggler.engine import Action, Negotiation, Rules, RuleViolation, Terms, Turn
from haggler.errors import InvalidInput
from haggler.protocols.fields import json_object, one_of, only, text
from haggler.protocols.matching import v2

MAX_REASONING_CHARS, MAX_MESSAGE_CHARS = 4000, 4000
_ENGINE_ACTION = {MatchAction.PROPOSE: Action.OFFER, MatchAction.COUNTER: Action.OFFER,
                  MatchAction.QUESTION: Action.OFFER, MatchAction.ACCEPT: Action.ACCEPT,
                  MatchAction.REJECT: Action.REJECT, MatchAction.OUTREACH: Action.OFFER,
                  MatchAction.WITHDRAW: Action.REJECT, MatchAction.DECLINE: Action.REJECT}
ACTIONS = tuple(a.value for a in MatchAction)


def parse_turn(body: dict[str, Any], speaker: str) -> MatchTurn:
    """A turn from ``{action, message?, assessment: {reasoning, suggestedRoles: {ownUser,
    otherUser}}}``; InvalidInput names the field at fault."""
    only(body, ("action", "message", "assessment"))
    action = MatchAction(one_of(body.get("action"), "action", ACTIONS))
    assessment = json_object(body.get("assessment"), "assessment")
    only(assessment, ("reasoning", "suggestedRoles"), where="assessment")
    roles = json_object(assessment.get("suggestedRoles"), "assessment.suggestedRoles")
    only(roles, ("ownUser", "otherUser"), where="assessment.suggestedRoles")
    suggested = Roles(one_of(roles.get("ownUser"), "assessment.suggestedRoles.ownUser", ROLES),
                      one_of(roles.get("otherUser"), "assessment.suggestedRoles.otherUser", ROLES))
    reasoning = text(assessment.get("reasoning"), "assessment.reasoning", max_length=MAX_REASONING_CHARS)
    message = body.get("message")
    if message is not None:
        message = text(message, "message", max_length=MAX_MESSAGE_CHARS, allow_empty=True)
    return MatchTurn(speaker, action, Assessment(reasoning, suggested), message)


def turn_from_json(speaker: str, data: dict[str, Any]) -> MatchTurn:
    """A stored turn (the data part of its message) back as a :class:`MatchTurn`."""
    roles = data["assessment"]["suggestedRoles"]
    return MatchTurn(speaker, MatchAction(data["action"]),
                     Assessment(data["assessment"]["reasoning"], Roles(roles["ownUser"], roles["otherUser"])),
                     data.get("message"))


def _engine_turn(turn: MatchTurn, at: datetime) -> Turn:
    terms = None
    if _ENGINE_ACTION[turn.action] is Action.OFFER:
        roles = turn.assessment.suggested_roles
        terms = Terms(0, "roles", (roles.own_user, roles.other_user))
    return Turn(turn.speaker, _ENGINE_ACTION[turn.action], at, terms=terms)


def is_pause(turn: MatchTurn) -> bool:
    """An ``ask_user`` (v2): stored with the turns, but no turn of the engine's."""
    return turn.action is MatchAction.ASK_USER


def replay(rules: Rules, turns: Iterable[tuple[MatchTurn, datetime]]) -> Negotiation:
    """The engine's negotiation rebuilt from stored turns."""
    return Negotiation.replay(rules, (_engine_turn(turn, at) for turn, at in turns if not is_pause(turn)))


def apply(negotiation: Negotiation, turn: MatchTurn, at: datetime, *, personal: bool, version: str = v2.V1,
          seat: str = v2.INITIATOR, ask_user: bool = False) -> None:
    """Check ``turn`` against the spec's rules and the engine's, then apply it (an ``ask_user``
    is checked and left out of the engine).

    ``personal``: the turn comes from the user's own agent (a system turn never asks a question).
    ``version``, ``seat``: under v2 the seat's vocabulary and final-turn rules hold instead of v1's
    propose rules; ``ask_user``: the pause is open to this side now."""
    first = not negotiation.turns
    if version == v2.V2:
        final = v2.is_final(negotiation.rules.max_turns, len(negotiation.turns) + 1)
        v2.check(turn.action, seat, first=first, final=final, ask_user=ask_user)
        if turn.action is MatchAction.QUESTION and not personal:
            raise InvalidInput("question is for personal agents only (spec: Actions)")
        if not is_pause(turn):
            _engine_apply(negotiation, turn, at)
        return
    v2.check_v1(turn.action)
    if first and turn.action is not MatchAction.PROPOSE:
        raise InvalidInput(f"the first turn must be propose, not {turn.action.value} (spec: Actions)")
    if not first and turn.action is MatchAction.PROPOSE:
        raise InvalidInput("propose is for the first turn only; answer with counter, accept, reject or question "
                           "(spec: Actions)")
    if turn.action is MatchAction.QUESTION and not personal:
        raise InvalidInput("question is for personal agents only (spec: Actions)")
    _engine_apply(negotiation, turn, at)


def _engine_apply(negotiation: Negotiation, turn: MatchTurn, at: datetime) -> None:
    last = negotiation.last_turn
    try:
        negotiation.apply(_engine_turn(turn, max(at, last.at) if last else at))
    except RuleViolation as exc:
        raise InvalidInput(f"{exc.message} ({exc.code})") from exc
