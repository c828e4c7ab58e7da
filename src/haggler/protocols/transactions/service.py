"""Transactions and their negotiation (spec 004, "Negotiation"), on the shared engine.

A transaction's messages are replayed into an engine :class:`Negotiation` on every change, so
the engine's rules decide whose turn it is (strict alternation: the turn follows the last
sender), refuse an accept that carries terms, and end the exchange at the round cap. Round 0 is
the consumer's ``initial_offer``; rounds 1..10 are the replies, so the cap is 11 engine turns:
a tenth reply that is not an acceptance cancels the transaction.

Around the engine, this module keeps what the spec adds: offer expiry (each offer carries its
own ``expiresInSeconds``; an offer left unanswered past it cancels the transaction, enforced
whenever the transaction is read or changed and by :func:`expire_due`), the consumer's
``maxPriceCents`` as a hard cap on what it offers or accepts, and money: on a match the agreed
amount is held from the consumer's wallet in the same database transaction as the status change.

Every change locks the transaction's row first (``FOR UPDATE`` on PostgreSQL; SQLite writes are
serialized), so two racing accepts, or an accept racing a withdraw, have exactly one winner.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select

from haggler.engine import (
    Action,
    Negotiation,
    OutcomeKind,
    Rules,
    RuleViolation,
    Terms,
    Turn,
)
from haggler.errors import Conflict, Forbidden, InvalidInput, NotFound
from haggler.protocols.transactions import ledger, views
from haggler.protocols.transactions.accounts import NEGOTIABLE, Agent, parse_sla, service_row
from haggler.protocols.fields import free_json, integer, json_object, one_of, only, text
from haggler.storage.prepared import Prepared
from haggler.storage.rows import row_by_id, update_by_id
from haggler.storage.schema import exchange_transactions, negotiation_messages, services

CONSUMER, PROVIDER = "consumer", "provider"
NEGOTIATING, MATCHED, COMPLETED, CANCELLED = "negotiating", "matched", "completed", "cancelled"
INITIAL_OFFER, COUNTER_OFFER, ACCEPT, REJECT, WITHDRAW = "initial_offer", "counter_offer", "accept", "reject", "withdraw"
MESSAGE_TYPES = (COUNTER_OFFER, ACCEPT, REJECT, WITHDRAW)
MAX_ROUNDS = 10
DEFAULT_EXPIRY_SECONDS, MAX_EXPIRY_SECONDS = 300, 3600
MAX_MESSAGE_CHARS = 2000
#: The initial offer plus at most MAX_ROUNDS replies.
RULES = Rules((CONSUMER, PROVIDER), strict_alternation=True, max_turns=MAX_ROUNDS + 1)
_ENGINE_ACTION = {INITIAL_OFFER: Action.OFFER, COUNTER_OFFER: Action.OFFER, ACCEPT: Action.ACCEPT,
                  REJECT: Action.REJECT, WITHDRAW: Action.REJECT}
_END_REASON = {REJECT: "rejected", WITHDRAW: "withdrawn"}


@dataclass(frozen=True, slots=True)
class Offer:
    """Proposed terms: a price, and optionally a modified SLA and scope modifications."""

    price_cents: int
    sla: dict[str, int] | None = None
    scope_modifications: Any = None

    def engine_terms(self) -> Terms:
        # The SLA and scope travel as canonical JSON "extras", so the engine compares whole packages.
        extras = tuple(json.dumps(part, sort_keys=True) for part in (self.sla, self.scope_modifications)
                       if part is not None)
        return Terms(self.price_cents, "USD", extras)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"priceCents": self.price_cents}
        if self.sla is not None:
            out["sla"] = self.sla
        if self.scope_modifications is not None:
            out["scopeModifications"] = self.scope_modifications
        return out


def parse_terms(value: object) -> Offer:
    terms = json_object(value, "terms")
    only(terms, ("priceCents", "sla", "scopeModifications"))
    price = integer(terms.get("priceCents"), "terms.priceCents", low=1, high=ledger.MAX_AMOUNT_CENTS)
    sla = parse_sla(terms["sla"], partial=True) if terms.get("sla") is not None else None
    scope = terms.get("scopeModifications")
    if scope is not None:
        free_json(scope, "terms.scopeModifications")
    return Offer(price, sla, scope)


def parse_expiry(value: object) -> int:
    if value is None:
        return DEFAULT_EXPIRY_SECONDS
    return integer(value, "expiresInSeconds", low=1, high=MAX_EXPIRY_SECONDS)


def parse_message(value: object) -> str | None:
    return None if value is None else text(value, "message", max_length=MAX_MESSAGE_CHARS, allow_empty=True)


# -- creating -------------------------------------------------------------------------------------

def create(conn: Connection, consumer: Agent, body: dict[str, Any], now: datetime) -> dict[str, Any]:
    """Open a transaction on a service. It negotiates when the service's price is negotiable or
    the consumer's ``maxPriceCents`` differs from the base price (spec: "How negotiation
    works"), starting with the consumer's initial offer; otherwise it is matched at the base
    price at once and the base price is held from the consumer's wallet."""
    only(body, ("serviceId", "maxPriceCents", "input", "initialOfferCents", "message", "expiresInSeconds"))
    service_id = text(body.get("serviceId"), "serviceId", max_length=40)
    service = service_row(conn, service_id)
    if service.provider_id == consumer.id:
        raise InvalidInput("an agent cannot open a transaction on its own service")
    max_price = integer(body.get("maxPriceCents"), "maxPriceCents", low=1, high=ledger.MAX_AMOUNT_CENTS)
    initial = integer(body.get("initialOfferCents", max_price), "initialOfferCents", low=1, high=max_price)
    # Checked on both paths, so a bad field is a 400 even when the transaction matches at once.
    expiry = parse_expiry(body.get("expiresInSeconds"))
    message = parse_message(body.get("message"))
    if "input" not in body:
        raise InvalidInput("input is required: what the provider works on (any JSON value)")
    row = {
        "id": "txn_" + secrets.token_urlsafe(12), "service_id": service.id, "consumer_id": consumer.id,
        "provider_id": service.provider_id, "max_price_cents": max_price,
        "input": free_json(body.get("input"), "input"), "created_at": now, "updated_at": now,
    }
    negotiates = service.price_model == NEGOTIABLE or max_price != service.base_price_cents
    if negotiates:
        conn.execute(insert(exchange_transactions).values(
            **row, status=NEGOTIATING, held_cents=0, offer_expires_at=now + timedelta(seconds=expiry)))
        _insert_message(conn, row["id"], 0, CONSUMER, INITIAL_OFFER, Offer(initial), message,
                        now + timedelta(seconds=expiry), now)
    else:
        conn.execute(insert(exchange_transactions).values(
            **row, status=MATCHED, price_cents=service.base_price_cents, sla=service.sla,
            held_cents=service.base_price_cents))
        ledger.hold(conn, consumer.id, service.base_price_cents, now, row["id"])
    return read(conn, consumer, row["id"], now)


