"""Order webhooks against real servers on loopback: retried until taken, the platform profile read
once while cached, sent where the checkout's creator said and nowhere an updater says, and never
into the store's own network or held by a slow platform."""

from __future__ import annotations

import time

from haggler.protocols.ucp.settings import UcpSettings
from haggler.protocols.ucp.webhooks import MAX_PROFILE_BYTES, Webhooks, order_webhook
from haggler.shopper.urls import URLPolicy

try:
    from tests.support.raw_server import Answer, RawServer
    from tests.support.ucp import SECRET, Platform, headers, pay, ready_checkout
except ImportError:  # pragma: no cover
    from support.raw_server import Answer, RawServer  # type: ignore[no-redef]
    from support.ucp import SECRET, Platform, headers, pay, ready_checkout  # type: ignore[no-redef]

#: A test store's settings: it reaches platforms on loopback.
TEST_STORE = UcpSettings(simulation_secret=SECRET)
EVENT = {"event_type": "order_placed", "event_id": "evt_1"}


def _hooks(settings: UcpSettings = TEST_STORE, **options) -> Webhooks:
    return Webhooks(settings, **options)


def test_a_failed_delivery_is_retried_until_taken():
    """order.md, "Guidelines": the business MUST retry failed webhook deliveries; every attempt
    sends the same event."""
    pauses: list[float] = []
    settings = UcpSettings(simulation_secret=SECRET, webhook_attempts=3)
    with Platform(statuses=(503, 500)) as platform:
        assert _hooks(settings, sleep=pauses.append).deliver(f"{platform.base}/hooks/order", EVENT)
        assert len(platform.deliveries) == 3 and pauses == [0.5, 1.0]
        assert len({d.body for d in platform.deliveries}) == 1
        assert platform.events == [EVENT]
    with Platform(statuses=(500,)) as platform:
        once = UcpSettings(simulation_secret=SECRET, webhook_attempts=1)
        assert not _hooks(once, sleep=pauses.append).deliver(f"{platform.base}/hooks/order", EVENT)


def test_the_profile_is_read_once_while_cached(platform):
    hooks = _hooks()
    for _ in range(3):
        assert hooks.webhook_url(platform.profile_url) == f"{platform.base}/hooks/order"
    assert platform.profile_reads == 1
    assert hooks.webhook_url('...') is None and order_webhook({"ucp": {"capabilities": "nope"}}) is None


def test_a_real_store_reaches_no_private_address_a_test_store_does(platform):
    real = _hooks(UcpSettings())
    assert real.webhook_url(platform.profile_url) is None
    assert not real.deliver(f"{platform.base}/hooks/order", EVENT)
    # A name is judged by what it resolves to, where the connection is made.
    port = platform.base.rsplit(":", 1)[1]
    named = _hooks(UcpSettings(), policy=URLPolicy(resolver=lambda host: ["127.0.0.1"]))
    assert named.webhook_url(f"http://platform.invalid:{port}/profile.json") is None
    assert not named.deliver(f"http://platform.invalid:{port}/hooks/order", EVENT)
    assert platform.profile_reads == 0 and platform.deliveries == []
    assert _hooks().webhook_url(platform.profile_url) == f"{platform.base}/hooks/order"


def test_the_profile_and_the_webhook_are_reached_at_the_address_the_policy_judged(platform):
    """DNS rebinding: the address judged must be the one connected to, not what a second lookup
    answers. ``.invalid`` is never in DNS (RFC 6761): reaching the platform at all shows the
    connection went where the policy's resolver said, once a connection."""
    asked: list[str] = []

    def resolver(host: str) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]
    hooks = _hooks(policy=URLPolicy(allow_private=True, resolver=resolver))
    named = f"http://platform.invalid:{platform.base.rsplit(':', 1)[1]}"
    assert hooks.webhook_url(f"{named}/profile.json") == f"{platform.base}/hooks/order"
    assert hooks.deliver(f"{named}/hooks/order", EVENT)
    assert asked == ["platform.invalid", "platform.invalid"]
    assert platform.deliveries[0].headers["host"] == named.removeprefix("http://")


