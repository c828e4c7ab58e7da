"""The system match negotiator (``haggler.agents.match_negotiator``), spec 002.

* Every labelled pair of ``match_pairs.json`` played as a full system–system negotiation under
  the cap of 6, each side opening once: the accuracy is printed and held to a floor, and each
  category is held to its behaviour (good pairs accepted; superficial and one-sided never).
* The held-out pairs of ``match_pairs_heldout.json`` — written after the negotiator, never used to
  tune it — played the same way: their accuracy is printed and held to a floor just under the
  measured value. No per-pair assertions there: the number is the honest estimate of how the
  negotiator does on profiles it was not built around, and a per-pair test would invite tuning.
* Unit tests: roles, the first turn, never ``question``, concrete objections, answered
  objections, the cap, determinism, malformed input.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from haggler.agents.match_context import MatchAction, MatchContext, parse_context
from haggler.agents.match_negotiator import decide, judge
from haggler.agents.match_text import DOMAINS, affirmed_concepts, concepts, need_from
from haggler.errors import InvalidInput
from tests.support.match_pairs import HELDOUT, PAIRS

CAP = 6
#: The floor on the share of games whose outcome matches the label. 64 games (32 pairs, each side
#: opening once): 90% allows six wrong games, so one misread pair in each order fails it three times over.
ACCURACY_FLOOR = 0.90
#: Measured on the held-out set before any change prompted by it: 52/68 = 76.5%. After two general
#: fixes in match_text (listed domains such as "saas" were stemmed to "saa" and never matched; "lead"
#: as in "lead investor" is a seniority modifier like "senior"): 56/68 = 82.4%. The six pairs still
#: misread are printed; they are left alone rather than tuned away. The floor sits just under the
#: measured value, so any lost game fails and a change that moves it must move the floor knowingly.
#: Issue 30 (its failures were printed here for sessions, so it is no longer unseen): the rule for
#: two givers of the same exchange took it to 60/68 = 88.2%, with two pairs of rivals among the
#: misread the rule was written for; issue 30's own held-out sets are in benchmarks/data.
HELDOUT_FLOOR = 0.88


def context(own: dict, other: dict, seed: dict, history: list[dict], cap: int | None = CAP) -> MatchContext:
    return parse_context({"ownUser": own, "otherUser": other, "seedAssessment": seed,
                          "history": history, "maxTurns": cap})


def play(pair: dict, first: str, cap: int = CAP) -> list[dict]:
    """A system–system negotiation: two negotiators alternate until accept, reject or the cap."""
    opener, responder = (pair["a"], pair["b"]) if first == "a" else (pair["b"], pair["a"])
    history: list[dict] = []
    while len(history) < cap:
        own, other = (opener, responder) if len(history) % 2 == 0 else (responder, opener)
        turn = decide(context(own, other, pair["seed"], history, cap))
        history.append({"speaker": turn.speaker, **turn.to_json()})
        if turn.action in (MatchAction.ACCEPT, MatchAction.REJECT):
            break
    return history


def outcome(history: list[dict]) -> str:
    last = history[-1]["action"]
    return {"accept": "accepted", "reject": "rejected"}.get(last, "stalled")


def games(pairs: list[dict]) -> list[tuple[dict, str]]:
    """Each pair twice, each side opening once: the opener's advocate speaks first and last."""
    return [(pair, first) for pair in pairs for first in ("a", "b")]


GAMES = games(PAIRS)
RESULTS = {(pair["id"], first): play(pair, first) for pair, first in GAMES}
HELDOUT_GAMES = games(HELDOUT)
HELDOUT_RESULTS = {(pair["id"], first): play(pair, first) for pair, first in HELDOUT_GAMES}


def expected(pair: dict) -> str:
    return "accepted" if pair["category"] == "good" else "not accepted"


def matches_label(pair: dict, history: list[dict]) -> bool:
    return (outcome(history) == "accepted") == (pair["category"] == "good")


