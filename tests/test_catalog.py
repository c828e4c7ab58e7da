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
    CatalogProblem,
    Lever,
    Product,
    load_catalog,
    parse_catalog,
    parse_lever,
)
from haggler.iso4217 import MINOR_UNITS
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


def _bad(doc: Any, *, strict: bool = True) -> str:
    with pytest.raises(CatalogError) as info:
        parse_catalog(doc, strict=strict)
    return str(info.value)


def _problems(doc: Any, *, strict: bool = True) -> tuple[CatalogProblem, ...]:
    with pytest.raises(CatalogError) as info:
        parse_catalog(doc, strict=strict)
    return info.value.problems


def _only(doc: Any) -> CatalogProblem:
    """The one problem ``doc`` has: a single mistake must not be reported twice or drag others in."""
    problems = _problems(doc)
    assert len(problems) == 1, problems
    return problems[0]


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


@pytest.mark.parametrize(("lever", "field", "words"), [
    ({"text": "Free shipping", "cost": -1}, "cost", "must not be negative"),
    ({"text": "Free shipping"}, "cost", "missing"),
    ({"text": "Free shipping", "cost": "lots"}, "cost", "must be a finite number"),
    ({"cost": 3}, "text", "missing"),
    ({"text": "Free shipping", "cost": 3, "value": 9}, "value", "unknown field"),
])
def test_bad_lever_object_is_named(lever: dict[str, Any], field: str, words: str) -> None:
    problem = _only(_doc(_product(id="lever-obj", levers=["Gift wrap", lever])))
    assert problem.pointer == f"/products/0/levers/1/{field}" and problem.product_id == "lever-obj"
    assert words in problem.message, problem


def test_store_shipping_is_read_for_agentic_checkout(demo: Catalog) -> None:
    """A store run from its catalog alone can be paid for through UCP and ACP: its catalog says how
    it ships (the demo: free standard shipping, as its policy says)."""
    assert [(c.id, c.price_cents, c.service_level) for c in demo.store.shipping] == [("standard", 0, "standard")]
    catalog = parse_catalog(_doc(store=_store(shipping=[{"id": "std", "title": "Standard", "price": 4.5},
                                                        {"id": "exp", "title": "2-day", "price": 12,
                                                         "service_level": "express"}])))
    assert [(c.id, c.price_cents, c.service_level) for c in catalog.store.shipping] == [
        ("std", 450, "standard"), ("exp", 1200, "express")]
    assert parse_catalog(_doc()).store.shipping == ()


@pytest.mark.parametrize(("shipping", "pointer", "words"), [
    ({"id": "std"}, "/store/shipping", "must be a list"),
    ([{"id": "std", "title": "Standard", "price": -1}], "/store/shipping/0/price", "must not be negative"),
    ([{"id": "std", "title": "Standard"}], "/store/shipping/0/price", "missing"),
    ([{"title": "Standard", "price": 1}], "/store/shipping/0/id", "missing"),
    ([{"id": "std", "title": "Standard", "price": 1, "days": 5}], "/store/shipping/0/days", "unknown field"),
    ([{"id": "std", "title": "A", "price": 1}, {"id": "std", "title": "B", "price": 2}], "/store/shipping/1/id",
     "used twice"),
    # a checkout offers one option per service level: a second at the same level would vanish
    ([{"id": "ground", "title": "A", "price": 5}, {"id": "express", "title": "B", "price": 15}],
     "/store/shipping/1/service_level", "already the level"),
])
def test_bad_store_shipping_is_named(shipping: Any, pointer: str, words: str) -> None:
    problem = _only(_doc(store=_store(shipping=shipping)))
    assert problem.pointer == pointer and words in problem.message, problem


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


def test_private_fields_named_x_are_kept_hidden_in_strict_mode() -> None:
    catalog = parse_catalog(_doc(_product(**{"x_supplier_cost": 412.5, "x-secret-margin": "11%"}),
                                 store=_store(x_owner_phone="555-0100")))
    p = catalog.products[0]
    assert p.private_fields == {"x_supplier_cost": 412.5, "x-secret-margin": "11%"}
    assert not hasattr(p, "x_supplier_cost") and not hasattr(catalog.store, "x_owner_phone")
    assert catalog.warnings == ()


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
    problem = _only(_doc(product))
    assert (problem.pointer, problem.product_id, problem.message) == ("/products/0/floor", "no-floor", "missing")


