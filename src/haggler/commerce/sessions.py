"""Checkout sessions, for every agentic checkout protocol: what the buyer's agent asked for, priced
from the merchant's data, and completed by one charge and one order.

A session is stored as one row (``checkout_sessions``) holding its state as JSON. Each protocol
reads its wire into a :class:`SessionInput` and writes a :class:`Priced` session back out; the rules
(prices from the store, stock, discounts, shipping, who may complete, what is charged) are here.

Completing is three steps, so that nothing is charged twice and a failed payment leaves nothing:

1. in one write transaction, the session is checked, its stock is taken and it is marked
   ``complete_in_progress`` (a second completion meanwhile is refused: 409);
2. the payment handler charges, with an idempotency key derived from the session and the credential
   (a retry of the same payment is the same charge);
3. on success one order is placed (``orders.place_once``: one per session) and the session is
   ``completed``; on a decline or no answer the stock goes back and the session is as it was.

A process that dies between 2 and 3 leaves the session in progress: after :data:`STALE_PROGRESS`
the same completion may be sent again, which repeats the same charge (the handler answers what it
did the first time) and places the order.

Not yet safe (found in review, to be fixed next): a completion sent again after
:data:`STALE_PROGRESS` while a slow processor is still working on the first can charge a second
credential, or buy the deal the first attempt's late decline gives back; and a charge with no answer
gives the stock and the deal back although money may have moved.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.exc import IntegrityError

from haggler.catalog import Catalog
from haggler.commerce import deals
from haggler.commerce import merchant_data as data
from haggler.commerce.deals import AppliedDeal, Rejection
from haggler.commerce.merchant_data import Address, Product
from haggler.commerce.pricing import AppliedDiscount, Line, ShippingOption, Totals, apply_discounts
from haggler.commerce.pricing import shipping_options, subtotal, totals
from haggler.errors import Conflict, Gone, InFlight, InvalidInput, NotFound, PaymentDeclined, Unavailable
from haggler.orders import Buyer, Order, OrderLine, insert_order, new_order_id, order_for, place_once, redeem
from haggler.orders import redemption_of, release
from haggler.payments.handler import Charge, PaymentHandler, PaymentUnavailable
from haggler.storage.chats import DealRow
from haggler.storage.database import Database
from haggler.storage.schema import checkout_sessions

#: How long a session lives without completing (UCP: "default TTL is 6 hours from creation").
SESSION_TTL = timedelta(hours=6)
#: The most units one line may ask for: a product without counted stock (the catalog's) has no other
#: bound, and an order's amounts must stay within what the database and a processor take.
MAX_QUANTITY = 10_000
#: How long a completion may be in progress before the same completion may be sent again.
STALE_PROGRESS = timedelta(seconds=60)

INCOMPLETE, READY, IN_PROGRESS, COMPLETED, CANCELED = (
    "incomplete", "ready_for_complete", "complete_in_progress", "completed", "canceled")
#: Statuses after which a session takes no update, completion or cancellation.
FINAL = (COMPLETED, CANCELED)


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
    order_id: str | None = None
    #: Whether a completion in progress holds the stock and the deal (step 1 of completing).
    reserved: bool = False
    progress_since: datetime | None = None

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


@dataclass(frozen=True, slots=True)
class PaymentRequest:
    """A completion's payment: the handler chosen, the credential (None: the instrument on file
    with ``instrument_id`` pays), and the AP2 checkout mandate when the platform sent one."""

    handler_id: str
    credential: Mapping[str, Any] | None
    instrument_id: str | None = None
    mandate: str | None = None


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
    def ready(self) -> bool:
        """Whether everything a completion needs is there: lines, a destination and an option."""
        f = self.session.fulfillment
        return bool(self.session.lines) and f is not None and f.destination is not None \
            and self.selected_option is not None


def _new_id(prefix: str) -> str:
    return prefix + secrets.token_hex(12)


# -- storing ---------------------------------------------------------------------------------------


def _state_json(session: Session) -> str:
    state = asdict(session)
    for key in ("id", "protocol", "status", "currency", "created_at", "expires_at"):
        state.pop(key)
    state["progress_since"] = session.progress_since.isoformat() if session.progress_since else None
    return json.dumps(state, ensure_ascii=False, sort_keys=True)


def _session(row: Any) -> Session:
    state = json.loads(row.state)
    f = state["fulfillment"]
    fulfillment = None if f is None else Fulfillment(
        f["method_id"], f["method_type"], f["group_id"],
        None if f["destinations"] is None else tuple(Address(**d) for d in f["destinations"]),
        f["selected_destination_id"], f["selected_option_id"])
    return Session(row.id, row.protocol, row.status, row.currency, row.created_at, row.expires_at,
                   tuple(Line(**line) for line in state["lines"]), state["buyer"], tuple(state["discount_codes"]),
                   fulfillment, state["payment"], state["webhook_url"], state["order_id"], state["reserved"],
                   datetime.fromisoformat(state["progress_since"]) if state["progress_since"] else None)


class CheckoutSessions:
    """The sessions of one protocol (``protocol``: ``ucp``, later ``acp``), their pricing and their
    completion through ``handlers`` (by handler id)."""

    def __init__(self, db: Database, clock: Callable[[], datetime], protocol: str,
                 handlers: Mapping[str, PaymentHandler], *, catalog: Catalog | None = None,
                 deal_ttl: timedelta = timedelta(hours=24)) -> None:
        self.db = db
        self.clock = clock
        self.protocol = protocol
        self.handlers = dict(handlers)
        #: The store's negotiable catalog: its products are sold at list price when the merchant
        #: data has no product of that id (so that a deal closed in chat can be bought here).
        self.catalog = catalog
        self.deal_ttl = deal_ttl

    def _product(self, conn: Connection, product_id: str) -> Product | None:
        found = data.product(conn, product_id)
        if found is None and self.catalog is not None:
            listed = self.catalog.product(product_id)
            if listed is not None:
                facts = listed.facts  # public fields only
                found = Product(facts.id, facts.name, facts.list_price_cents, facts.currency, None)
        return found

    # -- reads and writes of a session ------------------------------------------------------------

    def _load(self, conn: Connection, session_id: str, *, for_update: bool = False) -> Session:
        query = select(checkout_sessions).where(checkout_sessions.c.id == session_id,
                                                checkout_sessions.c.protocol == self.protocol)
        row = conn.execute(query.with_for_update() if for_update and not self.db.is_sqlite else query).first()
        if row is None:
            raise NotFound(f"checkout session {session_id} not found")
        session = _session(row)
        if session.status not in FINAL and session.status != IN_PROGRESS and self.clock() >= session.expires_at:
            session = replace(session, status=CANCELED)  # expired: as good as canceled
        return session

    def _save(self, conn: Connection, session: Session) -> None:
        conn.execute(update(checkout_sessions).where(checkout_sessions.c.id == session.id).values(
            status=session.status, currency=session.currency, state=_state_json(session), updated_at=self.clock()))

    def get(self, session_id: str) -> Priced:
        """The session priced as it stands now (prices, deals and options read again)."""
        with self.db.read() as conn:
            return self._price(conn, self._load(conn, session_id))

    def create(self, request: SessionInput) -> Priced:
        """A new session, priced; refused whole (400) when a line cannot be sold."""
        now = self.clock()
        session = Session(_new_id("chk_"), self.protocol, INCOMPLETE, (request.currency or data.DEFAULT_CURRENCY).upper(),
                          now, now + SESSION_TTL)
        with self.db.write() as conn:
            session = self._apply(conn, session, request)
            priced = self._settle(conn, session)
            conn.execute(insert(checkout_sessions).values(
                id=session.id, protocol=self.protocol, status=priced.session.status, currency=session.currency,
                state=_state_json(priced.session), created_at=now, updated_at=now, expires_at=session.expires_at))
        return priced

    def update(self, session_id: str, request: SessionInput) -> Priced:
        """What the request sends replaces the session's, what it leaves out stays; a completed or
        canceled session takes no update (409), nor one being completed."""
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            self._refuse_final(session, "updated")
            if session.status == IN_PROGRESS:
                raise InFlight(f"checkout session {session_id} is being completed")
            priced = self._settle(conn, self._apply(conn, session, request))
            self._save(conn, priced.session)
        return priced

    def cancel(self, session_id: str) -> Priced:
        """Cancel a session that is neither completed nor canceled nor being completed (409 otherwise)."""
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            self._refuse_final(session, "canceled")
            if session.status == IN_PROGRESS:
                raise InFlight(f"checkout session {session_id} is being completed")
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
        """The method as sent, with addresses the agent did not identify given ids (the known
        customer's saved one for the same place, or a new one saved for the buyer's email), and the
        known customer's saved addresses offered when the agent sent none."""
        email = session.buyer_email
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
        then apply, one after another, to the other lines (a deal's price is exact)."""
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
            checked = self._check_deal(conn, row, session, now, deal)
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
        options = shipping_options(data.shipping_rates(conn), data.promotions(conn), destination.country,
                                   session.lines) if destination is not None else ()
        chosen = session.fulfillment.selected_option_id if session.fulfillment else None
        option = next((o for o in options if o.id == chosen), None)
        discounts = taken + applied
        return Priced(session, discounts, tuple(rejections), options, totals(session.lines, discounts, option), deal)

    def _check_deal(self, conn: Connection, row: DealRow, session: Session, now: datetime,
                    already: AppliedDeal | None) -> AppliedDeal | Rejection:
        if session.reserved and session.status in (IN_PROGRESS, COMPLETED):
            # This session's own completion holds (or used) the deal's redemption.
            return AppliedDeal(row, next(li.id for li in session.lines if li.product_id == row.product_id))
        return deals.check(conn, row, session.lines, session.currency, now, self.deal_ttl, already=already)

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

    def complete(self, session_id: str, payment: PaymentRequest, *, door: str) -> tuple[Priced, Order]:
        """Charge for the session and place its order (see the module's docstring); the priced,
        completed session and the order. Refusals: 409 when already completed, canceled or being
        completed (or its deal was bought elsewhere meanwhile), 400 when something is missing, 402
        when the payment is declined, 503 when the payment handler did not answer."""
        handler = self.handlers.get(payment.handler_id)
        if handler is None:
            offered = ", ".join(sorted(self.handlers)) or "none"
            raise InvalidInput(f"payment handler {payment.handler_id} is not available here (offered: {offered})")
        try:
            priced, credential = self._begin_completion(session_id, payment)
        except IntegrityError:  # a racing checkout redeemed the deal first
            raise Conflict(f"checkout session {session_id}: its deal was just bought through another checkout") \
                from None
        session = priced.session
        # The key names this exact payment: the session, the credential and the amount. A retry of it
        # (a lost answer, a crash before the order) is the same charge; a new total after a decline is
        # a new payment, which a processor would refuse under the old key.
        paid = {"credential": dict(credential), "amount": priced.totals.total_cents, "currency": session.currency}
        digest = hashlib.sha256(json.dumps(paid, sort_keys=True).encode()).hexdigest()[:32]
        charge = Charge(priced.totals.total_cents, session.currency, credential,
                        idempotency_key=f"{self.protocol}-{session.id}-{digest}",
                        description=f"checkout session {session.id}", metadata={"checkout_session": session.id})
        try:
            result = handler.charge(charge)
        except PaymentUnavailable:
            self._give_back(session_id)
            raise Unavailable("the payment handler did not answer: nothing was ordered; retry the completion") \
                from None
        except Exception:
            self._give_back(session_id)
            raise
        if not result.succeeded:
            self._give_back(session_id)
            why = result.reason or "the payment did not go through"
            if result.action_url:
                why += f" (the buyer must continue at {result.action_url})"
            raise PaymentDeclined(f"Payment failed: {why}")

        def place(conn: Connection) -> tuple[Priced, Order]:
            current = self._load(conn, session_id, for_update=True)
            found = order_for(conn, session_id=session_id)
            if found is None:
                found = self._order(priced, payment, result.reference, door, self.clock())
                insert_order(conn, found)
            done = replace(current, status=COMPLETED, order_id=found.id, progress_since=None)
            self._save(conn, done)
            return replace(priced, session=done), found

        return place_once(self.db, place)

    def _begin_completion(self, session_id: str, payment: PaymentRequest) -> tuple[Priced, Mapping[str, Any]]:
        """Step 1: check the session, take its stock and its deal, mark it in progress; the priced
        session and the credential to charge."""
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            self._refuse_final(session, "completed")
            now = self.clock()
            if session.status == IN_PROGRESS and session.progress_since and now - session.progress_since < STALE_PROGRESS:
                raise InFlight(f"checkout session {session_id} is being completed")
            priced = self._settle(conn, session) if session.status != IN_PROGRESS else self._price(conn, session)
            if not priced.ready:
                raise InvalidInput("Fulfillment address and option must be selected before completing the checkout")
            lost = next((r for r in priced.rejections if deals.find(conn, r.code) is not None), None)
            if lost is not None:  # never charge a price other than the one the deal promised
                raise Conflict(f"{lost.content}: nothing was charged; update the checkout's discount codes")
            credential = self._credential(conn, payment)
            if not session.reserved:
                self._reserve(conn, priced, now)
            session = replace(priced.session, status=IN_PROGRESS, reserved=True, progress_since=now)
            self._save(conn, session)
        return replace(priced, session=session), credential

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
        on_file = data.instrument(conn, payment.instrument_id) if payment.instrument_id else None
        if on_file is None or on_file.handler_id != payment.handler_id:
            raise InvalidInput("the payment instrument carries no credential, and none is on file for it")
        return {"type": "token", "token": on_file.token}

    def _give_back(self, session_id: str) -> None:
        """Undo step 1 after a payment that did not go through: the stock and the deal back, the
        session as it was."""
        with self.db.write() as conn:
            session = self._load(conn, session_id, for_update=True)
            if session.status != IN_PROGRESS:
                return
            if session.reserved:
                held = self._price(conn, session).deal
                for line in session.lines:
                    data.return_stock(conn, line.product_id, line.quantity)
                if held is not None:
                    release(conn, held.deal.id)
            self._save(conn, self._settle(conn, replace(session, reserved=False, progress_since=None)).session)

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

    # -- after the order ---------------------------------------------------------------------------

    def session_of(self, order: Order) -> Session | None:
        """The session an order was placed for, if it came through this protocol."""
        if order.session_id is None:
            return None
        with self.db.read() as conn:
            row = conn.execute(select(checkout_sessions).where(checkout_sessions.c.id == order.session_id)).first()
        return _session(row) if row is not None and row.protocol == self.protocol else None


__all__ = ["CANCELED", "COMPLETED", "CheckoutSessions", "FINAL", "Fulfillment", "FulfillmentRequest", "INCOMPLETE",
           "IN_PROGRESS", "LineRequest", "PaymentRequest", "Priced", "READY", "SESSION_TTL", "Session",
           "SessionInput"]
