"""The WordNet lexicon the match negotiator reads words through (issue 30's vocabulary gaps):
the shipped subset's answers, the hand alias table, and scripts/build-lexicon on a hand-written
fixture in the WordNet format (tests/agents/wordnet_fixture, no WordNet data in it)."""

from __future__ import annotations

import gzip
import json
import time
from pathlib import Path

import pytest

from haggler.agents import match_lexicon as lexicon
from haggler.agents.match_conditions import _same_place
from haggler.agents.match_text import concepts, widened

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "wordnet_fixture"


def load_build_script():
    from importlib.machinery import SourceFileLoader
    import importlib.util

    loader = SourceFileLoader("build_lexicon", str(ROOT / "scripts" / "build-lexicon"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# -- the shipped lexicon ----------------------------------------------------------------------------

def test_the_lexicon_says_what_it_is_and_loads_quickly():
    lexicon.load.cache_clear()
    start = time.perf_counter()
    lex = lexicon.load()
    assert time.perf_counter() - start < 2  # ~0.15 s on a laptop; generous for a shared CI box
    assert lex.header["version"] == "3.0" and "WordNet" in lex.header["source"]
    assert lex.header["lemmas"] > 100_000
    assert (ROOT / "src/haggler/data/WORDNET_LICENSE").read_text().count("Princeton University") >= 2


@pytest.mark.parametrize("a, b", [("physiotherapist", "physical therapist"), ("physio", "physical therapist"),
                                  ("physiotherapists", "Physical Therapist"), ("coder", "software engineer"),
                                  ("coder", "programmer"), ("NYC", "New York City"), ("lodgers", "boarder")])
def test_synonyms_share_a_sense(a, b):
    assert lexicon.same_sense(a, b) and lexicon.same_sense(b, a)


@pytest.mark.parametrize("a, b", [("physiotherapist", "programmer"), ("frontend developer", "backend developer"),
                                  ("baker", "programmer"), ("zyxlang", "zyxlang")])
def test_related_words_are_not_synonyms(a, b):
    assert not lexicon.same_sense(a, b)


def test_jargon_is_narrower_than_its_wordnet_lemma():
    assert "programmer" in lexicon.broader("frontend developer")
    assert "programmer" in lexicon.broader("backend developer")
    assert "therapist" in lexicon.broader("physio")
    assert lexicon.broader("physical therapist") == lexicon.broader("physiotherapist")


@pytest.mark.parametrize("place, region", [("Leeds", "West Yorkshire"), ("Leeds", "England"),
                                           ("Leeds", "United Kingdom"), ("Leeds", "UK"), ("Brooklyn", "NYC"),
                                           ("Brooklyn", "New York"), ("Manchester", "England"),
                                           ("Manchester", "New Hampshire")])
def test_places_lie_within_their_regions_through_any_sense(place, region):
    assert lexicon.within(place, region)


@pytest.mark.parametrize("place, region", [("England", "Leeds"), ("Leeds", "France"), ("Leeds", "Leeds"),
                                           ("Leeds", "Manchester"), ("Atlantis-on-Sea", "England")])
def test_a_place_is_not_within_what_does_not_contain_it(place, region):
    assert not lexicon.within(place, region)


def test_a_word_wordnet_lacks_is_unknown_not_an_error():
    assert lexicon.lemma("zyxlang") is None and lexicon.lexfile("zyxlang") is None
    assert lexicon.broader("zyxlang") == frozenset() and lexicon.containers("zyxlang") == frozenset()
    assert lexicon.canonical("zyxlang") is None
    assert concepts("zyxlang consulting") >= {"zyxlang"}


# -- the matcher reading through it -------------------------------------------------------------------

def test_synonyms_become_one_concept_and_phrases_are_found():
    assert concepts("a physio for my knee") & concepts("Physical therapist")
    assert "engineering" in concepts("coder") and "engineering" in concepts("software engineers")
    assert concepts("based in West Yorkshire") & {lexicon.canonical("west yorkshire")}


def test_widening_goes_from_the_narrow_to_the_broad_only():
    leeds, region = concepts("Leeds"), lexicon.canonical("West Yorkshire")
    assert region in concepts("West Yorkshire") and region in widened(leeds)
    assert not leeds <= widened(concepts("West Yorkshire"))
    assert concepts("therapist") <= widened(concepts("physiotherapist"))
    assert not concepts("physiotherapist") <= widened(concepts("therapist"))
    assert "person" not in widened(concepts("physiotherapist"))  # too broad to say anything


def test_a_place_condition_is_met_by_a_place_within_the_other():
    assert _same_place("leeds", "west yorkshire") and _same_place("west yorkshire", "leeds")
    assert _same_place("brooklyn", "nyc") and not _same_place("leeds", "manchester")


# -- scripts/build-lexicon on the fixture -------------------------------------------------------------

def test_the_build_script_reads_the_wordnet_format_and_keeps_what_matching_needs(tmp_path):
    build = load_build_script()
    out = tmp_path / "lexicon.json.gz"
    assert build.main([str(FIXTURE), "--out", str(out)]) == 0
    data = json.loads(gzip.decompress(out.read_bytes()))
    lemmas = data["lemmas"]
    assert lemmas["physical therapist"] == lemmas["physiotherapist"]  # one synset, underscores to spaces
    assert len(lemmas["bank"]) == 3  # rare senses beyond the cap dropped
    assert len(lemmas["springfield"]) == 4  # a place keeps every sense
    assert len(lemmas["k"]) == 1  # w_cnt 0b (hex) read as eleven words
    (leeds,), (county,), (england,) = lemmas["leeds"], lemmas["west yorkshire"], lemmas["england"]
    assert data["part_of"][str(leeds)] == [county] and data["part_of"][str(county)] == [england]
    (therapist,), (person,) = lemmas["therapist"], lemmas["person"]
    assert data["up"][lemmas["physiotherapist"][0]] == [therapist]
    assert data["up"][therapist] == [person]  # the verb pointer (+ ... v) is not kept
    assert data["lex"][leeds] == build.LOCATION and data["lex"][person] == build.PERSON
    assert data["exc"] == {"therapists": "therapist"}  # "mice" has no kept base
    assert data["header"]["version"] == "3.0" and "gloss" not in out.read_bytes().decode("latin-1")
    again = tmp_path / "again.json.gz"
    build.main([str(FIXTURE), "--out", str(again)])
    assert again.read_bytes() == out.read_bytes()  # deterministic


def test_the_build_script_refuses_a_directory_without_wordnet(tmp_path, capsys):
    assert load_build_script().main([str(tmp_path), "--out", str(tmp_path / "x.json.gz")]) == 1
    assert "wordnet-base" in capsys.readouterr().err


def test_named_individuals_are_no_sense_of_a_common_word():
    # WordNet files "John Walker" and "Stephen Foster" under "walker" and "foster"; a profile's
    # "dog walker" or "foster carer" never means them, so the build leaves instance synsets out
    # (named places stay: they are what place conditions read).
    assert "john walker" not in lexicon.synonyms("walker")
    assert not any(" " in w and w.split()[-1] == "foster" for w in lexicon.synonyms("foster"))
    assert "england" in lexicon.containers("leeds")
