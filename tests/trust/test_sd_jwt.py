"""trust/sd_jwt.py: SD-JWT+KB presentations made with PyJWT (tests/support/sd_jwt.py), each test
naming the section of RFC 9901 whose rule it holds the verifier to."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from haggler.trust.sd_jwt import Expired, SdJwtError, UnknownKey, verify_presentation

try:
    from tests.support.sd_jwt import b64url, bind, digest, disclosure, issue, jwk
except ImportError:  # pragma: no cover
    from support.sd_jwt import b64url, bind, digest, disclosure, issue, jwk  # type: ignore[no-redef]

NOW = datetime(2026, 11, 22, 12, 0, tzinfo=timezone.utc)
T = int(NOW.timestamp())
AUD = "https://store.example/.well-known/ucp"
ISSUER = ec.generate_private_key(ec.SECP256R1())
HOLDER = ec.generate_private_key(ec.SECP256R1())
KEYS = [jwk(ISSUER, "platform_1")]


def _claims(**extra):
    return {"iat": T - 60, "exp": T + 600, "cnf": {"jwk": jwk(HOLDER)}, **extra}


def _present(claims=None, disclosed=None, **binding):
    sd_jwt = issue(_claims() if claims is None else claims, ISSUER, "platform_1",
                   disclosed={"checkout": {"id": "chk_1"}} if disclosed is None else disclosed)
    return bind(sd_jwt, HOLDER, aud=binding.pop("aud", AUD), iat=binding.pop("iat", T), **binding)


def _verify(token, keys=KEYS, now=NOW):
    return verify_presentation(token, keys, audience=AUD, now=now)


def _signed(payload: dict, disclosures: list[str], key=ISSUER, kid="platform_1") -> str:
    """A presentation of a hand-made payload (nested digests), bound by the holder."""
    token = jwt.encode(payload, key, algorithm="ES256", headers={"kid": kid})
    return bind(token + "~" + "".join(f"{d}~" for d in disclosures), HOLDER, aud=AUD, iat=T)


def test_the_disclosed_claims_come_back_and_the_digests_go():
    """7.1: each digest replaced by its disclosure's claim, decoys dropped, _sd and _sd_alg removed."""
    claims = _verify(_present())
    assert claims["checkout"] == {"id": "chk_1"} and "_sd" not in claims and "_sd_alg" not in claims
    assert claims["cnf"]["jwk"]["crv"] == "P-256" and claims["exp"] == T + 600


def test_nested_and_array_element_disclosures_are_resolved():
    """4.2.1, 4.2.2 and 7.1 step 3: digests inside disclosed values and ``{"...": digest}`` array
    elements, recursively; an element whose disclosure is not sent is dropped."""
    street = disclosure("street", "9 Quay Rd")
    item = disclosure({"id": "li_1"})
    hidden = disclosure({"id": "li_2"})
    address = disclosure("address", {"_sd": [digest(street)], "country": "US"})
    payload = {**_claims(), "_sd": [digest(address)], "_sd_alg": "sha-256",
               "items": [{"...": digest(item)}, {"...": digest(hidden)}, "plain"]}
    claims = _verify(_signed(payload, [street, item, address]))
    assert claims["address"] == {"country": "US", "street": "9 Quay Rd"}
    assert claims["items"] == [{"id": "li_1"}, "plain"]


@pytest.mark.parametrize("why, change", [
    ("a disclosure altered after issuance", lambda t: t.replace(t.split("~")[1], disclosure("checkout", {"id": "x"}))),
    ("the issuer's payload altered", lambda t: t.split(".")[0] + "." + b64url(b'{"exp":1}') + "." +
     t.split(".", 2)[2]),
])
def test_anything_changed_after_issuance_is_refused(why, change):
    """7.1: the issuer's signature covers the digests, so no claim can be changed or added."""
    with pytest.raises(SdJwtError):
        _verify(change(_present()))


def test_a_disclosure_no_digest_references_is_refused():
    """7.1 step 4: every disclosure must be referenced by a digest in the issuer-signed JWT."""
    sd_jwt = issue(_claims(), ISSUER, "platform_1", disclosed={"checkout": {"id": "chk_1"}})
    with pytest.raises(SdJwtError, match="referenced by no digest"):
        _verify(bind(sd_jwt + disclosure("extra", 1) + "~", HOLDER, aud=AUD, iat=T))


def test_a_digest_met_twice_or_a_disclosure_sent_twice_is_refused():
    """7.1 step 3: a digest that appears more than once, and a disclosure repeated, are refused."""
    one = disclosure("a", 1)
    with pytest.raises(SdJwtError, match="more than once"):
        _verify(_signed({**_claims(), "_sd": [digest(one), digest(one)]}, [one]))
    with pytest.raises(SdJwtError, match="sent twice"):
        _verify(_signed({**_claims(), "_sd": [digest(one)]}, [one, one]))


