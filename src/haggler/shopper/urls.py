"""Which URLs a shopper may be sent to fetch.

A store hands the shopper URLs (`next`, `start_chat_url`), and an assistant (over MCP) hands it
store addresses. Either could point at an internal service. :class:`URLPolicy` allows only
http(s), and private, loopback and link-local addresses only when the operator says so —
checked on every address the host name resolves to, not only on literal IPs.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

from haggler.shopper.errors import BlockedURL

Resolver = Callable[[str], list[str]]


def resolve_host(host: str) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise BlockedURL(f"cannot resolve host {host!r}: {exc.strerror}") from exc
    return sorted({str(info[4][0]) for info in infos})


def _is_internal(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_multicast
            or ip.is_unspecified)


@dataclass(frozen=True)
class URLPolicy:
    allow_private: bool = False
    resolver: Resolver = resolve_host

    def check(self, url: str) -> None:
        """Raise :class:`BlockedURL` unless ``url`` may be fetched."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise BlockedURL(f"only http and https URLs are allowed, not {parts.scheme or 'no scheme'!r}: {url}")
        host = parts.hostname
        if not host:
            raise BlockedURL(f"URL has no host: {url}")
        if parts.username or parts.password:
            raise BlockedURL(f"URLs with credentials are not allowed: {url}")
        if self.allow_private:
            return
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            addresses = self.resolver(host)
        internal = [a for a in addresses if _is_internal(a)]
        if internal:
            raise BlockedURL(f"{host} is a private or loopback address ({', '.join(internal)}); "
                             "the operator has not allowed those")