def test_null_floor() -> None:
    problem = _only(_doc(_product(id="null-floor", floor=None)))
    assert (problem.pointer, problem.product_id) == ("/products/0/floor", "null-floor")


def test_floor_above_list_price() -> None:
    problem = _only(_doc(_product(id="too-high", list_price=100, floor=100.01)))
    assert (problem.pointer, problem.product_id) == ("/products/0/floor", "too-high")
    assert problem.message == "100.01 is above list_price 100"
    assert str(problem) == "/products/0/floor (product 'too-high'): 100.01 is above list_price 100"


def test_duplicate_id() -> None:
    problem = _only(_doc(_product(id="twin"), _product(id="other"), _product(id="twin")))
    assert (problem.pointer, problem.product_id) == ("/products/2/id", "twin")
    assert "duplicate" in problem.message and "/products/0" in problem.message


@pytest.mark.parametrize("bad_id", ["has space", "a/b", "café", "what?", "a#b", "50%off", "a\nb", "trailing\n",
                                    "x" * 101])
def test_url_unsafe_id(bad_id: str) -> None:
    problem = _only(_doc(_product(id=bad_id)))
    assert problem.pointer == "/products/0/id" and repr(bad_id) in problem.message
    assert "\n" not in str(problem)  # one problem, one line, whatever the id holds


@pytest.mark.parametrize("bad_id", [None, "", 42])
def test_missing_or_non_string_id(bad_id: object) -> None:
    problem = _only(_doc(_product(), _product(id=bad_id)))
    assert problem.pointer == "/products/1/id" and problem.product_id is None


@pytest.mark.parametrize("price", [0, -5, "-1299.99", 0.001])
def test_non_positive_list_price(price: object) -> None:
    problem = _only(_doc(_product(id="freebie", list_price=price, floor=1)))
    assert (problem.pointer, problem.product_id) == ("/products/0/list_price", "freebie")
    assert "greater than 0" in problem.message


@pytest.mark.parametrize("floor", [0, -1])
def test_non_positive_floor(floor: object) -> None:
    problem = _only(_doc(_product(id="giveaway", floor=floor)))
    assert (problem.pointer, problem.product_id) == ("/products/0/floor", "giveaway")


@pytest.mark.parametrize("price", ["abc", "$100", "", True, [100], {"amount": 100}, "NaN", "Infinity"])
def test_non_numeric_list_price(price: object) -> None:
    problem = _only(_doc(_product(id="weird-price", list_price=price)))
    assert (problem.pointer, problem.product_id) == ("/products/0/list_price", "weird-price")


