"""Order events delivered to a webhook receiver, the part UCP and ACP share: one POST per attempt,
retried with a growing pause until the receiver takes it (2xx) or the attempts run out.

Each protocol signs its own way, and ACP's signature carries the time it was made (a receiver
refuses one older than its window), so the headers are made afresh for every attempt by the
protocol's ``sign`` and never reused from an earlier one. Every connection goes through
``shopper/pinned.py``: only to addresses the :class:`URLPolicy` judged, no redirects, each attempt
within ``timeout_seconds`` in all however slowly the receiver answers.

These quick retries cover a receiver's blip; ``commerce/order_events.py`` keeps each event in the
database and sends it again later until it is taken. A receiver no attempt can reach (an address
the policy refuses, a URL that cannot be written) is :class:`Undeliverable`, not retried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import httpx

from haggler.shopper.errors import BlockedURL
from haggler.shopper.pinned import pinned_client
from haggler.shopper.urls import URLPolicy

log = logging.getLogger("haggler")
#: The pause before the second attempt; each later one doubles it.
FIRST_PAUSE_SECONDS = 0.5


class Undeliverable(Exception):
    """No attempt can reach this receiver: its URL names an address the policy refuses, or cannot
    be written as a request at all."""


@dataclass
class Delivery:
    """How events are posted: ``policy`` judges the receiver's address, each attempt ends within
    ``timeout_seconds``, at most ``attempts`` of them, ``sleep`` pausing between (tests pass their own)."""

    policy: URLPolicy
    timeout_seconds: float
    attempts: int
    sleep: Callable[[float], None] = field(default=time.sleep)

    def post(self, url: str, body: bytes, sign: Callable[[bytes], Mapping[str, str]], what: str) -> bool:
        """POST ``body`` to ``url`` with the headers ``sign(body)`` makes for this attempt; whether
        the receiver took it. ``what`` names the event in the log. :class:`Undeliverable` when no
        attempt can reach ``url``."""
        for attempt in range(self.attempts):
            if attempt:
                self.sleep(FIRST_PAUSE_SECONDS * 2 ** (attempt - 1))
            try:
                self.policy.check(url)
                with pinned_client(self.policy, budget=self.timeout_seconds, timeout=self.timeout_seconds) as client:
                    answer = client.post(url, content=body, headers={"Content-Type": "application/json", **sign(body)})
                if 200 <= answer.status_code < 300:
                    return True
                log.info("webhook %s answered %d to %s (attempt %d)", url, answer.status_code, what, attempt + 1)
            except (BlockedURL, httpx.InvalidURL, UnicodeError) as exc:
                raise Undeliverable(f"{url}: {exc}") from exc
            except httpx.HTTPError as exc:
                log.info("webhook %s: %s failed (attempt %d): %s", url, what, attempt + 1, exc)
        log.warning("webhook %s: %s not delivered after %d attempts", url, what, self.attempts)
        return False
