"""The system negotiator: the embedded, deterministic advocate for one user in a match negotiation.

Spec 002 ("Index Negotiator", "Seed Assessment", "Roles"). Two advocates, one per user, debate
whether a proposed match serves both. This one needs no API key and no network: it reads both
users' profiles and intents and forms its own judgement from explainable features —

* **what my user gets**: each of my user's needs (its profile's ``seeks`` and its intents) is met
  when the other user *brings* it: declares it in ``offers``/``skills``, *is* it (``role``,
  ``title``, ``headline``, ``stage``, ``industry``...), or affirmed it in a message earlier in
  this negotiation. A need for an exchange (a job, clients, capital, mentorship) is met only by
  someone who offers that exchange (see :mod:`haggler.agents.match_text`);
* **who the other user is** (issue 30: the person is the offer): a need is also met when the
  other user *is* what it seeks, judged from what the other seeks. A *giving* need ("new
  engineering managers to mentor") is met by someone who seeks that exchange and whose profile is
  about the rest (a new team lead asking for a mentor); a need for *takers* of my user's offer
  ("a few more GCSE students", "a lodger", "paid translation contracts") by someone who seeks
  that offer — one of its needs my user meets, touching the need's own qualifiers ("violin
  students" are not met by a parent after drum lessons). See :func:`_met_by_seeker`;
* **who the user would be**: a need to *be* something ("Be an au pair in the US", "speaking
  opportunities") says who the user is to whoever seeks one, and is met by someone who seeks one
  (see :func:`_met_by_wanting`); agent nouns meet their roots (a "speaker" is sought by someone
  after "speaking", a "walker" brings "walks");
* **another kind**: a need for one kind of thing is not met by someone who offers or is another
  of the same kind and never mentions the one sought — "a drum teacher" against a "Violin
  teacher": same head, modifiers that are nouns of one WordNet kind (see :func:`_other_kind`);
* **rivals**: two users of the same kind who seek the same things (two candle sellers who both
  want buyers, two clinics that both want a hygienist) are rivals for one counterpart, not each
  other's; their shared needs are unmet and the objection says so in both users' words. Seeking
  the same *partner* (a golf partner, a language exchange) is the point, not a rivalry. See
  :func:`_rivals`. So are two of a kind who both *give* one exchange and neither seeks it (two
  angels, two retired mentors: :func:`_both_give`);
* **conditions** (:mod:`haggler.agents.match_conditions`): money and who pays, place and remote,
  level, schedule, language, stack, age, quantity, refusal — one side's requirements against the other side's facts, a
  documented rule each; an absent fact is never a conflict;
* **what the other user gets** from my user, the same way, plus *evidence*: sentences of my
  user's own free text (``bio``, ``experience``...) that show it can give what the other seeks.
  An advocate knows its own user; it answers the other side's objections by quoting them;
* **keyword depth**: concepts both profiles mention, reported when they are all the match has;
* **the seed**: its score and the concepts its reasoning cites, checked against the above. The
  seed is a starting point (spec), never the verdict: a high score on a match that gives my user
  nothing is still rejected.

How it decides (``decide``), in order:

1. the first turn is ``propose`` — the protocol's opening — whatever the judgement; its
   reasoning says honestly what the advocate thinks, and its message states what my user offers;
2. my user gets nothing → ``reject`` (one-sided against my user, or keyword-deep);
3. no objection left → ``accept``. Objections are unmet conditions, my user's unmet needs and,
   when the other user would get nothing at all from mine, the other user's needs: a one-sided
   match does not hold;
4. on the last turn the cap allows, or when it already countered and the other side's latest
   turn answered nothing, countering again is pointless: it makes a final call — ``accept`` when
   at least half of my user's needs are met, the other user gets something and no condition is
   unmet, else ``reject``. An unmet condition is a fact of both profiles: countered once, it is
   answered only if the profiles change, so it ends in ``reject``;
5. otherwise ``counter``, naming each objection concretely ("my user seeks "a design co-founder",
   which your user does not offer"; "Condition not met (money): my user states "I charge
   $85/hour"; your user can pay at most "We can only take free tutoring"."). Quotes keep the
   user's characters — "NTRP 4.5+" is never "4,5+"; only sentence breaks become commas.

Only the other side's ``message`` is read for answers — it is where an advocate speaks to the
other side; reasoning is its own account — and only its sentences that neither negate nor seek
(see :func:`~haggler.agents.match_text.affirmed_concepts`), so an objection repeated back never
counts as its answer. It never uses ``question`` (personal agents only).

Roles follow who offers what: the user whose offers meet the other's needs is ``agent``, the one
receiving is ``patient``, both ways is ``peer``; being someone another seeks (a founder a mentor
wants to advise) is not offering. With no exchange either way, the seed's actors decide.

Pure: no I/O, no clock, no randomness — the same context gives the same turn.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

from haggler.agents.match_context import (
    ROLES, Assessment, MatchAction, MatchContext, MatchTurn, Roles, UserContext, fingerprint, memoized_by,
    per_user,
)
from haggler.agents import match_lexicon
from haggler.agents.match_conditions import Conflict, conditions, conflicts
from haggler.agents.match_text import (EXCHANGES, Need, affirmed_concepts, concepts, need_from, sentences,
                                       undoubled, widened)

__all__ = ["Judgement", "decide", "judge", "offer_meeting", "offer_roles"]

#: Profile fields that declare what a user offers.
_DECLARED = ("offers", "skills")
#: Profile fields that say who a user is: met needs for such a person, but are not an offer.
_IDENTITY = ("role", "title", "headline", "stage", "industry", "sector", "company", "expertise")
#: Profile fields that say what a user seeks.
_SEEKS = ("seeks", "needs", "lookingFor", "looking_for")
#: Free-text fields an advocate quotes as evidence for its own user.
_FREE_TEXT = ("bio", "about", "experience", "background", "summary")
#: Concepts that name *takers* of an offer — people who receive what a user gives. A need for
#: them ("a few more GCSE students", "wedding bookings", "a lodger") is met by someone who *is*
#: one: who seeks what the user offers. Paying ``clients`` (an exchange) are takers too. Each word
#: is taken through :func:`concepts` as well, since WordNet names a "lodger" a "boarder".
_TAKERS = frozenset().union(*({w} | concepts(w) for w in (
    "clients student pupil learner patient tenant lodger member booking mentee supervisee subscriber family "
    "attendee guest reader audience order trainee apprentice volunteer participant recipient").split()))


def _texts(profile: Mapping[str, Any], keys: Iterable[str]) -> list[str]:
    """The strings under ``keys`` (a string, or a list whose strings are kept)."""
    found: list[str] = []
    for key in keys:
        value = profile.get(key)
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, list):
            found.extend(v for v in value if isinstance(v, str))
    return found


def _all_texts(user: UserContext) -> list[str]:
    texts = _texts(user.profile, user.profile.keys())
    for intent in user.intents:
        texts.append(intent.description)
        texts.extend(intent.tags)
    return texts


def _concepts_of(texts: Iterable[str]) -> frozenset[str]:
    return frozenset().union(*(concepts(t) for t in texts))


#: Words that only bound a condition's number ("minimum £13.50 an hour", "£80,000 base").
_BOUNDS = frozenset({"minimum", "maximum", "min", "max", "least", "most", "base", "budget", "rate", "salary",
                     "pay", "price", "hour", "hourly", "week", "month", "year", "annum"})


@lru_cache(maxsize=match_lexicon.MEMO_SIZE)
def _only_condition(text: str) -> bool:
    """Whether a seek states a condition and nothing else ("minimum £13.50 an hour"): the
    conditions compare it (:mod:`~haggler.agents.match_conditions`); it is no need of its own."""
    spans = [c.span for c in conditions(UserContext("_", {"seeks": [text]}))]
    return bool(spans) and not concepts(text) - _concepts_of(spans) - _BOUNDS


def _needs(user: UserContext) -> tuple[Need, ...]:
    """A user's needs: its profile's seeks and its intents' descriptions, each with some
    substance — "a co-founder" alone asks for nothing anyone can check, and "minimum £13.50 an
    hour" is a condition, not a need. An intent's tags file it under topics ("oss beginner",
    "gym strength"); folded into the need they let any profile on the topic meet it, so they are
    what the user is *about* (see :func:`_all_texts`), not what it asks."""
    texts = _texts(user.profile, _SEEKS)
    texts += [i.description for i in user.intents]
    needs = (need_from(t) for t in dict.fromkeys(texts) if not _only_condition(t))
    return tuple(n for n in needs if not n.empty)


#: Where a need's head ends: what follows qualifies it.
_RELATIVE = re.compile(r"\b(?:who|whom|that|which|with|whose)\b", re.IGNORECASE)


def _given(need: Need) -> frozenset[str]:
    """The exchange a *giving* need gives ("first-time founders to mentor" gives mentorship):
    what :func:`~haggler.agents.match_text.need_from` took out of what it asks."""
    return (concepts(need.text) & EXCHANGES) - need.exchanges


def _met_by_seeker(need: Need, other_needs: Sequence[Need], answered: Mapping[Need, frozenset[str]],
                   other_about: frozenset[str], other_identity: frozenset[str]) -> bool:
    """Whether ``need`` is met by *who the other user is*, not by what it offers.

    * A **giving** need ("new engineering managers to mentor") is met by someone who seeks what it
      gives — one of the other's needs asks for that exchange — and is what the rest describes:
      each of its skills and fields touches the other's profile (``other_about``).
    * A need for **takers** of my user's offer (:data:`_TAKERS`: "GCSE students", "a lodger",
      "paid translation contracts") is met by someone who seeks that offer: one of the other's
      needs my user meets, where the need's skills and fields each touch that need, the words of
      my user's that meet it, or the other's identity ("violin students" are not met by a parent
      whose son wants drum lessons, nor "a tenant for the room" by someone after advice).

    ``answered`` maps each of the other's needs my user meets to the concepts of it and of my
    user's words that meet it."""
    given = _given(need)
    rest = (need.skills - _TAKERS, need.domains)
    if given:
        return any(m.exchanges & given for m in other_needs) and all(q & other_about for q in rest if q)
    if not concepts(_RELATIVE.split(need.text)[0]) & _TAKERS:
        return False  # "a developer who has built something customers use" seeks a developer
    return any(all(q & (words | other_identity) for q in rest if q) for words in answered.values())


