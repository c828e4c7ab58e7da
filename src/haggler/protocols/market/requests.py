"""From contact to deal: contact requests, protocol agreement, sealed bids, offers and instant
match (spec 003: 3.–7., Protocols 1–3).

Every message here is signed by the agent it names (the buyer of the request, the seller of its
listing) and checked against that agent's mandate before anything is stored; a refusal changes
nothing. Free text (``message``) is screened for the audit log and otherwise only carried: the
one exception is an ``offer`` without ``offerPrice``, whose price the language layer reads from
the text — the same reader the store's merchant uses, which never guesses between two amounts.

The state of a request: ``proposed`` (the buyer's contact) → ``agreed`` (the seller's protocol
agreement) → ``closed`` (a deal) or ``failed`` (no overlap, a sealed bid its owner no longer
allows, a rejection, the turn cap).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select
from sqlalchemy.exc import IntegrityError

from haggler.engine import Negotiation, OutcomeKind, RuleViolation
from haggler.errors import Conflict, Forbidden
from haggler.language.intents import IntentKind
from haggler.language.parse import parse_shopper_turn
from haggler.money import amount_cents, to_decimal_number
from haggler.protocols.market import deals, identity, inbox
from haggler.protocols.market.audit import AuditEvents
from haggler.protocols.market.identity import Agent
from haggler.protocols.market.listings import LISTING_REVISED, ensure_live, facts, listing_row, seller_floor, stored
from haggler.protocols.market.mandates import (
    PROTOCOL_PERMISSION,
    Action,
    Mandate,
    MandateViolation,
    Violation,
    check,
    confirm,
    enforce,
    instant_match,
    offer,
    sealed_bid,
)
from haggler.protocols.market.messages import InvalidMessage, validate
from haggler.protocols.market.settlement import (
    instant_match_price,
    offer_rules,
    offer_turn,
    sealed_bid_price,
)
from haggler.storage.prepared import Prepared
from haggler.storage.rows import find_by_id, row_by_id, update_by_id
from haggler.storage.schema import market_bids, market_deals, market_offers, market_requests

PROPOSED, AGREED, CLOSED, FAILED = "proposed", "agreed", "closed", "failed"
NATURAL_LANGUAGE, SEALED_BID, INSTANT_MATCH = "natural_language", "sealed_bid", "instant_match"


def _request(conn: Connection, request_id: str, *, lock: bool = False) -> Any:
    return row_by_id(conn, market_requests, request_id, "request", lock=lock)


def _same_request(message: dict[str, Any], request_id: str) -> None:
    if message["requestId"] != request_id:
        raise InvalidMessage("/requestId", f"must be the request in the path, {request_id}")


def _party_mandate(conn: Connection, agent_id: str, role: str, floor: int | None) -> Mandate:
    """The party's mandate on file (403 with none), a seller's with the listing's embedded
    ``floor`` applied too."""
    mandate = identity.mandate_of(conn, agent_id)
    return seller_floor(mandate, floor) if role == "seller" else mandate


def _enforce(conn: Connection, audit: AuditEvents, role: str, action: Action, *, floor: int | None = None,
             what: str, **about: str) -> Mandate:
    """The acting agent's mandate must allow ``action``, with what it has committed in other
    deals (its spend locked by the caller); 403 and an audit entry otherwise."""
    try:
        mandate = _party_mandate(conn, action.agent_id, role, floor)
        enforce(mandate, role, action, spent=deals.spend(conn, mandate, action.agent_id, role, action.currency,
                                                         action.at))
    except MandateViolation as exc:
        audit.violation(action.agent_id, what, exc.constraint, **about)
        raise
    return mandate


def _lapsed(conn: Connection, audit: AuditEvents, request: Any, listing: Any, party: str, kind: Any, cents_: int,
            now: datetime, what: str) -> bool:
    """Whether ``party``'s earlier commitment on ``request`` (its sealed bid, its standing offer:
    ``kind`` at ``cents_``) is one its owner's mandate no longer allows *now* — a passed
    dealMustCloseBy, a newer mandate, a revised listing. A deal must not close on it: the party
    could never sign it, and the listing would be sold for nothing. Logged for that party."""
    agent_id = request.buyer_id if party == "buyer" else request.seller_id
    condition, accessories = facts(listing)
    try:
        mandate = _party_mandate(conn, agent_id, party, listing.floor_cents)
        violation = check(mandate, party,
                          kind(agent_id, cents_, listing.currency, now, condition=condition, accessories=accessories,
                               shipping=listing.shipping_cents),
                          spent=deals.spend(conn, mandate, agent_id, party, listing.currency, now))
    except MandateViolation as exc:
        violation = exc.violation
    if violation is None:
        return False
    audit.violation(agent_id, what, violation.constraint, requestId=request.id)
    return True


def _permits(conn: Connection, audit: AuditEvents, agent_id: str, protocol: str, what: str, request_id: str) -> None:
    permission = PROTOCOL_PERMISSION[protocol]
    try:
        mandate = identity.mandate_of(conn, agent_id)
        if not mandate.permits(permission):
            raise MandateViolation(Violation(permission, f"the owner does not permit the {protocol} protocol"))
    except MandateViolation as exc:
        audit.violation(agent_id, what, exc.constraint, requestId=request_id)
        raise


# -- contact and agreement -------------------------------------------------------------------------


def contact(conn: Connection, message: object, audit: AuditEvents, now: datetime) -> dict[str, Any]:
    """``POST /market/contact``: a buyer's signed contact_request, delivered to the seller."""
    validate(message)
    assert isinstance(message, dict)
    buyer = identity.sender(conn, message["buyer"]["agentId"], message)
    audit.screen(buyer.id, "/message", message.get("message"))
    listing = listing_row(conn, message["listingId"], now)
    if listing.seller_id == buyer.id:
        raise Conflict("an agent cannot contact itself about its own listing")
    if not listing.negotiable and message["protocol"] != INSTANT_MATCH:
        raise Conflict("the listing is not negotiable: its price is fixed, so only instant_match can close it")
    _permits(conn, audit, buyer.id, message["protocol"], "contact", message["requestId"])
    if find_by_id(conn, market_requests, message["requestId"]) is not None:
        raise Conflict(f"requestId {message['requestId']} is already taken")
    _open_request(conn, message, listing, buyer, message["protocol"], None, PROPOSED, now)
    inbox.deliver(conn, listing.seller_id, inbox.MESSAGE, message, now)
    return {"requestId": message["requestId"], "state": PROPOSED}


