"""Closed deals and their confirmation (spec 003: 8. Deal Confirmation).

Whichever protocol closes a deal, the framework writes one ``deal_confirmed`` object for it and
both parties sign the same bytes (``trust.messages.deal_signing_bytes``: the deal without either
signature). A signature is accepted only when it verifies against the party's registered key
*and* the party's mandate allows confirming this deal (price, protocol, the listing's condition
and accessories, the deadline): an agent cannot commit its owner to terms the owner forbade,
even by signing.

Status: ``awaiting_signatures`` until both have signed; then ``confirmed``, unless a party's
mandate in force ``requiresOwnerApproval`` — then ``awaiting_owner_approval`` until that owner
has signed the same bytes with the owner's key. The mandate is read again whenever a signature
or an approval lands, not only when the deal opened: an owner who asks for approval later gets
it, and the list of parties that need it only grows. ``GET /market/deals/{dealId}`` serves the
document that ``haggler market verify`` checks offline.

Nothing waits forever: a deal still pending (awaiting signatures or approval) at its
``expires_at`` ends ``expired``; a party that has not signed may end it ``cancelled``; and other
code ends one ``void`` when a newer mandate no longer allows it. Every end goes through
:func:`end_deal`: the listing is released, the request failed, both parties told. Expiry is one
code path, :func:`expire_if_due`, whether a read, an action or the sweep reaches the deal first.
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any, Callable, Mapping

from sqlalchemy import Connection, and_, bindparam, func, insert, or_, select, update

from haggler.errors import Conflict, Forbidden
from haggler.money import to_decimal_number
from haggler.protocols.market import identity, inbox
from haggler.protocols.market.audit import AuditEvents
from haggler.protocols.market.identity import Agent, BadSignature
from haggler.protocols.market.listings import facts, listing_row, seller_floor
from haggler.protocols.market.mandates import (
    Mandate,
    MandateViolation,
    confirm,
    enforce,
    needs_owner_approval,
    reads_spend,
)
from haggler.protocols.market.messages import InvalidMessage
from haggler.storage.database import lock_key
from haggler.storage.prepared import Prepared
from haggler.storage.rows import find_by_id, row_by_id, update_by_id
from haggler.storage.schema import market_deals, market_listings, market_requests
from haggler.timestamps import utc_z
from haggler.trust.messages import Party, PARTIES, decode_hex_signature, verify_deal

AWAITING_SIGNATURES, AWAITING_APPROVAL, CONFIRMED = "awaiting_signatures", "awaiting_owner_approval", "confirmed"
EXPIRED, CANCELLED, VOID = "expired", "cancelled", "void"
#: A deal's statuses, in the order of its life: pending, then confirmed or ended.
STATUSES = (AWAITING_SIGNATURES, AWAITING_APPROVAL, CONFIRMED, EXPIRED, CANCELLED, VOID)
#: The statuses a deal can still leave: the ones that expire, and hold a listing sold.
PENDING = (AWAITING_SIGNATURES, AWAITING_APPROVAL)
#: How many due deals one sweep transaction expires.
EXPIRY_BATCH = 100
VERSION = "0.1.0"
#: A double-auction deal has no listing: its ``listingId`` names the book instead.
BOOK_PREFIX = "book:"
#: The protocol of a double-auction deal (told by its protocol, never by its ``listingId``: a
#: seller may name a listing ``book:…`` too).
AUCTION = "double_auction"


def open_deal(conn: Connection, *, request_id: str, listing_id: str, buyer_id: str, seller_id: str, protocol: str,
              price_cents: int, currency: str, now: datetime, expires_at: datetime, quantity: int = 1,
              shipping_cents: int = 0, listing: Any = None,
              mandates: Mapping[str, Mandate] | None = None) -> dict[str, Any]:
    """Record a deal a protocol has just closed, tell both parties, and return its summary.
    ``listing``: the listing row it closes on (its item, version and shipping go into the deal,
    and it is marked sold, so nothing else can close on it); None for a double-auction fill.
    ``mandates``: the parties' mandates when the caller has already read them (a clearing's
    many trades). ``expires_at``: when the deal ends ``expired`` if it is still pending then.
    The caller has checked both parties' mandates, spend included."""
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
    _INSERT_DEAL.run(conn, {
        "id": deal_id, "request_id": request_id, "listing_id": listing_id, "buyer_id": buyer_id,
        "seller_id": seller_id, "protocol": protocol, "price_cents": price_cents, "quantity": quantity,
        "total_cents": total, "currency": currency, "deal": json.dumps(deal, separators=(",", ":")),
        "buyer_signature": None, "seller_signature": None, "approvals": "{}",
        "needs_approval": json.dumps(approvals_needed), "status": AWAITING_SIGNATURES, "created_at": now,
        "updated_at": now, "expires_at": expires_at})
    if listing is not None and not _listing_status(conn, listing_id, "live", "sold", now):
        raise Conflict(f"listing {listing_id} was sold meanwhile")
    summary = {"dealId": deal_id, "finalPrice": deal["finalPrice"], "total": deal["total"], "protocol": protocol,
               "requestId": request_id, "listingId": listing_id}
    inbox.notify(conn, [buyer_id, seller_id], "deal_closed", now, deal=deal, **summary)
    return summary


