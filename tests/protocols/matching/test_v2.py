"""Negotiations v2 beside v1 (issue 30), over real HTTP and MCP, on SQLite and PostgreSQL, with an
injected clock (nothing sleeps). Each test names the part of Index Network's v2 protocol it holds
(``docs/domain/negotiation.md`` in indexnetwork/index and its seat-rule module): "Protocol
version", "Seat rules", "Final turn", "Outcome mapping", "Outreach screen", "ask_user",
"Deadlock detection"; "Wall clock" is beyond Index (its own open item).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from haggler.agents.match_context import Assessment, MatchAction, MatchContext, MatchTurn, Roles, UserContext
from haggler.agents.match_context import SeedAssessment
from haggler.errors import InvalidInput
from haggler.protocols.matching import v2
from haggler.protocols.matching.settings import MatchingSettings, TurnCaps
from tests.support.matching import TOKEN, Caller, Operator, pair, turn
from tests.support.servers import FakeClock

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
DAY, SECOND = timedelta(days=1), timedelta(seconds=1)
SEED = {"score": 70, "reasoning": "They might help each other.", "valencyRole": "peer"}


@pytest.fixture
def make_api(make_store, db_url: str) -> Callable[..., Operator]:
    """A store on ``db_url`` speaking v2 to fresh negotiations, plus ``settings``."""
    def make(**settings: Any) -> Operator:
        settings.setdefault("protocol_version", "v2")
        matching = MatchingSettings(operator_token=TOKEN, **settings)
        return Operator(make_store(db_url=db_url, clock=FakeClock(T0), matching=matching))
    return make


def personal(api: Operator, name: str = "good", index: int = 0) -> tuple[Caller, Caller, Caller, Caller]:
    """Two users with personal agents: (initiator, counterparty, initiator's agent, counterparty's agent)."""
    source, candidate = api.users(pair(name, index))
    return source, candidate, api.agent(source), api.agent(candidate)


def error(response: Any, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    message = response.json()["error"]
    for word in words:
        assert word in message, message
    return message


def take(agent: Caller, negotiation_id: str, action: str, **extra: Any) -> dict[str, Any]:
    return agent.take(negotiation_id, turn(action, **extra))


# -- Protocol version -----------------------------------------------------------------------------------

def test_a_fresh_negotiation_takes_the_setting_and_a_continuation_keeps_its_version(make_store, db_url):
    """Index v2 "Protocol version": every negotiation carries protocolVersion; fresh ones take the
    server setting (default v1, as Index); a continuation (the pair negotiates again) inherits its
    predecessor's, never re-stamped, whatever the setting says now."""
    assert MatchingSettings().protocol_version == "v1"
    with pytest.raises(ValueError, match="protocol_version"):
        MatchingSettings(protocol_version="v3")
    clock = FakeClock(T0)
    old = Operator(make_store(db_url=db_url, clock=clock, matching=MatchingSettings(operator_token=TOKEN)))
    a, b = old.users(pair("good", 0))
    first = old.negotiation(old.open(a, b)["negotiationId"])
    assert first["protocolVersion"] == "v1" and first["task"]["metadata"]["protocolVersion"] == "v1"
    assert "seats" not in first  # a v1 view is v1's, plus its version

    new = Operator(make_store(db_url=db_url, clock=clock, matching=MatchingSettings(operator_token=TOKEN,
                                                                                    protocol_version="v2")))
    again = new.negotiation(new.open(b, a)["negotiationId"])  # the same pair, either way round
    assert again["protocolVersion"] == "v1"
    assert [t["action"] for t in again["turns"]][0] == "propose"
    c, d = new.users(pair("good", 1))
    fresh = new.negotiation(new.open(c, d)["negotiationId"])
    assert fresh["protocolVersion"] == "v2" and fresh["task"]["metadata"]["protocolVersion"] == "v2"
    assert fresh["turns"][0]["action"] == "outreach"
    assert fresh["seats"] == {"initiator": c.id, "counterparty": d.id}


# -- Seat rules -----------------------------------------------------------------------------------------

