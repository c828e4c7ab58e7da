"""Negotiations v2, Index Network's "client-advocate protocol": the rules, and nothing else.

docs/matching-api.md, "Negotiations v2"; the public source is Index Network's
``docs/domain/negotiation.md`` (and its seat-rule module). Every function here is pure: the turn
path (:mod:`turns`, :mod:`negotiations`) asks it what a seat may say and what a verdict becomes.

* **Version.** A negotiation carries ``protocolVersion`` (``v1`` | ``v2``), stamped at its start and
  never re-stamped; a continuation (a new negotiation of a pair that negotiated before) inherits
  its predecessor's, a fresh one takes the server setting (default ``v1``).
* **Seats, not turn parity.** The initiator seat is the opportunity's source user. It may
  ``outreach | counter | question | withdraw`` and never ``accept``; the counterparty seat may
  ``accept | decline | counter | question``. On the final turn (the cap's last) the initiator must
  ``withdraw | counter`` and the counterparty must ``accept | decline``. The first turn is the
  initiator's ``outreach``, and only the first.
* **ask_user** (a setting): a personal agent may pause to consult its own user, once per side, on
  any turn but the final one. It is a message of the conversation, not a turn of the debate: it
  does not count toward the cap, and the same side speaks next.
* **Outcome.** ``accept`` → pending; ``reject``, ``withdraw``, ``decline`` → rejected; the cap →
  stalled (``turn_cap``); the wall clock → stalled (``timeout``); a screen ``pass`` → rejected with
  ``reason: "screened_out"``, invisible to the counterparty.
* **Deadlock** (a setting): a trailing run of at least ``threshold`` counters/questions. It changes
  the stance of system turns only (see :func:`system_turn`), never the vocabularies.

The system negotiator decides in v1's words (``propose | counter | accept | reject``);
:func:`system_turn` plays its verdict from a v2 seat, and :func:`as_v1` translates a v2 history
back for it. A personal agent's runtime does the same with its decider.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from haggler.agents.match_context import MatchAction, MatchContext, MatchTurn
from haggler.errors import InvalidInput

V1, V2 = "v1", "v2"
INITIATOR, COUNTERPARTY = "initiator", "counterparty"
REACH_OUT, PASS = "reach_out", "pass"
SCREENED_OUT = "screened_out"
A = MatchAction

_SEAT_ACTIONS = {INITIATOR: (A.OUTREACH, A.COUNTER, A.QUESTION, A.WITHDRAW),
                 COUNTERPARTY: (A.ACCEPT, A.DECLINE, A.COUNTER, A.QUESTION)}
_FINAL_ACTIONS = {INITIATOR: (A.WITHDRAW, A.COUNTER), COUNTERPARTY: (A.ACCEPT, A.DECLINE)}
#: v2's words for v1's, as the system negotiator's verdicts and a v2 history translate.
_AS_V1 = {A.OUTREACH: A.PROPOSE, A.WITHDRAW: A.REJECT, A.DECLINE: A.REJECT}
#: The locutions that keep a dialogue open without converging (deadlock detection).
_NON_CONVERGENT = (A.COUNTER, A.QUESTION)
V2_ONLY = (A.OUTREACH, A.WITHDRAW, A.DECLINE, A.ASK_USER)
#: What a consultation left unanswered within its window resolves to.
DEFAULT_ANSWER = ("No answer came within the window. Proceed conservatively: assume your user consents to "
                  "nothing new, share nothing more and commit to nothing more; do not accept on a guess.")


def seat_of(initiator: str, user_id: str) -> str:
    return INITIATOR if user_id == initiator else COUNTERPARTY


def is_final(max_turns: int | None, turn_number: int) -> bool:
    """Whether the debate turn numbered ``turn_number`` (1-based, ask_user not counted) is the cap's last."""
    return max_turns is not None and turn_number >= max_turns


def allowed(seat: str, *, first: bool, final: bool, ask_user: bool = False) -> tuple[MatchAction, ...]:
    """What ``seat`` may say on this turn. ``ask_user``: the pause is open to this side now (the
    setting is on, the side is a personal agent that has not used it); never on the final turn."""
    if final:
        actions = _FINAL_ACTIONS[seat]
    elif seat == INITIATOR:
        actions = (A.OUTREACH,) if first else tuple(a for a in _SEAT_ACTIONS[INITIATOR] if a is not A.OUTREACH)
    else:
        actions = _SEAT_ACTIONS[COUNTERPARTY]
    return actions + (A.ASK_USER,) if ask_user and not final else actions