def _head(need: Need) -> frozenset[str]:
    """What a need asks for first: its exchange, else its skills, else its field."""
    return need.exchanges or need.skills or need.domains


#: Words that ask for someone *like* the asker: a partner to play with, a peer to swap with. Two
#: users who seek the same such thing are each other's answer, not rivals.
_LIKE_KIND = re.compile(r"\b(?:partners?|buddy|buddies|peers?|fellows?|companions?|teammates?|exchange|swap|"
                        r"swapping|trade|sparring|opponents?|carpool|circle|group|club|play|rally|practi[cs]e)\b",
                        re.IGNORECASE)


def _same(a: Need, b: Need) -> bool:
    """Whether two needs ask for the same thing: the same exchanges, neither giving what the
    other asks ("founders to advise" against "a mentor"), a shared head and more than half of
    the concepts either names in common."""
    if a.exchanges != b.exchanges or _given(a) & b.exchanges or _given(b) & a.exchanges:
        return False
    ca, cb = a.exchanges | a.skills | a.domains, b.exchanges | b.skills | b.domains
    return bool(_head(a) & _head(b)) and 2 * len(ca & cb) > len(ca | cb)


def _rivals(own: Sequence[Need], other: Sequence[Need], alike: bool,
            offered: tuple[frozenset[str], frozenset[str]]) -> tuple[Need, ...]:
    """My user's needs the other user *also* seeks, when both seek the same things.

    Two candle sellers who both want buyers, two clinics that both want a hygienist, two PIs who
    both want a postdoc: each seeks what the other seeks, so neither is the other's answer — they
    are rivals for the same counterpart, whatever words they share. The rule: at least half of
    each side's needs are the same as one of the other's (:func:`_same`); the two are the same
    kind of user (``alike``: see :func:`_alike`), or neither's declared offers meet those needs
    (``offered``: my user's, the other's — two idea people who both seek "a technical
    co-founder"); and none of those needs asks for someone like the asker (:data:`_LIKE_KIND`: a
    golf partner, a language exchange), where seeking the same is the point. Returns my user's
    shared needs, else ()."""
    def shared(mine: Sequence[Need], theirs: Sequence[Need]) -> list[Need]:
        return [n for n in mine if any(_same(n, m) for m in theirs)]
    mine, theirs = shared(own, other), shared(other, list(own))
    if not mine or 2 * len(mine) < len(own) or 2 * len(theirs) < len(other):
        return ()
    if not alike and (any(_met(n, offered[1], offered[1]) for n in mine)
                      or any(_met(n, offered[0], offered[0]) for n in theirs)):
        return ()
    if any(_LIKE_KIND.search(n.text) for n in mine + theirs):
        return ()
    return tuple(mine)