@pytest.mark.parametrize("pairs,least", [
    (PAIRS, {"good": 8, "superficial": 8, "one_sided": 8}),
    (HELDOUT, {"good": 12, "superficial": 9, "one_sided": 9}),
], ids=["labelled", "heldout"])
def test_the_labelled_set_is_varied_enough(pairs: list[dict], least: dict[str, int]) -> None:
    categories = [pair["category"] for pair in pairs]
    assert len(pairs) >= 30
    assert {c: categories.count(c) >= n for c, n in least.items()} == dict.fromkeys(least, True)
    assert len({pair["id"] for pair in pairs}) == len(pairs)
    assert all(pair["gets_nothing"] in ("a", "b") for pair in pairs if pair["category"] == "one_sided")


def test_the_heldout_set_is_new() -> None:
    """Held out means no pair, and no user, reused from the set the negotiator was built on."""
    seen = {pair["id"] for pair in PAIRS}
    users = {pair[side]["userId"] for pair in PAIRS for side in "ab"}
    assert not seen & {pair["id"] for pair in HELDOUT}
    assert not users & {pair[side]["userId"] for pair in HELDOUT for side in "ab"}


def accuracy(games_: list[tuple[dict, str]], results: dict[tuple[str, str], list[dict]],
             label: str) -> tuple[float, list[str]]:
    """The share of games whose outcome matches the label (printed), and the wrong ones."""
    right = [matches_label(pair, results[pair["id"], first]) for pair, first in games_]
    wrong = [f"{pair['id']} ({first} opens): {outcome(results[pair['id'], first])}, expected {expected(pair)}"
             for (pair, first), ok in zip(games_, right) if not ok]
    print(f"\n{label}: {sum(right)}/{len(right)} = {sum(right) / len(right):.1%}")
    return sum(right) / len(right), wrong


def test_accuracy_over_the_labelled_pairs() -> None:
    measured, wrong = accuracy(GAMES, RESULTS, "match negotiator accuracy")
    assert measured >= ACCURACY_FLOOR, wrong


def test_accuracy_over_the_heldout_pairs() -> None:
    measured, wrong = accuracy(HELDOUT_GAMES, HELDOUT_RESULTS, "match negotiator held-out accuracy")
    print("\n".join(wrong))
    assert measured >= HELDOUT_FLOOR, wrong


@pytest.mark.parametrize("pair,first", GAMES, ids=[f"{p['id']}-{f}" for p, f in GAMES])
def test_each_category_behaves(pair: dict, first: str) -> None:
    history = RESULTS[pair["id"], first]
    assert len(history) <= CAP
    assert history[0]["action"] == "propose"
    assert all(t["action"] != "propose" for t in history[1:])
    assert all(t["action"] != "question" for t in history)
    if pair["category"] == "good":
        assert outcome(history) == "accepted"
    else:
        assert outcome(history) in ("rejected", "stalled")
    if pair["category"] == "one_sided" and outcome(history) == "rejected":
        # The side that gets nothing is the one whose advocate ends it, unless the other
        # side's advocate, seeing its user gives nothing back or an unmet condition (issue 30:
        # a paid translator and a volunteer-run project), ends it first after saying so.
        loser = pair[pair["gets_nothing"]]["userId"]
        rejecter = history[-1]["speaker"]
        assert rejecter == loser or any(
            t["speaker"] == rejecter and t["action"] == "counter"
            and ("which my user does not offer" in t["message"] or "Condition not met" in t["message"])
            for t in history)


@pytest.mark.parametrize("pair", [p for p in PAIRS if "roles" in p], ids=lambda p: p["id"])
def test_roles_follow_who_offers_what(pair: dict) -> None:
    for own, other in (("a", "b"), ("b", "a")):
        roles = judge(context(pair[own], pair[other], pair["seed"], [])).roles
        assert (roles.own_user, roles.other_user) == (pair["roles"][own], pair["roles"][other])


