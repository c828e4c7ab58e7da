"""The store catalog: loading, validation, and the split between public and hidden fields.

haggler reads the common negotiate.v1 catalog format (``{"store": {...}, "products": [...]}``)
unchanged. Prices in the file are decimal; here they become integer cents. A bad catalog
fails at start-up with a :class:`CatalogError` listing every problem at its JSON Pointer.

Hidden fields (``floor``, ``levers``, ``inventory_note``, ``merchant_persona`` and the store's
own ``x_`` fields) are kept on :class:`Product`, but nothing in this module renders them:
public views are built from explicit allow-lists in
:mod:`haggler.protocols.negotiate_v1.views`.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace
from importlib import resources
from pathlib import Path
from typing import Any

from haggler.money import amount_cents, currency_problem, positive_cents, to_cents

#: Characters that may appear in a product id: RFC 3986 "unreserved", so an id can go in a
#: URL path or query without encoding.
PRODUCT_ID_PATTERN = re.compile(r"^[A-Za-z0-9._~-]{1,100}\Z")  # \Z: "$" would let a trailing "\n" in

_LEVER_VALUE = re.compile(
    r"(?:~|about\s+|approx\.?\s+)?[$€£]\s?(\d[\d,]*(?:\.\d{1,2})?)\s*(?:retail\s+)?(?:value|worth)?",
    re.IGNORECASE,
)
_LEVER_PARENTHETICAL = re.compile(r"\s*\([^)]*\)[\s.]*$")


#: A field whose name starts with one of these is the store's own: allowed in the store, a
#: product or the top level, never read and never published (a product keeps its own in
#: :attr:`Product.private_fields`). Any other field haggler does not read is refused as a
#: probable typo, unless the catalog is loaded with ``strict=False``.
PRIVATE_FIELD_PREFIXES = ("x_", "x-")


@dataclass(frozen=True)
class CatalogProblem:
    """One thing wrong with a catalog: where, as an RFC 6901 JSON Pointer into the document
    (``""``: the document itself), which product when its id is known, and what."""

    pointer: str
    message: str
    product_id: str | None = None

    def __str__(self) -> str:
        where = self.pointer + (f" (product {self.product_id!r})" if self.product_id else "")
        return f"{where}: {self.message}" if where else self.message


class CatalogError(ValueError):
    """The catalog cannot be served. ``problems`` lists everything wrong with it, not only the
    first, and the message shows them one per line under a count."""

    def __init__(self, problems: Sequence[CatalogProblem], source: str = "catalog") -> None:
        self.problems = tuple(problems)
        self.source = source
        count = len(self.problems)
        lines = [f"{source}: {count} problem{'' if count == 1 else 's'}", *(f"  {p}" for p in self.problems)]
        super().__init__("\n".join(lines))


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
class ShippingChoice:
    """A way the store ships, as its catalog states it: what an agentic checkout (UCP, ACP) offers
    when the store has no shipping rates of its own (``haggler ucp seed``)."""

    id: str
    title: str
    price_cents: int
    service_level: str = "standard"


@dataclass(frozen=True, slots=True)
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
    #: How the store ships, for agentic checkout (``store.shipping`` in the catalog file).
    shipping: tuple[ShippingChoice, ...] = ()


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
    #: What a non-strict load let through (fields haggler does not read), for the caller to show.
    warnings: tuple[CatalogProblem, ...] = field(default=(), compare=False)

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


@dataclass
class _Findings:
    """Everything wrong with a catalog so far, so that parsing goes on past the first problem."""

    strict: bool
    problems: list[CatalogProblem] = field(default_factory=list)
    warnings: list[CatalogProblem] = field(default_factory=list)


@dataclass(frozen=True)
class _At:
    """A place in the catalog document being parsed, and where its problems go."""

    findings: _Findings
    pointer: str = ""
    product_id: str | None = None

    def __truediv__(self, part: str | int) -> _At:
        """The child ``part`` (a field name or a list index), escaped as RFC 6901 says."""
        return replace(self, pointer=f"{self.pointer}/{str(part).replace('~', '~0').replace('/', '~1')}")

    def fail(self, message: str) -> None:
        self.findings.problems.append(CatalogProblem(self.pointer, message, self.product_id))

    def warn(self, message: str) -> None:
        self.findings.warnings.append(CatalogProblem(self.pointer, message, self.product_id))


def _check_fields(raw: dict[str, Any], known: frozenset[str], at: _At, *, private: bool = True) -> None:
    """Report each field of ``raw`` haggler does not read, with the known field it is probably a
    typo of: a problem when the load is strict, else a warning. When ``private``, a field named
    with a :data:`PRIVATE_FIELD_PREFIXES` prefix is the store's own and passes; an object with no
    room for fields of the store's own (a lever) is checked strictly whatever the load."""
    strict = at.findings.strict or not private
    for key in raw:
        if key in known or (private and key.startswith(PRIVATE_FIELD_PREFIXES)):
            continue
        guess = difflib.get_close_matches(key, sorted(known), n=1)
        if guess:
            message = f"unknown field: did you mean {guess[0]!r}?"
        elif private:
            message = "unknown field: haggler reads no such field; name a field of your own x_... to keep it hidden"
        else:
            message = f"unknown field: only {' and '.join(map(repr, sorted(known)))} may appear here"
        report = (at / key).fail if strict else (at / key).warn
        report(message)


