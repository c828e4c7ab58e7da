"""Order webhooks against real servers on loopback: retried until taken, signed with the key the
store's profile publishes, naming the store, sent where the checkout's creator said and nowhere an
updater says, and never into the store's own network or held by a slow platform."""

from __future__ import annotations

import time

import jwt
import pytest

from haggler.commerce.webhooks import Undeliverable
from haggler.protocols.ucp.settings import UcpSettings
from haggler.protocols.ucp.webhooks import MAX_PROFILE_BYTES, PlatformProfile, Webhooks, order_webhook, read_profile
from haggler.shopper.urls import URLPolicy
from haggler.trust.canonical import canonical_json
from haggler.trust.keys import P256, SigningKeys

try:
    from tests.support.raw_server import Answer, RawServer
    from tests.support.ucp import (
        AP2, SECRET, Platform, completed_order, headers, pay, ready_checkout, signature_verifies)
except ImportError:  # pragma: no cover
    from support.raw_server import Answer, RawServer  # type: ignore[no-redef]
    from support.ucp import (  # type: ignore[no-redef]
        AP2, SECRET, Platform, completed_order, headers, pay, ready_checkout, signature_verifies)

#: A test store's settings: it reaches platforms on loopback.
TEST_STORE = UcpSettings(simulation_secret=SECRET)
STORE_PROFILE = "https://store.example/.well-known/ucp"
EVENT = {"event_type": "order_placed", "event_id": "evt_1"}


def _hooks(tmp_path, settings: UcpSettings = TEST_STORE, **options) -> Webhooks:
    return Webhooks(settings, SigningKeys(tmp_path, P256), **options)


def _deliver(hooks: Webhooks, url: str, event: dict = EVENT) -> bool:
    """``event`` sent to ``url`` as the store's order events are: signed, naming the store."""
    body = canonical_json(event)
    return hooks.delivery.post(url, body, hooks.signed(body, STORE_PROFILE), "a test event")


def test_a_failed_delivery_is_retried_until_taken(tmp_path):
    """order.md, "Guidelines": the business MUST retry failed webhook deliveries; every attempt
    sends the same event, signed the same way, so the platform can tell a retry by its event_id."""
    pauses: list[float] = []
    settings = UcpSettings(simulation_secret=SECRET, webhook_attempts=3)
    with Platform(statuses=(503, 500)) as platform:
        assert _deliver(_hooks(tmp_path, settings, sleep=pauses.append), f"{platform.base}/hooks/order")
        assert len(platform.deliveries) == 3 and pauses == [0.5, 1.0]
        assert len({(d.body, d.headers["request-signature"]) for d in platform.deliveries}) == 1
        assert platform.events == [EVENT]
    with Platform(statuses=(500,)) as platform:
        once = UcpSettings(simulation_secret=SECRET, webhook_attempts=1)
        assert not _deliver(_hooks(tmp_path, once, sleep=pauses.append), f"{platform.base}/hooks/order")


def test_the_profile_is_read_once_while_cached(tmp_path, platform):
    hooks = _hooks(tmp_path)
    for _ in range(3):
        assert hooks.platform(platform.profile_url).webhook_url == f"{platform.base}/hooks/order"
    assert platform.profile_reads == 1
    assert hooks.platform('...').webhook_url is None and order_webhook({"ucp": {"capabilities": "nope"}}) is None


def test_one_read_of_the_profile_gives_its_webhook_capabilities_and_public_signing_keys(tmp_path):
    """What a checkout keeps of its creator's profile, from one fetch: the order webhook, the names
    of its capabilities (for overview.md's "Intersection Algorithm") and its signing keys' public
    members only (ap2-mandates.md, "Signing Key Requirements"), a private member never kept."""
    with Platform(ap2=True) as platform:
        platform.signing_keys = [{**platform.signing_keys[0], "d": "private"}, "not a key"]
        found = _hooks(tmp_path).platform(platform.profile_url)
        assert found.webhook_url == f"{platform.base}/hooks/order"
        assert found.capabilities == ("dev.ucp.shopping.order", "dev.ucp.shopping.checkout", AP2)
        assert found.signing_keys == ({k: v for k, v in platform.signing_keys[0].items() if k != "d"},)
        assert platform.profile_reads == 1
    assert read_profile({"ucp": {"capabilities": [{"name": 1}, "x"]}, "signing_keys": {}}) == PlatformProfile()


def test_a_real_store_reaches_no_private_address_a_test_store_does(tmp_path, platform):
    real = _hooks(tmp_path, UcpSettings())
    assert real.platform(platform.profile_url).webhook_url is None
    with pytest.raises(Undeliverable):
        _deliver(real, f"{platform.base}/hooks/order")
    # A name is judged by what it resolves to, where the connection is made.
    port = platform.base.rsplit(":", 1)[1]
    named = _hooks(tmp_path, UcpSettings(), policy=URLPolicy(resolver=lambda host: ["127.0.0.1"]))
    assert named.platform(f"http://platform.invalid:{port}/profile.json").webhook_url is None
    with pytest.raises(Undeliverable):
        _deliver(named, f"http://platform.invalid:{port}/hooks/order")
    assert platform.profile_reads == 0 and platform.deliveries == []
    assert _hooks(tmp_path).platform(platform.profile_url).webhook_url == f"{platform.base}/hooks/order"


