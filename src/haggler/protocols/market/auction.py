"""The clearing core of spec 003's double auction ("Protocol 4: Double Auction"): a call auction.

Buyers and sellers leave limit orders in an :class:`OrderBook`; :func:`clear` then computes one
market-clearing price and the trades at it, all at once ("all compatible deals close
simultaneously"). Pure: no I/O, no clock, no randomness — the same book always clears the same way.

The rules, in order:

1. **Volume.** The traded volume is the largest possible: the highest bids are matched against the
   lowest asks for as long as a bid's limit is at least the ask's. That is the most any single
   price can trade (``max_p min(demand(p), supply(p))``), so no other price would trade more.
2. **Price (the k = 0.5 rule).** Every price between the *marginal pair* — the highest executed
   sell limit ``s`` and the lowest executed buy limit ``b`` (``s <= b``) — trades that volume and
   respects every executed order's limit, so volume alone does not fix the price. The auction takes
   their midpoint ``(b + s) / 2`` in integer cents; **half a cent rounds up** (to the seller), the
   rule of the sealed-bid midpoint (``haggler.protocols.market.pricing.midpoint_cents``), so a one-cent spread
   clears at the buy limit ``b``. Both limits are fixed by the volume, so the price is determined by
   the book alone: this is the documented tie-break among the prices of equal (maximal) volume.
3. **Who trades.** Price priority, then time priority (the arrival sequence): buys from the highest
   limit down, sells from the lowest up, each side filled in that order until the volume is used;
   only the last executed order of a side can be filled partly.
4. **Trades.** The executed buys, in priority order, are paired with the executed sells, in
   priority order, quantity by quantity; each maximal run of one buy against one sell is one
   trade ``(buy_id, sell_id, quantity, price)``. Every trade is at the uniform price, so no buyer
   pays above its limit and no seller receives below its limit.

Unfilled quantity stays in the book: :meth:`OrderBook.apply` removes what a clearing filled.

Why price levels: the book keeps each side as ``price -> {order id: quantity}`` (a dict keeps
arrival order, which is time priority) plus each level's total. Clearing then sorts the *distinct
prices* (a few thousand cents, not a million orders), finds the volume and the marginal pair from
the level totals, and walks only the executed orders to write the trades — no per-order sort, so
pure Python clears a million-order book well inside a second, and a cancel is O(1).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from itertools import chain
from typing import NamedTuple

from haggler.errors import Conflict, InvalidInput, NotFound
from haggler.protocols.market.pricing import midpoint_cents


class Side(StrEnum):
    BUY = "buy"
    SELL = "sell"


class Order(NamedTuple):
    """A limit order: buy up to (or sell down to) ``price`` cents each, ``quantity`` units.
    ``seq`` is its arrival sequence — lower arrived earlier and has time priority."""

    id: str
    side: Side
    price: int
    quantity: int
    seq: int


#: One fill: ``(buy_id, sell_id, quantity, price)`` — ``quantity`` units from the seller to the
#: buyer at ``price`` cents each. A plain tuple, not a NamedTuple, on purpose: CPython's garbage
#: collector stops tracking an exact tuple of str and int after one pass but walks a tuple
#: subclass on every full collection, and a million-order clearing makes ~400k trades — as
#: NamedTuples the collector took 70% of the call (0.65 s against 0.18 s on the 2-core VM).
Trade = tuple[str, str, int, int]


@dataclass(frozen=True, slots=True)
class Clearing:
    """The outcome of one call. ``price`` is None when nothing trades (a side is empty or the
    best bid is below the best ask); ``marginal_buy``/``marginal_sell`` are the limits of the
    marginal pair the price is the midpoint of (None likewise)."""

    price: int | None
    volume: int
    trades: tuple[Trade, ...]
    marginal_buy: int | None = None
    marginal_sell: int | None = None


_SIDES = {"buy": Side.BUY, "sell": Side.SELL}  # str or Side -> Side, without Enum's slow call


def _check(order_id: object, side: object, price: object, quantity: object) -> None:
    """Raise InvalidInput naming what is wrong with an order (the slow path of :meth:`OrderBook.add`)."""
    if not isinstance(order_id, str) or not order_id:
        raise InvalidInput("an order id must be a non-empty string")
    if not isinstance(side, str) or side not in _SIDES:
        raise InvalidInput(f"order {order_id!r}: side must be 'buy' or 'sell'")
    if type(price) is not int or price < 0:  # bool is not a price; floats would round
        raise InvalidInput(f"order {order_id!r}: price must be a non-negative integer of cents")
    if type(quantity) is not int or quantity <= 0:
        raise InvalidInput(f"order {order_id!r}: quantity must be a positive integer")


class OrderBook:
    """The resting orders of one market, by price level. Orders get their arrival sequence
    from the book (``seq`` counts up from 0), so time priority is the order of :meth:`add` calls.

    Why no Order objects inside: a million resting NamedTuples are a million objects the cyclic
    garbage collector walks on every full collection (it doubled the time of a 1M-order clearing).
    The book keeps only str/int/bool containers, which CPython stops tracking, and builds an
    :class:`Order` when asked for one."""

    __slots__ = ("_where", "_bids", "_asks", "_bid_totals", "_ask_totals", "_next_seq")

    def __init__(self) -> None:
        # id -> (price, seq, is_buy), in arrival order; the quantity lives only in the level.
        self._where: dict[str, tuple[int, int, bool]] = {}
        # price -> {order id: remaining quantity}, in arrival order; and price -> sum of those.
        self._bids: dict[int, dict[str, int]] = {}
        self._asks: dict[int, dict[str, int]] = {}
        self._bid_totals: dict[int, int] = {}
        self._ask_totals: dict[int, int] = {}
        self._next_seq = 0

    def __len__(self) -> int:
        return len(self._where)

    def __contains__(self, order_id: object) -> bool:
        return order_id in self._where

    def _order(self, order_id: str, where: tuple[int, int, bool]) -> Order:
        price, seq, is_buy = where
        side, levels = (Side.BUY, self._bids) if is_buy else (Side.SELL, self._asks)
        return Order(order_id, side, price, levels[price][order_id], seq)

    def get(self, order_id: str) -> Order:
        """The order as it rests now (its remaining quantity). NotFound if it is not in the book."""
        where = self._where.get(order_id)
        if where is None:
            raise NotFound(f"no order {order_id!r} in the book")
        return self._order(order_id, where)

    def orders(self) -> Iterator[Order]:
        """The resting orders, in arrival order."""
        return (self._order(order_id, where) for order_id, where in self._where.items())

    def add(self, order_id: str, side: Side | str, price: int, quantity: int) -> Order:
        """Rest a new limit order; Conflict if the id is already in the book."""
        try:
            side = _SIDES[side]  # type: ignore[index]
        except (KeyError, TypeError):
            _check(order_id, side, price, quantity)
        if type(order_id) is not str or not order_id or type(price) is not int or price < 0 \
                or type(quantity) is not int or quantity <= 0:
            _check(order_id, side, price, quantity)
        if order_id in self._where:
            raise Conflict(f"order {order_id!r} is already in the book")
        seq = self._next_seq
        self._next_seq = seq + 1
        self._rest(order_id, side is Side.BUY, price, quantity, seq)
        return Order(order_id, side, price, quantity, seq)  # type: ignore[arg-type]

    def _rest(self, order_id: str, is_buy: bool, price: int, quantity: int, seq: int) -> None:
        self._where[order_id] = (price, seq, is_buy)
        levels, totals = (self._bids, self._bid_totals) if is_buy else (self._asks, self._ask_totals)
        level = levels.get(price)
        if level is None:
            levels[price] = {order_id: quantity}
            totals[price] = quantity
        else:
            level[order_id] = quantity
            totals[price] += quantity

    def cancel(self, order_id: str) -> Order:
        """Take an order (what remains of it) out of the book and return it; NotFound if it is not
        there — never a silent no-op, so a client learns that its order already filled or never was."""
        order = self.get(order_id)
        del self._where[order_id]
        self._reduce(order_id, order.side is Side.BUY, order.price, order.quantity)
        return order

    def _reduce(self, order_id: str, is_buy: bool, price: int, quantity: int) -> int:
        """Take ``quantity`` of an order off its level; return what is left of it (the caller
        drops it from ``_where`` at 0)."""
        levels, totals = (self._bids, self._bid_totals) if is_buy else (self._asks, self._ask_totals)
        level = levels[price]
        left = level[order_id] - quantity
        if left:
            level[order_id] = left
        else:
            del level[order_id]
        if level:
            totals[price] -= quantity
        else:
            del levels[price], totals[price]
        return left

    def apply(self, clearing: Clearing) -> None:
        """Remove what ``clearing`` filled: filled orders leave the book, a partly filled one keeps
        its remainder with its time priority. All or nothing: NotFound (and the book unchanged)
        if a trade names an order not in the book or fills more than rests."""
        filled: dict[str, int] = {}
        for buy_id, sell_id, quantity, _ in clearing.trades:
            filled[buy_id] = filled.get(buy_id, 0) + quantity
            filled[sell_id] = filled.get(sell_id, 0) + quantity
        for order_id, quantity in filled.items():
            where = self._where.get(order_id)
            if where is None or self._order(order_id, where).quantity < quantity:
                raise NotFound(f"the clearing fills {quantity} of order {order_id!r}, which the book does not hold")
        for order_id, quantity in filled.items():
            price, _, is_buy = self._where[order_id]
            if not self._reduce(order_id, is_buy, price, quantity):
                del self._where[order_id]

    @classmethod
    def of(cls, orders: Iterable[Order]) -> OrderBook:
        """A book holding ``orders`` with their own arrival sequences (for :func:`clear` on a plain
        list). InvalidInput for a bad order or a repeated arrival sequence, Conflict for a repeated id."""
        book = cls()
        ordered = list(orders)
        for order in ordered:
            _check(order.id, order.side, order.price, order.quantity)
            if type(order.seq) is not int:
                raise InvalidInput(f"order {order.id!r}: the arrival sequence must be an integer")
        ordered.sort(key=lambda o: o.seq)
        last = None
        for order_id, side, price, quantity, seq in ordered:
            if seq == last:
                raise InvalidInput(f"order {order_id!r}: arrival sequences must be distinct")
            if order_id in book._where:
                raise Conflict(f"order id {order_id!r} appears twice")
            last = seq
            book._rest(order_id, side == "buy", price, quantity, seq)
        book._next_seq = last + 1 if last is not None else 0
        return book


def clear(book: OrderBook | Iterable[Order]) -> Clearing:
    """Clear a call auction over ``book`` (an :class:`OrderBook`, or orders with their arrival
    sequences) by the rules in the module docstring. Does not change the book: pass the result to
    :meth:`OrderBook.apply` to take the filled quantity out."""
    if not isinstance(book, OrderBook):
        book = OrderBook.of(book)
    bid_prices = sorted(book._bid_totals, reverse=True)
    ask_prices = sorted(book._ask_totals)
    if not bid_prices or not ask_prices or bid_prices[0] < ask_prices[0]:
        return Clearing(None, 0, ())

    # Volume and the marginal pair, from level totals: match the best bid level against the best
    # ask level while they cross; the last levels touched hold the marginal pair.
    bid_totals, ask_totals = book._bid_totals, book._ask_totals
    i = j = volume = 0
    bid_left, ask_left = bid_totals[bid_prices[0]], ask_totals[ask_prices[0]]
    while True:
        traded = min(bid_left, ask_left)
        volume += traded
        bid_left -= traded
        ask_left -= traded
        last_i, last_j = i, j
        if not bid_left:
            i += 1
            if i == len(bid_prices):
                break
            bid_left = bid_totals[bid_prices[i]]
        if not ask_left:
            j += 1
            if j == len(ask_prices):
                break
            ask_left = ask_totals[ask_prices[j]]
        if bid_prices[i] < ask_prices[j]:
            break
    marginal_buy, marginal_sell = bid_prices[last_i], ask_prices[last_j]
    price = midpoint_cents(marginal_buy, marginal_sell)  # half a cent rounds up, as the sealed-bid midpoint

    # Trades: the executed orders of each side in priority order, paired quantity by quantity.
    buys = chain.from_iterable(book._bids[p].items() for p in bid_prices[: last_i + 1])
    sells = chain.from_iterable(book._asks[p].items() for p in ask_prices[: last_j + 1])
    trades: list[Trade] = []
    append = trades.append
    buy_id, buy_left = next(buys)
    sell_id, sell_left = next(sells)
    left = volume
    while True:
        # Each step fills as much as the current buy, the current sell and the volume allow.
        quantity = buy_left if buy_left < sell_left else sell_left
        if left <= quantity:
            append((buy_id, sell_id, left, price))
            break
        append((buy_id, sell_id, quantity, price))
        left -= quantity
        buy_left -= quantity
        sell_left -= quantity
        if not buy_left:
            buy_id, buy_left = next(buys)
        if not sell_left:
            sell_id, sell_left = next(sells)
    return Clearing(price, volume, tuple(trades), marginal_buy, marginal_sell)
