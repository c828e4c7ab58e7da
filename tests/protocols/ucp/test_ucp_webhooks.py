"""Order webhooks: retried until taken (order.md, "Guidelines": businesses MUST retry failed
deliveries), the platform profile read once while cached, and a real store never sent into its own
network by a platform's URLs."""

from __future__ import annotations

import httpx

from haggler.protocols.ucp.settings import UcpSettings
from haggler.protocols.ucp.webhooks import Webhooks, order_webhook
from haggler.shopper.urls import URLPolicy

PROFILE = {"ucp": {"capabilities": [{"name": "dev.ucp.shopping.order",
                                     "config": {"webhook_url": "https://platform.example/hooks"}}]}}
PUBLIC = URLPolicy(resolver=lambda host: ["93.184.215.14"])


def test_a_failed_delivery_is_retried_until_taken():
    answers = iter([503, 500, 200])
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.content.decode())
        return httpx.Response(next(answers))
    pauses: list[float] = []
    hooks = Webhooks(UcpSettings(webhook_attempts=3), httpx.MockTransport(handler), pauses.append, PUBLIC)
    assert hooks.deliver("https://platform.example/hooks", {"event_type": "order_placed"})
    assert len(seen) == 3 and pauses == [0.5, 1.0]
    assert not Webhooks(UcpSettings(webhook_attempts=1), httpx.MockTransport(lambda r: httpx.Response(500)),
                        pauses.append, PUBLIC).deliver("https://platform.example/hooks", {"event_type": "x"})


def test_the_profile_is_read_once_while_cached():
    fetched: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        fetched.append(str(request.url))
        return httpx.Response(200, json=PROFILE)
    hooks = Webhooks(UcpSettings(), httpx.MockTransport(handler), policy=PUBLIC)
    for _ in range(3):
        assert hooks.webhook_url("https://platform.example/profile.json") == "https://platform.example/hooks"
    assert len(fetched) == 1
    assert hooks.webhook_url('...') is None and order_webhook({"ucp": {"capabilities": "nope"}}) is None


def test_a_real_store_reaches_no_private_address_a_test_store_does():
    calls: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        return httpx.Response(200, json=PROFILE)
    real = Webhooks(UcpSettings(), httpx.MockTransport(handler))
    assert real.webhook_url("http://127.0.0.1:9/profile.json") is None
    assert not real.deliver("http://10.0.0.5/hooks", {"event_type": "order_placed"})
    assert calls == []
    test_store = Webhooks(UcpSettings(simulation_secret="a-test-secret"), httpx.MockTransport(handler))
    assert test_store.webhook_url("http://127.0.0.1:9/profile.json") == "https://platform.example/hooks"
