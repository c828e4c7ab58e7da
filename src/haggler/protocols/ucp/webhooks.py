"""The platform's profile (named in ``UCP-Agent`` when it creates the checkout), read for what the
checkout keeps of it (:class:`PlatformProfile`: its order webhook, its capabilities for the
negotiation, its signing keys for AP2's mandates), and order webhooks delivered where it says, signed.

UCP's order capability: the platform's profile gives ``webhook_url`` in the config of its
``dev.ucp.shopping.order`` capability; the business MUST sign every webhook payload with a key
from the ``signing_keys`` its profile publishes (a detached JWT, RFC 7797, in ``Request-Signature``,
its ``kid`` naming the key: here ES256 with the store's P-256 key, ``trust/jws.py``), MUST name
itself in the webhook's path or headers (here ``UCP-Agent`` with the business profile's URL), MUST
send the full order on every event and MUST retry failed deliveries (order.md, "Webhook Signature
Verification" and "Guidelines"). A profile is fetched once per
:attr:`UcpSettings.profile_cache_seconds` (the overview's "unless already cached"); a profile that
cannot be fetched or read names no webhook, no capability and no key, and the checkout goes on
without them. Deliveries run after the response is sent, off the request.

Both URLs come from the platform, so both are fetched through ``shopper/pinned.py``: http(s)
only, connections only to addresses the :class:`URLPolicy` judged (a private or loopback one only
on a test store, ``UcpSettings.private_urls_allowed``), no redirects, and each exchange (a profile
fetch, one delivery attempt) within :attr:`UcpSettings.webhook_timeout_seconds` in all, however
slowly the other side answers. A profile is read up to :data:`MAX_PROFILE_BYTES` and no further.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import httpx

from haggler.commerce.order_events import PLACED, Event, Outgoing
from haggler.commerce.sessions import Session
from haggler.commerce.webhooks import Delivery
from haggler.orders import Order
from haggler.protocols.ucp import views
from haggler.protocols.ucp.settings import UcpSettings
from haggler.protocols.ucp.views import ORDER
from haggler.shopper.errors import BlockedURL
from haggler.shopper.pinned import pinned_client
from haggler.shopper.urls import URLPolicy
from haggler.trust.canonical import canonical_json
from haggler.trust.jws import sign_detached
from haggler.trust.signatures import Signer

log = logging.getLogger("haggler")
#: The largest platform profile read.
MAX_PROFILE_BYTES = 256 * 1024
#: The most signing keys of a platform kept (a checkout keeps them, so their number is bounded).
MAX_SIGNING_KEYS = 16
#: An order shipped (the simulation's), besides order_events.PLACED.
SHIPPED = "shipped"
#: The event types of UCP's order capability, by the kind ``order_events`` records.
EVENT_TYPES = {PLACED: "order_placed", SHIPPED: "order_shipped"}
#: The members of a public JWK kept (RFC 7517, 7518: an EC key; private members never).
_JWK_MEMBERS = ("kid", "kty", "crv", "x", "y", "alg", "use")


class PlatformProfile(NamedTuple):
    """What the store reads in a platform's profile: ``webhook_url``, its order webhook;
    ``capabilities``, the names it lists (overview.md, "Intersection Algorithm");
    ``signing_keys``, its public JWKs (ap2-mandates.md, "Signing Key Requirements")."""

    webhook_url: str | None = None
    capabilities: tuple[str, ...] = ()
    signing_keys: tuple[Mapping[str, Any], ...] = ()


def read_profile(profile: Any) -> PlatformProfile:
    """A fetched profile's parts; whatever is not of the expected shape is left out."""
    ucp = profile.get("ucp") if isinstance(profile, dict) else None
    listed = ucp.get("capabilities") if isinstance(ucp, dict) else None
    keys = profile.get("signing_keys") if isinstance(profile, dict) else None
    capabilities = [c["name"] for c in _list(listed) if isinstance(c, dict) and isinstance(c.get("name"), str)]
    signing_keys = [{m: k[m] for m in _JWK_MEMBERS if m in k} for k in _list(keys) if isinstance(k, dict)]
    return PlatformProfile(order_webhook(profile), tuple(capabilities), tuple(signing_keys[:MAX_SIGNING_KEYS]))


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class Webhooks:
    def __init__(self, settings: UcpSettings, signer: Signer, *, sleep: Callable[[float], None] = time.sleep,
                 policy: URLPolicy | None = None, find: Callable[[str], tuple[Order, Session | None] | None] | None = None
                 ) -> None:
        """``signer``: the store's ES256 key, whose public half the profile publishes (``signing_keys``);
        ``find``: an order by its id, with the checkout it was placed for (for :meth:`outgoing`)."""
        self._find = find
        self.settings = settings
        self.signer = signer
        self.policy = policy or URLPolicy(allow_private=settings.private_urls_allowed)
        self.delivery = Delivery(self.policy, settings.webhook_timeout_seconds, settings.webhook_attempts, sleep)
        self._profiles: dict[str, tuple[float, PlatformProfile]] = {}
        self._lock = threading.Lock()

    def _client(self) -> httpx.Client:
        """A client for one exchange: its budget starts now."""
        seconds = self.settings.webhook_timeout_seconds
        return pinned_client(self.policy, budget=seconds, timeout=seconds)

    def platform(self, profile_url: str | None) -> PlatformProfile:
        """What the platform's profile says (nothing, when there is none or it cannot be read)."""
        if not profile_url or not profile_url.startswith(("http://", "https://")):
            return PlatformProfile()
        now = time.monotonic()
        with self._lock:
            cached = self._profiles.get(profile_url)
        if cached is not None and now - cached[0] < self.settings.profile_cache_seconds:
            return cached[1]
        found = self._fetch(profile_url)
        with self._lock:
            if len(self._profiles) > 1000:
                self._profiles.clear()
            self._profiles[profile_url] = (now, found)
        return found

    def _fetch(self, profile_url: str) -> PlatformProfile:
        try:
            self.policy.check(profile_url)
            # identity: the cap below counts the bytes of the profile, not of a compressed form.
            with self._client() as client, client.stream(
                    "GET", profile_url, headers={"Accept": "application/json", "Accept-Encoding": "identity"}) as answer:
                if answer.status_code != 200:
                    return PlatformProfile()
                body = _read_at_most(answer, MAX_PROFILE_BYTES)
            return read_profile(json.loads(body))
        except (httpx.HTTPError, ValueError, RecursionError, BlockedURL) as exc:
            log.info("UCP platform profile %s not read: %s", profile_url, exc)
            return PlatformProfile()

    def signed(self, body: bytes, business_profile: str) -> Callable[[bytes], Mapping[str, str]]:
        """The headers of every attempt to send ``body``: one signature (a UCP signature holds no
        time) and the store's name, its profile URL ``business_profile``."""
        headers = {"Request-Signature": sign_detached(self.signer, body, encoded=False),
                   "UCP-Agent": f'profile="{business_profile}"'}
        return lambda _: headers

    def outgoing(self, event: Event, base: str | None) -> Outgoing | None:
        """``order_events.py``'s :class:`Door`: the order's event, the order as it stands, to the
        webhook its checkout's creator named (None when it named none)."""
        found = self._find(event.order_id) if self._find is not None and base is not None else None
        if found is None or found[1] is None or found[1].webhook_url is None:
            return None
        order, session = found
        assert base is not None
        body = canonical_json(views.order_event(EVENT_TYPES[event.kind], event.id, event.created_at, order, base))
        return Outgoing(session.webhook_url, body, self.signed(body, views.profile_url(base)))


def _read_at_most(answer: httpx.Response, limit: int) -> bytes:
    """The body of a streamed answer, read until ``limit`` bytes and no further (ValueError past it)."""
    body = bytearray()
    for chunk in answer.iter_bytes():
        body += chunk
        if len(body) > limit:
            raise ValueError(f"the profile is larger than {limit} bytes")
    return bytes(body)


def order_webhook(profile: Any) -> str | None:
    """``ucp.capabilities[name=dev.ucp.shopping.order].config.webhook_url`` of a platform profile."""
    try:
        for capability in profile["ucp"]["capabilities"]:
            if capability.get("name") == ORDER:
                url = (capability.get("config") or {}).get("webhook_url")
                if isinstance(url, str) and url.startswith(("http://", "https://")):
                    return url
    except (KeyError, TypeError, AttributeError):
        return None
    return None
