"""The buyer's return from the processor's 3-D Secure page, at the checkout core: ``resume`` reads
the payment back from the processor (never charging) and settles it as a retry of the completion
would, guarded the same way, so that racing a retry or another resume leaves one order and one
charge (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from functools import partial

import pytest
from sqlalchemy import select

from haggler.commerce.merchant_data import Address
from haggler.commerce.sessions import (COMPLETED, ESCALATION, IN_PROGRESS, READY, CheckoutSessions,
                                       FulfillmentRequest, LineRequest, PaymentRequest, Resumed, SessionInput)
from haggler.errors import Unavailable
from haggler.payments.handler import ChargeResult, PaymentOutcome
from haggler.storage.database import open_database
from haggler.storage.schema import commerce_inventory, order_events, orders

try:
    from tests.support.processors import HANDLER_ID, Held, Scripted
    from tests.support.servers import FakeClock
    from tests.support.ucp import seed
except ImportError:  # pragma: no cover
    from support.processors import HANDLER_ID, Held, Scripted  # type: ignore[no-redef]
    from support.servers import FakeClock  # type: ignore[no-redef]
    from support.ucp import seed  # type: ignore[no-redef]

PAY = PaymentRequest(HANDLER_ID, {"type": "token", "token": "t"}, return_url="https://shop.example/pay/x")
PAGE = "https://pay.example/3ds/pi_1"
THREE_DS = ChargeResult(PaymentOutcome.ACTION_REQUIRED, "pi_1", reason="authenticate", action_url=PAGE)
PAID = ChargeResult(PaymentOutcome.SUCCEEDED, "pi_1")
FAILED = ChargeResult(PaymentOutcome.DECLINED, "pi_1", reason="The card failed authentication.")


@pytest.fixture
def db(db_url: str) -> Iterator:
    seed(db_url)
    database = open_database(db_url)
    yield database
    database.dispose()


def awaiting(db, processor: Scripted) -> tuple[CheckoutSessions, str]:
    """A session whose completion sent the buyer to the processor's page (two mugs held)."""
    sessions = CheckoutSessions(db, FakeClock(), "ucp", {HANDLER_ID: processor})
    where = FulfillmentRequest(None, "shipping", (Address("d1", country="US"),), "d1", "ground")
    session_id = sessions.create(SessionInput(currency="USD", lines=(LineRequest(None, "mug", 2),),
                                              fulfillment=where)).session.id
    priced, order = sessions.complete(session_id, PAY, door="ucp")
    assert order is None and priced.session.status == ESCALATION and stock(db) == 3
    return sessions, session_id


def stock(db) -> int:
    with db.read() as conn:
        return conn.execute(select(commerce_inventory.c.quantity)
                            .where(commerce_inventory.c.product_id == "mug")).scalar_one()


def placed(db) -> list:
    with db.read() as conn:
        return conn.execute(select(orders.c.id, orders.c.payment_reference)).all()


def owed(db) -> list:
    """The order events recorded for the platform: one ``placed`` per order, whoever placed it."""
    with db.read() as conn:
        return conn.execute(select(order_events.c.order_id, order_events.c.kind)
                            .where(order_events.c.door != "mail")).all()


def test_the_charge_names_the_protocols_page_and_a_retry_sends_the_same_one(db):
    processor = Scripted(THREE_DS)
    sessions, session_id = awaiting(db, processor)
    sessions.complete(session_id, PaymentRequest(HANDLER_ID, PAY.credential, return_url="https://other.example/"),
                      door="ucp")
    assert [c.return_url for c in processor.charges] == [PAY.return_url] * 2
    assert len({c.idempotency_key for c in processor.charges}) == 1


def test_paid_at_the_processor_places_the_one_order_and_a_second_visit_only_reads_it(db):
    processor = Scripted(THREE_DS)
    sessions, session_id = awaiting(db, processor)
    processor.settle_all(PAID)  # the buyer authenticated
    resumed = sessions.resume(session_id)
    assert resumed.order is not None and resumed.order.payment_reference == "pi_1"
    assert resumed.priced.session.status == COMPLETED and resumed.priced.awaiting_buyer is None
    again = sessions.resume(session_id)
    assert again.order.id == resumed.order.id
    assert processor.reads == ["pi_1"] and len(processor.charges) == 1  # read once, never charged again
    assert placed(db) == [(resumed.order.id, "pi_1")] and stock(db) == 3
    assert owed(db) == [(resumed.order.id, "placed")]


