"""Deadlines of the match negotiation, on SQLite and PostgreSQL, with an injected clock (nothing
sleeps): the claim timeout, the parked-turn timeout, the personal-vs-personal safety valve, and
the turn caps they must keep (spec 002, "Turn Delivery (Polling)", "Parked-turn lifecycle",
"Turn cap", "Outcome Determination").

The stores here run no background sweep: a passed deadline is applied when a negotiation is read
(GET /api/negotiations/{id}), when its user's agent polls (pickup), or by Matching.sweep() —
``channel`` picks which one.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from haggler.engine import Rules
from haggler.protocols.matching.routes import Matching
from haggler.protocols.matching.settings import MatchingSettings, TurnCaps
from tests.support.matching import TOKEN, Caller, Operator, iso, pair, summary, turn
from tests.support.servers import FakeClock


T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
HOUR, SECOND = timedelta(hours=1), timedelta(seconds=1)
CHANNELS = ["read", "pickup", "sweep"]


@pytest.fixture
def make_api(make_store, db_url: str) -> Callable[..., Operator]:
    """A store on ``db_url`` whose matching settings are the operator token plus ``settings``."""
    def make(**settings: Any) -> Operator:
        matching = MatchingSettings(operator_token=TOKEN, **settings)
        return Operator(make_store(db_url=db_url, clock=FakeClock(T0), matching=matching))
    return make


@pytest.fixture
def api(make_api) -> Operator:
    return make_api()


def _mixed(api: Operator, pair_id: str, agents: int = 1) -> tuple[str, str, list[Caller], str]:
    """A negotiation between a user with personal agents (the source, whose turn 1 is parked at
    T0) and a user without (the system negotiates for the candidate)."""
    the_pair = pair(pair_id)
    user, counterpart = api.user_id(the_pair["a"]), api.user_id(the_pair["b"])
    personal = [api.agent(user, name=f"agent-{k}") for k in range(agents)]
    return user, counterpart, personal, api.open_negotiation(user, counterpart, the_pair["seed"])


def _both_personal(api: Operator, the_pair: dict[str, Any]) -> tuple[Caller, Caller, str]:
    source, candidate = api.user_id(the_pair["a"]), api.user_id(the_pair["b"])
    return api.agent(source), api.agent(candidate), api.open_negotiation(source, candidate, the_pair["seed"])


def _unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    assert after == before, "a refused request changed the negotiation"


# -- the claim timeout ----------------------------------------------------------------------------

@pytest.mark.parametrize("channel", CHANNELS)
def test_unanswered_claim_returns_to_the_queue_with_its_original_park_deadline(api: Operator, channel: str) -> None:
    """Parked-turn lifecycle, step 5 (and Turn Delivery (Polling)): a pickup not answered within
    the claim timeout (6 h) expires and the turn returns to waiting_for_agent, keeping the
    deadline of its first parking. Another pickup gets it — here the user's second agent — and
    the first agent's late respond is 409 and changes nothing."""
    user, _, (first, second), negotiation_id = _mixed(api, "saas-builder-and-sales-leader", agents=2)
    assert api.negotiation(negotiation_id)["parkDeadline"] == iso(T0 + 24 * HOUR)

    api.at(T0 + HOUR)
    claim = first.claim()
    assert (claim["negotiationId"], claim["claimedBy"], claim["turnNumber"]) == (negotiation_id, first.id, 1)
    assert (claim["deadline"], claim["parkDeadline"]) == (iso(T0 + 7 * HOUR), iso(T0 + 24 * HOUR))

    api.at(T0 + 7 * HOUR - SECOND)  # one second early: every channel leaves the claim alone
    assert second.pickup().status_code == 204
    assert api.sweep() == 0
    view = api.negotiation(negotiation_id)
    assert (view["state"], view["claimDeadline"]) == ("claimed", iso(T0 + 7 * HOUR))

    api.at(T0 + 7 * HOUR)
    if channel == "read":
        view = api.negotiation(negotiation_id)
    elif channel == "sweep":
        assert api.sweep() == 1
        view = api.negotiation(negotiation_id)
    if channel != "pickup":  # (the pickup below applies the expiry itself, then claims)
        assert (view["state"], view["waitingFor"], view["claimDeadline"]) == ("waiting_for_agent", user, None)
        assert (view["parkDeadline"], view["turns"]) == (iso(T0 + 24 * HOUR), [])

    claim = second.claim()
    assert (claim["negotiationId"], claim["claimedBy"], claim["turnNumber"]) == (negotiation_id, second.id, 1)
    assert (claim["deadline"], claim["parkDeadline"]) == (iso(T0 + 13 * HOUR), iso(T0 + 24 * HOUR))

    before = api.negotiation(negotiation_id)
    late = first.respond(negotiation_id, turn("propose", "too late"))
    assert late.status_code == 409, late.text
    _unchanged(before, api.negotiation(negotiation_id))

    view = second.take(negotiation_id, turn("propose", "My user illustrates picture books."))
    assert summary(view)[0] == (1, "propose", "personal")


