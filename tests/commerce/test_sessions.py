"""Completing a checkout session, at the core every protocol shares: a processor that does not
answer, one that asks the buyer to act (at its page, or through their agent's 3-D Secure), a process that dies between the charge and the order, a
completion taken over while the first still waits, and a total that changed since it was shown."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from haggler.catalog import load_catalog
from haggler.commerce.merchant_data import Address
from haggler.commerce.sessions import (AUTHENTICATION, COMPLETED, ESCALATION, IN_PROGRESS, MAX_QUANTITY, SETTLE_WITHIN,
                                       TAKEOVER_AFTER, AuthenticationRefused, CheckoutSessions, FulfillmentRequest,
                                       LineRequest, PaymentRequest, SessionInput, TotalChanged)
from haggler.errors import Conflict, InFlight, InvalidInput, PaymentDeclined, Unavailable
from haggler.payments.handler import Acquirer, AuthenticationRequest, AuthenticationResult, Charge, ChargeResult
from haggler.payments.handler import PaymentOutcome, PaymentSetupError, PaymentUnavailable
from haggler.storage.database import open_database
from haggler.storage.schema import checkout_sessions, commerce_inventory, commerce_shipping_rates, orders

try:
    from tests.support.servers import FakeClock
    from tests.support.ucp import seed
except ImportError:  # pragma: no cover
    from support.servers import FakeClock  # type: ignore[no-redef]
    from support.ucp import seed  # type: ignore[no-redef]

PAY = PaymentRequest("test", {"type": "token", "token": "t"})


class Died(BaseException):
    """The process ending mid-request: nothing after it runs, no handler catches it."""


class Processor:
    """A processor answering from a script, remembering its answer per idempotency key."""

    id = "test"

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.keys: list[str] = []
        self.done: dict[str, ChargeResult] = {}

    def charge(self, charge: Charge) -> ChargeResult:
        self.keys.append(charge.idempotency_key)
        if charge.idempotency_key in self.done:
            return self.done[charge.idempotency_key]
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            if isinstance(answer, Died):
                self.done[charge.idempotency_key] = ChargeResult(PaymentOutcome.SUCCEEDED, "ch_1")
            raise answer
        assert isinstance(answer, ChargeResult)
        self.done[charge.idempotency_key] = answer
        return answer


@pytest.fixture
def db(tmp_path) -> Iterator:
    url = f"sqlite:///{tmp_path}/core.db"
    seed(url)
    database = open_database(url)
    yield database
    database.dispose()


def ready(sessions: CheckoutSessions) -> str:
    where = FulfillmentRequest(None, "shipping", (Address("d1", country="US"),), "d1", "ground")
    priced = sessions.create(SessionInput(currency="USD", lines=(LineRequest(None, "mug", 2),), fulfillment=where))
    assert priced.ready
    return priced.session.id


def stock(db, product: str = "mug") -> int:
    with db.read() as conn:
        return conn.execute(select(commerce_inventory.c.quantity)
                            .where(commerce_inventory.c.product_id == product)).scalar_one()


OTHER_CARD = PaymentRequest("test", {"type": "token", "token": "another"})
SUCCEEDED = ChargeResult(PaymentOutcome.SUCCEEDED, "ch_1")


def placed(db) -> int:
    with db.read() as conn:
        return len(conn.execute(select(orders.c.id)).all())


def test_no_answer_keeps_the_hold_until_the_same_payment_settles_it(db):
    """A processor that does not answer may still have taken the money: the stock stays taken and
    the session in progress (503); another card, an update and a cancel are refused (409) while the
    first payment is unsettled; the same completion sent again asks the processor under the same
    key, and its answer (here: it did charge) places the one order."""
    processor = Processor(PaymentUnavailable("timeout"), SUCCEEDED)
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor})
    session_id = ready(sessions)
    with pytest.raises(Unavailable):
        sessions.complete(session_id, PAY, door="ucp")
    assert stock(db) == 3 and sessions.get(session_id).session.status == IN_PROGRESS
    with pytest.raises(Conflict, match="another payment"):
        sessions.complete(session_id, OTHER_CARD, door="ucp")
    with pytest.raises(Conflict, match="not known"):
        sessions.cancel(session_id)
    with pytest.raises(Conflict, match="not known"):
        sessions.update(session_id, SessionInput(lines=(LineRequest(None, "mug", 1),)))
    priced, order = sessions.complete(session_id, PAY, door="ucp")
    assert order is not None and order.payment_reference == "ch_1" and priced.session.status == COMPLETED
    assert len(set(processor.keys)) == 1 and len(processor.keys) == 2  # the other card was never charged
    assert stock(db) == 3 and placed(db) == 1


def test_no_answer_then_a_decline_gives_the_hold_back(db):
    declined = ChargeResult(PaymentOutcome.DECLINED, reason="insufficient funds")
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Processor(PaymentUnavailable("timeout"), declined)})
    session_id = ready(sessions)
    with pytest.raises(Unavailable):
        sessions.complete(session_id, PAY, door="ucp")
    with pytest.raises(PaymentDeclined, match="insufficient funds"):
        sessions.complete(session_id, PAY, door="ucp")
    assert stock(db) == 5 and sessions.get(session_id).session.status == "ready_for_complete"


def test_a_buyer_action_escalates_and_the_same_payment_finishes_after_it(db):
    """3-D Secure: nothing is taken yet, but the buyer may authorize at the processor's page at any
    moment, so the hold stays and the session requires escalation with that page; once the buyer
    is done, the same completion reads the processor's answer and places the order."""
    action = ChargeResult(PaymentOutcome.ACTION_REQUIRED, "pi_1", reason="authenticate",
                          action_url="https://pay.example/3ds")
    processor = Processor(action)
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor})
    session_id = ready(sessions)
    priced, order = sessions.complete(session_id, PAY, door="ucp")
    assert order is None and priced.session.status == ESCALATION and stock(db) == 3
    assert priced.awaiting_buyer is not None and priced.awaiting_buyer.action_url == "https://pay.example/3ds"
    assert sessions.get(session_id).awaiting_buyer == priced.awaiting_buyer
    with pytest.raises(Conflict, match="pay.example/3ds"):
        sessions.complete(session_id, OTHER_CARD, door="ucp")
    with pytest.raises(Conflict, match="awaits the buyer"):
        sessions.cancel(session_id)
    processor.done[processor.keys[0]] = ChargeResult(PaymentOutcome.SUCCEEDED, "pi_1")  # the buyer authorized
    priced, order = sessions.complete(session_id, PAY, door="ucp")
    assert order is not None and order.payment_reference == "pi_1" and priced.awaiting_buyer is None
    assert placed(db) == 1 and stock(db) == 3


