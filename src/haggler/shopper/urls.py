"""Which URLs a shopper may be sent to fetch.

A store hands the shopper URLs (`next`, `start_chat_url`), and an assistant (over MCP) hands it
store addresses. Either could point at an internal service. :class:`URLPolicy` allows only
http(s), and addresses that are not globally routable (private, loopback, link-local, CGNAT,
benchmarking, documentation, reserved, multicast) only when the operator says so — checked on
every address the host name resolves to, not only on literal IPs.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Callable
from urllib.parse import urlsplit

from haggler.shopper.errors import BlockedURL

Resolver = Callable[[str], list[str]]
# IPv6 prefixes that carry an IPv4 address in their last 32 bits and reach it: NAT64's well-known
# prefix, and the deprecated IPv4-compatible form (IPv4-mapped and 6to4 ipaddress reads itself).
_CARRIES_IPV4 = (ipaddress.ip_network("64:ff9b::/96"), ipaddress.ip_network("::/96"))


def resolve_host(host: str) -> list[str]:
    """Every address ``host`` resolves to (IPv4 and IPv6)."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise BlockedURL(f"cannot resolve host {host!r}: {exc.strerror}") from exc
    return sorted({str(info[4][0]) for info in infos})


def _carried_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 one reaches through (IPv4-mapped, 6to4, NAT64, IPv4-compatible)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in prefix for prefix in _CARRIES_IPV4):
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def _is_internal(address: str) -> bool:
    """Whether ``address`` is anything but a globally routable unicast address (``is_global``
    covers private, loopback, link-local, CGNAT, benchmarking, documentation and reserved ranges;
    multicast is global to it, so is named too)."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        ip = _carried_ipv4(ip) or ip
    return not ip.is_global or ip.is_multicast


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
            raise BlockedURL(f"{host} is a private, loopback or otherwise internal address ({', '.join(internal)}); "
                             "the operator has not allowed those")