def test_the_profile_and_the_webhook_are_reached_at_the_address_the_policy_judged(tmp_path, platform):
    """DNS rebinding: the address judged must be the one connected to, not what a second lookup
    answers. ``.invalid`` is never in DNS (RFC 6761): reaching the platform at all shows the
    connection went where the policy's resolver said, once a connection."""
    asked: list[str] = []

    def resolver(host: str) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]
    hooks = _hooks(tmp_path, policy=URLPolicy(allow_private=True, resolver=resolver))
    named = f"http://platform.invalid:{platform.base.rsplit(':', 1)[1]}"
    assert hooks.platform(f"{named}/profile.json").webhook_url == f"{platform.base}/hooks/order"
    assert _deliver(hooks, f"{named}/hooks/order")
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


def test_a_profile_trickled_byte_by_byte_is_given_up_at_the_deadline(tmp_path):
    """Every byte comes well within the per-read timeout; the whole fetch still ends within
    webhook_timeout_seconds, so a platform cannot hold a checkout's create for as long as it likes."""
    settings = UcpSettings(simulation_secret=SECRET, webhook_timeout_seconds=1.0)
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
    with RawServer(_trickle(head, b" ", seconds=8)) as server:
        started = time.monotonic()
        assert _hooks(tmp_path, settings).platform(f"{server.base}/profile.json").webhook_url is None
        assert time.monotonic() - started < 3


def test_a_webhook_receiver_trickling_its_answer_is_given_up_at_the_deadline(tmp_path):
    """The status line and headers trickled too: each delivery attempt ends within
    webhook_timeout_seconds."""
    settings = UcpSettings(simulation_secret=SECRET, webhook_timeout_seconds=1.0, webhook_attempts=1)
    with RawServer(_trickle(b"HTTP/1.1 200 OK\r\nX-Slow: ", b"a", seconds=8)) as server:
        started = time.monotonic()
        assert not _deliver(_hooks(tmp_path, settings), f"{server.base}/hooks/order")
        assert time.monotonic() - started < 3


def _settled(server: RawServer) -> int:
    """What the server has sent once it stops sending (the client hung up, or all was sent)."""
    sent = -1
    while sent != server.sent:
        sent = server.sent
        time.sleep(0.3)
    return sent


def test_a_profile_is_read_no_further_than_its_cap(tmp_path):
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
        assert _hooks(tmp_path, settings).platform(f"{server.base}/profile.json").webhook_url is None
        assert time.monotonic() - started < 10
        assert _settled(server) < 16 * 1024 * 1024  # what was read, and what the sockets' buffers held
    assert MAX_PROFILE_BYTES < 1024 * 1024


# -- through the store ---------------------------------------------------------------------------------

def test_webhooks_are_signed_with_a_key_the_store_profile_publishes(ucp_store, platform):
    """order.md, "Webhook Signature Verification" and "Guidelines": the business MUST sign all
    webhook payloads with a key from the ``signing_keys`` of its ``/.well-known/ucp``, a detached
    JWT (RFC 7797) in ``Request-Signature`` whose ``kid`` names the key. It is ES256, the
    algorithm of UCP's examples, with the store's P-256 key. A platform verifies it with that key; a
    body changed on the way fails."""
    completed_order(ucp_store, platform)
    platform.wait_for("order_placed")
    profile = ucp_store.http.get("/.well-known/ucp").json()
    delivery = platform.deliveries[0]
    assert jwt.get_unverified_header(delivery.headers["request-signature"])["alg"] == "ES256"
    assert [(k["kty"], k["crv"], k["alg"]) for k in profile["signing_keys"]] == [("EC", "P-256", "ES256")]
    assert signature_verifies(profile, delivery)
    tampered = delivery.body.replace(b'"order_placed"', b'"order_canceled"', 1)
    assert tampered != delivery.body and not signature_verifies(profile, delivery, tampered)


def test_a_webhook_names_the_store_and_carries_its_event_id_and_time(ucp_store, platform):
    """order.md, "Guidelines": the business MUST include a business identifier in the webhook path
    or headers (``UCP-Agent`` with the store's profile URL, as UCP's later versions spell it out);
    the REST binding's ``order_event_webhook`` body is the order with the required ``event_id``
    and ``created_time``, one id for each event."""
    _, order_id = completed_order(ucp_store, platform)
    placed = platform.wait_for("order_placed")
    ucp_store.http.post(f"/testing/simulate-shipping/{order_id}", headers={"Simulation-Secret": SECRET})
    shipped = platform.wait_for("order_shipped")
    delivery = platform.deliveries[0]
    assert delivery.headers["ucp-agent"] == f'profile="{ucp_store.base}/.well-known/ucp"'
    assert delivery.headers["content-type"] == "application/json"
    for event in (placed, shipped):
        assert event["id"] == order_id and event["order"]["id"] == order_id
        assert event["event_id"].startswith("evt_") and event["created_time"] == "2026-11-22T12:00:00Z"
        assert {k: v for k, v in event.items() if k not in ("event_id", "created_time", "event_type", "order")} \
            == event["order"]
    assert placed["event_id"] != shipped["event_id"]


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
