"""Catalog loading and validation, the built-in demo store, levers and money conversion."""

from __future__ import annotations

import copy
import json
import math
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from haggler.catalog import (
    Catalog,
    CatalogError,
    Lever,
    Product,
    load_catalog,
    parse_catalog,
    parse_lever,
)
from haggler.money import format_money, to_cents, to_decimal_number

# --------------------------------------------------------------------------- helpers


def _store(**overrides: Any) -> dict[str, Any]:
    store = {
        "name": "Test Outlet",
        "city": "Springfield",
        "rep_name": "Sam",
        "rep_title": "Sales",
        "tagline": "Good stuff.",
        "policy_default": "Free standard shipping. 30-day returns. 1-year warranty.",
        "headline": "Deals",
        "about": "A test store.",
        "category_label": "Test goods",
    }
    store.update(overrides)
    return store


def _product(**overrides: Any) -> dict[str, Any]:
    product = {
        "id": "widget-1",
        "kind": "widget",
        "name": "Widget One",
        "subtitle": "A widget",
        "description": "It is a widget. It widgets.",
        "year_made": 2024,
        "condition": "new",
        "list_price": 100,
        "floor": 91.37,
        "levers": ["Free shipping (~$15 retail value)"],
        "inventory_note": "12 units.",
    }
    product.update(overrides)
    return product


def _doc(*products: dict[str, Any], store: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"store": store if store is not None else _store(), "products": list(products) or [_product()]}


def _bad(doc: Any) -> str:
    with pytest.raises(CatalogError) as info:
        parse_catalog(doc)
    return str(info.value)


# --------------------------------------------------------------------------- demo catalog


@pytest.fixture(scope="module")
def demo() -> Catalog:
    return load_catalog()


def test_demo_catalog_loads_with_enough_products_and_kinds(demo: Catalog) -> None:
    assert len(demo.products) >= 9
    assert len({p.kind for p in demo.products}) >= 3
    assert all(p.kind for p in demo.products)


def test_demo_store_fields_are_filled(demo: Catalog) -> None:
    s = demo.store
    for value in (s.name, s.city, s.rep_name, s.rep_title, s.tagline, s.policy, s.headline, s.about,
                  s.category_label):
        assert value and value.strip()
    policy = s.policy.lower()
    assert "shipping" in policy and "return" in policy and "warranty" in policy
    assert s.currency == "USD"


def test_demo_products_are_well_formed(demo: Catalog) -> None:
    ids = [p.id for p in demo.products]
    assert len(ids) == len(set(ids))
    for p in demo.products:
        assert p.id == p.id.lower() and all(c.isalnum() or c == "-" for c in p.id), p.id
        assert p.name and p.subtitle and p.description and p.inventory_note, p.id
        assert isinstance(p.year_made, int) and 2000 <= p.year_made <= 2030, p.id
        assert p.condition in {"new", "open-box", "refurbished", "clearance"}, p.id
        assert 0 < p.floor_cents <= p.list_price_cents, p.id
        # floors sit between ~0.65 (clearance) and ~0.95 (premium new) of list price
        assert 0.6 <= p.floor_cents / p.list_price_cents <= 0.96, p.id
        assert 2 <= len(p.levers) <= 4, p.id
        for lever in p.levers:
            assert lever.value_cents is not None and lever.value_cents > 0, (p.id, lever.text)
            assert "$" not in lever.offer_text, (p.id, lever.offer_text)
        assert p.private_fields == {}, p.id
        assert demo.product(p.id) is p


def test_demo_prices_include_cents_and_whole_amounts(demo: Catalog) -> None:
    prices = [p.list_price_cents for p in demo.products]
    assert any(c % 100 for c in prices)
    assert any(c % 100 == 0 for c in prices)


