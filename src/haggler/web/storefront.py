"""The store's front and product pages: what a person browsing the shop sees.

Server-rendered from public facts only (``ProductFacts`` and the public store fields), like every
other response (spec §7). Each product page carries the haggling chat the way any other site
would: the one ``<script>`` line of ``widget.embed_tag``.
"""

from __future__ import annotations

from html import escape

from haggler.catalog import Catalog, ProductFacts
from haggler.money import format_money
from haggler.protocols.negotiate_v1.views import page_url, start_chat_url
from haggler.web.layout import header, page
from haggler.web.widget import embed_tag

#: The storefront's additions to the shared frame: landmarks, a skip link, visible focus.
STYLE = """<style>
a{color:#0a4bb5}:focus-visible{outline:3px solid #0b57d0;outline-offset:2px}
.skip{position:absolute;left:-100vw;top:.5rem;background:#fff;padding:.5rem .8rem;border:2px solid #0b57d0;border-radius:.4rem}
.skip:focus{left:1rem}
ul.grid{list-style:none;padding:0}.card h3{margin:.3rem 0}.card p{margin:.4rem 0}
.badge{display:inline-block;background:#e6f4ea;color:#124a26;border-radius:999px;padding:.1rem .6rem;font-size:.8rem;font-weight:600;vertical-align:middle}
.crumbs ol{list-style:none;display:flex;flex-wrap:wrap;gap:.4rem;padding:0;margin:0 0 1rem}
.crumbs li+li::before{content:"›";margin-right:.4rem;color:#4f5b6a}
.subtitle{font-size:1.1rem;color:#3a4554}caption{text-align:left}
footer{border-top:1px solid #dde3ea;margin-top:2.5rem;padding-top:1rem;color:#4f5b6a;font-size:.9rem}
</style>"""


def _frame(catalog: Catalog, title: str, main: str, *, before_main: str = "", footer_extra: str = "") -> str:
    """A storefront page: skip link, the shared header, ``main``, and the store's policy below."""
    store = catalog.store
    footer = (f"<footer><p>{escape(store.policy)}</p>{footer_extra}"
              f"<p>Shopping with an AI agent? It can haggle here too: "
              f"<a href='/negotiate.json'><code>/negotiate.json</code></a> (negotiate.v1).</p></footer>")
    return page(title, (f"<a class=skip href='#main'>Skip to content</a>{header(catalog)}{before_main}"
                        f"<main id=main>{main}</main>{footer}"), head=STYLE)


def _list_price(facts: ProductFacts) -> str:
    return format_money(facts.list_price_cents, facts.currency)


def _card(facts: ProductFacts) -> str:
    condition = f" · {escape(facts.condition)}" if facts.condition else ""
    return (f"<li class=card><p class=kind>{escape(facts.kind or '')}{condition}</p>"
            f"<h3><a href='{escape(page_url('', facts.id))}'>{escape(facts.name)}</a></h3>"
            f"<p>{escape(facts.subtitle)}</p>"
            f"<p class=price>{_list_price(facts)} <span class=badge>Negotiable</span></p></li>")


def front_page(catalog: Catalog) -> str:
    """The shop's front: who we are, how haggling works here, and every product."""
    store = catalog.store
    rep = escape(store.rep_name) + (f", our {escape(store.rep_title)}," if store.rep_title else "")
    intro = f"<h2>{escape(store.headline)}</h2>" if store.headline else ""
    about = f"<p>{escape(store.about)}</p>" if store.about else ""
    cards = "".join(_card(p.facts) for p in catalog.products)
    label = escape(store.category_label or "Products")
    return _frame(catalog, store.name, (
        f"<section aria-label='About the store'>{intro}{about}"
        f"<p>Every price is negotiable: open any product to haggle with {rep} right on its page.</p>"
        f"</section><section aria-labelledby=products><h2 id=products>{label}</h2>"
        f"<ul class=grid>{cards}</ul></section>"))


def product_page(catalog: Catalog, facts: ProductFacts, base: str) -> str:
    """One product: its facts, and the haggling chat embedded as any site would embed it."""
    rows = [("Condition", facts.condition), ("Made", str(facts.year_made) if facts.year_made else None),
            ("List price", _list_price(facts))]
    table = "".join(f"<tr><th scope=row>{k}</th><td>{escape(v)}</td></tr>" for k, v in rows if v)
    crumbs = (f"<nav class=crumbs aria-label=Breadcrumb><ol><li><a href='/'>All products</a></li>"
              f"<li><span aria-current=page>{escape(facts.name)}</span></li></ol></nav>")
    chat_url = start_chat_url(base, facts.id)
    return _frame(catalog, f"{facts.name} — {catalog.store.name}", (
        f"<article><p class=kind>{escape(facts.kind or '')}</p><h2>{escape(facts.name)}</h2>"
        f"<p class=subtitle>{escape(facts.subtitle)}</p>"
        f"<p class=price>{_list_price(facts)} <span class=badge>Negotiable</span></p>"
        f"<p>{escape(facts.description)}</p><table><caption class=kind>Details</caption>{table}</table></article>"
        f"{embed_tag(base, facts.id)}"
        f"<noscript><p>Haggling here needs JavaScript. An agent can haggle without it: "
        f"<a href='{escape(chat_url)}'>start a chat</a> (negotiate.v1).</p></noscript>"),
        before_main=crumbs,
        footer_extra=f"<p>This product's negotiate.v1 chat: <code>{escape(chat_url)}</code></p>")