def test_a_buyer_action_with_no_page_to_send_them_to_is_a_decline(db):
    action = ChargeResult(PaymentOutcome.ACTION_REQUIRED, reason="authenticate")
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Processor(action)})
    with pytest.raises(PaymentDeclined, match="no page"):
        sessions.complete(ready(sessions), PAY, door="ucp")
    assert stock(db) == 5


def test_a_completion_cut_off_after_the_charge_is_finished_by_sending_it_again(db):
    """The charge went through but the process died before the order: the session stays in
    progress (a second completion meanwhile is refused), and once the takeover window is over the same
    completion repeats the same charge (the processor answers what it did) and places the one order;
    another card is refused even then, since the first charge may be running still."""
    clock = FakeClock()
    processor = Processor(Died())
    sessions = CheckoutSessions(db, clock, "test", {"test": processor})
    session_id = ready(sessions)
    with pytest.raises(Died):
        sessions.complete(session_id, PAY, door="ucp")
    assert sessions.get(session_id).session.status == IN_PROGRESS and stock(db) == 3
    with pytest.raises(InFlight):
        sessions.complete(session_id, PAY, door="ucp")
    clock.advance(seconds=TAKEOVER_AFTER.total_seconds() + 1)
    with pytest.raises(Conflict, match="another payment"):
        sessions.complete(session_id, OTHER_CARD, door="ucp")
    priced, order = sessions.complete(session_id, PAY, door="ucp")
    assert priced.session.status == "completed" and order is not None and order.payment_reference == "ch_1"
    assert set(processor.keys) == {processor.keys[0]} and stock(db) == 3 and placed(db) == 1


