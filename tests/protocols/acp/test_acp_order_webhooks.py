"""ACP's order webhooks (rfc.agentic_checkout.md §2.3; openapi.agentic_checkout_webhook.yaml), from a
real store to a real receiver on loopback that checks ``Merchant-Signature`` as the platform's does:
an order placed through ACP is announced once, signed, as the full order ACP's schema describes,
retried until taken, and signed afresh on every attempt."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from sqlalchemy import select

from haggler.payments.handler import PaymentUnavailable
from haggler.protocols.acp.settings import AcpSettings
from haggler.protocols.acp.webhooks import OrderWebhooks, merchant_signature
from haggler.protocols.ucp.settings import UcpSettings
from haggler.storage.schema import order_events
from haggler.server.config import utc_now

try:
    from tests.support.acp import KEY, WEBHOOK_SECRET, Receiver, headers, pay, ready_session, webhook_conforms
    from tests.support.processors import HANDLER_ID, Scripted
    from tests.support.servers import FakeClock
    from tests.support.ucp import SECRET, seed
except ImportError:  # pragma: no cover
    from support.processors import HANDLER_ID, Scripted  # type: ignore[no-redef]
    from support.servers import FakeClock  # type: ignore[no-redef]
    from support.acp import KEY, WEBHOOK_SECRET, Receiver, headers, pay, ready_session, webhook_conforms  # type: ignore[no-redef]
    from support.ucp import SECRET, seed  # type: ignore[no-redef]


@pytest.fixture
def receiver():
    with Receiver() as r:
        yield r


@pytest.fixture
def hooked_store(make_store, tmp_path, receiver):
    """A seeded store serving ACP whose orders go to ``receiver``."""
    url = f"sqlite:///{tmp_path}/hooked.db"
    seed(url)
    acp = AcpSettings(api_key=KEY, webhook_url=receiver.url, webhook_secret=WEBHOOK_SECRET)
    return make_store(db_url=url, ucp=UcpSettings(simulation_secret=SECRET), acp=acp)


def complete(store, session_id: str, key: str, token: str = "success_token"):
    return store.http.post(f"/checkout_sessions/{session_id}/complete", headers=headers(key), json=pay(token))


def test_an_order_placed_is_announced_once_as_order_create_with_the_full_order(hooked_store, receiver):
    """§2.3: order_create MUST be emitted; the webhook document: ``data`` MUST be the full Order,
    ``data.type`` ``order`` (rfc.orders.md §6.1), the request signed with ``Merchant-Signature``."""
    session = ready_session(hooked_store.http, quantity=2)
    done = complete(hooked_store, session["id"], "k-hook-1")
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    [event] = receiver.wait(1)
    webhook_conforms(event)
    assert event["type"] == "order_create" and event["data"] == done.json()["order"]
    order = event["data"]
    assert order["type"] == "order" and order["checkout_session_id"] == session["id"]
    [line] = order["line_items"]
    assert line["quantity"] == {"ordered": 2, "current": 2, "fulfilled": 0}
    assert line["subtotal"] == 2 * line["unit_price"] == next(
        t["amount"] for t in session["line_items"][0]["totals"] if t["type"] == "total")
    assert [t["amount"] for t in order["totals"] if t["type"] == "total"] == [
        t["amount"] for t in session["totals"] if t["type"] == "total"]
    [shipment] = order["fulfillments"]
    assert shipment["status"] == "pending" and shipment["destination"]["postal_code"] == "97201"
    [request] = receiver.requests
    assert request.status == 200 and request.headers["request-id"].startswith("evt_")
    assert request.headers["content-type"] == "application/json" and request.headers["timestamp"].endswith("Z")
    # A replay of the completion answers the same order and announces nothing more.
    again = complete(hooked_store, session["id"], "k-hook-1")
    assert again.headers.get("Idempotent-Replayed") == "true" and again.json()["order"] == order
    receiver.wait(1)
    assert len(receiver.requests) == 1


def test_a_declined_payment_announces_nothing(hooked_store, receiver):
    session = ready_session(hooked_store.http)
    declined = complete(hooked_store, session["id"], "k-hook-2", token="fail_token")
    assert declined.status_code == 402, declined.text
    paid = complete(hooked_store, session["id"], "k-hook-3")
    assert paid.status_code == 200, paid.text
    [event] = receiver.wait(1)
    assert event["data"]["id"] == paid.json()["order"]["id"] and len(receiver.requests) == 1


def test_a_store_without_a_receiver_sends_nothing(acp_store, receiver):
    session = ready_session(acp_store.http)
    assert complete(acp_store, session["id"], "k-hook-4").status_code == 200
    assert acp_store.app.state.acp.webhooks.enabled is False and receiver.requests == []


def test_a_refused_event_is_retried_and_every_attempt_is_signed_when_it_is_made():
    """The receiver refuses a timestamp outside its window (300 s): an attempt made after a long
    pause carries its own time, not the first attempt's, and the same event and Request-Id."""
    clock = [1_800_000_000.0]
    pauses: list[float] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        clock[0] += 400  # longer than the receiver's window

    with Receiver(statuses=(503,)) as receiver:
        settings = AcpSettings(api_key=KEY, webhook_url=receiver.url, webhook_secret=WEBHOOK_SECRET,
                               webhook_attempts=3)
        hooks = OrderWebhooks(settings, sleep=sleep, now=lambda: clock[0])
        # The receiver checks the time against the test's clock, not the machine's.
        receiver.verifies = (lambda check: lambda header, body, now=None: check(header, body, clock[0]))(
            receiver.verifies)
        assert hooks.delivery.post(receiver.url, b'{"type":"order_create"}', hooks.signer("evt_1"), "a test event")
    first, second = receiver.requests
    assert (first.status, second.status) == (503, 200) and pauses == [0.5]
    assert first.body == second.body and first.headers["request-id"] == second.headers["request-id"] == "evt_1"
    stamps = [r.headers["merchant-signature"].split(",")[0] for r in receiver.requests]
    assert stamps == [f"t={int(clock[0]) - 400}", f"t={int(clock[0])}"]


