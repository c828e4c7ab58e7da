"""The cart: list-price lines, deal redemption (once, for its product, before it expires),
checkout snapshots, the human checkout page and idempotent order placement — on SQLite and
PostgreSQL, including the races between sessions and between clicks."""

from __future__ import annotations

import json
import threading
from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import func, insert, select

from haggler.catalog import load_catalog, parse_catalog
from haggler.errors import Conflict, Gone, InvalidInput, NotFound
from haggler.money import format_money
from haggler.money import decimal_string
from haggler.orders import Buyer
from haggler.protocols.agents_json.cart import CartService, CartView, Placed
from haggler.web.checkout import cart_page
from haggler.storage.database import Database
from haggler.storage.schema import (
    agent_sessions,
    chats,
    checkouts,
    deal_redemptions,
    deals,
    orders,
)

try:
    from tests.conftest import SECRET_MARKERS, secret_catalog_data
    from tests.support.servers import FakeClock
except ImportError:  # pragma: no cover
    from conftest import SECRET_MARKERS, secret_catalog_data  # type: ignore[no-redef]
    from support.servers import FakeClock  # type: ignore[no-redef]

CATALOG = load_catalog()
P1 = CATALOG.products[0]  # aerion-v12-cordless, $649.99
P2 = CATALOG.products[1]
BASE = "https://shop.example"
BUYER = Buyer("Ada Lovelace", "ada@example.com", "12 Analytical Row\nLondon")
PUBLIC_LINE_KEYS = {"item_id", "name", "quantity", "unit_price_cents", "unit_price", "line_total_cents", "line_total",
                    "list_price_cents", "list_price", "currency", "extras", "deal_id", "negotiated"}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def cart(db: Database, clock: FakeClock) -> CartService:
    return CartService(CATALOG, db, clock, deal_ttl=timedelta(hours=24), max_quantity=5)


def checkout_page(svc: CartService, checkout_id: str) -> str:
    """The human's page for a checkout, as the store renders it."""
    return cart_page(svc.catalog, svc.checkout_state(checkout_id))


def make_session(db: Database, clock: FakeClock, sid: str) -> str:
    now = clock()
    with db.write() as conn:
        conn.execute(insert(agent_sessions).values(id=sid, token_hash="h" + sid, client="127.0.0.1",
                                                   created_at=now, expires_at=now + timedelta(hours=1)))
    return sid


def make_deal(db: Database, deal_id: str, product_id: str, price_cents: int, extras: tuple[str, ...] = (),
              at: datetime | None = None, currency: str = "USD") -> str:
    at = at or datetime(2026, 11, 22, 11, 0, tzinfo=timezone.utc)
    with db.write() as conn:
        conn.execute(insert(chats).values(id="chat-" + deal_id, product_id=product_id, seed=1, client_ip="x",
                                          status="closed", outcome="agreed", shopper_messages=3, created_at=at,
                                          last_activity_at=at, closed_at=at))
        conn.execute(insert(deals).values(id=deal_id, chat_id="chat-" + deal_id, product_id=product_id,
                                          price_cents=price_cents, currency=currency, extras=json.dumps(list(extras)),
                                          created_at=at))
    return deal_id


def line(view: CartView, item_id: str):
    return next(x for x in view.lines if x.item_id == item_id)


# -- list-price lines --------------------------------------------------------------------------

def test_add_at_list_price_and_increment(cart, db, clock):
    s = make_session(db, clock, "s1")
    view = cart.add(s, P1.id, 2)
    assert (line(view, P1.id).quantity, line(view, P1.id).unit_price_cents) == (2, P1.list_price_cents)
    assert not line(view, P1.id).negotiated
    view = cart.add(s, P1.id, 3)
    assert line(view, P1.id).quantity == 5
    assert view.total_cents == 5 * P1.list_price_cents and view.item_count == 5
    with pytest.raises(InvalidInput, match="quantity"):
        cart.add(s, P1.id, 1)  # 6 > max_quantity 5
    assert cart.view(s).item_count == 5