def _both_give(own_offered: frozenset[str], other_offered: frozenset[str], needs: Sequence[Need]) -> frozenset[str]:
    """The exchanges (capital, mentorship, a job, custom) both users offer and neither seeks.

    Two angel investors who both offer cheques and both seek startups, two retired executives who
    both offer mentoring and both seek founders: each gives what the other gives and takes none
    of it, so they are rivals for the same takers. Judged for users of the same kind only. What a
    need seeks is what its head asks ("founders who want a mentor" seeks founders; the mentor is
    what the founders want), or the whole need when its head says nothing ("someone who can
    mentor me")."""
    def asks(need: Need) -> frozenset[str]:
        head = concepts(_RELATIVE.split(need.text)[0])
        return head & EXCHANGES - _given(need) if head else need.exchanges
    sought = frozenset().union(*(asks(n) for n in needs))
    return own_offered & other_offered & EXCHANGES - sought


def _alike(a: UserContext, b: UserContext) -> bool:
    """Whether two users are the same kind: who they are (:data:`_IDENTITY`) shares a concept,
    either one's broader kinds included (a French tutor and a French teacher); a user who says
    nothing of who it is is compared by what it offers."""
    def kind(user: UserContext) -> frozenset[str]:
        return widened(_concepts_of(_texts(user.profile, _IDENTITY)) or _concepts_of(_texts(user.profile, _DECLARED)))
    return bool(kind(a) & kind(b))


