"""The dashboard's reports against a real store: chats and deals played through the negotiate.v1
API, exchange, matching and market rows made through their own HTTP APIs, and every figure
checked against a computation of the test's own, from what the APIs answered and the catalog
file (on SQLite and PostgreSQL: the reports' SQL must not depend on the database)."""

from __future__ import annotations

from collections import Counter
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction

import pytest

from haggler.web.admin import (
    exchange_report,
    market_report,
    matching_report,
    store_reports,
)
from haggler.web.admin.paging import Window
from haggler.web.admin.store_reports import DealReport
from tests.conftest import FakeClock, secret_catalog_data
from tests.protocols.transactions.support import (
    list_service,
    open_transaction,
    register,
)
from tests.support.admin import ACCEPT, TOKEN, WALK_AWAY, admin_store, offer, play
from tests.support.market import BOOK, created, seller_and_buyer
from tests.support.matching import Operator, pair

TTL = timedelta(hours=1)  # StoreLimits' default idle TTL
NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)


def cents(price: object) -> int:
    return int(Decimal(str(price)) * 100)


def raw_product(product_id: str) -> dict:
    """The product as the catalog file states it: the test's own source of list prices, floors
    and what each lever costs."""
    return next(p for p in secret_catalog_data()["products"] if p["id"] == product_id)


def expected_cost(product_id: str, extras: list[str]) -> int:
    levers = raw_product(product_id)["levers"]
    return sum(cents(lever["cost"]) for extra in extras for lever in levers if lever["text"].startswith(extra))


@pytest.fixture
def played(make_store, db_url):
    """A store whose chats span three weeks: deals on either side of a UTC midnight, one outside
    the 14-day window, one with an extra, a walk-away, an expired chat, an idle one and a live one."""
    clock = FakeClock(datetime(2026, 11, 2, 12, 0, tzinfo=timezone.utc))
    store = admin_store(make_store, db_url=db_url, clock=clock)
    products = [p.id for p in store.catalog.products]
    chats = [play(store, products[0], "deal")]  # Nov 2: outside the window
    clock.now = datetime(2026, 11, 21, 23, 59, 59, tzinfo=timezone.utc)
    chats.append(play(store, products[1], "deal"))  # the last second of Nov 21
    clock.advance(seconds=2)
    list_price = cents(raw_product(products[2])["list_price"])
    chats.append(play(store, products[2], offer(round(list_price * 0.8 / 100)), ACCEPT))  # Nov 22, 00:00:01
    clock.now = datetime(2026, 11, 22, 9, 0, tzinfo=timezone.utc)
    chats.append(play(store, products[3], "hello"))  # expires: swept at 10:30
    clock.advance(minutes=90)
    assert store.app.state.service.sweep() == 1
    clock.advance(minutes=1)
    chats.append(play(store, products[4], "hello"))  # idle by noon, never swept
    clock.now = NOW
    refurb = raw_product("aerion-v9-refurb")
    extra = refurb["levers"][0]["text"].split(" (")[0]
    price = round(cents(refurb["list_price"]) * 0.9 / 100)
    chats.append(play(store, "aerion-v9-refurb", offer(price, extra), offer(price, extra), ACCEPT))
    chats.append(play(store, products[5], WALK_AWAY))
    chats.append(play(store, products[6], "hello"))  # live
    assert chats[-3].deal and chats[-3].deal["extras"], "the merchant granted no extra: the margin check needs one"
    return store, chats


def read(store, report, *args, **kwargs):
    with store.app.state.service.db.read() as conn:
        return report(conn, *args, **kwargs)


