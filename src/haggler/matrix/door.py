"""The market's Matrix door: one room event in, the market's own action and answers out.

Every market message read from a room goes to the very functions ``POST /market/...`` calls,
through :meth:`~haggler.protocols.market.routes.Market.act` (one transaction, the audit log kept
on refusal), so the two doors hold an agent to the same schemas, signatures and mandates, and
answer with the same error codes (the answer notice carries the API's status and body).

What the door adds is Matrix's own fact: **who sent the event**. An agent is bound at
registration to the Matrix user that registered it (or the ``matrixId`` it registered over HTTP),
and every message must come from that user: a message naming an agent bound to someone else, or
carrying a ``matrixId`` that is not its sender, is refused (403 ``matrix_sender_mismatch``)
before the market reads it, and an agent with no Matrix id cannot act from Matrix at all.

Where a message may be sent follows from what it reveals. A sealed bid goes **to the bot alone**
(escrow): in a room the bot shares with the sender only. So do a mandate (its constraints are
hidden state) and a registration (its answer is the agent token). Any of them sent where others
can read it is redacted by the bot and refused, unread. A listing or wanted ad carries its
owner's floor or cap inside its signed bytes; sent in a shared room it is taken, then redacted,
and the market room gets its public view instead (the floor never stays in a room).

The door does no I/O of its own: what it owes rooms goes to the outbox (``matrix/store.py``) in
the transaction that took the event, and the bot's runtime sends it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Connection

from haggler.errors import Forbidden, HagglerError, InvalidInput
from haggler.language.classifieds import read_classified
from haggler.matrix import store, wire
from haggler.matrix.store import Incoming
from haggler.protocols.market import books, deals, identity, listings, requests, text_ads
from haggler.protocols.market.audit import MATRIX_SENDER_MISMATCH, AuditEvents
from haggler.protocols.market.routes import Market
from haggler.server.errors import status_for
from haggler.storage.rows import row_by_id
from haggler.storage.schema import market_deals, market_requests, market_wanted

log = logging.getLogger("haggler.matrix")

#: Messages that only a room shared by the sender and the bot alone may carry.
PRIVATE_ONLY = ("sealed_bid", "mandate", "register")
#: The door's own message types, beside the spec's: what the API takes as a bare body.
DOOR_TYPES = ("register", "mandate", "deal_signature", "owner_approval", "clear", "listings", "deal")
MESSAGE_TYPES = ("listing", "wanted", "contact_request", "protocol_agreement", "sealed_bid", "instant_match",
                 "offer", "order") + DOOR_TYPES


#: Outcomes of events that did nothing on the market: redacting one needs no word from the bot.
QUIET_OUTCOMES = ("ignored", "chat", "edit", "redaction", "flood", "duplicate")


class SenderMismatch(Forbidden):
    """The event's sender is not the Matrix user the message's agent is bound to (HTTP 403).
    ``agent_id``: the agent it named, whose owner the audit entry is for (None for a registration);
    ``claimed``: the Matrix id the message carried, or the one the agent is bound to."""

    def __init__(self, message: str, *, agent_id: str | None, claimed: str | None) -> None:
        super().__init__(message)
        self.agent_id = agent_id
        self.claimed = claimed

    def fields(self) -> dict[str, Any]:
        return {"error": "matrix_sender_mismatch", "reason": self.message}


class NotPrivate(Forbidden):
    """A message that must go to the bot alone, sent where others read it (HTTP 403)."""

    def fields(self) -> dict[str, Any]:
        return {"error": "not_private", "reason": self.message}


Handler = Callable[[Connection, AuditEvents, Incoming, dict[str, Any]], tuple[int, dict[str, Any]]]


class MarketDoor:
    """Takes the bot's pending events, one at a time, against ``market``."""

    def __init__(self, market: Market, bot: str, market_room: str) -> None:
        self.market = market
        self.bot = bot
        self.market_room = market_room
        self._handlers: dict[str, Handler] = {
            "register": self._register, "mandate": self._mandate, "listing": self._listing, "wanted": self._wanted,
            "contact_request": self._contact, "protocol_agreement": self._agreement, "sealed_bid": self._bid,
            "offer": self._offer, "instant_match": self._instant, "order": self._order,
            "deal_signature": self._signature, "owner_approval": self._approval, "clear": self._clear,
            "listings": self._listings, "deal": self._deal}

    @property
    def now(self) -> datetime:
        return self.market.clock()

    # -- one event ---------------------------------------------------------------------------------------

    def take(self, event: Incoming) -> str:
        """Act on one stored event and mark it taken, with what it owes rooms; returns the outcome
        in a word. A refusal is answered, audited and marked taken too: the same event is never
        read twice, whatever happened."""
        if event.type == "m.room.redaction":
            return self._finish(event, "redaction", lambda conn: self._on_redaction(conn, event))
        reading = wire.read_content(event.content)
        if reading is None:
            return self._finish(event, "ignored", lambda conn: None)
        if isinstance(reading, wire.Edit):
            return self._finish(event, "edit", lambda conn: self._answer(
                conn, event, 400, {"error": "edits are not read: a market message acts once, as first sent; "
                                            "send a new message"}))
        if isinstance(reading, wire.Malformed):
            return self._finish(event, "malformed", lambda conn: self._answer(conn, event, 400,
                                                                              {"error": reading.reason}))
        if isinstance(reading, wire.Text):
            return self._text(event, reading.text)
        return self._message(event, reading.message)

    def _finish(self, event: Incoming, outcome: str, then: Callable[[Connection], None]) -> str:
        with self.market.db.write() as conn:
            if store.finish(conn, event.event_id, outcome, self.now):
                then(conn)
        return outcome

    def _message(self, event: Incoming, message: dict[str, Any]) -> str:
        kind = message.get("type")
        handler = self._handlers.get(kind) if isinstance(kind, str) else None
        if handler is None:
            return self._refuse(event, InvalidInput(
                f"/type: {'is required' if kind is None else 'unknown message type'}; one of: "
                + ", ".join(MESSAGE_TYPES)), kind)
        if kind in PRIVATE_ONLY and not event.private:
            return self._refuse(event, NotPrivate(
                f"a {kind} goes to the market bot alone: send it in a room only you and the bot are in"),
                kind, redact=True)

        def act(conn: Connection, audit: AuditEvents) -> tuple[int, dict[str, Any]]:
            try:
                status, data = handler(conn, audit, event, message)
            except SenderMismatch as exc:  # an impersonation: its owner most wants to hear of it
                audit.add(exc.agent_id, MATRIX_SENDER_MISMATCH,
                          {"action": kind, "sender": event.sender, "claimed": exc.claimed, "eventId": event.event_id})
                raise
            if not store.finish(conn, event.event_id, str(kind), self.now):
                raise _AlreadyTaken()
            if _hidden(message) and not event.private:
                store.enqueue_redaction(conn, self.bot, event.room_id, event.event_id,
                                        "it carried the owner's hidden limits; the market room shows its public "
                                        "view", self.now)
            self._answer(conn, event, status, data)
            return status, data
        try:
            self.market.act(act)
        except _AlreadyTaken:
            return "duplicate"
        except HagglerError as exc:
            return self._refuse(event, exc, kind, redact=_hidden(message) and not event.private)
        return str(kind)

    def _refuse(self, event: Incoming, exc: HagglerError, kind: object, *, redact: bool = False) -> str:
        outcome = f"refused:{kind if isinstance(kind, str) else '?'}"

        def then(conn: Connection) -> None:
            if redact:
                store.enqueue_redaction(conn, self.bot, event.room_id, event.event_id,
                                        "it carried what only the market may read", self.now)
            self._answer(conn, event, status_for(exc), exc.fields())
        return self._finish(event, outcome, then)

    def _answer(self, conn: Connection, event: Incoming, status: int, answer: dict[str, Any]) -> None:
        store.enqueue(conn, self.bot, event.room_id, wire.answer_content(
            status, answer, _summary(status, answer), about=_about(event)), self.now)

    # -- who may say what ---------------------------------------------------------------------------------

    def _bound(self, conn: Connection, agent_id: object, event: Incoming, message: dict[str, Any]) -> None:
        """Refuse unless agent ``agent_id`` is bound to the event's sender; an unknown agent is
        left to the market, which refuses it as it does over HTTP (401)."""
        for who in ("seller", "buyer"):
            ref = message.get(who)
            claimed = ref.get("matrixId") if isinstance(ref, dict) else None
            if claimed is not None and claimed != event.sender:
                raise SenderMismatch(f"{who}.matrixId is {claimed!r}, but {event.sender} sent this message",
                                     agent_id=agent_id if isinstance(agent_id, str) else None, claimed=str(claimed))
        agent = identity.find(conn, agent_id) if isinstance(agent_id, str) else None
        if agent is not None and agent.matrix_id != event.sender:
            bound = f"is bound to {agent.matrix_id}" if agent.matrix_id else "has no Matrix id: it acts over HTTP only"
            raise SenderMismatch(f"agent {agent.id} {bound}, but {event.sender} sent this message",
                                 agent_id=agent.id, claimed=agent.matrix_id)

    def _party(self, conn: Connection, table: Any, row_id: object, what: str, party: object) -> str | None:
        """The agent id of ``party`` (buyer or seller) of a request or deal, if both exist."""
        if not isinstance(row_id, str) or party not in ("buyer", "seller"):
            return None
        try:
            row = row_by_id(conn, table, row_id, what)
        except HagglerError:
            return None
        return row.buyer_id if party == "buyer" else row.seller_id

    # -- the messages ----------------------------------------------------------------------------------

    def _register(self, conn: Connection, audit: AuditEvents, event: Incoming,
                  message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        body = {key: value for key, value in message.items() if key != "type"}
        if body.setdefault("matrixId", event.sender) != event.sender:
            raise SenderMismatch(f"matrixId is {body['matrixId']!r}, but {event.sender} sent this registration",
                                 agent_id=None, claimed=str(body["matrixId"]))
        agent, token = identity.register(conn, body, self.now)
        store.remember_room(conn, self.bot, f"inbox:{agent.id}", event.room_id, self.now)
        return 201, {**agent.view(), "token": token}

    def _mandate(self, conn: Connection, audit: AuditEvents, event: Incoming,
                 message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        mandate = message.get("mandate")
        self._bound(conn, mandate.get("agentId") if isinstance(mandate, dict) else None, event, message)
        if set(message) - {"type", "mandate"}:
            raise InvalidInput("a mandate message is {\"type\": \"mandate\", \"mandate\": {…the signed mandate…}}")
        return deals.file_mandate(conn, mandate, audit, self.now)

    def _listing(self, conn: Connection, audit: AuditEvents, event: Incoming,
                 message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self._bound(conn, _ref(message, "seller"), event, message)
        status, data = listings.post_listing(conn, message, audit, self.now)
        self._announce(conn, "listing", listings.view_for(conn, data["listingId"], None, self.now))
        return status, data

    def _wanted(self, conn: Connection, audit: AuditEvents, event: Incoming,
                message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self._bound(conn, _ref(message, "buyer"), event, message)
        data = listings.post_wanted(conn, message, audit, self.now)
        row = row_by_id(conn, market_wanted, data["wantedId"], "wanted ad")
        self._announce(conn, "wanted", listings.wanted_public_view(row, self.now))
        return 201, data

    def _announce(self, conn: Connection, kind: str, view: dict[str, Any]) -> None:
        """Post a listing's or wanted ad's public view to the market room: what the room shows of
        it, wherever it was sent (a listing sent to the bot privately keeps its floor private)."""
        ident = view.get("listingId") or view.get("wantedId")
        store.enqueue(conn, self.bot, self.market_room,
                      wire.notice(f"{kind} {ident}: {_describe(view)}", **{f"{wire.CONTENT_KEY}.{kind}": wire.carry(view)}),
                      self.now)

    def _contact(self, conn: Connection, audit: AuditEvents, event: Incoming,
                 message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self._bound(conn, _ref(message, "buyer"), event, message)
        data = requests.contact(conn, message, audit, self.now)
        seller = row_by_id(conn, market_requests, data["requestId"], "request").seller_id
        self.market.limits.count_contact(conn, message["buyer"]["agentId"], seller, f"matrix:{event.sender}")
        return 201, data

    def _agreement(self, conn: Connection, audit: AuditEvents, event: Incoming,
                   message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        request_id = message.get("requestId")
        self._bound(conn, self._party(conn, market_requests, request_id, "request", "seller"), event, message)
        return 200, requests.agree(conn, _id(request_id), message, audit, self.now)

    def _bid(self, conn: Connection, audit: AuditEvents, event: Incoming,
             message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        request_id = message.get("requestId")
        self._bound(conn, self._party(conn, market_requests, request_id, "request", message.get("party")),
                    event, message)
        return requests.bid(conn, _id(request_id), message, audit, self.now, self.market.settings.deal_expiry)

    def _offer(self, conn: Connection, audit: AuditEvents, event: Incoming,
               message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        request_id = message.get("requestId")
        self._bound(conn, self._party(conn, market_requests, request_id, "request", message.get("party")),
                    event, message)
        settings = self.market.settings
        return requests.make_offer(conn, _id(request_id), message, audit, self.now, settings.offer_turn_cap,
                                   settings.deal_expiry)

    def _instant(self, conn: Connection, audit: AuditEvents, event: Incoming,
                 message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self._bound(conn, _ref(message, "buyer"), event, message)
        return 201, requests.instant(conn, _id(message.get("listingId")), message, audit, self.now,
                                     self.market.settings.deal_expiry)

    def _order(self, conn: Connection, audit: AuditEvents, event: Incoming,
               message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self._bound(conn, message.get("agentId"), event, message)
        return 201, books.place(conn, books.check_item(_id(message.get("item"))), message, audit, self.now)

    def _signature(self, conn: Connection, audit: AuditEvents, event: Incoming,
                   message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        deal_id, body = self._deal_body(conn, event, message)
        return 200, deals.sign(conn, deal_id, body, audit, self.market.clock)

    def _approval(self, conn: Connection, audit: AuditEvents, event: Incoming,
                  message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        deal_id, body = self._deal_body(conn, event, message)
        return 200, deals.approve(conn, deal_id, body, audit, self.market.clock)

    def _clear(self, conn: Connection, audit: AuditEvents, event: Incoming,
               message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """``{"type": "clear", "item"}``: call an order book's auction, as any registered agent may
        (``POST /market/books/{item}/clear``); here, any agent bound to the sender."""
        if identity.bound_to(conn, event.sender) is None:
            raise SenderMismatch(f"{event.sender} is not the Matrix user of any registered agent")
        item = books.check_item(_id(message.get("item")))
        return 200, books.clear(conn, item, audit, self.now, self.market.settings.deal_expiry)

    def _listings(self, conn: Connection, audit: AuditEvents, event: Incoming,
                  message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """``{"type": "listings", "query": {…}}``: ``GET /market/listings?…`` (public), answered
        from the market itself rather than from what a room happened to show."""
        query = message.get("query", {})
        if not isinstance(query, dict) or not all(isinstance(v, str) for v in query.values()):
            raise InvalidInput("query must be an object of strings: GET /market/listings's query parameters")
        return 200, listings.search(conn, query, self.now)

    def _deal(self, conn: Connection, audit: AuditEvents, event: Incoming,
              message: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """``{"type": "deal", "dealId"}``: ``GET /market/deals/{dealId}``, for the party bound to
        the sender."""
        deal_id = _id(message.get("dealId"))
        row = row_by_id(conn, market_deals, deal_id, "deal")
        caller = next((agent for agent in (identity.find(conn, row.buyer_id), identity.find(conn, row.seller_id))
                       if agent is not None and agent.matrix_id == event.sender), None)
        if caller is None:
            raise Forbidden("only the deal's two parties see it")
        deals.expire_if_due(conn, deal_id, self.now)
        return 200, deals.view(conn, deal_id, caller)

    def _deal_body(self, conn: Connection, event: Incoming, message: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """A deal signature or approval: ``{"type", "dealId", "party", "signature"}``, from the
        party's own agent (an owner's approval reaches the market through its agent's user)."""
        deal_id = _id(message.get("dealId"))
        self._bound(conn, self._party(conn, market_deals, deal_id, "deal", message.get("party")), event, message)
        deals.expire_if_due(conn, deal_id, self.now)
        return deal_id, {key: value for key, value in message.items() if key not in ("type", "dealId")}

    # -- text, redactions -------------------------------------------------------------------------------

    def _text(self, event: Incoming, text: str) -> str:
        """A plain-text ``SELLING:``/``BUYING:`` line in the market room becomes an unsigned ad;
        other text, and any text elsewhere (free-text haggling in a DM), is chat."""
        if event.room_id != self.market_room or read_classified(text) is None:
            return self._finish(event, "chat", lambda conn: None)

        def act(conn: Connection, audit: AuditEvents) -> dict[str, Any]:
            ad = text_ads.post_text_ad(conn, poster=event.sender, room_id=event.room_id, event_id=event.event_id,
                                       text=text, audit=audit, now=self.now)
            if not store.finish(conn, event.event_id, "text_ad", self.now):
                raise _AlreadyTaken()
            self._answer(conn, event, 201, {"ad": ad, "note": "an unsigned natural-language ad: no mandate binds it"})
            return ad
        try:
            self.market.act(act)
        except _AlreadyTaken:
            return "duplicate"
        except HagglerError as exc:
            return self._refuse(event, exc, "text_ad")
        return "text_ad"

    def _on_redaction(self, conn: Connection, event: Incoming) -> None:
        """A redaction withdraws nothing the market did with a message (a listing stays listed, an
        offer stays made: withdrawing is a message of its own); the sender of a redacted market
        message is told so, under it. Redactions of chat, and the bot's own, pass in silence."""
        if event.redacts is None or event.sender == self.bot:
            return
        known = store.taken(conn, event.redacts)
        if known is None or known[1] is None or known[1] in QUIET_OUTCOMES:
            return
        store.enqueue(conn, self.bot, event.room_id, wire.notice(
            "the market already acted on this message; redacting it withdraws nothing", about=_about(known[0])),
            self.now)


class _AlreadyTaken(Exception):
    """Another worker took the event first: roll back what this one did."""


def _about(event: Incoming) -> dict[str, Any]:
    return {"event_id": event.event_id, "content": event.content}


def _ref(message: dict[str, Any], who: str) -> object:
    ref = message.get(who)
    return ref.get("agentId") if isinstance(ref, dict) else None


def _id(value: object) -> str:
    """An id a message names, for the market function that takes it from a URL path over HTTP:
    the message's schema checks it again, this only keeps a non-string out of a query."""
    if not isinstance(value, str) or not value:
        raise InvalidInput("the message must name the id it is about as a string (requestId, listingId, dealId, item)")
    return value


def _hidden(message: dict[str, Any]) -> bool:
    """Whether the message carries its owner's hidden limits in its signed bytes."""
    if message.get("type") == "listing":
        pricing = message.get("pricing")
        return "ownerMandate" in message or (isinstance(pricing, dict) and "minPrice" in pricing)
    return message.get("type") == "wanted" and "ownerMandate" in message


def _summary(status: int, answer: dict[str, Any]) -> str:
    """One line for people reading the room."""
    if status >= 400:
        constraint = f" ({answer['constraint']})" if "constraint" in answer else ""
        where = f" at {answer['path']}" if answer.get("path") else ""
        return f"refused {status} {answer.get('error', '')}{constraint}{where}: {answer.get('reason', '')}".rstrip(": ")
    facts = ", ".join(f"{key} {answer[key]}" for key in ("listingId", "wantedId", "requestId", "dealId", "state",
                                                           "status", "agentId") if isinstance(answer.get(key), str))
    return f"accepted ({status}){': ' + facts if facts else ''}"


def _describe(view: dict[str, Any]) -> str:
    item = view.get("item") or (view.get("interests") or [{}])[0]
    pricing = view.get("pricing") or view.get("budget") or {}
    price = pricing.get("askPrice", pricing.get("maxPrice"))
    return f"{item.get('name', '?')} ({item.get('condition', item.get('minCondition', 'any'))}) at " \
           f"{price} {pricing.get('currency', '')}".strip()
