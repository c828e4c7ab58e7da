"""The dashboard's pages over real HTTP: tables that paginate with totals, transcripts shown as
text, and every section fed by the real surfaces."""

from __future__ import annotations

import re

import pytest

from tests.protocols.transactions.support import (
    list_service,
    open_transaction,
    register,
)
from tests.support.admin import admin_store, play, signed_in_client
from tests.support.market import BOOK, created, seller_and_buyer


def rows_of(html: str, table_id: str) -> list[str]:
    table = re.search(rf"<table id={table_id}>.*?</table>", html, re.S)
    assert table, table_id
    return re.findall(r"<tr><td.*?</tr>", table.group(0).split("<tbody>")[1], re.S)


@pytest.fixture
def store(make_store):
    return admin_store(make_store)


def test_the_deals_table_paginates_with_totals_and_links(store):
    products = [p.id for p in store.catalog.products]
    made = [play(store, products[i % len(products)], "deal") for i in range(27)]
    http = signed_in_client(store)
    first, second = http.get("/admin/deals").text, http.get("/admin/deals?page=2").text
    assert len(rows_of(first, "table-deals")) == 25 and len(rows_of(second, "table-deals")) == 2
    assert "Page 1 of 2 · 27 deals" in first and "Page 2 of 2 · 27 deals" in second
    assert "<a rel=next href='/admin/deals?page=2'>" in first and "rel=prev" not in first
    assert "<a rel=prev href='/admin/deals?page=1'>" in second and "rel=next" not in second
    shown = re.findall(r"/admin/chats/([\w-]+)'", first + second)
    assert sorted(shown) == sorted(p.chat_id for p in made)
    for odd in ("0", "-1", "abc", "²"):  # not a page number: the first page
        assert len(rows_of(http.get(f"/admin/deals?page={odd}").text, "table-deals")) == 25
    assert "None yet." in http.get("/admin/deals?page=9").text


def test_a_transcript_shows_every_message_as_text(store):
    played = play(store, "aerion-v12-cordless", "<script>alert(1)</script> hello", "deal")
    page = signed_in_client(store).get(f"/admin/chats/{played.chat_id}").text
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt; hello" in page
    assert page.count("<li><span class=speaker>") == played.messages
    assert "id=table-chat-deal" in page and "Margin over floor" in page


def test_an_unknown_chat_is_404_inside_the_dashboard(store):
    http = signed_in_client(store)
    for chat_id in ("nope", "x" * 65):
        response = http.get(f"/admin/chats/{chat_id}")
        assert response.status_code == 404 and "There is nothing here." in response.text


def test_live_chats_and_products_pages(store):
    live = play(store, "stillair-p400", "hello")
    done = play(store, "stillair-p400", "deal")
    http = signed_in_client(store)
    assert live.chat_id in http.get("/admin/chats?live=1").text and done.chat_id not in http.get("/admin/chats?live=1").text
    both = http.get("/admin/chats").text
    assert live.chat_id in both and done.chat_id in both and "Page 1 of 1 · 2 chats" in both
    products = rows_of(http.get("/admin/products").text, "table-products")
    assert len(products) == len(store.catalog.products)
    stillair = next(r for r in products if "Stillair P400" in r)
    assert re.findall(r"<td class=num>([^<]*)</td>", stillair)[1:5] == ["2", "1", "100.0%", "$549"]


def test_exchange_matching_and_market_pages_show_their_rows(store):
    consumer, provider = register(store.http, "consumer-x"), register(store.http, "provider-y")
    consumer.deposit(1_000)
    transaction = open_transaction(consumer, list_service(provider, base=500, model="fixed"), 500).json()
    seller, buyer = seller_and_buyer(store)
    created(seller.send(f"/market/books/{BOOK}/orders", seller.order("sell", 190, 2)))
    listing = seller.listing(ask=180)
    created(seller.send("/market/listings", listing))
    deal = created(buyer.send(f"/market/listings/{listing['listingId']}/instant_match",
                              buyer.instant(listing["listingId"], 180)))
    http = signed_in_client(store)
    exchange = http.get("/admin/exchange").text
    assert transaction["id"] in exchange and "consumer-x" in exchange and "id=numbers-ledger" in exchange
    assert re.search(r"<dt>Deposited \(cents\)</dt><dd>1,000</dd>", exchange)
    market = http.get("/admin/market").text
    assert [BOOK in row for row in rows_of(market, "table-books")] == [True]
    assert deal["dealId"] in market and "id=table-market-deals" in market
    matching = http.get("/admin/matching").text
    assert "id=numbers-opportunities" in matching and "None yet." in matching


def test_the_orders_page_lists_what_people_bought_from_chat_and_cart(store):
    from tests.support.checkout import close_a_deal

    deal = close_a_deal(store.http, store.catalog.products[0])
    form = {"name": "Mary <b>Jackson</b>", "email": "mary@example.com", "address": "7 Wind Tunnel Rd\nHampton"}
    assert store.http.post(deal["checkout_url"], data=form).status_code == 303
    http = signed_in_client(store)
    page = http.get("/admin/orders").text
    [row] = rows_of(page, "table-orders")
    assert deal["id"] in row and "chat" in row and "mary@example.com" in row
    assert "Mary &lt;b&gt;Jackson&lt;/b&gt;" in row and "7 Wind Tunnel Rd<br>Hampton" in row
    assert "Page 1 of 1 · 1 orders" in page and "<a href='/admin/orders' aria-current=page>" in page
    assert "mary@example.com" not in store.http.get("/admin/orders").text  # not without signing in
