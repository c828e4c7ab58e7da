"""The scan for negotiate.v1's hidden merchant state (spec §7) in anything the store sends.

``assert_no_hidden_state(text, products)`` fails when ``text`` — a JSON body, a page, a script —
carries a product's floor (in the money forms the store could print), a lever's full text (with
its internal value note) or its cost to the store, a run of four words of its inventory note, or
the planted secret markers of ``tests.conftest.secret_catalog_data`` (private fields, persona).
``HIDDEN_KEYS`` and ``keys_in`` check a JSON body's field names. The API tests
(``tests/protocols/negotiate_v1/test_nv1_hidden_state.py``), the storefront's page tests and the
browser tests (every response the browser received) all scan with it.
"""

from __future__ import annotations

import re
from typing import Any

from haggler.catalog import Product
from haggler.money import format_money

try:
    from tests.conftest import SECRET_MARKERS
except ImportError:  # pragma: no cover - rootdir-less invocation
    from conftest import SECRET_MARKERS  # type: ignore[no-redef]

HIDDEN_KEYS = {"floor", "levers", "inventory_note", "merchant_persona", "x_supplier_cost", "x_supplier_contact",
               "x-owner-phone", "floor_cents", "private_fields"}


def keys_in(value: Any, found: set[str] | None = None) -> set[str]:
    """Every field name anywhere in a JSON value."""
    found = set() if found is None else found
    if isinstance(value, dict):
        for key, inner in value.items():
            found.add(key)
            keys_in(inner, found)
    elif isinstance(value, list):
        for inner in value:
            keys_in(inner, found)
    return found


def floor_forms(product: Product) -> list[str]:
    """How the store would print the floor: ``$611.37``, ``611.37``, ``1,803.77``."""
    cents = product.floor_cents
    whole, frac = divmod(cents, 100)
    forms = [format_money(cents), f"{whole}.{frac:02d}", f"{whole:,}.{frac:02d}"]
    if product.floor_cents != product.list_price_cents:
        # the exact whole-dollar floor only counts when it is distinctive (a cents floor)
        forms += [f"${whole}" if frac == 0 else f"{whole}.{frac:02d}"]
    return forms


def _ngrams(text: str, n: int = 4) -> set[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return {" ".join(words[i:i + n]) for i in range(len(words) - n + 1)}


def _money_pattern(cents: int) -> re.Pattern[str]:
    """An amount as the store prints it, not as the start of a longer one ($18 is not $189)."""
    return re.compile(re.escape(format_money(cents)) + r"(?![0-9]|[.,][0-9])")


def assert_no_hidden_state(text: str, products: tuple[Product, ...]) -> None:
    for marker in SECRET_MARKERS:
        assert marker not in text, f"the planted secret {marker!r} leaked"
    lowered = text.lower()
    for product in products:
        for form in floor_forms(product):
            assert form not in text, f"floor of {product.id} leaked as {form!r}"
        for lever in product.levers:
            assert lever.text not in text, f"lever text with its value note leaked: {lever.text!r}"
            if lever.cost_cents:
                assert not _money_pattern(lever.cost_cents).search(text), \
                    f"the cost of {lever.offer_text!r} ({product.id}) leaked"
        note_grams = _ngrams(product.inventory_note)
        leaked = note_grams & _ngrams(text)
        # product names/descriptions may share words with notes; 4-word runs of the note may not appear
        public_grams = _ngrams(" ".join([product.name, product.subtitle, product.description]))
        assert not (leaked - public_grams), f"inventory note of {product.id} quoted: {leaked - public_grams}"
    assert "inventory_note" not in lowered and "merchant_persona" not in lowered