def test_accepting_advocates_agree_on_roles() -> None:
    """Agreed roles come from each side's last turn: in an accepted game they must fit together."""
    flip = {"agent": "patient", "patient": "agent", "peer": "peer"}
    for (pair_id, _), history in RESULTS.items():
        if outcome(history) == "accepted":
            last, before = history[-1]["assessment"]["suggestedRoles"], history[-2]["assessment"]["suggestedRoles"]
            assert last["otherUser"] == before["ownUser"] == flip[last["ownUser"]], pair_id


# --- unit tests -------------------------------------------------------------------------------

SEED = {"score": 90, "reasoning": "Both work in fintech.", "valencyRole": "peer"}


def user(user_id: str, offers: list[str], seeks: list[str], **profile: Any) -> dict:
    return {"userId": user_id, "profile": {"offers": offers, "seeks": seeks, **profile}, "intents": []}


DESIGNER = user("d", ["product design"], ["a backend engineer"])
ENGINEER = user("e", ["backend engineering"], ["a product designer"])
MENTOR = user("m", ["mentorship on fundraising"], ["first-time founders to mentor"])
MENTEE = user("f", ["a marketplace app"], ["a fundraising mentor"], role="first-time founder")
GROWTH = user("g", ["growth marketing"], ["a backend engineer", "seed investment"])


def turn(speaker: str, action: str, message: str | None = None) -> dict:
    data = {"speaker": speaker, "action": action,
            "assessment": {"reasoning": "r", "suggestedRoles": {"ownUser": "peer", "otherUser": "peer"}}}
    if message is not None:
        data["message"] = message
    return data


@pytest.mark.parametrize("own,other,roles", [
    (DESIGNER, ENGINEER, ("peer", "peer")),
    (MENTOR, MENTEE, ("agent", "patient")),
    (MENTEE, MENTOR, ("patient", "agent")),
])
def test_roles_from_offers(own: dict, other: dict, roles: tuple[str, str]) -> None:
    turn_ = decide(context(own, other, SEED, []))
    assert (turn_.assessment.suggested_roles.own_user, turn_.assessment.suggested_roles.other_user) == roles


def test_roles_fall_back_to_the_seed_actors_when_nothing_is_exchanged() -> None:
    seed = {**SEED, "actors": [{"userId": "x", "role": "agent"}, {"userId": "y", "role": "patient"}]}
    nothing = judge(context(user("x", ["sales"], ["a lawyer"]), user("y", ["sales"], ["a lawyer"]), seed, []))
    assert (nothing.roles.own_user, nothing.roles.other_user) == ("agent", "patient")


def test_propose_only_on_the_first_turn() -> None:
    assert decide(context(DESIGNER, ENGINEER, SEED, [])).action is MatchAction.PROPOSE
    later = decide(context(ENGINEER, DESIGNER, SEED, [turn("d", "propose")]))
    assert later.action is MatchAction.ACCEPT


def test_a_one_sided_opener_still_proposes_but_says_so() -> None:
    """The protocol opens with propose; the opener's honesty is in its reasoning and message."""
    first = decide(context(user("x", ["sales"], ["a lawyer"]), ENGINEER, SEED, []))
    assert first.action is MatchAction.PROPOSE
    assert '"a lawyer", which your user does not offer' in first.message


def test_never_question() -> None:
    for pair, first in GAMES:
        assert all(t["action"] != "question" for t in RESULTS[pair["id"], first])


def test_counter_names_the_concrete_missing_offer() -> None:
    # GROWTH gets a backend engineer but no investment: it counters, naming the investment.
    countered = decide(context(GROWTH, user("b", ["backend engineering"], ["growth marketing help"]), SEED,
                               [turn("b", "propose")]))
    assert countered.action is MatchAction.COUNTER
    assert 'My user seeks "seed investment", which your user does not offer.' in countered.message
    assert "backend engineer" not in countered.message.split("My user seeks", 1)[1]


