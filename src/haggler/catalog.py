"""The store catalog: loading, validation, and the split between public and hidden fields.

haggler reads the common negotiate.v1 catalog format (``{"store": {...}, "products": [...]}``)
unchanged. Prices in the file are decimal; here they become integer cents. A bad catalog
fails at start-up with a :class:`CatalogError` that names the product and the field.

Hidden fields (``floor``, ``levers``, ``inventory_note``, ``merchant_persona`` and anything
else the file carries that we do not publish on purpose) are kept on :class:`Product`, but
nothing in this module renders them: public views are built from explicit allow-lists in
:mod:`haggler.protocols.negotiate_v1.views`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from haggler.money import amount_cents, positive_cents, to_cents

#: Characters that may appear in a product id: RFC 3986 "unreserved", so an id can go in a
#: URL path or query without encoding.
PRODUCT_ID_PATTERN = re.compile(r"^[A-Za-z0-9._~-]{1,100}\Z")  # \Z: "$" would let a trailing "\n" in

_LEVER_VALUE = re.compile(
    r"(?:~|about\s+|approx\.?\s+)?[$€£]\s?(\d[\d,]*(?:\.\d{1,2})?)\s*(?:retail\s+)?(?:value|worth)?",
    re.IGNORECASE,
)
_LEVER_PARENTHETICAL = re.compile(r"\s*\([^)]*\)[\s.]*$")


class CatalogError(ValueError):
    """The catalog cannot be served; the message names the product and the field."""


@dataclass(frozen=True)
class Lever:
    """A non-price concession the merchant may trade, with its retail value when stated and
    what it costs the store when the catalog says so."""

    text: str
    value_cents: int | None
    #: What granting it costs the store, when the catalog states it (``{"text": ..., "cost": ...}``).
    cost_cents: int | None = None
    #: The concession as said to a shopper: the lever without its internal value note. Worked
    #: out once: the merchant matches extras by it several times a turn.
    offer_text: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "offer_text", _LEVER_PARENTHETICAL.sub("", self.text).strip().rstrip("."))

    @property
    def cost(self) -> int:
        """What the merchant counts against the floor for it: the stated cost, else the stated
        retail value (the most it could cost), else nothing."""
        if self.cost_cents is not None:
            return self.cost_cents
        return self.value_cents or 0

    @property
    def known_cost(self) -> bool:
        return self.cost_cents is not None or self.value_cents is not None


@dataclass(frozen=True)
class Store:
    name: str
    rep_name: str
    tagline: str
    policy: str
    city: str | None = None
    rep_title: str | None = None
    headline: str | None = None
    about: str | None = None
    category_label: str | None = None
    currency: str = "USD"


@dataclass(frozen=True, slots=True)
class ProductFacts:
    """The public face of a product: the allow-list of what may be shown to a shopper.

    Everything that renders a product (catalog JSON, pages, merchant replies) starts from
    this type, never from :class:`Product`, so a hidden field cannot leak by accident.
    """

    id: str
    name: str
    kind: str | None
    subtitle: str
    description: str
    year_made: int | None
    condition: str | None
    list_price_cents: int
    currency: str


@dataclass(frozen=True)
class Product(ProductFacts):
    """A product as the merchant knows it: the public facts plus the hidden state."""

    floor_cents: int
    levers: tuple[Lever, ...]
    inventory_note: str
    merchant_persona: str | None = None
    private_fields: dict[str, Any] = field(default_factory=dict)

    @property
    def facts(self) -> ProductFacts:
        """A true :class:`ProductFacts` (not this object), holding the public fields only."""
        return ProductFacts(**{f.name: getattr(self, f.name) for f in fields(ProductFacts)})

    def extras_cost(self, extras: tuple[str, ...]) -> int:
        """What granting ``extras`` (lever offer texts, as said to shoppers) costs the store."""
        return sum(lever.cost for lever in self.levers if lever.offer_text in extras)

    def levers_cheapest_first(self) -> tuple[Lever, ...]:
        """Levers in the order a salesperson trades them: cheapest to the store first (stated
        cost, else stated retail value); levers with neither last, in file order."""
        known = [lv for lv in self.levers if lv.known_cost]
        unknown = [lv for lv in self.levers if not lv.known_cost]
        return tuple(sorted(known, key=lambda lv: lv.cost)) + tuple(unknown)


@dataclass(frozen=True)
class Catalog:
    store: Store
    products: tuple[Product, ...]

    def product(self, product_id: str) -> Product | None:
        return self._index.get(product_id)

    @property
    def _index(self) -> dict[str, Product]:
        index = self.__dict__.get("_index_cache")
        if index is None:
            index = {p.id: p for p in self.products}
            object.__setattr__(self, "_index_cache", index)
        return index


def parse_lever(text: str) -> Lever:
    """Read the retail value a lever's text states, e.g. ``"Free shipping (~$45 retail value)"``."""
    match = _LEVER_VALUE.search(text)
    value = to_cents(match.group(1).replace(",", "")) if match else None
    return Lever(text=text, value_cents=value)