# -- reading --------------------------------------------------------------------------------------

def read(conn: Connection, caller: Agent, transaction_id: str, now: datetime, *, enforce: bool = False) -> dict[str, Any]:
    """The transaction as a party sees it. With ``enforce`` (a write transaction), an offer
    expiry that has passed cancels it first; without, the caller checks ``offerExpiresAt``
    and comes back with a write transaction when it has passed."""
    row = _load(conn, transaction_id, caller, lock=enforce)
    if enforce and _expired(row, now):
        _cancel(conn, row, "offer_expired", now)
        row = _reread(conn, transaction_id)
    return _transaction_view(conn, row)


def messages(conn: Connection, caller: Agent, transaction_id: str) -> list[dict[str, Any]]:
    _load(conn, transaction_id, caller, lock=False)  # 404 / 403 first
    rows = conn.execute(select(negotiation_messages).where(negotiation_messages.c.transaction_id == transaction_id)
                        .order_by(negotiation_messages.c.seq))
    return [views.message_view(row, _offer_of(row)) for row in rows]


def expiry_due(conn: Connection, transaction_id: str, now: datetime) -> bool:
    """Whether :func:`enforce_expiry` would cancel the transaction now: a read, so that a message
    to a live offer does not pay for a write transaction of its own first."""
    try:
        row = row_by_id(conn, exchange_transactions, transaction_id, "transaction")
    except NotFound:
        return False
    return _expired(row, now)


