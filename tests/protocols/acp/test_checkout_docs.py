"""docs/checkout.md's worked examples, run verbatim against a live store: a deal haggled in chat
and paid through UCP, then another through ACP, on the demo catalog alone (its own shipping)."""

from __future__ import annotations

from sqlalchemy import select

from haggler.protocols.acp.settings import AcpSettings
from haggler.protocols.ucp.settings import UcpSettings
from haggler.storage.schema import deals, orders

try:
    from tests.support.acp import KEY
    from tests.support.docs import fenced_blocks, run_exchanges
    from tests.support.ucp import SECRET
except ImportError:  # pragma: no cover
    from support.acp import KEY  # type: ignore[no-redef]
    from support.docs import fenced_blocks, run_exchanges  # type: ignore[no-redef]
    from support.ucp import SECRET  # type: ignore[no-redef]


def test_the_worked_examples_run_verbatim_and_each_deal_is_paid_at_its_price(make_store):
    store = make_store(ucp=UcpSettings(simulation_secret=SECRET), acp=AcpSettings(api_key=KEY))
    blocks = fenced_blocks("checkout.md", "http")
    assert len(blocks) == 11, "two worked examples: chat then UCP (5 exchanges), chat then ACP (6)"
    values = run_exchanges(store.http, blocks, {"acp_key": KEY})
    with store.app.state.ucp.db.read() as conn:
        found = {d.id: d for d in conn.execute(select(deals))}
        placed = {o.id: o for o in conn.execute(select(orders))}
    for deal_name, order_name, door in (("deal", "ucp_order", "ucp"), ("deal2", "acp_order", "acp")):
        deal, order = found[values[deal_name]], placed[values[order_name]]
        assert (order.door, order.deal_id) == (door, deal.id)
        assert order.total_cents == deal.price_cents  # free shipping: exactly the agreed price
        assert deal.price_cents < 64999
