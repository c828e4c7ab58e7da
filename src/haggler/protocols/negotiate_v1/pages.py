"""The store's human pages: the front and a page per product (a deal's checkout is ``web/checkout``).

Built from public facts only, like every other response.
"""

from __future__ import annotations

from html import escape

from haggler.catalog import Catalog, ProductFacts
from haggler.money import format_money
from haggler.web.layout import header, page


def _card(facts: ProductFacts) -> str:
    return (f"<div class=card><div class=kind>{escape(facts.kind or '')}</div>"
            f"<h3><a href='/store/p/{escape(facts.id)}'>{escape(facts.name)}</a></h3>"
            f"<p>{escape(facts.subtitle)}</p><p class=price>{format_money(facts.list_price_cents, facts.currency)}</p></div>")


def store_front(catalog: Catalog) -> str:
    store = catalog.store
    about = f"<p>{escape(store.about)}</p>" if store.about else ""
    cards = "".join(_card(p.facts) for p in catalog.products)
    return page(store.name, (
        f"{header(catalog)}{about}"
        f"<p>Every price here is negotiable with {escape(store.rep_name)}, our sales agent. Shopper agents: "
        f"start at <a href='/negotiate.json'><code>/negotiate.json</code></a> (negotiate.v1).</p>"
        f"<div class=grid>{cards}</div><p class=tag>{escape(store.policy)}</p>"))


def product_page(catalog: Catalog, facts: ProductFacts, start_chat_url: str) -> str:
    rows = [("Condition", facts.condition), ("Made", str(facts.year_made) if facts.year_made else None),
            ("List price", format_money(facts.list_price_cents, facts.currency))]
    table = "".join(f"<tr><th>{k}</th><td>{escape(v)}</td></tr>" for k, v in rows if v)
    return page(f"{facts.name} — {catalog.store.name}", (
        f"{header(catalog)}<div class=kind>{escape(facts.kind or '')}</div><h2>{escape(facts.name)}</h2>"
        f"<p><em>{escape(facts.subtitle)}</em></p><p>{escape(facts.description)}</p><table>{table}</table>"
        f"<p>Haggle with {escape(catalog.store.rep_name)}: "
        f"<a href='{escape(start_chat_url)}'><code>{escape(start_chat_url)}</code></a></p>"))