def _parse_levers(raw: Any, where: str) -> tuple[Lever, ...]:
    """A product's ``levers``: each a string (its retail value, if any, in the text), or an
    object ``{"text": ..., "cost": ...}`` that also states what granting it costs the store."""
    if not isinstance(raw, list):
        raise CatalogError(f"{where}: field 'levers' must be a list")
    levers = []
    for index, item in enumerate(raw):
        at = f"{where}: field 'levers', item {index},"
        if isinstance(item, str) and item.strip():
            levers.append(parse_lever(item.strip()))
            continue
        if not isinstance(item, dict):
            raise CatalogError(f"{at} must be a non-empty string or an object with 'text' and 'cost'")
        unknown = sorted(set(item) - {"text", "cost"})
        if unknown:
            raise CatalogError(f"{at} has unknown field {unknown[0]!r} (a lever object holds 'text' and 'cost')")
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise CatalogError(f"{at}: field 'text' is missing or not a non-empty string")
        try:
            cost = amount_cents(item.get("cost"), allow_strings=True)
        except ValueError as exc:
            raise CatalogError(f"{at}: field 'cost' {exc}") from exc
        if cost < 0:
            raise CatalogError(f"{at}: field 'cost' must not be negative, got {item['cost']!r}")
        levers.append(replace(parse_lever(text.strip()), cost_cents=cost))
    return tuple(levers)


