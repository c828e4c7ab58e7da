"""agents.json: the store's capability manifest, sessions, cart and checkout, and the signed audit trail (spec 001).

- ``routes``: the manifest, session, audit, checkout-page and capability endpoints.
- ``service``: ``AgentsService``, one call path for every capability, built on ``sessions``
  (sessions and the rate limit), ``shelf`` (search, browse, detail), ``cart`` (cart and
  checkout) and ``trail`` (the audit trail's storage); ``capabilities`` declares them all.
- ``views``: the manifest; ``audit``: the signed artifact's fields, built and verified with ``haggler.trust``.
- ``settings``: ``AgentsSettings``.
- ``validate``, ``schema``: ``haggler validate-manifest``, for any site.
"""
