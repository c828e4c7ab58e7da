"""trust/jws.py checked against PyJWT, a JOSE implementation that is not ours: the store's P-256 key
as a JWK, detached signatures of exact bytes (unencoded, RFC 7797; encoded, RFC 7515 Appendix F),
and our verifier on what PyJWT signs, refusing every algorithm but ES256/384/512 and a key on
another curve."""

from __future__ import annotations

import base64

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from haggler.trust.jws import JwsError, attach, ec_public_key, parse_compact, public_jwk, sign_detached, verify
from haggler.trust.keys import P256, SigningKeys, key_id

PAYLOAD = b'{"b":1,"a":"caf\xc3\xa9"}'


def _verified(signature: str, jwk: dict[str, str], payload: bytes) -> bytes:
    return jwt.PyJWS().decode_complete(signature, key=jwt.PyJWK(jwk), algorithms=["ES256"],
                                       detached_payload=payload)["payload"]


def _jwk(key: ec.EllipticCurvePrivateKey, kid: str = "k1") -> dict[str, str]:
    return {**jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": kid}


def test_an_unencoded_detached_signature_verifies_with_the_published_jwk_and_only_over_its_bytes(tmp_path):
    keys = SigningKeys(tmp_path, P256)
    jwk = public_jwk(keys)
    assert jwk["kid"] == key_id(keys.public_key_b64)
    assert (jwk["kty"], jwk["crv"], jwk["alg"]) == ("EC", "P-256", "ES256")
    signature = sign_detached(keys, PAYLOAD, encoded=False)
    _, empty, _ = signature.split(".")
    assert empty == "" and jwt.get_unverified_header(signature) == {
        "alg": "ES256", "b64": False, "crit": ["b64"], "kid": jwk["kid"]}
    assert _verified(signature, jwk, PAYLOAD) == PAYLOAD
    with pytest.raises(jwt.InvalidSignatureError):
        _verified(signature, jwk, PAYLOAD.replace(b"1", b"2"))
    with pytest.raises(jwt.InvalidSignatureError):
        _verified(signature, public_jwk(SigningKeys(tmp_path / "other", P256)), PAYLOAD)


def test_an_encoded_detached_signature_is_a_jws_of_the_payload_once_attached(tmp_path):
    """RFC 7515 Appendix F: putting the base64url payload between the dots gives a compact JWS
    that PyJWT verifies; the header is exactly alg and kid."""
    keys = SigningKeys(tmp_path, P256)
    signature = sign_detached(keys, PAYLOAD, encoded=True)
    assert jwt.get_unverified_header(signature) == {"alg": "ES256", "kid": public_jwk(keys)["kid"]}
    compact = attach(signature, PAYLOAD)
    assert jwt.PyJWS().decode(compact, key=jwt.PyJWK(public_jwk(keys)), algorithms=["ES256"]) == PAYLOAD
    verify(parse_compact(compact), public_jwk(keys))  # ours agrees
    with pytest.raises(JwsError, match="does not verify"):
        verify(parse_compact(attach(signature, PAYLOAD + b" ")), public_jwk(keys))
    with pytest.raises(JwsError, match="not a detached JWS"):
        attach(compact, PAYLOAD)


@pytest.mark.parametrize("alg, curve", [("ES256", ec.SECP256R1()), ("ES384", ec.SECP384R1()),
                                        ("ES512", ec.SECP521R1())])
def test_what_pyjwt_signs_with_each_ecdsa_algorithm_verifies(alg, curve):
    key = ec.generate_private_key(curve)
    token = jwt.encode({"a": 1}, key, algorithm=alg)
    verify(parse_compact(token), _jwk(key))
    other = ec.generate_private_key(curve)
    with pytest.raises(JwsError, match="does not verify"):
        verify(parse_compact(token), _jwk(other))


def test_no_algorithm_but_ecdsa_on_the_keys_own_curve_is_accepted():
    key = ec.generate_private_key(ec.SECP256R1())
    for token in (jwt.encode({"a": 1}, "secret" * 6, algorithm="HS256"),
                  jwt.encode({"a": 1}, None, algorithm="none") + "AA"):
        with pytest.raises(JwsError, match="is not one of ES256, ES384, ES512"):
            verify(parse_compact(token), _jwk(key))
    p384 = ec.generate_private_key(ec.SECP384R1())
    with pytest.raises(JwsError, match="is ES384 but the key"):
        verify(parse_compact(jwt.encode({"a": 1}, p384, algorithm="ES384")), _jwk(key))


def test_a_jwk_must_be_a_full_point_on_its_curve():
    jwk = _jwk(ec.generate_private_key(ec.SECP256R1()))
    assert ec_public_key(jwk).curve.name == "secp256r1"
    short = {**jwk, "x": jwk["x"][:-3]}
    with pytest.raises(JwsError, match="32 bytes"):
        ec_public_key(short)
    off_curve = {**jwk, "y": base64.urlsafe_b64encode(b"\x01" * 32).rstrip(b"=").decode()}
    with pytest.raises(JwsError, match="not a point on P-256"):
        ec_public_key(off_curve)
    with pytest.raises(JwsError, match="not an EC JWK"):
        ec_public_key({"kty": "OKP", "crv": "Ed25519", "x": jwk["x"]})