#: A deal's insert, every column given, and the compare-and-set of a listing's status that a
#: deal's opening and its end run: compiled once (``storage/prepared.py``), a deal a negotiation.
_INSERT_DEAL = Prepared(insert(market_deals).values({column.name: bindparam(column.name)
                                                     for column in market_deals.columns}))
_LISTING_STATUS = Prepared(update(market_listings).where(market_listings.c.id == bindparam("listing_id"),
                                                         market_listings.c.status == bindparam("was"))
                           .values(status=bindparam("becomes"), updated_at=bindparam("now")))


def _listing_status(conn: Connection, listing_id: str, was: str, becomes: str, now: datetime) -> bool:
    """Move the listing from status ``was`` to ``becomes``; whether it was ``was`` (and moved)."""
    return _LISTING_STATUS.run(conn, {"listing_id": listing_id, "was": was, "becomes": becomes, "now": now}) == 1


def lock_spend(conn: Connection, *agent_ids: str) -> None:
    """Serialize the transactions that commit these agents' money or units, so that two deals
    opening at once cannot both fit one budget. Taken before any row lock, in one sorted pass
    (a fixed order: no two transactions wait on each other)."""
    for agent_id in sorted(set(agent_ids)):
        lock_key(conn, f"market-spend:{agent_id}")


def committed(conn: Connection, agent_id: str, role: str, currency: str, now: datetime, *,
              excluding: str | None = None) -> int:
    """What the agent has committed in confirmed deals and pending ones not yet expired: as
    buyer, the totals in ``currency`` (cents, against its ``budget``); as seller, the units
    (against its ``quantityOnHand``). ``excluding``: a deal not to count (the one being signed)."""
    c = market_deals.c
    column = c.total_cents if role == "buyer" else c.quantity
    party = c.buyer_id if role == "buyer" else c.seller_id
    query = select(func.coalesce(func.sum(column), 0)).where(
        party == agent_id, or_(c.status == CONFIRMED, and_(c.status.in_(PENDING), c.expires_at > now)))
    if role == "buyer":
        query = query.where(c.currency == currency)
    if excluding is not None:
        query = query.where(c.id != excluding)
    return int(conn.execute(query).scalar_one())


def spend(conn: Connection, mandate: Mandate, agent_id: str, role: str, currency: str, now: datetime, *,
          excluding: str | None = None) -> int:
    """:func:`committed`, for a ``mandate`` whose check reads it (``mandates.reads_spend``); 0
    for any other, which bounds each action on its own: the sum across deals is not run."""
    if not reads_spend(mandate, role):
        return 0
    return committed(conn, agent_id, role, currency, now, excluding=excluding)


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
    keys, the owners' approvals, the status, and when a pending deal expires (``expiresAt``,
    outside ``deal``: the signed bytes are the terms, not the market's deadline for signing them)."""
    deal = json.loads(row.deal)
    for party, signature in (("buyer", row.buyer_signature), ("seller", row.seller_signature)):
        if signature is not None:
            deal[party]["signature"] = signature
    keys = {party: _agent(conn, agent_id).public_key for party, agent_id in (("buyer", row.buyer_id),
                                                                              ("seller", row.seller_id))}
    out = {"dealId": row.id, "status": row.status, "deal": deal, "publicKeys": keys,
           "needsOwnerApproval": json.loads(row.needs_approval), "expiresAt": utc_z(row.expires_at)}
    approvals = json.loads(row.approvals)
    if approvals:
        out["ownerApprovals"] = approvals
    return out


def _agent(conn: Connection, agent_id: str) -> Agent:
    agent = identity.find(conn, agent_id)
    assert agent is not None  # a deal's parties are registered agents (foreign keys)
    return agent


def view(conn: Connection, deal_id: str, caller: Agent) -> dict[str, Any]:
    """``GET /market/deals/{dealId}``, for its two parties (the caller expires a due deal first:
    :func:`expire_if_due`)."""
    row = _deal(conn, deal_id)
    if caller.id not in (row.buyer_id, row.seller_id):
        raise Forbidden("only the deal's two parties see it")
    return document(row, conn)


