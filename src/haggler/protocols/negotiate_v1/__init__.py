"""negotiate.v1: discovery, catalog and chat over plain GETs (spec 000).

- ``routes``: the GET endpoints (and the optional POSTs of §5); the pages for people (the storefront,
  its haggling widget, a deal's checkout) are ``haggler.web``'s.
- ``service``: ``ChatService``: start, say, history, idle sweep, one database transaction a turn.
- ``views``: the descriptor, product, offer and deal as they cross the wire.
- ``settings``: ``StoreLimits``, the limits the descriptor publishes and the service enforces.
"""