def test_each_seat_has_its_vocabulary_and_a_refused_action_names_the_allowed_ones(make_api):
    """Index v2 "Seat rules": the initiator may outreach (first turn) | counter | question | withdraw
    and never accept; the counterparty may accept | decline | counter | question. A refused action
    is a 400 naming the allowed ones, and the claim stays for a proper answer."""
    api = make_api()
    source, candidate, agent_s, agent_c = personal(api)
    negotiation_id = api.open_negotiation(source, candidate, SEED)
    context = agent_s.claim()
    assert (context["protocolVersion"], context["seat"], context["allowedActions"]) == ("v2", "initiator", ["outreach"])
    error(agent_s.respond(negotiation_id, turn("propose")), 400, "allowed actions: outreach", "initiator")
    assert api.negotiation(negotiation_id)["state"] == "claimed"
    agent_s.respond(negotiation_id, turn("outreach")).raise_for_status()

    context = agent_c.claim()
    assert context["seat"] == "counterparty"
    assert context["allowedActions"] == ["accept", "decline", "counter", "question"]
    for action in ("withdraw", "reject", "outreach", "propose"):
        error(agent_c.respond(negotiation_id, turn(action)), 400, "counterparty",
              "allowed actions: accept, decline, counter, question")
    agent_c.respond(negotiation_id, turn("counter")).raise_for_status()

    assert agent_s.claim()["allowedActions"] == ["counter", "question", "withdraw"]
    for action in ("accept", "outreach", "decline"):
        error(agent_s.respond(negotiation_id, turn(action)), 400, "allowed actions: counter, question, withdraw")
    assert agent_s.respond(negotiation_id, turn("question")).status_code == 200


def test_v1_negotiations_keep_v1s_vocabulary(make_api):
    """Index v2 "Protocol version": v1 tasks keep the legacy vocabulary; v2's words are refused."""
    api = make_api(protocol_version="v1")
    source, candidate, agent_s, _ = personal(api)
    negotiation_id = api.open_negotiation(source, candidate, SEED)
    agent_s.claim()
    error(agent_s.respond(negotiation_id, turn("outreach")), 400, "v2", "propose, counter, accept, reject")
    assert agent_s.respond(negotiation_id, turn("propose")).status_code == 200


def test_a_refused_action_is_the_same_400_over_mcp(make_api):
    """Index v2 "Seat rules" through the MCP tools: the refusal names the allowed actions."""
    from tests.protocols.matching.test_mcp_tools import call, payload, respond, text

    api = make_api()
    source, candidate, agent_s, _ = personal(api)
    negotiation_id = api.open_negotiation(source, candidate, SEED)
    base = api.store.base
    refused = call(base, agent_s.key, "respond_to_negotiation", respond(negotiation_id, "accept"))
    assert refused.is_error and "400" in text(refused) and "allowed actions: outreach" in text(refused)
    state = payload(call(base, agent_s.key, "get_negotiation", {"negotiationId": negotiation_id}))
    assert state["protocolVersion"] == "v2" and state["turnContext"]["allowedActions"] == ["outreach"]
    after = payload(call(base, agent_s.key, "respond_to_negotiation", respond(negotiation_id, "outreach")))
    assert [t["action"] for t in after["turns"]] == ["outreach"]


# -- Final turn, Outcome mapping ---------------------------------------------------------------------

