"""ACP's order webhooks: every order placed through ACP is announced to the agent platform's
receiver (rfc.agentic_checkout.md §2.3: ``order_create`` and ``order_update`` MUST be emitted),
as ``openapi.agentic_checkout_webhook.yaml`` defines the call. This is ACP's :class:`Door` of
``commerce/order_events.py``, which keeps each event until the receiver takes it.

* The receiver and the secret are the operator's (``AcpSettings.webhook_url``, ``webhook_secret``):
  the platform hands them over when the merchant is onboarded. They are not read from a caller, so
  the receiver may sit on a private address (a relay in the merchant's own network).
* The body is ``{"type": "order_create", "data": <the full Order>}`` (the webhook spec: the full
  order, never a delta; ``data.type`` is ``order``), the order as it stands when it is sent.
* ``Merchant-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`` under the
  shared secret. The receiver refuses a timestamp outside its window (300 s recommended), so each
  attempt is signed when it is made, not when the event was.
* ``Request-Id`` is the event's id, the same on every attempt, so the receiver can tell a retry;
  ``Timestamp`` is the attempt's time in ISO 8601.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone

from haggler.commerce.order_events import PLACED, Event, Outgoing
from haggler.commerce.sessions import Priced
from haggler.commerce.webhooks import Delivery
from haggler.orders import Order
from haggler.protocols.acp import views
from haggler.protocols.acp.settings import AcpSettings
from haggler.shopper.urls import URLPolicy
from haggler.timestamps import utc_z
from haggler.trust.canonical import canonical_json

#: The webhook event types, by the kind ``order_events`` records; ``order_update`` is for changes to
#: an order, which the store does not make yet (it records no shipping, refund or cancellation).
EVENT_TYPES = {PLACED: "order_create"}
SIGNATURE_HEADER = "Merchant-Signature"


def merchant_signature(secret: str, body: bytes, at: int) -> str:
    """The ``Merchant-Signature`` of ``body`` sent at ``at`` (Unix seconds)."""
    digest = hmac.new(secret.encode(), str(at).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={digest}"


class OrderWebhooks:
    def __init__(self, settings: AcpSettings, *, find: Callable[[str], tuple[Order, Priced] | None] | None = None,
                 sleep: Callable[[float], None] = time.sleep, now: Callable[[], float] = time.time) -> None:
        """``find``: an order by its id, with its checkout session priced; ``now``: the wall clock
        the signatures' timestamps come from (the receiver's window is wall-clock time, whatever
        clock the checkout runs on)."""
        self.url = settings.webhook_url
        self._secret = settings.webhook_secret or ""
        self._find = find
        self._now = now
        self.delivery = Delivery(URLPolicy(allow_private=True), settings.webhook_timeout_seconds,
                                 settings.webhook_attempts, sleep)

    @property
    def enabled(self) -> bool:
        return self.url is not None

    def outgoing(self, event: Event, base: str | None) -> Outgoing | None:
        """The :class:`Door`'s event: the order as it stands, to the store's receiver (None: the
        store has none)."""
        found = self._find(event.order_id) if self._find is not None and base is not None else None
        if found is None or self.url is None or base is None:
            return None
        order, priced = found
        body = canonical_json({"type": EVENT_TYPES[event.kind], "data": views.order_view(priced, order, base)})
        return Outgoing(self.url, body, self.signer(event.id))

    def signer(self, event_id: str) -> Callable[[bytes], Mapping[str, str]]:
        """The headers of one attempt to send the event ``event_id``: signed at the attempt's time."""
        def sign(body: bytes) -> dict[str, str]:
            at = self._now()
            return {SIGNATURE_HEADER: merchant_signature(self._secret, body, int(at)), "Request-Id": event_id,
                    "Timestamp": utc_z(datetime.fromtimestamp(at, timezone.utc))}
        return sign


__all__ = ["EVENT_TYPES", "OrderWebhooks", "SIGNATURE_HEADER", "merchant_signature"]
