"""The dashboard's HTML: one function per page, from the reports' data, inside the store's frame.

Every value is escaped here; the tables and charts carry stable ids (``table-deals``,
``chart-deals-per-day``, ...) for tests and for people linking to a section.
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any, Sequence
from urllib.parse import urlencode

from haggler.catalog import Catalog
from haggler.orders import Order
from haggler.web.admin import charts
from haggler.web.admin.exchange_report import LedgerTotals, TransactionRow
from haggler.web.admin.formatting import money, percent
from haggler.web.admin.market_report import Book, MarketDeal
from haggler.web.admin.matching_report import OpportunityRow
from haggler.web.admin.paging import Page
from haggler.web.admin.store_reports import (
    ChatSummary,
    DealReport,
    ProductStats,
    Summary,
    Transcript,
)
from haggler.web.layout import page

#: The sections, in the nav's order: (path, label).
SECTIONS = (("/admin", "Overview"), ("/admin/chats", "Chats"), ("/admin/deals", "Deals"), ("/admin/orders", "Orders"),
            ("/admin/products", "Products"), ("/admin/exchange", "Exchange"), ("/admin/matching", "Matching"),
            ("/admin/market", "Market"))

ADMIN_STYLE = """<style>
body{max-width:74rem}nav.sections ul{list-style:none;display:flex;flex-wrap:wrap;gap:.2rem 1.2rem;padding:0;margin:0 0 1rem}
nav.sections a[aria-current=page]{font-weight:700;color:#1d2530}a{color:#1a5a9e}
.numbers{display:grid;grid-template-columns:repeat(auto-fill,minmax(10rem,1fr));gap:.8rem;margin:0 0 1.5rem}
.numbers div{border:1px solid #dde3ea;border-radius:.5rem;padding:.6rem .8rem}.numbers dt{color:#4f5b6a;font-size:.85rem}
.numbers dd{margin:0;font-size:1.4rem;font-weight:600}.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(24rem,1fr));gap:1.5rem}
figure.chart{margin:0}figcaption{color:#4f5b6a;font-size:.9rem}.legend{list-style:none;padding:0;display:flex;flex-wrap:wrap;gap:.3rem 1rem}
.swatch{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:middle}
td.num,th.num{text-align:right}table{width:100%;margin-bottom:.5rem}caption{text-align:left;font-weight:600;padding:.4rem 0}
.pager{display:flex;gap:1rem;align-items:center;margin-bottom:1.5rem}.speaker{font-weight:600}
.transcript li{margin-bottom:.6rem}.bar-top{display:flex;justify-content:space-between;align-items:center}
.error{color:#b3261e;font-weight:600}label{display:block;margin:.5rem 0 .2rem}input[type=password]{padding:.4rem;width:18rem}
button{padding:.4rem .9rem}
</style>"""

Cell = str  # trusted HTML for one table cell


def _when(at: datetime) -> str:
    return f"<time datetime='{at.isoformat()}'>{at:%Y-%m-%d %H:%M} UTC</time>"


def _money(cents: int | None, currency: str) -> str:
    """``formatting.money``, as HTML."""
    return escape(money(cents, currency))


def _cents(cents: int | None) -> str:
    """An exchange amount: the exchange counts in cents of no named currency, and so does its page."""
    return "—" if cents is None else f"{cents:,}"


def frame(catalog: Catalog, title: str, current: str, body: str, *, logout_csrf: str | None) -> str:
    """A dashboard page: the banner (with a logout form when a cookie session is in use), the
    sections' nav and the page's own content as ``<main>``."""
    links = "".join(f"<li><a href='{path}'{' aria-current=page' if path == current else ''}>{label}</a></li>"
                    for path, label in SECTIONS)
    logout = "" if logout_csrf is None else (
        f"<form method=post action='/admin/logout'><input type=hidden name=csrf value='{escape(logout_csrf)}'>"
        "<button type=submit>Log out</button></form>")
    banner = (f"<header class=bar-top><p><strong>{escape(catalog.store.name)}</strong> · operator dashboard</p>"
              f"{logout}</header>")
    return page(f"{title} · {catalog.store.name} dashboard",
                f"{banner}<nav class=sections aria-label='Dashboard sections'><ul>{links}</ul></nav>"
                f"<main><h1>{escape(title)}</h1>{body}</main>", head=ADMIN_STYLE)


def table(table_id: str, caption: str, headers: Sequence[str], rows: Sequence[Sequence[Cell]], *,
          numeric: Sequence[int] = ()) -> str:
    """A table with a caption and column headers; ``numeric`` columns are right-aligned."""
    def cls(i: int) -> str:
        return " class=num" if i in numeric else ""
    head = "".join(f"<th scope=col{cls(i)}>{escape(h)}</th>" for i, h in enumerate(headers))
    if not rows:
        body = f"<tr><td colspan={len(headers)}>None yet.</td></tr>"
    else:
        body = "".join("<tr>" + "".join(f"<td{cls(i)}>{cell}</td>" for i, cell in enumerate(row)) + "</tr>"
                       for row in rows)
    return (f"<table id={table_id}><caption>{escape(caption)}</caption><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def pager(found: Page[Any], path: str, noun: str, *, param: str = "page", keep: dict[str, str] | None = None) -> str:
    """"Page 2 of 5 · 112 deals" with previous and next links (``param`` names the page's query
    parameter; ``keep``: other parameters the links carry on)."""
    def link(number: int, text: str, rel: str) -> str:
        return f"<a rel={rel} href='{escape(path)}?{escape(urlencode({**(keep or {}), param: number}))}'>{text}</a>"
    previous = link(found.number - 1, "← Previous", "prev") if found.has_previous else ""
    following = link(found.number + 1, "Next →", "next") if found.has_next else ""
    return (f"<nav class=pager aria-label='Pages of {escape(noun)}'>{previous}"
            f"<span>Page {found.number} of {found.pages} · {found.total} {escape(noun)}</span>{following}</nav>")


def _numbers(items: Sequence[tuple[str, str]], list_id: str) -> str:
    return f"<dl class=numbers id={list_id}>" + "".join(
        f"<div><dt>{escape(k)}</dt><dd>{v}</dd></div>" for k, v in items) + "</dl>"


# -- the store ------------------------------------------------------------------------------------


def deal_rows(deals: Sequence[DealReport]) -> list[list[Cell]]:
    return [[_when(d.created_at), escape(d.product_name or d.product_id), _money(d.list_price_cents, d.currency),
             _money(d.price_cents, d.currency), percent(d.discount), escape(", ".join(d.extras)) or "—",
             _money(d.margin_cents, d.currency),
             f"<a href='/admin/chats/{escape(d.chat_id)}'>transcript</a>"] for d in deals]


DEAL_HEADERS = ("When", "Product", "List price", "Agreed price", "Discount", "Extras given", "Margin over floor",
                "Chat")
DEAL_NUMERIC = (2, 3, 4, 6)


def overview(catalog: Catalog, summary: Summary, recent: Page[DealReport]) -> str:
    currency = summary.currency
    numbers = _numbers([
        ("Chats", str(summary.chats)), ("Live now", str(summary.live_chats)), ("Deals", str(summary.deals)),
        ("Agreement rate", percent(summary.agreement_rate)), ("Average discount", percent(summary.average_discount)),
        ("Revenue", _money(summary.revenue_cents, currency)),
        ("Margin over floor", _money(summary.margin_cents, currency)),
    ], "numbers-overview")
    days = summary.per_day
    per_day = charts.bar_chart(
        "chart-deals-per-day", "Deals per day",
        f"Deals per day (UTC) from {days[0].day} to {days[-1].day}: {sum(d.deals for d in days)} in all."
        if days else "No days to show.",
        [charts.Mark(d.day.isoformat(), d.deals, tick=d.day.strftime("%m-%d")) for d in days],
        heading="Day (UTC)", unit="deals")
    discounts = charts.bar_chart(
        "chart-discounts", "Discount off list price",
        f"Deals by discount off list price; average {percent(summary.average_discount)}.",
        [charts.Mark(b.label, b.deals) for b in summary.discounts], heading="Discount", unit="deals")
    outcomes = charts.stacked_bar(
        "chart-outcomes", "How closed chats ended",
        f"{summary.closed_chats} closed chats; agreement rate {percent(summary.agreement_rate)} "
        "(agreed / closed).",
        [charts.Mark(kind.replace("_", " "), n) for kind, n in summary.outcomes.items()],
        heading="Outcome", unit="chats")
    recent_deals = table("table-recent-deals", "Recent deals", DEAL_HEADERS, deal_rows(recent.items),
                         numeric=DEAL_NUMERIC)
    return (f"{numbers}<section aria-labelledby=h-charts><h2 id=h-charts>Charts</h2><div class=charts>"
            f"{per_day}{discounts}{outcomes}</div></section>"
            f"<section aria-labelledby=h-recent><h2 id=h-recent>Recent deals</h2>{recent_deals}"
            f"<p><a href='/admin/deals'>All {recent.total} deals</a></p></section>")


def deals(found: Page[DealReport]) -> str:
    return (table("table-deals", "Deals, newest first", DEAL_HEADERS, deal_rows(found.items), numeric=DEAL_NUMERIC)
            + pager(found, "/admin/deals", "deals"))


def orders(found: Page[Order]) -> str:
    rows = [[_when(o.placed_at), escape(o.id), escape(o.door),
             escape(", ".join(f"{line.quantity} × {line.name}" for line in o.lines)),
             _money(o.total_cents, o.currency), escape(o.buyer.name) if o.buyer else "—",
             escape(o.buyer.email) if o.buyer else "—",
             "<br>".join(escape(part) for part in o.buyer.address.splitlines()) if o.buyer else "—",
             escape(o.deal_id or o.checkout_id or o.session_id or "")] for o in found.items]
    return (table("table-orders", "Orders, newest first", ("When", "Order", "From", "Items", "Total", "Buyer",
                                                            "Email", "Ship to", "Deal or checkout"),
                  rows, numeric=(4,)) + pager(found, "/admin/orders", "orders"))


def chats(found: Page[ChatSummary], *, live_only: bool) -> str:
    rows = [[f"<a href='/admin/chats/{escape(c.id)}'>{escape(c.id)}</a>", escape(c.product_name or c.product_id),
             escape(c.state), escape((c.outcome or "—").replace("_", " ")), _when(c.started_at),
             _when(c.last_activity_at), str(c.messages)] for c in found.items]
    switch = ("<p><a href='/admin/chats'>Show every chat</a></p>" if live_only else
              "<p><a href='/admin/chats?live=1'>Show live chats only</a></p>")
    caption = "Live chats, most recently active first" if live_only else "Chats, most recently active first"
    return (switch + table("table-chats", caption, ("Chat", "Product", "State", "Outcome", "Started",
                                                     "Last activity", "Messages"), rows, numeric=(6,))
            + pager(found, "/admin/chats", "chats", keep={"live": "1"} if live_only else None))


def transcript_page(found: Transcript) -> str:
    chat = found.chat
    facts = _numbers([("Product", escape(chat.product_name or chat.product_id)), ("State", escape(chat.state)),
                      ("Outcome", escape((chat.outcome or "—").replace("_", " "))), ("Started", _when(chat.started_at)),
                      ("Messages", str(chat.messages))], "numbers-chat")
    lines = []
    for m in found.messages:
        terms = "" if m.price_cents is None else (
            f" <small>({escape(m.action or '')} {_money(m.price_cents, m.currency or 'USD')}"
            f"{' + ' + escape(', '.join(m.extras)) if m.extras else ''})</small>")
        lines.append(f"<li><span class=speaker>{escape(m.speaker)}</span> {_when(m.created_at)}{terms}"
                     f"<br>{escape(m.text)}</li>")
    deal = "" if found.deal is None else (
        "<section aria-labelledby=h-deal><h2 id=h-deal>Deal</h2>"
        + table("table-chat-deal", "The deal this chat made", DEAL_HEADERS[:-1], [deal_rows([found.deal])[0][:-1]],
                numeric=DEAL_NUMERIC) + "</section>")
    return (f"{facts}<section aria-labelledby=h-transcript><h2 id=h-transcript>Transcript</h2>"
            f"<ol class=transcript id=transcript>{''.join(lines)}</ol></section>{deal}")


def products(stats: Sequence[ProductStats]) -> str:
    rows = [[escape(p.name or p.product_id), _money(p.list_price_cents, p.currency), str(p.chats), str(p.deals),
             percent(p.agreement_rate), _money(p.average_price_cents, p.currency), percent(p.average_discount),
             _money(p.revenue_cents, p.currency), _money(p.margin_cents, p.currency)] for p in stats]
    return table("table-products", "Each product's chats and deals",
                 ("Product", "List price", "Chats", "Deals", "Agreement rate", "Average price", "Average discount",
                  "Revenue", "Margin over floor"), rows, numeric=(1, 2, 3, 4, 5, 6, 7, 8))


# -- the other surfaces ---------------------------------------------------------------------------


def _counts(list_id: str, counts: dict[str, int]) -> str:
    return _numbers([(k.replace("_", " "), str(n)) for k, n in counts.items()], list_id)


def exchange(totals: LedgerTotals, found: Page[TransactionRow]) -> str:
    numbers = _numbers([("Wallets", str(totals.wallets)), ("Deposited (cents)", _cents(totals.deposited_cents)),
                        ("Available (cents)", _cents(totals.available_cents)), ("Held (cents)", _cents(totals.held_cents)),
                        ("Paid to providers (cents)", _cents(totals.captured_cents))], "numbers-ledger")
    entries = table("table-ledger", "Ledger entries by kind (amounts in cents)",
                    ("Kind", "Entries", "Available change", "Held change"),
                    [[escape(kind), str(n), _cents(available), _cents(held)]
                     for kind, (n, available, held) in totals.entries.items()], numeric=(1, 2, 3))
    rows = [[escape(t.id), escape(t.service), escape(t.consumer), escape(t.provider), escape(t.status),
             _cents(t.max_price_cents), _cents(t.price_cents), _cents(t.held_cents), escape(t.end_reason or "—"),
             _when(t.updated_at)] for t in found.items]
    transactions = table("table-transactions", "Transactions, most recently changed first (amounts in cents)",
                         ("Transaction", "Service", "Consumer", "Provider", "Status", "Max price", "Price", "Held",
                          "Ended by", "Last change"), rows, numeric=(5, 6, 7))
    return (f"<section aria-labelledby=h-ledger><h2 id=h-ledger>Ledger totals</h2>{numbers}{entries}</section>"
            f"<section aria-labelledby=h-tx><h2 id=h-tx>Transactions</h2>"
            f"{_counts('numbers-transactions', totals.transactions)}{transactions}"
            f"{pager(found, '/admin/exchange', 'transactions')}</section>")


def matching(counts: dict[str, int], found: Page[OpportunityRow]) -> str:
    rows = [[escape(o.id), escape(o.source), escape(o.candidate), str(o.score), escape(o.status), _when(o.updated_at)]
            for o in found.items]
    return (f"<section aria-labelledby=h-status><h2 id=h-status>Opportunities by status</h2>"
            f"{_counts('numbers-opportunities', counts)}</section>"
            f"<section aria-labelledby=h-opps><h2 id=h-opps>Opportunities</h2>"
            + table("table-opportunities", "Opportunities, most recently changed first",
                    ("Opportunity", "Source", "Candidate", "Score", "Status", "Last change"), rows, numeric=(3,))
            + pager(found, "/admin/matching", "opportunities") + "</section>")


def market(books: Page[Book], found: Page[MarketDeal], counts: dict[str, int], *, books_at: int, deals_at: int) -> str:
    book_rows = [[escape(b.item), escape(b.currency), str(b.bids.orders), str(b.bids.quantity),
                  _money(b.bids.best_cents, b.currency), _money(b.asks.best_cents, b.currency), str(b.asks.quantity),
                  str(b.asks.orders), _money(b.spread_cents, b.currency)] for b in books.items]
    deal_rows_ = [[escape(d.id), escape(d.listing_id), escape(d.buyer_id), escape(d.seller_id), escape(d.protocol),
                   _money(d.price_cents, d.currency), escape(d.status.replace("_", " ")), _when(d.created_at)]
                  for d in found.items]
    return ("<section aria-labelledby=h-books><h2 id=h-books>Order books</h2>"
            + table("table-books", "Open orders per book", ("Item", "Currency", "Bid orders", "Bid quantity",
                                                            "Best bid", "Best ask", "Ask quantity", "Ask orders",
                                                            "Spread"), book_rows, numeric=(2, 3, 4, 5, 6, 7, 8))
            + pager(books, "/admin/market", "books", param="books", keep={"deals": str(deals_at)})
            + "</section><section aria-labelledby=h-mdeals><h2 id=h-mdeals>Deals</h2>"
            + _counts("numbers-market-deals", counts)
            + table("table-market-deals", "Market deals, newest first",
                    ("Deal", "Listing", "Buyer", "Seller", "Protocol", "Price", "Status", "Made"), deal_rows_,
                    numeric=(5,))
            + pager(found, "/admin/market", "deals", param="deals", keep={"books": str(books_at)}) + "</section>")


# -- signing in ------------------------------------------------------------------------------------


def login(catalog: Catalog, csrf: str, *, error: str | None = None, next_path: str = "/admin") -> str:
    problem = f"<p class=error role=alert>{escape(error)}</p>" if error else ""
    body = (f"{problem}<form method=post action='/admin/login'>"
            f"<input type=hidden name=csrf value='{escape(csrf)}'><input type=hidden name=next value='{escape(next_path)}'>"
            "<label for=token>Operator token</label>"
            "<input type=password id=token name=token autocomplete=current-password required>"
            "<p><button type=submit>Sign in</button></p></form>")
    return page(f"Sign in · {catalog.store.name} dashboard",
                f"<main><h1>Operator dashboard</h1><p>{escape(catalog.store.name)}: sign in with the operator token "
                f"(<code>--operator-token</code> or <code>HAGGLER_OPERATOR_TOKEN</code>).</p>{body}</main>",
                head=ADMIN_STYLE)


def notice(catalog: Catalog, title: str, text: str) -> str:
    """A page that only says something: the dashboard is off, a chat is not there, a request is refused."""
    return page(f"{title} · {catalog.store.name}",
                f"<main><h1>{escape(title)}</h1><p>{escape(text)}</p></main>", head=ADMIN_STYLE)

