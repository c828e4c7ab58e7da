"""Search, browse and detail over the catalog, for the agents.json capabilities.

Pure functions of the catalog's public facts: like every renderer, they start from
:class:`~haggler.catalog.ProductFacts`, so hidden fields (floor, levers, inventory notes)
cannot reach an agent.
"""

from __future__ import annotations

import re
from typing import Any

from haggler.catalog import Catalog, Product, ProductFacts
from haggler.errors import InvalidInput, NotFound
from haggler.money import to_decimal_number
from haggler.protocols.negotiate_v1 import views

__all__ = ["browse", "categories", "detail", "negotiation_pointer", "search"]


def categories(catalog: Catalog) -> tuple[str, ...]:
    """The catalog's product kinds, in order of first appearance."""
    return tuple(dict.fromkeys(p.kind for p in catalog.products if p.kind))


def _page(items: list[ProductFacts], page: int, limit: int, base: str) -> dict[str, Any]:
    start = (page - 1) * limit
    return {
        "items": [views.product_view(f, base) for f in items[start:start + limit]],
        "page": page,
        "limit": limit,
        "total": len(items),
        "has_more": start + limit < len(items),
    }


def _words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


def search(catalog: Catalog, q: str, page: int, limit: int, base: str) -> dict[str, Any]:
    """Products whose public text contains every word of ``q`` (case-blind; a word may be
    part of a longer one, so "vac" finds vacuums), those matching in the name first, then in
    catalog order."""
    terms = _words(q)
    if not terms:
        raise InvalidInput("parameter 'q' must contain at least one word")
    hits: list[tuple[int, int, ProductFacts]] = []
    for index, product in enumerate(catalog.products):
        facts = product.facts
        text = " ".join(_words(" ".join(filter(None, (facts.name, facts.subtitle, facts.description, facts.kind)))))
        if all(term in text for term in terms):
            name = " ".join(_words(facts.name))
            in_name = sum(term in name for term in terms)
            hits.append((-in_name, index, facts))
    hits.sort(key=lambda hit: hit[:2])
    result = _page([facts for _, _, facts in hits], page, limit, base)
    result["query"] = q
    return result


def browse(catalog: Catalog, category: str | None, sort: str, page: int, limit: int, base: str) -> dict[str, Any]:
    """Products, optionally of one category: by price either way, or newest first (by year
    made; products without one last). Ties keep catalog order, so pages are stable."""
    items = [p.facts for p in catalog.products if category is None or p.kind == category]
    if sort == "price_asc":
        items.sort(key=lambda f: f.list_price_cents)
    elif sort == "price_desc":
        items.sort(key=lambda f: -f.list_price_cents)
    else:
        items.sort(key=lambda f: -(f.year_made if f.year_made is not None else -10**9))
    result = _page(items, page, limit, base)
    result.update(category=category, sort=sort)
    return result


def _product(catalog: Catalog, product_id: str) -> Product:
    product = catalog.product(product_id)
    if product is None:
        raise NotFound(f"unknown product: {product_id}")
    return product


def detail(catalog: Catalog, product_id: str, base: str) -> dict[str, Any]:
    view = views.product_view(_product(catalog, product_id).facts, base, detailed=True)
    view["negotiable"] = True
    return view


def negotiation_pointer(catalog: Catalog, product_id: str, base: str) -> dict[str, Any]:
    """Where to haggle over a product: the negotiate.v1 discovery document and the chat to
    start, with the steps from a deal to the cart."""
    product = _product(catalog, product_id)
    return {
        "protocol": views.PROTOCOL,
        "product_id": product.id,
        "discovery_url": f"{base}/.well-known/negotiate.json",
        "start_chat": {"method": "GET", "url": views.start_chat_url(base, product.id)},
        "list_price": to_decimal_number(product.facts.list_price_cents),
        "currency": product.currency,
        "redeem": "when the chat closes with a deal, call cart.add with item_id and the deal's id as deal_id",
    }
