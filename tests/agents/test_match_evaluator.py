"""The opportunity evaluator (``haggler.agents.match_evaluator``), spec 002.

* Every labelled pair of both files (``match_pairs.json``, ``match_pairs_heldout.json``) scored:
  how well ``DEFAULT_THRESHOLD`` separates good pairs from the rest is printed (overall and per
  file) and held to the measured floor; good pairs must rank above the others (AUC) and score
  higher on average than each other category.
* Properties: symmetric (neutral) scores, roles that fit together, int scores in 0..100, valid
  roles and actors, a one-sided match bounded under the threshold, deterministic.
* ``discover``: best first, ties by user id, threshold, limit, the source skipped, bad arguments.
* The discovery query raises the candidates that offer what it names, and only those.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence

import pytest

from haggler.agents.match_context import ROLES, UserContext, parse_context
from haggler.agents.match_evaluator import (
    DEFAULT_THRESHOLD,
    ONE_WAY_WEIGHT,
    SHARED_WEIGHT,
    Candidate,
    discover,
    evaluate,
)
from haggler.errors import InvalidInput
from tests.support.match_pairs import HELDOUT, PAIRS

#: Measured at DEFAULT_THRESHOLD = 50 over the 66 labelled pairs: 60/66 = 90.9% (27/29 good at
#: or above, 33/37 not-good below; the six misses are all held-out pairs). One more miss fails.
SEPARATION_FLOOR = 0.90
#: Measured: 0.977 — the chance a random good pair outscores a random not-good one. Issue 30
#: (conditions drop the mutual term; needs met by who the other user is) measured 0.932: 1.000
#: on the labelled pairs as before, the drop is on the held-out ones, which were not looked at
#: or tuned to; separation stays 60/66. On the v2 tuning pairs the AUC went from 0.570 to 0.642.
AUC_FLOOR = 0.93


def users(pair: dict) -> tuple[UserContext, UserContext]:
    """A labelled pair's two users, read the way the service reads them."""
    read = parse_context({"ownUser": pair["a"], "otherUser": pair["b"], "seedAssessment": pair["seed"]})
    return read.own, read.other


ALL = [(name, pair) for name, pairs in (("labelled", PAIRS), ("held-out", HELDOUT)) for pair in pairs]
SCORES = {pair["id"]: evaluate(*users(pair)).score for _, pair in ALL}


def separation(pairs: Sequence[dict], label: str) -> float:
    """The share of pairs DEFAULT_THRESHOLD puts on the side of their label (printed, with the
    misses), good meaning at or above it."""
    good = [p for p in pairs if p["category"] == "good"]
    rest = [p for p in pairs if p["category"] != "good"]
    above = sum(SCORES[p["id"]] >= DEFAULT_THRESHOLD for p in good)
    below = sum(SCORES[p["id"]] < DEFAULT_THRESHOLD for p in rest)
    print(f"\nevaluator at threshold {DEFAULT_THRESHOLD}, {label}: good at or above {above}/{len(good)}, "
          f"not-good below {below}/{len(rest)}, separation {above + below}/{len(pairs)} "
          f"= {(above + below) / len(pairs):.1%}")
    for p in pairs:
        if (SCORES[p["id"]] >= DEFAULT_THRESHOLD) != (p["category"] == "good"):
            print(f"  {p['id']} ({p['category']}): {SCORES[p['id']]}")
    return (above + below) / len(pairs)


def test_the_default_threshold_separates_good_from_not_good() -> None:
    separation(PAIRS, "labelled")
    separation(HELDOUT, "held-out")
    assert separation(PAIRS + HELDOUT, "both") >= SEPARATION_FLOOR


def test_good_pairs_rank_above_the_rest() -> None:
    by = {c: [SCORES[p["id"]] for _, p in ALL if p["category"] == c] for c in ("good", "superficial", "one_sided")}
    rest = by["superficial"] + by["one_sided"]
    auc = sum((g > r) + (g == r) / 2 for g in by["good"] for r in rest) / (len(by["good"]) * len(rest))
    means = {c: sum(s) / len(s) for c, s in by.items()}
    print(f"\nevaluator means: {', '.join(f'{c} {m:.0f}' for c, m in means.items())}; AUC {auc:.3f}")
    assert means["good"] > means["superficial"] + 30 and means["good"] > means["one_sided"] + 30
    assert auc >= AUC_FLOOR


