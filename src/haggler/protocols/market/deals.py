"""Closed deals and their confirmation (spec 003: 8. Deal Confirmation).

Whichever protocol closes a deal, the framework writes one ``deal_confirmed`` object for it and
both parties sign the same bytes (``trust.messages.deal_signing_bytes``: the deal without either
signature). A signature is accepted only when it verifies against the party's registered key
*and* the party's mandate allows confirming this deal (price, protocol, the listing's condition
and accessories, the deadline): an agent cannot commit its owner to terms the owner forbade,
even by signing.

Status: ``awaiting_signatures`` until both have signed; then ``confirmed``, unless a party's
mandate ``requiresOwnerApproval`` — then ``awaiting_owner_approval`` until that owner has signed
the same bytes with the owner's key. ``GET /market/deals/{dealId}`` serves the document that
``haggler market verify`` checks offline.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any, Mapping

from sqlalchemy import Connection, func, insert, select, update

from haggler.errors import Conflict, Forbidden
from haggler.money import to_decimal_number
from haggler.protocols.market import identity, inbox
from haggler.protocols.market.audit import AuditEvents
from haggler.protocols.market.identity import Agent, BadSignature
from haggler.protocols.market.listings import facts, listing_row, seller_floor
from haggler.protocols.market.mandates import Mandate, MandateViolation, confirm, enforce, needs_owner_approval
from haggler.protocols.market.messages import InvalidMessage
from haggler.storage.database import lock_key
from haggler.storage.rows import row_by_id
from haggler.storage.schema import market_deals, market_listings
from haggler.timestamps import utc_z
from haggler.trust.messages import Party, PARTIES, decode_hex_signature, verify_deal

AWAITING_SIGNATURES, AWAITING_APPROVAL, CONFIRMED = "awaiting_signatures", "awaiting_owner_approval", "confirmed"
#: The deals that count against a buyer's budget and a seller's quantity on hand.
COMMITTED = (AWAITING_SIGNATURES, AWAITING_APPROVAL, CONFIRMED)
VERSION = "0.1.0"
#: A double-auction deal has no listing: its ``listingId`` names the book instead.
BOOK_PREFIX = "book:"


def open_deal(conn: Connection, *, request_id: str, listing_id: str, buyer_id: str, seller_id: str, protocol: str,
              price_cents: int, currency: str, now: datetime, quantity: int = 1, shipping_cents: int = 0,
              listing: Any = None, mandates: Mapping[str, Mandate] | None = None) -> dict[str, Any]:
    """Record a deal a protocol has just closed, tell both parties, and return its summary.
    ``listing``: the listing row it closes on (its item, version and shipping go into the deal,
    and it is marked sold, so nothing else can close on it); None for a double-auction fill.
    ``mandates``: the parties' mandates when the caller has already read them (a clearing's
    many trades). The caller has checked both parties' mandates, spend included."""
    total = price_cents * quantity + shipping_cents
    deal: dict[str, Any] = {
        "type": "deal_confirmed", "version": VERSION, "timestamp": utc_z(now), "requestId": request_id,
        "listingId": listing_id, "finalPrice": to_decimal_number(price_cents), "quantity": quantity,
        "total": to_decimal_number(total), "protocol": protocol, "buyer": {"agentId": buyer_id}, "seller": {"agentId": seller_id},
    }
    if listing is not None:
        deal["listingVersion"] = listing.version
        deal["item"] = json.loads(listing.message)["item"]
    if shipping_cents:
        deal["shippingCost"] = to_decimal_number(shipping_cents)
    known = mandates or {}
    approvals_needed = [party for party, agent_id in (("buyer", buyer_id), ("seller", seller_id))
                        if needs_owner_approval(known.get(agent_id) or identity.mandate_of(conn, agent_id))]
    deal_id = "dl_" + secrets.token_hex(10)
    conn.execute(insert(market_deals).values(
        id=deal_id, request_id=request_id, listing_id=listing_id, buyer_id=buyer_id, seller_id=seller_id,
        protocol=protocol, price_cents=price_cents, quantity=quantity, total_cents=total, currency=currency,
        deal=json.dumps(deal, separators=(",", ":")), approvals="{}", needs_approval=json.dumps(approvals_needed),
        status=AWAITING_SIGNATURES, created_at=now, updated_at=now))
    if listing is not None:
        sold = conn.execute(update(market_listings).where(market_listings.c.id == listing_id,
                                                          market_listings.c.status == "live")
                            .values(status="sold", updated_at=now))
        if sold.rowcount != 1:
            raise Conflict(f"listing {listing_id} was sold meanwhile")
    summary = {"dealId": deal_id, "finalPrice": deal["finalPrice"], "total": deal["total"], "protocol": protocol,
               "requestId": request_id, "listingId": listing_id}
    inbox.notify(conn, [buyer_id, seller_id], "deal_closed", now, deal=deal, **summary)
    return summary


