"""Conditions of a match (``haggler.agents.match_conditions``), issue 30.

* Every rule met, unmet and absent, with the objection quoting each side's words exactly
  (numbers as written: "NTRP 4.5+" stays "NTRP 4.5+").
* The negotiator turns an unmet condition into an objection, then a rejection; a need is met by
  who the other user is (a new team lead *is* a first-time engineering manager to mentor).
* The v2 tuning pairs played system against system, each side opening: an accuracy floor
  measured on the same pairs the method was tuned on (in-sample, not an estimate of unseen pairs).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from haggler.agents.match_conditions import conditions, conflicts
from haggler.agents.match_context import MatchAction, UserContext, UserIntent, parse_context
from haggler.agents.match_negotiator import decide, judge

ROOT = Path(__file__).resolve().parent


def person(uid: str, **profile: Any) -> UserContext:
    intents = tuple(UserIntent(d) for d in profile.pop("intents", ()))
    return UserContext(uid, profile, intents)


def only_conflict(a: UserContext, b: UserContext) -> tuple[str, str, str] | None:
    found = conflicts(a, b)
    assert len(found) <= 1, found
    return (found[0].kind, found[0].mine.quote, found[0].theirs.quote) if found else None


# --- one case per rule: unmet, met, absent -------------------------------------------------------

PARENT_FREE = person("p", bio="We can only take free tutoring.", seeks=["a maths tutor"])
TUTOR_85 = person("t", bio="I tutor maths at $85/hour.", offers=["maths tutoring"])
TUTOR_PLAIN = person("t", offers=["maths tutoring"])
PARENT_35 = person("p", bio="Up to £35 an hour.", seeks=["a maths tutor"])
TUTOR_30 = person("t", bio="£30/hr, weekday evenings.", offers=["GCSE maths tuition"])


@pytest.mark.parametrize("a,b,expected", [
    (PARENT_FREE, TUTOR_85, ("money", "We can only take free tutoring", "I tutor maths at $85/hour")),
    (PARENT_35, TUTOR_30, None),                        # £30/hr is within "up to £35 an hour"
    (PARENT_FREE, TUTOR_PLAIN, None),                   # no price stated: absent, not a conflict
    (person("s", bio="Need a room, max £700 a month."), person("l", bio="Double room, £1,450 a month."),
     ("money", "max £700 a month", "£1,450 a month")),
    (person("s", bio="Budget £100–150 per month."), person("l", bio="£120 a month towards costs."), None),
    (person("w", seeks=["minimum £14 an hour"]), person("e", bio="Night shifts pay £11 an hour."),
     ("money", "minimum £14 an hour", "Night shifts pay £11 an hour")),
    (person("w", seeks=["minimum £14 an hour"]), person("e", bio="Night shifts pay £15 an hour."), None),
    # An employer's floor is what it pays at least; a seeker's sought amount is what it asks.
    (person("e", bio="Salary from £30,000 a year."), person("c", seeks=["a marketing role at £28,000 a year"]),
     None),
    # "gluten-free" is free of gluten, not a price of nothing ("rent-free" is: see below).
    (person("w", seeks=["bakery work", "minimum £14 an hour"]), person("b", bio="Gluten-free bakery, hiring."), None),
])
def test_money(a: UserContext, b: UserContext, expected: tuple | None) -> None:
    assert only_conflict(a, b) == expected


def test_money_quotes_numbers_exactly_and_the_sentence_names_both_sides() -> None:
    (found,) = conflicts(PARENT_FREE, TUTOR_85)
    assert found.theirs.span == "$85/hour"
    assert found.sentence() == ('Condition not met (money): my user can pay at most "We can only take free tutoring"; '
                                'your user states "I tutor maths at $85/hour".')
    rent = conflicts(person("s", bio="max £700 a month."), person("l", bio="£1,450 a month excluding bills."))
    assert rent[0].theirs.span == "£1,450 a month"


ONSITE = person("c", bio="Everybody works on-site in Zurich.", seeks=["a Python developer on-site in Zurich"])
REMOTE = person("d", bio="I live in Porto and will not relocate. Remote only.")


@pytest.mark.parametrize("a,b,kind", [
    (ONSITE, REMOTE, "place"),
    (person("g", bio="Meets weekly in person in Auckland."), person("s", role="Sewer, Oslo"), "place"),
    (person("g", bio="Meets weekly in person in Leeds."), person("s", bio="I live in Leeds."), None),
    (ONSITE, person("d", bio="Happy to work remote or hybrid."), None),  # either side remote-friendly
    (ONSITE, person("d", bio="Python developer."), None),               # place unknown: absent
])
def test_place(a: UserContext, b: UserContext, kind: str | None) -> None:
    found = conflicts(a, b)
    assert (found[0].kind if found else None) == kind


@pytest.mark.parametrize("a,b,expected", [
    (person("r", seeks=["a singles partner, NTRP 4.5+"]), person("t", bio="NTRP 2.5, play doubles."),
     ("level", "NTRP 4.5+", "NTRP 2.5")),
    (person("r", seeks=["a singles partner, NTRP 4.5+"]), person("t", bio="Rated 4.5 (USTA)."), None),
    (person("r", seeks=["a singles partner, NTRP 4.5+"]), person("t", bio="Love tennis."), None),
    (person("c", bio="Only senior finance leaders, 15+ years."), person("i", role="Finance intern"),
     ("level", "Only senior finance leaders", "Finance intern")),
    (person("b", bio="Pros only."), person("d", bio="Learning drums for 6 months, grade 1."),
     ("level", "Pros only", "Learning drums for 6 months")),
])
def test_level(a: UserContext, b: UserContext, expected: tuple | None) -> None:
    assert only_conflict(a, b) == expected
    if expected:  # the number as written: "4.5+" is never "4,5+"
        assert "4,5" not in conflicts(a, b)[0].sentence()


@pytest.mark.parametrize("a,b,expected", [
    (person("n", bio="I work nights 8pm–8am."), person("m", bio="Experienced nanny, daytime only, 8am to 5pm."),
     ("schedule", "I work nights 8pm–8am", "daytime only")),
    (person("o", bio="Need my dog walked 6am daily."), person("w", bio="Walks from 10am to 3pm only."),
     ("schedule", "Need my dog walked 6am daily", "Walks from 10am to 3pm only")),
    (person("b", bio="Gigs every Saturday evening."), person("k", bio="I'm never free Saturday evenings."),
     ("schedule", "Gigs every Saturday evening", "I'm never free Saturday evenings")),
    (person("f", bio="Need a carer, live-in, 24/7."), person("c", bio="Day visits only, 9–5."),
     ("schedule", "live-in", "Day visits only")),
    (person("p", bio="Tuesdays and Thursdays after school."), person("t", bio="Weekday evenings only."), None),
    (person("p", bio="Tuesdays after school."), person("t", bio="Maths tutor."), None),
])
def test_schedule(a: UserContext, b: UserContext, expected: tuple | None) -> None:
    assert only_conflict(a, b) == expected


@pytest.mark.parametrize("a,b,expected", [
    (person("f", seeks=["a Spanish-speaking au pair"]), person("v", bio="Native Portuguese speaker."),
     ("language", "a Spanish-speaking au pair", "Native Portuguese speaker")),
    (person("f", seeks=["a Spanish-speaking au pair"]), person("v", bio="Native Spanish.", offers=["Spanish"]),
     None),
    (person("f", seeks=["a Spanish-speaking au pair"]), person("v", bio="Two years of childcare."), None),
    (person("f", seeks=["a Spanish-speaking au pair"]), person("v", bio="Learning Spanish."), None),
])
def test_language(a: UserContext, b: UserContext, expected: tuple | None) -> None:
    assert only_conflict(a, b) == expected


@pytest.mark.parametrize("a,b,expected", [
    (person("j", seeks=["a senior Java/Spring Boot backend developer"]),
     person("d", bio="Not interested in backend work anymore - I want to stay on the frontend."),
     ("stack", "a senior Java/Spring Boot backend developer", "Not interested in backend work anymore")),
    (person("e", seeks=["a coauthor fluent in Stata"]), person("s", bio="I only work in Python."),
     ("stack", "a coauthor fluent in Stata", "I only work in Python")),
    (person("e", seeks=["a coauthor fluent in Stata"]), person("s", bio="Stata and R, ten years."), None),
    (person("e", seeks=["a coauthor fluent in Stata"]), person("s", bio="Labour economist."), None),
])
def test_stack(a: UserContext, b: UserContext, expected: tuple | None) -> None:
    assert only_conflict(a, b) == expected


@pytest.mark.parametrize("a,b,expected", [
    (person("c", bio="Youth theatre. Members must be 16 or over.", seeks=["actors for our summer show"]),
     person("k", role="Drama student, 14", seeks=["a summer theatre group"]),
     ("age", "Members must be 16 or over", "Drama student, 14")),
    (person("c", seeks=["swimmers aged 8-11 for the squad"]), person("k", bio="My daughter is keen; I'm 34."),
     None),                                               # the parent's own age says nothing of the child
    (person("c", seeks=["swimmers aged 8-11 for the squad"]), person("k", role="Swimmer, 13"),
     ("age", "swimmers aged 8-11 for the squad", "Swimmer, 13")),
    (person("c", bio="Members must be 16 or over."), person("k", role="Drama student, 17"), None),
    (person("c", bio="Members must be 16 or over."), person("k", role="Drama student"), None),  # absent
    # Numbers of minutes or kilos and the age of a thing are no one's age.
    (person("c", bio="Members must be 18 or over."), person("k", bio="We are a 15-year-old company."), None),
    (person("c", bio="Members must be 18 or over."), person("k", bio="I'm 15 minutes from the club."), None),
    (person("c", seeks=["a gym under 30 minutes from home"]), person("k", bio="I'm 34, a personal trainer."), None),
    (person("c", bio="Members must be 18 or over."), person("k", bio="A 15-year-old student, keen."),
     ("age", "Members must be 18 or over", "A 15-year-old student")),
])
def test_age(a: UserContext, b: UserContext, expected: tuple | None) -> None:
    assert only_conflict(a, b) == expected


@pytest.mark.parametrize("a,b,expected", [
    (person("p", bio="Screen printing. MOQ 250 shirts."), person("b", seeks=["band T-shirts, 40 per order"]),
     ("quantity", "MOQ 250 shirts", "40 per order")),
    (person("p", bio="Minimum run of 1,000 labels."), person("b", seeks=["labels, 1,500 a month"]), None),
    (person("p", bio="Minimum order 500 units."), person("b", bio="Need 2 days a week of packing help."), None),
    (person("p", bio="Minimum order 500 units."), person("b", seeks=["£300 a month of labels"]), None),  # money
])
def test_quantity(a: UserContext, b: UserContext, expected: tuple | None) -> None:
    assert only_conflict(a, b) == expected


@pytest.mark.parametrize("a,b,expected", [
    (person("h", bio="Spare room in Hove. Strictly no pets."), person("t", seeks=["a room for me and my puppy"]),
     ("refusal", "Strictly no pets", "a room for me and my puppy")),  # a puppy is a dog, a domestic animal
    (person("s", bio="Horse riding lessons. Allergic to dogs, sorry."), person("o", seeks=["someone to mind my dog"]),
     ("refusal", "Allergic to dogs", "someone to mind my dog")),
    (person("b", bio="Baking for events. Everything is nut-free."), person("e", seeks=["a cake with walnuts"]),
     ("refusal", "Everything is nut-free", "a cake with walnuts")),
    (person("h", bio="No one to help me with the garden yet."), person("t", seeks=["a garden to look after"]),
     None),                                               # a lack, not a refusal
    (person("h", bio="Strictly no pets."), person("t", seeks=["a quiet room near the station"]), None),
    (person("h", bio="Happy to help. No problem."), person("t", seeks=["help with a maths problem"]), None),
    (person("h", bio="Hands-free kit fitting."), person("t", seeks=["a hand with my move"]), None),
    (person("h", bio="No dogs."), person("t", seeks=["someone to mind my dog"]),
     ("refusal", "No dogs", "someone to mind my dog")),
])
def test_refusal(a: UserContext, b: UserContext, expected: tuple | None) -> None:
    assert only_conflict(a, b) == expected


def test_x_free_is_money_only_when_x_is() -> None:
    money = lambda bio: [c.span for c in conditions(person("x", bio=bio)) if c.kind == "money"]  # noqa: E731
    assert money("Gluten-free cakes. Smoke-free home.") == []
    assert money("A rent-free room for a carer.") == ["free"]


def test_conditions_carry_the_original_substring() -> None:
    spans = {c.span for c in conditions(person("x", bio="NTRP 4.5+ only. Salary 110,000. From £8,500."))}
    assert {"NTRP 4.5+", "110,000", "£8,500"} <= spans


# --- in the negotiator ---------------------------------------------------------------------------

SEED = {"score": 80, "reasoning": "Both tutor-adjacent.", "valencyRole": "peer"}


def user(uid: str, **profile: Any) -> dict:
    intents = [{"description": d} for d in profile.pop("intents", [])]
    return {"userId": uid, "profile": profile, "intents": intents}


def turn(speaker: str, action: str, message: str = "") -> dict:
    return {"speaker": speaker, "action": action, "message": message,
            "assessment": {"reasoning": "r", "suggestedRoles": {"ownUser": "peer", "otherUser": "peer"}}}


def ctx(own: dict, other: dict, history: list[dict]) -> Any:
    return parse_context({"ownUser": own, "otherUser": other, "seedAssessment": SEED, "history": history,
                          "maxTurns": 6})


KAYLA = user("kayla", bio="My daughter needs help with algebra. We can only take free tutoring.",
             offers=["home-made cookies"], seeks=["an algebra tutor for my daughter"])
VICTOR = user("victor", role="Maths tutor", bio="I charge $85/hour.", offers=["algebra tutoring"],
              seeks=["paying students for algebra"])


def test_an_unmet_condition_is_countered_in_the_users_words_then_rejected() -> None:
    countered = decide(ctx(VICTOR, KAYLA, [turn("kayla", "propose")]))
    assert countered.action is MatchAction.COUNTER
    assert ('Condition not met (money): my user states "I charge $85/hour"; '
            'your user can pay at most "We can only take free tutoring".') in (countered.message or "")
    history = [turn("kayla", "propose"), turn("victor", "counter", countered.message or ""),
               turn("kayla", "counter", "My user offers home-made cookies.")]
    assert decide(ctx(VICTOR, KAYLA, history)).action is MatchAction.REJECT


def test_the_person_is_the_offer() -> None:
    """Issue 30: a retired VP who wants to mentor new engineering managers, and a new team lead
    asking for a mentor. The lead *is* what the VP seeks, though it lists no such offer."""
    vp = user("vp", role="Retired VP of Engineering", bio="Thirty years in engineering leadership.",
              offers=["mentoring for engineering managers"], intents=["I want to mentor new engineering managers"])
    lead = user("lead", role="New team lead", bio="Just promoted to lead an engineering team of six.",
                offers=["a fresh view of management"], seeks=["a mentor for my first year as a manager"])
    seen = judge(ctx(vp, lead, []))
    assert seen.unmet_own == () and seen.met_other
    assert decide(ctx(vp, lead, [turn("lead", "propose")])).action is MatchAction.ACCEPT
    # Takers of an offer: a tutor seeking students is met by a parent seeking what it tutors.
    tutor = user("t", role="Maths tutor", offers=["GCSE maths tuition"], seeks=["a few more GCSE students"])
    parent = user("p", role="Parent", bio="My son is in Year 11.", seeks=["a maths tutor for my son"])
    assert judge(ctx(tutor, parent, [])).unmet_own == ()
    # ...but not by someone who seeks a different thing from it.
    landlady = user("l", offers=["room in Lavapiés", "advice on Madrid neighbourhoods"], seeks=["a tenant for the room"])
    mover = user("m", seeks=["advice on which Madrid neighbourhood to live in"])
    assert [n.text for n in judge(ctx(landlady, mover, [])).unmet_own] == ["a tenant for the room"]


# --- the v2 tuning pairs -------------------------------------------------------------------------

#: Measured with ``benchmarks/match_quality.py --pairs tuning`` on the TUNING pairs the method was
#: developed against, so in-sample, not an estimate for unseen pairs: before issue 30's method changes 179/288
#: (62.2%), after 211/288 (73.3%); superficial pairs that fail a money, level, schedule or stack
#: condition 30/30 runs right (place 6/10, "other" 0/10). The floor sits just under the measured value.
TUNE_FLOOR = 0.73


def test_accuracy_over_the_v2_tuning_pairs_in_sample() -> None:
    import sys
    sys.path.insert(0, str(ROOT.parent.parent / "benchmarks"))
    try:
        from match_quality import play, right
    finally:
        sys.path.pop(0)
    pairs = json.loads((ROOT / "match_pairs_tune_v2.json").read_text())["pairs"]
    results = [right(pair, play(pair, first)) for pair in pairs for first in "ab"]
    print(f"\nv2 tuning pairs (in-sample): {sum(results)}/{len(results)} = {sum(results) / len(results):.1%}")
    assert sum(results) / len(results) >= TUNE_FLOOR


def test_a_bare_rating_with_a_plus_is_a_minimum() -> None:
    a, b = person("a", seeks=["hitting partners 4.5+ only"]), person("b", bio="NTRP 2.5, just started.")
    assert only_conflict(a, b) == ("level", "hitting partners 4.5+ only", "NTRP 2.5")
    assert only_conflict(a, person("c", bio="Python 3.11+ and Django.")) is None  # a version, no rating


def test_an_accepting_negation_is_no_refusal_and_a_spoken_negation_no_language() -> None:
    # "doesn't mind starting at 4 in the morning" accepts mornings; it rules nothing out.
    bakery = person("b", seeks=["a baker who doesn't mind starting at 4 in the morning"])
    baker = person("k", bio="Morning person, bread production since 2015.")
    assert only_conflict(bakery, baker) is None
    # "I don't speak French" is no French spoken: a French-speaking need has nothing to fail on.
    family = person("f", seeks=["a French-speaking nanny"])
    assert only_conflict(family, person("n", bio="I don't speak French.")) is None
    assert only_conflict(family, person("n", bio="I speak Italian.")) == ("language", "a French-speaking nanny",
                                                                          "I speak Italian")


@pytest.mark.parametrize("a,b,expected", [
    (person("o", seeks=["a field for 5,000 festival-goers"]), person("f", bio="Farm venue, up to 200 people."),
     ("quantity", "a field for 5,000 festival-goers", "up to 200 people")),
    (person("o", seeks=["a wedding venue for 120 guests"]), person("f", bio="The barn holds 300 guests."), None),
    (person("o", seeks=["a sublet for 3 months"]), person("f", bio="Sleeps 2."), None),  # months, not people
    (person("o", seeks=["a venue for 120 guests"]), person("f", bio="Courses of up to 3 days."), None),
])
def test_capacity(a: UserContext, b: UserContext, expected: tuple | None) -> None:
    assert only_conflict(a, b) == expected


def test_an_academic_level() -> None:
    lab = person("l", seeks=["a PhD-level statistician to co-author"])
    assert only_conflict(lab, person("u", role="Second-year undergrad")) == (
        "level", "a PhD-level statistician to co-author", "Second-year undergrad")
    assert only_conflict(lab, person("p", role="Biostatistician, postdoc")) is None
    assert only_conflict(lab, person("s", role="Statistician")) is None  # no level stated