@pytest.mark.parametrize("pair", [p for _, p in ALL], ids=lambda p: p["id"])
def test_every_assessment_is_well_formed_and_neutral(pair: dict) -> None:
    a, b = users(pair)
    ab, ba = evaluate(a, b), evaluate(b, a)
    for seed, source, candidate in ((ab, a, b), (ba, b, a)):
        assert isinstance(seed.score, int) and 0 <= seed.score <= 100
        assert seed.valency_role in ROLES
        assert [user for user, _ in seed.actors] == [source.user_id, candidate.user_id]
        assert all(role in ROLES for _, role in seed.actors)
        assert seed.actors[0][1] == seed.valency_role
        assert seed.reasoning and "\n" not in seed.reasoning
    # A neutral third party: the same score whichever user discovery started from, roles that fit.
    assert ab.score == ba.score
    flip = {"agent": "patient", "patient": "agent", "peer": "peer"}
    assert ab.actors[1][1] == flip[ab.actors[0][1]]
    assert (ab.actors[0][1], ab.actors[1][1]) == (ba.actors[1][1], ba.actors[0][1])


@pytest.mark.parametrize("pair", [p for p in PAIRS if "roles" in p], ids=lambda p: p["id"])
def test_roles_agree_with_the_labels(pair: dict) -> None:
    seed = evaluate(*users(pair))
    assert dict(seed.actors) == {pair[side]["userId"]: pair["roles"][side] for side in "ab"}


def test_the_seed_is_not_consulted() -> None:
    """The evaluator produces the seed; a pair's labelled seed (or its absence) changes nothing."""
    pair = PAIRS[0]
    other_seed = parse_context({"ownUser": pair["a"], "otherUser": pair["b"],
                                "seedAssessment": {"score": 0, "reasoning": "", "valencyRole": "patient"}})
    assert evaluate(other_seed.own, other_seed.other) == evaluate(*users(pair))


# --- behaviour on small profiles --------------------------------------------------------------

def user(user_id: str, offers: list[str], seeks: list[str], **profile: object) -> UserContext:
    return UserContext(user_id, {"name": user_id.title(), "offers": offers, "seeks": seeks, **profile})


SAM = user("sam", ["backend engineering"], ["a designer to co-found with", "seed investment"])
DINA = user("dina", ["product design"], ["a backend engineer"])
ARI = user("ari", ["angel investment"], ["technical founders to back"], role="Angel investor")
MO = user("mo", ["growth marketing"], ["a backend engineer"])
BO = user("bo", [], ["a backend engineer"], bio="I have designed mobile apps for ten years.")
NED = user("ned", ["gardening"], ["a choir to sing with"])
OTHERS = [MO, DINA, ARI, BO, NED]


def test_complementarity_beats_one_sidedness_and_common_ground() -> None:
    mutual, one_sided, nothing = evaluate(SAM, DINA), evaluate(SAM, MO), evaluate(SAM, NED)
    assert mutual.score >= DEFAULT_THRESHOLD > one_sided.score > nothing.score
    assert (mutual.valency_role, one_sided.valency_role) == ("peer", "agent")
    # The reasoning names what each side gives the other, in their own words.
    assert '"product design"' in mutual.reasoning and '"backend engineering"' in mutual.reasoning
    assert "does not offer" in one_sided.reasoning
    assert "neither" in nothing.reasoning.lower()


def test_a_one_sided_match_cannot_reach_the_threshold() -> None:
    """Only one side gains: at most the one-way and shared-keyword points, under the threshold."""
    assert ONE_WAY_WEIGHT + SHARED_WEIGHT < DEFAULT_THRESHOLD
    assert evaluate(SAM, MO).score <= ONE_WAY_WEIGHT + SHARED_WEIGHT


def test_a_declared_offer_counts_more_than_a_bio_sentence() -> None:
    """Bo only *says* in a bio that it designs; the evaluator credits it, less than Dina's offer."""
    assert evaluate(SAM, DINA).score > evaluate(SAM, BO).score >= DEFAULT_THRESHOLD
    assert "I have designed mobile apps" in evaluate(SAM, BO).reasoning


def test_same_user_is_invalid() -> None:
    with pytest.raises(InvalidInput):
        evaluate(SAM, copy.deepcopy(SAM))


# --- discover ---------------------------------------------------------------------------------