#: A request's insert, one per negotiation: compiled once (``storage/prepared.py``), every column given.
_INSERT_REQUEST = Prepared(insert(market_requests).values({column.name: bindparam(column.name)
                                                           for column in market_requests.columns}))


def _open_request(conn: Connection, message: dict[str, Any], listing: Any, buyer: Agent, proposed: str,
                  protocol: str | None, state: str, now: datetime) -> None:
    """Insert the buyer's request ``message["requestId"]``, bound to the listing's goods. The
    caller checked the id is free; one taken meanwhile by a racing request (the unique key) is
    the same 409, not a 500."""
    try:
        _INSERT_REQUEST.run(conn, {
            "id": message["requestId"], "listing_id": listing.id, "buyer_id": buyer.id,
            "seller_id": listing.seller_id, "proposed_protocol": proposed, "protocol": protocol, "state": state,
            "item_hash": listing.item_hash, "message": stored(message), "created_at": now, "updated_at": now})
    except IntegrityError:
        raise Conflict(f"requestId {message['requestId']} is already taken") from None


def agree(conn: Connection, request_id: str, message: object, audit: AuditEvents, now: datetime) -> dict[str, Any]:
    """``POST /market/contact/{requestId}/agreement``: the seller's signed protocol_agreement."""
    validate(message)
    assert isinstance(message, dict)
    _same_request(message, request_id)
    request = _request(conn, request_id, lock=True)
    seller = identity.sender(conn, request.seller_id, message)
    audit.screen(seller.id, "/message", message.get("message"))
    if request.state != PROPOSED:
        raise Conflict(f"request {request_id} is {request.state}; its protocol was already settled")
    listing = listing_row(conn, request.listing_id, now)
    _same_goods(request, listing)
    protocol = message["agreedProtocol"]
    if not listing.negotiable and protocol != INSTANT_MATCH:
        raise Conflict("the listing is not negotiable: agree to instant_match or to nothing")
    _permits(conn, audit, seller.id, protocol, "agreement", request_id)
    update_by_id(conn, market_requests, request_id, protocol=protocol, state=AGREED, updated_at=now)
    inbox.deliver(conn, request.buyer_id, inbox.MESSAGE, message, now)
    return {"requestId": request_id, "state": AGREED, "agreedProtocol": protocol}