def _met(need: Need, brings: frozenset[str], about: frozenset[str]) -> bool:
    """Whether someone who ``brings`` these concepts (and whose profile is ``about`` these) meets
    ``need``. The need's head must be brought — its exchange, else one of its skills, else (a need
    that names only a field) its field; the rest qualifies it, so the profile must touch it. What
    the giver brings and is about is :func:`~haggler.agents.match_text.widened`: a physiotherapist
    brings a therapist, someone in Leeds is in West Yorkshire."""
    brings, about = widened(brings), widened(about)
    qualifiers: tuple[frozenset[str], ...]
    if need.exchanges:
        head, qualifiers = need.exchanges, (need.skills, need.domains)
    elif need.skills:
        head, qualifiers = need.skills, (need.domains,)
    else:
        head, qualifiers = need.domains, ()
    return bool(_agentive(head) & brings) and all(q & about for q in qualifiers if q)


_WITH = re.compile(r"\bwith\b", re.IGNORECASE)


def _evidence(user: UserContext, needs: Sequence[Need], about: frozenset[str]) -> dict[Need, str]:
    """For each of ``needs`` the user's declared offers do not meet, the first affirmative
    sentence of the user's own free text that does: the answer its advocate gives. Only what
    comes before "with" is the user's own claim: "worked closely with engineering teams" is a
    product manager's sentence, not an engineer's."""
    free = [s for text in _texts(user.profile, _FREE_TEXT) for s in sentences(text)]
    found: dict[Need, str] = {}
    for need in needs:
        for sentence in free:
            if _met(need, affirmed_concepts(_WITH.split(sentence)[0]), about):
                found[need] = sentence
                break
    return found


def offer_meeting(giver: UserContext, need: Need) -> str | None:
    """The giver's own words that meet ``need``: the first declared offer or identity field that
    meets it on its own, else the first sentence of its free text that does (as :func:`judge`
    quotes evidence); None when nothing does. Whoever explains a match names the offer, not only
    the need: "backend engineering" says more than "meets the need for a technical co-founder"."""
    about = _reading(giver).about
    for text in _texts(giver.profile, _DECLARED + _IDENTITY):
        if _met(need, concepts(text), about):
            return text
    return _evidence(giver, [need], about).get(need)


def _affirmed_by(speaker: str, history: Iterable[MatchTurn]) -> frozenset[str]:
    """What ``speaker``'s advocate has affirmed in its messages so far."""
    return frozenset().union(*(affirmed_concepts(t.message or "") for t in history if t.speaker == speaker))


