"""What an operator sets for the UCP merchant."""

from __future__ import annotations

from dataclasses import dataclass

#: The UCP version this merchant implements: agents declaring a later one are refused.
UCP_VERSION = "2026-01-11"


@dataclass(frozen=True)
class UcpSettings:
    #: Serve ``/.well-known/ucp`` and the checkout, order and (with a secret) testing routes.
    enabled: bool = True
    #: ``haggler serve --simulation-secret``: when set, the simulated payment handler is offered (it
    #: takes no money), ``POST /testing/simulate-shipping/{order_id}`` exists for callers sending
    #: it in ``Simulation-Secret``, and the customers' data on file is used by naming it
    #: (:attr:`data_on_file`). Never set it on a store that takes real orders.
    simulation_secret: str | None = None
    #: Seconds to wait for a platform's profile or its webhook receiver.
    webhook_timeout_seconds: float = 2.0
    #: Deliveries of one order event before it is given up (UCP: businesses MUST retry).
    webhook_attempts: int = 3
    #: How long a fetched platform profile is trusted before it is fetched again.
    profile_cache_seconds: float = 300.0

    @property
    def private_urls_allowed(self) -> bool:
        """Whether platform profiles and webhooks on private or loopback addresses are reached: only
        by a test store (one with a simulation secret, which the conformance suite's local mocks
        need); a real store would otherwise let any platform make it call into its own network."""
        return self.simulation_secret is not None

    @property
    def data_on_file(self) -> bool:
        """Whether a buyer's email offers their saved addresses and an instrument's id pays with the
        token on file (``CheckoutSessions.on_file``): only on a test store, whose data set is the
        conformance suite's. A real store cannot tell that the caller is that customer (UCP's
        identity linking is not implemented here), so it never reveals a saved address nor charges
        an instrument on file."""
        return self.simulation_secret is not None

    def __post_init__(self) -> None:
        if self.simulation_secret is not None and len(self.simulation_secret) < 8:
            raise ValueError("--simulation-secret must be at least 8 characters")
        if self.webhook_attempts < 1:
            raise ValueError("webhook attempts must be at least 1")