def test_a_receiver_that_keeps_refusing_gets_the_set_attempts_and_no_more():
    with Receiver(statuses=(500, 500, 500, 500)) as receiver:
        settings = AcpSettings(api_key=KEY, webhook_url=receiver.url, webhook_secret=WEBHOOK_SECRET,
                               webhook_attempts=2)
        hooks = OrderWebhooks(settings, sleep=lambda _: None)
        assert not hooks.delivery.post(receiver.url, b"{}", hooks.signer("evt_2"), "a test event")
    assert [r.status for r in receiver.requests] == [500, 500]


def test_a_signature_under_another_secret_is_refused_by_the_receiver():
    """The receiver's 401 (the webhook document): a store with the wrong secret is not believed."""
    with Receiver() as receiver:
        settings = AcpSettings(api_key=KEY, webhook_url=receiver.url, webhook_secret="another-secret-0123456789",
                               webhook_attempts=1)
        hooks = OrderWebhooks(settings)
        assert not hooks.delivery.post(receiver.url, b"{}", hooks.signer("evt_3"), "a test event")
    [refused] = receiver.requests
    assert refused.status == 401 and receiver.events == []


def test_the_signature_is_hmac_sha256_of_the_timestamp_dot_raw_body():
    """openapi.agentic_checkout_webhook.yaml: ``t=<unix_seconds>,v1=<64_hex>`` over ``t + "." + raw_body``."""
    body = json.dumps({"type": "order_create"}).encode()
    signature = merchant_signature(WEBHOOK_SECRET, body, 1_700_000_000)
    receiver = Receiver()
    assert receiver.verifies(signature, body, now=1_700_000_100)
    assert not receiver.verifies(signature, body + b" ", now=1_700_000_100)
    assert not receiver.verifies(signature, body, now=1_700_000_400)  # outside the window
    assert signature != merchant_signature(WEBHOOK_SECRET, body, 1_700_000_001)


@pytest.mark.parametrize("settings, problem", [
    ({"webhook_url": "https://platform.example/hooks"}, "both"),
    ({"webhook_secret": WEBHOOK_SECRET}, "both"),
    ({"webhook_url": "ftp://platform.example/hooks", "webhook_secret": WEBHOOK_SECRET}, r"absolute http\(s\) URL"),
    ({"webhook_url": "https://platform.example/hooks", "webhook_secret": "short"}, "at least 16"),
    ({"webhook_url": "https://platform.example/hooks", "webhook_secret": WEBHOOK_SECRET, "webhook_attempts": 0},
     "at least one attempt"),
])
def test_webhook_settings_that_cannot_work_are_refused(settings, problem):
    with pytest.raises(ValueError, match=problem):
        AcpSettings(api_key=KEY, **settings)
    with pytest.raises(ValueError, match="serves ACP"):
        AcpSettings(webhook_url="https://platform.example/hooks", webhook_secret=WEBHOOK_SECRET)


# -- kept until taken (commerce/order_events.py) ---------------------------------------------------


def _store(make_store, tmp_path, receiver, name: str, db_url: str | None = None, **settings):
    url = db_url or f"sqlite:///{tmp_path}/{name}.db"
    seed(url)
    acp = AcpSettings(api_key=KEY, webhook_url=receiver.url, webhook_secret=WEBHOOK_SECRET, **settings)
    return make_store(db_url=url, ucp=UcpSettings(simulation_secret=SECRET), acp=acp,
                      clock=FakeClock(utc_now())), url


def _event_row(store, order_id: str):
    with store.app.state.acp.db.read() as conn:
        return conn.execute(select(order_events).where(order_events.c.order_id == order_id,
                                                       order_events.c.door == "acp")).one()


