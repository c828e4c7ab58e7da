"""The checkout page for a deal (the storefront's pages are in ``haggler.web.storefront``).

Built from public facts only, like every other response.
"""

from __future__ import annotations

from html import escape

from haggler.catalog import Catalog, ProductFacts
from haggler.language.render import join_extras
from haggler.money import format_money
from haggler.storage.chats import DealRow
from haggler.web.layout import header, page


def checkout_page(catalog: Catalog, deal: DealRow, facts: ProductFacts | None) -> str:
    name = facts.name if facts else deal.product_id
    extras = join_extras(deal.extras) if deal.extras else "none"
    rows = [("Product", name), ("Agreed price", format_money(deal.price_cents, deal.currency)),
            ("Extras included", extras), ("Deal", deal.id), ("Agreed at", deal.created_at.strftime("%Y-%m-%d %H:%M UTC"))]
    if facts:
        rows.insert(1, ("Condition", facts.condition or ""))
        rows.append(("List price", format_money(facts.list_price_cents, facts.currency)))
    table = "".join(f"<tr><th>{k}</th><td>{escape(v)}</td></tr>" for k, v in rows)
    return page(f"Checkout — {catalog.store.name}", (
        f"{header(catalog)}<h2>Your negotiated deal</h2><table id=deal>{table}</table>"
        f"<p class=tag>{escape(catalog.store.policy)}</p>"))
