"""ACP's order webhooks: every order placed through ACP is announced to the agent platform's
receiver (rfc.agentic_checkout.md §2.3: ``order_create`` and ``order_update`` MUST be emitted),
as ``openapi.agentic_checkout_webhook.yaml`` defines the call.

* The receiver and the secret are the operator's (``AcpSettings.webhook_url``, ``webhook_secret``):
  the platform hands them over when the merchant is onboarded. They are not read from a caller, so
  the receiver may sit on a private address (a relay in the merchant's own network).
* The body is ``{"type": "order_create", "data": <the full Order>}`` (the webhook
  spec: the full order, never a delta; ``data.type`` is ``order``).
* ``Merchant-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`` under the
  shared secret. The receiver refuses a timestamp outside its window (300 s recommended), so each
  attempt is signed when it is made, not when the event was.
* ``Request-Id`` is the event's id, the same on every attempt, so the receiver can tell a retry;
  ``Timestamp`` is the attempt's time in ISO 8601.

Attempts and their pauses are ``commerce/webhooks.py``'s.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable, Mapping
from datetime import datetime, timezone
from typing import Any

from haggler.commerce.webhooks import Delivery
from haggler.protocols.acp.settings import AcpSettings
from haggler.shopper.urls import URLPolicy
from haggler.timestamps import utc_z
from haggler.trust.canonical import canonical_json

#: The event for a new order; ``order_update`` is for changes to one, which the store does not make
#: yet (it records no shipping, refund or cancellation after an order is placed).
ORDER_CREATE = "order_create"
SIGNATURE_HEADER = "Merchant-Signature"


def merchant_signature(secret: str, body: bytes, at: int) -> str:
    """The ``Merchant-Signature`` of ``body`` sent at ``at`` (Unix seconds)."""
    digest = hmac.new(secret.encode(), str(at).encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"t={at},v1={digest}"


class OrderWebhooks:
    def __init__(self, settings: AcpSettings, *, sleep: Callable[[float], None] = time.sleep,
                 now: Callable[[], float] = time.time) -> None:
        """``now``: the wall clock the signatures' timestamps come from (the receiver's window is
        wall-clock time, whatever clock the checkout runs on)."""
        self.url = settings.webhook_url
        self._secret = settings.webhook_secret or ""
        self._now = now
        self._delivery = Delivery(URLPolicy(allow_private=True), settings.webhook_timeout_seconds,
                                  settings.webhook_attempts, sleep)

    @property
    def enabled(self) -> bool:
        return self.url is not None

    def announce(self, event_type: str, order: Mapping[str, Any]) -> Callable[[], bool] | None:
        """The delivery of ``event_type`` for ``order`` (ACP's Order), to run once the answer is sent;
        None when the store has no receiver. The event is made now, so every attempt sends it alike."""
        url = self.url
        if url is None:
            return None
        body = canonical_json({"type": event_type, "data": dict(order)})
        event_id = "evt_" + secrets.token_hex(12)

        def sign(signed: bytes) -> dict[str, str]:
            at = self._now()
            return {SIGNATURE_HEADER: merchant_signature(self._secret, signed, int(at)), "Request-Id": event_id,
                    "Timestamp": utc_z(datetime.fromtimestamp(at, timezone.utc))}
        return lambda: self._delivery.post(url, body, sign, f"ACP {event_type} for order {order.get('id')}")


__all__ = ["ORDER_CREATE", "OrderWebhooks", "SIGNATURE_HEADER", "merchant_signature"]
