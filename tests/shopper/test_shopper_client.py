"""haggler.shopper's client against real servers: our store, and small test stores that
misbehave on purpose (rate limits, slowness, another protocol version)."""

from __future__ import annotations

import asyncio
import threading
import time

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.shopper.client import AsyncNegotiateClient, NegotiateClient, RetryPolicy, discovery_urls, store_base
from haggler.shopper.errors import (
    BlockedURL,
    ChatClosed,
    MessageTooLong,
    NotFound,
    NotNegotiable,
    RateLimited,
    StoreUnavailable,
    UnsupportedProtocol,
)
from haggler.shopper.urls import URLPolicy

try:
    from tests.support.servers import ThreadedServer
except ImportError:  # pragma: no cover
    from support.servers import ThreadedServer  # type: ignore[no-redef]


def test_discovery_urls_from_domains_and_urls():
    assert discovery_urls("shop.example.com") == ["https://shop.example.com/nash.json",
                                                  "https://shop.example.com/.well-known/nash.json",
                                                  "https://shop.example.com/negotiate.json",
                                                  "https://shop.example.com/.well-known/negotiate.json"]
    assert discovery_urls("localhost:8000")[0] == "http://localhost:8000/nash.json"
    assert discovery_urls("http://a.example/store/") == [
        "http://a.example/store/nash.json", "http://a.example/store/.well-known/nash.json",
        "http://a.example/store/negotiate.json", "http://a.example/store/.well-known/negotiate.json"]
    assert discovery_urls("https://a.example/custom.json") == ["https://a.example/custom.json"]


@pytest.mark.parametrize("suffix", ["/nash.json", "/.well-known/nash.json", "/negotiate.json",
                                    "/.well-known/negotiate.json"])
def test_a_descriptor_url_gives_its_store_base(suffix):
    assert store_base(f"https://a.example/shop{suffix}") == "https://a.example/shop"


def test_a_whole_negotiation_with_the_sync_client(store):
    with NegotiateClient() as client:
        info = client.discover(store.base.removeprefix("http://"))
        assert info.name == store.catalog.store.name
        assert [p.id for p in client.products(info, live=True)] == [p.id for p in store.catalog.products]
        product = info.products[0]
        chat = client.start(info, product.id)
        assert chat.offer is not None and chat.offer.price_cents == product.list_price_cents
        reply = client.say(info, chat.next_url, "would you take $400?")
        assert reply.closed is False and reply.next_url
        reply = client.say(info, reply.next_url, "deal")
        assert reply.closed and reply.deal is not None and reply.next_url is None
        history = client.history(info, chat.session_id)
        assert [e.speaker for e in history.entries] == ["merchant", "shopper", "merchant", "shopper", "merchant"]
        assert history.deal == reply.deal


def test_a_whole_negotiation_with_the_async_client(store):
    async def haggle() -> tuple[bool, int]:
        async with AsyncNegotiateClient() as client:
            info = await client.discover(store.base)
            chat = await client.start(info, info.products[1].id)
            reply = await client.say(info, chat.next_url, "no thanks, bye")
            history = await client.history(info, chat.session_id)
            return reply.closed, len(history.entries)

    assert asyncio.run(haggle()) == (True, 3)


def test_typed_errors_carry_the_store_error_text(store):
    with NegotiateClient() as client:
        info = client.discover(store.base)
        with pytest.raises(NotFound) as caught:
            client.start(info, "no-such-product")
        assert caught.value.status == 404 and "unknown product_id" in caught.value.store_error
        with pytest.raises(NotFound):
            client.history(info, "unknownsession123456")
        chat = client.start(info, info.products[0].id)
        client.say(info, chat.next_url, "no thanks")
        with pytest.raises(ChatClosed) as closed:
            client.say(info, chat.next_url, "hello?")
        assert closed.value.store_error == "this chat is closed"


def test_never_sends_a_message_over_the_published_limit(make_store):
    store = make_store(limits=StoreLimits(max_message_length_chars=40))
    with NegotiateClient() as client:
        info = client.discover(store.base)
        chat = client.start(info, info.products[0].id)
        with pytest.raises(MessageTooLong):
            client.say(info, chat.next_url, "x" * 41)
        assert len(client.history(info, chat.session_id).entries) == 1  # nothing reached the store
        assert client.say(info, chat.next_url, "y" * 40).closed is False


