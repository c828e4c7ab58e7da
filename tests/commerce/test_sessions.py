"""Completing a checkout session, at the core every protocol shares: a processor that does not
answer, one that asks the buyer to act, and a process that dies between the charge and the order."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import select

from haggler.catalog import load_catalog
from haggler.commerce.merchant_data import Address
from haggler.commerce.sessions import (IN_PROGRESS, MAX_QUANTITY, CheckoutSessions, FulfillmentRequest, LineRequest,
                                       PaymentRequest, SessionInput)
from haggler.errors import InFlight, InvalidInput, PaymentDeclined, Unavailable
from haggler.payments.handler import Charge, ChargeResult, PaymentOutcome, PaymentUnavailable
from haggler.storage.database import open_database
from haggler.storage.schema import commerce_inventory, orders

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


def test_no_answer_from_the_processor_is_503_and_leaves_nothing(db):
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Processor(PaymentUnavailable())})
    session_id = ready(sessions)
    with pytest.raises(Unavailable):
        sessions.complete(session_id, PAY, door="ucp")
    assert stock(db) == 5 and sessions.get(session_id).session.status == "ready_for_complete"


def test_a_buyer_action_required_is_a_402_naming_where(db):
    action = ChargeResult(PaymentOutcome.ACTION_REQUIRED, action_url="https://pay.example/3ds")
    sessions = CheckoutSessions(db, FakeClock(), "test", {"test": Processor(action)})
    with pytest.raises(PaymentDeclined, match="https://pay.example/3ds"):
        sessions.complete(ready(sessions), PAY, door="ucp")
    assert stock(db) == 5


def test_a_completion_cut_off_after_the_charge_is_finished_by_sending_it_again(db):
    """The charge went through but the process died before the order: the session stays in
    progress (a second completion meanwhile is refused), and once that is stale the same completion
    repeats the same charge (the processor answers what it did) and places the one order."""
    clock = FakeClock()
    processor = Processor(Died())
    sessions = CheckoutSessions(db, clock, "test", {"test": processor})
    session_id = ready(sessions)
    with pytest.raises(Died):
        sessions.complete(session_id, PAY, door="ucp")
    assert sessions.get(session_id).session.status == IN_PROGRESS and stock(db) == 3
    with pytest.raises(InFlight):
        sessions.complete(session_id, PAY, door="ucp")
    clock.advance(seconds=61)
    priced, order = sessions.complete(session_id, PAY, door="ucp")
    assert priced.session.status == "completed" and order.payment_reference == "ch_1"
    assert processor.keys[0] == processor.keys[-1] and stock(db) == 3
    with db.read() as conn:
        assert len(conn.execute(select(orders.c.id)).all()) == 1


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
