"""ACP, the Agentic Commerce Protocol (release 2026-04-17): checkout sessions at the store's root
for agents holding the store's ACP key, the discount extension and the discovery document. Wire
shapes and ACP's rules only; pricing, stock, deals, payment and orders are the checkout core's
(``haggler/commerce``)."""
