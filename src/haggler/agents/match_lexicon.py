"""Vocabulary for the match negotiator: WordNet 3.0 synonyms, hypernyms and place containment.

Two users say the same thing in different words ("physio" and "physical therapist", "coder" and
"software engineer", "Leeds" and "West Yorkshire"). This module answers three questions from a
compact subset of **Princeton WordNet 3.0** that ships in the package
(``haggler/data/lexicon.json.gz``, built by ``scripts/build-lexicon`` from Debian's
``wordnet-base``; licence in ``haggler/data/WORDNET_LICENSE``), so nothing is downloaded and no
system package is needed at run time:

* :func:`same_sense` — two words or phrases share a synset (physiotherapist / physical therapist);
* :func:`broader` — the lemmas of a word's hypernyms, a few levels up, first sense only
  (physiotherapist → therapist → medical specialist...);
* :func:`within` — a place lies in a region through WordNet's part holonyms (Leeds → West
  Yorkshire → England → United Kingdom; Brooklyn → New York City). *Any* sense of the place
  counts, so Manchester is within England though its first sense is in New Hampshire.

Only synset identity and explicit hypernym / holonym chains are used, never similarity scores:
WordNet puts a physiotherapist and a programmer at 0.63 Wu–Palmer similarity, which would match
anyone with anyone.

WordNet (2006) lacks modern jargon, so a small hand table is consulted first: :data:`ALIASES`
(a word that *means* a WordNet lemma: "physio" → physiotherapist, "NYC" → New York City) and
:data:`NARROWER` (jargon narrower than a WordNet lemma: a frontend developer is a programmer, and
so is a backend developer, but they are not the same as each other).

The lexicon loads lazily, once (about 0.3 s and some 60 MB on first use; see :func:`load`).
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources

__all__ = ["ALIASES", "MEMO_SIZE", "NARROWER", "LOCATION", "PERSON", "Lexicon", "broader", "canonical", "containers",
           "lemma", "lexfile", "load", "same_sense", "synonyms", "within"]

#: How many answers a function keyed by user text remembers: its words come from other people's
#: profiles, so an unbounded memo would grow with every profile a long-running server reads.
MEMO_SIZE = 65_536

#: WordNet lexicographer files (``lexnames``) the matcher cares about.
LOCATION, PERSON = 15, 18
#: Hypernym levels :func:`broader` climbs, and holonym levels :func:`within` climbs.
LEVELS, PLACE_LEVELS = 3, 8

#: Words WordNet lacks that mean one of its lemmas.
ALIASES = {
    "physio": "physiotherapist",
    "physiotherapist": "physiotherapist",
    "pt": "physical therapist",
    "pet": "domestic animal",
    "nyc": "new york city",
    "ny": "new york state",
    "la": "los angeles",
    "sf": "san francisco",
    "uk": "united kingdom",
    "usa": "united states",
    "us": "united states",
    "dev": "programmer",
    "developer": "programmer",
    "software developer": "programmer",
    "swe": "programmer",
    "vet": "veterinarian",
    "accountant": "accountant",
}
#: Jargon narrower than a WordNet lemma: each is its own sense, with that lemma as its broader.
NARROWER = {
    "frontend developer": "programmer",
    "frontend engineer": "programmer",
    "backend developer": "programmer",
    "backend engineer": "programmer",
    "fullstack developer": "programmer",
    "web developer": "programmer",
    "data scientist": "scientist",
    "devops engineer": "programmer",
    "ux designer": "designer",
    "product designer": "designer",
}

_SPACE = re.compile(r"[\s_\-]+")
#: WordNet's detachment rules for nouns (``morphy``): suffix → replacement.
_SUFFIXES = (("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"), ("men", "man"),
             ("ies", "y"), ("s", ""))


@dataclass(frozen=True)
class Lexicon:
    """The shipped lexicon: lemma → synsets (sense order), and per synset its lexicographer file,
    hypernyms and (places) part holonyms. Synsets are small integers."""

    header: dict
    lemmas: dict[str, list[int]]
    lex: list[int]
    up: list[list[int]]
    part_of: dict[int, list[int]]
    exc: dict[str, str]

    @classmethod
    def from_json(cls, data: dict) -> Lexicon:
        return cls(data["header"], data["lemmas"], data["lex"], data["up"],
                   {int(k): v for k, v in data["part_of"].items()}, data["exc"])



@cache
def _words() -> dict[int, list[str]]:
    """Synset → its lemmas (the inverse of the lexicon's ``lemmas``, built on first use)."""
    found: dict[int, list[str]] = {}
    for word, synsets in load().lemmas.items():
        for s in synsets:
            found.setdefault(s, []).append(word)
    return found


@cache
def load() -> Lexicon:
    """The packaged lexicon, read once."""
    raw = resources.files("haggler").joinpath("data").joinpath("lexicon.json.gz").read_bytes()
    return Lexicon.from_json(json.loads(gzip.decompress(raw)))


def _normal(text: str) -> str:
    return _SPACE.sub(" ", text.strip().lower())


@lru_cache(maxsize=MEMO_SIZE)
def lemma(text: str) -> str | None:
    """The lemma ``text`` stands for: an alias's target, a jargon phrase itself, a WordNet lemma
    as written, an irregular plural's base, or the base WordNet's suffix rules find; None when
    none is known ("Zyxlang")."""
    word = _normal(text)
    if word in ALIASES:
        return ALIASES[word]
    if word in NARROWER:
        return word
    lex = load()
    if word in lex.lemmas:
        return word
    if word in lex.exc:
        return lex.exc[word]
    head, _, last = word.rpartition(" ")
    for suffix, base in _SUFFIXES:
        if last.endswith(suffix) and len(last) > len(suffix) + 1:
            candidate = f"{head} {last[: -len(suffix)] + base}".strip()
            if candidate in ALIASES or candidate in NARROWER:
                return lemma(candidate)
            if candidate in lex.lemmas:
                return candidate
    return None


def _senses(text: str) -> list[int]:
    found = lemma(text)
    return load().lemmas.get(found, []) if found else []


def lexfile(text: str) -> int | None:
    """The lexicographer file of the first sense of ``text`` (18 a person, 15 a place), or None."""
    found = lemma(text)
    if found in NARROWER:
        return lexfile(NARROWER[found])
    senses = _senses(text)
    return load().lex[senses[0]] if senses else None


def same_sense(a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` share a synset ("coder" and "software engineer"). Jargon from
    :data:`NARROWER` is the same only as itself."""
    la, lb = lemma(a), lemma(b)
    if la is None or lb is None:
        return False
    if la == lb:
        return True
    if la in NARROWER or lb in NARROWER:
        return False
    return bool(set(_senses(la)) & set(_senses(lb)))


def _climb(start: list[int], links, levels: int) -> set[int]:
    seen: set[int] = set()
    frontier = list(start)
    for _ in range(levels):
        frontier = [t for s in frontier for t in links(s) if t not in seen]
        seen.update(frontier)
    return seen


def broader(text: str, levels: int = LEVELS) -> frozenset[str]:
    """Lemmas of the hypernyms of ``text``'s first sense, up to ``levels`` up (instance
    hypernyms included). Jargon from :data:`NARROWER` has its WordNet lemma and that lemma's."""
    found = lemma(text)
    if found is None:
        return frozenset()
    if found in NARROWER:
        parent = NARROWER[found]
        return frozenset({parent}) | broader(parent, levels - 1)
    senses = _senses(found)
    if not senses:
        return frozenset()
    lex = load()
    synsets = _climb(senses[:1], lambda s: lex.up[s], levels)
    return frozenset(w for s in synsets for w in _words().get(s, ()))


def _regions(senses: list[int]) -> set[int]:
    lex = load()
    return _climb([s for s in senses if lex.lex[s] == LOCATION], lambda s: lex.part_of.get(s, ()), PLACE_LEVELS)


def containers(place: str) -> frozenset[str]:
    """Lemmas of every region any sense of ``place`` lies within ("leeds" → "west yorkshire",
    "england", "united kingdom", ...)."""
    lex = load()
    return frozenset(w for s in _regions(_senses(place)) for w in _words().get(s, ()))


def within(place: str, region: str) -> bool:
    """Whether some sense of ``place`` lies inside some sense of ``region`` through part holonyms.
    A place is not within itself."""
    return bool(_regions(_senses(place)) & set(_senses(region)))


def synonyms(text: str) -> tuple[str, ...]:
    """The lemmas of ``text``'s first sense, WordNet's order (the jargon of :data:`NARROWER` is
    its own only synonym); empty when the word is unknown."""
    found = lemma(text)
    if found is None:
        return ()
    if found in NARROWER:
        return (found,)
    senses = _senses(found)
    return tuple(_words().get(senses[0], ())) if senses else ()


def canonical(text: str) -> str | None:
    """One name for ``text``'s first sense — its alphabetically first lemma — so that synonyms
    meet: "coder", "programmer" and "software engineer" are all "coder"."""
    found = synonyms(text)
    return found[0] if found else None
