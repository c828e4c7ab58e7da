"""The protocol-neutral core of agentic checkout (issue 31).

UCP today and ACP next speak different wire shapes over the same business: products with stock,
discount codes, promotions, shipping rates, customers with saved addresses, checkout sessions that
are priced the same way, and a completion that charges once through a payment handler and places
one order (``haggler/orders.py``). That business lives here; each protocol package under
``haggler/protocols/`` only reads its requests into these types and writes them back out.

- ``merchant_data``: the merchant's tables, loaded from a UCP-style CSV data set, and the reads.
- ``pricing``: line totals, discounts, shipping options and totals (pure).
- ``sessions``: checkout sessions (stored), and completing one: reserve, charge, place.
"""