# -- the end of a pending deal ---------------------------------------------------------------------


def _due(row: Any, now: datetime) -> bool:
    """Whether the deal is pending past its expiry: expired, whether or not anything wrote so yet."""
    return row.status in PENDING and row.expires_at <= now


def is_due(conn: Connection, deal_id: str, now: datetime) -> bool:
    """Whether the deal exists and is due to expire: read first, so that a read or an action
    opens a write transaction to expire it only when there is something to do."""
    row = find_by_id(conn, market_deals, deal_id)
    return row is not None and _due(row, now)


def end_deal(conn: Connection, row: Any, status: str, reason: str, now: datetime) -> None:
    """End the pending deal ``row`` (locked by the caller) as ``status`` (expired, cancelled or
    void): its listing is released — live again, or expired if its availability ended meanwhile;
    a double-auction deal has none, and its units do not return to the book — its request fails,
    and both parties are told (``deal_<status>``, with ``reason``). The one way a deal ends
    unconfirmed, so that no end forgets the listing a pending deal holds sold."""
    assert row.status in PENDING and status in (EXPIRED, CANCELLED, VOID)
    update_by_id(conn, market_deals, row.id, status=status, updated_at=now)
    if row.protocol != AUCTION:
        # a listing is sold by one pending deal at a time (open_deal's compare-and-set): this one
        _listing_status(conn, row.listing_id, "sold", "live", now)
    update_by_id(conn, market_requests, row.request_id, state="failed", updated_at=now)
    inbox.notify(conn, [row.buyer_id, row.seller_id], f"deal_{status}", now, dealId=row.id,
                 requestId=row.request_id, reason=reason)


def expire_if_due(conn: Connection, deal_id: str, now: datetime) -> bool:
    """Expire the deal if it is due (in a write transaction); whether it did. What a read, an
    action on the deal and the sweep all run, in a transaction of its own before an action, so
    that the expiry stands even when the action is then refused."""
    row = find_by_id(conn, market_deals, deal_id, lock=True)
    if row is None or not _due(row, now):
        return False
    end_deal(conn, row, EXPIRED, "deal_expired", now)
    return True


def expire_due(conn: Connection, now: datetime) -> int:
    """Expire up to :data:`EXPIRY_BATCH` due deals, the longest due first; how many it did."""
    c = market_deals.c
    found = conn.execute(select(c.id).where(c.status.in_(PENDING), c.expires_at <= now)
                         .order_by(c.expires_at, c.id).limit(EXPIRY_BATCH)).scalars().all()
    # locked in id order, as a new mandate's voiding locks them, so neither waits on the other
    return sum(expire_if_due(conn, deal_id, now) for deal_id in sorted(found))


def cancel(conn: Connection, deal_id: str, caller: Agent, now: datetime) -> dict[str, Any]:
    """``POST /market/deals/{dealId}/cancel`` (the party's agent token): a party that has not
    signed walks away before committing; one that signed is bound to wait for the other's
    signature or the expiry (409), and so is a party whose deal is no longer pending."""
    row = _deal(conn, deal_id, lock=True)
    if caller.id not in (row.buyer_id, row.seller_id):
        raise Forbidden("only the deal's two parties may cancel it")
    _refuse_unless(row, now, PENDING)
    party = "buyer" if caller.id == row.buyer_id else "seller"
    if (row.buyer_signature if party == "buyer" else row.seller_signature) is not None:
        raise Conflict(f"the {party} has signed this deal; a party may cancel only before it signs")
    end_deal(conn, row, CANCELLED, "deal_cancelled", now)
    return document(_deal(conn, deal_id), conn)


def void_disallowed(conn: Connection, agent_id: str, audit: AuditEvents, now: datetime) -> list[str]:
    """After the agent's owner filed a new mandate (the caller holds the agent's spend lock):
    each of the agent's pending deals that the mandate would not let it sign (the signing check,
    :func:`_enforce_confirm`) ends ``void`` (reason ``mandate``; audited with the constraint); the
    ids of those. The newest is checked first, counting every older one: under a lowered
    ``budget`` or ``quantityOnHand`` the newest deals give way and the oldest keep what the limit
    allows. A deal the agent already signed is held to it too: the owner's word now is what
    binds. A mandate dated in the future is judged as of its ``issuedAt`` (what it will forbid
    then, it forbids now); a due deal is left to expire. Confirmed deals stand."""
    c = market_deals.c
    # Locked in id order, as the sweep locks the deals it expires, so neither waits on the other.
    pending = conn.execute(select(market_deals).where(or_(c.buyer_id == agent_id, c.seller_id == agent_id),
                                                      c.status.in_(PENDING), c.expires_at > now)
                           .order_by(c.id).with_for_update()).all()
    mandate = identity.mandate_of(conn, agent_id)
    at = max(now, mandate.issued_at)
    voided = []
    for row in sorted(pending, key=lambda row: (row.created_at, row.id), reverse=True):
        refusal = _confirm_refusal(conn, row, agent_id, at, mandate)
        if refusal is not None:
            audit.violation(agent_id, "deal voided by a new mandate", refusal, dealId=row.id)
            end_deal(conn, row, VOID, "mandate", now)
            voided.append(row.id)
    return voided


