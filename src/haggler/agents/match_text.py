"""Text → concepts for the match negotiator: lower-casing, light stemming, a small synonym table.

The system negotiator judges a match by what each user offers and seeks, and both arrive as free
text ("a technical co-founder", "backend engineering"). Exact word matching would miss that a
*developer* offers what a seeker of a *technical* co-founder needs, so words are reduced to
*concepts*: lower-cased, hyphens dropped ("co-founder" → "cofounder"), a few two-word phrases
joined ("machine learning"), plurals and -ing/-ed endings stripped, then mapped through a synonym
table to one concept per family ("developer", "engineer", "cto" → ``engineering``). Words outside
the table stay concepts of their own, so exact matches still count. Generic words ("looking",
"startup", "cofounder", "senior") carry no need or offer and are dropped.

Four concepts are *exchanges* rather than skills (:data:`EXCHANGES`): a job, paying clients,
capital, mentorship. A need for one is met only by someone who offers that exchange — two
engineers who both seek "a backend role" share every word and can give each other nothing.

Words the table does not know go through WordNet (:mod:`haggler.agents.match_lexicon`, a subset
of WordNet 3.0 shipped in the package): a person or place noun becomes its synset's
name, so "physiotherapist" and "physical therapist" (or "physio") are one concept, and a synset
the table knows takes the table's concept ("coder", "software engineer" → ``engineering``).
Multi-word WordNet lemmas of those kinds ("West Yorkshire", "physical therapist") are found as
phrases and added beside their words. What someone brings is :func:`widened` on the giving side
only: a person's broader occupations (a physiotherapist is a therapist) and the regions a place
lies in (Leeds is in West Yorkshire), so a need naming the wider term is met by the narrower one,
never the other way round.

No models, no downloads: the table is small on purpose and only holds families the labelled
pairs in ``tests/agents/match_pairs.json`` showed were needed. ``match_pairs_heldout.json`` is the
check on that: it is measured, not tuned to (see its test for the numbers).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import NamedTuple

from haggler.agents import match_lexicon

__all__ = ["DOMAINS", "EXCHANGES", "THEMES", "Need", "affirmed_concepts", "concepts", "need_from", "sentences",
           "undoubled", "widened"]

#: Needs for these are met only by someone who offers the same exchange.
EXCHANGES = frozenset({"employment", "clients", "capital", "mentorship"})
#: Fields a need is *in* rather than skills it asks for: "a CTO for a fintech startup" asks for a
#: CTO, and a fintech product manager who shares the word is not one.
DOMAINS = frozenset({"fintech", "climate", "health", "biotech", "edtech", "saas", "consumer", "ecommerce",
                     "crypto", "defi", "web3", "robotics", "food", "fitness", "publishing", "devtools", "game",
                     "pharma"})

_PHRASES = (
    ("machine learning", "ml"), ("artificial intelligence", "ai"), ("data science", "datascience"),
    ("go to market", "gtm"), ("gotomarket", "gtm"), ("business development", "bizdev"),
    ("supply chain", "supplychain"), ("user research", "research"), ("full time", "fulltime"),
    ("part time", "parttime"), ("invest in", "invest"), ("developer tools", "devtools"),
    ("developer tool", "devtools"),
)

_FAMILIES = {
    "engineering": "engineer engineering developer develop development programmer programming coding code "
                   "coder software technical cto backend frontend fullstack devops",
    "design": "design designer ux ui figma",
    "ai": "ai ml llm nlp",
    "data": "data analytics datascience analyst sql",
    "capital": "capital investor investment invest vc angel cheque funding fund backing sponsor sponsorship",
    "fundraising": "fundraising fundraise raise raised pitch",
    "marketing": "marketing marketer growth gtm brand branding seo acquisition advertising",
    "sales": "sales sell seller bizdev",
    "clients": "client customer buyer contract gig commission engagement paid",
    "employment": "job role position employment salary fulltime parttime opening vacancy",
    "mentorship": "mentor mentorship mentoring advice advise advisor adviser advisory guidance coach coaching",
    "finance": "finance financial accounting accountant bookkeeping cfo",
    "legal": "legal lawyer law attorney counsel",
    "operations": "operations ops logistics supplychain",
    "climate": "climate carbon cleantech sustainability energy solar",
    "health": "health healthcare medical",
    "clinical": "clinical clinician doctor nurse physician dermatologist",
    "writing": "writing writer copywriting copywriter copy editing editor",
    "product": "product pm",
    "hardware": "hardware electronics embedded firmware",
    "translation": "translation translator localization localisation",
    "founder": "founder ceo",
}
_SYNONYMS = {word: concept for concept, words in _FAMILIES.items() for word in words.split()}
#: The named concepts (skill families, exchanges, fields): what an objection can be *about*, as
#: opposed to the incidental words and numbers of its sentence.
THEMES = frozenset(_FAMILIES) | DOMAINS

_GENERIC = frozenset("""
a an the and or for to of in on with at by from my our your their we i me us you he she they who whom
that this these those is are be been being was were am looking look seek seeking want wanting need
needing someone somebody anyone people person partner cofounder founding startup company business team
help experienced experience senior junior strong great good new early earlystage stage year month
build building built work working join hire hiring recruit recruiting can could will would like also
about as it its into more than just very have has had all any some first firsttime based remote time
other who what which while where when how one two three plus across over under up out so but if
interested open ready keen wide hand hands deep solid proven expert help helping get getting make making lead
find finding grow growing fill filling
bring brings bringing offer offering offers provide providing seek seeks local around please
user users background small large big start starting seed preseed round series
""".split())

#: Token forms: "doesn't" tokenises to "doesn" and "t".
#: Negation and aversion: "I can't write code", "hate pickleball", "not interested" name a gap
#: or a refusal, never an offer. Contractions reach here as "not" (see :func:`_tokens`).
_NEGATIONS = frozenset("not no never without lack lacks lacking missing cannot doesn isn don hasn haven won "
                       "neither nor cant dont wont hate hates dislike dislikes avoid avoids refuse refuses".split())
_SEEKING = frozenset("looking seek seeking seeks want wants need needs hope hoping searching".split())

_WORD = re.compile(r"[a-z0-9]+")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


def undoubled(stem: str) -> str:
    """A doubled final consonant undone, as the -ing/-ed ending doubled it ("sitting" → "sit",
    "shopping" → "shop"); l, s, z and f stay doubled ("billing", "dressing")."""
    if len(stem) > 2 and stem[-1] == stem[-2] and stem[-1] not in "aeiouylsfz":
        return stem[:-1]
    return stem


def _stem(word: str) -> str:
    """Plurals and -ing/-ed endings off, long enough words only (``bus`` stays, ``ui`` stays)."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return undoubled(word[:-3])
    if len(word) > 4 and word.endswith("ed"):
        return undoubled(word[:-2])
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


