"""SD-JWT+KB presentations (RFC 9901) made the way a platform makes them, with PyJWT (a JOSE
implementation that is not the store's) and ``cryptography``'s ECDSA keys: an issuer-signed JWT
whose selectively disclosable claims are digests, the disclosures, and a key binding JWT by the
holder's key over the whole."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from collections.abc import Mapping
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def digest(text: str) -> str:
    """RFC 9901, 4.2.3: base64url SHA-256 of a disclosure's (or a presentation's) ASCII text."""
    return b64url(hashlib.sha256(text.encode("ascii")).digest())


def disclosure(*content: Any) -> str:
    """``[salt, name, value]`` (a property) or ``[salt, value]`` (an array element), encoded."""
    return b64url(json.dumps([b64url(secrets.token_bytes(16)), *content]).encode("utf-8"))


def jwk(key: ec.EllipticCurvePrivateKey, kid: str | None = None) -> dict[str, Any]:
    """The public JWK of ``key``, with ``kid`` when given."""
    found = jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {**found, "kid": kid} if kid else found


def issue(claims: Mapping[str, Any], key: ec.EllipticCurvePrivateKey, kid: str, *,
          disclosed: Mapping[str, Any] | None = None, decoys: int = 2, alg: str = "ES256") -> str:
    """An SD-JWT ending in ``~``: ``claims`` in the clear, each of ``disclosed`` as a disclosure
    whose digest is in the top-level ``_sd`` (with ``decoys`` digests that match none)."""
    disclosures = [disclosure(name, value) for name, value in (disclosed or {}).items()]
    hidden = sorted([digest(d) for d in disclosures] + [b64url(secrets.token_bytes(32)) for _ in range(decoys)])
    payload = {**claims, "_sd": hidden, "_sd_alg": "sha-256"}
    token = jwt.encode(payload, key, algorithm=alg, headers={"kid": kid, "typ": "dc+sd-jwt"})
    return token + "~" + "".join(f"{d}~" for d in disclosures)


def bind(sd_jwt: str, holder: ec.EllipticCurvePrivateKey, *, aud: str, iat: int, nonce: str = "n-0S6_WzA2Mj",
         typ: str = "kb+jwt", sd_hash: str | None = None) -> str:
    """The presentation: ``sd_jwt`` (ending in ``~``) and a key binding JWT by ``holder``."""
    claims = {"iat": iat, "aud": aud, "nonce": nonce, "sd_hash": sd_hash or digest(sd_jwt)}
    return sd_jwt + jwt.encode(claims, holder, algorithm="ES256", headers={"typ": typ})