class Gate:
    """A processor whose answers come in order, each call waiting until the test lets it answer:
    deliberately inconsistent (a late decline after a success under the same key) to show that only
    the completion driving a payment gives its hold back."""

    id = "test"

    def __init__(self, *answers: ChargeResult) -> None:
        self.answers = list(answers)
        self.go: list[threading.Event] = [threading.Event() for _ in answers]
        self.started = [threading.Event() for _ in answers]
        self.keys: list[str] = []
        self._lock = threading.Lock()

    def charge(self, charge: Charge) -> ChargeResult:
        with self._lock:
            n = len(self.keys)
            self.keys.append(charge.idempotency_key)
        self.started[n].set()
        assert self.go[n].wait(10)
        return self.answers[n]


def test_a_stale_completions_late_decline_does_not_undo_the_one_that_took_over(db):
    """A first completion waits on its processor past :data:`TAKEOVER_AFTER`; the same payment sent
    again takes over and succeeds; the first one's decline then arrives late. The stock and the deal
    stay with the order: only the completion driving the payment gives a hold back."""
    clock = FakeClock()
    gate = Gate(ChargeResult(PaymentOutcome.DECLINED, reason="late"), SUCCEEDED)
    sessions = CheckoutSessions(db, clock, "test", {"test": gate})
    session_id = ready(sessions)
    out: dict[str, object] = {}

    def first() -> None:
        try:
            sessions.complete(session_id, PAY, door="ucp")
        except PaymentDeclined as exc:
            out["first"] = exc
    thread = threading.Thread(target=first)
    thread.start()
    assert gate.started[0].wait(10)
    clock.advance(seconds=TAKEOVER_AFTER.total_seconds() + 1)
    second = threading.Thread(target=lambda: out.setdefault("second", sessions.complete(session_id, PAY, door="ucp")))
    second.start()
    assert gate.started[1].wait(10)
    gate.go[1].set()
    second.join(10)
    gate.go[0].set()
    thread.join(10)
    assert isinstance(out["first"], PaymentDeclined) and out["second"][1] is not None  # type: ignore[index]
    assert gate.keys[0] == gate.keys[1]  # the takeover repeated the same charge
    assert sessions.get(session_id).session.status == COMPLETED and stock(db) == 3 and placed(db) == 1


def test_a_total_that_changed_since_it_was_shown_is_not_charged(db):
    """The total charged is the one the agent was last shown: a rate changed after the review
    refuses the completion (409, nothing charged) until the agent has read the checkout again."""
    processor = Processor(SUCCEEDED)
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor})
    session_id = ready(sessions)
    shown = sessions.get(session_id).totals.total_cents
    with db.write() as conn:
        conn.execute(update(commerce_shipping_rates).values(price_cents=commerce_shipping_rates.c.price_cents + 100))
    with pytest.raises(TotalChanged, match=f"not the {shown} last shown"):
        sessions.complete(session_id, PAY, door="ucp")
    assert processor.keys == [] and stock(db) == 5
    now = sessions.get(session_id).totals.total_cents
    assert now == shown + 100
    priced, order = sessions.complete(session_id, PAY, door="ucp")
    assert order is not None and order.total_cents == now == priced.totals.total_cents


def test_a_completed_session_shows_the_price_it_was_paid_at(db):
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Processor(SUCCEEDED)})
    session_id = ready(sessions)
    priced, order = sessions.complete(session_id, PAY, door="ucp")
    with db.write() as conn:
        conn.execute(update(commerce_shipping_rates).values(price_cents=commerce_shipping_rates.c.price_cents + 100))
    again = sessions.get(session_id)
    assert again.totals == priced.totals and order is not None and again.totals.total_cents == order.total_cents


def test_an_expired_session_is_canceled(db):
    clock = FakeClock()
    sessions = CheckoutSessions(db, clock, "test", {})
    session_id = ready(sessions)
    clock.advance(hours=6)
    assert sessions.get(session_id).session.status == "canceled"
    assert timedelta(hours=6) == sessions.get(session_id).session.expires_at - sessions.get(session_id).session.created_at


