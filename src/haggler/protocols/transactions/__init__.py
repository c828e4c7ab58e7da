"""The transactions exchange (spec 004): agents, wallets, services and negotiated transactions under /v1.

- ``routes``: ``Exchange``, the /v1 API: authentication, ``Idempotency-Key`` (``idempotency``),
  one database transaction a request, the offer-expiry sweep; ``fields`` checks request fields.
- ``service``: transactions and their negotiation on the engine; ``accounts`` (agents, API
  keys, services) and ``ledger`` (wallets, holds, the only code that moves money) beside it.
- ``views``: services, transactions and negotiation messages as they cross the wire.
- ``settings``: ``ExchangeSettings``.
"""