def test_demo_catalog_file_is_the_common_format() -> None:
    path = Path(__file__).parents[1] / "src" / "haggler" / "data" / "demo_catalog.json"
    raw = json.loads(path.read_text("utf-8"))
    assert set(raw) == {"store", "products"}
    assert {"name", "city", "rep_name", "tagline", "policy_default"} <= set(raw["store"])
    required = {"id", "kind", "name", "subtitle", "description", "year_made", "condition", "list_price",
                "floor", "levers", "inventory_note"}
    for product in raw["products"]:
        assert required <= set(product), product.get("id")
        assert isinstance(product["list_price"], (int, float))
        assert isinstance(product["floor"], (int, float))


def test_catalog_lookup_of_unknown_id(demo: Catalog) -> None:
    assert demo.product("no-such-thing") is None


# --------------------------------------------------------------------------- levers


def test_parse_lever_reads_retail_value_note() -> None:
    lever = parse_lever("Free expedited 2-day shipping (~$45 retail value)")
    assert lever.value_cents == 4500
    assert lever.text == "Free expedited 2-day shipping (~$45 retail value)"


def test_parse_lever_reads_thousands_separator() -> None:
    assert parse_lever("In-home installation ($1,200 value)").value_cents == 120000


def test_parse_lever_reads_worth() -> None:
    assert parse_lever("Bag of house coffee, worth $30").value_cents == 3000


def test_parse_lever_reads_cents() -> None:
    assert parse_lever("Cable kit (~$19.50 retail value)").value_cents == 1950


def test_parse_lever_without_amount_is_none() -> None:
    assert parse_lever("Priority place in the repair queue").value_cents is None
    assert parse_lever("Extended 2-year warranty").value_cents is None


def test_offer_text_strips_the_parenthetical() -> None:
    assert parse_lever("Free expedited 2-day shipping (~$45 retail value)").offer_text == (
        "Free expedited 2-day shipping"
    )
    assert parse_lever("Extra battery pack (~$89 retail value).").offer_text == "Extra battery pack"
    assert parse_lever("Priority setup.").offer_text == "Priority setup"
    assert parse_lever("Bag of coffee, worth $30").offer_text == "Bag of coffee, worth $30"


def test_levers_cheapest_first_puts_unknown_values_last_in_file_order() -> None:
    catalog = parse_catalog(_doc(_product(levers=[
        "Mystery gift",
        "Extended 2-year warranty (~$120 retail value)",
        "Free 2-day shipping (~$45 retail value)",
        "Priority support",
        "Extra battery pack (~$89 retail value)",
    ])))
    ordered = catalog.products[0].levers_cheapest_first()
    assert [lv.value_cents for lv in ordered] == [4500, 8900, 12000, None, None]
    assert [lv.text for lv in ordered[3:]] == ["Mystery gift", "Priority support"]


def test_demo_levers_state_what_they_cost_the_store(demo: Catalog) -> None:
    """The demo catalog states each lever's cost, below its retail value, so that the merchant
    can afford extras near the floor; the cheapest-first order follows those costs."""
    for p in demo.products:
        for lever in p.levers:
            assert lever.cost_cents is not None and 0 < lever.cost_cents < (lever.value_cents or 0), (p.id, lever)
        costs = [lv.cost for lv in p.levers_cheapest_first()]
        assert costs == sorted(costs), p.id


def test_lever_object_states_its_cost() -> None:
    catalog = parse_catalog(_doc(_product(levers=[{"text": "Free shipping (~$45 retail value)", "cost": 12.5},
                                                  "Gift wrap (~$5 retail value)", "Priority queue"])))
    shipping, wrap, queue = catalog.products[0].levers
    assert (shipping.value_cents, shipping.cost_cents, shipping.cost) == (4500, 1250, 1250)
    assert (wrap.value_cents, wrap.cost_cents, wrap.cost) == (500, None, 500)  # the retail value counts
    assert (queue.value_cents, queue.cost_cents, queue.cost) == (None, None, 0)
    assert shipping.offer_text == "Free shipping"
    product = catalog.products[0]
    assert product.extras_cost(("Free shipping", "Gift wrap")) == 1750
    assert product.extras_cost(("Priority queue", "not a lever")) == 0
    assert [lv.offer_text for lv in product.levers_cheapest_first()] == ["Gift wrap", "Free shipping", "Priority queue"]