def test_discover_orders_best_first_then_by_user_id() -> None:
    found = discover(SAM, OTHERS, threshold=0)
    scores = [(c.seed.score, c.user_id) for c in found]
    assert scores == sorted(scores, key=lambda s: (-s[0], s[1]))
    assert all(isinstance(c, Candidate) and c.seed == evaluate(SAM, u) for c in found
               for u in OTHERS if u.user_id == c.user_id)
    # Ari and Dina tie: the order is by user id, never by the order they arrived in.
    assert evaluate(SAM, ARI).score == evaluate(SAM, DINA).score
    assert [c.user_id for c in found][:2] == ["ari", "dina"]
    assert discover(SAM, reversed(OTHERS), threshold=0) == found


def test_discover_keeps_scores_at_or_above_the_threshold() -> None:
    everyone = discover(SAM, OTHERS, threshold=0)
    assert len(everyone) == len(OTHERS)
    cut = evaluate(SAM, BO).score
    kept = discover(SAM, OTHERS, threshold=cut)
    assert [c.user_id for c in kept] == [c.user_id for c in everyone if c.seed.score >= cut]
    assert "bo" in [c.user_id for c in kept]
    assert "bo" not in [c.user_id for c in discover(SAM, OTHERS, threshold=cut + 1)]
    assert [c.user_id for c in discover(SAM, OTHERS)] == \
        [c.user_id for c in everyone if c.seed.score >= DEFAULT_THRESHOLD]
    assert "mo" not in [c.user_id for c in discover(SAM, OTHERS)]


def test_discover_limit() -> None:
    everyone = discover(SAM, OTHERS, threshold=0)
    assert discover(SAM, OTHERS, threshold=0, limit=2) == everyone[:2]
    assert discover(SAM, OTHERS, threshold=0, limit=0) == []
    assert discover(SAM, OTHERS, threshold=0, limit=99) == everyone


def test_discover_skips_the_source_itself() -> None:
    found = discover(SAM, [SAM, *OTHERS, copy.deepcopy(SAM)], threshold=0)
    assert "sam" not in [c.user_id for c in found]
    assert len(found) == len(OTHERS)


@pytest.mark.parametrize("kwargs", [{"threshold": -1}, {"threshold": 101}, {"limit": -1}])
def test_discover_rejects_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(InvalidInput):
        discover(SAM, OTHERS, **kwargs)


# --- the discovery query ----------------------------------------------------------------------

QUERY = "a design co-founder"


def test_the_query_raises_candidates_who_offer_what_it_names() -> None:
    for named in (DINA, BO):
        assert evaluate(SAM, named, QUERY).score > evaluate(SAM, named).score
        assert "For the search" in evaluate(SAM, named, QUERY).reasoning
    # Ari meets Sam's other need, not the search: it does not rise, and says so.
    assert evaluate(SAM, ARI, QUERY).score <= evaluate(SAM, ARI).score
    assert "offers nothing the search" in evaluate(SAM, ARI, QUERY).reasoning
    # Without the query Ari and Dina tie; with it Dina leads, and Bo (a designer by its bio
    # only) closes on Ari.
    assert discover(SAM, OTHERS, query=QUERY)[0].user_id == "dina"
    gap = evaluate(SAM, ARI).score - evaluate(SAM, BO).score
    assert evaluate(SAM, ARI, QUERY).score - evaluate(SAM, BO, QUERY).score < gap


def test_the_query_does_not_invent_benefit_for_the_candidate() -> None:
    """A candidate who offers what the search names but gets nothing back stays one-sided."""
    taker = user("tia", ["product design"], ["a choir to sing with"])
    assert evaluate(SAM, taker, QUERY).score < DEFAULT_THRESHOLD


@pytest.mark.parametrize("query", [None, "", "   ", "someone great to work with"])
def test_a_query_naming_nothing_changes_nothing(query: str | None) -> None:
    assert evaluate(SAM, DINA, query) == evaluate(SAM, DINA)


def test_scores_stay_in_range_with_a_query() -> None:
    for pair in PAIRS + HELDOUT:
        a, b = users(pair)
        for query in (QUERY, "an angel investor", "machine learning"):
            score = evaluate(a, b, query).score
            assert isinstance(score, int) and 0 <= score <= 100


def test_deterministic() -> None:
    first = [evaluate(*users(pair), QUERY) for pair in PAIRS]
    again = [evaluate(*users(copy.deepcopy(pair)), QUERY) for pair in PAIRS]
    assert first == again
    assert discover(SAM, OTHERS, query=QUERY) == discover(copy.deepcopy(SAM), copy.deepcopy(OTHERS), query=QUERY)