def test_an_answered_objection_leads_to_accept() -> None:
    """GROWTH seeks an engineer and investment; the other offers engineering only. Its advocate's
    affirmed answer ("will invest") meets the need; the same words negated do not."""
    other = user("b", ["backend engineering"], ["growth marketing help"])
    answered = [turn("b", "propose", "My user is an angel and will invest $50k in the company.")]
    negated = [turn("b", "propose", "My user does not invest in companies.")]
    assert decide(context(GROWTH, other, SEED, answered)).action is MatchAction.ACCEPT
    assert decide(context(GROWTH, other, SEED, negated)).action is MatchAction.COUNTER
    assert [n.text for n in judge(context(GROWTH, other, SEED, negated)).unmet_own] == ["seed investment"]


def test_no_progress_on_an_unmet_core_need_is_rejected() -> None:
    """Two needs, only one met, the other side served: after an unanswered counter it accepts the
    core (half met); with three needs and one met it rejects instead of countering forever."""
    other = user("b", ["backend engineering"], ["growth marketing help"])
    stalled = [turn("b", "propose"), turn("g", "counter", "x"), turn("b", "counter", "Nothing new.")]
    assert decide(context(GROWTH, other, SEED, stalled)).action is MatchAction.ACCEPT
    greedy = user("g", ["growth marketing"], ["a backend engineer", "seed investment", "a lawyer"])
    assert decide(context(greedy, other, SEED, stalled)).action is MatchAction.REJECT


def test_the_last_turn_under_the_cap_is_a_decision_not_a_counter() -> None:
    other = user("b", ["backend engineering"], ["growth marketing help"])
    history = [turn("b", "propose")]
    assert decide(context(GROWTH, other, SEED, history, cap=6)).action is MatchAction.COUNTER
    assert decide(context(GROWTH, other, SEED, history, cap=2)).action is MatchAction.ACCEPT


def test_the_seed_score_is_not_the_verdict() -> None:
    pms = next(p for p in PAIRS if p["id"] == "two-fintech-pms-both-want-a-cto")
    high = {**pms["seed"], "score": 100}
    rejected = decide(context(pms["b"], pms["a"], high, [turn(pms["a"]["userId"], "propose")]))
    assert rejected.action is MatchAction.REJECT
    low = {**SEED, "score": 0}
    assert decide(context(ENGINEER, DESIGNER, low, [turn("d", "propose")])).action is MatchAction.ACCEPT


def test_keyword_deep_rejection_says_so() -> None:
    pms = next(p for p in PAIRS if p["id"] == "two-fintech-pms-both-want-a-cto")
    rejected = decide(context(pms["b"], pms["a"], pms["seed"], [turn(pms["a"]["userId"], "propose")]))
    assert "keyword-deep" in rejected.assessment.reasoning
    assert "fintech" in rejected.assessment.reasoning
    # Dana's bio says she "worked closely with engineering teams": working with engineers is
    # not offering engineering, so it is no evidence for Raj's need of a CTO.
    assert judge(context(pms["a"], pms["b"], pms["seed"], [])).met_other == ()


def test_listed_domains_and_seniority_words() -> None:
    """Every listed domain is reachable (the stemmer once turned "saas" into "saa" and "robotics"
    into "robotic"); "developer tools" is the devtools domain spelt out; "lead" in "lead investor"
    or "tech lead" says how senior, not what is sought."""
    assert all(concepts(domain) == {domain} for domain in DOMAINS)
    assert concepts("developer tools") == concepts("a devtools company") == {"devtools"}
    assert need_from("SaaS companies as paying clients").domains == {"saas"}
    assert concepts("a lead investor") == concepts("an investor") == {"capital"}


