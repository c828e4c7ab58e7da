"""haggler: let AI agents negotiate commerce with each other.

The negotiation core lives in :mod:`haggler.engine` (pure, no I/O); wire protocols in
:mod:`haggler.protocols`; the store's deterministic merchant agent in :mod:`haggler.agents`.
"""

__version__ = "0.2.0"
