"""A turn of a match negotiation: reading one from a request, and the spec's turn rules on top
of the engine's (spec 002, "Actions", "Turn structure", "Turn cap").

The engine enforces alternation, the cap and that nothing follows a terminal turn. This module
adds what is particular to match negotiation: ``propose`` opens and only opens, ``question``
belongs to personal agents. A match has no price, so each non-terminal turn puts the speaker's
suggested roles on the table as the engine's terms and ``accept`` agrees to the counterpart's.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Iterable

from haggler.agents.match_context import ROLES, Assessment, MatchAction, MatchTurn, Roles
from haggler.engine import Action, Negotiation, Rules, RuleViolation, Terms, Turn
from haggler.errors import InvalidInput
from haggler.protocols.fields import json_object, one_of, only, text

MAX_REASONING_CHARS, MAX_MESSAGE_CHARS = 4000, 4000
_ENGINE_ACTION = {MatchAction.PROPOSE: Action.OFFER, MatchAction.COUNTER: Action.OFFER,
                  MatchAction.QUESTION: Action.OFFER, MatchAction.ACCEPT: Action.ACCEPT,
                  MatchAction.REJECT: Action.REJECT}
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


def replay(rules: Rules, turns: Iterable[tuple[MatchTurn, datetime]]) -> Negotiation:
    """The engine's negotiation rebuilt from stored turns."""
    return Negotiation.replay(rules, (_engine_turn(turn, at) for turn, at in turns))


def apply(negotiation: Negotiation, turn: MatchTurn, at: datetime, *, personal: bool) -> None:
    """Check ``turn`` against the spec's rules and the engine's, then apply it.

    ``personal``: the turn comes from the user's own agent (a system turn never asks a question)."""
    first = not negotiation.turns
    if first and turn.action is not MatchAction.PROPOSE:
        raise InvalidInput(f"the first turn must be propose, not {turn.action.value} (spec: Actions)")
    if not first and turn.action is MatchAction.PROPOSE:
        raise InvalidInput("propose is for the first turn only; answer with counter, accept, reject or question "
                           "(spec: Actions)")
    if turn.action is MatchAction.QUESTION and not personal:
        raise InvalidInput("question is for personal agents only (spec: Actions)")
    last = negotiation.last_turn
    try:
        negotiation.apply(_engine_turn(turn, max(at, last.at) if last else at))
    except RuleViolation as exc:
        raise InvalidInput(f"{exc.message} ({exc.code})") from exc
