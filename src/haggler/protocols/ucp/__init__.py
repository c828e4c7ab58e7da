"""UCP, the Universal Commerce Protocol (version 2026-01-11), merchant side: the discovery profile
at ``/.well-known/ucp``, checkout sessions with the fulfillment, discount and buyer-consent
extensions, orders and their webhooks, payment handlers and the AP2 mandates extension (``ap2.py``).

Only UCP's wire shapes live here; the checkout business is ``haggler/commerce`` (shared with ACP),
the orders ``haggler/orders.py`` (shared with every door), the charging ``haggler/payments``.
"""