def test_late_respond_is_409_and_the_turn_keeps_its_first_park_deadline(api: Operator) -> None:
    """Parked-turn lifecycle, step 5: the late respond of an expired claim is 409 and stores
    nothing; the turn waits for another pickup, still due at 24 h from its first parking. A claim
    made before that deadline holds the turn past it; once that claim expires too, the parked
    timeout has long passed and the system negotiator takes the turn."""
    user, _, (agent,), negotiation_id = _mixed(api, "saas-builder-and-sales-leader")
    api.at(T0 + HOUR)
    agent.claim()
    api.at(T0 + 8 * HOUR)
    late = agent.respond(negotiation_id, turn("propose", "sorry, I was away"))
    assert late.status_code == 409, late.text
    view = api.negotiation(negotiation_id)
    assert (view["state"], view["waitingFor"], view["turns"]) == ("waiting_for_agent", user, [])
    assert (view["parkDeadline"], view["claimDeadline"]) == (iso(T0 + 24 * HOUR), None)

    api.at(T0 + 20 * HOUR)
    claim = agent.claim()  # picked up again: a fresh claim, the same park deadline
    assert (claim["deadline"], claim["parkDeadline"]) == (iso(T0 + 26 * HOUR), iso(T0 + 24 * HOUR))
    api.at(T0 + 24 * HOUR)
    view = api.negotiation(negotiation_id)
    assert (view["state"], view["turns"]) == ("claimed", [])

    api.at(T0 + 26 * HOUR)
    view = api.negotiation(negotiation_id)
    assert summary(view) == [(1, "propose", "system"), (2, "counter", "system")]
    assert (view["state"], view["waitingFor"], view["parkDeadline"]) == \
        ("waiting_for_agent", user, iso(T0 + 50 * HOUR))


# -- the parked-turn timeout ----------------------------------------------------------------------

@pytest.mark.parametrize("channel", CHANNELS)
def test_unclaimed_turn_is_taken_by_the_system_negotiator_after_the_parked_timeout(api: Operator, channel: str) -> None:
    """Parked-turn lifecycle, steps 1 and 5: no claim within 24 h of first parking → the
    in-process system negotiator takes the turn (its message is takenBy system), the negotiation
    moves on, and the user's next turn is parked with a fresh 24 h deadline."""
    user, counterpart, (agent,), negotiation_id = _mixed(api, "saas-builder-and-sales-leader")
    api.at(T0 + 24 * HOUR - SECOND)
    view = api.negotiation(negotiation_id)
    assert (view["state"], view["turns"]) == ("waiting_for_agent", [])

    api.at(T0 + 24 * HOUR)
    if channel == "pickup":  # the user's own agent polls: the system's turns first, then a claim on the next
        claim = agent.claim()
        assert (claim["turnNumber"], claim["counterpartyAction"], len(claim["history"])) == (3, "counter", 2)
        assert claim["parkDeadline"] == iso(T0 + 48 * HOUR)
    elif channel == "sweep":
        assert api.sweep() == 1
    view = api.negotiation(negotiation_id)
    assert summary(view) == [(1, "propose", "system"), (2, "counter", "system")]
    assert [t["speaker"] for t in view["turns"]] == [user, counterpart]
    assert [m["metadata"]["takenBy"] for m in view["task"]["history"]] == ["system", "system"]
    assert view["state"] == ("claimed" if channel == "pickup" else "waiting_for_agent")
    assert (view["waitingFor"], view["parkDeadline"], view["outcome"]) == (user, iso(T0 + 48 * HOUR), None)
    assert api.opportunity(view["opportunityId"])["status"] == "negotiating"


