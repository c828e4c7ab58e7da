"""trust/jws.py checked by PyJWT, a JOSE implementation that is not ours: the store's key as a JWK,
and a detached JWS of exact bytes with an unencoded payload (RFC 7797)."""

from __future__ import annotations

import jwt
import pytest

from haggler.trust.jws import public_jwk, sign_detached
from haggler.trust.keys import SigningKeys, key_id


def _verified(signature: str, jwk: dict[str, str], payload: bytes) -> bytes:
    return jwt.PyJWS().decode_complete(signature, key=jwt.PyJWK(jwk), algorithms=["EdDSA"],
                                       detached_payload=payload)["payload"]


def test_a_detached_signature_verifies_with_the_published_jwk_and_only_over_its_bytes(tmp_path):
    keys = SigningKeys(tmp_path)
    jwk = public_jwk(keys.public_key_b64)
    assert jwk["kid"] == key_id(keys.public_key_b64) and (jwk["kty"], jwk["crv"]) == ("OKP", "Ed25519")
    payload = b'{"b":1,"a":"caf\xc3\xa9"}'
    signature = sign_detached(keys, payload)
    _, empty, _ = signature.split(".")
    assert empty == "" and jwt.get_unverified_header(signature) == {
        "alg": "EdDSA", "b64": False, "crit": ["b64"], "kid": jwk["kid"]}
    assert _verified(signature, jwk, payload) == payload
    with pytest.raises(jwt.InvalidSignatureError):
        _verified(signature, jwk, payload.replace(b"1", b"2"))
    with pytest.raises(jwt.InvalidSignatureError):
        _verified(signature, public_jwk(SigningKeys(tmp_path / "other").public_key_b64), payload)