def enforce_expiry(conn: Connection, transaction_id: str, now: datetime) -> None:
    """Cancel the transaction if its offer expired unanswered. Run in a transaction of its own
    before a message is handled, so that the cancellation is kept even though the message is
    then refused (a refusal rolls its own transaction back)."""
    try:
        row = _locked(conn, transaction_id)
    except NotFound:
        return
    if _expired(row, now):
        _cancel(conn, row, "offer_expired", now)


#: Transactions the sweep cancels per database transaction.
EXPIRY_BATCH = 100


def expire_due(conn: Connection, now: datetime, *, batch: int = EXPIRY_BATCH) -> int:
    """Cancel negotiating transactions whose offer expired unanswered (the background sweep)."""
    due = conn.execute(select(exchange_transactions.c.id).where(
        exchange_transactions.c.status == NEGOTIATING, exchange_transactions.c.offer_expires_at <= now)
        .limit(batch)).scalars().all()
    cancelled = 0
    for transaction_id in due:
        row = _locked(conn, transaction_id)
        if _expired(row, now):
            _cancel(conn, row, "offer_expired", now)
            cancelled += 1
    return cancelled


# -- negotiating ----------------------------------------------------------------------------------

def negotiate(conn: Connection, caller: Agent, transaction_id: str, body: dict[str, Any],
              now: datetime) -> dict[str, Any]:
    """One negotiation message from a party (spec: "Message types", "Turn enforcement",
    "Round cap", "Offer expiry", "Accept behavior")."""
    only(body, ("type", "terms", "message", "expiresInSeconds"))
    kind = one_of(body.get("type"), "type", MESSAGE_TYPES)
    if kind == ACCEPT and body.get("terms") is not None:
        raise InvalidInput("accept agrees to the most recent offer's terms; it cannot carry terms or a price")
    if kind != COUNTER_OFFER and body.get("expiresInSeconds") is not None:
        raise InvalidInput("expiresInSeconds belongs to a counter_offer")
    offer = parse_terms(body.get("terms")) if kind == COUNTER_OFFER else None
    expiry = parse_expiry(body.get("expiresInSeconds")) if kind == COUNTER_OFFER else None
    message = parse_message(body.get("message"))

    row = _load(conn, transaction_id, caller, lock=True)
    if _expired(row, now):
        # The caller enforces expiry in a transaction of its own first (see enforce_expiry), so
        # this is only an expiry that fell between the two: refuse; the sweep cancels it.
        raise Conflict("the offer on the table expired unanswered; the transaction is cancelled")
    if row.status != NEGOTIATING:
        why = " because the offer on the table expired unanswered" if row.end_reason == "offer_expired" else ""
        raise Conflict(f"the transaction is {row.status}{why}; it takes no more negotiation messages")
    party = CONSUMER if caller.id == row.consumer_id else PROVIDER
    stored = _stored_messages(conn, transaction_id)
    negotiation = Negotiation.replay(RULES, (turn for turn, _ in stored))
    standing = negotiation.standing.get(PROVIDER if party == CONSUMER else CONSUMER)
    if party == CONSUMER and offer is not None and offer.price_cents > row.max_price_cents:
        raise InvalidInput(f"terms.priceCents {offer.price_cents} is above your maxPriceCents {row.max_price_cents}")
    if party == CONSUMER and kind == ACCEPT and standing is not None and standing.price_cents > row.max_price_cents:
        raise InvalidInput(f"the offer on the table ({standing.price_cents} cents) is above your maxPriceCents "
                           f"{row.max_price_cents}: counter or reject it")
    turn = Turn(party, _ENGINE_ACTION[kind], now, terms=offer.engine_terms() if offer else None)
    try:
        outcome = negotiation.apply(turn)
    except RuleViolation as exc:
        raise InvalidInput(_violation_message(exc, negotiation)) from exc
    round_number = len(stored)
    expires_at = now + timedelta(seconds=expiry) if expiry is not None else None
    _insert_message(conn, transaction_id, round_number, party, kind, offer, message, expires_at, now)

    if outcome is None:
        _update(conn, transaction_id, now, offer_expires_at=expires_at)
    elif outcome.kind is OutcomeKind.AGREED:
        agreed = _last_offer_of(stored, PROVIDER if party == CONSUMER else CONSUMER)
        # The hold comes first: InsufficientFunds rolls everything back, message included.
        ledger.hold(conn, row.consumer_id, agreed.price_cents, now, transaction_id)
        _update(conn, transaction_id, now, status=MATCHED, price_cents=agreed.price_cents,
                held_cents=agreed.price_cents, sla=_agreed_sla(conn, row, agreed), offer_expires_at=None,
                scope_modifications=None if agreed.scope_modifications is None
                else json.dumps(agreed.scope_modifications))
    elif outcome.kind is OutcomeKind.TURN_CAP:
        _cancel(conn, row, "round_cap", now)  # ``row`` is locked and a negotiation holds nothing
    else:
        _cancel(conn, row, _END_REASON[kind], now)
    return _transaction_view(conn, _reread(conn, transaction_id))


