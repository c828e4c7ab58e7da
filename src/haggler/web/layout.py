"""The frame of every human page: one style sheet, the document shell and the store's header."""

from __future__ import annotations

from html import escape

from haggler.catalog import Catalog

STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem;color:#1d2530}
header{border-bottom:1px solid #dde3ea;margin-bottom:1.5rem}h1{margin:.2rem 0}.tag{color:#4f5b6a}
.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(15rem,1fr));gap:1rem}
.card{border:1px solid #dde3ea;border-radius:.6rem;padding:1rem}.price{font-size:1.3rem;font-weight:600}
.kind{text-transform:uppercase;font-size:.75rem;letter-spacing:.05em;color:#4f5b6a}
table{border-collapse:collapse}td,th{padding:.4rem .8rem;border-bottom:1px solid #dde3ea;text-align:left}
code{background:#f3f5f8;padding:.1rem .3rem;border-radius:.3rem}
"""


def page(title: str, body: str, *, head: str = "") -> str:
    """A complete HTML document in the store's style; ``body`` and ``head`` are trusted,
    already-escaped HTML (``head`` adds to the document's head: a script, more style)."""
    return (f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>{escape(title)}</title><style>{STYLE}</style>{head}</head><body>{body}</body></html>")


def header(catalog: Catalog) -> str:
    """The store's name and tagline, linking home: the top of every human page."""
    store = catalog.store
    city = f" · {escape(store.city)}" if store.city else ""
    return (f"<header><h1><a href='/' style='color:inherit;text-decoration:none'>{escape(store.name)}</a></h1>"
            f"<p class=tag>{escape(store.tagline)}{city}</p></header>")
