"""The market's inbox, delivered over Matrix: what makes one market of two doors.

Everything the market tells an agent — a counterpart's message, an introduction to a fitting
listing or wanted ad, a deal to sign, a deal confirmed — is an inbox delivery
(``protocols/market/inbox.py``), whichever door caused it. The relay reads every new delivery in
order (one cursor, kept in ``matrix_state``), and for each agent bound to a Matrix user posts it
to that agent's **inbox room** with the bot (``inbox:<agentId>``: the room it registered in, or
one the bot makes and invites it to). So an agent on Matrix hears of an offer made over HTTP,
and the reverse needs nothing: HTTP agents read the same inbox.

Two deliveries also reach shared rooms:

* a contact request between two agents that are both on Matrix opens their **negotiation room**
  (``request:<requestId>``: the buyer, the seller and the bot, which holds the room's power, so it
  can redact a sealed bid sent there by mistake);
* a confirmed deal is posted, with both signatures and both public keys (what
  ``haggler market verify`` checks), to that room and to the market room, once, when either party
  is on Matrix.

Reading the deliveries, writing what they owe to the outbox and moving the cursor happen in one
transaction, so a crash repeats none and skips none.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select

from haggler.matrix import store, wire
from haggler.protocols.market import deals
from haggler.storage.schema import market_agents, market_deals, market_inbox, market_requests

#: Deliveries read per transaction.
BATCH = 200


def relay(conn: Connection, bot: str, market_room: str, now: datetime, *, batch: int = BATCH) -> int:
    """Relay the deliveries after the bot's cursor (at most ``batch``); returns how many it read."""
    after = store.state(conn, bot, now).inbox_seq
    rows = conn.execute(select(market_inbox, market_agents.c.matrix_id)
                        .join(market_agents, market_agents.c.id == market_inbox.c.agent_id)
                        .where(market_inbox.c.seq > after).order_by(market_inbox.c.seq).limit(batch)).all()
    for row in rows:
        body = json.loads(row.body)
        if row.matrix_id:
            store.enqueue(conn, bot, f"inbox:{row.agent_id}", wire.notice(
                _line(row.kind, body), **{wire.INBOX_KEY: wire.carry({"cursor": row.seq, "kind": row.kind, "body": body})}),
                now, invite=[row.matrix_id])
        if row.kind == "message" and body.get("type") == "contact_request":
            _open_negotiation(conn, bot, body, now)
        elif body.get("event") == "deal_confirmed":
            _post_deal(conn, bot, market_room, row.agent_id, body.get("dealId"), now)
    if rows:
        store.advance_inbox(conn, bot, rows[-1].seq, now)
    return len(rows)


def _open_negotiation(conn: Connection, bot: str, message: dict[str, Any], now: datetime) -> None:
    """The negotiation room of a contact request between two agents on Matrix, opened by posting
    the request in it (the room is made, inviting both, when the outbox first sends to it)."""
    request = conn.execute(select(market_requests).where(market_requests.c.id == message.get("requestId"))).first()
    if request is None:
        return
    users = _matrix_ids(conn, request.buyer_id, request.seller_id)
    if len(users) == 2:
        store.enqueue(conn, bot, f"request:{request.id}", wire.market_content(
            message, f"contact request {request.id} from {request.buyer_id} to {request.seller_id} about listing "
                     f"{request.listing_id}, by {message.get('protocol')}"), now, invite=users)


def _post_deal(conn: Connection, bot: str, market_room: str, agent_id: str, deal_id: object, now: datetime) -> None:
    """Post a confirmed deal once (on the buyer's delivery; each party gets one) where it is seen."""
    row = conn.execute(select(market_deals).where(market_deals.c.id == deal_id)).first()
    users = _matrix_ids(conn, row.buyer_id, row.seller_id) if row is not None else []
    if row is None or agent_id != row.buyer_id or not users:
        return
    document = deals.document(row, conn)
    content = wire.notice(f"deal {row.id} confirmed: {row.buyer_id} buys from {row.seller_id} at "
                          f"{document['deal']['finalPrice']} {row.currency}, signed by both",
                          **{f"{wire.CONTENT_KEY}.deal": wire.carry(document)})
    negotiated = conn.execute(select(market_requests.c.id).where(market_requests.c.id == row.request_id)).first()
    if negotiated is not None and len(users) == 2:
        store.enqueue(conn, bot, f"request:{row.request_id}", content, now, invite=users)
    store.enqueue(conn, bot, market_room, content, now)


def _matrix_ids(conn: Connection, *agent_ids: str) -> list[str]:
    return [matrix_id for matrix_id in conn.execute(select(market_agents.c.matrix_id)
                                                    .where(market_agents.c.id.in_(agent_ids))).scalars() if matrix_id]


def _line(kind: str, body: dict[str, Any]) -> str:
    """One line for people reading an inbox room."""
    if kind == "message":
        return f"{body.get('type', 'message')} for request {body.get('requestId', '?')}"
    facts = ", ".join(f"{key} {body[key]}" for key in ("dealId", "requestId", "listingId", "wantedId", "reason")
                      if isinstance(body.get(key), str))
    return f"{body.get('event', 'notice')}{': ' + facts if facts else ''}"
