"""Wire protocols: one package each, thin adapters from a protocol's format onto the engine.

Every package reads the same way: ``routes`` (HTTP in and out, nothing else), its service
(what the protocol does, without HTTP), ``views`` (what crosses the wire: explicit
allow-lists), ``settings`` (what an operator sets). Signing, keys and canonical JSON are
``haggler.trust``'s; storage is ``haggler.storage``'s; no protocol keeps a private copy.
"""