# -- small misbehaving stores ---------------------------------------------------------------------

def _descriptor(base: str, protocol: str = "negotiate.v1") -> dict:
    return {
        "negotiate_protocol": protocol,
        "store": {"name": "Tiny", "rep_name": "T", "tagline": "t", "policy": "p"},
        "endpoints": {
            "start_chat": {"method": "GET", "url_template": f"{base}/start?product_id={{product_id}}"},
            "send_message": {"method": "GET", "url_template": f"{base}/chat/{{session_id}}/say?message={{url_encoded_message}}"},
            "read_history": {"method": "GET", "url_template": f"{base}/chat/{{session_id}}"},
            "catalog": {"method": "GET", "url": f"{base}/catalog"},
        },
        "products": [{"id": "p1", "name": "Widget", "list_price": 100, "currency": "USD"}],
        "limits": {"max_chat_starts_per_hour_per_ip": 5, "max_messages_per_chat": 10,
                   "session_idle_ttl_seconds": 60, "max_message_length_chars": 100, "currency": "USD"},
    }


def _serve(routes: list[Route]) -> ThreadedServer:
    return ThreadedServer(Starlette(routes=routes))


def test_s8_refuses_a_store_speaking_another_version():
    def descriptor(request: Request) -> JSONResponse:
        return JSONResponse(_descriptor(str(request.base_url).rstrip("/"), protocol="negotiate.v2"))

    with _serve([Route("/negotiate.json", descriptor)]) as server, NegotiateClient() as client:
        with pytest.raises(UnsupportedProtocol) as caught:
            client.discover(server.base)
        assert caught.value.version == "negotiate.v2"


def test_falls_back_to_the_well_known_descriptor():
    def descriptor(request: Request) -> JSONResponse:
        return JSONResponse(_descriptor(str(request.base_url).rstrip("/")))

    with _serve([Route("/.well-known/negotiate.json", descriptor)]) as server, NegotiateClient() as client:
        info = client.discover(server.base)
        assert info.discovery_url.endswith("/.well-known/negotiate.json")
        assert info.products[0].list_price_cents == 10000


def test_a_site_without_a_descriptor_is_not_negotiable():
    with _serve([Route("/", lambda r: Response("hi"))]) as server, NegotiateClient() as client:
        with pytest.raises(NotNegotiable, match="no nash.v1 or negotiate.v1 descriptor") as caught:
            client.discover(server.base)
    for path in ("/nash.json", "/.well-known/nash.json", "/negotiate.json", "/.well-known/negotiate.json"):
        assert f"{server.base}{path}: " in caught.value.message


# -- nash.v1 and negotiate.v1 -------------------------------------------------------------------------

def _versioned(key: str, version: str):  # type: ignore[no-untyped-def]
    """A handler serving the tiny descriptor with its version under ``key``."""
    def descriptor(request: Request) -> JSONResponse:
        doc = _descriptor(str(request.base_url).rstrip("/"))
        del doc["negotiate_protocol"]
        return JSONResponse({key: version, **doc})
    return descriptor


def test_prefers_nash_json_over_negotiate_json():
    routes = [Route("/negotiate.json", _versioned("negotiate_protocol", "negotiate.v1")),
              Route("/nash.json", _versioned("nash_protocol", "nash.v1"))]
    with _serve(routes) as server, NegotiateClient() as client:
        info = client.discover(server.base)
    assert info.discovery_url == f"{server.base}/nash.json" and info.protocol == "nash.v1"


def test_falls_back_to_well_known_nash_then_negotiate_json_when_nash_json_is_not_json():
    """A site's catch-all page at /nash.json is not a descriptor: the next URL is tried."""
    routes = [Route("/nash.json", lambda r: Response("<!doctype html><p>our shop</p>", media_type="text/html")),
              Route("/negotiate.json", _versioned("negotiate_protocol", "negotiate.v1"))]
    with _serve(routes) as server, NegotiateClient() as client:
        info = client.discover(server.base)
    assert info.discovery_url == f"{server.base}/negotiate.json" and info.protocol == "negotiate.v1"


