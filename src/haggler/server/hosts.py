"""Which host names the store answers to (``--allowed-host``).

Without ``--public-url`` the store builds every link it hands out (``next``, checkout, the
descriptor's endpoints) from the request's own host. A client choosing that host would choose the
links, and a shared cache in front of the store would hand them to everyone else; a web page
could also reach a loopback store through DNS rebinding. So a request is answered only when its
host is one the operator allowed: the host of ``--public-url`` when that is set, else the
loopback names.

A name matches any port; ``name:port`` only that port. IPv6 addresses are written in brackets
(``[::1]``); a bare ``::1`` is accepted in the list too.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable
from urllib.parse import urlsplit

#: What the store answers to by default without ``--public-url``: this machine, any port.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")

_NAME = re.compile(r"[a-z0-9_](?:[a-z0-9_.-]*[a-z0-9_])?|\[[0-9a-f:.]+\]")
_PORT = re.compile(r"[0-9]{1,5}")


@lru_cache(maxsize=256)  # every request's host goes through here: a few values, over and over
def split_host(value: str) -> tuple[str, str | None] | None:
    """``host[:port]`` as (lower-case name, port or None); None when it is not a host at all."""
    value = value.strip().lower()
    if value.count(":") > 1 and not value.startswith("["):
        value = f"[{value}]"  # a bare IPv6 address
    name, colon, port = value.rpartition(":") if value.rfind(":") > value.rfind("]") else (value, "", "")
    if not _NAME.fullmatch(name) or (colon and not _PORT.fullmatch(port)):
        return None
    return name, port if colon else None


class AllowedHosts:
    """The host names the store answers to, and the check of a request's host against them."""

    def __init__(self, names: Iterable[str]) -> None:
        self.any_port: set[str] = set()
        self.exact: set[tuple[str, str]] = set()
        for raw in names:
            parsed = split_host(raw)
            if parsed is None:
                raise ValueError(f"not a host name, IP address or name:port: {raw!r}")
            name, port = parsed
            if port is None:
                self.any_port.add(name)
            else:
                self.exact.add((name, port))

    @classmethod
    def for_store(cls, names: Iterable[str], public_url: str | None) -> "AllowedHosts":
        """The operator's names; without any, the host of ``public_url``, or the loopback names."""
        names = tuple(names)
        if names:
            return cls(names)
        if public_url:
            return cls([urlsplit(public_url).netloc.rpartition("@")[2]])
        return cls(LOOPBACK_NAMES)

    def allows(self, host: str) -> bool:
        """Whether a request's ``Host`` (or ``X-Forwarded-Host``) value is one of the allowed hosts."""
        parsed = split_host(host)
        if parsed is None:
            return False
        name, port = parsed
        return name in self.any_port or (port is not None and (name, port) in self.exact)


#: ``--host`` values that listen on every interface: no client can use them as a URL's host.
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


def url_host(address: str) -> str:
    """``address`` as a URL writes it: an IPv6 address in brackets."""
    return f"[{address}]" if ":" in address and not address.startswith("[") else address


def browsable_base(host: str, port: int, names: Iterable[str], public_url: str | None) -> str:
    """The base URL to tell the operator at start-up: one the store answers, so that every link
    printed works. ``--public-url`` when set; else the listening address — or, for a wildcard
    (``0.0.0.0`` answers nothing), this machine's loopback address — when the store allows it,
    else the first allowed name the store listens for (``--allowed-host``)."""
    if public_url:
        return public_url.rstrip("/")
    names = tuple(names)
    allowed = AllowedHosts.for_store(names, None)
    listening = ("[::1]" if ":" in host else "127.0.0.1") if host in WILDCARD_HOSTS else url_host(host)
    candidates = [listening, *(parsed[0] for parsed in map(split_host, names) if parsed is not None)]
    usable = next((name for name in candidates if allowed.allows(f"{name}:{port}")), listening)
    return f"http://{usable}:{port}"
