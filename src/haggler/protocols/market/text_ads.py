"""Unsigned plain-text classified ads from the Matrix market room (issue 32; spec 003, Phase 2:
"backward compatible (natural language listings still work)").

The market bot reads lines such as ``SELLING: nintendo switch — asking 200€ (can negotiate). DM
me.`` from the room and hands each here with the event it came in. Such an ad is its poster's own
words: no agent signed it and no owner's mandate binds it. So it is kept apart from the signed
listings and wanted ads — its own table, ``txt_…`` ids no listing may take — shown only labelled
(``"unsigned": true``, ``"mandate": null``) and only where a client asks for it, and nothing binds
a price to it here: a contact, instant match, sealed bid or offer on a ``txt_…`` id is refused
(``listings.UnsignedAd``); one negotiates with its poster in a Matrix DM.

What the language layer reads of a line (``language/classifieds.py``: the item's name, the price,
currency and negotiability) is a reading for search and for telling the agents it may concern,
never a term: the price filters nobody, the name alone decides who is told. The text is screened
like any free text the market stores, and flagged, never altered.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select
from sqlalchemy.exc import IntegrityError

from haggler.errors import Conflict, InvalidInput
from haggler.language.classifieds import MAX_TEXT, read_classified
from haggler.money import to_decimal_number
from haggler.protocols.market import listings
from haggler.protocols.market.audit import AuditEvents
from haggler.protocols.market.messages import definition
from haggler.storage.rows import row_by_id
from haggler.storage.schema import market_listings, market_text_ads
from haggler.timestamps import utc_z

SELLING, BUYING = "selling", "buying"
LIVE = "live"
#: Where the market's unsigned ads come from.
SOURCE = "matrix"
_MATRIX_ID = definition("matrixId")
#: Room and event ids as Matrix writes them: ``!opaque:server``, ``$opaque``.
_ROOM_ID, _EVENT_ID = re.compile(r"![^\s]{1,254}"), re.compile(r"\$[^\s]{1,254}")
#: The search parameters a text ad can never satisfy: it states no taxonomy and no condition.
_UNSTATED = ("category", "subcategory", "condition")


def post_text_ad(conn: Connection, *, poster: str, room_id: str, event_id: str, text: str, audit: AuditEvents,
                 now: datetime) -> dict[str, Any]:
    """Keep the classified ad ``text`` that ``poster`` sent in ``room_id`` as ``event_id``, and
    tell the agents whose wanted ads or listings name its item; returns its public view.

    Taken once per event: the same event again returns the same ad and tells nobody again (the
    same event with other content is 409). The text is screened before it is read, so a line
    refused as no ad (400) still leaves its trace in the audit log: the room showed it to all."""
    _check_origin(poster, room_id, event_id)
    taken = conn.execute(select(market_text_ads).where(market_text_ads.c.event_id == event_id)).first()
    if taken is not None:
        if (taken.poster, taken.room_id, taken.text) != (poster, room_id, text):
            raise Conflict(f"event {event_id} was already taken, with another poster, room or text")
        return public_view(taken)
    audit.screen(None, "/text", text, poster=poster, roomId=room_id, eventId=event_id)
    if len(text) > MAX_TEXT:
        raise InvalidInput(f"the text is longer than {MAX_TEXT} characters: not a classified ad")
    ad = read_classified(text)
    if ad is None:
        raise InvalidInput("not a classified ad: an ad opens with SELLING: or BUYING: (or WTS:, FOR SALE:, WTB:, "
                           "WANTED:), after optional tags such as RUN_ID:abc, and names the item")
    ad_id = listings.TEXT_AD_PREFIX + secrets.token_hex(10)
    try:
        conn.execute(insert(market_text_ads).values(
            id=ad_id, kind=ad.kind, poster=poster, room_id=room_id, event_id=event_id, text=text, item=ad.item,
            name=ad.name, price_cents=ad.price_cents, currency=ad.currency, negotiable=ad.negotiable,
            posted_at=now, status=LIVE))
    except IntegrityError:  # a racing request took the same event first
        raise Conflict(f"event {event_id} is already being taken") from None
    row = row_by_id(conn, market_text_ads, ad_id, "text ad")
    _tell(conn, row, now)
    return public_view(row)


def _check_origin(poster: str, room_id: str, event_id: str) -> None:
    """400 unless the ad names a Matrix user, room and event as Matrix writes them."""
    if len(poster) > _MATRIX_ID["maxLength"] or not re.fullmatch(_MATRIX_ID["pattern"], poster):
        raise InvalidInput(f"poster must be a Matrix user id, @localpart:server, not {poster[:80]!r}")
    if not _ROOM_ID.fullmatch(room_id):
        raise InvalidInput(f"room_id must be a Matrix room id, !opaque:server, not {room_id[:80]!r}")
    if not _EVENT_ID.fullmatch(event_id):
        raise InvalidInput(f"event_id must be a Matrix event id, $opaque, not {event_id[:80]!r}")


def _tell(conn: Connection, row: Any, now: datetime) -> None:
    """Tell the agents the ad names the item of: a selling ad the buyers of the active wanted ads
    with an interest of that name (``text_listing_matches_wanted``), a buying ad the sellers of
    the live listings of that name (``text_wanted_matches_listing``). An ad whose item made no
    name tells nobody."""
    if row.name is None:
        return
    facts = {"adId": row.id, "ad": public_view(row)}
    if row.kind == SELLING:
        wanted = [ad for ad in conn.execute(listings.active_wanted(now)).all()
                  if listings.names_item(ad, {"name": row.name})]
        listings.tell_buyers(conn, wanted, "text_listing_matches_wanted", now, **facts)
    else:
        named = conn.execute(listings.live_listings(now).where(market_listings.c.name == row.name)).all()
        listings.tell_sellers(conn, named, "text_wanted_matches_listing", now, **facts)


def public_view(row: Any) -> dict[str, Any]:
    """The ad as anyone sees it: the poster's words and the market's reading of them, labelled
    unsigned, with no mandate (none binds it)."""
    return {"adId": row.id, "kind": row.kind, "unsigned": True, "source": SOURCE, "mandate": None,
            "poster": row.poster, "roomId": row.room_id, "eventId": row.event_id, "text": row.text,
            "item": {"words": row.item, "name": row.name},
            "price": None if row.price_cents is None else to_decimal_number(row.price_cents),
            "currency": row.currency, "negotiable": row.negotiable, "postedAt": utc_z(row.posted_at),
            "status": row.status}


def view(conn: Connection, ad_id: str) -> dict[str, Any]:
    """``GET /market/ads/{adId}``: one ad's public view (404 if unknown)."""
    return public_view(row_by_id(conn, market_text_ads, ad_id, "text ad"))