def test_deals_carry_list_price_discount_extras_and_margin_over_floor(played):
    store, chats = played
    deals = {d.chat_id: d for d in read(store, store_reports.deals_page, store.catalog).items}
    made = [c for c in chats if c.deal]
    assert set(deals) == {c.chat_id for c in made}
    for chat in made:
        report, raw = deals[chat.chat_id], raw_product(chat.product_id)
        price, listed, floor = cents(chat.deal["price"]), cents(raw["list_price"]), cents(raw["floor"])
        cost = expected_cost(chat.product_id, chat.deal["extras"])
        assert (report.id, report.price_cents, report.extras) == (chat.deal["id"], price, tuple(chat.deal["extras"]))
        assert (report.list_price_cents, report.floor_cents, report.extras_cost_cents) == (listed, floor, cost)
        assert report.discount == pytest.approx((listed - price) / listed)
        assert report.margin_cents == price - floor - cost
        as_json = report.to_json()
        assert as_json["margin_over_floor"] == float(Decimal(price - floor - cost) / 100)
        assert as_json["list_price"] == float(Decimal(listed) / 100) and as_json["session_id"] == chat.chat_id
    with_extra = deals[chats[5].chat_id]
    assert with_extra.extras_cost_cents > 0 and with_extra.margin_cents < with_extra.price_cents - with_extra.floor_cents


