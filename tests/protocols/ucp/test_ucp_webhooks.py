"""Order webhooks against real servers on loopback: retried until taken, the platform profile read
once while cached, and never sent into the store's own network."""

from __future__ import annotations

import time

from haggler.protocols.ucp.settings import UcpSettings
from haggler.protocols.ucp.webhooks import Webhooks, order_webhook
from haggler.shopper.urls import URLPolicy

try:
    from tests.support.ucp import SECRET, Platform
except ImportError:  # pragma: no cover
    from support.ucp import SECRET, Platform  # type: ignore[no-redef]

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
