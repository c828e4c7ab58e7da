"""HTTP clients that connect only to the addresses a :class:`URLPolicy` judged.

Checking a host name's addresses and then letting httpx resolve it again leaves a gap: the second
answer may differ (DNS rebinding) and point inside. Here httpx's connection pool is given a network
backend that resolves the host once through the policy (:meth:`URLPolicy.addresses`), which judges
every address, and opens the TCP connection to one of those addresses itself; TLS still names the
host (SNI, certificate check) and so does the ``Host`` header, as both come from the URL. Redirects
are not followed, and the environment's proxies are not used: a proxy would resolve the host on
its own. Every outbound fetch of a URL someone else chose goes through here: the shopper's clients
(a store's URLs, an assistant's addresses) and UCP's platform profiles and webhooks.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Callable, TypeVar

import anyio.to_thread
import httpcore
import httpx

from haggler.shopper.urls import URLPolicy

_SocketOptions = Iterable[Any] | None
T = TypeVar("T")


def _first_connected(addresses: list[str], connect: Callable[[str], T]) -> T:
    """The first of ``addresses`` that takes a connection, in the resolver's order."""
    failure: Exception | None = None
    for address in addresses:
        try:
            return connect(address)
        except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
            failure = exc
    assert failure is not None  # URLPolicy.addresses gives at least one address
    raise failure


class _PinnedBackend(httpcore.NetworkBackend):
    def __init__(self, policy: URLPolicy) -> None:
        self._policy = policy
        self._network = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: _SocketOptions = None) -> httpcore.NetworkStream:
        addresses = self._policy.addresses(host)
        return _first_connected(addresses, lambda address: self._network.connect_tcp(
            address, port, timeout, local_address, socket_options))

    def sleep(self, seconds: float) -> None:
        self._network.sleep(seconds)


class _AsyncPinnedBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, policy: URLPolicy) -> None:
        self._policy = policy
        self._network = httpcore.AnyIOBackend()

    async def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                          socket_options: _SocketOptions = None) -> httpcore.AsyncNetworkStream:
        # The resolver blocks (getaddrinfo), so it runs off the event loop.
        addresses = await anyio.to_thread.run_sync(self._policy.addresses, host)
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._network.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


class _PinnedTransport(httpx.HTTPTransport):
    def __init__(self, backend: httpcore.NetworkBackend) -> None:
        super().__init__()
        # httpx's transport takes no network backend, so the pool it built is replaced by one with
        # ours; everything else (exception mapping, streaming) stays httpx's own.
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(), network_backend=backend)


class _AsyncPinnedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, backend: httpcore.AsyncNetworkBackend) -> None:
        super().__init__()
        self._pool = httpcore.AsyncConnectionPool(ssl_context=httpx.create_ssl_context(), network_backend=backend)


def pinned_client(policy: URLPolicy, **options: Any) -> httpx.Client:
    """An httpx client whose connections go only to addresses ``policy`` allowed; ``options`` are
    httpx.Client's (timeout, headers)."""
    return httpx.Client(transport=_PinnedTransport(_PinnedBackend(policy)), trust_env=False, follow_redirects=False,
                        **options)


def pinned_async_client(policy: URLPolicy, **options: Any) -> httpx.AsyncClient:
    """:func:`pinned_client` for asyncio."""
    return httpx.AsyncClient(transport=_AsyncPinnedTransport(_AsyncPinnedBackend(policy)), trust_env=False,
                             follow_redirects=False, **options)
