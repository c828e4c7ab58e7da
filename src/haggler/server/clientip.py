"""Which address a request comes from, for per-client limits.

The socket's peer address is the truth. ``X-Forwarded-For`` is believed only when the peer
is one of the operator's trusted proxies (``--trusted-proxy CIDR``); then the client is the
right-most address in the header that is not itself a trusted proxy. Anyone else sending the
header gets it ignored, so nobody dodges a limit by inventing addresses.

A client that is this machine (loopback, after that resolution) is exempt from the chat-start
limit unless the operator asks otherwise (``--limit-loopback``); a loopback peer that relays for
someone else is not such a client (:func:`is_local_client`).

A header sent as several lines is one list, the lines' values joined in order (RFC 9110 §5.3):
a proxy that appends a line of its own instead of extending the client's (HAProxy does) puts the
address it saw last, where it belongs, and the client's forged first line stays a forgery.
"""

from __future__ import annotations

import ipaddress
from functools import lru_cache
from typing import Any, MutableMapping, Sequence

from starlette.datastructures import Headers

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: The ASGI scope key under which :func:`resolved_client` keeps a request's client.
_RESOLVED = "haggler.client"


def parse_networks(cidrs: Sequence[str]) -> tuple[Network, ...]:
    """Parse ``--trusted-proxy`` values; raises ValueError naming the bad one."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"not an IP address or CIDR range: {cidr!r}") from exc
    return tuple(networks)


@lru_cache(maxsize=4096)
def _parsed(address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """``address`` parsed, None when it is no IP address. Kept for the addresses seen last: a
    request from behind a trusted proxy has its peer and its forwarded address parsed up to
    seven times (the request edge, its id, its client and whether that is local, the access
    log), and parsing costs more than asking."""
    try:
        return ipaddress.ip_address(address)
    except ValueError:
        return None


def is_trusted(address: str, trusted: Sequence[Network]) -> bool:
    """Whether ``address`` is inside one of the trusted networks."""
    ip = _parsed(address)
    return ip is not None and _within(ip, trusted)


def _within(ip: ipaddress.IPv4Address | ipaddress.IPv6Address, trusted: Sequence[Network]) -> bool:
    """Whether the parsed ``ip`` is inside one of the trusted networks."""
    return any(ip in net for net in trusted)


def request_client(peer: str | None, headers: Headers, trusted: Sequence[Network]) -> str:
    """The client of a request from ``peer``: see :func:`client_address`, over every
    ``X-Forwarded-For`` line of the request."""
    return client_address(peer, ", ".join(headers.getlist("x-forwarded-for")), trusted)


def client_address(peer: str | None, forwarded_for: str | None, trusted: Sequence[Network]) -> str:
    """``peer``, or the right-most address of ``forwarded_for`` that is not a trusted proxy when
    ``peer`` is one."""
    peer = peer or "unknown"
    if not trusted or not forwarded_for or not is_trusted(peer, trusted):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        ip = _parsed(hop)
        if ip is None:
            return peer  # a malformed chain is not evidence of anything
        if not _within(ip, trusted):
            return hop
    return hops[0] if hops else peer


def resolved_client(scope: MutableMapping[str, Any], trusted: Sequence[Network]) -> tuple[str, bool]:
    """:func:`request_client` and :func:`is_local_client` of the request of ``scope``, worked out
    on the first call and kept in the scope for the rest of the request: a market message asks
    for its client three times (its limit's loopback exemption, its count, the access log), and
    each time parsed ``X-Forwarded-For`` and the addresses again. Every caller of one request must
    pass the same ``trusted`` (the app's ``--trusted-proxy`` networks)."""
    resolved = scope.get(_RESOLVED)
    if resolved is None:
        client = scope.get("client")
        peer = client[0] if client else None
        forwarded = ", ".join(Headers(scope=scope).getlist("x-forwarded-for"))
        address = client_address(peer, forwarded, trusted)
        resolved = scope[_RESOLVED] = (address, _is_local(peer, forwarded, address, trusted))
    return resolved


def known_client(scope: MutableMapping[str, Any]) -> str | None:
    """The client :func:`resolved_client` found for this request, if anything asked for it."""
    resolved = scope.get(_RESOLVED)
    return None if resolved is None else resolved[0]


@lru_cache(maxsize=4096)
def holder(address: str) -> str:
    """Who a per-client limit counts for ``address``: an IPv4 address itself, an IPv6 address its
    /64 network — one host is handed a whole /64 and can pick a fresh address for every request,
    so counting single IPv6 addresses would limit nobody. An IPv4-mapped one is its IPv4 address.
    Kept for the addresses seen last: each limited request asks, and parsing costs more than asking."""
    ip = _parsed(address)
    if ip is None:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network(f"{ip}/64", strict=False))
    return address


def is_loopback(address: str) -> bool:
    """Whether ``address`` is a loopback address (an IPv4-mapped IPv6 one included)."""
    ip = _parsed(address)
    if ip is None:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


def is_local_client(peer: str | None, headers: Headers, trusted: Sequence[Network]) -> bool:
    """Whether the client of a request from ``peer`` is this machine itself: the address
    :func:`request_client` resolves is loopback. A loopback peer that is not a trusted proxy yet
    sends ``X-Forwarded-For`` is a proxy on this machine the operator did not declare
    (``--trusted-proxy``): it relays for clients nobody knows, so they are not local — otherwise a
    reverse proxy set up without ``--trusted-proxy`` would lift the limit for the whole world."""
    forwarded = ", ".join(headers.getlist("x-forwarded-for"))
    return _is_local(peer, forwarded, client_address(peer, forwarded, trusted), trusted)


def _is_local(peer: str | None, forwarded: str, client: str, trusted: Sequence[Network]) -> bool:
    """:func:`is_local_client` of a request from ``peer`` whose ``X-Forwarded-For`` lines were
    ``forwarded`` and whose client :func:`client_address` found was ``client``."""
    if forwarded and not is_trusted(peer or "", trusted):
        return False
    return is_loopback(client)