@pytest.mark.parametrize("bad", [0, -1, 6, True, 1.5])
def test_quantity_out_of_range(cart, db, clock, bad):
    s = make_session(db, clock, "s1")
    with pytest.raises(InvalidInput, match="quantity"):
        cart.add(s, P1.id, bad)
    assert cart.view(s).lines == ()


def test_unknown_product_named(cart, db, clock):
    s = make_session(db, clock, "s1")
    with pytest.raises(NotFound, match="no-such-thing"):
        cart.add(s, "no-such-thing", 1)


def test_view_to_json_has_cents_and_decimal_strings(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900, ("Free expedited 2-day shipping",))
    cart.add(s, P1.id, 1, deal_id="d1")
    data = cart.add(s, P2.id, 2).to_json()
    deal_line = next(x for x in data["lines"] if x["item_id"] == P1.id)
    assert deal_line["unit_price_cents"] == 58900 and deal_line["unit_price"] == "589.00"
    assert deal_line["list_price_cents"] == 64999 and deal_line["list_price"] == "649.99"
    assert deal_line["negotiated"] is True and deal_line["deal_id"] == "d1"
    assert deal_line["extras"] == ["Free expedited 2-day shipping"]
    assert data["total_cents"] == 58900 + 2 * P2.list_price_cents
    assert data["total"] == f"{data['total_cents'] // 100}.{data['total_cents'] % 100:02d}"
    assert data["item_count"] == 3 and data["currency"] == "USD"
    json.dumps(data)  # JSON-ready


def test_update_and_remove(cart, db, clock):
    s = make_session(db, clock, "s1")
    cart.add(s, P1.id, 2)
    assert line(cart.update(s, P1.id, 4), P1.id).quantity == 4
    with pytest.raises(InvalidInput, match="quantity"):
        cart.update(s, P1.id, 6)
    assert cart.update(s, P1.id, 0).lines == ()
    with pytest.raises(NotFound, match=P1.id):
        cart.remove(s, P1.id)
    with pytest.raises(NotFound, match=P2.id):
        cart.update(s, P2.id, 1)


def test_carts_are_per_session(cart, db, clock):
    a, b = make_session(db, clock, "a"), make_session(db, clock, "b")
    cart.add(a, P1.id, 1)
    assert cart.view(b).lines == ()


def test_one_currency_per_cart(db, clock):
    data = secret_catalog_data()
    data["products"][1]["currency"] = "EUR"
    catalog = parse_catalog(data)
    svc = CartService(catalog, db, clock)
    s = make_session(db, clock, "s1")
    svc.add(s, catalog.products[0].id, 1)
    with pytest.raises(Conflict, match="EUR"):
        svc.add(s, catalog.products[1].id, 1)
    assert [x.item_id for x in svc.view(s).lines] == [catalog.products[0].id]


# -- deals -------------------------------------------------------------------------------------

def test_deal_redeemed_at_agreed_price_and_extras(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900, ("Free expedited 2-day shipping", "Wall dock"))
    view = cart.add(s, P1.id, 1, deal_id="d1")
    got = line(view, P1.id)
    assert (got.unit_price_cents, got.extras, got.deal_id, got.negotiated) == (
        58900, ("Free expedited 2-day shipping", "Wall dock"), "d1", True)
    assert got.list_price_cents == P1.list_price_cents
    with db.read() as conn:
        assert conn.execute(select(deal_redemptions.c.session_id)).scalars().all() == ["s1"]


def test_unknown_deal(cart, db, clock):
    s = make_session(db, clock, "s1")
    with pytest.raises(NotFound, match="nope"):
        cart.add(s, P1.id, 1, deal_id="nope")


def test_deal_for_another_product(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900)
    with pytest.raises(InvalidInput, match=f"deal d1 is for product {P1.id}, not {P2.id}"):
        cart.add(s, P2.id, 1, deal_id="d1")
    assert cart.view(s).lines == ()