# -- the personal-vs-personal timeout -------------------------------------------------------------

@pytest.mark.parametrize("channel", CHANNELS)
def test_personal_vs_personal_without_resolution_times_out_stalled(api: Operator, channel: str) -> None:
    """Turn cap and Outcome Determination: personal vs personal has no cap; 24 h after it began
    without accept or reject, the opportunity is stalled and the outcome's reason is "timeout",
    with the turns actually taken counted. A claim still open then is answered with 409."""
    the_pair = pair("fundraising-mentor-and-first-time-founder")
    first, second, negotiation_id = _both_personal(api, the_pair)
    view = api.negotiation(negotiation_id)
    assert (view["maxTurns"], view["expiresAt"]) == (None, iso(T0 + 24 * HOUR))
    for hours, agent, action in ((1, first, "propose"), (2, second, "counter"), (3, first, "question")):
        api.at(T0 + hours * HOUR)
        agent.take(negotiation_id, turn(action, f"{action} from {agent.id}"))
    api.at(T0 + 23 * HOUR)
    second.claim()  # turn 4, claimed and not answered in time

    api.at(T0 + 24 * HOUR - SECOND)
    view = api.negotiation(negotiation_id)
    assert (view["state"], view["outcome"]) == ("claimed", None)

    api.at(T0 + 24 * HOUR)
    if channel == "pickup":
        assert first.pickup().status_code == 204  # applied the timeout: nothing left to pick up
    elif channel == "sweep":
        assert api.sweep() == 1
    view = api.negotiation(negotiation_id)
    assert (view["state"], view["waitingFor"], view["claimDeadline"], view["parkDeadline"]) == \
        ("completed", None, None, None)
    outcome = view["outcome"]
    assert (outcome["hasOpportunity"], outcome["agreedRoles"], outcome["reason"], outcome["turnCount"]) == \
        (False, [], "timeout", 3)
    assert api.opportunity(view["opportunityId"])["status"] == "stalled"

    late = second.respond(negotiation_id, turn("accept", "accepting at last"))
    assert late.status_code == 409, late.text
    _unchanged(view, api.negotiation(negotiation_id))


# -- configured durations -------------------------------------------------------------------------