@pytest.mark.parametrize(("lever", "words"), [
    ({"text": "Free shipping", "cost": -1}, "must not be negative"),
    ({"text": "Free shipping"}, "'cost' must be a number"),
    ({"text": "Free shipping", "cost": "lots"}, "'cost' must be a finite number"),
    ({"cost": 3}, "'text' is missing"),
    ({"text": "Free shipping", "cost": 3, "value": 9}, "unknown field 'value'"),
])
def test_bad_lever_object_is_named(lever: dict[str, Any], words: str) -> None:
    msg = _bad(_doc(_product(id="lever-obj", levers=["Gift wrap", lever])))
    assert "lever-obj" in msg and "'levers', item 1" in msg and words in msg, msg


def test_levers_default_to_empty_and_are_stripped() -> None:
    product = _product()
    del product["levers"]
    assert parse_catalog(_doc(product)).products[0].levers == ()
    catalog = parse_catalog(_doc(_product(levers=["  Free shipping (~$15 retail value)  "])))
    assert catalog.products[0].levers == (Lever("Free shipping (~$15 retail value)", 1500),)


# --------------------------------------------------------------------------- money


def test_to_cents_decimal_string() -> None:
    assert to_cents("1299.99") == 129999


def test_to_cents_int() -> None:
    assert to_cents(579) == 57900
    assert to_cents(0) == 0


def test_to_cents_float_noise_is_rounded() -> None:
    assert 0.1 + 0.2 != 0.3
    assert to_cents(0.1 + 0.2) == 30
    assert to_cents(0.3) == 30
    assert to_cents(1299.99) == 129999
    assert to_cents(Decimal("19.995")) == 2000


@pytest.mark.parametrize("value", ["abc", "", float("nan"), "NaN", float("inf"), "-Infinity", True, False,
                                   None, [1], {"a": 1}])
def test_to_cents_rejects_non_amounts(value: object) -> None:
    with pytest.raises(ValueError):
        to_cents(value)


def test_format_money() -> None:
    assert format_money(129999) == "$1,299.99"
    assert format_money(57900) == "$579"
    assert format_money(5) == "$0.05"
    assert format_money(0) == "$0"
    assert format_money(-1050) == "-$10.50"
    assert format_money(123456789) == "$1,234,567.89"
    assert format_money(57900, "eur") == "€579"
    assert format_money(57900, "CHF") == "579 CHF"


def test_to_decimal_number() -> None:
    assert to_decimal_number(57900) == 579 and isinstance(to_decimal_number(57900), int)
    assert to_decimal_number(129999) == 1299.99


# --------------------------------------------------------------------------- good catalogs


def test_minimal_catalog_parses_to_cents() -> None:
    catalog = parse_catalog(_doc(_product(list_price="1299.99", floor=1131.46)))
    p = catalog.products[0]
    assert isinstance(p, Product)
    assert (p.list_price_cents, p.floor_cents) == (129999, 113146)
    assert p.currency == "USD"
    assert catalog.store.policy.startswith("Free standard shipping")


def test_floor_equal_to_list_price_is_allowed() -> None:
    catalog = parse_catalog(_doc(_product(list_price=100, floor=100)))
    assert catalog.products[0].floor_cents == catalog.products[0].list_price_cents


def test_unknown_product_fields_are_kept_private() -> None:
    catalog = parse_catalog(_doc(_product(supplier_cost=412.5, secret_margin="11%")))
    p = catalog.products[0]
    assert p.private_fields == {"supplier_cost": 412.5, "secret_margin": "11%"}
    assert not hasattr(p, "supplier_cost")