def test_deal_quantity_must_be_one(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900)
    with pytest.raises(InvalidInput, match="quantity must be 1"):
        cart.add(s, P1.id, 2, deal_id="d1")
    cart.add(s, P1.id, 1, deal_id="d1")
    with pytest.raises(InvalidInput, match="0 or 1"):
        cart.update(s, P1.id, 2)
    assert line(cart.update(s, P1.id, 1), P1.id).quantity == 1


def test_expired_deal(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900, at=clock() - timedelta(hours=24))  # expires exactly now
    make_deal(db, "d2", P2.id, 10000, at=clock() - timedelta(hours=24) + timedelta(seconds=1))
    with pytest.raises(Gone, match="expired at 2026-11-22T12:00:00Z"):
        cart.add(s, P1.id, 1, deal_id="d1")
    assert cart.add(s, P2.id, 1, deal_id="d2").total_cents == 10000  # one second left
    with db.read() as conn:
        assert conn.execute(select(deal_redemptions.c.deal_id)).scalars().all() == ["d2"]


def test_deal_redeemed_by_another_session(cart, db, clock):
    a, b = make_session(db, clock, "a"), make_session(db, clock, "b")
    make_deal(db, "d1", P1.id, 58900)
    cart.add(a, P1.id, 1, deal_id="d1")
    cart.remove(a, P1.id)  # removing does not release the deal to others
    with pytest.raises(Conflict, match="already been redeemed"):
        cart.add(b, P1.id, 1, deal_id="d1")
    assert cart.view(b).lines == ()


def test_same_session_may_readd_deal_after_removing(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900)
    cart.add(s, P1.id, 1, deal_id="d1")
    with pytest.raises(Conflict, match="remove it first"):
        cart.add(s, P1.id, 1, deal_id="d1")
    cart.remove(s, P1.id)
    assert line(cart.add(s, P1.id, 1, deal_id="d1"), P1.id).unit_price_cents == 58900


def test_deal_refused_when_product_already_in_cart_at_list_price(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900)
    cart.add(s, P1.id, 2)
    with pytest.raises(Conflict, match="remove it first"):
        cart.add(s, P1.id, 1, deal_id="d1")
    with db.read() as conn:  # the refused attempt redeemed nothing
        assert conn.execute(select(func.count()).select_from(deal_redemptions)).scalar() == 0


def test_list_price_add_refused_over_a_deal_line(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900)
    cart.add(s, P1.id, 1, deal_id="d1")
    with pytest.raises(Conflict, match="negotiated price"):
        cart.add(s, P1.id, 1)
    assert line(cart.view(s), P1.id).quantity == 1


