"""The double auction's clearing core (spec 003: Protocol 4: Double Auction): one uniform price
at the largest volume, the k = 0.5 rule, price-then-time priority, and a book with add and cancel.
The fast clearing is checked against the reference in ``tests/support/auction_reference.py``."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haggler.errors import Conflict, InvalidInput, NotFound
from haggler.protocols.market.auction import Clearing, Order, OrderBook, Side, clear
from tests.support.auction_reference import reference_clear


def book_of(*orders: tuple[str, str, int, int]) -> OrderBook:
    book = OrderBook()
    for order in orders:
        book.add(*order)
    return book


# -- examples -------------------------------------------------------------------------------------


def test_textbook_book_clears_at_the_midpoint_of_the_marginal_pair() -> None:
    """spec 003: Protocol 4: Double Auction — the most volume, at the midpoint of the lowest
    executed bid and the highest executed ask; fills in price then time priority."""
    book = book_of(("b1", "buy", 1050, 3), ("b2", "buy", 1000, 2), ("b3", "buy", 900, 5),
                   ("s1", "sell", 950, 2), ("s2", "sell", 980, 2), ("s3", "sell", 1100, 4))
    result = clear(book)
    assert result.volume == 4
    assert (result.marginal_buy, result.marginal_sell, result.price) == (1000, 980, 990)
    assert result.trades == (("b1", "s1", 2, 990), ("b1", "s2", 1, 990), ("b2", "s2", 1, 990))


def test_half_a_cent_rounds_up() -> None:
    """spec 003: Protocol 4: Double Auction — a one-cent spread clears at the buy limit (half a
    cent to the seller, as the sealed-bid midpoint)."""
    assert clear(book_of(("b", "buy", 101, 1), ("s", "sell", 100, 1))).price == 101
    assert clear(book_of(("b", "buy", 102, 1), ("s", "sell", 100, 1))).price == 101


def test_time_priority_within_a_price_and_partial_fill_keeps_its_remainder() -> None:
    """spec 003: Protocol 4: Double Auction — the earlier order at a price fills first; the
    unfilled remainder stays in the book with its place in the queue."""
    book = book_of(("early", "buy", 500, 2), ("late", "buy", 500, 2), ("s", "sell", 400, 3))
    result = clear(book)
    assert result.trades == (("early", "s", 2, 450), ("late", "s", 1, 450))
    book.apply(result)
    assert [(o.id, o.quantity) for o in book.orders()] == [("late", 1)]
    assert book.get("late").seq == 1
    assert clear(book) == Clearing(None, 0, ())


@pytest.mark.parametrize("orders", [
    (),
    (("b", "buy", 500, 1),),
    (("s", "sell", 500, 1),),
    (("b", "buy", 499, 1), ("s", "sell", 500, 1)),
])
def test_nothing_trades_without_two_crossing_sides(orders) -> None:
    """spec 003: Protocol 4: Double Auction — an empty side or no overlap clears nothing."""
    assert clear(book_of(*orders)) == Clearing(None, 0, ())


def test_clear_is_pure_and_takes_a_plain_list() -> None:
    """spec 003: Protocol 4: Double Auction — clearing does not change the book; a list of orders
    with their arrival sequences clears the same as the book holding them."""
    book = book_of(("b1", "buy", 700, 4), ("s1", "sell", 600, 1), ("s2", "sell", 650, 5))
    before = list(book.orders())
    first = clear(book)
    assert list(book.orders()) == before and clear(book) == first
    assert clear(list(reversed(before))) == first


def test_cancel_and_errors() -> None:
    """spec 003: Protocol 4: Double Auction — cancel by id; an unknown id, a repeated id or a
    malformed order is an error, never silently ignored."""
    book = book_of(("b", "buy", 500, 1), ("s", "sell", 400, 1))
    assert book.cancel("b").id == "b"
    assert "b" not in book and clear(book).volume == 0
    with pytest.raises(NotFound, match="'b'"):
        book.cancel("b")
    with pytest.raises(NotFound):
        book.cancel("nobody")
    with pytest.raises(Conflict):
        book.add("s", "sell", 400, 1)
    for bad in [("x", "hold", 1, 1), ("x", "buy", -1, 1), ("x", "buy", 1.5, 1), ("x", "buy", True, 1),
                ("x", "buy", 1, 0), ("", "buy", 1, 1)]:
        with pytest.raises(InvalidInput):
            book.add(*bad)
    with pytest.raises(InvalidInput):
        clear([Order("a", Side.BUY, 1, 1, 0), Order("b", Side.SELL, 1, 1, 0)])
    with pytest.raises(Conflict):
        clear([Order("a", Side.BUY, 1, 1, 0), Order("a", Side.SELL, 1, 1, 1)])
    with pytest.raises(NotFound):
        book.apply(Clearing(1, 1, (("ghost", "s", 1, 1),)))
    assert [o.id for o in book.orders()] == ["s"]  # a failed apply changed nothing


# -- against the reference, on random books -------------------------------------------------------

# Narrow prices and small quantities, so equal prices, partial fills and exact ties are common.
add_op = st.tuples(st.just("add"), st.sampled_from(["buy", "sell"]), st.integers(95, 105), st.integers(1, 5))
cancel_op = st.tuples(st.just("cancel"), st.integers(0, 200))
ops_strategy = st.lists(st.one_of(add_op, add_op, cancel_op), max_size=60)


def build(ops) -> OrderBook:
    book, live, n = OrderBook(), [], 0
    for op in ops:
        if op[0] == "add":
            book.add(f"o{n}", op[1], op[2], op[3])
            live.append(f"o{n}")
            n += 1
        elif live:
            book.cancel(live.pop(op[1] % len(live)))
    return book


def check_invariants(book: OrderBook, result: Clearing) -> None:
    orders = {o.id: o for o in book.orders()}
    filled: Counter[str] = Counter()
    for buy_id, sell_id, quantity, price in result.trades:
        buy, sell = orders[buy_id], orders[sell_id]
        assert buy.side == "buy" and sell.side == "sell" and quantity > 0
        assert price == result.price
        assert sell.price <= price <= buy.price
        filled[buy.id] += quantity
        filled[sell.id] += quantity
    assert all(filled[i] <= orders[i].quantity for i in filled)
    assert sum(t[2] for t in result.trades) == result.volume
    if result.volume:
        assert result.marginal_sell <= result.price <= result.marginal_buy
        assert result.price - result.marginal_sell - (result.marginal_buy - result.price) in (0, 1)
    # Priority: an order with any fill is ahead of every order of its side left with a remainder.
    for side, better in (("buy", lambda a, b: (-a.price, a.seq) < (-b.price, b.seq)),
                         ("sell", lambda a, b: (a.price, a.seq) < (b.price, b.seq))):
        rest = [o for o in orders.values() if o.side == side and filled[o.id] < o.quantity]
        for o in orders.values():
            if o.side == side and filled[o.id]:
                assert all(better(o, r) or o is r for r in rest)
    # After the fills, what remains no longer crosses.
    book.apply(result)
    bids = [o.price for o in book.orders() if o.side == "buy"]
    asks = [o.price for o in book.orders() if o.side == "sell"]
    assert not bids or not asks or max(bids) < min(asks)
    assert all(book.get(i).quantity == orders[i].quantity - filled[i] for i in orders if i in book)
    assert all(filled[i] == orders[i].quantity for i in orders if i not in book)


@settings(max_examples=400, deadline=None)
@given(ops_strategy)
def test_fast_clearing_equals_the_reference_and_keeps_the_invariants(ops) -> None:
    """spec 003: Protocol 4: Double Auction — on random books (cancels, equal prices, partial
    quantities, empty sides, no overlap) the fast clearing gives the reference's volume, price and
    trades, every trade at the uniform price within both limits, in price-then-time priority."""
    book = build(ops)
    result = clear(book)
    price, volume, trades = reference_clear(book.orders())
    assert (result.price, result.volume, list(result.trades)) == (price, volume, trades)
    assert clear(list(book.orders())) == result
    check_invariants(book, result)


@settings(max_examples=100, deadline=None)
@given(ops_strategy, ops_strategy)
def test_repeated_calls_after_apply_stay_equal_to_the_reference(first, second) -> None:
    """spec 003: Protocol 4: Double Auction — remainders left by one call clear correctly in the
    next, with new orders arriving in between."""
    book = build(first)
    book.apply(clear(book))
    n = len(first)
    for i, op in enumerate(second):
        if op[0] == "add":
            book.add(f"n{n + i}", op[1], op[2], op[3])
    result = clear(book)
    assert (result.price, result.volume, list(result.trades)) == reference_clear(book.orders())