def test_deterministic() -> None:
    pair = PAIRS[0]
    ctx = [turn(pair["a"]["userId"], "propose", "hello")]
    first = decide(context(pair["b"], pair["a"], pair["seed"], ctx))
    again = decide(context(copy.deepcopy(pair["b"]), copy.deepcopy(pair["a"]), dict(pair["seed"]), list(ctx)))
    assert first == again
    assert play(pair, "b") == play(copy.deepcopy(pair), "b")


@pytest.mark.parametrize("mutate,field", [
    (lambda d: d["ownUser"].pop("userId"), "ownUser.userId"),
    (lambda d: d["otherUser"].update(profile="bio"), "otherUser.profile"),
    (lambda d: d["ownUser"]["intents"].append({"tags": []}), "ownUser.intents[0].description"),
    (lambda d: d["seedAssessment"].update(score=140), "seedAssessment.score"),
    (lambda d: d["seedAssessment"].pop("valencyRole"), "seedAssessment.valencyRole"),
    (lambda d: d["history"].append({**turn("e", "propose"), "action": "haggle"}), "history[0].action"),
    (lambda d: d["history"].append(turn("nobody", "propose")), "history[0].speaker"),
    (lambda d: d["history"].extend([turn("e", "propose"), turn("d", "reject")]), "history[1].action"),
    (lambda d: d.update(maxTurns="six"), "maxTurns"),
])
def test_malformed_input_names_the_field(mutate: Any, field: str) -> None:
    data = {"ownUser": copy.deepcopy(DESIGNER), "otherUser": copy.deepcopy(ENGINEER),
            "seedAssessment": dict(SEED), "history": []}
    mutate(data)
    with pytest.raises(InvalidInput) as raised:
        parse_context(data)
    assert field in raised.value.message


# --- rivals: two users who seek the same thing (issue 30) -------------------------------------------

BAKER_A = user("ba", ["sourdough loaves"], ["cafe customers for our bread"], role="Artisan baker")
BAKER_B = user("bb", ["rye and sourdough bread"], ["cafe customers for bread"], role="Bakery owner, baker")


def test_two_users_who_seek_the_same_are_rivals_and_say_so() -> None:
    j = judge(context(BAKER_A, BAKER_B, SEED, []))
    assert not j.met_own and set(j.rivals) == set(j.own_needs)
    played = decide(context(BAKER_A, BAKER_B, SEED, [turn("bb", "propose", "My user offers bread.")]))
    assert played.action is MatchAction.REJECT
    assert ('My user seeks "cafe customers for our bread" and your user seeks "cafe customers for bread"'
            in played.assessment.reasoning)


def test_seeking_the_same_partner_is_no_rivalry() -> None:
    a = user("ta", ["weekday evening tennis"], ["a tennis partner for weekday evenings"], role="Tennis player")
    b = user("tb", ["tennis on weekday evenings"], ["a weekday evenings tennis partner"], role="Tennis player")
    assert not judge(context(a, b, SEED, [])).rivals


def test_the_same_words_from_different_kinds_of_user_are_no_rivalry() -> None:
    # A dog owner's "walk my dog at midday" and a walker's "more dogs for midday walks" share their
    # words, but an office worker and a dog walker are not the same kind of user.
    owner = user("o", ["£15 a walk"], ["dog walks at midday"], role="Office worker")
    walker = user("w", ["dog walking"], ["more dogs for midday walks"], role="Dog walker")
    assert not judge(context(owner, walker, SEED, [])).rivals


# --- who a user would be: "be an au pair", "speaking opportunities" (issue 30) ----------------------

def test_a_need_to_be_something_is_who_the_user_is_and_is_met_by_whoever_seeks_one() -> None:
    host = user("h", ["a room of your own", "$300/week"], ["a live-in au pair who speaks French"], role="Parent")
    host["intents"] = [{"description": "Host an au pair from January"}]
    hopeful = user("p", ["childcare", "French"], ["a host family in Canada"], role="Nursing student")
    hopeful["intents"] = [{"description": "Be an au pair in Canada"}]
    j = judge(context(host, hopeful, SEED, []))
    assert {n.text for n in j.met_own} >= {"a live-in au pair who speaks French"}
    assert "Be an au pair in Canada" in {n.text for n in j.met_other}