def _agreed(request: Any, protocol: str) -> None:
    if request.state != AGREED:
        raise Conflict(f"request {request.id} is {request.state}" +
                       ("; the seller has not agreed a protocol yet" if request.state == PROPOSED else ""))
    if request.protocol != protocol:
        raise Conflict(f"request {request.id} agreed on {request.protocol}, not {protocol}")


def _party_agent(conn: Connection, request: Any, party: str, message: dict[str, Any]) -> Agent:
    return identity.sender(conn, request.buyer_id if party == "buyer" else request.seller_id, message)


def _party_message(conn: Connection, request_id: str, message: object, audit: AuditEvents, protocol: str,
                   text_field: str, now: datetime) -> tuple[dict[str, Any], Any, Any, str, Agent]:
    """What a sealed bid and an offer check first, in this order: the schema, the request in the
    path, the signature of the party the message names, its free text (screened), that the
    request agreed on ``protocol``, and that its listing is live. Returns the message, the
    request, its listing, the party and its agent.

    Locks, in the one order every route takes them: both parties' spend, the listing, the
    request (a revision locks the listing and then fails the requests on it)."""
    validate(message)
    assert isinstance(message, dict)
    _same_request(message, request_id)
    parties = _request(conn, request_id)  # who they are never changes: read before any lock
    deals.lock_spend(conn, parties.buyer_id, parties.seller_id)
    listing = listing_row(conn, parties.listing_id, now, lock=True, live=False)
    request = _request(conn, request_id, lock=True)
    party = message["party"]
    agent = _party_agent(conn, request, party, message)
    audit.screen(agent.id, f"/{text_field}", message.get(text_field))
    _agreed(request, protocol)
    ensure_live(listing, now)
    _same_goods(request, listing)
    return message, request, listing, party, agent


def _same_goods(request: Any, listing: Any) -> None:
    """409 when the listing's goods changed since the request began. A revision fails the open
    requests it finds; this catches one that began while the revision was being written."""
    if request.item_hash is not None and request.item_hash != listing.item_hash:
        raise Conflict(f"the listing's item changed since request {request.id} began ({LISTING_REVISED}): "
                       "start a new request about the listing as it is now")


def _close(conn: Connection, request: Any, listing: Any, protocol: str, price_cents: int, now: datetime,
           deal_expiry: timedelta) -> dict[str, Any]:
    update_by_id(conn, market_requests, request.id, state=CLOSED, updated_at=now)
    return deals.open_deal(conn, request_id=request.id, listing_id=listing.id, buyer_id=request.buyer_id,
                           seller_id=request.seller_id, protocol=protocol, price_cents=price_cents,
                           currency=listing.currency, now=now, expires_at=now + deal_expiry,
                           shipping_cents=listing.shipping_cents, listing=listing)


def _fail(conn: Connection, request: Any, reason: str, now: datetime) -> None:
    update_by_id(conn, market_requests, request.id, state=FAILED, updated_at=now)
    inbox.notify(conn, [request.buyer_id, request.seller_id], "negotiation_failed", now, requestId=request.id,
                 reason=reason)


# -- sealed bid ------------------------------------------------------------------------------------


