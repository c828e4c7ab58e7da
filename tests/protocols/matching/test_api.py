"""The match negotiation API against spec 002, over real HTTP. Each test names its section."""

from __future__ import annotations

import json
import sqlite3

import pytest

from haggler.protocols.matching.settings import MatchingSettings, TurnCaps
from tests.support.matching import SETTINGS, TOKEN, Caller, Operator, bearer, pair, turn


@pytest.fixture
def store(make_store):
    return make_store(matching=SETTINGS)


@pytest.fixture
def op(store) -> Operator:
    return Operator(store)


def personal_pair(op: Operator, labelled: dict | None = None) -> tuple[Caller, Caller, Caller, Caller]:
    """Two users, each with an enabled (personal) agent: (source, candidate, source agent, candidate agent)."""
    source, candidate = op.users(labelled or pair("good"))
    return source, candidate, op.agent(source), op.agent(candidate)


def claim(agent: Caller) -> dict:
    response = agent.pickup()
    assert response.status_code == 200, response.text
    return response.json()


def error(response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    message = response.json()["error"]
    for word in words:
        assert word in message, message
    return message


def db_rows(store, table: str) -> int:
    path = str(store.app.state.matching.db.url).removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


# -- Roles, Turn cap --------------------------------------------------------------------------------

def test_roles_and_caps_follow_the_agents_each_user_has(op):
    """spec 002 "Roles", "Turn cap": a user with an enabled agent is personal, otherwise the system
    negotiator speaks; system–system 6 turns, mixed 8, personal–personal no cap with a timeout."""
    a, b = op.users(pair("good", 1))
    c, d = op.users(pair("good", 2))
    op.agent(c)
    op.agent(d)
    op.agent(b, mode="disabled")  # a disabled agent leaves its user to the system negotiator
    system = op.negotiation(op.open(a, b)["negotiationId"])
    mixed = op.negotiation(op.open(a, c)["negotiationId"])
    personal = op.negotiation(op.open(c, d)["negotiationId"])
    assert (system["maxTurns"], system["expiresAt"]) == (6, None)
    assert (mixed["maxTurns"], mixed["expiresAt"]) == (8, None)
    assert personal["maxTurns"] is None and personal["expiresAt"] is not None
    assert all(t["takenBy"] == "system" for t in system["turns"])


def test_a_turn_cap_of_zero_is_refused_and_none_means_no_cap():
    """spec 002 "Turn cap"; regression: the public implementation stored "unlimited" as 0 and
    then finalized after every turn. A cap is a positive number or None."""
    with pytest.raises(ValueError, match="positive"):
        TurnCaps(mixed=0)
    with pytest.raises(ValueError, match="positive"):
        MatchingSettings(caps=TurnCaps(system_system=-1))
    assert TurnCaps().for_sides(True, True) is None


def test_an_uncapped_personal_negotiation_goes_past_any_fixed_cap(op):
    """spec 002 "Turn cap": personal–personal is unlimited — 12 counters in a row do not end it
    (the public implementation's cap of 0 ended it after the first)."""
    source, candidate, agent_s, agent_c = personal_pair(op)
    negotiation_id = op.open(source, candidate)["negotiationId"]
    assert agent_s.respond(negotiation_id, turn("propose")).status_code == 409  # nothing claimed yet
    claim(agent_s)
    assert agent_s.respond(negotiation_id, turn("propose")).status_code == 200
    for number in range(2, 14):
        agent = agent_c if number % 2 == 0 else agent_s
        assert claim(agent)["turnNumber"] == number
        assert agent.respond(negotiation_id, turn("counter")).status_code == 200
    state = op.negotiation(negotiation_id)
    assert state["state"] == "waiting_for_agent" and len(state["turns"]) == 13 and state["outcome"] is None


def test_a_configured_cap_ends_in_stalled_with_reason_turn_cap(make_store):
    """spec 002 "Turn cap", "Outcome Determination": the cap reached without accept or reject
    stalls the opportunity with reason turn_cap; the cap comes from configuration, not a constant."""
    store = make_store(matching=MatchingSettings(operator_token=TOKEN, caps=TurnCaps(personal_personal=3)))
    op = Operator(store)
    source, candidate, agent_s, agent_c = personal_pair(op)
    opened = op.open(source, candidate)
    for agent, action in ((agent_s, "propose"), (agent_c, "counter"), (agent_s, "question")):
        claim(agent)
        assert agent.respond(opened["negotiationId"], turn(action)).status_code == 200
    outcome = op.negotiation(opened["negotiationId"])["outcome"]
    assert outcome == {"hasOpportunity": False, "agreedRoles": [], "turnCount": 3, "reason": "turn_cap",
                       "reasoning": outcome["reasoning"]}
    assert "3" in outcome["reasoning"]
    assert op.opportunity(opened["id"])["status"] == "stalled"


# -- Actions, Turn structure ------------------------------------------------------------------------

def test_the_first_turn_must_be_propose_and_propose_only_opens(op):
    """spec 002 "Actions": propose is the first turn only. A turn that breaks it is a 400 naming
    the rule, and the claim stays, so the agent can answer properly."""
    source, candidate, agent_s, agent_c = personal_pair(op)
    negotiation_id = op.open(source, candidate)["negotiationId"]
    claim(agent_s)
    error(agent_s.respond(negotiation_id, turn("counter")), 400, "first turn must be propose")
    error(agent_s.respond(negotiation_id, turn("accept")), 400, "first turn must be propose")
    assert op.negotiation(negotiation_id)["state"] == "claimed"
    assert agent_s.respond(negotiation_id, turn("propose")).status_code == 200
    claim(agent_c)
    error(agent_c.respond(negotiation_id, turn("propose")), 400, "propose is for the first turn only")
    assert agent_c.respond(negotiation_id, turn("question", message="What stage is the company at?")).status_code == 200
    state = op.negotiation(negotiation_id)
    assert [t["action"] for t in state["turns"]] == ["propose", "question"]
    assert state["turns"][1]["message"] == "What stage is the company at?"
    assert state["waitingFor"] == source.id  # a question routes like counter: the other side answers


def test_question_is_for_personal_agents_only(op):
    """spec 002 "Actions": the system negotiator never asks a question, and in a mixed
    negotiation the personal agent may."""
    source, candidate = op.users(pair("good", 3))
    agent_c = op.agent(candidate)
    negotiation_id = op.open(source, candidate)["negotiationId"]
    state = op.negotiation(negotiation_id)
    assert [t["takenBy"] for t in state["turns"]] == ["system"] and state["waitingFor"] == candidate.id
    claim(agent_c)
    assert agent_c.respond(negotiation_id, turn("question")).status_code == 200
    after = op.negotiation(negotiation_id)
    assert after["turns"][1]["action"] == "question"
    assert all(t["action"] != "question" for t in after["turns"] if t["takenBy"] == "system")


@pytest.mark.parametrize("body, words", [
    ({"action": "counter"}, ["assessment"]),
    (turn("counter", own="boss"), ["assessment.suggestedRoles.ownUser", "agent, patient, peer"]),
    (turn("counter", other=None), ["assessment.suggestedRoles.otherUser"]),
    (turn("counter", reasoning=""), ["assessment.reasoning"]),
    (turn("counter", reasoning=7), ["assessment.reasoning"]),
    (turn("haggle"), ["action", "propose, counter, accept, reject, question"]),
    (turn("counter", message=5), ["message"]),
    (turn("counter", score=90), ["unknown field 'score'"]),
    ({**turn("counter"), "assessment": {"reasoning": "x", "suggestedRoles": {"ownUser": "peer", "otherUser": "peer"},
                                        "score": 3}}, ["assessment.score"]),
    ({"action": "counter", "assessment": {"reasoning": "x", "suggestedRoles": "peer"}}, ["suggestedRoles"]),
    ([1, 2], ["JSON object"]),
])
def test_a_malformed_turn_is_a_400_naming_the_field_and_changes_nothing(op, store, body, words):
    """spec 002 "Turn structure": action, assessment.reasoning, assessment.suggestedRoles with
    ownUser/otherUser in agent|patient|peer, optional message."""
    source, candidate, agent_s, _ = personal_pair(op)
    negotiation_id = op.open(source, candidate)["negotiationId"]
    claim(agent_s)
    before = op.negotiation(negotiation_id)
    error(agent_s.respond(negotiation_id, body), 400, *words)
    after = op.negotiation(negotiation_id)
    assert after == before


# -- Flow, A2A Conversation Integration, Trace ------------------------------------------------------

def test_a_negotiation_is_an_a2a_conversation_with_a_task_messages_and_an_outcome_artifact(op):
    """spec 002 "A2A Conversation Integration": two participants agent:{userId}, a task of type
    negotiation linking both users, one message per turn with a data part (kind "data"), and an
    artifact holding the outcome; "Trace Instrumentation": a turn's summary is its action name."""
    source, candidate = op.users(pair("good"))
    opened = op.open(source, candidate)
    state = op.negotiation(opened["negotiationId"])
    assert state["conversation"]["participants"] == [f"agent:{source.id}", f"agent:{candidate.id}"]
    task = state["task"]
    assert task["kind"] == "task" and task["id"] == opened["negotiationId"]
    assert task["contextId"] == state["conversation"]["id"]
    assert task["metadata"]["type"] == "negotiation"
    assert (task["metadata"]["sourceUserId"], task["metadata"]["candidateUserId"]) == (source.id, candidate.id)
    assert task["status"]["state"] == "completed" and task["metadata"]["negotiationState"] == "completed"
    assert len(task["history"]) == len(state["turns"]) >= 2
    for message, stored in zip(task["history"], state["turns"]):
        assert message["kind"] == "message" and message["role"] == "agent"
        assert message["metadata"]["sender"] == f"agent:{stored['speaker']}"
        (part,) = message["parts"]
        assert part["kind"] == "data"
        assert part["data"]["action"] == stored["action"] and part["data"]["assessment"] == stored["assessment"]
    (artifact,) = task["artifacts"]
    assert artifact["name"] == "negotiation-outcome" and artifact["parts"][0]["kind"] == "data"
    assert artifact["parts"][0]["data"] == state["outcome"]
    assert state["trace"] == [{"turn": t["turnNumber"], "participant": f"agent:{t['speaker']}",
                               "summary": t["action"]} for t in state["turns"]]
    assert "score" not in json.dumps(state["trace"])


def test_the_opportunity_is_visible_as_negotiating_before_its_negotiation_runs(store, op):
    """spec 002 "Flow" step 1, "Relationship to Opportunity Persistence": the opportunity is
    stored as negotiating with a submitted task, and only then is the negotiation run."""
    from haggler.protocols.matching import negotiations, opportunities
    from haggler.protocols.matching.participants import OPERATOR

    source, candidate = op.users(pair("good"))
    matching = store.app.state.matching
    seed = {"score": 80, "reasoning": "fit", "valencyRole": "peer"}
    with matching.db.write() as conn:
        opened = opportunities.create(conn, {"sourceUserId": source.id, "candidateUserId": candidate.id,
                                             "seedAssessment": seed}, matching.settings, store.clock())
    assert opened["status"] == "negotiating"
    with matching.db.read() as conn:
        assert opportunities.get(conn, OPERATOR, opened["id"])["status"] == "negotiating"
        assert negotiations.task_row(conn, opened["negotiationId"]).state == "submitted"
    assert matching.sweep() == 1  # a negotiation left submitted (say, by a crash) is run by the sweep
    assert op.opportunity(opened["id"])["status"] == "pending"
    assert matching.sweep() == 0


# -- Outcome Determination, Agreed roles ------------------------------------------------------------

def test_accept_gives_pending_with_each_sides_own_role_from_its_last_turn(op):
    """spec 002 "Outcome Determination", "Agreed roles": hasOpportunity after accept, and each
    side's agreed role is the ownUser of its own last turn."""
    source, candidate, agent_s, agent_c = personal_pair(op, pair("good", 1))
    opened = op.open(source, candidate)
    negotiation_id = opened["negotiationId"]
    moves = [(agent_s, turn("propose", own="peer", other="peer")),
             (agent_c, turn("counter", own="patient", other="agent", reasoning="I need a mentor, not a peer.")),
             (agent_s, turn("counter", own="agent", other="patient", reasoning="Then I mentor.")),
             (agent_c, turn("accept", own="patient", other="agent", reasoning="Agreed: mentorship."))]
    for agent, body in moves:
        claim(agent)
        assert agent.respond(negotiation_id, body).status_code == 200
    outcome = op.negotiation(negotiation_id)["outcome"]
    assert outcome["hasOpportunity"] is True and outcome["turnCount"] == 4 and "reason" not in outcome
    assert outcome["agreedRoles"] == [{"userId": source.id, "role": "agent"}, {"userId": candidate.id, "role": "patient"}]
    assert "Agreed: mentorship." in outcome["reasoning"]
    opportunity = op.opportunity(opened["id"])
    assert opportunity["status"] == "pending" and opportunity["agreedRoles"] == outcome["agreedRoles"]
    assert opportunity["score"] == 70  # negotiation does not re-score


def test_reject_gives_rejected_without_a_reason(op):
    """spec 002 "Outcome Determination": the last action reject → rejected; reason is only for
    turn_cap and timeout."""
    source, candidate, agent_s, agent_c = personal_pair(op)
    opened = op.open(source, candidate)
    claim(agent_s)
    agent_s.respond(opened["negotiationId"], turn("propose"))
    claim(agent_c)
    agent_c.respond(opened["negotiationId"], turn("reject", reasoning="Nothing in it for my user."))
    outcome = op.negotiation(opened["negotiationId"])["outcome"]
    assert outcome == {"hasOpportunity": False, "agreedRoles": [], "turnCount": 2,
                       "reasoning": "Rejected on turn 2: Nothing in it for my user."}
    assert op.opportunity(opened["id"])["status"] == "rejected"
    assert agent_c.pickup().status_code == 204


def test_the_system_negotiator_accepts_good_matches_and_rejects_hollow_ones(op):
    """spec 002 "Why Negotiation Exists": superficial overlap and one-sided matches are caught."""
    outcomes = {}
    for kind in ("good", "superficial", "one_sided"):
        source, candidate = op.users(pair(kind, 0))
        outcomes[kind] = op.opportunity(op.open(source, candidate)["id"])["status"]
    assert outcomes == {"good": "pending", "superficial": "rejected", "one_sided": "rejected"}


# -- Seed Assessment -----------------------------------------------------------------------------------

@pytest.mark.parametrize("seed, words", [
    ({"score": 101, "reasoning": "x", "valencyRole": "peer"}, ["seedAssessment.score", "0 and 100"]),
    ({"score": "high", "reasoning": "x", "valencyRole": "peer"}, ["seedAssessment.score"]),
    ({"score": 50, "valencyRole": "peer"}, ["seedAssessment.reasoning"]),
    ({"score": 50, "reasoning": "x", "valencyRole": "boss"}, ["seedAssessment.valencyRole"]),
    ({"score": 50, "reasoning": "x", "valencyRole": "peer", "actors": [{"userId": "usr_nobody", "role": "peer"}]},
     ["neither the source nor the candidate"]),
    ({"score": 50, "reasoning": "x", "valencyRole": "peer", "actors": [{"userId": "x"}]}, ["actors[0].role"]),
    ("great", ["seedAssessment must be a JSON object"]),
])
def test_a_bad_seed_assessment_is_a_400_and_opens_nothing(store, op, seed, words):
    """spec 002 "Seed Assessment": score 0–100, reasoning, valencyRole, optional actors."""
    source, candidate = op.users(pair("good"))
    error(op.post("/api/opportunities", {"sourceUserId": source.id, "candidateUserId": candidate.id,
                                         "seedAssessment": seed}), 400, *words)
    assert db_rows(store, "opportunities") == db_rows(store, "a2a_tasks") == 0


def test_the_seed_is_kept_and_both_sides_receive_it(op):
    """spec 002 "Seed Assessment": both agents receive it as context; the opportunity keeps it."""
    source, candidate, agent_s, _ = personal_pair(op)
    seed = {"score": 64, "reasoning": "Both in climate.", "valencyRole": "peer",
            "actors": [{"userId": source.id, "role": "peer"}, {"userId": candidate.id, "role": "peer"}]}
    opened = op.open(source, candidate, seed, discoveryQuery="climate co-founder")
    context = claim(agent_s)
    assert context["seedAssessment"] == seed and context["discoveryQuery"] == "climate co-founder"
    assert op.opportunity(opened["id"])["seedAssessment"] == seed


# -- Turn Delivery (Polling) ---------------------------------------------------------------------------

def test_pickup_gives_the_full_turn_context_and_204_when_nothing_waits(op, store):
    """spec 002 "Parked-turn lifecycle" step 2: the turn number, deadline, counterparty action,
    full history and the projected own/other user context; 6 h claim deadline."""
    source, candidate = op.users(pair("good", 4))
    agent_c = op.agent(candidate)
    assert agent_c.pickup().status_code == 204
    opened = op.open(source, candidate)
    context = claim(agent_c)
    assert context["negotiationId"] == opened["negotiationId"] and context["turnNumber"] == 2
    assert context["counterpartyAction"] == "propose"
    assert context["ownUser"]["userId"] == candidate.id and context["otherUser"]["userId"] == source.id
    assert context["ownUser"]["intents"] == pair("good", 4)["b"]["intents"]
    assert [t["speaker"] for t in context["history"]] == [source.id]
    assert context["claimedBy"] == agent_c.id
    from datetime import datetime, timedelta
    assert datetime.fromisoformat(context["deadline"]) == store.clock() + timedelta(hours=6)
    assert datetime.fromisoformat(context["parkDeadline"]) == store.clock() + timedelta(hours=24)
    # The context is what the deterministic negotiator reads: a personal agent can decide from it.
    from haggler.agents.match_context import parse_context
    from haggler.agents.match_negotiator import decide
    decided = decide(parse_context(context))
    assert agent_c.respond(opened["negotiationId"], decided.to_json()).status_code == 200


def test_a_repeated_pickup_returns_the_same_claim_and_pickups_take_the_oldest_first(op, store):
    """spec 002 "Parked-turn lifecycle" step 2 (facts: a repeated pickup by the claiming agent
    returns the same claim; CAS of the oldest pending task)."""
    candidate = op.user(pair("good", 5)["b"])
    agent_c = op.agent(candidate)
    first = op.open(op.user(pair("good", 5)["a"]), candidate)
    store.clock.advance(minutes=1)
    second = op.open(op.user(pair("good", 6)["a"]), candidate)
    got = claim(agent_c)
    assert got["negotiationId"] == first["negotiationId"]
    store.clock.advance(minutes=5)
    assert claim(agent_c) == got
    waiting = agent_c.get(f"/api/agents/{agent_c.id}/negotiations", status="waiting_for_agent").json()
    assert [w["negotiationId"] for w in waiting["negotiations"]] == [first["negotiationId"], second["negotiationId"]]
    assert [w["state"] for w in waiting["negotiations"]] == ["claimed", "waiting_for_agent"]
    agent_c.respond(first["negotiationId"], turn("reject"))
    assert claim(agent_c)["negotiationId"] == second["negotiationId"]


def test_respond_needs_this_agents_claim(op):
    """spec 002 "Parked-turn lifecycle" step 3 (facts: 404 unknown negotiation, 409 wrong state or
    another agent's claim); the path's agent must be the key's (403)."""
    source, candidate = op.users(pair("good", 7))
    first, second = op.agent(candidate), op.agent(candidate)
    opened = op.open(source, candidate)
    negotiation_id = opened["negotiationId"]
    error(first.respond(negotiation_id, turn("counter")), 409, "pick the turn up")
    claim(first)
    assert second.pickup().status_code == 204  # one claim per parked turn
    error(second.respond(negotiation_id, turn("counter")), 409, "another agent holds the claim")
    error(first.respond("neg_unknown", turn("counter")), 404, "unknown negotiation")
    error(first.post(f"/api/agents/{second.id}/negotiations/{negotiation_id}/respond", turn("counter")), 403,
          "agent named in the path")
    error(first.post(f"/api/agents/{second.id}/negotiations/pickup"), 403)
    assert op.negotiation(negotiation_id)["state"] == "claimed"
    assert first.respond(negotiation_id, turn("counter")).status_code == 200
    error(first.respond(negotiation_id, turn("counter")), 409)


def test_an_agent_of_another_user_cannot_touch_the_negotiation(op):
    """spec 002 "Parked-turn lifecycle": assertAgentOwnership — only the two users' agents."""
    source, candidate = op.users(pair("good", 8))
    op.agent(candidate)
    outsider = op.agent(op.user(pair("good", 9)["a"]))
    opened = op.open(source, candidate)
    assert outsider.pickup().status_code == 204
    error(outsider.respond(opened["negotiationId"], turn("counter")), 403, "not your user's")
    error(outsider.get(f"/api/negotiations/{opened['negotiationId']}"), 403)
    error(outsider.get(f"/api/opportunities/{opened['id']}"), 403)


def test_a_disabled_agent_takes_no_turns(op):
    """spec 002 "Configuration knobs": negotiationMode disabled means the agent does not poll."""
    source, candidate = op.users(pair("good", 10))
    disabled = op.agent(candidate, mode="disabled")
    assert op.agent(source).id  # the source is personal; the candidate is not
    opened = op.open(source, candidate)
    error(disabled.pickup(), 403, "disabled")
    assert op.negotiation(opened["negotiationId"])["maxTurns"] == 8


# -- Operator API, opportunities answered by people -------------------------------------------------

def test_operator_routes_need_the_operator_token(make_store):
    """No token configured: operator routes answer 403; a wrong token is a 401."""
    store = make_store()
    for headers in (bearer(TOKEN), {}):
        error(store.http.post("/api/users", json={"name": "x"}, headers=headers), 403, "--operator-token")
        error(store.http.get("/api/negotiations/insights", headers=headers), 403, "--operator-token")
    error(store.http.post("/api/opportunities", json={}), 403)
    configured = make_store(matching=SETTINGS)
    op = Operator(configured)
    user = op.user(pair("good")["a"])
    error(user.post("/api/users", {"name": "x"}), 403, "operator")
    error(user.get("/api/negotiations/insights"), 403, "operator")
    error(user.post("/api/opportunities", {}), 403, "operator")
    error(Operator(configured, token="wrong-token-000000000000").post("/api/users", {"name": "x"}), 401)
    error(configured.http.post("/api/users", json={"name": "x"}), 401)


def test_keys_are_shown_once_and_stored_hashed(store, op):
    """Agents' and users' API keys are returned at creation and kept only as their SHA-256."""
    user = op.user(pair("good")["a"])
    agent = op.agent(user)
    path = str(store.app.state.matching.db.url).removeprefix("sqlite:///")
    dump = "\n".join(sqlite3.connect(path).iterdump())
    assert user.key not in dump and agent.key not in dump
    assert user.get(f"/api/users/{user.id}").json()["name"] == pair("good")["a"]["profile"]["name"]
    assert "apiKey" not in user.get(f"/api/users/{user.id}").json()


@pytest.mark.parametrize("path, body, status, words", [
    ("/api/users", {"name": ""}, 400, ["name"]),
    ("/api/users", {"name": "x", "profile": []}, 400, ["profile"]),
    ("/api/users", {"name": "x", "intents": [{"tags": ["a"]}]}, 400, ["intents[0].description"]),
    ("/api/users", {"name": "x", "intents": [{"description": "a", "weight": 2}]}, 400, ["intents[0].weight"]),
    ("/api/users", {"name": "x", "email": "a@b"}, 400, ["unknown field 'email'"]),
    ("/api/users/usr_nobody/agents", {"name": "a"}, 404, ["unknown user"]),
    ("/api/opportunities", {"sourceUserId": "usr_nobody", "candidateUserId": "usr_other",
                            "seedAssessment": {"score": 1, "reasoning": "x", "valencyRole": "peer"}}, 404,
     ["unknown user"]),
    ("/api/opportunities/opp_nobody/accept", None, 403, ["user's own key"]),
    ("/api/users/usr_nobody/discover", {}, 404, ["unknown user"]),
])
def test_bad_operator_input_is_a_json_error_and_changes_nothing(store, op, path, body, status, words):
    before = db_rows(store, "match_users")
    error(op.post(path, body), status, *words)
    assert db_rows(store, "match_users") == before and db_rows(store, "opportunities") == 0


def test_a_user_adds_own_agents_only(op):
    a, b = op.users(pair("good"))
    error(a.post(f"/api/users/{b.id}/agents", {"name": "sneaky"}), 403)
    error(a.post(f"/api/users/{a.id}/agents", {"name": "x", "negotiationMode": "sometimes"}), 400, "negotiationMode")


def test_both_people_accept_or_either_declines_a_pending_opportunity(op):
    """spec 002 "Outcome Determination": pending awaits human acceptance."""
    source, candidate = op.users(pair("good"))
    opened = op.open(source, candidate)
    path = f"/api/opportunities/{opened['id']}"
    assert op.opportunity(opened["id"])["status"] == "pending"
    error(op.post(f"{path}/accept"), 403)  # the people answer, not the operator
    assert source.post(f"{path}/accept").json()["status"] == "pending"
    after = candidate.post(f"{path}/accept").json()
    assert after["status"] == "accepted" and after["answers"] == {"source": "accept", "candidate": "accept"}
    error(candidate.post(f"{path}/decline"), 409, "accepted")
    hollow_source, hollow_candidate = op.users(pair("superficial"))
    rejected = op.open(hollow_source, hollow_candidate)
    # Its negotiation runs after the 201; reading it applies what is due (as for the first one).
    assert op.opportunity(rejected["id"])["status"] == "rejected"
    error(source.post(f"/api/opportunities/{rejected['id']}/accept"), 403, "not yours")
    error(hollow_source.post(f"/api/opportunities/{rejected['id']}/accept"), 409, "rejected")


def test_either_person_declining_declines(op):
    source, candidate = op.users(pair("good", 2))
    opened = op.open(source, candidate)
    assert op.opportunity(opened["id"])["status"] == "pending"
    assert candidate.post(f"/api/opportunities/{opened['id']}/decline").json()["status"] == "declined"
    error(source.post(f"/api/opportunities/{opened['id']}/accept"), 409, "declined")


# -- Discovery, Insights -------------------------------------------------------------------------------

def test_discover_opens_a_negotiating_opportunity_for_each_candidate_above_the_threshold(op):
    """spec 002 "Relationship to Opportunity Persistence" steps 1–5: the evaluator scores,
    qualifying candidates become negotiating opportunities, and negotiation gates them."""
    good, hollow = pair("good"), pair("superficial")
    source = op.user(good["a"])
    match, bystander = op.user(good["b"]), op.user(hollow["a"])
    found = op.post(f"/api/users/{source.id}/discover", {"threshold": 50}).json()
    assert found["considered"] == 2 and found["threshold"] == 50
    (opened,) = found["opportunities"]
    opportunity = op.opportunity(opened["id"])
    assert opportunity["candidateUserId"] == match.id and opportunity["status"] == "pending"
    assert opportunity["score"] >= 50 and opportunity["score"] == opportunity["seedAssessment"]["score"]
    assert bystander.id not in json.dumps(found)
    again = op.post(f"/api/users/{source.id}/discover", {"threshold": 50}).json()
    assert again["opportunities"] == [] and again["considered"] == 1  # an existing pair is not reopened


def test_insights_count_outcomes_by_match_type_without_scores(op):
    """spec 002 "Negotiation Insights": accept vs reject by match type, objection themes, turn
    counts by scenario; no scores."""
    for kind, role in (("good", "peer"), ("superficial", "peer"), ("one_sided", "agent")):
        opened = op.open(*op.users(pair(kind)), {"score": 77, "reasoning": "r", "valencyRole": role})
        assert op.opportunity(opened["id"])["status"] != "negotiating"
    data = op.get("/api/negotiations/insights").json()
    assert data["negotiations"] == 3
    assert data["byMatchType"]["peer"]["accepted"] == 1 and data["byMatchType"]["peer"]["rejected"] == 1
    assert data["byMatchType"]["agent"]["rejectedRate"] == 1.0
    assert sum(data["turnCounts"]["system-system"].values()) == 3
    assert "score" not in json.dumps(data) and "77" not in json.dumps(data)
    themes = [t["theme"] for t in data["objectionThemes"]]
    assert themes and data["objectingTurns"] >= 2
    assert all(theme.isalpha() for theme in themes)


def test_one_broken_negotiation_does_not_stop_the_sweep(store, op):
    """A negotiation whose deadline cannot be applied is logged and passed over; the sweep goes on
    to the others, and it stays due for the next sweep."""
    from sqlalchemy import update

    from haggler.protocols.matching import opportunities
    from haggler.storage.schema import opportunities as table

    matching = store.app.state.matching
    seed = {"score": 80, "reasoning": "fit", "valencyRole": "peer"}
    opened = []
    for kind in ("good", "superficial"):
        source, candidate = op.users(pair(kind))
        with matching.db.write() as conn:
            opened.append(opportunities.create(conn, {"sourceUserId": source.id, "candidateUserId": candidate.id,
                                                      "seedAssessment": seed}, matching.settings, store.clock()))
    with matching.db.write() as conn:
        conn.execute(update(table).where(table.c.id == opened[0]["id"]).values(seed="not json"))
    assert matching.sweep() == 1
    with matching.db.read() as conn:
        states = [conn.execute(table.select().where(table.c.id == o["id"])).one().status for o in opened]
    assert states == ["negotiating", "rejected"]
