"""The dashboard's commands as a user runs them (real processes, real databases): each ``--json``
is exactly the report the dashboard shows, each table prints, and ``--db`` picks the database."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from haggler.catalog import load_catalog
from haggler.storage.database import open_database
from haggler.web.admin import (
    exchange_report,
    market_report,
    matching_report,
    store_reports,
)
from haggler.web.admin.paging import Window
from tests.conftest import FakeClock
from tests.protocols.transactions.support import (
    list_service,
    open_transaction,
    register,
)
from tests.support.admin import TOKEN, WALK_AWAY, admin_store, play
from tests.support.market import BOOK, created, seller_and_buyer
from tests.support.matching import Operator, pair

TTL = timedelta(hours=1)


def haggler(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "haggler", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def as_json(data: object) -> object:
    return json.loads(json.dumps(data))


@pytest.fixture
def seeded(make_store, db_url):
    """A store on the demo catalog (the commands' default) with something in every section."""
    store = admin_store(make_store, db_url=db_url, catalog=load_catalog(),
                        clock=FakeClock(datetime.now(timezone.utc)))
    chats = [play(store, "aerion-v12-cordless", "deal"), play(store, "stillair-p400", "deal"),
             play(store, "halcyon-anc-900", WALK_AWAY), play(store, "grindwell-conical-pro", "hello")]
    consumer, provider = register(store.http, "consumer"), register(store.http, "provider")
    consumer.deposit(1_000)
    open_transaction(consumer, list_service(provider, base=500, model="fixed"), 500)
    op = Operator(store, token=TOKEN)
    op.open(*op.users(pair("good", 0)))
    seller, buyer = seller_and_buyer(store)
    created(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 190, 2)))
    listing = seller.listing(ask=180)
    created(seller.send("/market/listings", listing))
    created(buyer.send(f"/market/listings/{listing['listingId']}/instant_match", buyer.instant(listing["listingId"], 180)))
    return store, db_url, chats


def report(store, read, *args, **kwargs):
    with store.app.state.service.db.read() as conn:
        return read(conn, *args, **kwargs)


