"""Which URLs may be fetched, and which addresses a fetch may connect to.

A store hands the shopper URLs (`next`, `start_chat_url`), an assistant (over MCP) hands it store
addresses, and a UCP platform hands the store its profile and webhook URLs. Any of them could point
at an internal service. :class:`URLPolicy` allows only http(s), and addresses that are not globally
routable (private, loopback, link-local, CGNAT, benchmarking, documentation, reserved, multicast)
only when the operator says so.

The check is in two parts because DNS answers can change between two lookups (DNS rebinding): a
name checked here and resolved again by the HTTP library could connect somewhere else.
:meth:`URLPolicy.check` judges what the URL itself says (scheme, credentials, a literal IP);
:meth:`URLPolicy.addresses` resolves a host name once and judges every address it gives, and
``shopper/pinned.py`` connects only to those very addresses.
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
    """Every address ``host`` resolves to (IPv4 and IPv6), in the order the system prefers."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise BlockedURL(f"cannot resolve host {host!r}: {exc.strerror}") from exc
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


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
        """Raise :class:`BlockedURL` unless ``url`` may be asked for: http(s), a host, no
        credentials, and a literal IP host only if allowed. A host name is judged when it is
        connected to (:meth:`addresses`), not here."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise BlockedURL(f"only http and https URLs are allowed, not {parts.scheme or 'no scheme'!r}: {url}")
        host = parts.hostname
        if not host:
            raise BlockedURL(f"URL has no host: {url}")
        if parts.username or parts.password:
            raise BlockedURL(f"URLs with credentials are not allowed: {url}")
        try:
            ipaddress.ip_address(host)
        except ValueError:
            return
        self.addresses(host)

    def addresses(self, host: str) -> list[str]:
        """The addresses a connection to ``host`` may use: resolved once, each one judged; a host
        with any address not allowed is refused whole (:class:`BlockedURL`)."""
        try:
            found = [str(ipaddress.ip_address(host))]
        except ValueError:
            found = self.resolver(host)
        if not found:
            raise BlockedURL(f"host {host!r} resolves to no address")
        internal = [a for a in found if _is_internal(a)]
        if internal and not self.allow_private:
            raise BlockedURL(f"{host} is a private, loopback or otherwise internal address ({', '.join(internal)}); "
                             "the operator has not allowed those")
        return found