def test_a_retry_is_the_same_charge_and_a_new_total_a_new_one(db):
    """The charge's idempotency key names the payment (session, credential, amount): a declined
    payment sent again is the same charge (a processor answers it from its record), while the same card
    for a changed total is a new payment — under the old key a processor such as Stripe would refuse
    it as a reuse of the key with other parameters."""
    declined = ChargeResult(PaymentOutcome.DECLINED, reason="insufficient funds")
    processor = Processor(declined, ChargeResult(PaymentOutcome.SUCCEEDED, "ch_2"))
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor})
    session_id = ready(sessions)
    for _ in range(2):
        with pytest.raises(PaymentDeclined):
            sessions.complete(session_id, PAY, door="ucp")
    assert processor.keys[0] == processor.keys[1]
    sessions.update(session_id, SessionInput(lines=(LineRequest(None, "mug", 1),)))
    priced, order = sessions.complete(session_id, PAY, door="ucp")
    assert processor.keys[2] != processor.keys[0] and order.payment_reference == "ch_2"
    assert order.total_cents == priced.totals.total_cents


def test_a_huge_quantity_is_refused_before_anything_is_charged(db):
    """Every line is bounded: by the stock where it is counted, by :data:`MAX_QUANTITY` where it is
    not (a catalog product). Unbounded, 10**30 units were priced, charged, and then failed to fit the
    order: a 500 after the money moved."""
    processor = Processor()
    product = load_catalog().products[0]
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor}, catalog=load_catalog())
    with pytest.raises(InvalidInput, match="more than one line may hold"):
        sessions.create(SessionInput(currency=product.facts.currency, lines=(LineRequest(None, product.id, 10**30),)))
    with pytest.raises(InvalidInput, match="Insufficient stock"):
        sessions.create(SessionInput(currency="USD", lines=(LineRequest(None, "mug", MAX_QUANTITY + 1),)))
    assert sessions.create(SessionInput(currency=product.facts.currency,
                                        lines=(LineRequest(None, product.id, MAX_QUANTITY),))).session.lines
    assert processor.keys == []


# -- review 31b: settling what no retry can, old rows, keys ---------------------------------------


def test_a_setup_error_on_the_retry_of_an_unknown_payment_keeps_the_hold(db):
    """The first charge's answer was lost (the money may have moved); the retry is refused by the
    processor before it gets there (a rotated key: PaymentSetupError). That says nothing about the
    first charge, so the hold stays and another card is still refused."""
    class Refusing(Processor):
        def charge(self, charge: Charge) -> ChargeResult:
            if len(self.keys) == 1:
                self.keys.append(charge.idempotency_key)
                raise PaymentSetupError("Stripe refused the API key (HTTP 401)")
            return super().charge(charge)
    processor = Refusing(PaymentUnavailable("timeout"), SUCCEEDED)
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor})
    session_id = ready(sessions)
    with pytest.raises(Unavailable):
        sessions.complete(session_id, PAY, door="ucp")
    with pytest.raises(PaymentSetupError):
        sessions.complete(session_id, PAY, door="ucp")
    assert stock(db) == 3 and sessions.get(session_id).session.hold is not None
    with pytest.raises(Conflict, match="another payment"):
        sessions.complete(session_id, OTHER_CARD, door="ucp")
    _, order = sessions.complete(session_id, PAY, door="ucp")
    assert order is not None and placed(db) == 1 and len(set(processor.keys)) == 1


def test_a_first_setup_error_gives_everything_back(db):
    class Misconfigured(Processor):
        def charge(self, charge: Charge) -> ChargeResult:
            raise PaymentSetupError("the stripe package is not installed")
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Misconfigured()})
    session_id = ready(sessions)
    with pytest.raises(PaymentSetupError):
        sessions.complete(session_id, PAY, door="ucp")
    assert stock(db) == 5 and sessions.get(session_id).session.hold is None


def test_past_the_processors_memory_of_a_key_no_retry_is_sent_and_the_store_settles_by_hand(db):
    """A processor forgets a key after a day: a retry then would be a new charge. After
    :data:`SETTLE_WITHIN` the completion is refused without reaching the processor; the store,
    having looked at the processor's records, settles it: paid places the order at the held price."""
    clock = FakeClock()
    processor = Processor(PaymentUnavailable("timeout"))
    sessions = CheckoutSessions(db, clock, "test", {"test": processor})
    session_id = ready(sessions)
    with pytest.raises(Unavailable):
        sessions.complete(session_id, PAY, door="ucp")
    clock.advance(seconds=SETTLE_WITHIN.total_seconds())
    with pytest.raises(Conflict, match="too long ago"):
        sessions.complete(session_id, PAY, door="ucp")
    assert len(processor.keys) == 1
    assert [s.id for s in sessions.unsettled()] == [session_id]
    priced, order = sessions.settle(session_id, paid_reference="pi_found")
    assert order is not None and order.payment_reference == "pi_found" and priced.session.status == COMPLETED
    assert stock(db) == 3 and placed(db) == 1 and sessions.unsettled() == []