def run_json(tmp_path: Path, *args: str) -> object:
    # A session id may start with "-" (URL-safe base64): a chat's goes after "--".
    *words, last = args
    result = haggler(*words, "--json", "--", last, cwd=tmp_path) if words and words[0] == "chat" else \
        haggler(*args, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_each_commands_json_is_the_dashboards_report(seeded, tmp_path):
    store, db, chats = seeded
    catalog = store.catalog
    now = datetime.now(timezone.utc)
    assert run_json(tmp_path, "deals", "--db", db) == as_json(
        [d.to_json() for d in report(store, store_reports.deals_page, catalog).items])
    assert run_json(tmp_path, "deals", "--db", db, "--limit", "1", "--offset", "1") == as_json(
        [d.to_json() for d in report(store, store_reports.deals_page, catalog, Window(1, 1)).items])
    assert run_json(tmp_path, "chats", "--db", db) == as_json(report(
        store, store_reports.chats_page, catalog, now=now, idle_ttl=TTL).to_json(lambda c: c.to_json()))
    live = run_json(tmp_path, "chats", "--db", db, "--live")
    assert [c["id"] for c in live["items"]] == [chats[3].chat_id] and live["total"] == 1
    assert run_json(tmp_path, "chat", "--db", db, chats[0].chat_id) == as_json(
        report(store, store_reports.transcript, catalog, chats[0].chat_id, now=now, idle_ttl=TTL).to_json())
    stats = run_json(tmp_path, "stats", "--db", db, "--days", "7")
    assert stats == as_json({
        "summary": report(store, store_reports.summary, catalog, now=now, idle_ttl=TTL, days=7).to_json(),
        "products": [p.to_json() for p in report(store, store_reports.product_stats, catalog)]})
    assert stats["summary"]["deals"] == 2 and stats["summary"]["agreement_rate"] == round(2 / 3, 4)
    assert run_json(tmp_path, "exchange", "--db", db) == as_json(
        {"ledger": report(store, exchange_report.ledger_totals).to_json(),
         "transactions": report(store, exchange_report.transactions_page).to_json(lambda t: t.to_json())})
    assert run_json(tmp_path, "match", "opportunities", "--db", db) == as_json(
        {"by_status": report(store, matching_report.opportunities_by_status),
         "opportunities": report(store, matching_report.opportunities_page).to_json(lambda o: o.to_json())})
    assert run_json(tmp_path, "market", "books", "--db", db) == as_json(
        report(store, market_report.books_page).to_json(lambda b: b.to_json()))
    market_deals = run_json(tmp_path, "market", "deals", "--db", db)
    assert market_deals == as_json(
        {"by_status": report(store, market_report.deals_by_status),
         "deals": report(store, market_report.deals_page).to_json(lambda d: d.to_json())})
    assert market_deals["deals"]["total"] == 1


def test_the_tables_print(seeded, tmp_path):
    store, db, chats = seeded
    expected = {
        ("deals",): ["2 deals", "aerion-v12-cordless", "$649.99", "margin over floor"],
        ("chats",): ["4 chats", chats[3].chat_id, "live"],
        ("chat", chats[0].chat_id): ["merchant", "shopper", "deal", "margin over floor"],
        ("stats",): ["agreement rate", "66.7%", "Discounts", "off list price", "Deals per day", "Products"],
        ("exchange",): ["Ledger totals", "deposited", "1000", "provider"],
        ("match", "opportunities"): ["Opportunities by status", "1 opportunities"],
        ("market", "books"): ["1 books", BOOK, "€190"],
        ("market", "deals"): ["Market deals by status", "instant_match", "€180"],
    }
    for args, words in expected.items():
        # A session id may start with "-" (URL-safe base64): it goes after "--".
        result = haggler("chat", "--db", db, "--", args[1], cwd=tmp_path) if args[0] == "chat" else \
            haggler(*args, "--db", db, cwd=tmp_path)
        assert result.returncode == 0, (args, result.stderr)
        missing = [w for w in words if w not in result.stdout]
        assert not missing, (args, missing, result.stdout)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_db_picks_the_database_and_a_missing_chat_is_an_error(seeded, tmp_path):
    store, db, chats = seeded
    other = f"sqlite:///{tmp_path}/other.db"
    open_database(other).dispose()  # another store's database, before any chat
    assert run_json(tmp_path, "deals", "--db", other) == []
    assert run_json(tmp_path, "chats", "--db", other)["total"] == 0
    assert len(run_json(tmp_path, "deals", "--db", db)) == 2
    missing = haggler("chat", "nope", "--db", db, cwd=tmp_path)
    assert missing.returncode == 1 and "no chat 'nope'" in missing.stderr and "Traceback" not in missing.stderr


def test_orders_shows_a_buyer_without_name_or_email_as_a_dash_and_help_names_every_door(make_store, tmp_path):
    """An agent's checkout may place an order without a buyer's name or email (UCP and ACP do not
    require one; commerce/sessions.py keeps them empty): its buyer is —, never ``<>``; what there
    is of a buyer is shown. ``haggler orders --help`` names the doors orders come through."""
    from haggler.orders import DOORS, Buyer, Order, OrderLine, insert_order

    db = f"sqlite:///{tmp_path}/orders.db"
    store = make_store(db_url=db)
    now = datetime.now(timezone.utc)
    line = (OrderLine("mug", "Mug", 1, 900, "usd", (), None, 900),)
    placed = {"ord_nobody": ("ucp", Buyer("", "", "")), "ord_emailonly": ("acp", Buyer("", "ada@example.com", "")),
              "ord_nameonly": ("ucp", Buyer("Ada Lovelace", "", "1 Analytical Way\nPortland")),
              "ord_whole": ("chat", Buyer("Grace", "grace@example.com", "2 Main St"))}
    with store.app.state.service.db.write() as conn:
        for i, (order_id, (door, buyer)) in enumerate(placed.items()):
            insert_order(conn, Order(order_id, line, 900, "usd", now - timedelta(minutes=i), buyer, door=door))
    table = haggler("orders", "--db", db, cwd=tmp_path)
    assert table.returncode == 0, table.stderr
    rows = {order_id: next(row for row in table.stdout.splitlines() if order_id in row) for order_id in placed}
    assert "<>" not in table.stdout
    cells = {order_id: [cell.strip() for cell in row.split("│")] for order_id, row in rows.items()}
    assert cells["ord_nobody"][-3:-1] == ["—", "—"], rows["ord_nobody"]  # buyer, ship to
    assert cells["ord_emailonly"][-3:-1] == ["<ada@example.com>", "—"], rows["ord_emailonly"]
    assert cells["ord_nameonly"][-3:-1] == ["Ada Lovelace", "1 Analytical Way / Portland"], rows["ord_nameonly"]
    assert cells["ord_whole"][-3:-1] == ["Grace <grace@example.com>", "2 Main St"], rows["ord_whole"]
    helped = haggler("orders", "--help", cwd=tmp_path)
    assert helped.returncode == 0 and all(door in helped.stdout for door in DOORS), helped.stdout