@pytest.mark.parametrize("payload_of, text, match", [
    (lambda d: {"_sd": [d]}, disclosure({"v": 1}), "not \\[salt, name, value\\]"),
    (lambda d: {"items": [{"...": d}]}, disclosure("name", 1), "not \\[salt, value\\]"),
    (lambda d: {"_sd": [d]}, disclosure("_sd", 1), "reserved"),
    (lambda d: {"_sd": [d]}, disclosure("exp", 1), "already a claim"),
    (lambda d: {"_sd": [d]}, b64url(b'{"not": "an array"}'), "not an array"),
])
def test_a_disclosure_of_the_wrong_shape_or_name_is_refused(payload_of, text, match):
    """4.2.1, 4.2.2, 7.1 step 3: an object property's disclosure has three elements and a name that
    is neither ``_sd`` nor ``...`` nor already a claim; an array element's has two."""
    with pytest.raises(SdJwtError, match=match):
        _verify(_signed({**_claims(), **payload_of(digest(text))}, [text]))


def test_only_sha_256_disclosure_digests_are_supported():
    """4.1.1: ``_sd_alg`` names the hash; only sha-256 is implemented here."""
    token = jwt.encode({**_claims(), "_sd_alg": "sha-512"}, ISSUER, algorithm="ES256", headers={"kid": "platform_1"})
    with pytest.raises(SdJwtError, match="sha-512"):
        _verify(bind(token + "~", HOLDER, aud=AUD, iat=T))


def test_the_issuer_key_is_the_one_its_kid_names():
    """7.1 step 2: the issuer-signed JWT verifies with the issuer's key; a kid naming none of the
    keys given, or no keys at all, is UnknownKey; a key that did not sign it fails."""
    with pytest.raises(UnknownKey, match="names none"):
        _verify(_present(), keys=[jwk(ISSUER, "another")])
    with pytest.raises(UnknownKey, match="no signing_keys"):
        _verify(_present(), keys=[])
    with pytest.raises(SdJwtError, match="does not verify"):
        _verify(_present(), keys=[jwk(ec.generate_private_key(ec.SECP256R1()), "platform_1")])
    hmac = jwt.encode(_claims(), "k" * 32, algorithm="HS256", headers={"kid": "platform_1"})
    with pytest.raises(SdJwtError, match="not one of ES256"):
        _verify(bind(hmac + "~", HOLDER, aud=AUD, iat=T))


def test_expiry_is_required_and_enforced():
    """7.1 step 5: the SD-JWT is checked for exp (required here: a mandate must expire), iat, nbf."""
    with pytest.raises(Expired, match="expired"):
        _verify(_present(), now=NOW + timedelta(minutes=10))
    with pytest.raises(Expired, match="no exp"):
        _verify(_present(claims={k: v for k, v in _claims().items() if k != "exp"}))
    with pytest.raises(SdJwtError, match="nbf is in the future"):
        _verify(_present(claims=_claims(nbf=T + 3600)))


def test_the_key_binding_is_required_and_checked():
    """7.3: a KB-JWT with typ kb+jwt, signed by the cnf key, for this audience, with a nonce, a
    recent iat, and the sd_hash of exactly the presentation it ends."""
    sd_jwt = issue(_claims(), ISSUER, "platform_1", disclosed={"checkout": {"id": "chk_1"}})
    with pytest.raises(SdJwtError, match="no key binding"):
        _verify(sd_jwt)
    with pytest.raises(SdJwtError, match="typ"):
        _verify(bind(sd_jwt, HOLDER, aud=AUD, iat=T, typ="JWT"))
    with pytest.raises(SdJwtError, match="key binding JWT's signature does not verify"):
        _verify(bind(sd_jwt, ec.generate_private_key(ec.SECP256R1()), aud=AUD, iat=T))
    with pytest.raises(SdJwtError, match="aud"):
        _verify(bind(sd_jwt, HOLDER, aud="https://elsewhere.example", iat=T))
    with pytest.raises(SdJwtError, match="nonce"):
        _verify(bind(sd_jwt, HOLDER, aud=AUD, iat=T, nonce=""))
    for stale in (T - 11 * 60, T + 3600):
        with pytest.raises(SdJwtError, match="iat"):
            _verify(bind(sd_jwt, HOLDER, aud=AUD, iat=stale))
    dropped = sd_jwt.split("~")[0] + "~"  # the disclosure left out after the holder bound the whole
    with pytest.raises(SdJwtError, match="sd_hash"):
        _verify(bind(dropped, HOLDER, aud=AUD, iat=T, sd_hash=digest(sd_jwt)))
    no_cnf = issue({k: v for k, v in _claims().items() if k != "cnf"}, ISSUER, "platform_1")
    with pytest.raises(SdJwtError, match="cnf.jwk"):
        _verify(bind(no_cnf, HOLDER, aud=AUD, iat=T))
    assert _verify(bind(sd_jwt, HOLDER, aud=[AUD, "other"], iat=T - 9 * 60))["checkout"] == {"id": "chk_1"}