def test_short_configured_durations_are_honoured(make_api) -> None:
    """Parked-turn lifecycle and Turn cap: the claim timeout, the parked timeout and the
    personal-vs-personal timeout are MatchingSettings' values (here 2 min, 15 min and 1 h),
    each applied at exactly its deadline and not a second before."""
    api = make_api(claim_timeout_seconds=120, parked_timeout_seconds=900, negotiation_timeout_seconds=3600)
    minute = timedelta(minutes=1)
    first, second, negotiation_id = _both_personal(api, pair("fundraising-mentor-and-first-time-founder"))
    view = api.negotiation(negotiation_id)
    assert (view["expiresAt"], view["parkDeadline"]) == (iso(T0 + HOUR), iso(T0 + 15 * minute))

    api.at(T0 + minute)
    assert first.claim()["deadline"] == iso(T0 + 3 * minute)
    api.at(T0 + 3 * minute - SECOND)
    assert api.negotiation(negotiation_id)["state"] == "claimed"
    api.at(T0 + 3 * minute)
    view = api.negotiation(negotiation_id)
    assert (view["state"], view["parkDeadline"]) == ("waiting_for_agent", iso(T0 + 15 * minute))

    api.at(T0 + 15 * minute - SECOND)
    assert api.negotiation(negotiation_id)["turns"] == []
    api.at(T0 + 15 * minute)
    view = api.negotiation(negotiation_id)
    assert summary(view) == [(1, "propose", "system")]
    assert (view["waitingFor"], view["parkDeadline"]) == (second.user_id, iso(T0 + 30 * minute))

    api.at(T0 + 16 * minute)
    assert second.claim()["deadline"] == iso(T0 + 18 * minute)
    api.at(T0 + 17 * minute)
    view = second.take(negotiation_id, turn("counter", "which founders?"))
    assert view["parkDeadline"] == iso(T0 + 32 * minute)
    api.at(T0 + 31 * minute)
    first.take(negotiation_id, turn("question", "what stage is the company at?"))
    api.at(T0 + 45 * minute)
    view = second.take(negotiation_id, turn("question", "have you raised before?"))
    assert view["parkDeadline"] == iso(T0 + 60 * minute)  # the same instant as the timeout

    api.at(T0 + HOUR - SECOND)
    assert api.negotiation(negotiation_id)["outcome"] is None
    api.at(T0 + HOUR)
    view = api.negotiation(negotiation_id)
    assert (view["outcome"]["reason"], view["outcome"]["turnCount"]) == ("timeout", 4)


def test_long_configured_durations_are_honoured_no_hard_coded_6_or_24_hours(make_api) -> None:
    """Parked-turn lifecycle and Turn cap: with a 10 h claim timeout, a 48 h parked timeout and a
    72 h negotiation timeout, nothing happens at 6 h or 24 h (the public implementation
    hard-coded values in its timeout path); each deadline falls where the settings put it."""
    api = make_api(claim_timeout_seconds=10 * 3600, parked_timeout_seconds=48 * 3600,
                   negotiation_timeout_seconds=72 * 3600)
    first, second, negotiation_id = _both_personal(api, pair("saas-builder-and-sales-leader"))
    view = api.negotiation(negotiation_id)
    assert (view["expiresAt"], view["parkDeadline"]) == (iso(T0 + 72 * HOUR), iso(T0 + 48 * HOUR))

    api.at(T0 + HOUR)
    assert first.claim()["deadline"] == iso(T0 + 11 * HOUR)
    api.at(T0 + 7 * HOUR)  # 6 h after the claim: still held
    assert api.negotiation(negotiation_id)["state"] == "claimed"
    api.at(T0 + 8 * HOUR)
    view = first.take(negotiation_id, turn("propose", "my user would like to talk"))
    assert (view["waitingFor"], view["parkDeadline"]) == (second.user_id, iso(T0 + 56 * HOUR))

    for at in (T0 + 32 * HOUR, T0 + 48 * HOUR, T0 + 56 * HOUR - SECOND):  # 24 h parked; 24 h and 48 h old
        api.at(at)
        view = api.negotiation(negotiation_id)
        assert (view["state"], summary(view)) == ("waiting_for_agent", [(1, "propose", "personal")]), at
    api.at(T0 + 56 * HOUR)
    view = api.negotiation(negotiation_id)
    assert summary(view) == [(1, "propose", "personal"), (2, "counter", "system")]
    assert (view["waitingFor"], view["parkDeadline"]) == (first.user_id, iso(T0 + 104 * HOUR))

    api.at(T0 + 72 * HOUR - SECOND)
    assert api.negotiation(negotiation_id)["outcome"] is None
    api.at(T0 + 72 * HOUR)
    view = api.negotiation(negotiation_id)
    assert (view["state"], view["outcome"]["reason"], view["outcome"]["turnCount"]) == ("completed", "timeout", 2)


# -- turn caps through the timeout path -----------------------------------------------------------