def test_concurrent_double_redemption_one_wins(cart, db, clock):
    """Many sessions race for each deal; exactly one gets it, the rest a clean Conflict."""
    sessions = [make_session(db, clock, f"s{i}") for i in range(6)]
    for round_ in range(3):
        deal_id = make_deal(db, f"race{round_}", P1.id, 58900)
        barrier = threading.Barrier(len(sessions))
        results: dict[str, object] = {}

        def attempt(sid: str, deal_id: str = deal_id, barrier: threading.Barrier = barrier,
                    results: dict[str, object] = results) -> None:
            barrier.wait()
            try:
                results[sid] = cart.add(sid, P1.id, 1, deal_id=deal_id)
            except Exception as exc:  # noqa: BLE001 - the test inspects what came out
                results[sid] = exc

        threads = [threading.Thread(target=attempt, args=(sid,)) for sid in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        winners = [sid for sid, r in results.items() if isinstance(r, CartView)]
        assert len(winners) == 1, results
        assert all(isinstance(r, Conflict) for sid, r in results.items() if sid != winners[0]), results
        with db.read() as conn:
            assert conn.execute(select(deal_redemptions.c.session_id)
                                .where(deal_redemptions.c.deal_id == deal_id)).scalars().all() == winners
        cart.remove(winners[0], P1.id)


# -- checkout and orders -----------------------------------------------------------------------

def test_checkout_empty_cart(cart, db, clock):
    s = make_session(db, clock, "s1")
    with pytest.raises(InvalidInput, match="empty"):
        cart.checkout(s, BASE)


def test_checkout_snapshot_and_refresh(cart, db, clock):
    s = make_session(db, clock, "s1")
    cart.add(s, P1.id, 1)
    first = cart.checkout(s, BASE)
    assert first.url == f"{BASE}/checkout/cart/{first.id}" and len(first.id) >= 32
    assert first.total_cents == P1.list_price_cents
    cart.add(s, P2.id, 1)
    second = cart.checkout(s, BASE)
    assert second.id == first.id  # one checkout per session, refreshed
    assert second.total_cents == P1.list_price_cents + P2.list_price_cents
    assert P2.name in checkout_page(cart, first.id)
    placed = cart.place_order(first.id, BUYER)
    assert placed.created and placed.order.total_cents == second.total_cents and placed.session_id == s
    assert placed.order.buyer == BUYER and placed.order.checkout_id == first.id and placed.order.deal_id is None
    with pytest.raises(Conflict, match="already been placed"):
        cart.checkout(s, BASE)


def test_page_shows_snapshot_not_later_cart_changes(cart, db, clock):
    s = make_session(db, clock, "s1")
    cart.add(s, P1.id, 1)
    co = cart.checkout(s, BASE)
    cart.add(s, P2.id, 1)  # not yet checked out again
    assert P2.name not in checkout_page(cart, co.id)
    order = cart.place_order(co.id, BUYER).order
    assert [x.item_id for x in order.lines] == [P1.id]


def test_place_order_twice_is_idempotent(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900, ("Wall dock",))
    cart.add(s, P1.id, 1, deal_id="d1")
    cart.add(s, P2.id, 2)
    co = cart.checkout(s, BASE)
    first = cart.place_order(co.id, BUYER)
    clock.advance(minutes=5)
    again = cart.place_order(co.id, Buyer("Someone Else", "else@example.com", "Elsewhere"))
    assert (first.created, again.created) == (True, False)
    order = first.order
    assert again.order == order and again.order.buyer == BUYER  # the first submission's order, as placed
    assert order.total_cents == 58900 + 2 * P2.list_price_cents
    assert line(CartView(s, order.lines, "USD"), P1.id).extras == ("Wall dock",)
    with db.read() as conn:
        assert conn.execute(select(func.count()).select_from(orders)).scalar() == 1


def test_what_follows_a_placement_commits_with_it(cart, db, clock):
    """``then`` runs in the placement's transaction, once: when it fails the order is not placed
    (the agent's session must never be left open after its order), and a repeat, which places
    nothing, does not run it."""
    s = make_session(db, clock, "s1")
    cart.add(s, P1.id, 1)
    co = cart.checkout(s, BASE)

    def fails(conn, placed):
        raise RuntimeError("the session could not be ended")

    with pytest.raises(RuntimeError):
        cart.place_order(co.id, BUYER, fails)
    with db.read() as conn:
        assert conn.execute(select(func.count()).select_from(orders)).scalar() == 0
    ran: list[str] = []

    def follows(conn, placed):
        assert conn.execute(select(orders.c.id).where(orders.c.checkout_id == co.id)).scalar() == placed.order.id
        ran.append(placed.order.id)

    first = cart.place_order(co.id, BUYER, follows)
    again = cart.place_order(co.id, BUYER, follows)
    assert ran == [first.order.id] and not again.created


def test_place_order_concurrently_creates_one(cart, db, clock):
    s = make_session(db, clock, "s1")
    cart.add(s, P1.id, 1)
    co = cart.checkout(s, BASE)
    barrier = threading.Barrier(8)
    results: list[object] = []
    lock = threading.Lock()

    def click() -> None:
        barrier.wait()
        try:
            outcome: object = cart.place_order(co.id, BUYER)
        except Exception as exc:  # noqa: BLE001
            outcome = exc
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=click) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(r, Placed) for r in results), results
    assert sum(r.created for r in results) == 1  # type: ignore[attr-defined]
    assert len({r.order.id for r in results}) == 1  # type: ignore[attr-defined]
    with db.read() as conn:
        assert conn.execute(select(func.count()).select_from(orders)).scalar() == 1


