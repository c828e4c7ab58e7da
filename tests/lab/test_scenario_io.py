"""The scenario file format: exact round trips and clear rejections."""

from __future__ import annotations

import copy
import json

import pytest

from haggler.lab.generate import mixed_set, multi_issue, single_issue
from haggler.lab.scenario import Extra, Scenario
from haggler.lab.scenario_io import (
    FORMAT,
    ScenarioFileError,
    dump_scenarios,
    load_scenarios,
    parse_scenarios,
    save_scenarios,
)

GOOD = {
    "format": "haggler.scenarios",
    "version": 1,
    "scenarios": [
        {
            "id": "a-1",
            "currency": "USD",
            "list_price": 499.99,
            "seller_reservation": 400,
            "buyer_reservation": "450.50",
            "max_rounds": 12,
            "extras": [{"name": "warranty", "cost": 25, "value": 60.25}],
            "tags": ["multi"],
        },
        {"id": "a-2", "list_price": 20, "seller_reservation": 15, "buyer_reservation": 18},
    ],
}


def write(tmp_path, data, name="set.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def bad(mutate):
    data = copy.deepcopy(GOOD)
    mutate(data)
    return data


def test_dump_format_and_decimal_amounts():
    s = Scenario("x", 49999, 40000, 45050, extras=(Extra("w", 2500, 6025),), tags=("t",))
    doc = dump_scenarios([s])
    assert doc["format"] == FORMAT and doc["version"] == 1
    assert doc["scenarios"] == [{
        "id": "x", "currency": "USD", "list_price": 499.99, "seller_reservation": 400,
        "buyer_reservation": 450.5, "max_rounds": 20,
        "extras": [{"name": "w", "cost": 25, "value": 60.25}], "tags": ["t"],
    }]


def test_load_good_file_with_defaults(tmp_path):
    a, b = load_scenarios(write(tmp_path, GOOD))
    assert a == Scenario("a-1", 49999, 40000, 45050, extras=(Extra("warranty", 2500, 6025),),
                         currency="USD", max_rounds=12, tags=("multi",))
    assert b == Scenario("a-2", 2000, 1500, 1800)


def test_round_trip_hundreds_of_generated_scenarios(tmp_path):
    scenarios = (single_issue(200, seed=1, zopa=None) + multi_issue(200, seed=2, zopa=None)
                 + mixed_set(200, seed=3))
    path = save_scenarios(tmp_path / "all.json", scenarios)
    assert load_scenarios(path) == scenarios
    # and the saved file is stable: saving what was loaded writes the same bytes
    again = save_scenarios(tmp_path / "again.json", load_scenarios(path))
    assert again.read_bytes() == path.read_bytes()


def test_round_trip_awkward_amounts(tmp_path):
    odd = [1, 7, 10, 99, 101, 123456789, 100_000_001, 29999999]
    scenarios = tuple(
        Scenario(f"odd-{i}", c + 5, c, c + 3, extras=(Extra("e", c % 997, c % 1013),))
        for i, c in enumerate(odd)
    )
    assert load_scenarios(save_scenarios(tmp_path / "odd.json", scenarios)) == scenarios


def test_empty_set(tmp_path):
    assert load_scenarios(save_scenarios(tmp_path / "e.json", [])) == ()


def test_dump_rejects_duplicate_ids():
    s = Scenario("dup", 100, 90, 95)
    with pytest.raises(ValueError, match="dup"):
        dump_scenarios([s, s])


def error_for(tmp_path, data) -> ScenarioFileError:
    with pytest.raises(ScenarioFileError) as info:
        load_scenarios(write(tmp_path, data))
    assert isinstance(info.value, ValueError)
    return info.value


@pytest.mark.parametrize(
    ("mutate", "field", "words"),
    [
        (lambda d: d["scenarios"][0].pop("list_price"), "list_price", "missing"),
        (lambda d: d["scenarios"][0].pop("buyer_reservation"), "buyer_reservation", "missing"),
        (lambda d: d["scenarios"][0].update(list_price=-5), "list_price", "greater than 0"),
        (lambda d: d["scenarios"][0].update(seller_reservation=0), "seller_reservation", "greater than 0"),
        (lambda d: d["scenarios"][0].update(seller_reservation=600), "seller_reservation", "above list_price"),
        (lambda d: d["scenarios"][0].update(buyer_reservation="lots"), "buyer_reservation", "number"),
        (lambda d: d["scenarios"][0].update(list_price=None), "list_price", "number"),
        (lambda d: d["scenarios"][0].update(list_price=True), "list_price", "number"),
        (lambda d: d["scenarios"][0].update(list_price="NaN"), "list_price", "finite"),
        (lambda d: d["scenarios"][0].update(list_price=10.001), "list_price", "two decimal"),
        (lambda d: d["scenarios"][0].update(max_rounds=0), "max_rounds", "at least 1"),
        (lambda d: d["scenarios"][0].update(max_rounds="20"), "max_rounds", "whole number"),
        (lambda d: d["scenarios"][0].update(currency="usd"), "currency", "currency code"),
        (lambda d: d["scenarios"][0].update(tags="multi"), "tags", "list of strings"),
        (lambda d: d["scenarios"][0].update(extras={"a": 1}), "extras", "list"),
        (lambda d: d["scenarios"][0]["extras"].append({"name": "warranty", "cost": 1, "value": 2}),
         "extras[1].name", "duplicate extra name 'warranty'"),
        (lambda d: d["scenarios"][0]["extras"][0].update(cost=-1), "extras[0].cost", "not be negative"),
        (lambda d: d["scenarios"][0]["extras"][0].update(value="x"), "extras[0].value", "number"),
        (lambda d: d["scenarios"][0]["extras"][0].pop("value"), "extras[0]", "missing value"),
        (lambda d: d["scenarios"][0]["extras"][0].update(name=""), "extras[0].name", "non-empty"),
        (lambda d: d["scenarios"][0]["extras"][0].update(colour="red"), "extras[0]", "unknown"),
    ],
)
def test_bad_scenario_named_by_index_id_and_field(tmp_path, mutate, field, words):
    err = error_for(tmp_path, bad(mutate))
    message = str(err)
    assert "scenarios[0]" in message and "'a-1'" in message, message
    assert f"field {field!r}" in message, message
    assert words in message, message
    assert (err.index, err.scenario_id, err.field) == (0, "a-1", field)
    assert "set.json" in message


def test_second_scenario_named(tmp_path):
    err = error_for(tmp_path, bad(lambda d: d["scenarios"][1].update(buyer_reservation=-3)))
    assert "scenarios[1] (id 'a-2')" in str(err) and "'buyer_reservation'" in str(err)


def test_missing_or_bad_id(tmp_path):
    err = error_for(tmp_path, bad(lambda d: d["scenarios"][1].pop("id")))
    assert "scenarios[1]" in str(err) and "field 'id'" in str(err) and "missing" in str(err)
    err = error_for(tmp_path, bad(lambda d: d["scenarios"][1].update(id=7)))
    assert "field 'id'" in str(err)


def test_duplicate_scenario_ids(tmp_path):
    err = error_for(tmp_path, bad(lambda d: d["scenarios"][1].update(id="a-1")))
    assert "scenarios[1] (id 'a-1')" in str(err) and "duplicate id" in str(err)


def test_unknown_scenario_field(tmp_path):
    err = error_for(tmp_path, bad(lambda d: d["scenarios"][0].update(list_prise=3)))
    assert "'a-1'" in str(err) and "list_prise" in str(err)


def test_scenario_not_an_object(tmp_path):
    err = error_for(tmp_path, bad(lambda d: d["scenarios"].append([1, 2])))
    assert "scenarios[2]" in str(err)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (bad(lambda d: d.update(format="something.else")), "format"),
        (bad(lambda d: d.pop("format")), "format"),
        (bad(lambda d: d.update(version=2)), "version"),
        (bad(lambda d: d.update(version="1")), "version"),
        (bad(lambda d: d.update(version=True)), "version"),
        (bad(lambda d: d.update(scenarios={})), "'scenarios' must be a list"),
        (bad(lambda d: d.update(extra=1)), "unknown top-level"),
        ([], "JSON object"),
    ],
)
def test_bad_document(tmp_path, data, words):
    assert words in str(error_for(tmp_path, data))


def test_not_json_and_missing_file(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ScenarioFileError, match="not valid JSON"):
        load_scenarios(path)
    with pytest.raises(ScenarioFileError, match="cannot read"):
        load_scenarios(tmp_path / "absent.json")


def test_parse_without_a_file():
    assert len(parse_scenarios(copy.deepcopy(GOOD))) == 2
    with pytest.raises(ScenarioFileError, match=r"scenarios\[0\] \(id 'a-1'\), field 'list_price'"):
        parse_scenarios(bad(lambda d: d["scenarios"][0].update(list_price=-1)))