def _parse_levers(raw: Any, at: _At) -> tuple[Lever, ...]:
    """A product's ``levers``: each a string (its retail value, if any, in the text), or an
    object ``{"text": ..., "cost": ...}`` that also states what granting it costs the store."""
    if not isinstance(raw, list):
        at.fail("must be a list")
        return ()
    levers = []
    for index, item in enumerate(raw):
        here = at / index
        if isinstance(item, str) and item.strip():
            levers.append(parse_lever(item.strip()))
            continue
        if not isinstance(item, dict):
            here.fail("must be a non-empty string or an object with 'text' and 'cost'")
            continue
        text = _required_str(item, "text", here)
        cost = _amount(item, "cost", here, positive=False)
        if cost is not None and cost < 0:
            (here / "cost").fail(f"must not be negative, got {item['cost']!r}")
        elif text is not None and cost is not None:
            levers.append(replace(parse_lever(text), cost_cents=cost))
        _check_fields(item, _LEVER_FIELDS, here, private=False)
    return tuple(levers)


def _required_str(raw: dict[str, Any], key: str, at: _At) -> str | None:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        (at / key).fail("missing or not a non-empty string")
        return None
    return value.strip()


def _optional_str(raw: dict[str, Any], key: str, at: _At) -> str | None:
    value = raw.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        (at / key).fail(f"must be a string, got {value!r}")
        return None
    return value.strip() or None


def _amount(raw: dict[str, Any], key: str, at: _At, *, positive: bool = True) -> int | None:
    if raw.get(key) is None:
        (at / key).fail("missing")
        return None
    try:
        if positive:
            return positive_cents(raw[key], allow_strings=True)
        return amount_cents(raw[key], allow_strings=True)
    except ValueError as exc:
        (at / key).fail(str(exc))
        return None


def _currency(raw: dict[str, Any], at: _At, default: str) -> str:
    """The ``currency`` field, ``default`` when absent; a bad one is reported (and ``default``
    returned, so that the rest of the document is still checked)."""
    code = raw.get("currency")
    if code is None:
        return default
    problem = currency_problem(code)
    if problem:
        (at / "currency").fail(problem)
        return default
    return str(code)


_STORE_FIELDS = frozenset({"name", "city", "rep_name", "rep_title", "tagline", "policy_default", "policy",
                           "headline", "about", "category_label", "currency", "shipping"})
_SHIPPING_FIELDS = frozenset({"id", "title", "price", "service_level"})
_PRODUCT_FIELDS = frozenset({"id", "kind", "name", "subtitle", "description", "year_made", "condition",
                             "list_price", "currency", "floor", "levers", "inventory_note", "merchant_persona"})
_LEVER_FIELDS = frozenset({"text", "cost"})
_CATALOG_FIELDS = frozenset({"store", "products"})


def _parse_store(raw: Any, at: _At) -> Store | None:
    if not isinstance(raw, dict):
        at.fail("missing or not an object")
        return None
    before = len(at.findings.problems)
    name, rep_name, tagline = (_required_str(raw, key, at) for key in ("name", "rep_name", "tagline"))
    policy = raw.get("policy_default", raw.get("policy"))
    if not isinstance(policy, str) or not policy.strip():
        (at / "policy_default").fail("missing or not a non-empty string")
    city, rep_title, headline, about, category_label = (
        _optional_str(raw, key, at) for key in ("city", "rep_title", "headline", "about", "category_label"))
    currency = _currency(raw, at, "USD")
    shipping = _parse_shipping(raw.get("shipping"), at / "shipping")
    _check_fields(raw, _STORE_FIELDS, at)
    if len(at.findings.problems) != before:
        return None
    assert name and rep_name and tagline and isinstance(policy, str)  # each checked above
    return Store(name=name, rep_name=rep_name, tagline=tagline, policy=policy.strip(), city=city,
                 rep_title=rep_title, headline=headline, about=about, category_label=category_label,
                 currency=currency, shipping=shipping)


