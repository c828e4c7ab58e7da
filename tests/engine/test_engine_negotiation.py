"""The negotiation engine as a pure state machine: rules, outcomes, caps, expiry, replay."""

from __future__ import annotations

import dataclasses

import copy
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haggler.engine import (
    Action,
    Negotiation,
    Outcome,
    OutcomeKind,
    Rules,
    RuleViolation,
    Terms,
    Turn,
)

A, B = "merchant", "shopper"
T0 = datetime(2024, 5, 1, 12, 0, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def terms(dollars: int, *extras: str) -> Terms:
    return Terms(dollars * 100, "USD", tuple(extras))


def offer(party: str, t: float, price: int, *extras: str, final: bool = False) -> Turn:
    return Turn(party, Action.OFFER, at(t), terms=terms(price, *extras), final=final)


def message(party: str, t: float, text: str = "hi") -> Turn:
    return Turn(party, Action.MESSAGE, at(t), text=text)


def accept(party: str, t: float, with_terms: Terms | None = None) -> Turn:
    return Turn(party, Action.ACCEPT, at(t), terms=with_terms)


def reject(party: str, t: float) -> Turn:
    return Turn(party, Action.REJECT, at(t))


def new(**kwargs) -> Negotiation:
    return Negotiation(Rules(parties=(A, B), **kwargs))


def snapshot(n: Negotiation):
    return (list(n.turns), n.outcome, dict(n.standing))


def violation_code(n: Negotiation, turn: Turn) -> str:
    with pytest.raises(RuleViolation) as info:
        n.apply(turn)
    return info.value.code


# -- rules ---------------------------------------------------------------------------------


class TestRules:
    def test_identical_parties_rejected(self):
        with pytest.raises(ValueError):
            Rules(parties=(A, A))

    @pytest.mark.parametrize("cap", [0, -1, -100])
    def test_non_positive_max_turns_is_a_value_error(self, cap):
        # 0 is never "unlimited" nor "stop after every turn": it is refused outright.
        with pytest.raises(ValueError):
            Rules(parties=(A, B), max_turns=cap)

    def test_max_turns_one_and_none_are_valid(self):
        assert Rules(parties=(A, B), max_turns=1).max_turns == 1
        assert Rules(parties=(A, B)).max_turns is None

    def test_rules_are_immutable(self):
        rules = Rules(parties=(A, B))
        with pytest.raises(dataclasses.FrozenInstanceError):
            rules.max_turns = 5  # type: ignore[misc]


# -- alternation -----------------------------------------------------------------------------


class TestAlternation:
    def test_first_party_moves_first(self):
        n = new()
        assert n.whose_turn() == A
        assert violation_code(n, offer(B, 0, 100)) == "out_of_turn"
        assert n.turns == []

    def test_strict_alternation(self):
        n = new()
        n.apply(offer(A, 0, 100))
        assert n.whose_turn() == B
        assert violation_code(n, message(A, 1)) == "out_of_turn"
        n.apply(message(B, 1))
        assert n.whose_turn() == A
        assert violation_code(n, offer(B, 2, 90)) == "out_of_turn"
        n.apply(message(A, 2))
        assert len(n.turns) == 3
        assert not n.closed

    def test_out_of_turn_message_names_whose_turn_it_is(self):
        n = new()
        n.apply(offer(A, 0, 100))
        with pytest.raises(RuleViolation) as info:
            n.apply(message(A, 1))
        assert info.value.code == "out_of_turn"
        assert B in info.value.message

    def test_without_strict_alternation_a_party_may_move_twice(self):
        n = new(strict_alternation=False)
        assert n.whose_turn() is None
        n.apply(offer(B, 0, 90))
        n.apply(message(B, 1))
        n.apply(offer(A, 2, 100))
        n.apply(offer(A, 3, 99))
        assert [t.party for t in n.turns] == [B, B, A, A]

    def test_unknown_party(self):
        n = new()
        assert violation_code(n, message("mallory", 0)) == "unknown_party"
        with pytest.raises(RuleViolation) as info:
            n.counterpart("mallory")
        assert info.value.code == "unknown_party"

    def test_counterpart(self):
        n = new()
        assert n.counterpart(A) == B
        assert n.counterpart(B) == A


# -- offers and acceptance -------------------------------------------------------------------


class TestOffersAndAcceptance:
    def test_offer_needs_terms(self):
        n = new()
        assert violation_code(n, Turn(A, Action.OFFER, at(0))) == "missing_terms"
        assert n.turns == []

    def test_offer_sets_standing_per_party(self):
        n = new()
        n.apply(offer(A, 0, 100, "case"))
        n.apply(offer(B, 1, 80))
        assert n.standing == {A: terms(100, "case"), B: terms(80)}
        n.apply(offer(A, 2, 95, "case"))
        assert n.standing[A] == terms(95, "case")
        assert n.standing[B] == terms(80)

    def test_messages_do_not_change_standing(self):
        n = new()
        n.apply(offer(A, 0, 100))
        n.apply(message(B, 1))
        n.apply(message(A, 2))
        assert n.standing == {A: terms(100)}

    def test_accept_needs_a_counterpart_offer(self):
        n = new()
        assert violation_code(n, accept(A, 0)) == "nothing_to_accept"
        n.apply(message(A, 0))
        assert violation_code(n, accept(B, 1)) == "nothing_to_accept"
        assert not n.closed

    def test_accept_needs_the_counterparts_offer_not_ones_own(self):
        n = new()
        n.apply(message(A, 0))
        n.apply(offer(B, 1, 80))  # B has an offer; A has none
        n.apply(message(A, 2))
        # B cannot accept its own offer
        assert violation_code(n, accept(B, 3)) == "nothing_to_accept"

    def test_accept_cannot_carry_different_terms(self):
        n = new()
        n.apply(offer(A, 0, 100, "case"))
        assert violation_code(n, accept(B, 1, terms(90))) == "accept_with_terms"
        assert violation_code(n, accept(B, 1, terms(100))) == "accept_with_terms"  # extras differ
        assert violation_code(n, accept(B, 1, terms(100, "case", "cable"))) == "accept_with_terms"
        assert not n.closed
        assert len(n.turns) == 1

    def test_accept_may_restate_the_identical_terms(self):
        n = new()
        n.apply(offer(A, 0, 100, "case"))
        outcome = n.apply(accept(B, 1, terms(100, "case")))
        assert outcome is not None and outcome.kind is OutcomeKind.AGREED
        assert outcome.terms == terms(100, "case")

    def test_accept_outcome_is_counterparts_latest_offer(self):
        n = new()
        n.apply(offer(A, 0, 100))
        n.apply(offer(B, 1, 70))
        n.apply(offer(A, 2, 95, "case"))
        n.apply(offer(B, 3, 80))
        n.apply(offer(A, 4, 90, "case", "cable"))
        n.apply(message(B, 5))
        n.apply(message(A, 6))
        outcome = n.apply(accept(B, 7))
        assert outcome == Outcome(OutcomeKind.AGREED, at=at(7), terms=terms(90, "case", "cable"), by=B)
        assert n.outcome is outcome
        assert n.closed
        assert outcome.agreed

    def test_accept_by_first_party_agrees_to_second_partys_offer(self):
        n = new()
        n.apply(offer(A, 0, 100))
        n.apply(offer(B, 1, 85))
        outcome = n.apply(accept(A, 2))
        assert outcome is not None
        assert outcome.kind is OutcomeKind.AGREED
        assert outcome.terms == terms(85)
        assert outcome.by == A

    def test_reject_outcome(self):
        n = new()
        n.apply(offer(A, 0, 100))
        outcome = n.apply(reject(B, 1))
        assert outcome == Outcome(OutcomeKind.REJECTED, at=at(1), terms=None, by=B)
        assert not outcome.agreed
        assert n.closed

    def test_reject_needs_no_standing_offer(self):
        n = new()
        outcome = n.apply(reject(A, 0))
        assert outcome is not None and outcome.kind is OutcomeKind.REJECTED

    def test_non_closing_turns_return_none(self):
        n = new()
        assert n.apply(offer(A, 0, 100)) is None
        assert n.apply(message(B, 1)) is None
        assert n.outcome is None


# -- closed negotiations -----------------------------------------------------------------------


class TestClosed:
    @pytest.mark.parametrize("closing", ["accept", "reject", "cap", "expired"])
    def test_closed_negotiation_refuses_every_turn(self, closing):
        n = new(max_turns=2 if closing == "cap" else None, idle_ttl=timedelta(minutes=5))
        n.apply(offer(A, 0, 100))
        if closing == "accept":
            n.apply(accept(B, 1))
        elif closing == "reject":
            n.apply(reject(B, 1))
        elif closing == "cap":
            n.apply(message(B, 1))
        else:
            n.expire_if_idle(at(1000))
        assert n.closed
        assert n.whose_turn() is None
        before = snapshot(n)
        for turn in (offer(A, 2000, 90), offer(B, 2000, 90), message(A, 2000), message(B, 2000),
                     accept(A, 2000), accept(B, 2000), reject(A, 2000), reject(B, 2000)):
            with pytest.raises(RuleViolation) as info:
                n.apply(turn)
            assert info.value.code == "closed"
        assert snapshot(n) == before

    def test_closed_wins_over_other_violations(self):
        n = new()
        n.apply(offer(A, 0, 100))
        n.apply(reject(B, 1))
        # wrong party, reversed time, missing terms: still reported as "closed"
        assert violation_code(n, Turn(B, Action.OFFER, at(-5))) == "closed"


# -- turn cap ------------------------------------------------------------------------------------


class TestTurnCap:
    @pytest.mark.parametrize("cap", [1, 2, 3, 7, 20])
    def test_turn_cap_exactly_at_the_cap_and_not_before(self, cap):
        n = new(max_turns=cap)
        parties = [A, B]
        for i in range(cap):
            party = parties[i % 2]
            turn = offer(party, i, 100 - i) if i % 3 == 0 else message(party, i)
            outcome = n.apply(turn)
            if i < cap - 1:
                assert outcome is None, f"closed early at turn {i + 1} of {cap}"
                assert not n.closed
            else:
                assert outcome is not None
                assert outcome.kind is OutcomeKind.TURN_CAP
                assert outcome.at == at(i)
                assert outcome.terms is None
                assert outcome.by is None
        assert len(n.turns) == cap
        assert violation_code(n, message(parties[cap % 2], cap)) == "closed"

    def test_accept_on_the_cap_turn_is_agreed(self):
        n = new(max_turns=4)
        n.apply(offer(A, 0, 100))
        n.apply(offer(B, 1, 80))
        n.apply(offer(A, 2, 90))
        outcome = n.apply(accept(B, 3))
        assert outcome is not None
        assert outcome.kind is OutcomeKind.AGREED
        assert outcome.terms == terms(90)
        assert outcome.by == B

    def test_reject_on_the_cap_turn_is_rejected(self):
        n = new(max_turns=2)
        n.apply(offer(A, 0, 100))
        outcome = n.apply(reject(B, 1))
        assert outcome is not None and outcome.kind is OutcomeKind.REJECTED

    def test_offer_on_the_cap_turn_is_turn_cap(self):
        n = new(max_turns=2)
        n.apply(offer(A, 0, 100))
        outcome = n.apply(offer(B, 1, 90))
        assert outcome is not None and outcome.kind is OutcomeKind.TURN_CAP
        assert n.standing[B] == terms(90)

    def test_no_cap_runs_500_turns(self):
        n = new(max_turns=None)
        for i in range(500):
            party = A if i % 2 == 0 else B
            turn = offer(party, i, 1000 - i) if i % 5 == 0 else message(party, i)
            assert n.apply(turn) is None
        assert not n.closed
        assert len(n.turns) == 500
        # and it can still close normally
        n.apply(offer(A, 500, 10))
        assert n.apply(accept(B, 501)).kind is OutcomeKind.AGREED


# -- idle expiry ---------------------------------------------------------------------------------


class TestIdleExpiry:
    def test_deadline_is_last_turn_plus_ttl(self):
        n = new(idle_ttl=timedelta(minutes=30))
        assert n.idle_deadline() is None
        n.apply(offer(A, 0, 100))
        assert n.idle_deadline() == at(0) + timedelta(minutes=30)
        n.apply(message(B, 600))
        assert n.idle_deadline() == at(600) + timedelta(minutes=30)

    def test_just_before_deadline_open_at_deadline_expired(self):
        ttl = timedelta(minutes=30)
        n = new(idle_ttl=ttl)
        n.apply(offer(A, 0, 100))
        n.apply(message(B, 10))
        deadline = at(10) + ttl
        assert n.expire_if_idle(deadline - timedelta(microseconds=1)) is None
        assert not n.closed
        assert n.expire_if_idle(at(10)) is None
        outcome = n.expire_if_idle(deadline)
        assert outcome == Outcome(OutcomeKind.EXPIRED, at=deadline)
        assert n.closed
        assert violation_code(n, message(A, 20)) == "closed"

    def test_well_past_deadline_expires_at_the_time_given(self):
        n = new(idle_ttl=timedelta(seconds=5))
        n.apply(offer(A, 0, 100))
        later = at(3600)
        outcome = n.expire_if_idle(later)
        assert outcome is not None and outcome.kind is OutcomeKind.EXPIRED
        assert outcome.at == later

    def test_no_ttl_never_expires(self):
        n = new()
        n.apply(offer(A, 0, 100))
        assert n.idle_deadline() is None
        assert n.expire_if_idle(at(10**9)) is None
        assert not n.closed

    def test_no_turns_never_expires(self):
        n = new(idle_ttl=timedelta(seconds=1))
        assert n.expire_if_idle(at(10**6)) is None
        assert not n.closed

    def test_expiry_does_not_override_an_existing_outcome(self):
        n = new(idle_ttl=timedelta(seconds=1))
        n.apply(offer(A, 0, 100))
        agreed = n.apply(accept(B, 0.5))
        assert n.expire_if_idle(at(100)) is agreed
        assert n.outcome.kind is OutcomeKind.AGREED

    def test_expire_is_idempotent(self):
        n = new(idle_ttl=timedelta(seconds=1))
        n.apply(offer(A, 0, 100))
        first = n.expire_if_idle(at(1))
        second = n.expire_if_idle(at(50))
        assert first is second
        assert second.at == at(1)

    def test_activity_pushes_the_deadline(self):
        ttl = timedelta(seconds=60)
        n = new(idle_ttl=ttl)
        for i in range(10):
            n.apply(message(A if i % 2 == 0 else B, 50 * i))
            assert n.expire_if_idle(at(50 * i) + ttl - timedelta(microseconds=1)) is None
        assert not n.closed


# -- time ------------------------------------------------------------------------------------------


class TestTime:
    def test_time_reversal_rejected(self):
        n = new()
        n.apply(offer(A, 10, 100))
        assert violation_code(n, message(B, 9.999)) == "time_reversed"
        assert len(n.turns) == 1

    def test_equal_timestamps_allowed(self):
        n = new()
        n.apply(offer(A, 10, 100))
        n.apply(message(B, 10))
        n.apply(message(A, 10))
        assert len(n.turns) == 3


# -- check() ---------------------------------------------------------------------------------------


class TestCheck:
    def test_check_does_not_mutate_on_valid_turns(self):
        n = new(max_turns=3, idle_ttl=timedelta(minutes=1))
        n.apply(offer(A, 0, 100))
        before = copy.deepcopy(snapshot(n))
        for turn in (accept(B, 1), reject(B, 1), offer(B, 1, 50), message(B, 1)):
            n.check(turn)  # valid: no exception
            assert snapshot(n) == before
        assert not n.closed

    def test_check_does_not_mutate_on_invalid_turns(self):
        n = new(max_turns=3)
        n.apply(offer(A, 10, 100))
        before = copy.deepcopy(snapshot(n))
        bad = [
            (message(A, 11), "out_of_turn"),
            (message(B, 9), "time_reversed"),
            (Turn(B, Action.OFFER, at(11)), "missing_terms"),
            (accept(B, 11, terms(1)), "accept_with_terms"),
            (message("mallory", 11), "unknown_party"),
        ]
        for turn, code in bad:
            with pytest.raises(RuleViolation) as info:
                n.check(turn)
            assert info.value.code == code
            assert snapshot(n) == before

    def test_check_on_cap_turn_does_not_close(self):
        n = new(max_turns=2)
        n.apply(offer(A, 0, 100))
        n.check(message(B, 1))
        assert not n.closed
        assert len(n.turns) == 1

    def test_failed_apply_leaves_state_untouched(self):
        n = new()
        n.apply(offer(A, 0, 100))
        before = copy.deepcopy(snapshot(n))
        with pytest.raises(RuleViolation):
            n.apply(accept(B, 1, terms(5)))
        assert snapshot(n) == before


_turns = st.builds(
    Turn,
    party=st.sampled_from([A, B, "mallory"]),
    action=st.sampled_from(list(Action)),
    at=st.integers(0, 5).map(at),
    terms=st.one_of(st.none(), st.builds(lambda price, extras: terms(price, *extras), st.integers(1, 3),
                                         st.sampled_from([(), ("case",)]))),
    final=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(turns=st.lists(_turns, max_size=12), strict=st.booleans(), cap=st.sampled_from([None, 1, 3, 6]))
def test_apply_checks_exactly_what_check_checks(turns, strict, cap):
    # apply and check refuse the same turns with the same code, in any state, and a refused turn
    # changes nothing.
    n = Negotiation(Rules(parties=(A, B), strict_alternation=strict, max_turns=cap))
    for turn in turns:
        try:
            n.check(turn)
            expected = None
        except RuleViolation as exc:
            expected = exc.code
        before = copy.deepcopy(snapshot(n))
        try:
            n.apply(turn)
            got = None
        except RuleViolation as exc:
            got = exc.code
            assert snapshot(n) == before
        assert got == expected


@settings(max_examples=300, deadline=None)
@given(turns=st.lists(_turns, max_size=12), strict=st.booleans(), cap=st.sampled_from([None, 1, 3, 6]))
def test_a_turn_applied_as_its_fields_is_the_same_turn(turns, strict, cap):
    # apply takes a turn as a plain tuple of its fields through the same rules: the same refusals
    # (check too), the same outcome and standing offers, and turns reads back real, equal Turns.
    rules = Rules(parties=(A, B), strict_alternation=strict, max_turns=cap)
    by_turn, by_fields = Negotiation(rules), Negotiation(rules)
    for turn in turns:
        fields = tuple(turn)
        results = []
        for n, given_as in ((by_turn, turn), (by_fields, fields)):
            try:
                n.check(given_as)
                checked = None
            except RuleViolation as exc:
                checked = exc.code
            try:
                results.append((checked, n.apply(given_as), None))
            except RuleViolation as exc:
                results.append((checked, None, exc.code))
        assert results[0] == results[1]
        assert results[0][0] == results[0][2]
        assert by_fields.turns == by_turn.turns
        assert all(type(t) is Turn for t in by_fields.turns)
        assert (by_fields.outcome, by_fields.standing, by_fields.turn_count) == (
            by_turn.outcome, by_turn.standing, by_turn.turn_count)
        assert by_fields == by_turn


def test_turns_applied_as_fields_read_back_as_turns():
    n = new()
    n.apply((A, Action.OFFER, at(0), terms(100), None, False))
    first = n.turns[0]
    assert first == offer(A, 0, 100) and type(first) is Turn and first.party == A
    n.apply(offer(B, 1, 80))
    n.apply((A, Action.ACCEPT, at(2), None, None, False))
    assert [type(t) for t in n.turns] == [Turn, Turn, Turn]
    assert n.turns[0] is first  # made once, then kept
    assert n.last_turn == accept(A, 2)
    assert n.outcome == Outcome(OutcomeKind.AGREED, at(2), terms(80), A)
    assert "Turn(party='merchant'" in repr(n)


# -- replay ------------------------------------------------------------------------------------------


def _sample_turns() -> list[Turn]:
    return [
        offer(A, 0, 100),
        message(B, 1, "hello"),
        offer(A, 2, 100, "case"),
        offer(B, 3, 70, "case"),
        offer(A, 4, 92, "case", final=True),
        offer(B, 5, 90, "case"),
        message(A, 6, "hmm"),
        accept(B, 7),
    ]


class TestReplay:
    @pytest.mark.parametrize("prefix", range(0, 9))
    def test_replay_rebuilds_identical_state(self, prefix):
        rules = Rules(parties=(A, B), max_turns=50, idle_ttl=timedelta(hours=1))
        live = Negotiation(rules)
        turns = _sample_turns()[:prefix]
        for turn in turns:
            live.apply(turn)
        rebuilt = Negotiation.replay(rules, list(live.turns))
        assert rebuilt == live
        assert rebuilt.turns == live.turns
        assert rebuilt.outcome == live.outcome
        assert rebuilt.standing == live.standing
        assert rebuilt.whose_turn() == live.whose_turn()
        assert rebuilt.idle_deadline() == live.idle_deadline()
        assert rebuilt.turns is not live.turns

    def test_replay_of_turn_capped_negotiation(self):
        rules = Rules(parties=(A, B), max_turns=3)
        turns = [offer(A, 0, 100), offer(B, 1, 80), message(A, 2)]
        rebuilt = Negotiation.replay(rules, iter(turns))
        assert rebuilt.outcome is not None and rebuilt.outcome.kind is OutcomeKind.TURN_CAP

    def test_replay_rechecks_rules(self):
        rules = Rules(parties=(A, B))
        with pytest.raises(RuleViolation) as info:
            Negotiation.replay(rules, [offer(A, 0, 100), offer(A, 1, 90)])
        assert info.value.code == "out_of_turn"
        with pytest.raises(RuleViolation) as info:
            Negotiation.replay(rules, [offer(A, 0, 100), reject(B, 1), message(A, 2)])
        assert info.value.code == "closed"
        with pytest.raises(RuleViolation) as info:
            Negotiation.replay(Rules(parties=(A, B), max_turns=2),
                               [offer(A, 0, 100), message(B, 1), message(A, 2)])
        assert info.value.code == "closed"

    def test_replay_then_continue_matches_live(self):
        rules = Rules(parties=(A, B))
        turns = _sample_turns()
        live = Negotiation(rules)
        for turn in turns:
            live.apply(turn)
        half = Negotiation.replay(rules, turns[:4])
        for turn in turns[4:]:
            half.apply(turn)
        assert half == live
        assert half.outcome.terms == terms(92, "case")  # B accepts A's latest offer


# -- resume from a snapshot ----------------------------------------------------------------------


def _resumed(rules: Rules, turns: list[Turn]) -> Negotiation:
    """The negotiation as a snapshot of ``turns`` holds it: the count, the last turn, the offers."""
    played = Negotiation.replay(rules, turns)
    return Negotiation.resume(rules, len(turns), turns[-1] if turns else None, played.standing)


class TestResume:
    @pytest.mark.parametrize("cap", [None, 5, 7, 8])
    @pytest.mark.parametrize("prefix", range(0, 8))
    def test_resumed_negotiation_continues_as_the_replayed_one(self, prefix, cap):
        """Every later turn meets the same checks and ends the same way, the turn cap included,
        though only the last turn is held."""
        rules = Rules(parties=(A, B), max_turns=cap, idle_ttl=timedelta(hours=1))
        turns = _sample_turns()
        whole = Negotiation(rules)
        resumed = None
        for index, turn in enumerate(turns):
            if index == prefix:
                if whole.closed:
                    return
                resumed = _resumed(rules, turns[:prefix])
                assert resumed.turn_count == whole.turn_count == prefix
                assert resumed.whose_turn() == whole.whose_turn()
                assert resumed.idle_deadline() == whole.idle_deadline()
            if whole.closed:
                break
            whole.apply(turn)
            if resumed is not None:
                resumed.apply(turn)
                assert (resumed.outcome, resumed.standing, resumed.turn_count) == \
                    (whole.outcome, whole.standing, whole.turn_count)

    def test_resumed_negotiation_refuses_what_the_replayed_one_refuses(self):
        rules = Rules(parties=(A, B), max_turns=4)
        turns = [offer(A, 0, 100), offer(B, 5, 80), message(A, 6)]
        resumed = _resumed(rules, turns)
        assert violation_code(resumed, message(A, 7)) == "out_of_turn"
        assert violation_code(resumed, message(B, 5)) == "time_reversed"
        assert resumed.apply(message(B, 8)).kind is OutcomeKind.TURN_CAP  # the fourth turn

    def test_resume_refuses_an_inconsistent_snapshot(self):
        rules = Rules(parties=(A, B))
        with pytest.raises(ValueError):
            Negotiation.resume(rules, 3, None, {})
        with pytest.raises(ValueError):
            Negotiation.resume(rules, 0, offer(A, 0, 100), {})
