"""Completing a checkout session, at the core every protocol shares: a processor that does not
answer, one that asks the buyer to act, a process that dies between the charge and the order, a
completion taken over while the first still waits, and a total that changed since it was shown."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import select, update

from haggler.catalog import load_catalog
from haggler.commerce.merchant_data import Address
from haggler.commerce.sessions import (COMPLETED, ESCALATION, IN_PROGRESS, MAX_QUANTITY, TAKEOVER_AFTER,
                                       CheckoutSessions, FulfillmentRequest, LineRequest, PaymentRequest, SessionInput,
                                       TotalChanged)
from haggler.errors import Conflict, InFlight, InvalidInput, PaymentDeclined, Unavailable
from haggler.payments.handler import Charge, ChargeResult, PaymentOutcome, PaymentUnavailable
from haggler.storage.database import open_database
from haggler.storage.schema import commerce_inventory, commerce_shipping_rates, orders

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
