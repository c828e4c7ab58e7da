"""Trust: what lets a party check another's word without trusting its code.

- ``canonical``: RFC 8785 canonical JSON, the exact bytes that are hashed and signed.
- ``keys``: the store's signing keys on disk (load, create, rotate), Ed25519 for the audit trail
  and P-256 for UCP, and the base64 text form the audit trail publishes a public key in.
- ``signatures``: checking an Ed25519 signature over exact bytes; ``Signer``, what signs.
- ``jws``: ES256 JWS: detached signatures of exact bytes with the store's P-256 key and that key
  as a JWK (UCP's order webhooks and AP2 merchant authorization), and a compact JWS verified
  against an EC JWK (ES256/384/512).
- ``sd_jwt``: an SD-JWT+KB presentation (RFC 9901) verified into its disclosed claims: AP2's
  checkout mandate.
- ``messages``: the market's signed JSON messages (spec 003): ``0x`` hex keys and signatures,
  signing and verifying a message (or a deal's two parties) over its canonical JSON.
- ``chain``: the hash chain over JSON events, and verification that names what changed.
- ``hashing``: how secrets we must recognise but never reveal (tokens, API keys) are stored.

Every protocol signs and verifies through these modules; none keeps a private copy.
"""