# -- slow and large answers ----------------------------------------------------------------------------

def _trickle(head: bytes, byte: bytes, seconds: float) -> Answer:
    """Send ``head``, then ``byte`` every tenth of a second for ``seconds``: each read is quick."""
    def answer(send) -> None:
        send(head)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            send(byte)
            time.sleep(0.1)
    return answer


def test_a_profile_trickled_byte_by_byte_is_given_up_at_the_deadline():
    """Every byte comes well within the per-read timeout; the whole fetch still ends within
    webhook_timeout_seconds, so a platform cannot hold a checkout's create for as long as it likes."""
    settings = UcpSettings(simulation_secret=SECRET, webhook_timeout_seconds=1.0)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    with RawServer(_trickle(head, b" ", seconds=8)) as server:
        started = time.monotonic()
        assert _hooks(settings).webhook_url(f"{server.base}/profile.json") is None
        assert time.monotonic() - started < 3


def test_a_webhook_receiver_trickling_its_answer_is_given_up_at_the_deadline():
    """The status line and headers trickled too: each delivery attempt ends within
    webhook_timeout_seconds."""
    settings = UcpSettings(simulation_secret=SECRET, webhook_timeout_seconds=1.0, webhook_attempts=1)
    with RawServer(_trickle(b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a", seconds=8)) as server:
        started = time.monotonic()
        assert not _hooks(settings).deliver(f"{server.base}/hooks/order", EVENT)
        assert time.monotonic() - started < 3


def _settled(server: RawServer) -> int:
    """What the server has sent once it stops sending (the client hung up, or all was sent)."""
    sent = -1
    while sent != server.sent:
        sent = server.sent
        time.sleep(0.3)
    return sent


def test_a_profile_is_read_no_further_than_its_cap():
    """A 64 MB profile: the store stops reading past MAX_PROFILE_BYTES (the platform's writes then
    fail), well before its deadline, rather than reading it all and then measuring it."""
    size = 64 * 1024 * 1024

    def endless(send) -> None:
        send(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {size}\r\n\r\n".encode())
        for _ in range(size // 65536):
            send(b" " * 65536)
    settings = UcpSettings(simulation_secret=SECRET, webhook_timeout_seconds=30.0)
    with RawServer(endless) as server:
        started = time.monotonic()
        assert _hooks(settings).webhook_url(f"{server.base}/profile.json") is None
        assert time.monotonic() - started < 10
        assert _settled(server) < 16 * 1024 * 1024  # what was read, and what the sockets' buffers held
    assert MAX_PROFILE_BYTES < 1024 * 1024


# -- through the store ---------------------------------------------------------------------------------

def test_an_update_from_another_profile_does_not_move_the_order_webhook(ucp_store, platform):
    """The webhook is the one the checkout's creator named: anyone who learns a session's id and
    sends an update with their own profile gets no order event (buyer, address), and their profile
    is not even read."""
    with Platform() as other:
        checkout = ready_checkout(ucp_store.http, profile=platform.profile_url)
        answer = ucp_store.http.put(f"/checkout-sessions/{checkout['id']}", headers=headers(other.profile_url),
                                    json={"buyer": {"full_name": "Ada Buyer", "email": "ada@example.com"}})
        assert answer.status_code == 200
        done = ucp_store.http.post(f"/checkout-sessions/{checkout['id']}/complete",
                                   headers=headers(other.profile_url), json=pay())
        assert done.status_code == 200
        placed = platform.wait_for("order_placed")
        assert placed["order"]["id"] == done.json()["order"]["id"]
        time.sleep(0.3)  # time for a stray delivery to land, were one sent
        assert other.deliveries == [] and other.profile_reads == 0