def lock_spend(conn: Connection, *agent_ids: str) -> None:
    """Serialize the transactions that commit these agents' money or units, so that two deals
    opening at once cannot both fit one budget. Taken before any row lock, in one sorted pass
    (a fixed order: no two transactions wait on each other)."""
    for agent_id in sorted(set(agent_ids)):
        lock_key(conn, f"market-spend:{agent_id}")


def committed(conn: Connection, agent_id: str, role: str, currency: str, *, excluding: str | None = None) -> int:
    """What the agent has committed in pending and confirmed deals: as buyer, the totals in
    ``currency`` (cents, against its ``budget``); as seller, the units (against its
    ``quantityOnHand``). ``excluding``: a deal not to count (the one being signed)."""
    column = market_deals.c.total_cents if role == "buyer" else market_deals.c.quantity
    party = market_deals.c.buyer_id if role == "buyer" else market_deals.c.seller_id
    query = select(func.coalesce(func.sum(column), 0)).where(party == agent_id, market_deals.c.status.in_(COMMITTED))
    if role == "buyer":
        query = query.where(market_deals.c.currency == currency)
    if excluding is not None:
        query = query.where(market_deals.c.id != excluding)
    return int(conn.execute(query).scalar_one())


def _deal(conn: Connection, deal_id: str, *, lock: bool = False) -> Any:
    return row_by_id(conn, market_deals, deal_id, "deal", lock=lock)


def _party_of(row: Any, party: object) -> str:
    if party not in PARTIES:
        raise InvalidMessage("/party", "must be buyer or seller")
    return row.buyer_id if party == "buyer" else row.seller_id


def _signature_body(body: object) -> tuple[Party, str]:
    if not isinstance(body, dict):
        raise InvalidMessage("", "must be a JSON object {party, signature}")
    unknown = sorted(set(body) - {"party", "signature"})
    if unknown:
        raise InvalidMessage(f"/{unknown[0]}", "unknown field; allowed: party, signature")
    if body.get("party") not in PARTIES:
        raise InvalidMessage("/party", "must be buyer or seller")
    try:
        decode_hex_signature(body.get("signature"))
    except ValueError as exc:
        raise InvalidMessage("/signature", str(exc)) from None
    return body["party"], body["signature"]


def document(row: Any, conn: Connection) -> dict[str, Any]:
    """The deal as served: the deal_confirmed with the signatures given so far, both parties'
    keys, the owners' approvals, and the status."""
    deal = json.loads(row.deal)
    for party, signature in (("buyer", row.buyer_signature), ("seller", row.seller_signature)):
        if signature is not None:
            deal[party]["signature"] = signature
    keys = {party: _agent(conn, agent_id).public_key for party, agent_id in (("buyer", row.buyer_id),
                                                                              ("seller", row.seller_id))}
    out = {"dealId": row.id, "status": row.status, "deal": deal, "publicKeys": keys,
           "needsOwnerApproval": json.loads(row.needs_approval)}
    approvals = json.loads(row.approvals)
    if approvals:
        out["ownerApprovals"] = approvals
    return out


def _agent(conn: Connection, agent_id: str) -> Agent:
    agent = identity.find(conn, agent_id)
    assert agent is not None  # a deal's parties are registered agents (foreign keys)
    return agent


def view(conn: Connection, deal_id: str, caller: Agent) -> dict[str, Any]:
    """``GET /market/deals/{dealId}``, for its two parties."""
    row = _deal(conn, deal_id)
    if caller.id not in (row.buyer_id, row.seller_id):
        raise Forbidden("only the deal's two parties see it")
    return document(row, conn)