#: WordNet lexicographer files whose nouns the matcher canonicalises: people and places. Not
#: activities: WordNet's first sense of one is too often another ("sitting" is posing for a
#: portrait, "search" a hunt).
_LEXICAL = frozenset({match_lexicon.PERSON, match_lexicon.LOCATION})
#: How far up a person's hypernyms :func:`widened` climbs, and the hypernyms too general to say
#: anything about an offer.
_BROADER_LEVELS = 2
_TOO_BROAD = frozenset({"person", "individual", "someone", "somebody", "mortal", "soul", "worker", "expert",
                        "adult", "professional", "skilled worker", "trained worker", "skilled workman"})


@lru_cache(maxsize=match_lexicon.MEMO_SIZE)
def _wordnet_concept(word: str) -> str | None:
    """The concept WordNet gives a person or place noun: the table's concept when one
    of its synonyms is in the table, else its synset's name; None for other words."""
    if match_lexicon.lexfile(word) not in _LEXICAL:
        return None
    synonyms = match_lexicon.synonyms(word)
    known = next((_SYNONYMS[w] for w in synonyms if _SYNONYMS.get(w, "employment") not in EXCHANGES), None)
    return known or match_lexicon.canonical(word)


def _phrases(words: list[str]) -> list[str]:
    """Concepts of the two- and three-word WordNet lemmas (and jargon) among ``words``."""
    found = []
    for n in (3, 2):
        for i in range(len(words) - n + 1):
            phrase = " ".join(words[i:i + n])
            if (concept := _wordnet_concept(phrase)) is not None:
                found.append(concept)
    return found


@lru_cache(maxsize=match_lexicon.MEMO_SIZE)
def widened(concepts: frozenset[str]) -> frozenset[str]:
    """``concepts`` with what they imply for someone who *brings* them: each person's broader
    occupations (two levels, the most general dropped) and each place's containing regions."""
    more: set[str] = set()
    for concept in concepts - THEMES:
        kind = match_lexicon.lexfile(concept)
        if kind == match_lexicon.PERSON:
            broader = match_lexicon.broader(concept, _BROADER_LEVELS) - _TOO_BROAD
            more |= {_SYNONYMS.get(w) or match_lexicon.canonical(w) or w for w in broader}
        elif kind == match_lexicon.LOCATION:
            more |= {match_lexicon.canonical(w) or w for w in match_lexicon.containers(concept)}
    return concepts | more