def file_mandate(conn: Connection, body: object, audit: AuditEvents, now: datetime) -> tuple[int, dict[str, Any]]:
    """``POST /market/mandates`` (either door): file the owner's mandate, then void the agent's
    pending deals it no longer allows. The agent's spend is locked first, so that no deal of the
    agent opens while its mandate changes. 201 for a first mandate, 200 for a replacement."""
    if isinstance(body, dict) and isinstance(body.get("agentId"), str):
        lock_spend(conn, body["agentId"])
    mandate, replaced = identity.file_mandate(conn, body, now)
    void_disallowed(conn, mandate.agent_id, audit, now)
    assert isinstance(body, dict)  # file_mandate validated it
    return (200 if replaced else 201), {"agentId": mandate.agent_id, "issuedAt": body["issuedAt"],
                                        "status": "on_file", "replaced": replaced}


def _confirm_refusal(conn: Connection, row: Any, agent_id: str, now: datetime,
                     mandate: Mandate | None) -> str | None:
    """The constraint the agent's mandate would refuse its signature on the deal for, or None:
    the signing check itself, its audit entry discarded (the caller logs what it does instead).
    ``mandate``: the agent's mandate on file when the caller has read it."""
    party = "buyer" if agent_id == row.buyer_id else "seller"
    try:
        _enforce_confirm(conn, row, party, agent_id, AuditEvents(), now, mandate)
    except MandateViolation as exc:
        return exc.constraint
    return None


#: What a signature or an approval may land on: a confirmed deal answers a signature sent again.
SIGNABLE = (*PENDING, CONFIRMED)


def _refuse_unless(row: Any, now: datetime, allowed: tuple[str, ...]) -> None:
    """409 naming the deal's status (``expired`` once due, even before anything wrote so) unless
    it is one of ``allowed``."""
    status = EXPIRED if _due(row, now) else row.status
    if status not in allowed:
        raise Conflict(f"deal {row.id} is {status}")


def sign(conn: Connection, deal_id: str, body: object, audit: AuditEvents,
         clock: Callable[[], datetime]) -> dict[str, Any]:
    """``POST /market/deals/{dealId}/signatures`` ``{party, signature}``. The clock is read once
    the parties' spend is locked: a deal judged pending here is pending for every other
    transaction counting their spend."""
    party, signature = _signature_body(body)
    row = _locked(conn, deal_id)
    now = clock()
    _refuse_unless(row, now, SIGNABLE)
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
    _enforce_confirm(conn, row, party, agent.id, audit, now)
    update_by_id(conn, market_deals, row.id, **{f"{party}_signature": signature}, updated_at=now)
    return _settle(conn, deal_id, audit, now, checked=party)


def _enforce_confirm(conn: Connection, row: Any, party: str, agent_id: str, audit: AuditEvents, now: datetime,
                     mandate: Mandate | None = None) -> None:
    """The party's mandate in force now must allow confirming this deal (its total, the spend
    of its other pending and confirmed deals, the listing's facts); 403 (and an audit entry)
    otherwise. ``mandate``: the agent's mandate on file when the caller has read it (else read
    here; none on file is the same 403)."""
    if mandate is None:
        mandate = identity.mandate_of(conn, agent_id)
    condition: str | None = None
    accessories: tuple[str, ...] | None = None
    if row.protocol != AUCTION:
        listing = listing_row(conn, row.listing_id, now, live=False)
        condition, accessories = facts(listing)
        if party == "seller":
            mandate = seller_floor(mandate, listing.floor_cents)
    action = confirm(agent_id, row.price_cents, row.currency, now, protocol=row.protocol, condition=condition,
                     accessories=accessories, quantity=row.quantity,
                     shipping=row.total_cents - row.price_cents * row.quantity)
    try:
        enforce(mandate, party, action, spent=spend(conn, mandate, agent_id, party, row.currency, now,
                                                    excluding=row.id))
    except MandateViolation as exc:
        audit.violation(agent_id, "confirm", exc.constraint, dealId=row.id)
        raise


