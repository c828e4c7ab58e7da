"""The order-event outbox's own rules (commerce/order_events.py), with doors whose sending the test
scripts (the real receivers, HTTP and SMTP, are in tests/protocols/acp/test_acp_order_webhooks.py
and tests/test_order_mail.py): one receiver that can never be reached does not stop the others, a
sweep keeps to its time, an event without the base its links need waits for the sweep, and a
sender whose hold ran out leaves the row to the one that took it over."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import pytest
from sqlalchemy import select

from haggler.commerce import order_events as events_module
from haggler.commerce.order_events import HOLD, PLACED, Event, OrderEvents, Outgoing, record
from haggler.commerce.webhooks import Undeliverable
from haggler.orders import Order, OrderLine, insert_order
from haggler.storage.database import open_database
from haggler.storage.schema import order_events

try:
    from tests.support.servers import FakeClock
except ImportError:  # pragma: no cover
    from support.servers import FakeClock  # type: ignore[no-redef]


class Scripted:
    """A door whose sends answer as told, by order id: ``True`` taken, ``False`` not now, an
    exception raised; each send is kept in ``sent``."""

    def __init__(self, answers: Mapping[str, object], base_needed: bool = False,
                 during: Callable[[], None] | None = None) -> None:
        self.answers = answers
        self.base_needed = base_needed
        self.during = during
        self.sent: list[str] = []
        self.delivery = self

    def outgoing(self, event: Event, base: str | None) -> Outgoing | None:
        if self.base_needed and base is None:
            return None
        return Outgoing(f"https://receiver.example/{event.order_id}", b"{}", lambda _: {})

    def post(self, url: str, body: bytes, sign: Callable[[bytes], Mapping[str, str]], what: str) -> bool:
        order_id = url.rsplit("/", 1)[1]
        self.sent.append(order_id)
        if self.during is not None:
            self.during()
        answer = self.answers.get(order_id, True)
        if isinstance(answer, BaseException):
            raise answer
        return bool(answer)


@pytest.fixture
def db(tmp_path):
    database = open_database(f"sqlite:///{tmp_path}/events.db")
    yield database
    database.dispose()


def orders_owing(db, clock: FakeClock, *order_ids: str, base: str | None = "https://shop.example",
                 sent_after_answer: bool = False) -> list[str]:
    """Orders placed now, each owing the door ``test`` its ``placed`` event; the events' ids."""
    ids = []
    with db.write() as conn:
        for order_id in order_ids:
            line = OrderLine("mug", "Mug", 1, 1000, "USD", (), None, 1000)
            insert_order(conn, Order(order_id, (line,), 1000, "USD", clock(), None, door="chat"))
            ids.append(record(conn, "test", order_id, PLACED, base, clock(), sent_after_answer=sent_after_answer))
    return ids


def row(db, event_id: str):
    with db.read() as conn:
        return conn.execute(select(order_events).where(order_events.c.id == event_id)).one()


def test_a_receiver_no_attempt_can_reach_is_given_up_and_the_others_are_still_sent(db):
    clock = FakeClock()
    door = Scripted({"ord_bad": Undeliverable("http://a..b/hook: invalid"), "ord_bug": KeyError("x")})
    bad, bug, good = orders_owing(db, clock, "ord_bad", "ord_bug", "ord_good")
    events = OrderEvents(db, clock, {"test": door})
    assert events.deliver_due() == 1 and sorted(door.sent) == ["ord_bad", "ord_bug", "ord_good"]
    assert row(db, good).sent_at is not None
    assert row(db, bad).gave_up_at is not None and "invalid" in row(db, bad).last_error
    assert row(db, bug).gave_up_at is not None and row(db, bug).last_error == "could not be sent: KeyError"
    clock.advance(hours=2)
    assert events.deliver_due() == 0 and len(door.sent) == 3  # none of them again


def test_a_sweep_keeps_to_its_time_and_leaves_the_rest_for_the_next(db, monkeypatch):
    """Each send here takes longer than a sweep's time: a sweep sends one and leaves the others due."""
    clock = FakeClock()
    monkeypatch.setattr(events_module, "SWEEP_SECONDS", 0.1)
    door = Scripted({}, during=lambda: time.sleep(0.3))
    orders_owing(db, clock, "ord_1", "ord_2", "ord_3")
    events = OrderEvents(db, clock, {"test": door})
    assert [events.deliver_due() for _ in range(4)] == [1, 1, 1, 0] and len(door.sent) == 3


def test_an_event_without_the_base_its_links_need_waits_for_the_sweep_that_knows_one(db):
    """A session made before bases were kept: the request's sender knows no base and leaves the
    event; the sweep, given the store's public URL, sends it."""
    clock = FakeClock()
    door = Scripted({}, base_needed=True)
    [event] = orders_owing(db, clock, "ord_old", base=None, sent_after_answer=True)
    assert not OrderEvents(db, clock, {"test": door}).send(event)
    assert row(db, event).gave_up_at is None and door.sent == []
    clock.advance(seconds=HOLD.total_seconds() + 1)
    assert OrderEvents(db, clock, {"test": door}, default_base="https://shop.example").deliver_due() == 1
    assert door.sent == ["ord_old"]


def test_a_sender_whose_hold_ran_out_leaves_the_row_to_the_one_that_took_it_over(db):
    """The first sender's attempt outlives its hold: a sweep takes the event over and sends it; the
    first one's late "not taken" must not undo that."""
    clock = FakeClock()
    [event] = orders_owing(db, clock, "ord_slow")
    late = OrderEvents(db, clock, {"test": Scripted({})})

    def taken_over_meanwhile() -> None:
        clock.advance(seconds=HOLD.total_seconds() + 1)
        assert late.deliver_due() == 1  # another sender, after the hold ran out
    slow = OrderEvents(db, clock, {"test": Scripted({"ord_slow": False}, during=taken_over_meanwhile)})
    assert slow.deliver_due() == 0
    assert row(db, event).sent_at is not None and row(db, event).last_error is None