_CONTRACTION = re.compile(r"n['’]t\b")
_HYPHENATED = re.compile(r"\b([a-z0-9]+)-([a-z0-9]+)\b")


def _hyphenated(m: re.Match[str]) -> str:
    """A hyphenated word joined; an unknown one with its parts too ("cat-sitting": "catsitting
    cat sitting"), a known one alone ("co-founder" is the generic "cofounder", not a founder)."""
    joined = m[1] + m[2]
    if joined in _GENERIC or joined in _SYNONYMS or joined in DOMAINS:
        return joined
    return " ".join([joined, *(p for p in m.groups() if len(p) > 2)])


def _tokens(text: str) -> list[str]:
    """Words of ``text``: lower-cased, "n't" as "not" ("can't" negates), a hyphenated word joined
    ("co-founder" is "cofounder") with its parts of three letters or more after it
    ("cat-sitting" is also "cat sitting")."""
    lowered = _CONTRACTION.sub(" not", text.lower())
    lowered = _HYPHENATED.sub(_hyphenated, lowered)
    joined = " " + " ".join(_WORD.findall(lowered)) + " "
    for phrase, word in _PHRASES:
        joined = joined.replace(f" {phrase} ", f" {word} ")
    return [word for word in joined.split() if len(word) > 1]


def _concept(word: str) -> str | None:
    """The concept a word stands for, or None for a generic word."""
    if word in _GENERIC:
        return None
    if word in _SYNONYMS:
        return _SYNONYMS[word]
    if word in DOMAINS:  # "saas", "robotics", "devtools" are not plurals
        return word
    stem = _stem(word)
    if stem in _GENERIC or word.isdigit():
        return None
    return _SYNONYMS.get(stem) or _wordnet_concept(word) or stem


@lru_cache(maxsize=match_lexicon.MEMO_SIZE)
def concepts(text: str) -> frozenset[str]:
    """The substantive concepts in ``text`` (generic words dropped), WordNet phrases added."""
    words = _tokens(text)
    found = {c for word in words if (c := _concept(word)) is not None}
    return frozenset(found.union(_phrases(words)))


def sentences(text: str) -> list[str]:
    """``text`` split into sentences (and lines), blanks dropped."""
    return [s.strip() for s in _SENTENCE.split(text) if s.strip()]


@lru_cache(maxsize=match_lexicon.MEMO_SIZE)
def affirmed_concepts(text: str) -> frozenset[str]:
    """Concepts a counterpart *affirms* in free text: those of its sentences that neither negate
    ("my user does not offer design") nor seek ("my user needs design"). A negated or seeking
    sentence names a gap, not an offer, so it must never count as answering an objection.
    Memoized: every decision reads the counterpart's messages so far again, twice after a counter."""
    found: set[str] = set()
    for sentence in sentences(text):
        words = set(_tokens(sentence))
        if words & _NEGATIONS or {_stem(w) for w in words} & _SEEKING or words & _SEEKING:
            continue
        found |= concepts(sentence)
    return frozenset(found)


class Need(NamedTuple):
    """One thing a user seeks: the text it came from and what it asks of the other user."""

    text: str
    #: Exchanges the need asks for (a job, clients, capital, mentorship): the other must offer one.
    exchanges: frozenset[str]
    #: Skills or subjects it names: without an exchange the other must bring one; beside an
    #: exchange, the other's profile must be about one.
    skills: frozenset[str]
    #: Fields it is in (:data:`DOMAINS`): the other's profile must be about one — or, when the need
    #: names nothing else ("fintech startups to invest in"), the other must be in it.
    domains: frozenset[str]

    @property
    def empty(self) -> bool:
        return not (self.exchanges or self.skills or self.domains)


_GIVING = re.compile(r"\bto\s+([a-z]+)")


def need_from(text: str) -> Need:
    """A need from a seek or intent description. "Founders to mentor" and "startups to invest in"
    are *giving* intents: the exchange named after "to" is what the user offers, so it is not
    asked of the other user — what is asked is the rest (founders, startups in climate)."""
    found = concepts(text)
    given = frozenset(c for word in _GIVING.findall(text.lower()) if (c := _concept(word)) in EXCHANGES)
    found -= given
    return Need(text, found & EXCHANGES, found - EXCHANGES - DOMAINS, found & DOMAINS)