def test_nan_list_price_from_json_file(tmp_path: Path) -> None:
    path = tmp_path / "nan.json"
    path.write_text(json.dumps(_doc(_product(id="nan-price", list_price=math.nan))), "utf-8")
    assert "NaN" in path.read_text("utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert [(p.pointer, p.product_id) for p in info.value.problems] == [("/products/0/list_price", "nan-price")]


def test_non_numeric_floor() -> None:
    problem = _only(_doc(_product(id="weird-floor", floor="cheap")))
    assert (problem.pointer, problem.product_id) == ("/products/0/floor", "weird-floor")


@pytest.mark.parametrize(("levers", "pointer"), [
    ("Free shipping (~$45 retail value)", "/products/0/levers"), ({"a": "b"}, "/products/0/levers"),
    (None, "/products/0/levers"), ([1], "/products/0/levers/0"), ([""], "/products/0/levers/0"),
    (["ok", None], "/products/0/levers/1"),
])
def test_levers_not_a_list_of_strings(levers: object, pointer: str) -> None:
    problem = _only(_doc(_product(id="lever-bad", levers=levers)))
    assert (problem.pointer, problem.product_id) == (pointer, "lever-bad")


@pytest.mark.parametrize("name", [None, "", "   ", 7])
def test_missing_name(name: object) -> None:
    product = _product(id="nameless")
    if name is None:
        del product["name"]
    else:
        product["name"] = name
    problem = _only(_doc(product))
    assert (problem.pointer, problem.product_id) == ("/products/0/name", "nameless")


@pytest.mark.parametrize(("field", "value"), [("year_made", "2024"), ("year_made", 2024.5), ("year_made", True),
                                              ("inventory_note", 5), ("kind", 3), ("condition", ["new"])])
def test_wrongly_typed_optional_fields(field: str, value: object) -> None:
    problem = _only(_doc(_product(id="typed", **{field: value})))
    assert (problem.pointer, problem.product_id) == (f"/products/0/{field}", "typed")


@pytest.mark.parametrize("field", ["name", "rep_name", "tagline", "policy_default"])
def test_missing_store_field(field: str) -> None:
    store = _store()
    del store[field]
    assert _only(_doc(store=store)).pointer == f"/store/{field}"


def test_store_field_wrong_type() -> None:
    assert _only(_doc(store=_store(city=12))).pointer == "/store/city"


@pytest.mark.parametrize("store", [None, [], "Test Outlet"])
def test_store_not_an_object(store: object) -> None:
    doc = _doc()
    doc["store"] = store
    assert _only(doc).pointer == "/store"


def test_store_missing_entirely() -> None:
    doc = _doc()
    del doc["store"]
    assert _only(doc).pointer == "/store"


@pytest.mark.parametrize("products", [None, {"widget-1": _product()}, "widget-1"])
def test_products_not_a_list(products: object) -> None:
    doc = _doc()
    doc["products"] = products
    assert _only(doc).pointer == "/products"


def test_products_missing() -> None:
    doc = _doc()
    del doc["products"]
    assert _only(doc).pointer == "/products"


def test_product_not_an_object() -> None:
    doc = _doc()
    doc["products"] = [_product(), "widget-2"]
    assert _only(doc).pointer == "/products/1"


@pytest.mark.parametrize("doc", [[], [_doc()], "catalog", 42, None])
def test_top_level_not_an_object(doc: object) -> None:
    problem = _only(doc)
    assert problem.pointer == "" and "top level" in problem.message


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
    assert str(info.value) == (f"{path}: 1 problem\n"
                               "  /products/0/floor (product 'file-bad'): 500 is above list_price 100")


# --------------------------------------------------------------------------- every problem at once


def test_every_problem_is_reported_at_once_with_its_json_pointer(tmp_path: Path) -> None:
    """What a new store owner's first file looks like: the four required store fields missing, a
    bad currency, a typo, a floor above its price, a bad lever, a bad id and a duplicate — all
    reported in one go, in document order, each at its RFC 6901 pointer."""
    store = {"city": "Springfield", "currency": "usd"}
    doc = {"store": store, "products": [
        _product(id="ok-1"),
        _product(id="typo", levrs=["Gift wrap"], floor=120, list_price=100),
        _product(id="bad lever", levers=[{"text": "Free shipping", "cost": -3}]),
        _product(id="ok-1", year_made="2024"),
        _product(id="ok-1"),
    ]}
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(doc), "utf-8")
    with pytest.raises(CatalogError) as info:
        load_catalog(path)
    assert [(p.pointer, p.product_id) for p in info.value.problems] == [
        ("/store/name", None), ("/store/rep_name", None), ("/store/tagline", None), ("/store/policy_default", None),
        ("/store/currency", None),
        ("/products/1/floor", "typo"), ("/products/1/levrs", "typo"),
        ("/products/2/id", None), ("/products/2/levers/0/cost", None),
        ("/products/3/year_made", "ok-1"),
        ("/products/4/id", "ok-1"),
    ]
    lines = str(info.value).splitlines()
    assert lines[0] == f"{path}: 11 problems"
    assert lines[1:] == [f"  {p}" for p in info.value.problems]
    assert "  /products/1/levrs (product 'typo'): unknown field: did you mean 'levers'?" in lines
    assert "  /store/currency: 'usd' is not an ISO 4217 code as written: write 'USD'" in lines


def test_a_pointer_escapes_tilde_and_slash() -> None:
    problem = _only(_doc(_product(**{"a/b~c": 1})))
    assert problem.pointer == "/products/0/a~1b~0c"


# --------------------------------------------------------------------------- unknown fields, strict or not


def test_demo_catalog_loads_strictly_with_no_warnings(demo: Catalog) -> None:
    assert demo.warnings == ()
    assert load_catalog(None, strict=True) == demo