def search_with_unsigned(conn: Connection, kind: str, params: dict[str, str], now: datetime) -> dict[str, Any]:
    """``GET /market/listings`` (``kind`` selling) and ``GET /market/wanted`` (buying): the signed
    search's answer as it always was; with ``?include=unsigned`` also the live text ads of that
    kind the same parameters select, newest first, under a key of their own (``unsigned``) so that
    no client takes one for a signed listing or wanted ad."""
    params = dict(params)
    include = params.pop("include", None)
    if include not in (None, "unsigned"):
        raise InvalidInput(f"include must be 'unsigned', not {include!r}")
    answer = (listings.search if kind == SELLING else listings.search_wanted)(conn, params, now)
    if include is not None:
        answer["unsigned"] = _search(conn, kind, params)
    return answer


def _search(conn: Connection, kind: str, params: dict[str, str]) -> list[dict[str, Any]]:
    """The live ads of ``kind`` a signed search's (already checked) parameters select: ``name``,
    ``currency`` and ``maxPrice`` (an ad without a read price is left out) as for listings, the
    same page; none when the search asks for what an ad never states (category, condition)."""
    if any(field in params for field in _UNSTATED):
        return []
    query = select(market_text_ads).where(market_text_ads.c.kind == kind, market_text_ads.c.status == LIVE)
    for field in ("name", "currency"):
        if field in params:
            query = query.where(getattr(market_text_ads.c, field) == params[field])
    if "maxPrice" in params:
        query = query.where(market_text_ads.c.price_cents <= listings.query_cents(params["maxPrice"], "maxPrice"))
    limit, offset = listings.page_of(params)
    rows = conn.execute(query.order_by(market_text_ads.c.posted_at.desc(), market_text_ads.c.id)
                        .limit(limit).offset(offset)).all()
    return [public_view(row) for row in rows]