def test_a_failed_authentication_gives_the_hold_back_and_another_payment_may_follow(db):
    processor = Scripted(THREE_DS, PAID)
    sessions, session_id = awaiting(db, processor)
    processor.settle_all(FAILED)
    resumed = sessions.resume(session_id)
    assert resumed.order is None and resumed.reason == FAILED.reason
    assert resumed.priced.session.status == READY and resumed.priced.session.hold is None and stock(db) == 5
    _, order = sessions.complete(session_id, PaymentRequest(HANDLER_ID, {"type": "token", "token": "other"}),
                                 door="ucp")
    assert order is not None and len(placed(db)) == 1


def test_while_the_buyer_has_yet_to_act_nothing_changes(db):
    processor = Scripted(THREE_DS)
    sessions, session_id = awaiting(db, processor)
    before = sessions.peek(session_id)
    resumed = sessions.resume(session_id)
    assert resumed == Resumed(resumed.priced, None, action_url=PAGE)
    assert sessions.peek(session_id) == before and placed(db) == [] and stock(db) == 3


def test_a_processor_that_does_not_answer_changes_nothing(db):
    processor = Scripted(THREE_DS)
    sessions, session_id = awaiting(db, processor)
    before = sessions.peek(session_id)
    processor.unreachable = True
    with pytest.raises(Unavailable, match="nothing changed"):
        sessions.resume(session_id)
    assert sessions.peek(session_id) == before and placed(db) == [] and stock(db) == 3


class Reading(Scripted):
    """Scripted, but each read waits for the test's ``go`` once it has said it ``started``: a
    resume still reading while another request comes in."""

    def __init__(self, *answers: ChargeResult) -> None:
        super().__init__(*answers)
        self.started = threading.Semaphore(0)
        self.go = threading.Event()

    def retrieve(self, reference: str) -> ChargeResult:
        self.started.release()
        assert self.go.wait(10), "the test never let the read answer"
        return super().retrieve(reference)


def run(target, *args) -> tuple[threading.Thread, list]:
    out: list = []
    thread = threading.Thread(target=lambda: out.append(target(*args)))
    thread.start()
    return thread, out


def test_two_resumes_racing_place_one_order(db):
    processor = Reading(THREE_DS)
    sessions, session_id = awaiting(db, processor)
    processor.settle_all(PAID)
    (first, a), (second, b) = run(sessions.resume, session_id), run(sessions.resume, session_id)
    assert processor.started.acquire(timeout=10) and processor.started.acquire(timeout=10)  # both reading
    processor.go.set()
    first.join(10)
    second.join(10)
    [one], [other] = a, b
    assert one.order.id == other.order.id and owed(db) == [(one.order.id, "placed")]
    assert len(placed(db)) == 1 and len(processor.charges) == 1 and stock(db) == 3


def test_a_resume_racing_a_retry_of_the_completion_places_one_order(db):
    """The retry charges under the payment's key (the processor answers what it did: one charge) and
    places the order while the resume still reads; the resume then finds it placed."""
    processor = Reading(THREE_DS)
    sessions, session_id = awaiting(db, processor)
    processor.settle_all(PAID)
    reader, found = run(sessions.resume, session_id)
    assert processor.started.acquire(timeout=10)
    _, order = sessions.complete(session_id, PAY, door="ucp")
    processor.go.set()
    reader.join(10)
    [resumed] = found
    assert order is not None and resumed.order.id == order.id and owed(db) == [(order.id, "placed")]
    assert len(placed(db)) == 1 and len({c.idempotency_key for c in processor.charges}) == 1 and stock(db) == 3


def test_a_resume_while_a_retry_is_charging_leaves_the_payment_to_it(db):
    processor = Held(THREE_DS)
    processor.go.set()
    sessions, session_id = awaiting(db, processor)
    processor.go.clear()
    processor.started.clear()
    processor.settle_all(PAID)
    retry, done = run(partial(sessions.complete, door="ucp"), session_id, PAY)
    assert processor.started.wait(10)
    resumed = sessions.resume(session_id)
    assert resumed.order is None and resumed.priced.session.status == IN_PROGRESS and processor.reads == []
    processor.go.set()
    retry.join(10)
    [(_, order)] = done
    assert order is not None and len(placed(db)) == 1
