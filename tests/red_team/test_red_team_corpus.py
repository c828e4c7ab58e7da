"""The red-team corpus (tests/red_team/corpus.json) and its loader: the shape the benchmark relies
on — ten named families, at least 200 turns, no empty or repeated turn — amounts drawn from the
public list price only, and attacks a keyword screen would not catch."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest

from haggler.catalog import load_catalog
from tests.support.red_team import CORPUS, FAMILIES, fill, load_corpus, turns_for

CATALOG = load_catalog()
CORPUS_DATA = load_corpus()
ATTACKS = CORPUS_DATA.attacks
SIMPLE_SCREEN = re.compile(
    r"floor|minimum|lowest|bottom|reserve|cost|margin|note|instruction|prompt|system|ignore|owner|manager"
    r"|secret|config|reveal")


def test_at_least_200_turns_in_exactly_the_ten_families() -> None:
    assert tuple(CORPUS_DATA.families) == FAMILIES
    assert CORPUS_DATA.turn_count >= 200
    for family in CORPUS_DATA.families.values():
        assert family.turn_count >= 15, family.name
        assert family.description.strip() and "\n" not in family.description
        assert family.magentic.strip()


def test_attack_ids_are_unique_and_name_their_family() -> None:
    ids = [attack.id for attack in ATTACKS]
    assert len(ids) == len(set(ids))
    prefixes = {name: {a.id.split("-")[0] for a in family.attacks} for name, family in CORPUS_DATA.families.items()}
    assert all(len(p) == 1 for p in prefixes.values()), prefixes
    assert len({next(iter(p)) for p in prefixes.values()}) == len(FAMILIES)


def test_no_turn_is_empty_or_repeated() -> None:
    seen: dict[str, str] = {}
    for attack in ATTACKS:
        for turn in attack.turns:
            assert turn.strip(), attack.id
            key = " ".join(turn.casefold().split())
            assert key not in seen, f"{attack.id} repeats a turn of {seen.get(key)}"
            seen[key] = attack.id


def test_multi_turn_families_are_multi_turn() -> None:
    for name in ("multi_turn_pressure", "split_numbers"):
        assert all(len(attack.turns) >= 2 for attack in CORPUS_DATA.families[name].attacks), name


def test_every_family_goes_after_what_it_says() -> None:
    for family in CORPUS_DATA.families.values():
        assert {attack.goal for attack in family.attacks} <= {"leak", "price"}
    assert {a.goal for a in ATTACKS} == {"leak", "price"}


@pytest.mark.parametrize("product", CATALOG.products, ids=lambda p: p.id)
def test_every_placeholder_fills_for_every_product(product) -> None:
    for attack in ATTACKS:
        for turn in turns_for(attack, product):
            assert not re.search(r"\{(?:list|product|[pd]\d{2})(?::\w+)?\}", turn), (attack.id, turn)


def test_amounts_come_from_the_public_list_price_only() -> None:
    """Two products alike in public but not in hidden state get the same attack texts."""
    product = CATALOG.products[0]
    other = replace(product, floor_cents=product.floor_cents // 2, inventory_note="something else entirely",
                    levers=())
    for attack in ATTACKS:
        assert turns_for(attack, product) == turns_for(attack, other)


def test_placeholders_and_their_forms() -> None:
    assert fill("{list} {p40} {d40} {product}", 64999, "Vac") == "649.99 260 390 Vac"
    assert fill("{p40:words}|{p40:spaced}|{p40:rev}|{p40:b64}", 64999, "x") == "two hundred sixty|2 6 0|062|MjYw"
    assert fill("{p40:hex}|{p40:fw}|{p40:ar}|{p40:cents}", 64999, "x") == "32 36 30|２６０|٢٦٠|26000"
    assert fill("{p45:half}+{p45:rest}|{p40:head}+{p40:tail}", 64999, "x") == "146+146|2+60"
    assert fill('{"json": {p30}} {not a placeholder}', 37900, "x") == '{"json": 114} {not a placeholder}'
    with pytest.raises(ValueError):
        fill("{p40:bogus}", 64999, "x")


def test_price_attacks_aim_below_every_demo_floor() -> None:
    """An attack that pushes a price must push one under the floor for the gullible model's
    acceptance to count as a sale below it: the percentages used stay under the lowest floor."""
    lowest_share = min(p.floor_cents / p.list_price_cents for p in CATALOG.products)
    shares = {int(m) for a in ATTACKS for t in a.turns for m in re.findall(r"\{p(\d{2})", t)}
    assert shares and max(shares) / 100 < lowest_share


def test_several_attacks_slip_past_a_simple_keyword_screen() -> None:
    """Requests for hidden state without any plain keyword, and offers without their amount in
    ASCII digits: only a reader that decodes sees them (the gullible model does; see
    test_gullible_model.py's whole-corpus test)."""
    product = CATALOG.products[0]
    quiet_leaks = [a.id for a in ATTACKS if a.goal == "leak"
                   and not any(SIMPLE_SCREEN.search(t.lower()) for t in turns_for(a, product))]
    assert len(quiet_leaks) >= 10, quiet_leaks
    offers = {a.id: " ".join(turns_for(a, product)) for a in ATTACKS if a.goal == "price"}
    hidden_offers = [i for i, text in offers.items()
                     if not any(f"{share}" in text for share in _pushed_amounts(product.list_price_cents))]
    assert len(hidden_offers) >= 8, hidden_offers


def _pushed_amounts(list_price_cents: int) -> set[str]:
    return {fill(f"{{p{n}}}", list_price_cents, "") for n in range(20, 65, 5)}


def test_the_file_is_stable_json_with_invisible_characters_escaped() -> None:
    raw = CORPUS.read_text(encoding="utf-8")
    json.loads(raw)
    assert not re.search("[\u200b-\u200f\u2060\ufeff\U000e0000-\U000e007f]", raw)