def bid(conn: Connection, request_id: str, message: object, audit: AuditEvents, now: datetime,
        deal_expiry: timedelta) -> tuple[int, dict[str, Any]]:
    """``POST /market/contact/{requestId}/bids``: one side's sealed bid. Hidden from the other side
    until both are in; then a deal at the midpoint (201) or a failure that reveals neither (200):
    ``no_overlap``, or ``mandate`` when the first bid's owner no longer allows it (checked first)."""
    message, request, listing, party, agent = _party_message(conn, request_id, message, audit, SEALED_BID,
                                                             "commitment", now)
    condition, accessories = facts(listing)
    field = "maxPrice" if party == "buyer" else "minPrice"
    limit = amount_cents(message[field])
    if limit <= 0:
        raise InvalidMessage(f"/{field}", "must be greater than 0")
    _enforce(conn, audit, party, sealed_bid(agent.id, limit, listing.currency, now, condition=condition,
                                            accessories=accessories, shipping=listing.shipping_cents),
             floor=listing.floor_cents, what="sealed_bid", requestId=request_id)
    placed = {row.party: row.limit_cents for row in
              conn.execute(select(market_bids).where(market_bids.c.request_id == request_id)).all()}
    if party in placed:
        raise Conflict(f"the {party} has already bid; a sealed bid is a commitment and cannot be changed")
    conn.execute(insert(market_bids).values(request_id=request_id, party=party, limit_cents=limit,
                                            message=stored(message), created_at=now))
    placed[party] = limit
    if len(placed) < 2:
        other = "seller" if party == "buyer" else "buyer"
        inbox.notify(conn, [request.seller_id if other == "seller" else request.buyer_id], "sealed_bid_waiting", now,
                     requestId=request_id)
        return 202, {"requestId": request_id, "state": "waiting_for_other_bid"}
    other = "seller" if party == "buyer" else "buyer"
    if _lapsed(conn, audit, request, listing, other, sealed_bid, placed[other], now, "sealed_bid at close"):
        # checked before the bids are compared, so that the failure says nothing about them
        _fail(conn, request, "mandate", now)
        return 200, {"requestId": request_id, "state": FAILED, "reason": "mandate"}
    deal_price = sealed_bid_price(placed["buyer"], placed["seller"])
    if deal_price is None:
        _fail(conn, request, "no_overlap", now)
        return 200, {"requestId": request_id, "state": FAILED, "reason": "no_overlap"}
    summary = _close(conn, request, listing, SEALED_BID, deal_price, now, deal_expiry)
    return 201, {"requestId": request_id, "state": CLOSED, **summary}


# -- offers ----------------------------------------------------------------------------------------


#: A request's offers, oldest first, and an offer's insert: every turn runs both, so they are
#: compiled once (``storage/prepared.py``).
_OFFERS = Prepared(select(market_offers).where(market_offers.c.request_id == bindparam("request_id"))
                   .order_by(market_offers.c.seq))
_INSERT_OFFER = Prepared(insert(market_offers))


def _offers(conn: Connection, request_id: str) -> list[Any]:
    """The request's offers so far, oldest first: read once per offer, for the replay check and
    the engine's replay both."""
    return _OFFERS.rows(conn, {"request_id": request_id})


def _negotiation(rows: list[Any], opener: str, currency: str, turn_cap: int | None) -> Negotiation:
    """The offers ``rows`` replayed on the engine (whoever offered first opened it; with no
    offers yet, ``opener`` does)."""
    negotiation = Negotiation(offer_rules(rows[0].party if rows else opener, turn_cap))
    for row in rows:
        negotiation.apply(offer_turn(row.party, row.action, row.created_at, price=row.price_cents, currency=currency))
    return negotiation


def _in_sequence(rows: list[Any], party: str, message: dict[str, Any]) -> None:
    """409 unless the offer's ``sequence`` is its party's next: one more than the party's offers
    so far. An offer reaches the counterpart signed, in its inbox; without a number of its own,
    the same signed offer sent again — by anyone — would put back a price the party had left
    behind, or burn the party's turn. A party that holds firm sends its price again, as a new
    message with the next number."""
    expected = sum(1 for row in rows if row.party == party) + 1
    if message["sequence"] != expected:
        raise Conflict(f"the {party}'s next offer on this request is number {expected}, not {message['sequence']}: "
                       "a signed offer is sent once (a replay, or a message skipped)")


