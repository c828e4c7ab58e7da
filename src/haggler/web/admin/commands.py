"""The dashboard on the command line: ``haggler deals``, ``orders``, ``chats``, ``chat``, ``stats``,
``exchange``, ``match opportunities``, ``market books`` and ``market deals``.

Each reads the database given with ``--db`` (as ``serve`` takes it) through the same report
functions as ``/admin``, and prints a table, or with ``--json`` the report's own data: an object
whose lists are pages (``total``, ``offset``, ``limit``, ``items``). ``deals --json`` prints a
plain list of deals, as it always has, so that scripts reading it keep working.

``cli.py`` adds these commands to its app and groups with :func:`register`; the helpers they
share with the other commands (``_read_database``, ``_fail``, ``_wide_console``) are looked up
when a command runs, so importing this module never imports the CLI half-built.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional, Sequence, TypeVar

import typer
from rich.markup import escape
from rich.table import Table

from haggler.server.config import DEFAULT_DB_URL
from haggler.web.admin.formatting import money, percent
from haggler.web.admin.paging import Page, Window

if TYPE_CHECKING:
    from haggler.catalog import Catalog
    from haggler.orders import Buyer
    from haggler.web.admin.store_reports import ProductStats, Summary

T = TypeVar("T")

DB = Annotated[str, typer.Option(help="Database URL: sqlite:///file.db or postgresql://user@host/db.")]
CatalogPath = Annotated[Optional[Path], typer.Option(
    "--catalog", help="The store's catalog (default: the built-in demo store): list prices, floors and extras' costs.")]
AsJSON = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
Limit = Annotated[Optional[int], typer.Option(min=1, help="Show at most this many rows (default: all).")]
Offset = Annotated[int, typer.Option(min=0, help="Skip this many rows first.")]
IdleTTL = Annotated[int, typer.Option(min=1, help="The store's --idle-ttl in seconds: an open chat quiet for "
                                                   "longer is idle, not live.")]


def _read(db: str, read: Callable[[Any], T]) -> T:
    from haggler.cli import _read_database

    return _read_database(db, read)


def _catalog(path: Path | None) -> Catalog:
    from haggler.catalog import CatalogError, load_catalog
    from haggler.cli import _fail

    try:
        # Not strict: a report reads the catalog the store serves, which may carry fields that
        # `serve --no-strict-catalog` let through; serve is where they are judged.
        return load_catalog(path, strict=False)
    except CatalogError as exc:
        raise _fail(str(exc)) from None


def _print_json(data: object) -> None:
    json.dump(data, sys.stdout, indent=2, ensure_ascii=False)
    sys.stdout.write("\n")


def _print(*renderables: object) -> None:
    from haggler.cli import _wide_console

    console = _wide_console()
    for item in renderables:
        console.print(item)


def _table(title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], numeric: Sequence[int] = ()) -> Table:
    """A Rich table; every cell is text (escaped), never console markup."""
    table = Table(title=escape(title))
    for i, column in enumerate(columns):
        table.add_column(column, justify="right" if i in numeric else "left")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def _counted(noun: str, found: Page[Any]) -> str:
    """"112 deals" or "112 deals, 21–40 shown"."""
    title = f"{found.total} {noun}"
    if found.items and len(found.items) < found.total:
        title += f", {found.window.offset + 1}–{found.window.offset + len(found.items)} shown"
    return title


def _when(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")


# -- the store ------------------------------------------------------------------------------------


def deals(db: DB = DEFAULT_DB_URL, catalog: CatalogPath = None, as_json: AsJSON = False, limit: Limit = None,
          offset: Offset = 0) -> None:
    """List the deals a store has recorded, newest first: list price, agreed price, discount,
    extras given and the margin over the floor (agreed price - floor - the extras' cost)."""
    from haggler.web.admin.store_reports import deals_page

    store = _catalog(catalog)
    found = _read(db, lambda conn: deals_page(conn, store, Window(offset, limit)))
    if as_json:
        _print_json([deal.to_json() for deal in found.items])
        return
    _print(_table(_counted("deal" if found.total == 1 else "deals", found),
                  ("when (UTC)", "product", "list price", "price", "discount", "extras", "margin over floor",
                   "session"),
                  [(_when(d.created_at), d.product_id, money(d.list_price_cents, d.currency),
                    money(d.price_cents, d.currency), percent(d.discount), ", ".join(d.extras) or "—",
                    money(d.margin_cents, d.currency), d.chat_id) for d in found.items], numeric=(2, 3, 4, 6)))


def orders(db: DB = DEFAULT_DB_URL, as_json: AsJSON = False, limit: Limit = None, offset: Offset = 0) -> None:
    """List the orders people placed, newest first, with the door each came through: chat (a deal
    bought at its checkout page), cart (an agents.json cart), ucp or acp (an agent's checkout
    session); with the buyer's details, — where the order has none."""
    from haggler.web.admin.store_reports import orders_page

    found = _read(db, lambda conn: orders_page(conn, Window(offset, limit)))
    if as_json:
        _print_json(found.to_json(lambda order: order.to_json()))
        return
    _print(_table(_counted("order" if found.total == 1 else "orders", found),
                  ("when (UTC)", "order", "from", "items", "total", "buyer", "ship to"),
                  [(_when(o.placed_at), o.id, o.door,
                    ", ".join(f"{line.quantity} × {line.name}" for line in o.lines),
                    money(o.total_cents, o.currency),
                    _buyer(o.buyer), " / ".join(o.buyer.address.splitlines()) if o.buyer and o.buyer.address
                    else "—") for o in found.items],
                  numeric=(4,)))


def _buyer(buyer: Buyer | None) -> str:
    """``name <email>``, or what there is of it: an agent's checkout may place an order without a
    buyer's name or email (UCP and ACP do not require one), shown as —, never ``<>``."""
    if buyer is None:
        return "—"
    email = f"<{buyer.email}>" if buyer.email else ""
    return " ".join(part for part in (buyer.name, email) if part) or "—"


def chats(db: DB = DEFAULT_DB_URL, catalog: CatalogPath = None, live: Annotated[bool, typer.Option(
          "--live", help="Only the live chats (open, active within the idle TTL).")] = False,
          idle_ttl: IdleTTL = 3600, as_json: AsJSON = False, limit: Limit = None, offset: Offset = 0) -> None:
    """List the store's chats, the most recently active first."""
    from haggler.web.admin.store_reports import chats_page

    store = _catalog(catalog)
    found = _read(db, lambda conn: chats_page(conn, store, now=datetime.now(timezone.utc),
                                              idle_ttl=timedelta(seconds=idle_ttl), live_only=live,
                                              window=Window(offset, limit)))
    if as_json:
        _print_json(found.to_json(lambda chat: chat.to_json()))
        return
    _print(_table(_counted("live chats" if live else "chats", found),
                  ("chat", "product", "state", "outcome", "started (UTC)", "last activity (UTC)", "messages"),
                  [(c.id, c.product_id, c.state, c.outcome or "—", _when(c.started_at), _when(c.last_activity_at),
                    str(c.messages)) for c in found.items], numeric=(6,)))


def chat(chat_id: Annotated[str, typer.Argument(help="The chat's id (its negotiate.v1 session id); after -- when it starts with -: haggler chat -- -bUv…")],
         db: DB = DEFAULT_DB_URL, catalog: CatalogPath = None, idle_ttl: IdleTTL = 3600, as_json: AsJSON = False) -> None:
    """Print one chat's transcript and its deal."""
    from haggler.cli import _fail
    from haggler.web.admin.store_reports import transcript

    store = _catalog(catalog)
    found = _read(db, lambda conn: transcript(conn, store, chat_id, now=datetime.now(timezone.utc),
                                              idle_ttl=timedelta(seconds=idle_ttl)))
    if found is None:
        raise _fail(f"no chat {chat_id!r} in this database", code=1)
    if as_json:
        _print_json(found.to_json())
        return
    c = found.chat
    lines = [(str(m.seq), _when(m.created_at), m.speaker, m.action or "—",
              money(m.price_cents, m.currency or "USD"), m.text)
             for m in found.messages]
    title = f"chat {c.id}: {c.product_id}, {c.state}" + (f", {c.outcome}" if c.outcome else "")
    renderables: list[object] = [_table(title, ("#", "at (UTC)", "speaker", "action", "price", "text"), lines,
                                        numeric=(0, 4))]
    if found.deal is not None:
        d = found.deal
        renderables.append(escape(f"deal {d.id}: {money(d.price_cents, d.currency)} (list "
                                  f"{money(d.list_price_cents, d.currency)}, {percent(d.discount)} off), extras: "
                                  f"{', '.join(d.extras) or 'none'}, margin over floor "
                                  f"{money(d.margin_cents, d.currency)}"))
    _print(*renderables)


def stats(db: DB = DEFAULT_DB_URL, catalog: CatalogPath = None, idle_ttl: IdleTTL = 3600,
          days: Annotated[int, typer.Option(min=1, max=366, help="Days of deals per day, today (UTC) the last.")] = 14,
          as_json: AsJSON = False) -> None:
    """The dashboard's numbers: chats, agreement rate (agreed / closed chats), average discount,
    the discount distribution, deals per day, and each product's figures."""
    from haggler.web.admin.store_reports import all_deals, product_stats, summary

    store = _catalog(catalog)

    def read(conn: Any) -> tuple[Summary, list[ProductStats]]:
        every = all_deals(conn, store)  # once, for both
        return (summary(conn, store, now=datetime.now(timezone.utc), idle_ttl=timedelta(seconds=idle_ttl), days=days,
                        reports=every), product_stats(conn, store, every))

    overall, products = _read(db, read)
    if as_json:
        _print_json({"summary": overall.to_json(), "products": [p.to_json() for p in products]})
        return
    currency = overall.currency
    numbers = [("chats", str(overall.chats)), ("live chats", str(overall.live_chats)),
               ("closed chats", str(overall.closed_chats)),
               *((f"  {kind.replace('_', ' ')}", str(n)) for kind, n in overall.outcomes.items()),
               ("deals", str(overall.deals)), ("agreement rate", percent(overall.agreement_rate)),
               ("average discount", percent(overall.average_discount)),
               ("revenue", money(overall.revenue_cents, currency)),
               ("margin over floor", money(overall.margin_cents, currency))]
    _print(_table("Summary", ("figure", "value"), numbers, numeric=(1,)),
           _table("Discounts", ("off list price", "deals"),
                  [(b.label, str(b.deals)) for b in overall.discounts], numeric=(1,)),
           _table("Deals per day (UTC)", ("day", "deals", "revenue"),
                  [(d.day.isoformat(), str(d.deals), money(d.revenue_cents, currency)) for d in overall.per_day],
                  numeric=(1, 2)),
           _table("Products", ("product", "list price", "chats", "deals", "agreement rate", "average price",
                               "average discount", "revenue", "margin over floor"),
                  [(p.product_id, money(p.list_price_cents, p.currency), str(p.chats), str(p.deals),
                    percent(p.agreement_rate), money(p.average_price_cents, p.currency),
                    percent(p.average_discount), money(p.revenue_cents, p.currency),
                    money(p.margin_cents, p.currency)) for p in products], numeric=tuple(range(1, 9))))


# -- the other surfaces ---------------------------------------------------------------------------


def _by_status(title: str, counts: dict[str, int]) -> Table:
    return _table(title, ("status", "count"), [(status, str(n)) for status, n in counts.items()], numeric=(1,))


def exchange(db: DB = DEFAULT_DB_URL, as_json: AsJSON = False, limit: Limit = None, offset: Offset = 0) -> None:
    """The /v1 exchange: ledger totals (deposited, available, held, paid) and its transactions."""
    from haggler.web.admin.exchange_report import ledger_totals, transactions_page

    totals, found = _read(db, lambda conn: (ledger_totals(conn), transactions_page(conn, Window(offset, limit))))
    if as_json:
        _print_json({"ledger": totals.to_json(), "transactions": found.to_json(lambda row: row.to_json())})
        return
    _print(_table("Ledger totals (cents)", ("figure", "cents"), [
                ("wallets", str(totals.wallets)), ("deposited", str(totals.deposited_cents)),
                ("available", str(totals.available_cents)), ("held", str(totals.held_cents)),
                ("paid to providers", str(totals.captured_cents))], numeric=(1,)),
           _table("Ledger entries by kind (cents)", ("kind", "entries", "available change", "held change"),
                  [(kind, str(n), str(available), str(held)) for kind, (n, available, held) in totals.entries.items()],
                  numeric=(1, 2, 3)),
           _by_status("Transactions by status", totals.transactions),
           _table(_counted("transactions", found),
                  ("transaction", "service", "consumer", "provider", "status", "max price", "price", "held",
                   "ended by", "last change (UTC)"),
                  [(t.id, t.service, t.consumer, t.provider, t.status, str(t.max_price_cents),
                    "—" if t.price_cents is None else str(t.price_cents), str(t.held_cents), t.end_reason or "—",
                    _when(t.updated_at)) for t in found.items], numeric=(5, 6, 7)))


def opportunities(db: DB = DEFAULT_DB_URL, as_json: AsJSON = False, limit: Limit = None, offset: Offset = 0) -> None:
    """Match opportunities counted by status, and listed, the most recently changed first."""
    from haggler.web.admin.matching_report import (
        opportunities_by_status,
        opportunities_page,
    )

    counts, found = _read(db, lambda conn: (opportunities_by_status(conn),
                                            opportunities_page(conn, Window(offset, limit))))
    if as_json:
        _print_json({"by_status": counts, "opportunities": found.to_json(lambda row: row.to_json())})
        return
    _print(_by_status("Opportunities by status", counts),
           _table(_counted("opportunities", found), ("opportunity", "source", "candidate", "score", "status",
                                                     "last change (UTC)"),
                  [(o.id, o.source, o.candidate, str(o.score), o.status, _when(o.updated_at)) for o in found.items],
                  numeric=(3,)))


def books(db: DB = DEFAULT_DB_URL, as_json: AsJSON = False, limit: Limit = None, offset: Offset = 0) -> None:
    """Every market order book with open orders: orders, quantity and best price on each side."""
    from haggler.web.admin.market_report import books_page

    found = _read(db, lambda conn: books_page(conn, Window(offset, limit)))
    if as_json:
        _print_json(found.to_json(lambda book: book.to_json()))
        return
    _print(_table(_counted("books", found), ("item", "currency", "bid orders", "bid quantity", "best bid",
                                             "best ask", "ask quantity", "ask orders", "spread"),
                  [(b.item, b.currency, str(b.bids.orders), str(b.bids.quantity), money(b.bids.best_cents, b.currency),
                    money(b.asks.best_cents, b.currency), str(b.asks.quantity), str(b.asks.orders),
                    money(b.spread_cents, b.currency)) for b in found.items], numeric=tuple(range(2, 9))))


def market_deals(db: DB = DEFAULT_DB_URL, as_json: AsJSON = False, limit: Limit = None, offset: Offset = 0) -> None:
    """The market's deals, newest first, and how many are in each status."""
    from haggler.web.admin.market_report import deals_by_status, deals_page

    counts, found = _read(db, lambda conn: (deals_by_status(conn), deals_page(conn, Window(offset, limit))))
    if as_json:
        _print_json({"by_status": counts, "deals": found.to_json(lambda row: row.to_json())})
        return
    _print(_by_status("Market deals by status", counts),
           _table(_counted("deals", found), ("deal", "listing", "buyer", "seller", "protocol", "price", "status",
                                             "made (UTC)"),
                  [(d.id, d.listing_id, d.buyer_id, d.seller_id, d.protocol, money(d.price_cents, d.currency),
                    d.status, _when(d.created_at)) for d in found.items], numeric=(5,)))


def register(app: typer.Typer, *, match_app: typer.Typer, market_app: typer.Typer) -> None:
    """Add the commands to ``haggler`` and its ``match`` and ``market`` groups."""
    for command in (deals, orders, chats, chat, stats, exchange):
        app.command()(command)
    match_app.command("opportunities")(opportunities)
    market_app.command("books")(books)
    market_app.command("deals")(market_deals)