@pytest.mark.parametrize("cap", [3, 4])
def test_on_the_final_turn_the_initiator_withdraws_or_counters_and_the_counterparty_decides(make_api, cap):
    """Index v2 "Final turn": on the cap's last turn the initiator must withdraw | counter and the
    counterparty must accept | decline; a final counter reaches the cap: stalled, turn_cap."""
    api = make_api(v2_caps=TurnCaps(personal_personal=cap))
    source, candidate, agent_s, agent_c = personal(api)
    negotiation_id = api.open_negotiation(source, candidate, SEED)
    take(agent_s, negotiation_id, "outreach")
    take(agent_c, negotiation_id, "counter")
    if cap == 4:
        take(agent_s, negotiation_id, "counter")
    final_agent = agent_s if cap == 3 else agent_c
    context = final_agent.claim()
    assert context["finalTurn"] is True
    if cap == 3:
        assert context["allowedActions"] == ["withdraw", "counter"]
        error(final_agent.respond(negotiation_id, turn("question")), 400, "final turn", "withdraw, counter")
        final_agent.respond(negotiation_id, turn("counter")).raise_for_status()
        view = api.negotiation(negotiation_id)
        assert view["outcome"]["reason"] == "turn_cap" and view["outcome"]["turnCount"] == 3
        assert api.opportunity(view["opportunityId"])["status"] == "stalled"
    else:
        assert context["allowedActions"] == ["accept", "decline"]
        error(final_agent.respond(negotiation_id, turn("counter")), 400, "final turn", "accept, decline")
        final_agent.respond(negotiation_id, turn("decline")).raise_for_status()
        view = api.negotiation(negotiation_id)
        assert view["outcome"]["hasOpportunity"] is False and "reason" not in view["outcome"]
        assert api.opportunity(view["opportunityId"])["status"] == "rejected"


@pytest.mark.parametrize(("moves", "status"), [
    ((("s", "outreach"), ("c", "accept")), "pending"),
    ((("s", "outreach"), ("c", "decline")), "rejected"),
    ((("s", "outreach"), ("c", "counter"), ("s", "withdraw")), "rejected"),
])
def test_the_outcome_mapping_holds(make_api, moves, status):
    """Index v2 "Outcome mapping": accept → pending; withdraw, decline → rejected (cap → stalled:
    the final-turn test)."""
    api = make_api()
    source, candidate, agent_s, agent_c = personal(api)
    negotiation_id = api.open_negotiation(source, candidate, SEED)
    for side, action in moves:
        take(agent_s if side == "s" else agent_c, negotiation_id, action)
    view = api.negotiation(negotiation_id)
    assert view["state"] == "completed" and api.opportunity(view["opportunityId"])["status"] == status
    if status == "pending":
        assert view["outcome"]["hasOpportunity"] is True and len(view["outcome"]["agreedRoles"]) == 2


def test_v2_caps_are_six_unless_both_sides_have_personal_agents(make_api):
    """Index v2 "Turn cap": 6 unless both sides have external agents (then none)."""
    api = make_api()
    a, b = api.users(pair("good", 2))
    c, d = api.users(pair("good", 3))
    api.agent(c)
    api.agent(d)
    system = api.negotiation(api.open(a, b)["negotiationId"])
    mixed = api.negotiation(api.open(a, c)["negotiationId"])
    both = api.negotiation(api.open(c, d)["negotiationId"])
    assert (system["maxTurns"], mixed["maxTurns"], both["maxTurns"]) == (6, 6, None)
    assert system["expiresAt"] is None and mixed["expiresAt"] is None and both["expiresAt"] is not None


def test_the_system_negotiator_plays_both_seats(make_api):
    """docs/matching-api.md "The system negotiator on a seat": system against system speaks each
    seat's vocabulary only, and good matches still end pending, hollow ones rejected."""
    api = make_api()
    outcomes = {}
    for name in ("good", "superficial", "one_sided"):
        for index in range(3):
            a, b = api.users(pair(name, index))
            view = api.negotiation(api.open(a, b)["negotiationId"])
            for t in view["turns"]:
                seat = "initiator" if t["speaker"] == a.id else "counterparty"
                assert t["action"] in {"initiator": {"outreach", "counter", "withdraw"},
                                       "counterparty": {"accept", "decline", "counter"}}[seat], (seat, t["action"])
            assert view["turns"][0]["action"] == "outreach"
            outcomes[(name, index)] = api.opportunity(view["opportunityId"])["status"]
    assert all(outcomes[("good", i)] == "pending" for i in range(3) if ("good", i) in outcomes), outcomes
    assert all(outcomes[("superficial", i)] == "rejected" for i in range(3)), outcomes


# -- Outreach screen ----------------------------------------------------------------------------------