@dataclass(frozen=True, slots=True)
class Judgement:
    """One advocate's reading of the match, from its own user's side."""

    own_needs: tuple[Need, ...]
    #: My user's needs the other user meets (declared, identity, affirmed in a message, or by
    #: being who the need seeks).
    met_own: tuple[Need, ...]
    other_needs: tuple[Need, ...]
    #: The other user's needs my user meets (declared, identity, evidence from its own text, or
    #: by being who the need seeks).
    met_other: tuple[Need, ...]
    #: My user's answers: other user's need → the sentence of my user's text that meets it.
    evidence: Mapping[Need, str]
    #: Concepts both users' profiles and intents mention.
    shared: frozenset[str]
    roles: Roles
    #: Whether my user *offers* something the other seeks (declared, or evidence from its own
    #: text); being who the other seeks is not offering. What the roles are drawn from.
    gives: bool
    #: Whether the other user's declared offers meet one of my user's needs.
    receives: bool
    #: Conditions (money, place, level, schedule, language, stack, age, quantity, refusal) the two
    #: users' profiles fail.
    conflicts: tuple[Conflict, ...] = ()
    #: My user's needs the other user seeks too, each with the other's same need (see _rivals):
    #: why they are unmet, however many words the two share.
    rivals: Mapping[Need, Need] = field(default_factory=dict)
    #: Exchanges both users offer and neither seeks (two angels, two retired mentors): rivals for
    #: the same takers, so neither's needs are met by the other (see _both_give).
    both_give: frozenset[str] = frozenset()

    @property
    def unmet_own(self) -> tuple[Need, ...]:
        return tuple(n for n in self.own_needs if n not in self.met_own)

    @property
    def unmet_other(self) -> tuple[Need, ...]:
        return tuple(n for n in self.other_needs if n not in self.met_other)

    @property
    def objections(self) -> tuple[tuple[str, Need | Conflict], ...]:
        """("condition", conflict) for each unmet condition; ("own", need) for my user's unmet
        needs; ("other", need) for the other user's when it would get nothing from mine."""
        own = tuple(("condition", c) for c in self.conflicts) + tuple(("own", n) for n in self.unmet_own)
        if self.both_give and self.own_needs:
            return tuple(("condition", c) for c in self.conflicts) + (("both_give", self.own_needs[0]),)
        return own + (() if self.met_other else tuple(("other", n) for n in self.other_needs))

    @property
    def serves_both(self) -> bool:
        """The final call: no unmet condition, at least half of my user's needs met, and the other
        user gets something."""
        return not self.conflicts and bool(self.met_other) and 2 * len(self.met_own) >= len(self.own_needs) > 0


#: A need to *be* something: "Be an au pair in the US", "work as a sous chef", "speaking
#: opportunities". What it names is who the user would be, not what it asks of the other.
_TO_BE = re.compile(r"^\s*(?:be|become|work as|working as)\s+(?:an?\s+)?(?P<x>.+?)(?=\s+(?:in|for|at|from|with|to|"
                    r"this|next|near)\b|$)|\b(?P<y>[a-z]+(?:\s+[a-z]+)?)\s+(?:opportunities|opportunity|gigs|placements?)\b",
                    re.IGNORECASE)


def _agentive(found: frozenset[str]) -> frozenset[str]:
    """Concepts with the agent nouns' roots beside them ("speaker" → "speak", "drummer" → "drum",
    "percussionist" → "percussion"), so that someone after speaking opportunities is the speaker
    another seeks and a drummer brings drums."""
    roots = {undoubled(c[:-2]) for c in found if c.endswith("er") and len(c) > 5}
    roots |= {c[:-3] for c in found if c.endswith("ist") and len(c) > 7}
    return found | roots


def _would_be(need: Need) -> frozenset[str]:
    """What a need to *be* something names (see :data:`_TO_BE`), as concepts; empty otherwise."""
    m = _TO_BE.search(need.text)
    return _agentive(concepts(m["x"] or m["y"])) if m else frozenset()


def _aspiring(needs: Sequence[Need]) -> frozenset[str]:
    """Who a user says it would be, across its needs: part of who it is to whoever seeks it."""
    return frozenset().union(*(_would_be(n) for n in needs))


def _met_by_wanting(need: Need, other_needs: Sequence[Need]) -> bool:
    """A need to be something (an au pair, a speaker) is met by someone who seeks one."""
    wanted = _would_be(need)
    return bool(wanted) and any(wanted & _agentive(_head(m)) for m in other_needs)