def test_unknown_checkout(cart):
    with pytest.raises(NotFound):
        checkout_page(cart, "nope")
    with pytest.raises(NotFound):
        cart.place_order("nope", BUYER)


# -- the page ----------------------------------------------------------------------------------

def test_page_shows_prices_extras_and_button_then_confirmation(cart, db, clock):
    s = make_session(db, clock, "s1")
    make_deal(db, "d1", P1.id, 58900, ("Free expedited 2-day shipping",))
    cart.add(s, P1.id, 1, deal_id="d1")
    co = cart.checkout(s, BASE)
    page = checkout_page(cart, co.id)
    assert "$589" in page and "$649.99" in page  # negotiated and list price
    assert "Free expedited 2-day shipping" in page and "negotiated" in page
    assert f'<form class=buyer method=post action="/checkout/cart/{co.id}">' in page and "Place order" in page
    order = cart.place_order(co.id, BUYER).order
    done = checkout_page(cart, co.id)
    assert order.id in done and "Order placed" in done and "Ada Lovelace" in done and "a•••@example.com" in done
    assert "<form" not in done and "$589" in done


def test_page_escapes_malicious_names_and_extras(db, clock):
    data = secret_catalog_data()
    data["products"][0]["name"] = "<script>alert('x')</script>"
    catalog = parse_catalog(data)
    svc = CartService(catalog, db, clock)
    s = make_session(db, clock, "s1")
    pid = catalog.products[0].id
    make_deal(db, "d1", pid, 50000, ("<img src=x onerror=alert(1)>",))
    svc.add(s, pid, 1, deal_id="d1")
    page = checkout_page(svc, svc.checkout(s, BASE).id)
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_hidden_fields_never_shown(db, clock):
    catalog = parse_catalog(secret_catalog_data())
    svc = CartService(catalog, db, clock)
    s = make_session(db, clock, "s1")
    for product in catalog.products[:4]:
        svc.add(s, product.id, 1)
    co = svc.checkout(s, BASE)
    order = svc.place_order(co.id, BUYER).order
    outputs = [json.dumps(svc.view(s).to_json()), json.dumps(co.to_json()), json.dumps(order.to_json()),
               checkout_page(svc, co.id)]
    for text in outputs:
        for marker in SECRET_MARKERS:
            assert marker not in text
        for product in catalog.products[:4]:
            assert product.inventory_note not in text
            for lever in product.levers:
                assert lever.text not in text
            assert format_money(product.floor_cents) not in text
            assert decimal_string(product.floor_cents) not in text
    for data in (svc.view(s).to_json(), co.to_json(), order.to_json()):
        for item in data["lines"]:
            assert set(item) == PUBLIC_LINE_KEYS


def test_refresh_racing_placement_never_orders_a_stale_snapshot(cart, db, clock):
    """Whichever of refresh and placement goes first, the order equals the checkout row and a
    refresh after placement is refused."""
    s = make_session(db, clock, "s1")
    cart.add(s, P1.id, 1)
    co = cart.checkout(s, BASE)
    cart.add(s, P2.id, 1)
    barrier = threading.Barrier(2)
    out: dict[str, object] = {}

    def run(name: str, fn) -> None:
        barrier.wait()
        try:
            out[name] = fn()
        except Exception as exc:  # noqa: BLE001
            out[name] = exc

    threads = [threading.Thread(target=run, args=("refresh", lambda: cart.checkout(s, BASE))),
               threading.Thread(target=run, args=("place", lambda: cart.place_order(co.id, BUYER)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    placed = out["place"]
    assert isinstance(placed, Placed) and placed.created
    order = placed.order
    with db.read() as conn:
        snapshot = conn.execute(select(checkouts.c.lines).where(checkouts.c.id == co.id)).scalar()
    assert [x.to_json() for x in order.lines] == json.loads(snapshot)
    if isinstance(out["refresh"], Conflict):
        assert [x.item_id for x in order.lines] == [P1.id]
    else:
        assert [x.item_id for x in order.lines] == [P1.id, P2.id]
