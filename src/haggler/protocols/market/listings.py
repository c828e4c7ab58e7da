"""Listings and wanted ads (spec 003: 1. Listing, 2. Wanted Ad; Phase 2: Structured Listing Parser).

A listing is the seller agent's signed message with its owner's signed mandate inside. The
framework checks both signatures, then the ask (and a ``minPrice``, if the seller states one)
against the owner's floor: the mandate on file and the embedded one, whichever is higher. A
wanted ad is held to the buyer's ``maxSpend`` the same way.

Hidden state stays hidden: the public view of a listing is an allow-list that leaves out
``pricing.minPrice`` and the mandate's constraints (only the owner's public key, and the fact that
the framework verified it, are shown). The seller's own agent reads the whole message.

Expiry is enforced on every read: a listing is live until the end of its ``availableUntil`` day
(UTC), a wanted ad until ``activeUntil``. A new listing that fits a live wanted ad notifies the
buyer; a new wanted ad that fits a live listing notifies the seller.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import date, datetime, time, timedelta, timezone
from decimal import Decimal
from itertools import islice
from typing import Any

from sqlalchemy import Connection, Select, insert, select, update

from haggler.errors import Conflict, Gone, InvalidInput
from haggler.money import amount_cents
from haggler.protocols.fields import query_integer
from haggler.protocols.market import identity, inbox
from haggler.protocols.market.audit import AuditEvents
from haggler.protocols.market.identity import Agent
from haggler.protocols.market.mandates import CONDITIONS, Mandate, MandateViolation, Violation, enforce, listing
from haggler.protocols.market.messages import InvalidMessage, validate
from haggler.storage.rows import row_by_id
from haggler.storage.schema import market_listings, market_requests, market_wanted
from haggler.timestamps import parse_rfc3339, utc_z
from haggler.trust.canonical import canonical_json

LIVE, SOLD = "live", "sold"
#: Why a request on a listing whose goods were revised can go no further.
LISTING_REVISED = "listing_revised"
MAX_PAGE = 200
#: The prefix of the ids the market gives unsigned plain-text ads (``text_ads.py``). No listing may
#: take it, so that an id read off such an ad never leads to a signed listing someone posted under it.
TEXT_AD_PREFIX = "txt_"
#: The listing fields anyone may read; everything else (pricing.minPrice, the mandate's
#: constraints) is the seller's alone.
PUBLIC_ITEM = ("category", "subcategory", "name", "model", "condition", "description", "accessories", "photos",
               "verification")
PUBLIC_PRICING = ("askPrice", "currency", "negotiable", "priceJustification")


class UnsignedAd(Conflict):
    """409: the id names an unsigned plain-text ad, which no owner's mandate binds, so nothing
    that binds a price (contact, instant match, and the sealed bids and offers a contact opens)
    can be made on it: its poster negotiates in a Matrix DM."""

    def __init__(self, ad_id: str) -> None:
        super().__init__(f"{ad_id} is an unsigned natural-language ad, not a listing: no owner's mandate binds its "
                         "price, so the market opens no contact request, instant match, sealed bid or offer on it. "
                         f"Negotiate with its poster in a Matrix DM (GET /market/ads/{ad_id} names the poster).")


def stored(message: dict[str, Any]) -> str:
    return json.dumps(message, ensure_ascii=False, separators=(",", ":"))


def seller_floor(mandate: Mandate, listing_floor: int | None) -> Mandate:
    """The seller's mandate with the listing's embedded floor applied too: both are the owner's
    signed word, so the higher one binds."""
    if mandate.min_acceptable_price is None or listing_floor is None:
        return mandate
    return replace(mandate, min_acceptable_price=max(mandate.min_acceptable_price, listing_floor))


# -- listings --------------------------------------------------------------------------------------


def post_listing(conn: Connection, message: object, audit: AuditEvents, now: datetime) -> tuple[int, dict[str, Any]]:
    """``POST /market/listings``: 201 for a new listing, 200 for a revision of one (same seller,
    newer ``timestamp``; a sold listing is final)."""
    validate(message)
    assert isinstance(message, dict)
    if message["listingId"].startswith(TEXT_AD_PREFIX):
        raise InvalidMessage("/listingId", f"{TEXT_AD_PREFIX}… ids are the market's, for unsigned plain-text ads: "
                                           "choose another")
    seller = identity.sender(conn, message["seller"]["agentId"], message)
    owner_mandate = message["ownerMandate"]
    identity.check_owner_signed(seller, owner_mandate, "the listing's ownerMandate")
    _signed_for(owner_mandate, "listingId", message["listingId"], "listing")
    item, pricing = message["item"], message["pricing"]
    for where, text in (("/item/description", item.get("description")),
                        ("/pricing/priceJustification", pricing.get("priceJustification"))):
        audit.screen(seller.id, where, text)
    ask, currency = amount_cents(pricing["askPrice"]), pricing["currency"]
    min_price = amount_cents(pricing["minPrice"]) if "minPrice" in pricing else None
    if min_price is not None and min_price > ask:
        raise InvalidMessage("/pricing/minPrice", "must not be above askPrice")
    if ask <= 0:
        raise InvalidMessage("/pricing/askPrice", "must be greater than 0")
    embedded_floor = amount_cents(owner_mandate["minAcceptablePrice"])
    mandate_issued = parse_rfc3339(owner_mandate["issuedAt"])
    until = _end_of_day(message.get("logistics", {}).get("availableUntil"))
    if until is not None and until <= now:
        raise InvalidMessage("/logistics/availableUntil", "is in the past: the listing would never be live")
    mandate = seller_floor(identity.mandate_of(conn, seller.id), embedded_floor)
    try:
        enforce(mandate, "seller", listing(seller.id, ask, currency, now))
        if min_price is not None:  # a stated floor below the owner's would invite offers the agent may not take
            enforce(mandate, "seller", listing(seller.id, min_price, currency, now))
    except MandateViolation as exc:
        audit.violation(seller.id, "listing", exc.constraint, listingId=message["listingId"])
        raise
    sent_at = parse_rfc3339(message["timestamp"])  # the schema checked it: aware
    values = dict(seller_id=seller.id, category=item["category"], subcategory=item["subcategory"], name=item["name"],
                  condition=item["condition"], ask_cents=ask, floor_cents=embedded_floor,
                  mandate_issued_at=mandate_issued, shipping_cents=shipping_cents(message), item_hash=item_hash(message),
                  currency=currency, negotiable=pricing["negotiable"], available_until=until,
                  sent_at=sent_at, listed_at=now,
                  message=stored(message), updated_at=now)
    existing = conn.execute(select(market_listings).where(market_listings.c.id == message["listingId"])
                            .with_for_update()).first()
    told_before = None  # the listing as its buyers were last told of it: none for a new one
    if existing is None:
        conn.execute(insert(market_listings).values(id=message["listingId"], status=LIVE, created_at=now, **values))
        status = 201
    else:
        if existing.seller_id != seller.id:
            raise Conflict(f"listingId {message['listingId']} belongs to another seller")
        if existing.status != LIVE:
            raise Conflict(f"listing {existing.id} is {existing.status}; a closed listing cannot be revised")
        if sent_at <= existing.sent_at:
            raise Conflict("a revision must carry a newer timestamp than the listing it replaces")
        if existing.mandate_issued_at is not None and mandate_issued < existing.mandate_issued_at:
            raise Conflict("the revision's ownerMandate was issued before the one the listing holds: an owner's "
                           "newer word cannot be replaced by an older one")
        conn.execute(update(market_listings).where(market_listings.c.id == existing.id)
                     .values(version=existing.version + 1, **values))
        status = 200
        if values["item_hash"] != existing.item_hash:
            _tell_revised(conn, existing.id, now)
        elif _status(existing, now) == LIVE:
            told_before = existing
    row = row_by_id(conn, market_listings, message["listingId"], "listing")
    notified = _notify_buyers(conn, row, now, told_before)
    return status, {"listingId": row.id, "status": LIVE, "notifiedWanted": notified}


def _signed_for(owner_mandate: dict[str, Any], field: str, expected: str, what: str) -> None:
    """An embedded ownerMandate is signed for one listing or wanted ad: refused on any other."""
    if owner_mandate[field] != expected:
        raise InvalidMessage(f"/ownerMandate/{field}", f"the owner signed this mandate for another {what}, "
                                                      f"{owner_mandate[field]!r}, not {expected!r}")


def item_hash(message: dict[str, Any]) -> str:
    """SHA-256 (hex) of what a listing sells: its item block, logistics and currency (RFC 8785
    bytes). A request and its deal are bound to it; its pricing may change, the goods may not."""
    terms = {"item": message["item"], "logistics": message.get("logistics", {}),
             "currency": message["pricing"]["currency"]}
    return hashlib.sha256(canonical_json(terms)).hexdigest()


def shipping_cents(message: dict[str, Any]) -> int:
    """The listing's ``logistics.shippingCost`` in cents (0 when it states none): part of what
    the buyer pays, so part of what its mandate bounds."""
    cost = message.get("logistics", {}).get("shippingCost")
    return 0 if cost is None else amount_cents(cost)


def _tell_revised(conn: Connection, listing_id: str, now: datetime) -> None:
    """The goods changed: the open requests on the listing fail (every later message on one is
    409), and both parties of each are told. The request rows are locked after the listing's:
    every route that locks both takes the listing first."""
    rows = conn.execute(select(market_requests.c.id, market_requests.c.buyer_id, market_requests.c.seller_id)
                        .where(market_requests.c.listing_id == listing_id,
                               market_requests.c.state.in_(("proposed", "agreed")))).all()
    conn.execute(update(market_requests).where(market_requests.c.id.in_([row.id for row in rows]))
                 .values(state="failed", updated_at=now))
    for row in rows:
        inbox.notify(conn, [row.buyer_id, row.seller_id], "negotiation_failed", now, requestId=row.id,
                     reason=LISTING_REVISED)


def _end_of_day(value: str | None) -> datetime | None:
    """The instant a listing stops being available: the end (UTC) of its ``availableUntil`` day."""
    if value is None:
        return None
    return datetime.combine(date.fromisoformat(value), time(), tzinfo=timezone.utc) + timedelta(days=1)


def listing_row(conn: Connection, listing_id: str, now: datetime, *, lock: bool = False, live: bool = True) -> Any:
    """The listing (404 if unknown, 409 for an unsigned ad's ``txt_…`` id); with ``live``, 409 once
    sold and 410 once expired."""
    if listing_id.startswith(TEXT_AD_PREFIX):
        raise UnsignedAd(listing_id)
    row = row_by_id(conn, market_listings, listing_id, "listing", lock=lock)
    if live:
        ensure_live(row, now)
    return row


def ensure_live(row: Any, now: datetime) -> None:
    """409 for a sold listing, 410 for an expired one."""
    if row.status != LIVE:
        raise Conflict(f"listing {row.id} is {row.status}")
    if row.available_until is not None and row.available_until <= now:
        raise Gone(f"listing {row.id} expired at {utc_z(row.available_until)}")


def facts(row: Any) -> tuple[str, tuple[str, ...]]:
    """The listing's condition and accessories: what a buyer's mandate is checked against."""
    item = json.loads(row.message)["item"]
    return item["condition"], tuple(item.get("accessories", ()))


def public_view(row: Any, now: datetime) -> dict[str, Any]:
    """The listing as anyone sees it: an allow-list, without minPrice or the mandate's constraints."""
    message = json.loads(row.message)
    view: dict[str, Any] = {field: message[field] for field in ("type", "version", "listingId", "timestamp", "seller")}
    view["item"] = {field: message["item"][field] for field in PUBLIC_ITEM if field in message["item"]}
    view["pricing"] = {field: message["pricing"][field] for field in PUBLIC_PRICING if field in message["pricing"]}
    if "logistics" in message:
        view["logistics"] = message["logistics"]
    view["ownerMandate"] = {"publicKey": message["ownerMandate"]["publicKey"], "verified": True}
    view["listingVersion"] = row.version
    view["status"] = _status(row, now)
    return view


def owner_view(row: Any, now: datetime) -> dict[str, Any]:
    """The seller's own view: the message exactly as it signed it, and the status."""
    return {**json.loads(row.message), "listingVersion": row.version, "status": _status(row, now)}


def _status(row: Any, now: datetime) -> str:
    if row.status == LIVE and row.available_until is not None and row.available_until <= now:
        return "expired"
    return row.status


def view_for(conn: Connection, listing_id: str, viewer: Agent | None, now: datetime) -> dict[str, Any]:
    row = listing_row(conn, listing_id, now, live=False)
    return owner_view(row, now) if viewer is not None and viewer.id == row.seller_id else public_view(row, now)


def search(conn: Connection, params: dict[str, str], now: datetime) -> dict[str, Any]:
    """``GET /market/listings``: live listings, cheapest first. ``condition`` is the worst
    condition wanted (``good`` finds new, like_new and good); ``maxPrice`` in major units."""
    allowed = ("category", "subcategory", "name", "condition", "maxPrice", "currency", "limit", "offset")
    only_params(params, allowed)
    query = live_listings(now)
    for field in ("category", "subcategory", "name", "currency"):
        if field in params:
            query = query.where(getattr(market_listings.c, field) == params[field])
    if "condition" in params:
        if params["condition"] not in CONDITIONS:
            raise InvalidInput(f"condition must be one of {', '.join(CONDITIONS)}")
        acceptable = CONDITIONS[: CONDITIONS.index(params["condition"]) + 1]
        query = query.where(market_listings.c.condition.in_(acceptable))
    if "maxPrice" in params:
        query = query.where(market_listings.c.ask_cents <= query_cents(params["maxPrice"], "maxPrice"))
    limit, offset = page_of(params)
    rows = conn.execute(query.order_by(market_listings.c.ask_cents, market_listings.c.id)
                        .limit(limit).offset(offset)).all()
    return {"listings": [public_view(row, now) for row in rows], "offset": offset, "limit": limit}


def live_listings(now: datetime) -> Select[Any]:
    """The listings a buyer can still act on: live, and not past their availableUntil."""
    return select(market_listings).where(
        market_listings.c.status == LIVE,
        (market_listings.c.available_until.is_(None)) | (market_listings.c.available_until > now))


def page_of(params: dict[str, str]) -> tuple[int, int]:
    """A search's ``?limit=`` (1 to MAX_PAGE, default 50) and ``?offset=`` (default 0)."""
    limit = query_integer(params.get("limit"), "limit", low=1, high=MAX_PAGE) or 50
    return limit, query_integer(params.get("offset"), "offset", low=0, high=10**9) or 0


def only_params(params: dict[str, str], allowed: tuple[str, ...]) -> None:
    """Refuse a query parameter the route does not know (a typo must not widen a search)."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise InvalidInput(f"unknown query parameter {unknown[0]!r}; allowed: {', '.join(allowed)}")


_AMOUNT = re.compile(r"[0-9]{1,10}(?:\.[0-9]{1,2})?")


def query_cents(raw: str, name: str) -> int:
    """A query amount exactly as a body's: major units, at most two decimals, nothing rounded."""
    if not _AMOUNT.fullmatch(raw):
        raise InvalidInput(f"{name} must be an amount in major units with at most two decimals, e.g. 180 or 179.99")
    return int(Decimal(raw) * 100)  # exact: at most two decimals


# -- wanted ads ------------------------------------------------------------------------------------


def post_wanted(conn: Connection, message: object, audit: AuditEvents, now: datetime) -> dict[str, Any]:
    """``POST /market/wanted``: a buyer's signed wanted ad, its budget within the owner's maxSpend."""
    validate(message)
    assert isinstance(message, dict)
    buyer = identity.sender(conn, message["buyer"]["agentId"], message)
    identity.check_owner_signed(buyer, message["ownerMandate"], "the wanted ad's ownerMandate")
    _signed_for(message["ownerMandate"], "wantedId", message["wantedId"], "wanted ad")
    active_until = parse_rfc3339(message["activeUntil"])
    if active_until <= now:
        raise InvalidMessage("/activeUntil", "is in the past: the wanted ad would never be live")
    budget, currency = amount_cents(message["budget"]["maxPrice"]), message["budget"]["currency"]
    mandate = identity.mandate_of(conn, buyer.id)
    cap = min(c for c in (mandate.max_spend, amount_cents(message["ownerMandate"]["maxSpend"])) if c is not None) \
        if mandate.max_spend is not None else None
    violation = None
    if mandate.currency != currency:
        violation = Violation("currency", f"the mandate is in {mandate.currency}, the budget in {currency}")
    elif cap is None or budget > cap:
        violation = Violation("maxSpend", "the budget is above what the owner allows" if cap else
                              "the mandate sets no maxSpend, so it does not allow buying")
    if violation is not None:
        audit.violation(buyer.id, "wanted", violation.constraint, wantedId=message["wantedId"])
        raise MandateViolation(violation)
    if conn.execute(select(market_wanted.c.id).where(market_wanted.c.id == message["wantedId"])).first() is not None:
        raise Conflict(f"wantedId {message['wantedId']} is already taken")
    conn.execute(insert(market_wanted).values(id=message["wantedId"], buyer_id=buyer.id, max_cents=budget,
                                              currency=currency, active_until=active_until, message=stored(message),
                                              created_at=now))
    wanted = row_by_id(conn, market_wanted, message["wantedId"], "wanted ad")
    notified = _notify_sellers(conn, wanted, now)
    return {"wantedId": wanted.id, "status": "active", "notifiedListings": notified}


def wanted_public_view(row: Any, now: datetime) -> dict[str, Any]:
    """A wanted ad as anyone sees it: what is wanted and the stated budget, not the mandate."""
    message = json.loads(row.message)
    view = {field: message[field] for field in ("type", "version", "wantedId", "timestamp", "buyer", "interests",
                                                 "budget", "activeUntil")}
    if "logistics" in message:
        view["logistics"] = message["logistics"]
    view["ownerMandate"] = {"publicKey": message["ownerMandate"]["publicKey"], "verified": True}
    view["status"] = "active" if row.active_until > now else "expired"
    return view


def search_wanted(conn: Connection, params: dict[str, str], now: datetime) -> dict[str, Any]:
    """``GET /market/wanted``: active wanted ads, newest first; ``category``/``subcategory``/``name``
    keep those with an interest in that item."""
    only_params(params, ("category", "subcategory", "name", "limit", "offset"))
    limit, offset = page_of(params)
    query = active_wanted(now).order_by(market_wanted.c.created_at.desc(), market_wanted.c.id)
    if not any(field in params for field in ("category", "subcategory", "name")):
        page = conn.execute(query.limit(limit).offset(offset)).all()
    else:  # the interests are JSON: filtered here, read only as far as the page goes
        with conn.execute(query) as rows:
            page = list(islice((row for row in rows if names_item(row, params)), offset, offset + limit))
    return {"wanted": [wanted_public_view(row, now) for row in page], "offset": offset, "limit": limit}


def active_wanted(now: datetime) -> Select[Any]:
    """The wanted ads still active."""
    return select(market_wanted).where(market_wanted.c.active_until > now)


def names_item(wanted_row: Any, search: dict[str, Any]) -> bool:
    """Whether one of the wanted ad's interests names every taxonomy level ``search`` asks for."""
    return any(_names_all(interest, search) for interest in _interests(wanted_row))


def _interests(row: Any) -> list[dict[str, Any]]:
    return json.loads(row.message)["interests"]


def _same_item(interest: dict[str, Any], item: dict[str, Any]) -> bool:
    """Whether an interest covers a listing's ``item``: only category is required of an interest,
    and a level it leaves out (subcategory, name) takes any value."""
    return all(interest[field] == item[field] for field in ("category", "subcategory", "name") if field in interest)


def _names_all(interest: dict[str, Any], search: dict[str, Any]) -> bool:
    """Whether an interest names every taxonomy level a search asks for, as asked (a search for
    ``name=x`` cannot tell whether an interest in a whole category covers x: it is left out)."""
    return all(interest.get(field) == search[field] for field in ("category", "subcategory", "name") if field in search)


# -- matching listings and wanted ads --------------------------------------------------------------


def fits(listing_row: Any, wanted_row: Any) -> bool:
    """Whether a listing fits a wanted ad: one interest's item, at least its ``minCondition``,
    every ``mustHaveAccessories``, the ask within budget, in the budget's currency."""
    if listing_row.currency != wanted_row.currency or listing_row.ask_cents > wanted_row.max_cents:
        return False
    condition, accessories = facts(listing_row)
    item = {"category": listing_row.category, "subcategory": listing_row.subcategory, "name": listing_row.name}
    for interest in _interests(wanted_row):
        if not _same_item(interest, item):
            continue
        minimum = interest.get("minCondition")
        if minimum is not None and CONDITIONS.index(condition) > CONDITIONS.index(minimum):
            continue
        if set(interest.get("mustHaveAccessories", ())) <= set(accessories):
            return True
    return False


def _notify_buyers(conn: Connection, row: Any, now: datetime, told_before: Any = None) -> int:
    """Tell the buyers of the live wanted ads the listing fits; how many. ``told_before``: the
    same goods as last posted — a revision of the price tells only the ads it fits newly, so that
    revising a listing again and again cannot flood an inbox."""
    # What the columns can tell is asked of the database; only the interests need the JSON.
    candidates = conn.execute(active_wanted(now).where(
        market_wanted.c.currency == row.currency, market_wanted.c.max_cents >= row.ask_cents,
        market_wanted.c.buyer_id != row.seller_id)).all()
    matches = [wanted for wanted in candidates
               if fits(row, wanted) and not (told_before is not None and fits(told_before, wanted))]
    return tell_buyers(conn, matches, "listing_matches_wanted", now, listingId=row.id, listing=public_view(row, now))


def _notify_sellers(conn: Connection, wanted: Any, now: datetime) -> int:
    interests = _interests(wanted)
    query = live_listings(now).where(
        market_listings.c.ask_cents <= wanted.max_cents,
        market_listings.c.category.in_({interest["category"] for interest in interests}))
    if all("name" in interest for interest in interests):  # only category is required of an interest
        query = query.where(market_listings.c.name.in_({interest["name"] for interest in interests}))
    rows = conn.execute(query).all()
    matches = [row for row in rows if row.seller_id != wanted.buyer_id and fits(row, wanted)]
    return tell_sellers(conn, matches, "wanted_matches_listing", now, wantedId=wanted.id,
                        wanted=wanted_public_view(wanted, now))


def tell_buyers(conn: Connection, wanted_rows: Sequence[Any], event: str, now: datetime, **facts: Any) -> int:
    """Notify the buyer of each wanted ad of ``event`` about it (its ``wantedId``, and ``facts``); how many."""
    for wanted in wanted_rows:
        inbox.notify(conn, [wanted.buyer_id], event, now, wantedId=wanted.id, **facts)
    return len(wanted_rows)


def tell_sellers(conn: Connection, listing_rows: Sequence[Any], event: str, now: datetime, **facts: Any) -> int:
    """Notify the seller of each listing of ``event`` about it (its ``listingId``, and ``facts``); how many."""
    for listing in listing_rows:
        inbox.notify(conn, [listing.seller_id], event, now, listingId=listing.id, **facts)
    return len(listing_rows)