def approve(conn: Connection, deal_id: str, body: object, audit: AuditEvents,
            clock: Callable[[], datetime]) -> dict[str, Any]:
    """``POST /market/deals/{dealId}/approvals`` ``{party, signature}``: the owner's signature
    (with the owner's key) over the deal's signing bytes, for a mandate that requires it. Locks
    and reads the clock as :func:`sign` does: an approval may confirm the deal."""
    party, signature = _signature_body(body)
    row = _locked(conn, deal_id)
    now = clock()
    _refuse_unless(row, now, SIGNABLE)
    agent = _agent(conn, _party_of(row, party))
    if party not in _needs_approval(row, _mandates(conn, row)):
        raise Conflict(f"the {party}'s mandate does not ask for the owner's approval")
    deal = json.loads(row.deal)
    deal[party]["signature"] = signature
    if not verify_deal(agent.owner_public_key, deal, party):
        raise BadSignature(f"the approval does not verify against the {party}'s owner key over this deal", agent.id,
                           f"owner approval of deal {row.id} ({party})")
    approvals = json.loads(row.approvals)
    approvals[party] = {"publicKey": agent.owner_public_key, "signature": signature}
    update_by_id(conn, market_deals, row.id, approvals=json.dumps(approvals), updated_at=now)
    return _settle(conn, deal_id, audit, now)


def _mandates(conn: Connection, row: Any) -> dict[str, Mandate]:
    """The mandates on file of the deal's two parties, by agent id (one with none left out)."""
    return identity.mandates_of(conn, (row.buyer_id, row.seller_id))


def _needs_approval(row: Any, mandates: Mapping[str, Mandate]) -> list[str]:
    """The parties whose owner must approve the deal: those recorded so far, and any whose
    mandate in force now (``mandates``: :func:`_mandates`) requires it — a protection an owner
    adds reaches the deals its agent has not finished; one it drops does not loosen a deal that
    was opened under it."""
    needed = json.loads(row.needs_approval)
    for party, agent_id in (("buyer", row.buyer_id), ("seller", row.seller_id)):
        mandate = mandates.get(agent_id)
        if party not in needed and mandate is not None and needs_owner_approval(mandate):
            needed.append(party)
    return needed


def _settle(conn: Connection, deal_id: str, audit: AuditEvents, now: datetime,
            checked: str | None = None) -> dict[str, Any]:
    """After a signature or an approval landed: the deal's status, with the approvals the
    mandates in force ask for now. A deal about to be confirmed is checked against *both*
    parties' mandates in force now — a party that signed earlier may have a newer mandate that
    no longer allows it (one dated ahead of its filing voids nothing until this check) — and
    ends ``void`` if either refuses: no deal is confirmed that a mandate in force forbids.
    ``checked``: the party whose signing check passed in this transaction at ``now`` (the
    signer's, :func:`sign`), the same check on the same mandate and spend: not run twice."""
    row = _deal(conn, deal_id)
    mandates = _mandates(conn, row)
    status, needed = row.status, _needs_approval(row, mandates)
    if row.buyer_signature and row.seller_signature and row.status in PENDING:
        status = AWAITING_APPROVAL if set(needed) - set(json.loads(row.approvals)) else CONFIRMED
    if status == CONFIRMED and row.status != CONFIRMED:
        for party, agent_id in (("buyer", row.buyer_id), ("seller", row.seller_id)):
            if party == checked:
                continue
            refusal = _confirm_refusal(conn, row, agent_id, now, mandates.get(agent_id))
            if refusal is not None:
                audit.violation(agent_id, "deal voided at confirmation", refusal, dealId=row.id)
                end_deal(conn, row, VOID, "mandate", now)
                return document(_deal(conn, deal_id), conn)
    if status != row.status or needed != json.loads(row.needs_approval):
        update_by_id(conn, market_deals, row.id, status=status, needs_approval=json.dumps(needed), updated_at=now)
        row = _deal(conn, deal_id)
        if status == CONFIRMED:
            inbox.notify(conn, [row.buyer_id, row.seller_id], "deal_confirmed", now, dealId=row.id)
    return document(row, conn)


def _locked(conn: Connection, deal_id: str) -> Any:
    """The deal's row, locked after its parties' spend (the order every route takes them)."""
    parties = _deal(conn, deal_id)
    lock_spend(conn, parties.buyer_id, parties.seller_id)
    return _deal(conn, deal_id, lock=True)