def test_speaking_opportunities_meet_a_search_for_a_speaker() -> None:
    organiser = user("o", ["travel covered", "a stage"], ["a keynote speaker on ocean robotics"], role="Organiser")
    speaker = user("s", ["talks on underwater robotics"], ["speaking opportunities"], role="Roboticist")
    j = judge(context(organiser, speaker, SEED, []))
    assert [n.text for n in j.met_own] == ["a keynote speaker on ocean robotics"]
    assert [n.text for n in j.met_other] == ["speaking opportunities"]
    # Not the other way round: wanting to speak is not wanting a speaker.
    listener = user("l", ["a season ticket"], ["talks to attend"], role="Student")
    assert not judge(context(speaker, listener, SEED, [])).met_own


def test_endings_that_double_a_consonant_are_undone() -> None:
    assert concepts("dog sitting") == concepts("dog sit")
    assert concepts("shopping") == concepts("shop")
    assert concepts("billing") == concepts("bill") == {"bill"}  # l, s, z, f stay doubled
    assert concepts("dressing") == {"dress"}


def test_reasoning_names_the_users_words_not_the_lexicons() -> None:
    # WordNet's first sense of "runner" is a smuggler ("contrabandist") and London is "british
    # capital": those names are the matcher's, never what an advocate says.
    a = user("ra", ["marathon pacing"], ["a solicitor"], role="Runner in London")
    b = user("rb", ["interval sessions"], ["an accountant"], role="Runner in London")
    seed = {"score": 70, "reasoning": "Both are runners in London.", "valencyRole": "peer"}
    reasoning = decide(context(a, b, seed, [turn("rb", "propose", "My user offers interval sessions.")]))\
        .assessment.reasoning
    assert "contrabandist" not in reasoning and "british capital" not in reasoning
    assert "runners" in reasoning and "London" in reasoning


def test_a_seek_that_is_only_a_condition_is_no_need() -> None:
    # "minimum £14 an hour" is compared as money (match_conditions); as a need nobody could
    # "offer" it, and a pay-meeting job would be refused for it.
    worker = user("w", ["forklift licence"], ["permanent night shifts", "minimum £14 an hour"], role="Warehouse operative")
    j = judge(context(worker, user("e", ["permanent night shifts at £15 an hour"], ["a forklift driver"]), SEED, []))
    assert [n.text for n in j.own_needs] == ["permanent night shifts"]
    assert not j.conflicts
    cheap = judge(context(worker, user("e", ["permanent night shifts at £11 an hour"], ["a forklift driver"]), SEED, []))
    assert [c.kind for c in cheap.conflicts] == ["money"]


def test_another_kind_of_the_same_thing_does_not_meet_a_need() -> None:
    parent = user("p", ["an old cello to give away"], ["a trumpet teacher for my daughter"], role="Parent")
    teacher = user("t", ["piano lessons"], ["piano pupils"], role="Piano teacher")
    assert not judge(context(parent, teacher, SEED, [])).met_own
    # A quality is no other kind: a "patient" teacher is met by a piano teacher who is patient.
    patient = user("q", ["a spare room"], ["a patient piano teacher"], role="Parent")
    assert [n.text for n in judge(context(patient, teacher, SEED, [])).met_own] == ["a patient piano teacher"]
    trumpet = user("u", ["trumpet lessons"], ["trumpet pupils"], role="Brass teacher")
    assert [n.text for n in judge(context(parent, trumpet, SEED, [])).met_own] == ["a trumpet teacher for my daughter"]


