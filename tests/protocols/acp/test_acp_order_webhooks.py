"""ACP's order webhooks (rfc.agentic_checkout.md §2.3; openapi.agentic_checkout_webhook.yaml), from a
real store to a real receiver on loopback that checks ``Merchant-Signature`` as the platform's does:
an order placed through ACP is announced once, signed, as the full order ACP's schema describes,
retried until taken, and signed afresh on every attempt."""

from __future__ import annotations

import json

import pytest

from haggler.protocols.acp.settings import AcpSettings
from haggler.protocols.acp.webhooks import OrderWebhooks, merchant_signature
from haggler.protocols.ucp.settings import UcpSettings

try:
    from tests.support.acp import KEY, WEBHOOK_SECRET, Receiver, headers, pay, ready_session, webhook_conforms
    from tests.support.ucp import SECRET, seed
except ImportError:  # pragma: no cover
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
        send = hooks.announce("order_create", {"type": "order", "id": "ord_1", "checkout_session_id": "cs_1",
                                               "permalink_url": "https://store.example/checkout_sessions/cs_1"})
        assert send is not None
        # The receiver checks the time against the test's clock, not the machine's.
        receiver.verifies = (lambda check: lambda header, body, now=None: check(header, body, clock[0]))(
            receiver.verifies)
        assert send()
    first, second = receiver.requests
    assert (first.status, second.status) == (503, 200) and pauses == [0.5]
    assert first.body == second.body and first.headers["request-id"] == second.headers["request-id"]
    stamps = [r.headers["merchant-signature"].split(",")[0] for r in receiver.requests]
    assert stamps == [f"t={int(clock[0]) - 400}", f"t={int(clock[0])}"]


def test_a_receiver_that_keeps_refusing_gets_the_set_attempts_and_no_more():
    with Receiver(statuses=(500, 500, 500, 500)) as receiver:
        settings = AcpSettings(api_key=KEY, webhook_url=receiver.url, webhook_secret=WEBHOOK_SECRET,
                               webhook_attempts=2)
        send = OrderWebhooks(settings, sleep=lambda _: None).announce("order_create", {"id": "ord_2"})
        assert send is not None and not send()
    assert [r.status for r in receiver.requests] == [500, 500]


def test_a_signature_under_another_secret_is_refused_by_the_receiver():
    """The receiver's 401 (the webhook document): a store with the wrong secret is not believed."""
    with Receiver() as receiver:
        settings = AcpSettings(api_key=KEY, webhook_url=receiver.url, webhook_secret="another-secret-0123456789",
                               webhook_attempts=1)
        send = OrderWebhooks(settings).announce("order_create", {"id": "ord_3"})
        assert send is not None and not send()
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