def test_the_screen_passes_hollow_matches_as_screened_out_invisible_to_the_counterparty(make_api):
    """Index v2 "Outreach screen": before the first turn the initiator's side decides reach_out |
    pass; a pass ends the negotiation with reason screened_out, unseen by the counterparty."""
    api = make_api(v2_screen=True)
    source, candidate = api.users(pair("superficial", 0))
    api.agent(candidate)
    opened = api.open(source, candidate)
    view = api.negotiation(opened["negotiationId"])
    assert view["screen"] == "pass" and view["turns"] == []
    assert view["outcome"]["reason"] == "screened_out" and view["outcome"]["hasOpportunity"] is False
    assert api.opportunity(opened["id"])["status"] == "rejected"
    assert source.get(f"/api/negotiations/{opened['negotiationId']}").status_code == 200
    for caller in (candidate, api.agent(candidate, name="second")):
        error(caller.get(f"/api/negotiations/{opened['negotiationId']}"), 404)
        error(caller.get(f"/api/opportunities/{opened['id']}"), 404)
    assert api.agent(candidate, name="third").pickup().status_code == 204

    good_source, good_candidate = api.users(pair("good", 0))
    reached = api.negotiation(api.open(good_source, good_candidate)["negotiationId"])
    assert reached["screen"] == "reach_out" and reached["turns"][0]["action"] == "outreach"


def test_without_the_setting_there_is_no_screen(make_api):
    """Index v2 "Outreach screen" is behind a setting (off by default)."""
    assert MatchingSettings().v2_screen is False
    api = make_api()
    source, candidate = api.users(pair("superficial", 0))
    view = api.negotiation(api.open(source, candidate)["negotiationId"])
    assert view["screen"] is None and view["turns"][0]["action"] == "outreach"
    assert view["outcome"].get("reason") != "screened_out"


# -- ask_user ----------------------------------------------------------------------------------------

def _asked(api: Operator) -> tuple[Caller, Caller, Caller, Caller, str]:
    """A v2 negotiation whose counterparty's agent has asked its user (turn 2)."""
    source, candidate, agent_s, agent_c = personal(api)
    negotiation_id = api.open_negotiation(source, candidate, SEED)
    take(agent_s, negotiation_id, "outreach")
    context = agent_c.claim()
    assert "ask_user" in context["allowedActions"]
    agent_c.respond(negotiation_id, turn("ask_user", "May I share your rates?")).raise_for_status()
    return source, candidate, agent_s, agent_c, negotiation_id


def test_ask_user_pauses_as_input_required_until_the_user_answers(make_api):
    """Index v2 "ask_user": a side pauses to consult its own user — task state input_required (A2A
    input-required) — and resumes with the answer, which arrives by the answer API; the other
    side sees neither the question nor the answer; once per side."""
    api = make_api(v2_ask_user=True)
    source, candidate, agent_s, agent_c, negotiation_id = _asked(api)
    view = candidate.get(f"/api/negotiations/{negotiation_id}").json()
    assert view["state"] == "input_required" and view["task"]["status"]["state"] == "input-required"
    assert view["waitingFor"] == candidate.id and view["answerDeadline"] == (T0 + DAY).isoformat()
    assert view["consultations"][0]["question"] == "May I share your rates?"
    assert [t["action"] for t in view["turns"]] == ["outreach", "ask_user"]
    theirs = source.get(f"/api/negotiations/{negotiation_id}").json()
    assert [t["action"] for t in theirs["turns"]] == ["outreach"] and theirs["consultations"] == []
    assert agent_c.pickup().status_code == 204 and agent_s.pickup().status_code == 204

    error(source.post(f"/api/negotiations/{negotiation_id}/answer", {"answer": "no"}), 409)
    error(api.post(f"/api/negotiations/{negotiation_id}/answer", {"answer": "no"}), 403)
    error(candidate.post(f"/api/negotiations/{negotiation_id}/answer", {"answer": ""}), 400, "answer")
    answered = candidate.post(f"/api/negotiations/{negotiation_id}/answer", {"answer": "Yes, $90 an hour."})
    assert answered.status_code == 200, answered.text
    assert answered.json()["state"] == "waiting_for_agent"
    context = agent_c.claim()
    assert context["consultations"][0]["answer"] == "Yes, $90 an hour."
    assert context["consultations"][0]["defaulted"] is False
    assert "ask_user" not in context["allowedActions"]  # rationed: once per side
    error(agent_c.respond(negotiation_id, turn("ask_user", "Again?")), 400, "allowed actions: accept, decline")
    agent_c.respond(negotiation_id, turn("accept")).raise_for_status()
    done = api.negotiation(negotiation_id)
    assert done["outcome"]["hasOpportunity"] is True and done["outcome"]["turnCount"] == 2