def test_an_abandoned_three_d_secure_is_settled_unpaid_and_everything_goes_back(db):
    action = ChargeResult(PaymentOutcome.ACTION_REQUIRED, "pi_1", action_url="https://pay.example/3ds")
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Processor(action)})
    session_id = ready(sessions)
    sessions.complete(session_id, PAY, door="ucp")
    [held] = sessions.unsettled()
    assert held.hold is not None and held.hold.payment.reference == "pi_1"
    priced, order = sessions.settle(session_id, paid_reference=None)
    assert order is None and priced.session.status == "canceled" and stock(db) == 5 and placed(db) == 0
    with pytest.raises(Conflict, match="no unsettled payment"):
        sessions.settle(session_id, paid_reference=None)


def test_a_payment_being_charged_is_not_settled_by_hand(db):
    clock = FakeClock()
    sessions = CheckoutSessions(db, clock, "test", {"test": Processor(Died())})
    session_id = ready(sessions)
    with pytest.raises(Died):
        sessions.complete(session_id, PAY, door="ucp")
    with pytest.raises(InFlight):
        sessions.settle(session_id, paid_reference=None)
    clock.advance(seconds=TAKEOVER_AFTER.total_seconds())
    assert sessions.settle(session_id, paid_reference="ch_1")[1] is not None


def _as_row_before_holds(db, session_id: str, *, in_progress: bool, at) -> None:
    """The session's row as the release before holds stored it: ``reserved`` and ``progress_since``."""
    import json as _json
    with db.write() as conn:
        row = conn.execute(select(checkout_sessions).where(checkout_sessions.c.id == session_id)).one()
        state = _json.loads(row.state)
        state.pop("hold", None)
        state.pop("quoted_total_cents", None)
        state.update(reserved=in_progress, progress_since=at.isoformat() if in_progress else None)
        values = {"state": _json.dumps(state, sort_keys=True)}
        if in_progress:
            values["status"] = IN_PROGRESS
        conn.execute(update(checkout_sessions).where(checkout_sessions.c.id == session_id).values(**values))


def test_a_ready_row_from_before_quotes_completes_at_its_total(db):
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Processor(SUCCEEDED)})
    session_id = ready(sessions)
    _as_row_before_holds(db, session_id, in_progress=False, at=FakeClock()())
    assert sessions.complete(session_id, PAY, door="ucp")[1] is not None


def test_a_completion_in_progress_from_before_holds_is_held_and_settled_by_hand(db):
    """Its stock was taken and money may have moved, but its key cannot be known: it is a hold no
    retry matches and no cancel releases, which the store settles; its stock is taken once."""
    clock = FakeClock()
    sessions = CheckoutSessions(db, clock, "test", {"test": Processor(SUCCEEDED)})
    session_id = ready(sessions)
    with db.write() as conn:  # what the old step 1 did
        conn.execute(update(commerce_inventory).where(commerce_inventory.c.product_id == "mug")
                     .values(quantity=commerce_inventory.c.quantity - 2))
    _as_row_before_holds(db, session_id, in_progress=True, at=clock())
    with pytest.raises(Conflict):
        sessions.cancel(session_id)
    with pytest.raises(Conflict, match="another payment"):
        sessions.complete(session_id, PAY, door="ucp")
    assert [s.id for s in sessions.unsettled()] == [session_id]
    sessions.settle(session_id, paid_reference=None)
    assert stock(db) == 5 and sessions.get(session_id).session.status == "canceled"