@pytest.mark.parametrize(("where", "field", "pointer", "hint"), [
    ("product", "levrs", "/products/0/levrs", "did you mean 'levers'?"),
    ("product", "list-price", "/products/0/list-price", "did you mean 'list_price'?"),
    ("product", "supplier_cost", "/products/0/supplier_cost", "x_"),
    ("store", "tagLine", "/store/tagLine", "did you mean 'tagline'?"),
    ("store", "owner_phone", "/store/owner_phone", "x_"),
    ("top", "prodcts", "/prodcts", "did you mean 'products'?"),
])
def test_unknown_field_is_refused_with_a_suggestion(where: str, field: str, pointer: str, hint: str) -> None:
    doc = _doc(_product(**{field: 1}) if where == "product" else _product(),
               store=_store(**{field: 1}) if where == "store" else None)
    if where == "top":
        doc[field] = 1
    problem = _only(doc)
    assert problem.pointer == pointer and problem.message.startswith("unknown field") and hint in problem.message


def test_not_strict_keeps_unknown_fields_hidden_and_warns() -> None:
    product = _product(id="w", levrs=["Gift wrap"], x_cost=3)
    del product["levers"]
    catalog = parse_catalog(_doc(product, store=_store(owner_phone="555-0100")), strict=False)
    assert [(w.pointer, w.product_id) for w in catalog.warnings] == [("/store/owner_phone", None),
                                                                     ("/products/0/levrs", "w")]
    assert "did you mean 'levers'?" in str(catalog.warnings[1])
    assert catalog.products[0].levers == ()  # the typo is not read as levers: it stays a private field
    assert catalog.products[0].private_fields == {"levrs": ["Gift wrap"], "x_cost": 3}


def test_not_strict_still_refuses_every_other_problem() -> None:
    doc = _doc(_product(id="w", levrs=[], floor=500, levers=[{"text": "Gift wrap", "cost": 1, "vale": 2}]))
    problems = _problems(doc, strict=False)
    assert [p.pointer for p in problems] == ["/products/0/floor", "/products/0/levers/0/vale"]


# --------------------------------------------------------------------------- currencies


def test_the_iso_4217_list_is_current_and_well_formed() -> None:
    assert all(len(code) == 3 and code.isascii() and code.isupper() for code in MINOR_UNITS)
    assert (MINOR_UNITS["USD"], MINOR_UNITS["JPY"], MINOR_UNITS["KWD"], MINOR_UNITS["XAU"]) == (2, 0, 3, None)
    assert {"XCG", "ZWG"} <= set(MINOR_UNITS)  # added in 2024-2025
    assert not {"HRK", "ANG", "BGN"} & set(MINOR_UNITS)  # withdrawn: Croatia and Bulgaria took the euro


@pytest.mark.parametrize("code", ["EUR", "GBP", "CHF", "SEK", "MXN", "XCG"])
def test_a_two_decimal_iso_4217_currency_is_accepted(code: str) -> None:
    catalog = parse_catalog(_doc(_product(id="a"), _product(id="b", currency="USD"), store=_store(currency=code)))
    assert catalog.store.currency == code
    assert [p.currency for p in catalog.products] == [code, "USD"]  # a product's own, else the store's


def test_currency_defaults_to_usd() -> None:
    assert parse_catalog(_doc()).store.currency == "USD"


@pytest.mark.parametrize(("code", "words"), [
    ("usd", "write 'USD'"),
    (" EUR", "write 'EUR'"),
    ("US", "not a current ISO 4217 currency code"),
    ("DOLLARS", "not a current ISO 4217 currency code"),
    ("ABC", "not a current ISO 4217 currency code"),
    ("HRK", "not a current ISO 4217 currency code"),
    (840, "three-letter ISO 4217 code"),
    ("JPY", "'JPY' has 0 minor units"),
    ("BHD", "'BHD' has 3 minor units"),
    ("KWD", "'KWD' has 3 minor units"),
    ("CLF", "'CLF' has 4 minor units"),
    ("XAU", "'XAU' has no minor unit"),
])
def test_a_currency_haggler_cannot_price_in_is_refused(code: object, words: str) -> None:
    store_problem = _only(_doc(store=_store(currency=code)))
    assert store_problem.pointer == "/store/currency" and words in store_problem.message, store_problem
    product_problem = _only(_doc(_product(id="p", currency=code)))
    assert (product_problem.pointer, product_problem.product_id) == ("/products/0/currency", "p")
    assert words in product_problem.message
    if isinstance(code, str) and code in MINOR_UNITS:
        assert "only currencies with 2 minor units" in store_problem.message
