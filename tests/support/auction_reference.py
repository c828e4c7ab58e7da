"""A reference call auction (spec 003: Protocol 4: Double Auction), written to be obviously
correct rather than fast: try every limit price as a candidate, keep the largest volume, fill each
side unit by unit in price-then-time priority, and pair the units. The fast clearing in
``haggler.protocols.market.auction`` must agree with it exactly (volume, price and trades); the
tests and ``benchmarks/auction_speed.py`` check that.

It is O(distinct prices × orders + units): fine for the tests' small books and for a 10k-order
book in the benchmark, hopeless beyond."""

from __future__ import annotations

from collections.abc import Iterable

from haggler.protocols.market.auction import Order, Trade


def reference_clear(orders: Iterable[Order]) -> tuple[int | None, int, list[Trade]]:
    """(price, volume, trades) of a call auction over ``orders``; (None, 0, []) when nothing trades."""
    orders = list(orders)
    buys = [o for o in orders if o.side == "buy"]
    sells = [o for o in orders if o.side == "sell"]

    # 1. Volume: at each candidate price p, demand is what buyers with limit >= p want and supply
    # what sellers with limit <= p offer; p trades the smaller. The best p trades the most.
    volume = 0
    for p in sorted({o.price for o in orders}):
        demand = sum(o.quantity for o in buys if o.price >= p)
        supply = sum(o.quantity for o in sells if o.price <= p)
        volume = max(volume, min(demand, supply))
    if volume == 0:
        return None, 0, []

    # 2. Who trades: one entry per unit, best price first, earlier arrival first within a price.
    buy_units = [o for o in sorted(buys, key=lambda o: (-o.price, o.seq)) for _ in range(o.quantity)][:volume]
    sell_units = [o for o in sorted(sells, key=lambda o: (o.price, o.seq)) for _ in range(o.quantity)][:volume]

    # 3. Price: midpoint of the marginal pair (the last unit of each side), half a cent up.
    price = (buy_units[-1].price + sell_units[-1].price + 1) // 2

    # 4. Trades: pair the units in order; a run of the same (buy, sell) pair is one trade.
    trades: list[Trade] = []
    for buyer, seller in zip(buy_units, sell_units):
        if trades and trades[-1][:2] == (buyer.id, seller.id):
            trades[-1] = (buyer.id, seller.id, trades[-1][2] + 1, price)
        else:
            trades.append((buyer.id, seller.id, 1, price))
    return price, volume, trades