@lru_cache(maxsize=match_lexicon.MEMO_SIZE)
def _compounds(text: str) -> frozenset[tuple[str, str]]:
    """(modifier, head) concept pairs of adjacent words that each carry a concept: "drum
    teacher" → (drum, teacher), "motion designer" → (motion, design)."""
    found: set[tuple[str, str]] = set()
    for part in re.split(r"[,;/()]|\band\b|\bor\b", text):
        words = [c for w in part.split() for c in [concepts(w)] if c]
        for first, second in zip(words, words[1:]):
            found |= {(m, h) for m in first for h in second if m != h}
    return frozenset(found)


def _offered_compounds(user: UserContext) -> frozenset[tuple[str, str]]:
    """The compounds of what a user offers and who it is (see :func:`_compounds`)."""
    return frozenset().union(*(_compounds(t) for t in _texts(user.profile, _DECLARED + _IDENTITY)))


def _other_kind(need: Need, theirs: frozenset[tuple[str, str]], about: frozenset[str]) -> bool:
    """Whether the other user offers or is another kind of what ``need`` names: the same head
    with another modifier (``theirs``: :func:`_offered_compounds`), and the need's modifier
    nowhere in its profile ("a drum teacher" against a "Violin teacher"; "a motion designer"
    against a "Junior product designer")."""
    return any(m not in about and any(h == h2 and m != m2 and _same_kind(m, m2) for m2, h2 in theirs)
               for m, h in _compounds(need.text))


def _same_kind(a: str, b: str) -> bool:
    """Whether two modifiers are nouns of one WordNet kind (a drum and a violin, both artifacts),
    so one names an alternative to the other, not a quality of it ("reliable", "free")."""
    kind = match_lexicon.lexfile(a)
    return kind is not None and kind == match_lexicon.lexfile(b)


@dataclass(frozen=True, slots=True)
class _Reading:
    """What :func:`judge` reads of one user whoever the other is, read once per user (memoized
    together: a decision judges both users, twice after a counter, and reading each part again,
    each behind a fingerprint of its own, was a third of the decision)."""

    #: Concepts of everything the user wrote (:func:`_all_texts`).
    about: frozenset[str]
    #: Concepts of its declared offers.
    offered: frozenset[str]
    #: Concepts of who it is, with who it says it would be (:func:`_aspiring`).
    identity: frozenset[str]
    needs: tuple[Need, ...]
    #: The compounds of what it offers and who it is (:func:`_offered_compounds`).
    compounds: frozenset[tuple[str, str]]


@per_user
def _reading(user: UserContext) -> _Reading:
    needs = _needs(user)
    return _Reading(_concepts_of(_all_texts(user)), _concepts_of(_texts(user.profile, _DECLARED)),
                    _concepts_of(_texts(user.profile, _IDENTITY)) | _aspiring(needs), needs,
                    _offered_compounds(user))


#: How many judgements of a pair :func:`_judged` keeps.
PAIR_MEMO_SIZE = 4_096

#: The roles :func:`_judged` gives when neither user offers the other anything: :func:`judge`
#: puts the seed's actors in their place, when it names any.
_PEERS = Roles("peer", "peer")


def judge(context: MatchContext, history: Sequence[MatchTurn] | None = None) -> Judgement:
    """The advocate's judgement given ``history`` (default: the context's whole history)."""
    history = context.history if history is None else history
    found = _judged(context.own, context.other, _affirmed_by(context.other.user_id, history))
    roles = _roles(found.gives, found.receives, context)
    return found if roles == found.roles else replace(found, roles=roles)


