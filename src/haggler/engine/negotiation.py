"""One negotiation: parties, turns, rules and an outcome — as a pure state machine.

Modelled on h11: the object holds state and validates transitions; callers do the I/O
(HTTP, database) and pass time in on each turn. A negotiation is rebuilt from stored turns by
:meth:`Negotiation.replay`, so any worker can pick up any conversation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum
from typing import Iterable, NamedTuple


class Action(str, Enum):
    """What a turn does to the negotiation."""

    OFFER = "offer"        # puts terms on the table (an opening, a counter, a last offer)
    MESSAGE = "message"    # talk without new terms: questions, answers, clarifications
    ACCEPT = "accept"      # agrees to the counterpart's standing offer; closes with agreement
    REJECT = "reject"      # ends without agreement (walks away, withdraws, declines)


_OFFER, _ACCEPT, _REJECT = Action.OFFER, Action.ACCEPT, Action.REJECT


class OutcomeKind(str, Enum):
    AGREED = "agreed"
    REJECTED = "rejected"
    TURN_CAP = "turn_cap"
    EXPIRED = "expired"


_AGREED, _REJECTED, _TURN_CAP = OutcomeKind.AGREED, OutcomeKind.REJECTED, OutcomeKind.TURN_CAP
#: Builds a named tuple from all its fields without its Python-level __new__ (see Terms).
_new = tuple.__new__


class Terms(NamedTuple):
    """What is on the table: a price in minor units plus non-price extras.

    Terms and turns are named tuples, not frozen dataclasses: they are built on every turn of
    every negotiation (the lab runs hundreds of thousands a second), and a tuple is immutable
    without a Python-level ``__init__`` — hot loops build one with ``tuple.__new__`` in a
    third of the time. The price of that: they compare equal to plain tuples of the same
    values, so compare them only with each other.
    """

    price_cents: int
    currency: str
    extras: tuple[str, ...] = ()


class Turn(NamedTuple):
    """One move by one party: an offer, a message, an accept or a reject (see Terms on why a
    named tuple)."""

    party: str
    action: Action
    at: datetime
    terms: Terms | None = None
    text: str | None = None
    #: An OFFER marked final: the party says it will not improve on it.
    final: bool = False


#: A turn as a plain tuple of its six fields, in Turn's order: what :meth:`Negotiation.apply` also
#: takes, so that a hot loop records a turn without building a Turn (one costs about as much as
#: the rest of applying it); :attr:`Negotiation.turns` reads it back as a Turn.
TurnFields = tuple[str, Action, datetime, Terms | None, str | None, bool]


class Outcome(NamedTuple):
    """How a negotiation ended.

    A named tuple like Terms and Turn (see Terms on why, and on the caveat that it compares
    equal to a plain tuple of the same values): a frozen dataclass set each of its fields
    through ``object.__setattr__``, about 1% of a 20-round lab negotiation."""

    kind: OutcomeKind
    at: datetime
    terms: Terms | None = None
    #: The party whose turn ended the negotiation, when one did.
    by: str | None = None

    @property
    def agreed(self) -> bool:
        return self.kind is OutcomeKind.AGREED


@dataclass(frozen=True, slots=True)
class Rules:
    """The rules a protocol imposes.

    ``max_turns`` counts every turn; when the turn that reaches it does not itself end the
    negotiation, the outcome is TURN_CAP. ``None`` means no cap (never 0: a cap of 0 would
    be ambiguous, and a public implementation once read it as "stop after every turn").
    """

    parties: tuple[str, str]
    strict_alternation: bool = True
    max_turns: int | None = None
    idle_ttl: timedelta | None = None

    def __post_init__(self) -> None:
        if self.max_turns is not None and self.max_turns < 1:
            raise ValueError("max_turns must be a positive number of turns, or None for no cap")
        if self.parties[0] == self.parties[1]:
            raise ValueError("a negotiation needs two distinct parties")


class RuleViolation(Exception):
    """A turn the rules do not allow. ``code`` is stable; protocols map it to status codes."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class Negotiation:
    """One negotiation's state: the rules, the turns taken, the standing offers, the outcome.

    Built as ``Negotiation(rules)``; ``turns``, ``outcome``, ``standing`` and ``earlier`` may be
    given to start from a state (:meth:`resume` does). Turns given to :meth:`apply` as plain
    tuples (:data:`TurnFields`) are held as they are and read back through :attr:`turns` as
    Turns, built on the first read: the lab applies millions of turns and reads none."""

    __slots__ = ("_built", "_turns", "earlier", "outcome", "rules", "standing")

    def __init__(self, rules: Rules, turns: list[Turn] | None = None, outcome: Outcome | None = None,
                 standing: dict[str, Terms] | None = None, earlier: int = 0) -> None:
        self.rules = rules
        #: The turns held, each a Turn or a plain tuple of a Turn's fields; read through ``turns``.
        self._turns: list[Turn | TurnFields] = [] if turns is None else turns  # type: ignore[assignment]
        #: How many of ``_turns``, from the first, ``turns`` has made Turns.
        self._built = 0
        self.outcome = outcome
        #: The latest OFFER terms of each party: what an ACCEPT from the other party agrees to.
        self.standing: dict[str, Terms] = {} if standing is None else standing
        #: Turns taken before the first one ``turns`` holds. A negotiation resumed from a snapshot
        #: (:meth:`resume`) holds only its last turn: the rules need no more, and a long
        #: negotiation then costs no more to continue than a short one.
        self.earlier = earlier

    @property
    def turns(self) -> list[Turn]:
        """The turns held, oldest first, every one a Turn (those applied as plain tuples are made
        Turns here, once). The list is the negotiation's record: read it, do not change it."""
        turns = self._turns
        count = len(turns)
        if self._built != count:
            # Only the turns applied since the last read, unless the list was shortened from
            # outside since then: then every turn is looked at again.
            start = self._built if self._built < count else 0
            for i in range(start, count):
                if type(turns[i]) is tuple:
                    turns[i] = _new(Turn, turns[i])
            self._built = count
        return turns  # type: ignore[return-value]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Negotiation) or other.__class__ is not self.__class__:
            return NotImplemented
        # A plain tuple of fields equals the Turn made from it, so held turns compare as they are.
        return ((self.rules, self._turns, self.outcome, self.standing, self.earlier)
                == (other.rules, other._turns, other.outcome, other.standing, other.earlier))

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return (f"Negotiation(rules={self.rules!r}, turns={self.turns!r}, outcome={self.outcome!r}, "
                f"standing={self.standing!r}, earlier={self.earlier!r})")

    @classmethod
    def replay(cls, rules: Rules, turns: Iterable[Turn]) -> "Negotiation":
        """Rebuild a negotiation from stored turns, re-checking every rule on the way."""
        negotiation = cls(rules)
        for turn in turns:
            negotiation.apply(turn)
        return negotiation

    @classmethod
    def resume(cls, rules: Rules, turn_count: int, last_turn: Turn | None, standing: dict[str, Terms]) -> "Negotiation":
        """An open negotiation as a snapshot left it: ``turn_count`` turns taken, the last of them
        ``last_turn``, ``standing`` the offers on the table. It takes the next turn exactly as
        the negotiation replayed from every turn would (same checks, same outcome)."""
        if (last_turn is None) != (turn_count == 0) or turn_count < 0:
            raise ValueError("a snapshot holds its last turn exactly when it has turns")
        turns = [] if last_turn is None else [last_turn]
        return cls(rules, turns, None, dict(standing), max(0, turn_count - 1))

    @property
    def turn_count(self) -> int:
        """Every turn taken, those before a snapshot included."""
        return self.earlier + len(self._turns)

    @property
    def closed(self) -> bool:
        return self.outcome is not None

    @property
    def last_turn(self) -> Turn | None:
        turns = self.turns
        return turns[-1] if turns else None

    def counterpart(self, party: str) -> str:
        a, b = self.rules.parties
        if party == a:
            return b
        if party == b:
            return a
        raise RuleViolation("unknown_party", f"{party!r} is not a party to this negotiation")

    def whose_turn(self) -> str | None:
        """The party expected to move next under strict alternation (None: either may)."""
        if self.closed:
            return None
        if not self.rules.strict_alternation:
            return None
        last = self.last_turn
        return self.rules.parties[0] if last is None else self.counterpart(last.party)

    def idle_deadline(self) -> datetime | None:
        last = self.last_turn
        if self.rules.idle_ttl is None or last is None:
            return None
        return last.at + self.rules.idle_ttl

    def expire_if_idle(self, now: datetime) -> Outcome | None:
        """Close the negotiation as EXPIRED when it has been idle past its TTL."""
        deadline = self.idle_deadline()
        if self.outcome is None and deadline is not None and now >= deadline:
            self.outcome = Outcome(OutcomeKind.EXPIRED, at=now)
        return self.outcome

    def check(self, turn: Turn | TurnFields) -> None:
        """Raise RuleViolation if ``turn`` may not be applied now; change nothing.

        A dry run: the turn is applied to a snapshot (the last turn, the standing offers, the
        count — all the rules read), so the rules are written once, in :meth:`apply`."""
        last = self._turns[-1:]
        Negotiation(self.rules, last, self.outcome, dict(self.standing), self.turn_count - len(last)).apply(turn)

    def apply(self, turn: Turn | TurnFields) -> Outcome | None:
        """Apply one turn; returns the outcome when the turn ends the negotiation. Nothing changes
        until every check has passed. The turn is a Turn or a plain tuple of its six fields
        (:data:`TurnFields`), held as given: a hot loop skips building a Turn, and readers of
        :attr:`turns` get one either way.

        The rules, in order, are here and only here (:meth:`check` is a dry run of this), with no
        property or helper calls: a turn's checks are part of every turn's cost."""
        if self.outcome is not None:
            raise RuleViolation("closed", "this negotiation is closed")
        rules = self.rules
        party, action, at, terms, _, _ = turn
        a, b = rules.parties
        if party == a:
            counterpart = b
        elif party == b:
            counterpart = a
        else:
            raise RuleViolation("unknown_party", f"{party!r} is not a party to this negotiation")
        turns = self._turns
        if turns:
            # By index: the last turn held may be a plain tuple (see TurnFields).
            last = turns[-1]
            if rules.strict_alternation and party == last[0]:
                raise RuleViolation("out_of_turn", f"it is {counterpart}'s turn, not {party}'s")
            if at < last[2]:
                raise RuleViolation("time_reversed", "a turn cannot be earlier than the turn before it")
        elif rules.strict_alternation and party != a:
            # The expected party: the first party to open, then the last mover's counterpart.
            raise RuleViolation("out_of_turn", f"it is {a}'s turn, not {party}'s")
        if action is _OFFER:
            if terms is None:
                raise RuleViolation("missing_terms", "an offer must carry terms")
            turns.append(turn)
            self.standing[party] = terms
        elif action is _ACCEPT:
            standing = self.standing.get(counterpart)
            if terms is not None and terms != standing:
                raise RuleViolation("accept_with_terms", "accept agrees to the standing offer; it cannot carry new terms")
            if standing is None:
                raise RuleViolation("nothing_to_accept", f"{counterpart} has no offer on the table")
            turns.append(turn)
            self.outcome = outcome = _new(Outcome, (_AGREED, at, standing, party))
            return outcome
        elif action is _REJECT:
            turns.append(turn)
            self.outcome = outcome = _new(Outcome, (_REJECTED, at, None, party))
            return outcome
        else:
            turns.append(turn)
        # An offer or a message: the turn cap may end it.
        max_turns = rules.max_turns
        if max_turns is not None and len(turns) + self.earlier >= max_turns:
            self.outcome = outcome = _new(Outcome, (_TURN_CAP, at, None, None))
            return outcome
        return None
