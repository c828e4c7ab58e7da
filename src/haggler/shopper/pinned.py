"""HTTP clients that connect only to the addresses a :class:`URLPolicy` judged.

Checking a host name's addresses and then letting httpx resolve it again leaves a gap: the second
answer may differ (DNS rebinding) and point inside. Here httpx's connection pool is given a network
backend that resolves the host once through the policy (:meth:`URLPolicy.addresses`), which judges
every address, and opens the TCP connection to one of those addresses itself; TLS still names the
host (SNI, certificate check) and so does the ``Host`` header, as both come from the URL. Redirects
are not followed, and the environment's proxies are not used: a proxy would resolve the host on
its own. Every outbound fetch of a URL someone else chose goes through here: the shopper's clients
(a store's URLs, an assistant's addresses) and UCP's platform profiles and webhooks.

``budget`` bounds a whole exchange (connect, TLS, request, every read of the answer) in seconds:
each socket operation gets at most what is left of it, so a server that trickles bytes (each read
within httpx's per-read timeout) cannot hold the caller for longer.
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterable
from typing import Any, Callable, TypeVar

import anyio.to_thread
import httpcore
import httpx

from haggler.shopper.urls import URLPolicy

_SocketOptions = Iterable[Any] | None
T = TypeVar("T")


class _Budget:
    """The time left of a whole exchange."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self, timeout: float | None, expired: type[httpcore.TimeoutException]) -> float:
        """``timeout`` cut to what is left; ``expired`` raised once nothing is."""
        left = self.end - time.monotonic()
        if left <= 0:
            raise expired(f"the whole exchange took longer than {self.seconds:g}s")
        return left if timeout is None else min(timeout, left)


class _BudgetedStream(httpcore.NetworkStream):
    """A connection whose every read and write waits at most what is left of the budget."""

    def __init__(self, stream: httpcore.NetworkStream, budget: _Budget) -> None:
        self._stream = stream
        self._budget = budget

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, self._budget.left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, self._budget.left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        tls = self._stream.start_tls(ssl_context, server_hostname, self._budget.left(timeout, httpcore.ConnectTimeout))
        return _BudgetedStream(tls, self._budget)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


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
    def __init__(self, policy: URLPolicy, budget: _Budget | None) -> None:
        self._policy = policy
        self._budget = budget
        self._network = httpcore.SyncBackend()

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: _SocketOptions = None) -> httpcore.NetworkStream:
        addresses = self._policy.addresses(host)
        budget = self._budget

        def connect(address: str) -> httpcore.NetworkStream:
            wait = budget.left(timeout, httpcore.ConnectTimeout) if budget else timeout
            return self._network.connect_tcp(address, port, wait, local_address, socket_options)
        stream = _first_connected(addresses, connect)
        return _BudgetedStream(stream, budget) if budget else stream

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


def pinned_client(policy: URLPolicy, *, budget: float | None = None, **options: Any) -> httpx.Client:
    """An httpx client whose connections go only to addresses ``policy`` allowed, each exchange
    within ``budget`` seconds when given; ``options`` are httpx.Client's (timeout, headers)."""
    backend = _PinnedBackend(policy, _Budget(budget) if budget is not None else None)
    return httpx.Client(transport=_PinnedTransport(backend), trust_env=False, follow_redirects=False, **options)


def pinned_async_client(policy: URLPolicy, **options: Any) -> httpx.AsyncClient:
    """:func:`pinned_client` for asyncio, without a budget (the caller's per-read timeouts hold)."""
    return httpx.AsyncClient(transport=_AsyncPinnedTransport(_AsyncPinnedBackend(policy)), trust_env=False,
                             follow_redirects=False, **options)