def test_store_may_use_policy_instead_of_policy_default() -> None:
    store = _store()
    store["policy"] = store.pop("policy_default")
    assert parse_catalog(_doc(store=store)).store.policy == store["policy"]


def test_load_catalog_from_file(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_text(json.dumps(_doc(_product(id="a1"), _product(id="b2"))), "utf-8")
    assert [p.id for p in load_catalog(path).products] == ["a1", "b2"]
    assert [p.id for p in load_catalog(str(path)).products] == ["a1", "b2"]


def test_load_catalog_accepts_utf8_bom(tmp_path: Path) -> None:
    path = tmp_path / "catalog.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps(_doc()).encode("utf-8"))
    assert load_catalog(path).products[0].id == "widget-1"


def test_demo_catalog_round_trips_through_a_file(tmp_path: Path, demo: Catalog) -> None:
    src = Path(__file__).parents[1] / "src" / "haggler" / "data" / "demo_catalog.json"
    copy_path = tmp_path / "copy.json"
    copy_path.write_text(src.read_text("utf-8"), "utf-8")
    assert load_catalog(copy_path) == demo


# --------------------------------------------------------------------------- bad catalogs


def test_missing_floor() -> None:
    product = _product(id="no-floor")
    del product["floor"]
    msg = _bad(_doc(product))
    assert "no-floor" in msg and "'floor'" in msg


def test_null_floor() -> None:
    msg = _bad(_doc(_product(id="null-floor", floor=None)))
    assert "null-floor" in msg and "'floor'" in msg


def test_floor_above_list_price() -> None:
    msg = _bad(_doc(_product(id="too-high", list_price=100, floor=100.01)))
    assert "too-high" in msg and "'floor'" in msg and "list_price" in msg


def test_duplicate_id() -> None:
    msg = _bad(_doc(_product(id="twin"), _product(id="other"), _product(id="twin")))
    assert "twin" in msg and "'id'" in msg and "duplicate" in msg


@pytest.mark.parametrize("bad_id", ["has space", "a/b", "café", "what?", "a#b", "50%off", "a\nb", "trailing\n",
                                    "x" * 101])
def test_url_unsafe_id(bad_id: str) -> None:
    msg = _bad(_doc(_product(id=bad_id)))
    assert bad_id in msg and "'id'" in msg


@pytest.mark.parametrize("bad_id", [None, "", 42])
def test_missing_or_non_string_id(bad_id: object) -> None:
    msg = _bad(_doc(_product(), _product(id=bad_id)))
    assert "products[1]" in msg and "'id'" in msg


@pytest.mark.parametrize("price", [0, -5, "-1299.99", 0.001])
def test_non_positive_list_price(price: object) -> None:
    msg = _bad(_doc(_product(id="freebie", list_price=price, floor=1)))
    assert "freebie" in msg and "'list_price'" in msg


@pytest.mark.parametrize("floor", [0, -1])
def test_non_positive_floor(floor: object) -> None:
    msg = _bad(_doc(_product(id="giveaway", floor=floor)))
    assert "giveaway" in msg and "'floor'" in msg


@pytest.mark.parametrize("price", ["abc", "$100", "", True, [100], {"amount": 100}, "NaN", "Infinity"])
def test_non_numeric_list_price(price: object) -> None:
    msg = _bad(_doc(_product(id="weird-price", list_price=price)))
    assert "weird-price" in msg and "'list_price'" in msg


def test_nan_list_price_from_json_file(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(_doc(_product(id="nan-price", list_price=math.nan))), "utf-8")
    assert "NaN" in path.read_text("utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert "nan-price" in str(info.value) and "'list_price'" in str(info.value)


def test_non_numeric_floor() -> None:
    msg = _bad(_doc(_product(id="weird-floor", floor="cheap")))
    assert "weird-floor" in msg and "'floor'" in msg


@pytest.mark.parametrize("levers", ["Free shipping (~$45 retail value)", {"a": "b"}, None, [1], [""], ["ok", None]])
def test_levers_not_a_list_of_strings(levers: object) -> None:
    msg = _bad(_doc(_product(id="lever-bad", levers=levers)))
    assert "lever-bad" in msg and "'levers'" in msg


@pytest.mark.parametrize("name", [None, "", "   ", 7])
def test_missing_name(name: object) -> None:
    product = _product(id="nameless")
    if name is None:
        del product["name"]
    else:
        product["name"] = name
    msg = _bad(_doc(product))
    assert "nameless" in msg and "'name'" in msg


@pytest.mark.parametrize(("field", "value"), [("year_made", "2024"), ("year_made", 2024.5), ("year_made", True),
                                              ("inventory_note", 5), ("kind", 3), ("condition", ["new"])])
def test_wrongly_typed_optional_fields(field: str, value: object) -> None:
    msg = _bad(_doc(_product(id="typed", **{field: value})))
    assert "typed" in msg and f"'{field}'" in msg


@pytest.mark.parametrize("field", ["name", "rep_name", "tagline", "policy_default"])
def test_missing_store_field(field: str) -> None:
    store = _store()
    del store[field]
    msg = _bad(_doc(store=store))
    assert "store" in msg and f"'{field}'" in msg


def test_store_field_wrong_type() -> None:
    msg = _bad(_doc(store=_store(city=12)))
    assert "store" in msg and "'city'" in msg


@pytest.mark.parametrize("store", [None, [], "Test Outlet"])
def test_store_not_an_object(store: object) -> None:
    doc = _doc()
    doc["store"] = store
    assert "store" in _bad(doc)


def test_store_missing_entirely() -> None:
    doc = _doc()
    del doc["store"]
    assert "store" in _bad(doc)


@pytest.mark.parametrize("products", [None, {"widget-1": _product()}, "widget-1"])
def test_products_not_a_list(products: object) -> None:
    doc = _doc()
    doc["products"] = products
    msg = _bad(doc)
    assert "'products'" in msg


def test_products_missing() -> None:
    doc = _doc()
    del doc["products"]
    assert "'products'" in _bad(doc)


def test_product_not_an_object() -> None:
    doc = _doc()
    doc["products"] = [_product(), "widget-2"]
    msg = _bad(doc)
    assert "products[1]" in msg


@pytest.mark.parametrize("doc", [[], [_doc()], "catalog", 42, None])
def test_top_level_not_an_object(doc: object) -> None:
    assert "top level" in _bad(doc)


def test_bad_catalog_does_not_mutate_input() -> None:
    doc = _doc(_product(id="ok"), _product(id="bad one"))
    before = copy.deepcopy(doc)
    _bad(doc)
    assert doc == before


def test_load_catalog_file_not_found(tmp_path: Path) -> None:
    path = tmp_path / "missing.json"
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert "missing.json" in str(info.value)


def test_load_catalog_directory(tmp_path: Path) -> None:
    with pytest.raises(CatalogError):
        load_catalog(tmp_path)


def test_load_catalog_invalid_json(tmp_path: Path) -> None:
    path = tmp_path / "broken.json"
    path.write_text('{"store": {"name": "x",}', "utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert "broken.json" in str(info.value) and "JSON" in str(info.value)


def test_load_catalog_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.json"
    path.write_text("", "utf-8")
    with pytest.raises(CatalogError, match="JSON"):
        load_catalog(path)


def test_load_catalog_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.json"
    path.write_bytes(json.dumps(_doc(_product(name="Caf\u00e9 grinder")), ensure_ascii=False).encode("latin-1"))
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert "latin1.json" in str(info.value) and "UTF-8" in str(info.value)


def test_load_catalog_bad_content_in_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_doc(_product(id="file-bad", floor=500, list_price=100))), "utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert "file-bad" in str(info.value) and "'floor'" in str(info.value)