# -- settling --------------------------------------------------------------------------------------

def complete(conn: Connection, caller: Agent, transaction_id: str, body: dict[str, Any],
             now: datetime) -> dict[str, Any]:
    """The provider delivers: the hold is captured into its wallet."""
    only(body, ("output",))
    row = _load(conn, transaction_id, caller, lock=True)
    if caller.id != row.provider_id:
        raise Forbidden("only the provider completes a transaction")
    if row.status != MATCHED:
        raise Conflict(f"only a matched transaction can be completed; this one is {row.status}")
    ledger.capture(conn, row.consumer_id, row.provider_id, row.held_cents, now, transaction_id)
    _update(conn, transaction_id, now, status=COMPLETED, held_cents=0, end_reason="completed",
            output=free_json(body.get("output"), "output"))
    return _transaction_view(conn, _reread(conn, transaction_id))


def cancel(conn: Connection, caller: Agent, transaction_id: str, body: dict[str, Any],
           now: datetime) -> dict[str, Any]:
    """Either party calls off a matched transaction: the hold goes back to the consumer."""
    only(body, ())
    row = _load(conn, transaction_id, caller, lock=True)
    if row.status != MATCHED:
        raise Conflict(f"only a matched transaction can be cancelled (while negotiating, send withdraw or reject); "
                     f"this one is {row.status}")
    _cancel(conn, row, "cancelled", now)
    return _transaction_view(conn, _reread(conn, transaction_id))


# -- internals -------------------------------------------------------------------------------------

def _load(conn: Connection, transaction_id: str, caller: Agent, *, lock: bool) -> Any:
    row = row_by_id(conn, exchange_transactions, transaction_id, "transaction", lock=lock)
    if caller.id not in (row.consumer_id, row.provider_id):
        raise Forbidden("you are not a party to this transaction")
    return row


def _locked(conn: Connection, transaction_id: str) -> Any:
    return row_by_id(conn, exchange_transactions, transaction_id, "transaction", lock=True)


def _reread(conn: Connection, transaction_id: str) -> Any:
    """The row again after this transaction changed it (it is locked already: no second lock)."""
    return row_by_id(conn, exchange_transactions, transaction_id, "transaction")


def _expired(row: Any, now: datetime) -> bool:
    return row.status == NEGOTIATING and row.offer_expires_at is not None and now >= row.offer_expires_at


def _cancel(conn: Connection, row: Any, reason: str, now: datetime) -> None:
    if row.held_cents:
        ledger.release(conn, row.consumer_id, row.held_cents, now, row.id)
    _update(conn, row.id, now, status=CANCELLED, held_cents=0, end_reason=reason, offer_expires_at=None)