def check(action: MatchAction, seat: str, *, first: bool, final: bool, ask_user: bool = False) -> None:
    """InvalidInput (a 400) naming the allowed actions when ``action`` is not one of them."""
    permitted = allowed(seat, first=first, final=final, ask_user=ask_user)
    if action not in permitted:
        when = "on the final turn" if final else "on the first turn" if first else "on this turn"
        raise InvalidInput(f"action {action.value!r} is not allowed for the {seat} seat {when} under negotiation "
                           f"protocol v2; allowed actions: {', '.join(a.value for a in permitted)} "
                           f"(Index negotiation v2: seat rules)")


def check_v1(action: MatchAction) -> None:
    """A v1 negotiation keeps v1's vocabulary."""
    if action in V2_ONLY:
        raise InvalidInput(f"action {action.value!r} belongs to negotiation protocol v2; this negotiation speaks v1: "
                           "propose, counter, accept, reject or question")


# -- the system negotiator (and any v1 decider) on a v2 seat ------------------------------------------

def as_v1(history: Iterable[MatchTurn]) -> tuple[MatchTurn, ...]:
    """A v2 history in v1's words, for a decider that speaks v1: ``outreach`` → propose,
    ``withdraw``/``decline`` → reject; ``ask_user`` pauses are left out (they are not turns)."""
    return tuple(replace(t, action=_AS_V1.get(t.action, t.action)) for t in history if t.action is not A.ASK_USER)


def v1_context(context: MatchContext, *, deadlocked: bool = False) -> MatchContext:
    """The context a v1 decider decides a v2 turn from. ``deadlocked``: the bargaining stance —
    the decider is told this is its final call, so it concludes instead of countering again."""
    history = as_v1(context.history)
    max_turns = len(history) + 1 if deadlocked else context.max_turns
    return replace(context, history=history, max_turns=max_turns)


def system_turn(verdict: MatchTurn, seat: str, *, first: bool, final: bool) -> MatchTurn:
    """A v1 verdict played from a v2 seat (docs/matching-api.md, "The system negotiator on a seat"):

    * initiator: ``propose`` → ``outreach``; ``reject`` → ``withdraw``; ``accept`` → a ``counter``
      that puts the match to the counterparty to accept (the seat cannot accept); ``counter`` stays.
    * counterparty: ``reject`` → ``decline``; ``accept`` and ``counter`` stay, except that a
      ``counter`` on the final turn becomes ``decline`` (the seat must decide; no is the safe side).
    """
    action = verdict.action
    message = verdict.message
    if seat == INITIATOR:
        if first:
            action = A.OUTREACH
        elif action is A.REJECT:
            action = A.WITHDRAW
        elif action is A.ACCEPT:
            action = A.COUNTER
            message = "My user is ready to go ahead as proposed; it is yours to accept or decline."
    elif action is A.REJECT or (final and action is A.COUNTER):
        action = A.DECLINE
    turn = replace(verdict, action=action, message=message)
    check(turn.action, seat, first=first, final=final)
    return turn


def play(decider: Callable[[MatchContext], MatchTurn], context: MatchContext, seat: str, *, final: bool,
         deadlock_run: int | None = None) -> MatchTurn:
    """A v1 decider's turn on a v2 seat: it decides from :func:`v1_context` and :func:`system_turn`
    plays the verdict. ``deadlock_run``: the trailing run of counters/questions when it makes a
    deadlock (the bargaining stance, said in the reasoning); None when there is none."""
    verdict = decider(v1_context(context, deadlocked=deadlock_run is not None))
    if deadlock_run is not None:
        verdict = replace(verdict, assessment=replace(verdict.assessment, reasoning=(
            f"Deadlock: {deadlock_run} counters and questions in a row, so I bargain instead of arguing "
            f"again and make my call now. {verdict.assessment.reasoning}")))
    return system_turn(verdict, seat, first=not as_v1(context.history), final=final)


def screen(verdict_rejects: bool) -> str:
    """The outreach screen's decision: ``pass`` when the initiator's advocate would reject the match
    for its own user outright (it gets nothing from it), ``reach_out`` otherwise."""
    return PASS if verdict_rejects else REACH_OUT


# -- deadlock -------------------------------------------------------------------------------------------

def non_convergent_run(history: Iterable[MatchTurn]) -> int:
    """The length of the trailing run of counters and questions (ask_user pauses are not turns;
    anything else ends the run)."""
    run = 0
    for turn in reversed(as_v1(history)):
        if turn.action not in _NON_CONVERGENT:
            break
        run += 1
    return run