def _required_str(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise CatalogError(f"{where}: field '{key}' is missing or not a non-empty string")
    return value.strip()


def _optional_str(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise CatalogError(f"{where}: field '{key}' must be a string")
    return value.strip() or None


def _amount(raw: dict[str, Any], key: str, where: str) -> int:
    if key not in raw or raw[key] is None:
        raise CatalogError(f"{where}: field '{key}' is missing")
    try:
        return positive_cents(raw[key], allow_strings=True)
    except ValueError as exc:
        raise CatalogError(f"{where}: field '{key}' {exc}") from exc


_STORE_FIELDS = {"name", "city", "rep_name", "rep_title", "tagline", "policy_default", "policy",
                 "headline", "about", "category_label", "currency"}
_PRODUCT_FIELDS = {"id", "kind", "name", "subtitle", "description", "year_made", "condition",
                   "list_price", "currency", "floor", "levers", "inventory_note", "merchant_persona"}


def parse_store(raw: Any) -> Store:
    if not isinstance(raw, dict):
        raise CatalogError("store: must be an object")
    where = "store"
    policy = raw.get("policy_default", raw.get("policy"))
    if not isinstance(policy, str) or not policy.strip():
        raise CatalogError("store: field 'policy_default' is missing or not a non-empty string")
    currency = (_optional_str(raw, "currency", where) or "USD").upper()
    return Store(
        name=_required_str(raw, "name", where),
        rep_name=_required_str(raw, "rep_name", where),
        tagline=_required_str(raw, "tagline", where),
        policy=policy.strip(),
        city=_optional_str(raw, "city", where),
        rep_title=_optional_str(raw, "rep_title", where),
        headline=_optional_str(raw, "headline", where),
        about=_optional_str(raw, "about", where),
        category_label=_optional_str(raw, "category_label", where),
        currency=currency,
    )


def parse_product(raw: Any, index: int, store_currency: str) -> Product:
    if not isinstance(raw, dict):
        raise CatalogError(f"products[{index}]: must be an object")
    pid = raw.get("id")
    if not isinstance(pid, str) or not pid:
        raise CatalogError(f"products[{index}]: field 'id' is missing or not a string")
    where = f"product '{pid}'"
    if not PRODUCT_ID_PATTERN.match(pid):
        raise CatalogError(
            f"{where}: field 'id' may only hold letters, digits and . _ ~ - (1-100 characters), "
            "so that it can go in a URL path"
        )
    list_price = _amount(raw, "list_price", where)
    floor = _amount(raw, "floor", where)
    if floor > list_price:
        raise CatalogError(f"{where}: field 'floor' ({raw['floor']}) is above 'list_price' ({raw['list_price']})")
    levers = _parse_levers(raw.get("levers", []), where)
    year = raw.get("year_made")
    if year is not None and (isinstance(year, bool) or not isinstance(year, int)):
        raise CatalogError(f"{where}: field 'year_made' must be an integer year")
    inventory_note = raw.get("inventory_note", "")
    if not isinstance(inventory_note, str):
        raise CatalogError(f"{where}: field 'inventory_note' must be a string")
    return Product(
        id=pid,
        name=_required_str(raw, "name", where),
        kind=_optional_str(raw, "kind", where),
        subtitle=_optional_str(raw, "subtitle", where) or "",
        description=_optional_str(raw, "description", where) or "",
        year_made=year,
        condition=_optional_str(raw, "condition", where),
        list_price_cents=list_price,
        currency=(_optional_str(raw, "currency", where) or store_currency).upper(),
        floor_cents=floor,
        levers=levers,
        inventory_note=inventory_note,
        merchant_persona=_optional_str(raw, "merchant_persona", where),
        private_fields={k: v for k, v in raw.items() if k not in _PRODUCT_FIELDS},
    )


def parse_catalog(data: Any) -> Catalog:
    """Validate a catalog document and build the in-memory catalog."""
    if not isinstance(data, dict):
        raise CatalogError("catalog: the top level must be an object with 'store' and 'products'")
    store = parse_store(data.get("store"))
    products_raw = data.get("products")
    if not isinstance(products_raw, list):
        raise CatalogError("catalog: field 'products' is missing or not a list")
    products: list[Product] = []
    seen: set[str] = set()
    for i, raw in enumerate(products_raw):
        product = parse_product(raw, i, store.currency)
        if product.id in seen:
            raise CatalogError(f"product '{product.id}': field 'id' is a duplicate")
        seen.add(product.id)
        products.append(product)
    return Catalog(store=store, products=tuple(products))


def load_catalog(path: str | Path | None = None) -> Catalog:
    """Load a catalog file, or the built-in demo store when no path is given."""
    if path is None:
        text = resources.files("haggler").joinpath("data/demo_catalog.json").read_text("utf-8")
        where = "built-in demo catalog"
    else:
        try:
            text = Path(path).read_text("utf-8-sig")
        except OSError as exc:
            raise CatalogError(f"cannot read catalog file {path}: {exc.strerror}") from exc
        except UnicodeDecodeError as exc:
            raise CatalogError(f"{path}: not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
        where = str(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogError(f"{where}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    return parse_catalog(data)