def test_personal_vs_personal_keeps_going_past_six_turns_through_the_timeout_path(make_api) -> None:
    """Turn cap (no cap for personal vs personal) and Parked-turn lifecycle, step 5: the system
    negotiator takes turn 7 after the parked timeout, and the negotiation goes on — turn 8 parked
    for the other user with a fresh deadline — until an agent accepts on turn 10. No turn
    finalizes it early: "no cap" is not a cap of 6, nor "finalize after every turn"."""
    api = make_api(claim_timeout_seconds=600, parked_timeout_seconds=3600, negotiation_timeout_seconds=7 * 86400)
    the_pair = pair("fundraising-mentor-and-first-time-founder")
    first, second, negotiation_id = _both_personal(api, the_pair)
    script: dict[int, tuple[Caller, str] | None] = {
        1: (first, "propose"), 2: (second, "question"), 3: (first, "question"), 4: (second, "question"),
        5: (first, "question"), 6: (second, "question"), 7: None, 8: (second, "counter"), 9: (first, "question"),
        10: (second, "accept")}
    now = T0
    for number in range(1, 11):
        view = api.negotiation(negotiation_id)
        assert (view["state"], view["maxTurns"], view["outcome"], len(view["turns"])) == \
            ("waiting_for_agent", None, None, number - 1), number
        step = script[number]
        if step is None:  # nobody polls: the parked timeout hands the turn to the system negotiator
            assert view["waitingFor"] == first.user_id
            now = datetime.fromisoformat(view["parkDeadline"])
            api.at(now)
            view = api.negotiation(negotiation_id)
            assert summary(view)[-1] == (7, "counter", "system")
            assert (view["waitingFor"], view["parkDeadline"]) == (second.user_id, iso(now + HOUR))
            continue
        now += timedelta(minutes=5)
        api.at(now)
        agent, action = step
        view = agent.take(negotiation_id, turn(action, f"turn {number}"))
    assert summary(view) == [(1, "propose", "personal")] + [(n, "question", "personal") for n in range(2, 7)] + \
        [(7, "counter", "system"), (8, "counter", "personal"), (9, "question", "personal"), (10, "accept", "personal")]
    assert view["state"] == "completed"
    assert (view["outcome"]["hasOpportunity"], view["outcome"]["turnCount"]) == (True, 10)
    assert "reason" not in view["outcome"]
    assert api.opportunity(view["opportunityId"])["status"] == "pending"


@pytest.mark.parametrize("turn_eight", ["agent", "timeout"])
def test_mixed_negotiation_ends_at_exactly_eight_after_system_takeovers(api: Operator, turn_eight: str) -> None:
    """Turn cap (mixed: 8 turns) and Parked-turn lifecycle, step 5: the personal agent's first
    turn is taken by the system negotiator after the parked timeout, and the negotiation keeps its
    stored cap of 8 (not 6) afterwards. ``agent``: the agent counters on turn 8 and the
    negotiation stalls with reason "turn_cap" at exactly 8. ``timeout``: turn 8 times out too,
    and the system negotiator, on the last turn the cap allows, makes the final call on turn 8.

    RotorLab (from the robotics pair) is given three more intents, taken from other labelled
    people, so that its system advocate has objections left to counter with on turns 3, 5 and 7
    while Kenji's agent answers one of them per turn. (Its own contracting need is met from the
    start since issue 30: Kenji *is* the contractor it seeks.)"""
    the_pair = pair("robotics-startup-and-firmware-contractor")
    the_pair["a"]["intents"] += [pair("fundraising-mentor-and-first-time-founder")["b"]["intents"][0],
                                 pair("bakery-and-bookkeeper")["b"]["intents"][0],
                                 pair("saas-builder-and-sales-leader")["a"]["intents"][0]]
    rotorlab, kenji = api.user_id(the_pair["a"]), api.user_id(the_pair["b"])
    agent = api.agent(kenji)
    negotiation_id = api.open_negotiation(rotorlab, kenji, the_pair["seed"])
    view = api.negotiation(negotiation_id)
    assert (view["maxTurns"], view["expiresAt"], summary(view)) == (8, None, [(1, "propose", "system")])

    api.at(T0 + 24 * HOUR)  # nobody polled for turn 2
    view = api.negotiation(negotiation_id)
    assert summary(view)[1:] == [(2, "counter", "system"), (3, "counter", "system")]
    messages = {4: "Kenji can give guidance on fundraising before a pre-seed round.",
                6: "Kenji can own go-to-market and sales."}
    for number in (4, 6):
        api.at(T0 + 24 * HOUR + number * timedelta(minutes=10))
        view = agent.take(negotiation_id, turn("counter", messages[number]))
        assert (view["state"], view["outcome"], summary(view)[-1]) == \
            ("waiting_for_agent", None, (number + 1, "counter", "system"))
    assert [action for _, action, _ in summary(view)] == ["propose"] + ["counter"] * 6

    if turn_eight == "agent":
        view = agent.take(negotiation_id, turn("counter", "Kenji still wants to know who does the books."))
        assert summary(view)[-1] == (8, "counter", "personal")
        outcome = view["outcome"]
        assert (outcome["hasOpportunity"], outcome["reason"], outcome["turnCount"]) == (False, "turn_cap", 8)
        assert api.opportunity(view["opportunityId"])["status"] == "stalled"
    else:
        api.at(datetime.fromisoformat(view["parkDeadline"]))
        view = api.negotiation(negotiation_id)
        assert summary(view)[-1] == (8, "accept", "system")
        outcome = view["outcome"]
        assert (outcome["hasOpportunity"], outcome["turnCount"]) == (True, 8) and "reason" not in outcome
        assert api.opportunity(view["opportunityId"])["status"] == "pending"
    assert view["state"] == "completed"