@pytest.mark.parametrize("key", ["nash_protocol", "negotiate_protocol"])
@pytest.mark.parametrize("version", ["nash.v1", "negotiate.v1"])
def test_either_key_with_either_version_is_accepted(key, version):
    with _serve([Route("/.well-known/nash.json", _versioned(key, version))]) as server, NegotiateClient() as client:
        info = client.discover(server.base)
    assert info.protocol == version and info.name == "Tiny"


@pytest.mark.parametrize(("key", "version"), [("nash_protocol", "nash.v2"), ("negotiate_protocol", "negotiate.v2"),
                                              ("nash_protocol", "NASH.V1"), ("protocol", "nash.v1")])
def test_other_versions_are_refused_with_a_clear_error(key, version):
    with _serve([Route("/nash.json", _versioned(key, version)),
                 Route("/negotiate.json", _versioned("negotiate_protocol", "negotiate.v1"))]) as server:
        with NegotiateClient() as client, pytest.raises(UnsupportedProtocol) as caught:
            client.discover(server.base)
    expected = None if key == "protocol" else version
    assert caught.value.version == expected
    assert "understands only 'nash.v1' and 'negotiate.v1'" in caught.value.message
    assert (repr(version) in caught.value.message) if expected else ("names no protocol version" in caught.value.message)


def test_nash_protocol_is_read_before_negotiate_protocol():
    def descriptor(request: Request) -> JSONResponse:
        return JSONResponse({"nash_protocol": "nash.v1", **_descriptor(str(request.base_url).rstrip("/"),
                                                                      protocol="negotiate.v2")})

    with _serve([Route("/nash.json", descriptor)]) as server, NegotiateClient() as client:
        assert client.discover(server.base).protocol == "nash.v1"


def test_our_store_is_found_as_nash_v1_and_its_closing_reply_gives_the_checkout_url(store):
    with NegotiateClient() as client:
        info = client.discover(store.base)
        assert (info.protocol, info.discovery_url) == ("nash.v1", f"{store.base}/nash.json")
        chat = client.start(info, info.products[0].id)
        open_reply = client.say(info, chat.next_url, "would you take $400?")
        assert open_reply.checkout_url is None
        reply = client.say(info, open_reply.next_url, "deal")
    assert reply.closed and reply.deal is not None
    assert reply.checkout_url == f"{store.base}/checkout/{reply.deal.id}"


def test_a_negotiate_v1_descriptor_url_still_finds_our_store_as_negotiate_v1(store):
    with NegotiateClient() as client:
        info = client.discover(f"{store.base}/negotiate.json")
    assert info.protocol == "negotiate.v1" and info.products


def test_a_closing_reply_with_only_a_top_level_checkout_url_is_read():
    """A nash.v1 store may close with ``checkout_url`` and no structured ``deal``."""
    def say(request: Request) -> JSONResponse:
        return JSONResponse({"message": "Deal!", "closed": True, "next": None,
                             "checkout_url": "https://pay.example/o/42"})

    def start(request: Request) -> JSONResponse:
        return JSONResponse({"session_id": "s1", "greeting": "hi",
                             "next": f"{str(request.base_url).rstrip('/')}/chat/s1/say?message={{url_encoded_message}}"},
                            status_code=201)

    routes = [Route("/nash.json", _versioned("nash_protocol", "nash.v1")), Route("/start", start),
              Route("/chat/s1/say", say)]
    with _serve(routes) as server, NegotiateClient() as client:
        info = client.discover(server.base)
        reply = client.say(info, client.start(info, "p1").next_url, "deal")
    assert reply.closed and reply.deal is None and reply.checkout_url == "https://pay.example/o/42"


def test_backs_off_on_429_honouring_retry_after():
    hits = {"n": 0}

    def descriptor(request: Request) -> Response:
        hits["n"] += 1
        if hits["n"] <= 2:
            return JSONResponse({"error": "slow down"}, status_code=429, headers={"Retry-After": "3"})
        return JSONResponse(_descriptor(str(request.base_url).rstrip("/")))

    slept: list[float] = []
    with _serve([Route("/negotiate.json", descriptor)]) as server, NegotiateClient(sleep=slept.append) as client:
        assert client.discover(server.base).name == "Tiny"
    assert slept == [3.0, 3.0]