def test_a_payments_key_is_no_bare_hash_of_the_card(db):
    """The key is stored with the session and sent to the processor: keyed with the store's secret,
    it cannot be reversed by trying every card code."""
    import hashlib as _hashlib
    import json as _json
    card = {"type": "card", "number": "4242424242424242", "cvc": "123"}
    processor = Processor(SUCCEEDED)
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor})
    session_id = ready(sessions)
    total = sessions.get(session_id).totals.total_cents
    sessions.complete(session_id, PaymentRequest("test", card), door="ucp")
    bare = _hashlib.sha256(_json.dumps({"credential": card, "amount": total, "currency": "USD"},
                                       sort_keys=True).encode()).hexdigest()[:32]
    assert bare not in processor.keys[0]
    with db.read() as conn:
        assert bare not in conn.execute(select(checkout_sessions.c.state)).scalar_one()


def test_the_takeover_window_outlasts_the_stripe_handlers_longest_charge():
    """A replayed create then a retrieve, each up to three tries of ``timeout`` with the SDK's pauses
    (at most 5 s): a takeover never starts while the first charge may still be waiting."""
    import inspect

    from haggler.payments.stripe_handler import StripeHandler
    params = inspect.signature(StripeHandler.__init__).parameters
    timeout, retries = params["timeout"].default, params["max_network_retries"].default
    longest = 2 * ((retries + 1) * timeout + retries * 5)
    assert TAKEOVER_AFTER.total_seconds() > longest


def test_catalog_shipping_is_offered_to_checkouts_in_the_stores_currency_only(tmp_path):
    from importlib import resources

    from haggler.catalog import parse_catalog
    data = json.loads(resources.files("haggler").joinpath("data/demo_catalog.json").read_text("utf-8-sig"))
    data["store"]["shipping"] = [{"id": "std", "title": "Standard", "price": 7}]
    data["products"][0]["currency"] = "EUR"
    catalog = parse_catalog(data)
    database = open_database(f"sqlite:///{tmp_path}/catalog-only.db")  # no merchant data: the catalog's rates
    try:
        sessions = CheckoutSessions(database, FakeClock(), "test", {}, catalog=catalog)
        where = FulfillmentRequest(None, "shipping", (Address("d1", country="US"),), "d1", None)
        euro, dollar = catalog.products[0], catalog.products[1]
        assert sessions.create(SessionInput(currency="EUR", lines=(LineRequest(None, euro.id, 1),),
                                            fulfillment=where)).options == ()
        assert [(o.id, o.price_cents) for o in sessions.create(SessionInput(
            currency="USD", lines=(LineRequest(None, dollar.id, 1),), fulfillment=where)).options] == [("std", 700)]
    finally:
        database.dispose()


ASKED = AuthenticationRequest(Acquirer("412345", "US", "acq-1", "Tea Shop"), "visa")
THREE_DS = ChargeResult(PaymentOutcome.ACTION_REQUIRED, "pi_1", reason="authenticate",
                        action_url="https://pay.example/3ds", authentication=ASKED)
RESULT = AuthenticationResult("authenticated", "AbCdEfGhIjKlMnOpQrStUvWxY0=", "05", "ds-1", "2.2.0")


class Authenticating(Processor):
    """A processor that asks for 3-D Secure and takes the payment once the charge brings a result
    (declining a failed one), keeping each charge it was sent; ``lose_next``: the next answer to a
    result is lost on its way back (the money moved all the same)."""

    def __init__(self) -> None:
        super().__init__(THREE_DS)
        self.charges: list[Charge] = []
        self.lose_next = False

    def charge(self, charge: Charge) -> ChargeResult:
        self.charges.append(charge)
        if charge.authentication is not None:
            ok = charge.authentication.authenticated
            self.done[charge.idempotency_key] = ChargeResult(
                PaymentOutcome.SUCCEEDED if ok else PaymentOutcome.DECLINED, "pi_1",
                reason=None if ok else f"authentication {charge.authentication.outcome}")
            if self.lose_next:
                self.lose_next = False
                raise PaymentUnavailable("timeout")
        return super().charge(charge)


