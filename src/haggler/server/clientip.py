"""Which address a request comes from, for per-client limits.

The socket's peer address is the truth. ``X-Forwarded-For`` is believed only when the peer
is one of the operator's trusted proxies (``--trusted-proxy CIDR``); then the client is the
right-most address in the header that is not itself a trusted proxy. Anyone else sending the
header gets it ignored, so nobody dodges a limit by inventing addresses.
"""

from __future__ import annotations

import ipaddress
from typing import Sequence

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_networks(cidrs: Sequence[str]) -> tuple[Network, ...]:
    """Parse ``--trusted-proxy`` values; raises ValueError naming the bad one."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"not an IP address or CIDR range: {cidr!r}") from exc
    return tuple(networks)


def is_trusted(address: str, trusted: Sequence[Network]) -> bool:
    """Whether ``address`` is inside one of the trusted networks."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in net for net in trusted)


def client_address(peer: str | None, forwarded_for: str | None, trusted: Sequence[Network]) -> str:
    peer = peer or "unknown"
    if not trusted or not forwarded_for or not is_trusted(peer, trusted):
        return peer
    hops = [hop.strip() for hop in forwarded_for.split(",") if hop.strip()]
    for hop in reversed(hops):
        try:
            ipaddress.ip_address(hop)
        except ValueError:
            return peer  # a malformed chain is not evidence of anything
        if not is_trusted(hop, trusted):
            return hop
    return hops[0] if hops else peer