def test_gives_up_when_retry_after_is_longer_than_it_will_wait():
    def descriptor(request: Request) -> Response:
        return JSONResponse(_descriptor(str(request.base_url).rstrip("/")))

    def start(request: Request) -> Response:
        return JSONResponse({"error": "come back tomorrow"}, status_code=429, headers={"Retry-After": "86400"})

    slept: list[float] = []
    with _serve([Route("/negotiate.json", descriptor), Route("/start", start)]) as server:
        with NegotiateClient(sleep=slept.append, retry=RetryPolicy(max_wait=60)) as client:
            info = client.discover(server.base)
            with pytest.raises(RateLimited) as caught:
                client.start(info, "p1")
    assert slept == []
    assert caught.value.retry_after == 86400 and caught.value.store_error == "come back tomorrow"


def test_times_out_cleanly():
    """The store answers only once the test is done (or after a minute): a client that gave up at
    its 0.3 s timeout returns long before that, however loaded the machine."""
    done = threading.Event()

    async def slow(request: Request) -> Response:
        await asyncio.to_thread(done.wait, 60)
        return JSONResponse({})

    with _serve([Route("/negotiate.json", slow), Route("/.well-known/negotiate.json", slow)]) as server:
        try:
            with NegotiateClient(timeout=0.3) as client:
                started = time.monotonic()
                with pytest.raises(NotNegotiable, match="timed out"):
                    client.discover(server.base)
                assert time.monotonic() - started < 30
        finally:
            done.set()  # let the waiting handlers answer, so that the server stops at once


# -- lost connections -------------------------------------------------------------------------------

class DroppingTransport(httpx.HTTPTransport):
    """Loses the connection on the first `say`: after the store processed it ("after"), or
    before the request left ("before")."""

    def __init__(self, when: str) -> None:
        super().__init__()
        self.when = when
        self.dropped = False

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if "/say" in request.url.path and not self.dropped:
            self.dropped = True
            if self.when == "after":
                super().handle_request(request).read()
            raise httpx.RemoteProtocolError("connection lost", request=request)
        return super().handle_request(request)


@pytest.mark.parametrize("when", ["after", "before"])
def test_resumes_from_history_after_a_lost_connection(store, when):
    transport = DroppingTransport(when)
    with NegotiateClient(transport=transport) as client:
        info = client.discover(store.base)
        chat = client.start(info, info.products[0].id)
        reply = client.say(info, chat.next_url, "is shipping free?")
        assert transport.dropped
        history = client.history(info, chat.session_id)
        shopper_turns = [e.message for e in history.entries if e.speaker == "shopper"]
        assert shopper_turns == ["is shipping free?"]  # sent once, never twice
        assert history.entries[-1].message == reply.message
        assert reply.closed is False and reply.next_url == chat.next_url


def test_without_recovery_a_lost_connection_is_an_error(store):
    with NegotiateClient(transport=DroppingTransport("after")) as client:
        info = client.discover(store.base)
        chat = client.start(info, info.products[0].id)
        with pytest.raises(StoreUnavailable):
            client.say(info, chat.next_url, "hello", recover=False)


# -- URL policy ---------------------------------------------------------------------------------------

def _resolver(table: dict[str, list[str]]):
    return lambda host: table[host]


@pytest.mark.parametrize("url", [
    "file:///etc/passwd", "ftp://example.com/x", "gopher://x", "http://127.0.0.1:8000/x", "http://10.1.2.3/",
    "http://169.254.169.254/latest/meta-data", "http://[::1]/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/",
    "http://user:pw@shop.example/",
    # Not private, yet not on the internet either: CGNAT, IETF protocol assignments, benchmarking,
    # documentation, reserved, broadcast, multicast; and IPv6 forms that reach an inside IPv4 address.
    "http://100.64.0.1/", "http://100.127.255.254/", "http://192.0.0.1/", "http://198.18.0.1/",
    "http://198.51.100.7/", "http://203.0.113.5/", "http://240.0.0.1/", "http://255.255.255.255/",
    "http://224.0.0.1/", "http://[2001:db8::1]/", "http://[fc00::1]/", "http://[ff02::1]/",
    "http://[::ffff:100.64.0.1]/", "http://[64:ff9b::a00:1]/", "http://[2002:a00:1::]/",
])
def test_url_policy_blocks_internal_and_odd_urls(url):
    with pytest.raises(BlockedURL):
        URLPolicy().check(url)