def make_offer(conn: Connection, request_id: str, message: object, audit: AuditEvents, now: datetime,
               turn_cap: int | None, deal_expiry: timedelta) -> tuple[int, dict[str, Any]]:
    """``POST /market/contact/{requestId}/offers``: one turn of the natural-language protocol,
    on the engine (alternation, the turn cap). ``accept`` closes at the counterpart's standing
    offer (201, a deal) — 409 if the counterpart's owner no longer allows that offer."""
    message, request, listing, party, agent = _party_message(conn, request_id, message, audit, NATURAL_LANGUAGE,
                                                             "message", now)
    earlier = _offers(conn, request_id)  # the request row is locked: they stay as read
    _in_sequence(earlier, party, message)
    action, amount, read_from_text = _read_offer(message, listing.ask_cents)
    negotiation, count = _negotiation(earlier, party, listing.currency, turn_cap), len(earlier)
    at = max(now, negotiation.last_turn.at) if negotiation.last_turn else now
    turn = offer_turn(party, action, at, price=amount, currency=listing.currency)
    try:
        negotiation.check(turn)
    except RuleViolation as exc:
        raise Conflict(f"{exc.message} ({exc.code})") from None
    counterpart = "seller" if party == "buyer" else "buyer"
    committed = amount if action == "offer" else (
        negotiation.standing[counterpart].price_cents if action == "accept" else None)
    if action == "accept" and committed is not None and _lapsed(
            conn, audit, request, listing, counterpart, offer, committed, now, "standing offer at accept"):
        raise Conflict(f"the {counterpart}'s standing offer no longer stands: its owner's mandate does not allow it "
                       "any more; make an offer instead")
    if committed is not None:
        condition, accessories = facts(listing)
        _enforce(conn, audit, party, offer(agent.id, committed, listing.currency, now, condition=condition,
                                           accessories=accessories, shipping=listing.shipping_cents),
                 floor=listing.floor_cents, what=f"offer ({action})", requestId=request_id)
    outcome = negotiation.apply(turn)
    _INSERT_OFFER.run(conn, {"request_id": request_id, "seq": count + 1, "party": party, "action": action,
                             "price_cents": amount, "message": stored(message), "created_at": at})
    delivered = {**message, **({"offerPriceRead": to_decimal_number(amount)} if read_from_text and amount is not None else {})}
    inbox.deliver(conn, request.buyer_id if counterpart == "buyer" else request.seller_id, inbox.MESSAGE,
                  delivered, now)
    result: dict[str, Any] = {"requestId": request_id, "turn": count + 1, "action": action}
    if amount is not None:
        result["offerPrice"] = to_decimal_number(amount)
    if read_from_text:
        result["readFromMessage"] = True
    if outcome is None:
        return 200, {**result, "state": AGREED}
    if outcome.kind is OutcomeKind.AGREED:
        assert outcome.terms is not None
        summary = _close(conn, request, listing, NATURAL_LANGUAGE, outcome.terms.price_cents, now, deal_expiry)
        return 201, {**result, "state": CLOSED, **summary}
    reason = "rejected" if outcome.kind is OutcomeKind.REJECTED else "turn_cap"
    _fail(conn, request, reason, now)
    return 200, {**result, "state": FAILED, "reason": reason}


def _read_offer(message: dict[str, Any], ask_cents: int) -> tuple[str, int | None, bool]:
    """(action, price in cents, whether the price was read from the text)."""
    action = message.get("action", "offer")
    if action != "offer":
        if "offerPrice" in message:
            raise InvalidMessage("/offerPrice", f"an {action} carries no price: it answers the standing offer")
        return action, None, False
    if "offerPrice" in message:
        amount = amount_cents(message["offerPrice"])
        if amount <= 0:
            raise InvalidMessage("/offerPrice", "must be greater than 0")
        return "offer", amount, False
    text = message.get("message")
    if not text:
        raise InvalidMessage("/offerPrice", "is required when there is no message to read a price from")
    intent = parse_shopper_turn(text, reference_cents=ask_cents)
    if intent.kind is IntentKind.OFFER and intent.amount_cents:
        return "offer", intent.amount_cents, True
    if intent.kind is IntentKind.ACCEPT:
        return "accept", None, True
    if intent.kind is IntentKind.WALK_AWAY:
        return "reject", None, True
    raise InvalidMessage("/offerPrice", "is missing and the message names no single price: send offerPrice, "
                                       "or a message such as \"I can do 165€\"")


# -- instant match ---------------------------------------------------------------------------------