def _parse_shipping(raw: Any, at: _At) -> tuple[ShippingChoice, ...]:
    """``store.shipping``: a list of ``{"id", "title", "price"}`` (``price`` 0 or more, in the
    store's currency; an optional ``service_level``, ``standard`` when absent), ids and levels unique."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        at.fail("must be a list of {id, title, price}")
        return ()
    choices: list[ShippingChoice] = []
    for i, item in enumerate(raw):
        where = at / i
        if not isinstance(item, dict):
            where.fail("must be an object with id, title and price")
            continue
        before = len(where.findings.problems)
        sid, title = (_required_str(item, key, where) for key in ("id", "title"))
        level = _optional_str(item, "service_level", where) or "standard"
        price = _amount(item, "price", where, positive=False)
        if price is not None and price < 0:
            (where / "price").fail("must not be negative")
        _check_fields(item, _SHIPPING_FIELDS, where)
        if sid is not None and any(c.id == sid for c in choices):
            (where / "id").fail(f"{sid!r} is used twice")
        elif any(c.service_level == level for c in choices):  # a checkout offers one option per level
            (where / "service_level").fail(f"{level!r} is already the level of another choice: give each its own")
        if len(where.findings.problems) == before and sid and title and price is not None:
            choices.append(ShippingChoice(sid, title, price, level))
    return tuple(choices)


def _parse_product(raw: Any, at: _At, store_currency: str) -> Product | None:
    if not isinstance(raw, dict):
        at.fail("must be an object")
        return None
    before = len(at.findings.problems)
    pid = raw.get("id")
    if not isinstance(pid, str) or not pid:
        (at / "id").fail("missing or not a non-empty string")
    elif not PRODUCT_ID_PATTERN.match(pid):
        (at / "id").fail(f"{pid!r} may hold only letters, digits and . _ ~ - (1-100 characters), "
                         "so that it can go in a URL path")
    else:
        at = replace(at, product_id=pid)
    name = _required_str(raw, "name", at)
    kind, subtitle, description, condition, persona = (
        _optional_str(raw, key, at) for key in ("kind", "subtitle", "description", "condition", "merchant_persona"))
    year = raw.get("year_made")
    if year is not None and (isinstance(year, bool) or not isinstance(year, int)):
        (at / "year_made").fail(f"must be an integer year, got {year!r}")
    list_price = _amount(raw, "list_price", at)
    floor = _amount(raw, "floor", at)
    if list_price is not None and floor is not None and floor > list_price:
        (at / "floor").fail(f"{raw['floor']} is above list_price {raw['list_price']}")
    currency = _currency(raw, at, store_currency)
    levers = _parse_levers(raw.get("levers", []), at / "levers")
    inventory_note = raw.get("inventory_note", "")
    if not isinstance(inventory_note, str):
        (at / "inventory_note").fail(f"must be a string, got {inventory_note!r}")
    _check_fields(raw, _PRODUCT_FIELDS, at)
    if len(at.findings.problems) != before:
        return None
    assert isinstance(pid, str) and name and list_price and floor  # each checked above
    return Product(
        id=pid, name=name, kind=kind, subtitle=subtitle or "", description=description or "", year_made=year,
        condition=condition, list_price_cents=list_price, currency=currency, floor_cents=floor, levers=levers,
        inventory_note=inventory_note, merchant_persona=persona,
        private_fields={k: v for k, v in raw.items() if k not in _PRODUCT_FIELDS},
    )


def parse_catalog(data: Any, *, strict: bool = True, source: str = "catalog") -> Catalog:
    """Validate a catalog document and build the in-memory catalog.

    Every problem is found before anything is refused, so that a store owner fixes a file in one
    pass: the :class:`CatalogError` lists them all, each at its JSON Pointer. A field haggler
    does not read is one of them when ``strict``; otherwise it is kept hidden (as a product's
    private field) and listed in :attr:`Catalog.warnings`. ``source`` names the document in the
    error.
    """
    findings = _Findings(strict)
    root = _At(findings)
    if not isinstance(data, dict):
        root.fail("the top level must be an object with 'store' and 'products'")
        raise CatalogError(findings.problems, source)
    _check_fields(data, _CATALOG_FIELDS, root)
    store = _parse_store(data.get("store"), root / "store")
    products_raw = data.get("products")
    products: list[Product] = []
    if not isinstance(products_raw, list):
        (root / "products").fail("missing or not a list")
        products_raw = []
    first_at: dict[str, int] = {}
    for index, raw in enumerate(products_raw):
        product = _parse_product(raw, root / "products" / index, store.currency if store else "USD")
        if product is None:
            continue
        if product.id in first_at:
            at = replace(root / "products" / index / "id", product_id=product.id)
            at.fail(f"duplicate: /products/{first_at[product.id]} has the same id")
            continue
        first_at[product.id] = index
        products.append(product)
    if findings.problems or store is None:
        raise CatalogError(findings.problems, source)
    return Catalog(store=store, products=tuple(products), warnings=tuple(findings.warnings))


def load_catalog(path: str | Path | None = None, *, strict: bool = True) -> Catalog:
    """Load a catalog file, or the built-in demo store when no path is given; ``strict`` as for
    :func:`parse_catalog`."""
    if path is None:
        text = resources.files("haggler").joinpath("data/demo_catalog.json").read_text("utf-8")
        source = "built-in demo catalog"
    else:
        source = str(path)
        try:
            text = Path(path).read_text("utf-8-sig")
        except OSError as exc:
            raise CatalogError([CatalogProblem("", f"cannot read the file: {exc.strerror}")], source) from exc
        except UnicodeDecodeError as exc:
            raise CatalogError([CatalogProblem("", f"not valid UTF-8 ({exc.reason} at byte {exc.start})")],
                               source) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CatalogError([CatalogProblem("", f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})")],
                           source) from exc
    return parse_catalog(data, strict=strict, source=source)