@memoized_by(lambda own, other, affirmed: (fingerprint(own), fingerprint(other), affirmed), PAIR_MEMO_SIZE)
def _judged(own: UserContext, other: UserContext, affirmed: frozenset[str]) -> Judgement:
    """:func:`judge` but for the seed's actors (which only name roles no offer settles): a pure
    function of the two users and what the other's advocate ``affirmed``, memoized. Every
    decision judges its pair once or twice, the pair's every turn, and most turns affirm nothing
    new: judging the same profiles again was most of a system turn. The judgement is shared
    between callers: its mappings (``evidence``, ``rivals``) are read, never changed."""
    mine, theirs = _reading(own), _reading(other)
    own_about, other_about = mine.about, theirs.about
    own_offered, own_identity, own_needs = mine.offered, mine.identity, mine.needs
    other_offered = theirs.offered | affirmed
    other_identity, other_needs = theirs.identity, theirs.needs
    declared = [n for n in other_needs if _met(n, own_offered | own_identity, own_about)]
    evidence = _evidence(own, [n for n in other_needs if n not in declared], own_about)
    gets_other = [n for n in other_needs if n in declared or n in evidence]
    gets_own = [n for n in own_needs if _met(n, other_offered | other_identity, other_about)]
    # Each side may also *be* what the other seeks (see _met_by_seeker): judged from what each
    # seeks that the other gives, with the giver's words that give it.
    for_own = {m: concepts(m.text) | concepts(offer_meeting(own, m) or "") for m in gets_other}
    for_other = {m: concepts(m.text) | concepts(offer_meeting(other, m) or "") for m in gets_own}
    met_own = tuple(n for n in own_needs if n in gets_own or _met_by_wanting(n, other_needs)
                    or _met_by_seeker(n, other_needs, for_own, other_about, other_identity))
    met_other = tuple(n for n in other_needs if n in gets_other or _met_by_wanting(n, own_needs)
                      or _met_by_seeker(n, own_needs, for_other, own_about, own_identity))

    other_kinds, own_kinds = theirs.compounds, mine.compounds
    met_own = tuple(n for n in met_own if not _other_kind(n, other_kinds, other_about))
    met_other = tuple(n for n in met_other if not _other_kind(n, own_kinds, own_about))
    alike = _alike(own, other)
    offered = (own_offered, other_offered)
    rivals = {n: next(m for m in other_needs if _same(n, m))
              for n in _rivals(own_needs, other_needs, alike, offered)}
    if rivals:
        met_own = tuple(n for n in met_own if n not in rivals)
        met_other = tuple(n for n in met_other if n not in _rivals(other_needs, own_needs, alike, offered[::-1]))
    both_give = _both_give(own_offered, other_offered, own_needs + other_needs) if alike else frozenset()
    if both_give:
        met_own, met_other = (), ()
    gives = any(_met(n, own_offered, own_about) or n in evidence for n in other_needs)
    receives = any(_met(n, other_offered, other_about) for n in own_needs)
    return Judgement(own_needs, met_own, other_needs, met_other, evidence, own_about & other_about,
                     offer_roles(gives, receives) or _PEERS, gives, receives, conflicts(own, other), rivals,
                     both_give)


def offer_roles(gives: bool, receives: bool) -> Roles | None:
    """(my user's role, the other's) from who offers what: both ways peers, one way agent (the
    giver) and patient; None when neither offers the other anything, for the caller to decide."""
    if gives and receives:
        return Roles("peer", "peer")
    if gives:
        return Roles("agent", "patient")
    if receives:
        return Roles("patient", "agent")
    return None


def _roles(gives: bool, receives: bool, context: MatchContext) -> Roles:
    """Roles from who offers what; with no offer either way, the seed's actors, else peers."""
    if (roles := offer_roles(gives, receives)) is not None:
        return roles
    named = {user: role for user, role in context.seed.actors if role in ROLES}
    return Roles(named.get(context.own.user_id, "peer"), named.get(context.other.user_id, "peer"))


_BREAK = re.compile(r"[.!?;]+(?=\s|$)")


def _quoted(text: str) -> str:
    """A need's text, safe to embed in one sentence: sentence breaks inside become commas, a
    final one goes; every other character stays as written ("NTRP 4.5+", "£1,450")."""
    return '"' + " ".join(_BREAK.sub(",", text.strip().rstrip(".!?;")).split()) + '"'


def _objection_sentence(whose: str, need: Need | Conflict, j: Judgement) -> str:
    if isinstance(need, Conflict):
        return need.sentence()
    if whose == "both_give":
        return (f"Both users offer {', '.join(sorted(j.both_give))} and neither seeks it: my user seeks "
                f"{_quoted(need.text)}, and so does yours — rivals for the same takers, not each other's.")
    if whose == "own" and need in j.rivals:
        return (f"My user seeks {_quoted(need.text)} and your user seeks {_quoted(j.rivals[need].text)}: "
                "both want the same, so neither is the other's answer.")
    if whose == "own":
        return f"My user seeks {_quoted(need.text)}, which your user does not offer."
    return f"Your user seeks {_quoted(need.text)}, which my user does not offer."


_WRITTEN_WORD = re.compile(r"[^\W_][\w'’.+#-]*[\w+#]|[^\W_]")