def sign(conn: Connection, deal_id: str, body: object, audit: AuditEvents, now: datetime) -> dict[str, Any]:
    """``POST /market/deals/{dealId}/signatures`` ``{party, signature}``."""
    party, signature = _signature_body(body)
    parties = _deal(conn, deal_id)
    lock_spend(conn, parties.buyer_id, parties.seller_id)
    row = _deal(conn, deal_id, lock=True)
    agent = _agent(conn, _party_of(row, party))
    deal = json.loads(row.deal)
    deal[party]["signature"] = signature
    if not verify_deal(agent.public_key, deal, party):
        raise BadSignature(f"the signature does not verify against the {party}'s key over this deal's signing bytes",
                           agent.id, f"deal {row.id} ({party})")
    current = row.buyer_signature if party == "buyer" else row.seller_signature
    if current is not None:
        if current == signature:
            return document(row, conn)
        raise Conflict(f"the {party} has already signed this deal")
    _enforce_confirm(conn, row, party, agent, audit, now)
    conn.execute(update(market_deals).where(market_deals.c.id == row.id)
                 .values(**{f"{party}_signature": signature}, updated_at=now))
    return _settle(conn, deal_id, now)


def _enforce_confirm(conn: Connection, row: Any, party: str, agent: Agent, audit: AuditEvents, now: datetime) -> None:
    """The party's mandate in force now must allow confirming this deal (its total, the spend
    of its other pending and confirmed deals, the listing's facts); 403 (and an audit entry)
    otherwise."""
    mandate = identity.mandate_of(conn, agent.id)
    condition: str | None = None
    accessories: tuple[str, ...] | None = None
    if not row.listing_id.startswith(BOOK_PREFIX):
        listing = listing_row(conn, row.listing_id, now, live=False)
        condition, accessories = facts(listing)
        if party == "seller":
            mandate = seller_floor(mandate, listing.floor_cents)
    action = confirm(agent.id, row.price_cents, row.currency, now, protocol=row.protocol, condition=condition,
                     accessories=accessories, quantity=row.quantity,
                     shipping=row.total_cents - row.price_cents * row.quantity)
    try:
        enforce(mandate, party, action, spent=committed(conn, agent.id, party, row.currency, excluding=row.id))
    except MandateViolation as exc:
        audit.violation(agent.id, "confirm", exc.constraint, dealId=row.id)
        raise


def approve(conn: Connection, deal_id: str, body: object, now: datetime) -> dict[str, Any]:
    """``POST /market/deals/{dealId}/approvals`` ``{party, signature}``: the owner's signature
    (with the owner's key) over the deal's signing bytes, for a mandate that requires it."""
    party, signature = _signature_body(body)
    row = _deal(conn, deal_id, lock=True)
    agent = _agent(conn, _party_of(row, party))
    if party not in json.loads(row.needs_approval):
        raise Conflict(f"the {party}'s mandate does not ask for the owner's approval")
    deal = json.loads(row.deal)
    deal[party]["signature"] = signature
    if not verify_deal(agent.owner_public_key, deal, party):
        raise BadSignature(f"the approval does not verify against the {party}'s owner key over this deal", agent.id,
                           f"owner approval of deal {row.id} ({party})")
    approvals = json.loads(row.approvals)
    approvals[party] = {"publicKey": agent.owner_public_key, "signature": signature}
    conn.execute(update(market_deals).where(market_deals.c.id == row.id)
                 .values(approvals=json.dumps(approvals), updated_at=now))
    return _settle(conn, deal_id, now)


def _settle(conn: Connection, deal_id: str, now: datetime) -> dict[str, Any]:
    row = _deal(conn, deal_id)
    status = row.status
    if row.buyer_signature and row.seller_signature:
        missing = set(json.loads(row.needs_approval)) - set(json.loads(row.approvals))
        status = AWAITING_APPROVAL if missing else CONFIRMED
    if status != row.status:
        conn.execute(update(market_deals).where(market_deals.c.id == row.id).values(status=status, updated_at=now))
        row = _deal(conn, deal_id)
        if status == CONFIRMED:
            inbox.notify(conn, [row.buyer_id, row.seller_id], "deal_confirmed", now, dealId=row.id)
    return document(row, conn)