def instant(conn: Connection, listing_id: str, message: object, audit: AuditEvents, now: datetime,
            deal_expiry: timedelta) -> dict[str, Any]:
    """``POST /market/listings/{listingId}/instant_match``: the buyer takes the live ask; the deal
    closes at once. A stale price, a sold or expired listing is refused; of racing buyers exactly
    one gets the deal (the listing row is locked, and sold by a compare-and-set)."""
    validate(message)
    assert isinstance(message, dict)
    if message["listingId"] != listing_id:
        raise InvalidMessage("/listingId", f"must be the listing in the path, {listing_id}")
    buyer = identity.sender(conn, message["buyer"]["agentId"], message)
    audit.screen(buyer.id, "/message", message.get("message"))
    deals.lock_spend(conn, buyer.id, listing_row(conn, listing_id, now, live=False).seller_id)
    listing = listing_row(conn, listing_id, now, lock=True)
    if listing.seller_id == buyer.id:
        raise Conflict("an agent cannot buy its own listing")
    if message.get("listingVersion", listing.version) != listing.version:
        raise Conflict(f"the listing was revised (it is version {listing.version}, not "
                         f"{message['listingVersion']}); read it again")
    deal_price = instant_match_price(listing.ask_cents, amount_cents(message["acceptedPrice"]))
    condition, accessories = facts(listing)
    _enforce(conn, audit, "buyer", instant_match(buyer.id, deal_price, listing.currency, now, condition=condition,
                                                 accessories=accessories, shipping=listing.shipping_cents),
             what="instant_match", listingId=listing_id)
    seller_mandate = _party_mandate(conn, listing.seller_id, "seller", listing.floor_cents)
    refusal = check(seller_mandate, "seller", confirm(listing.seller_id, deal_price, listing.currency, now,
                                                      protocol=INSTANT_MATCH),
                    spent=deals.spend(conn, seller_mandate, listing.seller_id, "seller", listing.currency, now))
    if refusal is not None:  # the seller's mandate is its own business: logged for it, not told to the buyer
        audit.violation(listing.seller_id, "accept instant_match", refusal.constraint, listingId=listing_id)
        raise Forbidden("the seller cannot accept an instant match on this listing")
    request = conn.execute(select(market_requests).where(market_requests.c.id == message["requestId"])
                           .with_for_update()).first()
    if request is None:
        _open_request(conn, message, listing, buyer, INSTANT_MATCH, INSTANT_MATCH, AGREED, now)
        request = _request(conn, message["requestId"])
    elif request.buyer_id != buyer.id or request.listing_id != listing_id or request.state in (CLOSED, FAILED):
        raise Conflict(f"requestId {message['requestId']} is already taken"
                       + (f" (its negotiation is {request.state})" if request.buyer_id == buyer.id else ""))
    elif request.state == PROPOSED or (request.state == AGREED and request.protocol != INSTANT_MATCH):
        raise Conflict(f"request {request.id} is negotiating by {request.protocol or request.proposed_protocol}")
    else:
        _same_goods(request, listing)
    inbox.deliver(conn, listing.seller_id, inbox.MESSAGE, message, now)
    summary = _close(conn, request, listing, INSTANT_MATCH, deal_price, now, deal_expiry)
    return {"requestId": request.id, "state": CLOSED, **summary}


# -- a party's view --------------------------------------------------------------------------------


def view(conn: Connection, request_id: str, caller: Agent) -> dict[str, Any]:
    """``GET /market/contact/{requestId}``: the request as its parties see it. Sealed bids show
    only who has bid, never a price; offers show what was offered."""
    request = _request(conn, request_id)
    if caller.id not in (request.buyer_id, request.seller_id):
        raise Forbidden("only the request's buyer and seller see it")
    bids = {row.party for row in conn.execute(select(market_bids.c.party)
                                              .where(market_bids.c.request_id == request_id)).all()}
    offers = conn.execute(select(market_offers).where(market_offers.c.request_id == request_id)
                          .order_by(market_offers.c.seq)).all()
    deal = conn.execute(select(market_deals.c.id).where(market_deals.c.request_id == request_id)).scalar()
    out: dict[str, Any] = {
        "requestId": request.id, "listingId": request.listing_id, "buyer": request.buyer_id,
        "seller": request.seller_id, "proposedProtocol": request.proposed_protocol, "protocol": request.protocol,
        "state": request.state, "contact": json.loads(request.message),
    }
    if request.protocol == SEALED_BID:
        out["bids"] = {party: party in bids for party in ("buyer", "seller")}
    if offers:
        out["offers"] = [{"turn": row.seq, "party": row.party, "action": row.action,
                          **({"offerPrice": to_decimal_number(row.price_cents)} if row.price_cents is not None else {})}
                         for row in offers]
    if deal is not None:
        out["dealId"] = deal
    return out
