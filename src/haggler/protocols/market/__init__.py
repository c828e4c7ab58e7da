"""The agent-native market (spec 003), served under ``/market``: signed structured messages
(listings, wanted ads, contact, protocol agreement, sealed bids, instant match, offers, deal
confirmations, double-auction orders) and owner mandates that the framework enforces.

Amounts are integer minor units (cents) inside; the wire carries the spec's numbers in major
units (``"askPrice": 180`` is 18000 cents), converted at the edge by ``haggler.money``."""