@lru_cache(maxsize=match_lexicon.MEMO_SIZE)
def _words_for(wanted: frozenset[str], texts: tuple[str, ...]) -> tuple[str, ...]:
    """The words of ``texts``, as written, that stand for the ``wanted`` concepts (first use of
    each): reasoning names what users wrote ("Leeds", "runners"), never the lexicon's name for
    it. Memoized: every turn of a negotiation names the words of the same seed and profiles, and
    reading them word by word again was a third of what a decision costs once its pair is judged."""
    found: dict[str, str] = {}
    for text in texts:
        for word in _WRITTEN_WORD.findall(text):
            for concept in concepts(word) & wanted:
                found.setdefault(concept, word)
    return tuple(dict.fromkeys(found.values()))


def _reasoning(context: MatchContext, j: Judgement, verdict: str) -> str:
    parts = []
    if j.own_needs:
        parts.append(f"My user's needs met: {len(j.met_own)} of {len(j.own_needs)}"
                     + (f" ({', '.join(_quoted(n.text) for n in j.met_own)})" if j.met_own else "") + ".")
    else:
        parts.append("My user states no need this match could meet.")
    parts.append(f"The other user's needs my user meets: {len(j.met_other)} of {len(j.other_needs)}.")
    if j.conflicts:
        parts.append(f"Unmet conditions: {', '.join(c.kind for c in j.conflicts)}.")
    parts.extend(_objection_sentence(whose, need, j) for whose, need in j.objections)
    if not j.met_own and not j.met_other and j.shared:
        shared = _words_for(j.shared, tuple(_all_texts(context.own)))
        parts.append(f"Shared keywords only ({', '.join(shared[:6])}): neither gives the other anything.")
    seed = context.seed
    cited = _words_for(concepts(seed.reasoning) & j.shared - _concepts_of(n.text for n in j.met_own + j.met_other),
                       (seed.reasoning,))
    note = f" It cites {', '.join(cited[:4])}, which is common ground, not an exchange." if cited else ""
    parts.append(f"Seed score {seed.score} was a starting point; this is my own reading.{note}")
    parts.append(verdict)
    return " ".join(parts)


def _message(context: MatchContext, j: Judgement, action: MatchAction) -> str:
    """What my advocate tells the other side: my user's offers and evidence, then objections."""
    if action is MatchAction.ACCEPT:
        return "My user accepts: the match meets what my user seeks."
    if action is MatchAction.REJECT:
        return "My user declines: the match does not give my user what it seeks."
    offers = _texts(context.own.profile, _DECLARED)
    lines = [f"My user offers {', '.join(offers)}."] if offers else []
    lines += [f"From my user's background: {sentence}" for sentence in dict.fromkeys(j.evidence.values())]
    lines += [_objection_sentence(whose, need, j) for whose, need in j.objections]
    return " ".join(lines)


def _progressed(context: MatchContext, j: Judgement) -> bool:
    """Whether the other side's latest turn answered any of my user's unmet needs."""
    before = judge(context, context.history[:-1])
    return len(j.met_own) > len(before.met_own)


def decide(context: MatchContext) -> MatchTurn:
    """This advocate's next turn (see the module docstring for the order of the rules)."""
    j = judge(context)
    own_id = context.own.user_id
    if context.turn_number == 1:
        action = MatchAction.PROPOSE
        verdict = ("I propose it: both users stand to gain." if j.serves_both and not j.objections
                   else "I propose it for the other side to test; my concerns are stated above.")
    elif not j.met_own:
        action = MatchAction.REJECT
        verdict = ("Rejected: one-sided, my user gets nothing from it." if j.met_other
                   else "Rejected: the overlap is keyword-deep; nothing is exchanged.")
    elif not j.objections:
        action, verdict = MatchAction.ACCEPT, "Accepted: my user's needs are met and the other user gains too."
    elif (context.max_turns is not None and context.turn_number >= context.max_turns) or (
            any(t.speaker == own_id and t.action is MatchAction.COUNTER for t in context.history)
            and not _progressed(context, j)):
        if j.serves_both:
            action, verdict = MatchAction.ACCEPT, "Accepted: the core of what my user seeks is met; the gaps remain."
        else:
            action, verdict = MatchAction.REJECT, "Rejected: my objections stand unanswered."
    else:
        action, verdict = MatchAction.COUNTER, "Countering: the objections above must be answered."
    assessment = Assessment(_reasoning(context, j, verdict), j.roles)
    return MatchTurn(own_id, action, assessment, _message(context, j, action))