def test_an_agent_that_runs_3ds_waits_authentication_required_and_the_result_continues_the_same_payment(db):
    """A protocol whose agent runs 3-D Secure (ACP): the hold stays, the session waits
    authentication_required with what the agent needs (kept through a read of the stored row), the
    completion without the result is refused before anything is charged, another card and a cancel
    are refused, and the result goes to the processor with the same key: one order."""
    processor = Authenticating()
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor}, agent_authentication=True)
    session_id = ready(sessions)
    priced, order = sessions.complete(session_id, PAY, door="acp")
    assert order is None and priced.session.status == AUTHENTICATION and stock(db) == 3
    assert priced.awaiting_authentication == ASKED and sessions.get(session_id).awaiting_authentication == ASKED
    assert priced.awaiting_buyer is None and priced.session.hold.payment.action_url is None
    with pytest.raises(AuthenticationRefused) as missing:
        sessions.complete(session_id, PAY, door="acp")
    assert missing.value.missing and len(processor.charges) == 1
    with pytest.raises(Conflict, match="another payment"):
        sessions.complete(session_id, replace(OTHER_CARD, authentication=RESULT), door="acp")
    with pytest.raises(Conflict, match="authenticate"):
        sessions.cancel(session_id)
    priced, order = sessions.complete(session_id, replace(PAY, authentication=RESULT), door="acp")
    assert order is not None and order.payment_reference == "pi_1" and priced.session.status == COMPLETED
    assert [c.authentication for c in processor.charges] == [None, RESULT]
    assert len({c.idempotency_key for c in processor.charges}) == 1  # the same payment, continued
    assert placed(db) == 1 and stock(db) == 3 and priced.awaiting_authentication is None


def test_a_failed_authentication_gives_the_hold_back(db):
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Authenticating()}, agent_authentication=True)
    session_id = ready(sessions)
    sessions.complete(session_id, PAY, door="acp")
    with pytest.raises(PaymentDeclined, match="authentication denied"):
        sessions.complete(session_id, replace(PAY, authentication=AuthenticationResult("denied")), door="acp")
    assert stock(db) == 5 and placed(db) == 0 and sessions.get(session_id).session.status == "ready_for_complete"


def test_a_result_lost_on_its_way_back_is_sent_again_with_the_result(db):
    """The continuation's answer lost (no answer): the payment is unknown, the hold stays and keeps
    what the agent needed; the same completion with the result settles it."""
    processor = Authenticating()
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor}, agent_authentication=True)
    session_id = ready(sessions)
    sessions.complete(session_id, PAY, door="acp")
    processor.lose_next = True
    with pytest.raises(Unavailable):
        sessions.complete(session_id, replace(PAY, authentication=RESULT), door="acp")
    held = sessions.get(session_id).session
    assert held.status == IN_PROGRESS and held.hold.payment.authentication == ASKED
    priced, order = sessions.complete(session_id, replace(PAY, authentication=RESULT), door="acp")
    assert order is not None and placed(db) == 1


def test_without_an_agent_that_runs_3ds_the_buyer_goes_to_the_processors_page(db):
    """UCP: the same answer escalates to the processor's page; an authentication result is refused."""
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Authenticating()})
    session_id = ready(sessions)
    priced, _ = sessions.complete(session_id, PAY, door="ucp")
    assert priced.session.status == ESCALATION and priced.awaiting_buyer.action_url == "https://pay.example/3ds"
    assert priced.awaiting_authentication is None
    with pytest.raises(AuthenticationRefused) as unexpected:
        sessions.complete(session_id, replace(PAY, authentication=RESULT), door="ucp")
    assert not unexpected.value.missing


def test_a_result_for_a_session_that_asked_for_none_charges_nothing(db):
    processor = Processor(SUCCEEDED)
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": processor}, agent_authentication=True)
    session_id = ready(sessions)
    with pytest.raises(AuthenticationRefused):
        sessions.complete(session_id, replace(PAY, authentication=RESULT), door="acp")
    assert processor.keys == [] and stock(db) == 5


def test_an_agent_that_declared_it_cannot_run_3ds_goes_to_the_processors_page_instead(db):
    """The agent declared what it handles, without 3ds: it is handed the processor's page
    (requires_escalation), where the buyer can act, not asked for a result it can never send."""
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Authenticating()}, agent_authentication=True)
    where = FulfillmentRequest(None, "shipping", (Address("d1", country="US"),), "d1", "ground")
    session_id = sessions.create(SessionInput(currency="USD", lines=(LineRequest(None, "mug", 2),), fulfillment=where,
                                              interventions=())).session.id
    priced, order = sessions.complete(session_id, PAY, door="acp")
    assert order is None and priced.session.status == ESCALATION and priced.awaiting_authentication is None
    assert priced.awaiting_buyer is not None and priced.awaiting_buyer.action_url == THREE_DS.action_url