def test_two_givers_of_the_same_exchange_are_rivals_for_its_takers() -> None:
    # Both offer mentoring and both want people to mentor: neither takes what the other gives.
    a = user("ma", ["mentoring on supply chains"], ["first-time founders to mentor"], role="Retired COO, mentor")
    b = user("mb", ["mentoring on finance"], ["early founders who want a mentor"], role="Retired CFO, mentor")
    j = judge(context(a, b, SEED, []))
    assert j.both_give == {"mentorship"} and not j.met_own and not j.met_other
    played = decide(context(a, b, SEED, [turn("mb", "propose", "My user offers mentoring on finance.")]))
    assert played.action is MatchAction.REJECT
    assert "Both users offer mentorship and neither seeks it" in played.assessment.reasoning
    # A mentee who seeks mentoring is no rival, whatever it offers.
    mentee = user("f", ["a marketplace app"], ["a supply-chain mentor"], role="First-time founder")
    assert not judge(context(a, mentee, SEED, [])).both_give
    # A giver with nothing to ask has no need to quote: the rivalry is no objection of its own.
    quiet = user("q", ["mentoring on finance"], [], role="Retired CFO, mentor")
    assert [whose for whose, _ in judge(context(quiet, b, SEED, [])).objections] == ["other"]


def test_a_long_profile_of_numbers_is_judged_in_linear_time() -> None:
    # Each amount's context was searched over the whole clause before it: a 100 KB clause of
    # bare numbers (a request body holds 64 KB) took about a minute; now about a second.
    import time
    crowded = user("n", ["x"], ["y"], bio=" ".join(["12"] * 33_000))
    started = time.monotonic()
    judge(context(crowded, ENGINEER, SEED, []))
    assert time.monotonic() - started < 15


def test_a_contraction_negates_and_an_aversion_is_no_offer() -> None:
    # "I can't write code" once read as offering code; "hate pickleball" as playing it.
    assert affirmed_concepts("I can't write code.") == frozenset()
    assert affirmed_concepts("Hate pickleball, love tennis.") == frozenset()
    assert "engineering" in affirmed_concepts("I write code.")


def test_an_unknown_hyphenated_word_is_also_its_parts() -> None:
    assert {"sit", "cat"} <= concepts("a cat-sitting swap")
    assert concepts("a co-founder") == concepts("a cofounder")  # known words stay joined


def test_agent_nouns_meet_their_roots() -> None:
    band = user("b", ["gigs every Friday"], ["a drummer"], role="Band")
    percussion = user("p", ["drums and percussion"], ["a band to join"], role="Percussionist")
    assert [n.text for n in judge(context(band, percussion, SEED, [])).met_own] == ["a drummer"]


def test_two_who_seek_the_same_and_offer_none_of_it_are_rivals_whoever_they_are() -> None:
    a = user("ia", ["a pitch deck", "fundraising contacts"], ["a technical co-founder"], role="MBA student")
    b = user("ib", ["creator relationships"], ["a technical co-founder"], role="Marketing consultant")
    assert set(judge(context(a, b, SEED, [])).rivals) == set(judge(context(a, b, SEED, [])).own_needs)
    # One who offers it is the answer, not a rival.
    c = user("ic", ["backend engineering"], ["a technical co-founder"], role="Marketing consultant")
    assert not judge(context(a, c, SEED, [])).rivals


def test_an_intents_tags_are_what_the_user_is_about_not_what_it_asks() -> None:
    # Two gym beginners who both want a trainer: the tags "gym strength" on one's intent once let
    # the other's gym profile "meet" it.
    a = user("ga", ["a spotter"], [], role="Gym beginner")
    a["intents"] = [{"description": "Learn to lift safely", "tags": ["gym", "strength"]}]
    b = user("gb", ["gym strength sessions"], [], role="Gym regular")
    assert [n.text for n in judge(context(a, b, SEED, [])).own_needs] == ["Learn to lift safely"]
