"""Trust: what lets a party check another's word without trusting its code.

- ``canonical``: RFC 8785 canonical JSON, the exact bytes that are hashed and signed.
- ``keys``: Ed25519 keys: the store's signing key on disk (load, create, rotate) and the base64
  text form the audit trail publishes a public key in (encode, decode).
- ``signatures``: checking an Ed25519 signature over exact bytes; ``Signer``, what signs.
- ``jws``: a detached JWS (unencoded payload, EdDSA) of exact bytes, and a public key as a JWK: what
  UCP's order webhooks are signed with and the store's UCP profile publishes.
- ``messages``: the market's signed JSON messages (spec 003): ``0x`` hex keys and signatures,
  signing and verifying a message (or a deal's two parties) over its canonical JSON.
- ``chain``: the hash chain over JSON events, and verification that names what changed.
- ``hashing``: how secrets we must recognise but never reveal (tokens, API keys) are stored.

Every protocol signs and verifies through these modules; none keeps a private copy.
"""
