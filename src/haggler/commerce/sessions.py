"""Checkout sessions, for every agentic checkout protocol: what the buyer's agent asked for, priced
from the merchant's data, and completed by one charge and one order.

A session is stored as one row (``checkout_sessions``) holding its state as JSON. Each protocol
reads its wire into a :class:`SessionInput` and writes a :class:`Priced` session back out; the rules
(prices from the store, stock, discounts, shipping, who may complete, what is charged) are here.

Completing is three steps, so that nothing is charged twice and a failed payment leaves nothing:

1. in one write transaction the session is checked (its total must be the one last shown to the
   agent), its stock and its deal are taken and its price frozen (a :class:`Hold`), and the payment
   about to be made is recorded with its idempotency key (a :class:`Payment`);
2. the payment handler charges under that key;
3. on success one order is placed (``orders.place_once``: one per session) and the session is
   ``completed``; on a decline the hold is given back and the session is as it was.

Until its payment settles, a session pays with that payment only. Another credential, or another
amount, is refused (409): a processor that has not answered may yet take the first one, and a buyer
sent to authenticate (3-D Secure) may yet complete it. Sending the same completion again repeats the
same charge (the processor answers what it did) and settles it:

* no answer (:class:`PaymentUnavailable`): the hold stays and the session stays in progress (503);
* the buyer must act first: the hold stays and the session ``requires_escalation``, with the
  processor's page as where the buyer continues; or, for a protocol whose agent runs 3-D Secure
  itself (ACP) and a handler that says how (an :class:`AuthenticationRequest`), the session is
  ``authentication_required`` until the same completion comes back with the buyer's result, which
  continues the same payment (same key) and is charged with it;
* a process that dies mid-charge leaves the payment ``charging``; after :data:`TAKEOVER_AFTER`
  (longer than any handler waits for its processor) the same completion takes it over;
* a processor refusing a retry before reaching the money (``PaymentSetupError``) says nothing about
  the first charge: the hold stays.

A buyer sent to the processor's page may come back to a page of the protocol's own (UCP's
``continue_url``, which the charge names as the processor's return address: :attr:`Payment.return_url`,
kept so that every retry sends the same request): :meth:`CheckoutSessions.resume` then reads the
payment back from the processor by its reference, without charging, and settles it as a retry
would: the order when it was paid, the hold given back when it failed, nothing while the buyer has
yet to act.

A processor forgets a key after a day, so no retry is sent :data:`SETTLE_WITHIN` after a payment was
first sent; that payment, a buyer who never comes back from 3-D Secure, and a handler that keeps
failing are settled by the store by hand (:meth:`CheckoutSessions.settle`, ``haggler checkout``)
after it has looked at the processor's own records.

Only the completion that drives a payment (its ``attempt``) gives its hold back, so that a slow first
attempt's late answer cannot undo a second one; a success places the order whoever sees it, since
the money moved.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any, NamedTuple

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from haggler.catalog import Catalog
from haggler.commerce import deals, order_events
from haggler.commerce import merchant_data as data
from haggler.commerce.deals import AppliedDeal, Rejection
from haggler.commerce.merchant_data import Address, Product, ShippingRate
from haggler.commerce.pricing import AppliedDiscount, Line, ShippingOption, Totals, apply_discounts
from haggler.commerce.pricing import shipping_options, subtotal, totals
from haggler.errors import Conflict, Gone, InFlight, InvalidInput, NotFound, PaymentDeclined, Unavailable
from haggler.orders import Buyer, Order, OrderLine, insert_order, new_order_id, order_for, place_once, redeem
from haggler.orders import redemption_of, release
from haggler.payments.handler import Acquirer, AuthenticationRequest, AuthenticationResult, Charge, PaymentHandler
from haggler.payments.handler import PaymentOutcome, PaymentSetupError, PaymentUnavailable
from haggler.storage.chats import DealRow
from haggler.storage.database import Database
from haggler.storage.schema import checkout_sessions
from haggler.storage.secrets import store_secret

#: How long a session lives without completing (UCP: "default TTL is 6 hours from creation").
SESSION_TTL = timedelta(hours=6)
#: The most units one line may ask for: a product without counted stock (the catalog's) has no other
#: bound, and an order's amounts must stay within what the database and a processor take.
MAX_QUANTITY = 10_000
#: How long a charge may run before the same payment, sent again, takes it over: longer than any
#: handler waits for its processor (Stripe's handler: a create and a read, each up to three tries of
#: 30 s with the SDK's pauses, about 200 s), so that a takeover does not race a first completion
#: still waiting for its answer.
TAKEOVER_AFTER = timedelta(minutes=5)
#: How long after it was first sent a payment without a final answer may be asked again under its
#: key: within the time a processor remembers a key (Stripe: 24 hours), after which the same
#: request would be a new charge. Past it, the store settles the payment by hand
#: (``haggler checkout settle``).
SETTLE_WITHIN = timedelta(hours=23)

#: The store secret that keys payments' idempotency keys (see ``CheckoutSessions._key``).
PAYMENT_KEY_SECRET = "checkout_payment_keys"

INCOMPLETE, READY, IN_PROGRESS, ESCALATION, COMPLETED, CANCELED = (
    "incomplete", "ready_for_complete", "complete_in_progress", "requires_escalation", "completed", "canceled")
#: Waiting for the buyer's agent to run 3-D Secure and send the result back (ACP).
AUTHENTICATION = "authentication_required"
#: Statuses after which a session takes no update, completion or cancellation.
FINAL = (COMPLETED, CANCELED)

#: Where a payment stands: being charged, asked with no answer, waiting for the buyer to act (at the
#: processor's page, or through their agent's 3-D Secure), or paid.
CHARGING, UNKNOWN, AWAITING_BUYER, PAID = "charging", "unknown", "awaiting_buyer", "paid"
#: The intervention a buyer's agent declares when it runs 3-D Secure itself (ACP's ``interventions``,
#: rfc.capability_negotiation.md).
THREE_DS = "3ds"


@dataclass(frozen=True, slots=True)
class Payment:
    """The payment a completion started, kept on the session: a retry of the same payment (handler,
    credential and amount, hence ``key``) repeats this charge; any other is refused until it settles."""

    handler_id: str
    #: The processor's idempotency key: the session, the credential and the amount.
    key: str
    amount_cents: int
    state: str
    #: The completion driving it now, and since when: only it gives the hold back after a decline.
    attempt: str
    since: datetime
    #: When it was first sent to the processor (see :data:`SETTLE_WITHIN`).
    first_at: datetime
    #: While the buyer must act: where (the processor's page) and why.
    action_url: str | None = None
    reason: str | None = None
    #: The processor's reference for it, once one answer named it.
    reference: str | None = None
    #: What the buyer's agent needs to run 3-D Secure, once the processor asked for it: kept until the
    #: payment is paid, so that the same payment may carry the result back even after a lost answer.
    authentication: AuthenticationRequest | None = None
    #: Where the processor brings the buyer back after its page (None: the handler's own setting),
    #: as first sent: a retry sends it again, or the processor would see another request under the key.
    return_url: str | None = None


@dataclass(frozen=True, slots=True)
class Hold:
    """What a completion takes in its first step and keeps: the stock and the deal, and the price
    as it was then, which is what is charged, what the order records and what the session shows."""

    discounts: tuple[AppliedDiscount, ...]
    options: tuple[ShippingOption, ...]
    totals: Totals
    deal_id: str | None
    deal_line_id: str | None
    payment: Payment


@dataclass(frozen=True, slots=True)
class Fulfillment:
    """How the lines reach the buyer: one method (shipping), where to, and which option."""

    method_id: str
    method_type: str
    group_id: str
    destinations: tuple[Address, ...] | None
    selected_destination_id: str | None
    selected_option_id: str | None

    @property
    def destination(self) -> Address | None:
        return next((d for d in self.destinations or () if d.id == self.selected_destination_id), None)


@dataclass(frozen=True, slots=True)
class Session:
    id: str
    protocol: str
    status: str
    currency: str
    created_at: datetime
    expires_at: datetime
    lines: tuple[Line, ...] = ()
    #: The buyer as the protocol carried it (names, email, phone, consent), kept as sent.
    buyer: Mapping[str, Any] | None = None
    discount_codes: tuple[str, ...] = ()
    fulfillment: Fulfillment | None = None
    #: The payment section as the agent last sent it, credentials removed (they are never kept).
    payment: Mapping[str, Any] = field(default_factory=dict)
    #: Where the buyer's platform wants order events (from its profile), if it said.
    webhook_url: str | None = None
    #: Who created it, as its protocol names the caller (UCP: the platform's profile URL), if it did.
    creator: str | None = None
    order_id: str | None = None
    #: The stock, deal and price a completion holds, with its payment (see the module's docstring).
    hold: Hold | None = None
    #: The total the agent was last shown: a completion charges it or is refused (None: a row
    #: stored before quotes were kept, whose completion charges the total as it stands).
    quoted_total_cents: int | None = None
    #: The public keys (JWKs) of the platform that created the session, when it asked that the
    #: completion carry its signed mandate (UCP's AP2 extension); None: no mandate is required.
    mandate_keys: tuple[Mapping[str, Any], ...] | None = None
    #: The interventions the buyer's agent said it can handle (ACP's ``capabilities.interventions``),
    #: kept so that every answer can say which of them the store can ask for; None: it said nothing.
    interventions: tuple[str, ...] | None = None
    #: The base URL it was created under, which its answers' links are made from: its order's events
    #: are made from it too, whenever and wherever they are sent (None: made before it was kept).
    base: str | None = None

    @property
    def buyer_email(self) -> str | None:
        email = (self.buyer or {}).get("email")
        return email.strip() if isinstance(email, str) and email.strip() else None

    @property
    def buyer_name(self) -> str | None:
        buyer = self.buyer or {}
        names = [buyer.get("first_name"), buyer.get("last_name")]
        joined = " ".join(n for n in names if isinstance(n, str) and n)
        full = buyer.get("full_name") or buyer.get("fullName")
        return joined or (full if isinstance(full, str) and full else None)


@dataclass(frozen=True, slots=True)
class LineRequest:
    id: str | None
    product_id: str
    quantity: int


@dataclass(frozen=True, slots=True)
class FulfillmentRequest:
    """A fulfillment method as sent: ``destinations`` None when the agent sent none (the known
    customer's saved addresses are offered then)."""

    method_id: str | None
    method_type: str
    destinations: tuple[Address, ...] | None
    selected_destination_id: str | None
    selected_option_id: str | None


@dataclass(frozen=True, slots=True)
class SessionInput:
    """A create or an update; a field left None keeps what the session has."""

    currency: str | None = None
    lines: tuple[LineRequest, ...] | None = None
    buyer: Mapping[str, Any] | None = None
    discount_codes: tuple[str, ...] | None = None
    fulfillment: FulfillmentRequest | None = None
    payment: Mapping[str, Any] | None = None
    webhook_url: str | None = None
    mandate_keys: tuple[Mapping[str, Any], ...] | None = None
    #: Read by a create only: who creates the session (:attr:`Session.creator`), which no update changes.
    creator: str | None = None
    #: The interventions the agent can handle (:attr:`Session.interventions`), replacing those before.
    interventions: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class PaymentRequest:
    """A completion's payment: the handler chosen, the credential (None: the instrument on file
    with ``instrument_id`` pays, where data on file is used), and the AP2 checkout mandate when the
    platform sent one."""

    handler_id: str
    credential: Mapping[str, Any] | None
    instrument_id: str | None = None
    mandate: str | None = None
    #: The buyer's 3-D Secure result, continuing a payment that awaits it (ACP's ``authentication_result``).
    authentication: AuthenticationResult | None = None
    #: The protocol's page the buyer comes back to from the processor's (UCP's ``continue_url``), for
    #: a new payment; a retry keeps its payment's first one (:attr:`Payment.return_url`).
    return_url: str | None = None


@dataclass(frozen=True, slots=True)
class Priced:
    """A session with what the merchant's data makes of it."""

    session: Session
    #: The discounts taken, in the order they were: a deal first, then the codes.
    discounts: tuple[AppliedDiscount, ...]
    rejections: tuple[Rejection, ...]
    options: tuple[ShippingOption, ...]  # for the selected destination
    totals: Totals
    deal: AppliedDeal | None = None

    def line_total(self, line: Line) -> int:
        """A line's total: the agreed price for the line a deal applies to."""
        if self.deal is not None and self.deal.line_id == line.id:
            return min(line.subtotal_cents, self.deal.deal.price_cents)
        return line.subtotal_cents

    @property
    def selected_option(self) -> ShippingOption | None:
        chosen = self.session.fulfillment.selected_option_id if self.session.fulfillment else None
        return next((o for o in self.options if o.id == chosen), None)

    @property
    def awaiting_buyer(self) -> Payment | None:
        """The payment that waits for the buyer to act at its ``action_url``, if one does."""
        hold = self.session.hold
        if hold is None or self.session.status != ESCALATION:
            return None
        return hold.payment

    @property
    def awaiting_authentication(self) -> AuthenticationRequest | None:
        """What the buyer's agent needs to run 3-D Secure, while the session waits for its result."""
        hold = self.session.hold
        if hold is None or self.session.status != AUTHENTICATION:
            return None
        return hold.payment.authentication

    @property
    def ready(self) -> bool:
        """Whether everything a completion needs is there: lines, a destination and an option."""
        f = self.session.fulfillment
        return bool(self.session.lines) and f is not None and f.destination is not None \
            and self.selected_option is not None


class Resumed(NamedTuple):
    """What :meth:`CheckoutSessions.resume` found: the session as it now stands and its order, once
    paid (its ``order_placed`` event recorded with it, whoever placed it); ``action_url`` while the
    buyer has yet to act at the processor's page; ``reason`` when the payment failed just now."""

    priced: Priced
    order: Order | None
    action_url: str | None = None
    reason: str | None = None


class AuthenticationRefused(InvalidInput):
    """A completion whose 3-D Secure result does not fit the session: none sent while the session
    awaits one (``missing``), or one sent while no payment of the session asked for it. Nothing is
    charged; each protocol words it (ACP: ``requires_3ds`` at ``$.authentication_result``)."""

    def __init__(self, message: str, *, missing: bool) -> None:
        super().__init__(message)
        self.missing = missing


class TotalChanged(Conflict):
    """A completion whose total is not the one the agent was last shown (a code withdrawn, a rate
    changed since): nothing is charged until the agent has read the new one."""

    def fields(self) -> dict[str, Any]:
        return {"error": self.message, "code": "total_changed"}


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


def _open(session: Session) -> bool:
    """Whether the session still takes updates (not final, holding no payment)."""
    return session.status not in FINAL and session.hold is None


def _quoted(priced: Priced) -> Priced:
    """``priced`` with its total recorded as the one the agent is shown."""
    return replace(priced, session=replace(priced.session, quoted_total_cents=priced.totals.total_cents))


def _check_authentication(session: Session, payment: PaymentRequest) -> None:
    """A completion's 3-D Secure result against the session (:class:`AuthenticationRefused`): one is
    required while the session awaits it, and taken only for a payment that asked for it (a result
    for a charge the issuer never asked about would be charged with nothing to check it by)."""
    held = session.hold.payment if session.hold is not None else None
    if session.status == AUTHENTICATION and payment.authentication is None:
        raise AuthenticationRefused(f"checkout session {session.id} requires the buyer's 3-D Secure authentication: "
                                    "send the same completion with its result", missing=True)
    if payment.authentication is not None and (held is None or held.authentication is None):
        raise AuthenticationRefused(f"checkout session {session.id} has no payment awaiting 3-D Secure "
                                    "authentication: complete it without an authentication result", missing=False)


def _refuse_held(session: Session) -> None:
    """409 for a change to a session whose payment has not settled (see the module's docstring)."""
    payment = session.hold.payment if session.hold is not None and session.status not in FINAL else None
    if payment is None:
        return
    if payment.state == AWAITING_BUYER:
        where = f"at {payment.action_url}" if payment.action_url else "to authenticate the payment (3-D Secure)"
        raise Conflict(f"checkout session {session.id} awaits the buyer {where}; once they are done, send the same "
                       "completion again")
    if payment.state == UNKNOWN:
        raise Conflict(f"checkout session {session.id} has a payment whose outcome is not known yet; send the "
                       "same completion again to settle it")
    raise InFlight(f"checkout session {session.id} is being completed")


# -- storing ---------------------------------------------------------------------------------------


def _state_json(session: Session) -> str:
    state = asdict(session)
    for key in ("id", "protocol", "status", "currency", "created_at", "expires_at"):
        state.pop(key)
    return json.dumps(state, ensure_ascii=False, sort_keys=True, default=datetime.isoformat)


def _hold(h: Mapping[str, Any] | None) -> Hold | None:
    if h is None:
        return None
    paid = h["payment"]
    asked = paid.get("authentication")
    authentication = None if asked is None else AuthenticationRequest(Acquirer(**asked["acquirer"]),
                                                                      asked["directory_server"])
    return Hold(tuple(AppliedDiscount(**d) for d in h["discounts"]), tuple(ShippingOption(**o) for o in h["options"]),
                Totals(**h["totals"]), h["deal_id"], h["deal_line_id"],
                Payment(**{**paid, "since": datetime.fromisoformat(paid["since"]),
                           "first_at": datetime.fromisoformat(paid["first_at"]), "authentication": authentication}))


def _session(row: Any) -> Session:
    state = json.loads(row.state)
    f = state["fulfillment"]
    fulfillment = None if f is None else Fulfillment(
        f["method_id"], f["method_type"], f["group_id"],
        None if f["destinations"] is None else tuple(Address(**d) for d in f["destinations"]),
        f["selected_destination_id"], f["selected_option_id"])
    return Session(row.id, row.protocol, row.status, row.currency, row.created_at, row.expires_at,
                   tuple(Line(**line) for line in state["lines"]), state["buyer"], tuple(state["discount_codes"]),
                   fulfillment, state["payment"], state["webhook_url"], state.get("creator"), state["order_id"],
                   _hold(state.get("hold")),
                   state.get("quoted_total_cents"),
                   None if state.get("mandate_keys") is None else tuple(state["mandate_keys"]),
                   None if state.get("interventions") is None else tuple(state["interventions"]),
                   state.get("base"))


def _reserved_before_holds(row: Any) -> datetime | None:
    """When a row stored before holds existed (``reserved`` and ``progress_since``) left its
    completion in progress, holding stock and perhaps a deal; None for any other row."""
    if row.status != IN_PROGRESS:  # every other row: no second parse of its state on each read
        return None
    state = json.loads(row.state)
    if "hold" in state or not state.get("reserved"):
        return None
    return datetime.fromisoformat(state["progress_since"]) if state.get("progress_since") else row.updated_at


class CheckoutSessions:
    """The sessions of one protocol (``protocol``: ``ucp``, later ``acp``), their pricing and their
    completion through ``handlers`` (by handler id)."""

    def __init__(self, db: Database, clock: Callable[[], datetime], protocol: str,
                 handlers: Mapping[str, PaymentHandler], *, catalog: Catalog | None = None,
                 deal_ttl: timedelta = timedelta(hours=24), on_file: bool = False,
                 agent_authentication: bool = False) -> None:
        self.db = db
        self.clock = clock
        self.protocol = protocol
        self.handlers = dict(handlers)
        #: Whether the customers' data on file is used when a request names it: a buyer's email
        #: offers their saved addresses (and an address sent for it is saved), an instrument's id
        #: pays with the token on file. Nothing proves the caller is that customer, so only a test
        #: store does (the UCP conformance suite's data expects it); elsewhere a stranger could read
        #: anyone's addresses by their email, or pay with their card by its id.
        self.on_file = on_file
        #: The store's negotiable catalog: its products are sold at list price when the merchant
        #: data has no product of that id (so that a deal closed in chat can be bought here).
        self.catalog = catalog
        self.deal_ttl = deal_ttl
        #: Whether the protocol's agent runs 3-D Secure itself (ACP): a payment whose handler says how
        #: (an :class:`AuthenticationRequest`) then waits ``authentication_required`` for the result;
        #: otherwise (UCP) the buyer goes to the processor's page, ``requires_escalation``.
        self.agent_authentication = agent_authentication
        self._key_secret: bytes | None = None

    def _product(self, conn: Connection, product_id: str) -> Product | None:
        found = data.product(conn, product_id)
        if found is None and self.catalog is not None:
            listed = self.catalog.product(product_id)
            if listed is not None:
                facts = listed.facts  # public fields only
                found = Product(facts.id, facts.name, facts.list_price_cents, facts.currency, None)
        return found

    def _rates(self, conn: Connection, currency: str) -> tuple[ShippingRate, ...]:
        """The merchant data's shipping rates; where it has none, the catalog's ``store.shipping``,
        for every destination (a store run from its catalog alone can still be paid for), priced in
        the store's currency and so offered to checkouts in it only."""
        rates = data.shipping_rates(conn)
        if rates or self.catalog is None or currency != self.catalog.store.currency:
            return rates
        return tuple(ShippingRate(c.id, "default", c.service_level, c.price_cents, c.title)
                     for c in self.catalog.store.shipping)

    # -- reads and writes of a session ------------------------------------------------------------

    def _load(self, conn: Connection, session_id: str, *, for_update: bool = False) -> Session:
        query = select(checkout_sessions).where(checkout_sessions.c.id == session_id,
                                                checkout_sessions.c.protocol == self.protocol)
        row = conn.execute(query.with_for_update() if for_update and not self.db.is_sqlite else query).first()
        if row is None:
            raise NotFound(f"checkout session {session_id} not found")
        session = _session(row)
        since = _reserved_before_holds(row)
        if since is not None:
            session = self._hold_from_before(conn, session, since)
        if session.status not in FINAL and session.hold is None and self.clock() >= session.expires_at:
            session = replace(session, status=CANCELED)  # expired: as good as canceled
        return session

    def _hold_from_before(self, conn: Connection, session: Session, since: datetime) -> Session:
        """A completion in progress from before holds existed, as a hold whose payment is unknown: its
        stock (and deal) were taken and money may have moved, but its key cannot be known, so no
        retry matches it and the store settles it by hand (``haggler checkout settle``)."""
        priced = self._price(conn, session)
        lines = {line.product_id: line.id for line in session.lines}
        deal = next((row for row in map(lambda code: deals.find(conn, code), session.discount_codes)
                     if row is not None and row.product_id in lines), None)
        payment = Payment("", "", priced.totals.total_cents, UNKNOWN, "before-holds", since, since)
        return replace(session, hold=Hold(priced.discounts, priced.options, priced.totals, deal.id if deal else None,
                                          lines[deal.product_id] if deal else None, payment))

    def _save(self, conn: Connection, session: Session) -> None:
        conn.execute(update(checkout_sessions).where(checkout_sessions.c.id == session.id).values(
            status=session.status, currency=session.currency, state=_state_json(session), updated_at=self.clock()))

    def peek(self, session_id: str) -> Session:
        """The session as stored, for a protocol to read before it changes it: not an answer to the
        agent, so its total is not recorded as shown (``get`` records it)."""
        with self.db.read() as conn:
            return self._load(conn, session_id)

    def get(self, session_id: str) -> Priced:
        """The session priced as it stands now (prices, deals and options read again). The total
        answered becomes the one a completion charges; a write only when it changed."""
        with self.db.read() as conn:
            priced = self._price(conn, self._load(conn, session_id))
        if not _open(priced.session) or priced.session.quoted_total_cents == priced.totals.total_cents:
            return priced
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            priced = self._price(conn, session)
            if _open(session):
                priced = _quoted(priced)
                self._save(conn, priced.session)
        return priced

    def create(self, request: SessionInput, *, base: str | None = None) -> Priced:
        """A new session, priced; refused whole (400) when a line cannot be sold. ``base``: the base
        URL its answers' links are made from (:attr:`Session.base`)."""
        now = self.clock()
        session = Session(_new_id("chk_"), self.protocol, INCOMPLETE, (request.currency or data.DEFAULT_CURRENCY).upper(),
                          now, now + SESSION_TTL, creator=request.creator, base=base)
        with self.db.write() as conn:
            session = self._apply(conn, session, request)
            priced = _quoted(self._settle(conn, session))
            conn.execute(insert(checkout_sessions).values(
                id=session.id, protocol=self.protocol, status=priced.session.status, currency=session.currency,
                state=_state_json(priced.session), created_at=now, updated_at=now, expires_at=session.expires_at))
        return priced

    def update(self, session_id: str, request: SessionInput) -> Priced:
        """What the request sends replaces the session's, what it leaves out stays; a completed or
        canceled session takes no update (409), nor one whose payment has not settled."""
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            self._refuse_final(session, "updated")
            _refuse_held(session)
            priced = _quoted(self._settle(conn, self._apply(conn, session, request)))
            self._save(conn, priced.session)
        return priced

    def cancel(self, session_id: str) -> Priced:
        """Cancel a session that is neither completed nor canceled nor holding a payment that has not
        settled (409 otherwise: that payment may yet be taken)."""
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            self._refuse_final(session, "canceled")
            _refuse_held(session)
            session = replace(session, status=CANCELED)
            self._save(conn, session)
            return self._price(conn, session)

    @staticmethod
    def _refuse_final(session: Session, verb: str) -> None:
        if session.status in FINAL:
            raise Conflict(f"checkout session {session.id} is {session.status} and cannot be {verb}")

    # -- applying a request ------------------------------------------------------------------------

    def _apply(self, conn: Connection, session: Session, request: SessionInput) -> Session:
        if request.currency is not None and request.currency.upper() != session.currency:
            raise InvalidInput(f"the currency of checkout session {session.id} is {session.currency}; "
                               "it cannot change (start a new checkout)")
        if request.buyer is not None:
            session = replace(session, buyer=dict(request.buyer))
        if request.lines is not None:
            session = replace(session, lines=self._lines(conn, session, request.lines))
        if request.discount_codes is not None:
            seen: dict[str, str] = {}
            for code in request.discount_codes:
                seen.setdefault(code.lower(), code)
            session = replace(session, discount_codes=tuple(seen.values()))
        if request.fulfillment is not None:
            session = replace(session, fulfillment=self._fulfillment(conn, session, request.fulfillment))
        if request.payment is not None:
            session = replace(session, payment=dict(request.payment))
        if request.webhook_url is not None:
            session = replace(session, webhook_url=request.webhook_url)
        if request.mandate_keys is not None:
            session = replace(session, mandate_keys=request.mandate_keys)
        if request.interventions is not None:
            session = replace(session, interventions=request.interventions)
        return session

    def _lines(self, conn: Connection, session: Session, requested: tuple[LineRequest, ...]) -> tuple[Line, ...]:
        """The lines at the merchant's prices; an unknown product, a quantity above the stock on hand
        or :data:`MAX_QUANTITY`, or a product priced in another currency is refused (400), naming the
        product."""
        known = {line.id: line for line in session.lines}
        lines = []
        for i, want in enumerate(requested):
            found = self._product(conn, want.product_id)
            if found is None:
                raise InvalidInput(f"Product {want.product_id} not found")
            if found.currency != session.currency:
                raise InvalidInput(f"Product {want.product_id} is priced in {found.currency}, "
                                   f"not in the checkout's currency {session.currency}")
            on_hand = data.stock(conn, want.product_id)
            if on_hand is not None and want.quantity > on_hand:
                raise InvalidInput(f"Insufficient stock for {want.product_id}: {want.quantity} requested, "
                                   f"{on_hand} available")
            if want.quantity > MAX_QUANTITY:
                raise InvalidInput(f"Quantity {want.quantity} of {want.product_id} is more than one line may "
                                   f"hold ({MAX_QUANTITY})")
            line_id = want.id if want.id in known else f"li_{i + 1}_{secrets.token_hex(4)}"
            lines.append(Line(line_id, found.id, found.title, want.quantity, found.price_cents, found.image_url))
        return tuple(lines)

    def _fulfillment(self, conn: Connection, session: Session, want: FulfillmentRequest) -> Fulfillment:
        """The method as sent, with addresses the agent did not identify given ids (with data on
        file, the known customer's saved one for the same place, or a new one saved for the buyer's
        email), and, with data on file, the known customer's saved addresses offered when the agent
        sent none."""
        email = session.buyer_email if self.on_file else None
        destinations: tuple[Address, ...] | None
        if want.destinations is not None:
            identified = []
            for address in want.destinations:
                if address.id:
                    identified.append(address)
                elif email:
                    identified.append(data.remember_address(conn, email, session.buyer_name, address))
                else:
                    identified.append(replace(address, id=_new_id("dest_")))
            destinations = tuple(identified)
        else:
            saved = data.saved_addresses(conn, email) if email else ()
            before = session.fulfillment.destinations if session.fulfillment else None
            destinations = saved or before or None
        ids = {d.id for d in destinations or ()}
        selected = want.selected_destination_id if want.selected_destination_id in ids else None
        previous = session.fulfillment
        return Fulfillment(want.method_id or (previous.method_id if previous else _new_id("fm_")), want.method_type,
                           previous.group_id if previous else _new_id("fg_"), destinations, selected,
                           want.selected_option_id)

    # -- pricing -----------------------------------------------------------------------------------

    def _price(self, conn: Connection, session: Session) -> Priced:
        """The session priced: a deal's code brings its line to the agreed price; the discount codes
        then apply, one after another, to the other lines (a deal's price is exact). A session a
        completion holds has the price frozen then."""
        if session.hold is not None:
            h = session.hold
            row = deals.find(conn, h.deal_id) if h.deal_id is not None else None
            deal = AppliedDeal(row, h.deal_line_id) if row is not None and h.deal_line_id is not None else None
            return Priced(session, h.discounts, (), h.options, h.totals, deal)
        codes, rejections = [], []
        deal: AppliedDeal | None = None
        now = self.clock()
        for code in session.discount_codes:
            found = data.discount(conn, code)
            if found is not None:
                codes.append(found)
                continue
            row = deals.find(conn, code)
            if row is None:
                rejections.append(Rejection(code, "discount_code_invalid", f"Code '{code}' is not a valid discount code"))
                continue
            checked = deals.check(conn, row, session.lines, session.currency, now, self.deal_ttl, already=deal)
            if isinstance(checked, Rejection):
                rejections.append(checked)
            else:
                deal = checked
        dealt = next((li for li in session.lines if deal is not None and li.id == deal.line_id), None)
        taken: tuple[AppliedDiscount, ...] = ()
        if deal is not None and dealt is not None:
            taken = (AppliedDiscount(deal.code, "Negotiated price",
                                     dealt.subtotal_cents - min(dealt.subtotal_cents, deal.deal.price_cents)),)
        applied, _ = apply_discounts(subtotal(session.lines) - (dealt.subtotal_cents if dealt else 0), codes)
        destination = session.fulfillment.destination if session.fulfillment else None
        options = shipping_options(self._rates(conn, session.currency), data.promotions(conn), destination.country,
                                   session.lines) if destination is not None else ()
        chosen = session.fulfillment.selected_option_id if session.fulfillment else None
        option = next((o for o in options if o.id == chosen), None)
        discounts = taken + applied
        return Priced(session, discounts, tuple(rejections), options, totals(session.lines, discounts, option), deal)

    def _settle(self, conn: Connection, session: Session) -> Priced:
        """Priced, with an option no longer offered for the destination dropped and the status
        following from what is there."""
        priced = self._price(conn, session)
        f = session.fulfillment
        if f is not None and f.selected_option_id is not None and priced.selected_option is None:
            session = replace(session, fulfillment=replace(f, selected_option_id=None))
            priced = replace(priced, session=session)
        status = READY if priced.ready else INCOMPLETE
        return replace(priced, session=replace(session, status=status))

    # -- completing --------------------------------------------------------------------------------

    def complete(self, session_id: str, payment: PaymentRequest, *, door: str,
                 buyer: Mapping[str, Any] | None = None,
                 authorize: Callable[[Priced], None] | None = None) -> tuple[Priced, Order | None]:
        """Charge for the session and place its order (see the module's docstring): the priced
        session and its order, or no order while the buyer must act (``requires_escalation``, or
        ``authentication_required`` until ``payment.authentication`` brings the buyer's 3-D Secure
        result). Refusals: 409 when completed, canceled, being completed, paying with another
        payment, its total changed since it was last shown, or its deal bought elsewhere meanwhile;
        400 when something is missing (:class:`AuthenticationRefused`: the 3-D Secure result, or one
        sent to a session that did not ask for it); 402 when the payment is declined (a failed
        authentication included); 503 when the payment handler did
        not answer (the same completion sent again settles it). ``buyer``: the buyer as the
        completion sent it, replacing the session's (ACP's complete carries one). ``authorize``:
        the protocol's own check that the completion may pay for the session as priced now (UCP:
        the AP2 mandate), run in step 1 so that its refusal leaves everything as it was."""
        handler = self.handlers.get(payment.handler_id)
        if handler is None:
            offered = ", ".join(sorted(self.handlers)) or "none"
            raise InvalidInput(f"payment handler {payment.handler_id} is not available here (offered: {offered})")
        if self._key_secret is None:  # read (or drawn) in its own transaction, before step 1's
            self._key_secret = store_secret(self.db, PAYMENT_KEY_SECRET)
        try:
            priced, charge, attempt, retry = self._begin_completion(session_id, payment, buyer, authorize)
        except IntegrityError:  # a racing checkout redeemed the deal first
            raise Conflict(f"checkout session {session_id}: its deal was just bought through another checkout") \
                from None
        try:
            result = handler.charge(charge)
        except PaymentSetupError:
            # This request charged nothing; but a payment sent before (a retry's) may still have.
            if retry:
                self._unsettled(session_id, attempt, UNKNOWN)
            else:
                self._give_back(session_id, attempt)
            raise
        except Exception as exc:  # no answer: the money may have moved, so the hold stays
            self._unsettled(session_id, attempt, UNKNOWN)
            if isinstance(exc, PaymentUnavailable):
                raise Unavailable("the payment handler did not answer, so whether the payment went through is "
                                  "not known: nothing was ordered yet; send the same completion again to settle "
                                  "it") from None
            raise
        if result.succeeded:
            return self._place(session_id, priced, payment, result.reference, door)
        if result.outcome is PaymentOutcome.ACTION_REQUIRED:
            # An agent that declared what it handles without 3-D Secure cannot run it: it is sent to
            # the processor's page if there is one, and is otherwise declined, the hold given back,
            # rather than left holding a payment it can never finish.
            declared = priced.session.interventions
            runs_it = self.agent_authentication and (declared is None or THREE_DS in declared)
            authentication = result.authentication if runs_it else None
            if authentication is not None or result.action_url:
                return self._unsettled(session_id, attempt, AWAITING_BUYER, None if authentication else
                                       result.action_url, result.reason, result.reference, authentication), None
        self._give_back(session_id, attempt)
        why = result.reason or "the payment did not go through"
        if result.outcome is PaymentOutcome.ACTION_REQUIRED:
            why += " (and the processor gave no page where the buyer could do it)"
        raise PaymentDeclined(f"Payment failed: {why}")

    def _begin_completion(self, session_id: str, payment: PaymentRequest, buyer: Mapping[str, Any] | None,
                          authorize: Callable[[Priced], None] | None) -> tuple[Priced, Charge, str, bool]:
        """Step 1: check the session, take its stock and deal and freeze its price (or, for a payment
        not yet settled, check this is the same payment, still within :data:`SETTLE_WITHIN`), and
        record the charge about to be made; the priced session, the charge, this completion's
        attempt id, and whether the payment was sent before (a retry)."""
        attempt = _new_id("att_")
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            self._refuse_final(session, "completed")
            now = self.clock()
            credential = self._credential(conn, payment)
            _check_authentication(session, payment)
            if session.hold is not None:
                held = session.hold.payment
                if (payment.handler_id, self._key(session, credential, held.amount_cents)) != (held.handler_id, held.key):
                    where = f" (the buyer continues at {held.action_url})" if held.action_url else ""
                    raise Conflict(f"checkout session {session_id} is paying with another payment, which has not "
                                   f"settled{where}: nothing was charged; send that same completion again")
                if held.state == CHARGING and now - held.since < TAKEOVER_AFTER:
                    raise InFlight(f"checkout session {session_id} is being completed",
                                   retry_after_seconds=int((TAKEOVER_AFTER - (now - held.since)).total_seconds()))
                if now - held.first_at >= SETTLE_WITHIN:
                    raise Conflict(f"checkout session {session_id}: its payment was sent too long ago to be asked "
                                   "again safely; the store settles it (nothing more is charged)")
                hold = replace(session.hold, payment=replace(held, state=CHARGING, attempt=attempt, since=now))
                priced = self._price(conn, session)
            else:
                if buyer is not None:
                    session = replace(session, buyer=dict(buyer))
                priced = self._settle(conn, session)
                if not priced.ready:
                    raise InvalidInput("Fulfillment address and option must be selected before completing the "
                                       "checkout")
                lost = next((r for r in priced.rejections if deals.find(conn, r.code) is not None), None)
                if lost is not None:  # never charge a price other than the one the deal promised
                    raise Conflict(f"{lost.content}: nothing was charged; update the checkout's discount codes")
                total = priced.totals.total_cents
                if session.quoted_total_cents is not None and total != session.quoted_total_cents:
                    raise TotalChanged(f"the checkout's total is now {total} (minor units of {session.currency}), "
                                       f"not the {session.quoted_total_cents} last shown: nothing was charged; read "
                                       "the checkout again and complete it if the buyer agrees")
                self._reserve(conn, priced, now)
                deal = priced.deal
                hold = Hold(priced.discounts, priced.options, priced.totals, deal.deal.id if deal else None,
                            deal.line_id if deal else None,
                            Payment(payment.handler_id, self._key(session, credential, total), total, CHARGING,
                                    attempt, now, now, return_url=payment.return_url))
            retry = session.hold is not None
            if authorize is not None:
                authorize(priced)
            session = replace(priced.session, status=IN_PROGRESS, hold=hold)
            self._save(conn, session)
        paid = hold.payment
        charge = Charge(paid.amount_cents, session.currency, credential, idempotency_key=paid.key,
                        description=f"checkout session {session.id}", metadata={"checkout_session": session.id},
                        authentication=payment.authentication, return_url=paid.return_url)
        return replace(priced, session=session), charge, attempt, retry

    def _key(self, session: Session, credential: Mapping[str, Any], amount_cents: int) -> str:
        """The idempotency key of this exact payment: the session, the credential and the amount. A
        retry of it (a lost answer, a crash before the order) is the same charge; a new total after a
        decline is a new payment, which a processor would refuse under the old key. Keyed with the
        store's secret: the key is stored with the session and sent to the processor, and a bare hash
        of a card's number and code could be reversed by trying every code."""
        paid = {"credential": dict(credential), "amount": amount_cents, "currency": session.currency}
        assert self._key_secret is not None, "complete() draws the secret before its transaction"
        digest = hmac.new(self._key_secret, json.dumps(paid, sort_keys=True).encode(), hashlib.sha256).hexdigest()
        return f"{self.protocol}-{session.id}-{digest[:32]}"

    def _place(self, session_id: str, priced: Priced, payment: PaymentRequest, reference: str | None,
               door: str) -> tuple[Priced, Order]:
        """Step 3: the one order for the session, and the session completed."""
        def place(conn: Connection) -> tuple[Priced, Order]:
            current = self._load(conn, session_id, for_update=True)
            found = order_for(conn, session_id=session_id)
            if found is None:
                found = self._order(priced, payment, reference, door, self.clock())
                insert_order(conn, found)
                # Owed to the platform with the order, whoever placed it (order_events.py).
                order_events.record(conn, self.protocol, found.id, order_events.PLACED, current.base, found.placed_at)
            hold = current.hold or priced.session.hold
            assert hold is not None  # step 1 made it, and only a decline removes it
            done = replace(current, status=COMPLETED, order_id=found.id,
                           hold=replace(hold, payment=replace(hold.payment, state=PAID, action_url=None, reason=None,
                                                              authentication=None)))
            self._save(conn, done)
            return replace(priced, session=done), found

        return place_once(self.db, place)

    def _unsettled(self, session_id: str, attempt: str, state: str, action_url: str | None = None,
                   reason: str | None = None, reference: str | None = None,
                   authentication: AuthenticationRequest | None = None) -> Priced:
        """Record that ``attempt``'s payment has no final answer (``UNKNOWN``) or waits for the buyer
        (``AWAITING_BUYER``: at ``action_url``, or for their agent's 3-D Secure, ``authentication``);
        the hold stays. The session as it now stands."""
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            held = session.hold.payment if session.hold is not None else None
            if held is not None and held.attempt == attempt and held.state == CHARGING:
                status = IN_PROGRESS
                if state == AWAITING_BUYER:
                    status = AUTHENTICATION if authentication is not None else ESCALATION
                session = replace(session, status=status, hold=replace(session.hold, payment=replace(
                    held, state=state, action_url=action_url, reason=reason, reference=reference or held.reference,
                    authentication=authentication or held.authentication)))
                self._save(conn, session)
            return self._price(conn, session)

    def _give_back(self, session_id: str, attempt: str, *, cancel: bool = False) -> None:
        """Undo step 1 after ``attempt``'s payment was declined: the stock and the deal back, the
        session as it was (or ``cancel``: canceled). Nothing when another completion has taken the
        payment over since."""
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            hold = session.hold
            if hold is None or session.status in FINAL or hold.payment.attempt != attempt:
                return
            for line in session.lines:
                data.return_stock(conn, line.product_id, line.quantity)
            if hold.deal_id is not None:
                release(conn, hold.deal_id)
            opened = self._settle(conn, replace(session, hold=None)).session
            self._save(conn, replace(opened, status=CANCELED) if cancel else opened)

    def _reserve(self, conn: Connection, priced: Priced, now: datetime) -> None:
        """Take the lines' stock and redeem the deal, for a completion about to charge."""
        for line in priced.session.lines:
            if not data.take_stock(conn, line.product_id, line.quantity):
                raise Conflict(f"Insufficient stock for {line.product_id}")
        if priced.deal is not None:
            deal = priced.deal.deal
            if deal.created_at + self.deal_ttl <= now:
                raise Gone(f"deal {deal.id} has expired")
            if redemption_of(conn, deal.id) is not None:
                raise Conflict(f"deal {deal.id} has already been bought")
            redeem(conn, deal.id, None, now)

    def _credential(self, conn: Connection, payment: PaymentRequest) -> Mapping[str, Any]:
        if payment.credential:
            return payment.credential
        if not self.on_file:
            raise InvalidInput("the payment instrument carries no credential: send one (this store charges no "
                               "instrument on file by its id)")
        on_file = data.instrument(conn, payment.instrument_id) if payment.instrument_id else None
        if on_file is None or on_file.handler_id != payment.handler_id:
            raise InvalidInput("the payment instrument carries no credential, and none is on file for it")
        return {"type": "token", "token": on_file.token}

    def _order(self, priced: Priced, payment: PaymentRequest, reference: str | None, door: str,
               now: datetime) -> Order:
        session = priced.session
        destination = session.fulfillment.destination if session.fulfillment else None
        option = priced.selected_option
        deal = priced.deal
        lines = []
        for line in session.lines:
            if deal is not None and deal.line_id == line.id:
                lines.append(OrderLine(line.product_id, line.title, 1, priced.line_total(line), session.currency,
                                       deal.deal.extras, deal.deal.id, line.unit_price_cents))
            else:
                lines.append(OrderLine(line.product_id, line.title, line.quantity, line.unit_price_cents,
                                       session.currency, (), None, line.unit_price_cents))
        buyer = Buyer(session.buyer_name or (destination.full_name if destination else None) or "",
                      session.buyer_email or "", destination.one_line() if destination else "")
        details = {
            "line_ids": [line.id for line in session.lines],
            "fulfillment": {
                "method_type": session.fulfillment.method_type if session.fulfillment else None,
                "destination": asdict(destination) if destination else None,
                "option_id": option.id if option else None,
                "option_title": option.title if option else None,
                "price_cents": option.price_cents if option else None,
            },
            "discounts": [asdict(d) for d in priced.discounts],
            "totals": asdict(priced.totals),
            "events": [],
            "adjustments": [],
            "mandate": payment.mandate,
        }
        return Order(new_order_id(), tuple(lines), priced.totals.total_cents, session.currency, now, buyer,
                     deal_id=deal.deal.id if deal else None, session_id=session.id, door=door,
                     payment_handler=payment.handler_id, payment_reference=reference, details=details)

    # -- the buyer's return from the processor's page ------------------------------------------------

    def resume(self, session_id: str) -> Resumed:
        """Settle a payment that waits for the buyer at the processor's page, from the processor's
        own record of it (:meth:`PaymentHandler.retrieve`, by the reference its first answer gave;
        nothing is charged): paid places the one order (as a retry of the completion would, and
        whichever of them sees it first); failed gives the stock and the deal back, the session
        ready for another payment; still waiting changes nothing and says where the buyer acts.
        A session not waiting for the buyer is only read. :class:`Unavailable` when the handler
        does not answer (or is no longer offered), and ``PaymentSetupError`` when it cannot be
        asked: nothing changes. Each outcome is guarded as the completion's are, so that a retry
        of the completion or another resume racing this one leaves one order and one charge."""
        with self.db.read() as conn:
            priced = self._price(conn, self._load(conn, session_id))
            order = order_for(conn, order_id=priced.session.order_id) if priced.session.order_id else None
        held = priced.awaiting_buyer
        if held is None or held.state != AWAITING_BUYER or held.reference is None:
            return Resumed(priced, order)
        handler = self.handlers.get(held.handler_id)
        if handler is None:
            raise Unavailable(f"payment handler {held.handler_id} is not offered now, so the payment of checkout "
                              f"session {session_id} cannot be read")
        try:
            result = handler.retrieve(held.reference)
        except PaymentUnavailable:
            raise Unavailable("the payment handler did not answer, so whether the payment went through is not "
                              "known yet: nothing changed; try again in a moment") from None
        if result.succeeded:
            placed, order = self._place(session_id, priced, PaymentRequest(held.handler_id, None),
                                        result.reference or held.reference, self.protocol)
            return Resumed(placed, order)
        if result.outcome is PaymentOutcome.ACTION_REQUIRED:
            return Resumed(priced, None, action_url=result.action_url or held.action_url)
        self._give_back(session_id, held.attempt)
        with self.db.read() as conn:
            return Resumed(self._price(conn, self._load(conn, session_id)), None,
                           reason=result.reason or "the payment did not go through")

    # -- settling by hand --------------------------------------------------------------------------

    def unsettled(self) -> list[Session]:
        """The sessions holding a payment without a final answer, oldest first: what the store may
        have to settle by hand (``haggler checkout holds``)."""
        with self.db.read() as conn:
            ids = conn.execute(select(checkout_sessions.c.id).where(
                checkout_sessions.c.protocol == self.protocol,
                checkout_sessions.c.status.in_((IN_PROGRESS, ESCALATION, AUTHENTICATION)))
                .order_by(checkout_sessions.c.updated_at))
            return [self._load(conn, session_id) for session_id in ids.scalars()]

    def settle(self, session_id: str, *, paid_reference: str | None) -> tuple[Priced, Order | None]:
        """The store's word on a payment no retry can settle (past :data:`SETTLE_WITHIN`, a buyer
        who never came back from 3-D Secure, a handler that keeps failing), after looking at the
        processor's own records: paid (``paid_reference``, the processor's id for the payment)
        places the order at the held price; not paid gives the stock and the deal back and cancels
        the session. 409 for a session holding no unsettled payment, or one being charged now."""
        with self.db.read() as conn:
            session = self._load(conn, session_id)
        hold = session.hold
        if hold is None or session.status in FINAL:
            raise Conflict(f"checkout session {session_id} holds no unsettled payment")
        held = hold.payment
        if held.state == CHARGING and self.clock() - held.since < TAKEOVER_AFTER:
            raise InFlight(f"checkout session {session_id} is being charged right now; settle it once that is over")
        if paid_reference is not None:
            with self.db.read() as conn:
                priced = self._price(conn, session)
            return self._place(session_id, priced, PaymentRequest(held.handler_id or "manual", None), paid_reference,
                               self.protocol)
        self._give_back(session_id, held.attempt, cancel=True)
        return self.get(session_id), None

    # -- after the order ---------------------------------------------------------------------------

    def placed(self, order_id: str) -> tuple[Order, Session | None] | None:
        """The order with this id and the session it was placed for through this protocol (None:
        no such order)."""
        with self.db.read() as conn:
            order = order_for(conn, order_id=order_id)
        return None if order is None else (order, self.session_of(order))

    def session_of(self, order: Order) -> Session | None:
        """The session an order was placed for, if it came through this protocol."""
        if order.session_id is None:
            return None
        with self.db.read() as conn:
            row = conn.execute(select(checkout_sessions).where(checkout_sessions.c.id == order.session_id)).first()
        return _session(row) if row is not None and row.protocol == self.protocol else None


__all__ = ["AUTHENTICATION", "AuthenticationRefused", "CANCELED", "COMPLETED", "CheckoutSessions", "FINAL",
           "Fulfillment", "FulfillmentRequest", "INCOMPLETE",
           "ESCALATION", "Hold", "IN_PROGRESS", "LineRequest", "Payment", "PaymentRequest", "Priced", "READY", "Resumed",
           "SESSION_TTL", "Session", "SessionInput", "TAKEOVER_AFTER", "TotalChanged"]