def test_summary_figures_match_an_independent_count(played):
    store, chats = played
    summary = read(store, store_reports.summary, store.catalog, now=NOW, idle_ttl=TTL)
    made = [c for c in chats if c.deal]
    closed = [c for c in chats if c.closed] + [chats[3]]  # chats[3] closed by the sweep
    assert summary.chats == len(chats) and summary.live_chats == 1 and summary.closed_chats == len(closed)
    assert summary.outcomes == {"agreed": len(made), "rejected": 1, "turn_cap": 0, "expired": 1}
    assert summary.agreement_rate == pytest.approx(len(made) / len(closed))
    assert summary.deals == len(made) and summary.revenue_cents == sum(cents(c.deal["price"]) for c in made)
    discounts = [Fraction(cents(raw_product(c.product_id)["list_price"]) - cents(c.deal["price"]),
                          cents(raw_product(c.product_id)["list_price"])) for c in made]
    assert summary.average_discount == pytest.approx(float(sum(discounts) / len(discounts)))
    margin = sum(cents(c.deal["price"]) - cents(raw_product(c.product_id)["floor"])
                 - expected_cost(c.product_id, c.deal["extras"]) for c in made)
    assert summary.margin_cents == margin
    buckets = Counter(min(int(d * 100) // 5 * 5, 35) for d in discounts)
    assert {b.low: b.deals for b in summary.discounts} == {low: buckets[low] for low in range(0, 40, 5)}
    # 14 UTC days ending today; a deal one second before midnight is yesterday's, one after is today's.
    days = {d.day: d.deals for d in summary.per_day}
    assert list(days) == [date(2026, 11, 9) + timedelta(days=n) for n in range(14)]
    assert days[date(2026, 11, 21)] == 1 and days[date(2026, 11, 22)] == 2
    assert sum(days.values()) == len(made) - 1  # the Nov 2 deal is outside the window
    revenue = {d.day: d.revenue_cents for d in summary.per_day}
    assert revenue[date(2026, 11, 21)] == cents(chats[1].deal["price"])


def test_chats_are_live_idle_or_closed_and_transcripts_hold_every_message(played):
    store, chats = played
    every = read(store, store_reports.chats_page, store.catalog, now=NOW, idle_ttl=TTL)
    states = {c.id: c.state for c in every.items}
    assert states[chats[7].chat_id] == "live" and states[chats[4].chat_id] == "idle"
    assert states[chats[3].chat_id] == "closed" and every.total == len(chats)
    assert [c.last_activity_at for c in every.items] == sorted((c.last_activity_at for c in every.items), reverse=True)
    live = read(store, store_reports.chats_page, store.catalog, now=NOW, idle_ttl=TTL, live_only=True)
    assert [c.id for c in live.items] == [chats[7].chat_id] and live.total == 1
    for chat in chats:
        found = read(store, store_reports.transcript, store.catalog, chat.chat_id, now=NOW, idle_ttl=TTL)
        history = store.http.get(f"/api/store/chat/{chat.chat_id}").json()["history"]
        assert [(m.speaker, m.text) for m in found.messages] == [(h["speaker"], h["message"]) for h in history]
        assert found.chat.messages == chat.messages == len(history)
        assert (found.deal.id if found.deal else None) == (chat.deal["id"] if chat.deal else None)
    assert read(store, store_reports.transcript, store.catalog, "no-such-chat", now=NOW, idle_ttl=TTL) is None


def test_pages_split_the_deals_without_overlap_and_count_them_all(played):
    store, chats = played
    total = sum(1 for c in chats if c.deal)
    assert total == 4
    whole = read(store, store_reports.deals_page, store.catalog).items
    pages = [read(store, store_reports.deals_page, store.catalog, Window.page(n, 3)) for n in (1, 2, 3)]
    assert [len(p.items) for p in pages] == [3, 1, 0] and {p.total for p in pages} == {total}
    assert [d.id for p in pages for d in p.items] == [d.id for d in whole]
    assert [d.created_at for d in whole] == sorted((d.created_at for d in whole), reverse=True)
    assert [(p.number, p.pages, p.has_previous, p.has_next) for p in pages] == [
        (1, 2, False, True), (2, 2, True, False), (3, 2, True, False)]
    last = read(store, store_reports.deals_page, store.catalog, Window(total - 1, 10))
    assert len(last.items) == 1 and not last.has_next and last.has_previous


def test_each_products_figures(played):
    store, chats = played
    stats = {p.product_id: p for p in read(store, store_reports.product_stats, store.catalog)}
    assert list(stats) == [p.id for p in store.catalog.products]
    for product_id, p in stats.items():
        mine = [c for c in chats if c.product_id == product_id]
        sold = [c for c in mine if c.deal]
        assert (p.chats, p.deals) == (len(mine), len(sold))
        assert p.revenue_cents == sum(cents(c.deal["price"]) for c in sold)
        if sold:
            listed = cents(raw_product(product_id)["list_price"])
            assert p.average_discount == pytest.approx(
                sum((listed - cents(c.deal["price"])) / listed for c in sold) / len(sold))
            assert p.agreement_rate == 1.0
    assert stats[chats[6].product_id].agreement_rate == 0.0  # walked away: closed, not agreed
    assert stats[chats[7].product_id].agreement_rate is None  # only a live chat: nothing closed yet


# -- the pure parts, at their edges ---------------------------------------------------------------


def _deal(price: int, listed: int | None = 10_000, day: datetime = NOW) -> DealReport:
    return DealReport("d", "c", "p", "P", price, "USD", (), day, listed, None if listed is None else 5_000, 0)


def test_discount_buckets_put_each_edge_in_the_higher_bucket():
    deals = [_deal(10_000), _deal(9_501), _deal(9_500), _deal(9_000), _deal(6_500), _deal(1_000),
             _deal(10_001), _deal(5_000, listed=None)]
    buckets = {b.label: b.deals for b in store_reports.discount_buckets(deals)}
    assert buckets == {"above list": 1, "0–5%": 2, "5–10%": 1, "10–15%": 1, "15–20%": 0, "20–25%": 0, "25–30%": 0,
                       "30–35%": 0, "35%+": 2}
    assert "above list" not in {b.label for b in store_reports.discount_buckets(deals[:-2])}


def test_deals_per_day_fills_empty_days_and_cuts_at_utc_midnight():
    at = [datetime(2026, 3, 1, 23, 59, 59, 999_999, tzinfo=timezone.utc), datetime(2026, 3, 2, tzinfo=timezone.utc),
          datetime(2026, 3, 4, 12, tzinfo=timezone.utc), datetime(2026, 2, 25, tzinfo=timezone.utc)]
    days = store_reports.deals_per_day([_deal(100 * (i + 1), day=d) for i, d in enumerate(at)], date(2026, 3, 4), 5)
    assert [(d.day.day, d.deals, d.revenue_cents) for d in days] == [
        (28, 0, 0), (1, 1, 100), (2, 1, 200), (3, 0, 0), (4, 1, 300)]


# -- the exchange, matching and the market ----------------------------------------------------------


def test_exchange_transactions_and_ledger_totals(make_store, db_url):
    store = admin_store(make_store, db_url=db_url)
    consumer, provider = register(store.http, "consumer"), register(store.http, "provider")
    consumer.deposit(10_000)
    provider.deposit(250)
    fixed = open_transaction(consumer, list_service(provider, base=500, model="fixed"), 500).json()
    assert fixed["status"] == "matched"
    assert provider.post(f"/v1/transactions/{fixed['id']}/complete", {"output": {"ok": True}}).status_code == 200
    held = open_transaction(consumer, list_service(provider, base=300, model="fixed"), 300).json()
    negotiating = open_transaction(consumer, list_service(provider, base=800), 900, initialOfferCents=700).json()
    totals = read(store, exchange_report.ledger_totals)
    wallets = [consumer.wallet(), provider.wallet()]
    assert totals.wallets == 2 and totals.deposited_cents == 10_250
    assert totals.available_cents == sum(w["availableCents"] for w in wallets)
    assert totals.held_cents == sum(w["heldCents"] for w in wallets) == 300
    assert totals.available_cents + totals.held_cents == totals.deposited_cents  # no money made or lost
    assert totals.captured_cents == 500 and totals.entries["capture"][0] == 2  # one entry per wallet touched
    assert totals.transactions == {"negotiating": 1, "matched": 1, "completed": 1, "cancelled": 0}
    found = read(store, exchange_report.transactions_page, Window(0, 2))
    assert found.total == 3 and len(found.items) == 2 and found.has_next
    every = {t.id: t for t in read(store, exchange_report.transactions_page).items}
    assert {t: every[t].status for t in every} == {fixed["id"]: "completed", held["id"]: "matched",
                                                   negotiating["id"]: "negotiating"}
    assert (every[held["id"]].held_cents, every[held["id"]].consumer, every[held["id"]].provider) == \
        (300, "consumer", "provider")


def test_opportunities_by_status_agree_with_the_operator_api(make_store, db_url):
    store = admin_store(make_store, db_url=db_url)
    op = Operator(store, token=TOKEN)
    opened = []
    for name, index in (("good", 0), ("good", 1), ("superficial", 0), ("one_sided", 0)):
        a, b = op.users(pair(name, index))
        opened.append(op.open(a, b)["id"])
        assert op.negotiation(op.opportunity(opened[-1])["negotiationId"])["state"] != "submitted"
    statuses = [op.opportunity(opportunity_id)["status"] for opportunity_id in opened]
    assert len(set(statuses)) > 1, statuses  # more than one status, or the count proves little
    counts = read(store, matching_report.opportunities_by_status)
    assert sum(counts.values()) == 4 and counts == {s: statuses.count(s) for s in matching_report.STATUSES}
    found = read(store, matching_report.opportunities_page, Window(0, 3))
    assert found.total == 4 and len(found.items) == 3
    assert {o.id for o in read(store, matching_report.opportunities_page).items} == set(opened)


def test_market_books_and_deals(make_store, db_url):
    store = admin_store(make_store, db_url=db_url)
    seller, buyer = seller_and_buyer(store, max_spend=510)  # 3 at 170
    created(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 190, 2)))
    created(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 185, 1)))
    created(buyer.send(f"/market/books/{BOOK}/orders", buyer.order("buy", 170, 3)))
    listing = seller.listing(ask=180)
    created(seller.send("/market/listings", listing))
    deal = created(buyer.send(f"/market/listings/{listing['listingId']}/instant_match",
                              buyer.instant(listing["listingId"], 180)))
    books = read(store, market_report.books_page)
    public = store.http.get(f"/market/books/{BOOK}").json()["books"][0]
    assert books.total == 1
    book = books.items[0]
    assert (book.item, book.currency) == (BOOK, public["currency"])
    assert book.bids.quantity == sum(level["quantity"] for level in public["bids"]) == 3
    assert book.asks.quantity == sum(level["quantity"] for level in public["asks"]) == 3
    assert (book.bids.orders, book.asks.orders) == (1, 2)
    assert (book.bids.best_cents, book.asks.best_cents, book.spread_cents) == (17_000, 18_500, 1_500)
    assert cents(public["asks"][0]["price"]) == book.asks.best_cents
    deals = read(store, market_report.deals_page)
    assert [d.id for d in deals.items] == [deal["dealId"]] and deals.items[0].price_cents == 18_000
    assert deals.items[0].status == seller.deal(deal["dealId"])["status"]
    counts = read(store, market_report.deals_by_status)
    assert sum(counts.values()) == 1 and counts[deals.items[0].status] == 1