def test_an_unanswered_ask_user_gets_the_conservative_default_when_its_window_lapses(make_api):
    """Index v2 "ask_user": a 24 h answer window (a setting), then a conservative default."""
    api = make_api(v2_ask_user=True)
    _, candidate, _, agent_c, negotiation_id = _asked(api)
    api.at(T0 + DAY - SECOND)
    assert api.negotiation(negotiation_id)["state"] == "input_required"
    api.at(T0 + DAY)
    assert api.sweep() >= 1
    view = candidate.get(f"/api/negotiations/{negotiation_id}").json()
    assert view["state"] == "waiting_for_agent" and view["consultations"][0]["defaulted"] is True
    context = agent_c.claim()
    assert context["consultations"][0]["answer"] == v2.DEFAULT_ANSWER and "commit to nothing" in v2.DEFAULT_ANSWER


def test_ask_user_is_behind_its_setting_and_never_on_the_final_turn(make_api):
    """Index v2 "ask_user": off unless enabled; never on the final turn (which must decide)."""
    assert MatchingSettings().v2_ask_user is False
    api = make_api()
    source, candidate, agent_s, agent_c = personal(api)
    negotiation_id = api.open_negotiation(source, candidate, SEED)
    take(agent_s, negotiation_id, "outreach")
    agent_c.claim()
    error(agent_c.respond(negotiation_id, turn("ask_user", "?")), 400, "allowed actions: accept, decline, counter")
    on = make_api(v2_ask_user=True, v2_caps=TurnCaps(personal_personal=2))
    source, candidate, agent_s, agent_c = personal(on, "good", 1)
    negotiation_id = on.open_negotiation(source, candidate, SEED)
    take(agent_s, negotiation_id, "outreach")
    assert agent_c.claim()["allowedActions"] == ["accept", "decline"]


# -- Deadlock detection --------------------------------------------------------------------------------

def test_deadlock_is_a_trailing_run_of_counters_and_questions():
    """Index v2 "Deadlock detection": deterministic, the trailing run of counter/question turns
    (ask_user pauses are not turns; anything else ends the run)."""
    roles = Roles("peer", "peer")

    def t(action: MatchAction) -> MatchTurn:
        return MatchTurn("a", action, Assessment("r", roles))
    c, q, o = t(MatchAction.COUNTER), t(MatchAction.QUESTION), t(MatchAction.OUTREACH)
    assert v2.non_convergent_run([o, c, q, c, q]) == 4
    assert v2.non_convergent_run([c, c, o, c]) == 1
    assert v2.non_convergent_run([o, c, t(MatchAction.ASK_USER), q]) == 2
    with pytest.raises(ValueError, match="threshold"):
        MatchingSettings(v2_deadlock_threshold=1)


def test_in_a_deadlock_system_turns_take_the_bargaining_stance(make_api):
    """Index v2 "Deadlock detection" (a setting): after 4 counters/questions in a row a system turn
    stops arguing and makes its call; the parked turn context tells a personal agent so."""
    for enabled in (True, False):
        api = make_api(v2_deadlock=enabled)
        source, candidate, agent_s, agent_c = personal(api, "good", 1)
        negotiation_id = api.open_negotiation(source, candidate, SEED)
        take(agent_s, negotiation_id, "outreach")
        take(agent_c, negotiation_id, "question")
        take(agent_s, negotiation_id, "counter")
        take(agent_c, negotiation_id, "question")
        take(agent_s, negotiation_id, "counter")
        context = agent_c.claim()
        assert ("deadlock" in context) is enabled
        if enabled:
            assert context["deadlock"] == {"nonConvergentRun": 4, "threshold": 4, "bargaining": True}
        api.at(T0 + DAY)  # the counterparty's agent lets its turn go: the system takes it
        view = api.negotiation(negotiation_id)
        system = view["turns"][5]
        assert system["takenBy"] == "system"
        assert system["assessment"]["reasoning"].startswith("Deadlock: 4 counters") is enabled
        if enabled:
            assert system["action"] in ("accept", "decline") and view["state"] == "completed"