def test_an_event_the_receiver_did_not_take_is_sent_again_by_the_sweep_until_it_is(make_store, tmp_path):
    """§2.3's MUST, past a receiver that is down for longer than the quick retries: the event was
    recorded with the order, and the store's sweep sends it again once it is due, the same event."""
    with Receiver(statuses=(503, 503)) as receiver:
        store, _ = _store(make_store, tmp_path, receiver, "down", webhook_attempts=1)
        session = ready_session(store.http)
        done = complete(store, session["id"], "k-down-1")
        assert done.status_code == 200, done.text
        order = done.json()["order"]
        _wait(lambda: _event_row(store, order["id"]).attempts == 1)  # the attempt right after the answer: refused
        events = store.app.state.acp.events
        assert events.deliver_due() == 0  # not due yet
        store.clock.advance(seconds=31)
        assert events.deliver_due() == 0 and len(receiver.requests) == 2  # refused again: due a minute later
        store.clock.advance(seconds=61)
        assert events.deliver_due() == 1
        [event] = receiver.events
        assert event["type"] == "order_create" and event["data"] == order
        assert len({r.headers["request-id"] for r in receiver.requests}) == 1
        row = _event_row(store, order["id"])
        assert row.sent_at is not None and row.attempts == 3
        store.clock.advance(hours=1)
        assert events.deliver_due() == 0 and len(receiver.requests) == 3  # taken: never sent again


def test_an_event_never_taken_is_given_up_a_day_after_its_order(make_store, tmp_path):
    with Receiver(statuses=(500,) * 100) as receiver:
        store, _ = _store(make_store, tmp_path, receiver, "never", webhook_attempts=1)
        session = ready_session(store.http)
        order = complete(store, session["id"], "k-never-1").json()["order"]
        _wait(lambda: _event_row(store, order["id"]).attempts == 1)  # its first attempt, refused, over
        events = store.app.state.acp.events
        for _ in range(40):  # a day and more of sweeps, each due retry refused
            store.clock.advance(hours=1)
            events.deliver_due()
        row = _event_row(store, order["id"])
        assert row.gave_up_at is not None and row.sent_at is None and receiver.events == []
        tries = len(receiver.requests)
        assert 5 < tries < 40  # the pauses grew: not one a sweep
        store.clock.advance(hours=1)
        events.deliver_due()
        assert len(receiver.requests) == tries


def test_an_order_settled_by_hand_in_another_process_is_announced_by_the_running_store(make_store, tmp_path):
    """An order placed by ``haggler checkout settle --paid`` (a process of its own, with no
    receiver set) owes the platform its order_create as much as one placed by a completion."""
    with Receiver() as receiver:
        store, url = _store(make_store, tmp_path, receiver, "settled")
        store.app.state.acp.sessions.handlers[HANDLER_ID] = Scripted(PaymentUnavailable("timeout"))
        session = ready_session(store.http)
        lost = store.http.post(f"/checkout_sessions/{session['id']}/complete", headers=headers("k-settle-1"),
                               json=pay(handler_id=HANDLER_ID))
        assert lost.status_code == 503, lost.text
        settled = subprocess.run([sys.executable, "-m", "haggler", "checkout", "settle", session["id"], "--paid",
                                  "pi_by_hand", "--db", url], capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert settled.returncode == 0, settled.stderr
        assert receiver.requests == []
        store.clock.advance(minutes=3)  # past the hold a recorder keeps on its event
        assert store.app.state.acp.events.deliver_due() == 1
        [event] = receiver.events
        webhook_conforms(event)
        assert event["data"]["checkout_session_id"] == session["id"] and event["data"]["status"] == "confirmed"
        assert event["data"]["permalink_url"].startswith(store.base)  # the links of the session's own store


def test_senders_racing_for_one_due_event_send_it_once(make_store, tmp_path, db_url):
    """The sweep of one worker and a late answer of another may reach the same due event: one of
    them holds it and sends it; the others find it held or sent."""
    with Receiver(statuses=(503,)) as receiver:
        store, _ = _store(make_store, tmp_path, receiver, "race", db_url, webhook_attempts=1)
        session = ready_session(store.http)
        order = complete(store, session["id"], "k-race-1").json()["order"]
        _wait(lambda: _event_row(store, order["id"]).attempts == 1)  # its first attempt, refused, over
        store.clock.advance(seconds=31)
        events = store.app.state.acp.events
        event = _event_row(store, order["id"]).id
        start = threading.Barrier(6)
        sent: list[object] = []

        def race(send) -> None:
            start.wait()
            sent.append(send())
        racers = [threading.Thread(target=race, args=(events.deliver_due,)) for _ in range(3)] + [
            threading.Thread(target=race, args=(lambda: events.send(event),)) for _ in range(3)]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
    assert sorted(int(x) for x in sent) == [0, 0, 0, 0, 0, 1]
    assert len(receiver.requests) == 2 and len(receiver.events) == 1


def _wait(condition, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)