def _update(conn: Connection, transaction_id: str, now: datetime, **values: Any) -> None:
    update_by_id(conn, exchange_transactions, transaction_id, updated_at=now, **values)


# A message's statements are compiled once and run on the driver (storage/prepared.py): built and
# run through SQLAlchemy on every message, they were half of its server CPU.
_INSERT_MESSAGE = Prepared(insert(negotiation_messages))
_MESSAGES = Prepared(select(negotiation_messages)
                     .where(negotiation_messages.c.transaction_id == bindparam("transaction_id"))
                     .order_by(negotiation_messages.c.seq))
_LATEST = Prepared(select(negotiation_messages)
                   .where(negotiation_messages.c.transaction_id == bindparam("transaction_id"))
                   .order_by(negotiation_messages.c.seq.desc()).limit(2))
_SLA = Prepared(select(services.c.sla).where(services.c.id == bindparam("service_id")))


def _insert_message(conn: Connection, transaction_id: str, round_number: int, sender: str, kind: str,
                    offer: Offer | None, message: str | None, expires_at: datetime | None, now: datetime) -> None:
    _INSERT_MESSAGE.run(conn, {
        "transaction_id": transaction_id, "seq": round_number, "round": round_number, "sender": sender,
        "type": kind, "price_cents": offer.price_cents if offer else None,
        "sla": json.dumps(offer.sla) if offer and offer.sla is not None else None,
        "scope_modifications": json.dumps(offer.scope_modifications)
        if offer and offer.scope_modifications is not None else None,
        "message": message, "expires_at": expires_at, "created_at": now})


def _stored_messages(conn: Connection, transaction_id: str) -> list[tuple[Turn, Offer | None]]:
    rows = _MESSAGES.rows(conn, {"transaction_id": transaction_id})
    out = []
    for row in rows:
        offer = _offer_of(row)
        out.append((Turn(row.sender, _ENGINE_ACTION[row.type], row.created_at,
                         terms=offer.engine_terms() if offer else None), offer))
    return out


def _offer_of(row: Any) -> Offer | None:
    if row.price_cents is None:
        return None
    return Offer(row.price_cents, json.loads(row.sla) if row.sla else None,
                 json.loads(row.scope_modifications) if row.scope_modifications else None)


def _last_offer_of(stored: list[tuple[Turn, Offer | None]], party: str) -> Offer:
    return next(offer for turn, offer in reversed(stored) if turn.party == party and offer is not None)


def _agreed_sla(conn: Connection, row: Any, agreed: Offer) -> str:
    """The service's SLA with the agreed modifications applied."""
    base = json.loads(_SLA.row(conn, {"service_id": row.service_id}).sla)
    return json.dumps({**base, **(agreed.sla or {})})


def _violation_message(exc: RuleViolation, negotiation: Negotiation) -> str:
    if exc.code == "out_of_turn":
        last = negotiation.last_turn
        return f"it is not your turn: the {negotiation.counterpart(last.party) if last else CONSUMER} sends next"
    if exc.code == "nothing_to_accept":
        return "there is no offer from the other party to accept yet"
    return exc.message


def _negotiation_state(conn: Connection, row: Any) -> tuple[int, str | None, dict[str, Any] | None]:
    """The latest round, whose turn it is (None once the negotiation is over) and the offer on
    the table (the latest offer: what an accept agrees to)."""
    latest = _LATEST.rows(conn, {"transaction_id": row.id})
    if not latest:
        return 0, None, None
    last = latest[0]
    offer_row = next((m for m in latest if m.price_cents is not None), None)
    offer = None if offer_row is None else {"by": offer_row.sender, "terms": _offer_of(offer_row).to_json(),
                                           "expiresAt": offer_row.expires_at.isoformat()
                                           if offer_row.expires_at else None}
    if row.status != NEGOTIATING:
        return last.round, None, offer
    return last.round, PROVIDER if last.sender == CONSUMER else CONSUMER, offer


def _transaction_view(conn: Connection, row: Any) -> dict[str, Any]:
    return views.transaction_view(row, *_negotiation_state(conn, row))