def test_url_policy_judges_every_address_a_name_resolves_to():
    policy = URLPolicy(resolver=_resolver({"internal.example": ["192.168.1.10"], "cgnat.example": ["100.64.1.1"],
                                           "mixed.example": ["93.184.216.34", "10.0.0.1"],
                                           "shop.example": ["93.184.216.34", "2606:2800:220:1::"]}))
    for host in ("internal.example", "cgnat.example", "mixed.example"):
        with pytest.raises(BlockedURL, match=host):
            policy.addresses(host)
    assert policy.addresses("shop.example") == ["93.184.216.34", "2606:2800:220:1::"]
    policy.check("https://shop.example/negotiate.json")  # a name is judged where it is connected to
    assert URLPolicy(allow_private=True, resolver=_resolver({"in.example": ["10.0.0.1"]})).addresses("in.example") \
        == ["10.0.0.1"]
    URLPolicy(allow_private=True).check("http://127.0.0.1:8000/negotiate.json")


def test_url_policy_applies_to_every_url_the_store_hands_out(store):
    with NegotiateClient(url_policy=URLPolicy()) as client:
        with pytest.raises(BlockedURL, match="loopback"):
            client.discover(store.base)


def _tiny_store() -> ThreadedServer:
    """A store whose links start at the host it was asked by: a name only the test's resolver knows."""
    def descriptor(request: Request) -> JSONResponse:
        return JSONResponse(_descriptor(str(request.base_url).rstrip("/")))
    return _serve([Route("/negotiate.json", descriptor)])


def test_the_client_connects_to_the_address_its_policy_judged():
    """DNS rebinding: the address judged must be the one connected to, not what a second lookup
    (httpx's own) answers. ``.invalid`` never resolves in DNS (RFC 6761), so reaching the store at
    all shows the connection went where the policy's resolver said; the Host header keeps the name."""
    asked: list[str] = []

    def resolver(host: str) -> list[str]:
        asked.append(host)
        return ["127.0.0.1"]
    with _tiny_store() as server:
        url = f"http://store.invalid:{server.port}/negotiate.json"
        with NegotiateClient(url_policy=URLPolicy(allow_private=True, resolver=resolver)) as client:
            assert client.discover(url).endpoints.catalog == f"http://store.invalid:{server.port}/catalog"

        async def discover() -> str | None:
            async with AsyncNegotiateClient(url_policy=URLPolicy(allow_private=True, resolver=resolver)) as client:
                return (await client.discover(url)).endpoints.catalog
        assert asyncio.run(discover()) == f"http://store.invalid:{server.port}/catalog"
        assert asked == ["store.invalid", "store.invalid"]  # once a connection, by the policy


def test_a_name_that_resolves_inside_is_refused_when_connected_to():
    with _tiny_store() as server:
        policy = URLPolicy(resolver=_resolver({"store.invalid": ["93.184.216.34", "127.0.0.1"]}))
        url = f"http://store.invalid:{server.port}/negotiate.json"
        with NegotiateClient(url_policy=policy) as client, pytest.raises(BlockedURL, match="127.0.0.1"):
            client.discover(url)

        async def discover() -> None:
            async with AsyncNegotiateClient(url_policy=policy) as client:
                await client.discover(url)
        with pytest.raises(BlockedURL, match="127.0.0.1"):
            asyncio.run(discover())


def test_a_policed_client_takes_no_transport_that_would_bypass_it():
    with pytest.raises(ValueError, match="URL policy"):
        NegotiateClient(url_policy=URLPolicy(), transport=httpx.HTTPTransport())