def test_configured_cap_is_stored_and_kept_by_the_timeout_path(make_api) -> None:
    """Turn cap: a configured cap (personal vs personal: 4) is stored with the negotiation; the
    system negotiator's takeover after the parked timeout — applied here by a sweep running with
    different settings (no cap) — keeps the stored cap, and turn 4 stalls it with "turn_cap"."""
    api = make_api(caps=TurnCaps(personal_personal=4), negotiation_timeout_seconds=7 * 86400)
    first, second, negotiation_id = _both_personal(api, pair("fundraising-mentor-and-first-time-founder"))
    assert api.negotiation(negotiation_id)["maxTurns"] == 4
    api.at(T0 + HOUR)
    first.take(negotiation_id, turn("propose", "my user mentors first-time founders"))
    api.at(T0 + 2 * HOUR)
    second.take(negotiation_id, turn("question", "how many founders a year?"))

    api.at(T0 + 26 * HOUR)  # turn 3 parked for 24 h
    other_settings = MatchingSettings(operator_token=TOKEN)  # personal vs personal: no cap
    assert Matching(api.store.app.state.matching.db, api.clock, other_settings).sweep() == 1
    view = api.negotiation(negotiation_id)
    assert (view["maxTurns"], summary(view)[-1], view["waitingFor"]) == (4, (3, "counter", "system"), second.user_id)

    api.at(T0 + 27 * HOUR)
    view = second.take(negotiation_id, turn("counter", "still unsure"))
    assert view["state"] == "completed"
    assert (view["outcome"]["reason"], view["outcome"]["turnCount"]) == ("turn_cap", 4)


def test_a_cap_of_zero_is_refused_and_none_means_no_cap() -> None:
    """Turn cap: a cap is a positive number of turns or None (no cap). 0 is refused by TurnCaps
    and by the engine's Rules (the public implementation stored "unlimited" as 0 and once read
    it as "finalize after every turn"); personal vs personal is uncapped by default."""
    for name in ("system_system", "mixed", "personal_personal"):
        for bad in (0, -1, True, 2.5):
            with pytest.raises(ValueError):
                TurnCaps(**{name: bad})
    with pytest.raises(ValueError):
        Rules(("source", "candidate"), max_turns=0)
    caps = TurnCaps()
    assert (caps.for_sides(False, False), caps.for_sides(True, False), caps.for_sides(False, True),
            caps.for_sides(True, True)) == (6, 8, 8, None)
    assert Rules(("source", "candidate"), max_turns=None).max_turns is None
