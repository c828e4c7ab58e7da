"""What an operator sets for the ACP merchant."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

#: The ACP release this merchant implements; ``API-Version`` must name it.
ACP_VERSION = "2026-04-17"
#: Every release this merchant accepts in ``API-Version``, oldest first (discovery's
#: ``supported_versions``): only the one it implements, since earlier ones have other shapes.
SUPPORTED_VERSIONS = (ACP_VERSION,)
#: The shortest key accepted: a Bearer key is all that stands between the internet and checkout.
SHORTEST_KEY = 16
#: The shortest webhook secret accepted: it is all that makes an order event the store's.
SHORTEST_SECRET = 16


@dataclass(frozen=True)
class AcpSettings:
    #: The Bearer key agents present (``HAGGLER_ACP_API_KEY``). None: the store does not serve ACP
    #: (its routes and ``/.well-known/acp.json`` answer 404, which discovery defines as "the
    #: seller does not support ACP").
    api_key: str | None = None
    #: Where order events go (``HAGGLER_ACP_WEBHOOK_URL``): the agent platform's webhook receiver,
    #: which it gives the merchant when they are onboarded (rfc.agentic_checkout.md §2.3). None: none
    #: are sent.
    webhook_url: str | None = None
    #: The secret shared with that receiver, which signs every event (``HAGGLER_ACP_WEBHOOK_SECRET``).
    webhook_secret: str | None = None
    #: Seconds one delivery attempt may take, and how many attempts an event gets.
    webhook_timeout_seconds: float = 5.0
    webhook_attempts: int = 4

    @property
    def enabled(self) -> bool:
        return self.api_key is not None

    def __post_init__(self) -> None:
        if self.api_key is not None and (len(self.api_key) < SHORTEST_KEY or self.api_key != self.api_key.strip()):
            raise ValueError(f"--acp-api-key (HAGGLER_ACP_API_KEY) must be at least {SHORTEST_KEY} characters, "
                             "without surrounding spaces")
        if (self.webhook_url is None) != (self.webhook_secret is None):
            raise ValueError("ACP order webhooks need both --acp-webhook-url (HAGGLER_ACP_WEBHOOK_URL) and "
                             "HAGGLER_ACP_WEBHOOK_SECRET, or neither")
        if self.webhook_url is not None:
            if self.api_key is None:
                raise ValueError("--acp-webhook-url is for a store that serves ACP: set HAGGLER_ACP_API_KEY too")
            parts = urlsplit(self.webhook_url)
            if not self.webhook_url.startswith(("http://", "https://")) or not parts.hostname:
                raise ValueError(f"--acp-webhook-url must be an absolute http(s) URL, got {self.webhook_url!r}")
            if parts.username or parts.password:
                raise ValueError("--acp-webhook-url must not carry credentials: the receiver is authenticated "
                                 "by the signature made with HAGGLER_ACP_WEBHOOK_SECRET")
        if self.webhook_secret is not None and len(self.webhook_secret) < SHORTEST_SECRET:
            raise ValueError(f"HAGGLER_ACP_WEBHOOK_SECRET must be at least {SHORTEST_SECRET} characters")
        if self.webhook_attempts < 1 or not self.webhook_timeout_seconds > 0:
            raise ValueError("ACP webhooks need at least one attempt and a positive timeout")