# -- Wall clock (beyond Index) ---------------------------------------------------------------------

def test_an_uncapped_v2_run_stalls_on_its_wall_clock(make_api):
    """Beyond Index ("Wall clock"): an uncapped v2 negotiation ends stalled with reason timeout
    once its wall-clock bound (a setting, default 7 days) has passed — even mid ask_user."""
    assert MatchingSettings().v2_wall_clock_seconds == 7 * 86_400
    api = make_api(v2_ask_user=True, parked_timeout_seconds=30 * 86_400)
    source, candidate, agent_s, agent_c = personal(api)
    negotiation_id = api.open_negotiation(source, candidate, SEED)
    assert api.negotiation(negotiation_id)["expiresAt"] == (T0 + 7 * DAY).isoformat()
    take(agent_s, negotiation_id, "outreach")
    for day in range(1, 7):
        api.at(T0 + day * DAY)
        take(agent_c if day % 2 else agent_s, negotiation_id, "counter")
    api.at(T0 + 7 * DAY - SECOND)
    agent_c.claim()
    agent_c.respond(negotiation_id, turn("ask_user", "Keep going?")).raise_for_status()
    assert api.negotiation(negotiation_id)["state"] == "input_required"
    api.at(T0 + 7 * DAY)
    view = api.negotiation(negotiation_id)
    assert view["state"] == "completed" and view["outcome"]["reason"] == "timeout"
    assert view["outcome"]["turnCount"] == 7  # the ask_user pause is no turn
    assert api.opportunity(view["opportunityId"])["status"] == "stalled"


# -- the seat mapping, unit level ----------------------------------------------------------------------

def test_the_system_verdicts_map_onto_the_seats():
    """docs/matching-api.md "The system negotiator on a seat": what each v1 verdict becomes."""
    def verdict(action: MatchAction) -> MatchTurn:
        return MatchTurn("a", action, Assessment("r", Roles("peer", "peer")), "m")
    I, C = v2.INITIATOR, v2.COUNTERPARTY
    A = MatchAction
    cases = [((A.PROPOSE, I, True, False), A.OUTREACH), ((A.ACCEPT, I, False, False), A.COUNTER),
             ((A.REJECT, I, False, False), A.WITHDRAW), ((A.ACCEPT, I, False, True), A.COUNTER),
             ((A.REJECT, I, False, True), A.WITHDRAW), ((A.COUNTER, I, False, True), A.COUNTER),
             ((A.ACCEPT, C, False, False), A.ACCEPT), ((A.REJECT, C, False, False), A.DECLINE),
             ((A.COUNTER, C, False, False), A.COUNTER), ((A.COUNTER, C, False, True), A.DECLINE)]
    for (action, seat, first, final), expected in cases:
        assert v2.system_turn(verdict(action), seat, first=first, final=final).action is expected
    with pytest.raises(InvalidInput, match="allowed actions"):
        v2.check(A.ACCEPT, I, first=False, final=False)
    own = UserContext("a", {"offers": ["x"]})
    other = UserContext("b", {"seeks": ["x"]})
    context = MatchContext(own, other, SeedAssessment(50, "s", "peer"),
                           history=(verdict(A.OUTREACH), MatchTurn("b", A.COUNTER, Assessment("r", Roles("peer", "peer")))),
                           max_turns=None)
    v1 = v2.v1_context(context, deadlocked=True)
    assert [t.action for t in v1.history] == [A.PROPOSE, A.COUNTER] and v1.max_turns == 3
