"""What a store runs with: catalog, database, addresses, limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from haggler.catalog import Catalog
from haggler.llm.base import LLMBackend
from haggler.order_mail import MailSettings
from haggler.protocols.acp.settings import AcpSettings
from haggler.protocols.agents_json.settings import AgentsSettings
from haggler.protocols.negotiate_v1.settings import MerchantSettings, StoreLimits
from haggler.protocols.market.settings import MarketSettings
from haggler.protocols.matching.settings import MatchingSettings
from haggler.protocols.transactions.settings import ExchangeSettings
from haggler.protocols.ucp.settings import UcpSettings
from haggler.payments.handler import PaymentHandler
from haggler.server.clientip import Network
from haggler.server.limits import ClientLimits
from haggler.storage.database import DEFAULT_DB_TIMEOUT

DEFAULT_DB_URL = "sqlite:///haggler.db"
#: Where the store keeps what is not in the database: its signing key (audit trails, UCP webhooks).
DEFAULT_DATA_DIR = Path("haggler-data")
#: The largest request body any surface reads (the exchange's inputs are the largest bodies).
DEFAULT_MAX_BODY_BYTES = 64 * 1024


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


@dataclass(frozen=True)
class StoreConfig:
    catalog: Catalog
    db_url: str = DEFAULT_DB_URL
    #: The longest a request waits on the database — a lock another session holds, a statement, a
    #: connection — before it is answered 503 (``--db-timeout``; storage/database.py).
    db_timeout_seconds: float = DEFAULT_DB_TIMEOUT
    #: One JSON line per request on standard output (``--access-log json``; server/request_log.py).
    access_log: bool = False
    #: The store's public base URL (``https://shop.example``); when None, URLs are built from
    #: each request's own base.
    public_url: str | None = None
    trusted_proxies: tuple[Network, ...] = ()
    #: The hosts the store answers to (``--allowed-host``): ``name`` (any port) or ``name:port``;
    #: empty means the host of ``public_url``, or without one the loopback names (server/hosts.py).
    allowed_hosts: tuple[str, ...] = ()
    #: The largest request body read, on every surface; a larger one is refused before it is read.
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    limits: StoreLimits = field(default_factory=StoreLimits)
    #: Wrong tokens, registrations and agent messages per client (server/limits.py); clients on
    #: this machine are exempt from the write limits unless ``limits.limit_loopback``.
    client_limits: ClientLimits = field(default_factory=ClientLimits)
    merchant: MerchantSettings = field(default_factory=MerchantSettings)
    #: The model of an ``llm-voice`` or ``llm`` merchant (``merchant.mode``); built by the caller,
    #: so that a missing SDK or key stops start-up.
    merchant_model: LLMBackend | None = None
    agents: AgentsSettings = field(default_factory=AgentsSettings)
    exchange: ExchangeSettings = field(default_factory=ExchangeSettings)
    matching: MatchingSettings = field(default_factory=MatchingSettings)
    market: MarketSettings = field(default_factory=MarketSettings)
    ucp: UcpSettings = field(default_factory=UcpSettings)
    #: ACP checkout: served only with an API key (``HAGGLER_ACP_API_KEY``).
    acp: AcpSettings = field(default_factory=AcpSettings)
    #: The SMTP server buyers' order confirmations go through (none: no mail is sent).
    mail: MailSettings = field(default_factory=MailSettings)
    #: The payment handlers the checkout protocols charge through (built by the caller, as a
    #: processor's SDK and keys are the operator's); the simulated one is added when
    #: ``ucp.simulation_secret`` is set.
    payment_handlers: tuple[PaymentHandler, ...] = ()
    #: Whether a UCP or ACP cancel over price is answered with the merchant agent's counter-offer
    #: (``commerce/counter_offers.py``; ``--no-checkout-counter-offers`` turns it off).
    checkout_counter_offers: bool = True
    data_dir: Path = DEFAULT_DATA_DIR
    #: A fixed seed makes every conversation reproducible (same turns, same replies).
    seed: int | None = None
    clock: Callable[[], datetime] = utc_now
    #: How often idle chats are swept closed, in seconds (None: no background sweep).
    sweep_interval_seconds: float | None = 60.0
