"""UCP's AP2 mandates extension over real HTTP: a platform on loopback whose profile lists it with a
P-256 key, real SD-JWT+KB checkout mandates made with PyJWT, and the store's merchant authorization
checked with PyJWT and the published key. Each test names the section of ap2-mandates.md (or
overview.md) at v2026-01-11 whose MUST it holds the store to."""

from __future__ import annotations

from datetime import timedelta

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from sqlalchemy import select

from haggler.orders import order_for
from haggler.payments.handler import ChargeResult, PaymentOutcome
from haggler.storage.schema import commerce_inventory, orders

try:
    from tests.support.processors import Scripted
    from tests.support.sd_jwt import bind, issue, jwk
    from tests.support.ucp import AP2, Platform, headers, merchant_authorization_verifies, pay, ready_checkout
except ImportError:  # pragma: no cover
    from support.processors import Scripted  # type: ignore[no-redef]
    from support.sd_jwt import bind, issue, jwk  # type: ignore[no-redef]
    from support.ucp import (  # type: ignore[no-redef]
        AP2, Platform, headers, merchant_authorization_verifies, pay, ready_checkout)

PAID = ChargeResult(PaymentOutcome.SUCCEEDED, "ch_1")


@pytest.fixture
def ap2_platform():
    with Platform(ap2=True) as platform:
        yield platform


@pytest.fixture
def processor(ucp_store) -> Scripted:
    """Records every charge: a refused completion must leave it empty."""
    found = Scripted(*[PAID] * 4)
    ucp_store.app.state.ucp.sessions.handlers[found.id] = found
    return found


def _profile(store) -> dict:
    return store.http.get("/.well-known/ucp").json()


def _complete(store, platform, checkout_id: str, **ap2):
    return store.http.post(f"/checkout-sessions/{checkout_id}/complete", headers=headers(platform.profile_url),
                           json=pay(**({"ap2": ap2} if ap2 else {})))


def _stock(store, product_id: str) -> int:
    with store.app.state.ucp.db.read() as conn:
        return conn.execute(select(commerce_inventory.c.quantity)
                            .where(commerce_inventory.c.product_id == product_id)).scalar_one()


def _refused(store, processor, answer, checkout: dict, code: str, stock_before: int) -> None:
    """The completion refused with ``code``, and nothing charged, ordered or taken."""
    assert answer.status_code == 403, answer.text
    assert answer.json()["messages"][0]["code"] == code, answer.json()
    assert "nothing was charged" in answer.json()["detail"]
    assert processor.charges == []
    with store.app.state.ucp.db.read() as conn:
        assert conn.execute(select(orders.c.id)).all() == []
    again = store.http.get(f"/checkout-sessions/{checkout['id']}", headers=headers())
    assert again.json()["status"] == "ready_for_complete"
    assert _stock(store, checkout["line_items"][0]["item"]["id"]) == stock_before


# -- discovery and negotiation ----------------------------------------------------------------------


def test_the_profile_advertises_ap2_extending_checkout_with_an_es256_key(ucp_store):
    """"Business Profile Advertisement": ``dev.ucp.shopping.ap2_mandate`` in the capabilities,
    extending checkout, with the presentation format it reads; "Signature Algorithm" and "Signing
    Key Requirements": the key it signs with, ES256 on P-256, in ``signing_keys`` with a kid."""
    profile = _profile(ucp_store)
    ap2 = next(c for c in profile["ucp"]["capabilities"] if c["name"] == AP2)
    assert ap2 == {"name": AP2, "version": "2026-01-11", "spec": "https://ucp.dev/specification/ap2-mandates",
                   "schema": "https://ucp.dev/schemas/shopping/ap2_mandate.json",
                   "extends": "dev.ucp.shopping.checkout", "config": {"vp_formats_supported": {"dc+sd-jwt": {}}}}
    [key] = profile["signing_keys"]
    assert (key["kty"], key["crv"], key["alg"], key["use"]) == ("EC", "P-256", "ES256", "sig") and key["kid"]
    assert "d" not in key


def test_every_checkout_response_carries_a_merchant_authorization_the_published_key_verifies(
        ucp_store, ap2_platform, processor):
    """"Activation and Session Locking": with AP2 in the intersection the business MUST include
    ``ap2.merchant_authorization`` in all checkout responses; "Business Authorization": a detached
    JWS (``header..signature``) whose header is alg and kid, over the JCS of the checkout without
    ``ap2`` ("Canonicalization"), verified here by PyJWT with the key the profile publishes.
    overview.md, "Capability Declaration in Responses": AP2 is among the active capabilities."""
    profile = _profile(ucp_store)
    created = ready_checkout(ucp_store.http, "mug", 1, profile=ap2_platform.profile_url)
    path = f"/checkout-sessions/{created['id']}"
    updated = ucp_store.http.put(path, headers=headers(ap2_platform.profile_url),
                                 json={"buyer": {"email": "ada@example.com"}}).json()
    read = ucp_store.http.get(path, headers=headers(ap2_platform.profile_url)).json()
    done = _complete(ucp_store, ap2_platform, created["id"],
                     checkout_mandate=ap2_platform.mandate(read, ucp_store.base, ucp_store.clock())).json()
    other = ready_checkout(ucp_store.http, "mug", 1, profile=ap2_platform.profile_url)
    canceled = ucp_store.http.post(f"/checkout-sessions/{other['id']}/cancel",
                                   headers=headers(ap2_platform.profile_url), json={}).json()
    for body in (created, updated, read, done, canceled):
        assert set(body["ap2"]) == {"merchant_authorization"}
        assert merchant_authorization_verifies(profile, body), body["status"]
        assert jwt.get_unverified_header(body["ap2"]["merchant_authorization"]) == {
            "alg": "ES256", "kid": profile["signing_keys"][0]["kid"]}
        assert AP2 in {c["name"] for c in body["ucp"]["capabilities"]}
    assert done["status"] == "completed" and canceled["status"] == "canceled"
    changed = {**read, "totals": [{**t, "amount": t["amount"] - 1} for t in read["totals"]]}
    assert not merchant_authorization_verifies(profile, changed)


def test_without_ap2_in_the_intersection_a_checkout_is_as_before(ucp_store, platform, processor):
    """overview.md, "Intersection Algorithm": AP2 is active only when the platform lists it too,
    and an extension whose parent (checkout) the platform does not list is pruned. Such a checkout
    carries no ``ap2`` and completes without a mandate, as it always did."""
    with Platform(ap2=True) as orphan:
        orphan.capabilities = [AP2]  # AP2 without checkout: pruned
        for profile in (platform.profile_url, orphan.profile_url):
            checkout = ready_checkout(ucp_store.http, profile=profile)
            assert "ap2" not in checkout and AP2 not in {c["name"] for c in checkout["ucp"]["capabilities"]}
            done = _complete(ucp_store, platform, checkout["id"])
            assert done.status_code == 200 and done.json()["status"] == "completed" and "ap2" not in done.json()


def test_a_completion_without_a_mandate_is_refused_mandate_required(ucp_store, ap2_platform, processor):
    """"Activation and Session Locking" and "Business Verification", step 1: the business MUST NOT
    accept a complete_checkout that lacks ``ap2.checkout_mandate``, and MUST reject it with
    ``mandate_required``; nothing is charged."""
    checkout = ready_checkout(ucp_store.http, profile=ap2_platform.profile_url)
    before = _stock(ucp_store, "green_tea")
    _refused(ucp_store, processor, _complete(ucp_store, ap2_platform, checkout["id"]), checkout, "mandate_required",
             before)


def test_the_session_stays_locked_whatever_a_later_request_names(ucp_store, ap2_platform, platform, processor):
    """"Security Binding": once AP2 is negotiated the session is Security Locked, and neither party
    may revert to an unprotected checkout: an update or a completion whose ``UCP-Agent`` names a
    profile without AP2 still gets a signed checkout, and still needs the mandate."""
    checkout = ready_checkout(ucp_store.http, profile=ap2_platform.profile_url)
    before = _stock(ucp_store, "green_tea")
    updated = ucp_store.http.put(f"/checkout-sessions/{checkout['id']}", headers=headers(platform.profile_url),
                                 json={"buyer": {"email": "ada@example.com"}})
    assert "merchant_authorization" in updated.json()["ap2"]
    _refused(ucp_store, processor, _complete(ucp_store, platform, checkout["id"]), checkout, "mandate_required", before)


# -- a valid mandate --------------------------------------------------------------------------------


def test_a_completion_with_a_valid_mandate_is_charged_and_ordered(ucp_store, ap2_platform, processor):
    """"Business Verification", steps 2 to 5: the SD-JWT+KB verified with the platform profile's
    key (the trusted platform provider flow), its embedded checkout carrying the store's own valid
    merchant_authorization and the session's terms: one charge, one order, the mandate kept on it."""
    checkout = ready_checkout(ucp_store.http, "mug", 2, profile=ap2_platform.profile_url)
    mandate = ap2_platform.mandate(checkout, ucp_store.base, ucp_store.clock())
    done = _complete(ucp_store, ap2_platform, checkout["id"], checkout_mandate=mandate)
    assert done.status_code == 200, done.text
    assert done.json()["status"] == "completed" and len(processor.charges) == 1
    assert processor.charges[0].amount_cents == checkout["totals"][-1]["amount"]
    with ucp_store.app.state.ucp.db.read() as conn:
        assert order_for(conn, session_id=checkout["id"]).details["mandate"] == mandate


# -- refused mandates -------------------------------------------------------------------------------


def _tamper_total(checkout: dict) -> dict:
    return {**checkout, "totals": [{**t, "amount": 1} if t["type"] == "total" else t for t in checkout["totals"]]}


def _forge_authorization(checkout: dict) -> dict:
    """The checkout with a merchant_authorization made by a key that is not the store's, under the
    store's kid (what a platform inventing terms would have to do)."""
    forger = ec.generate_private_key(ec.SECP256R1())
    kid = jwt.get_unverified_header(checkout["ap2"]["merchant_authorization"])["kid"]
    compact = jwt.encode({"whatever": 1}, forger, algorithm="ES256", headers={"kid": kid, "typ": None})
    header, _, signature = compact.split(".")
    return {**checkout, "ap2": {"merchant_authorization": f"{header}..{signature}"}}


@pytest.mark.parametrize("case, code", [
    ("signed by a key the platform does not publish", "mandate_invalid_signature"),
    ("its kid names no key of the platform", "agent_missing_key"),
    ("the platform's profile has no signing_keys", "agent_missing_key"),
    ("expired", "mandate_expired"),
    ("bound by a key that is not the holder's", "mandate_invalid_signature"),
    ("bound for another store", "mandate_invalid_signature"),
    ("the checkout's terms tampered with", "merchant_authorization_invalid"),
    ("a forged merchant_authorization", "merchant_authorization_invalid"),
    ("the merchant_authorization of another checkout", "merchant_authorization_invalid"),
    ("another checkout altogether", "mandate_scope_mismatch"),
    ("no merchant_authorization", "merchant_authorization_missing"),
])
def test_a_mandate_that_does_not_verify_is_refused_and_nothing_charged(ucp_store, ap2_platform, processor, case, code):
    """"Business Verification": "If a public key cannot be resolved, or if the signature is invalid,
    the business MUST return an error" ("Signing Key Requirements"); the mandate's signature, key
    binding and expiry (step 2), the store's own merchant_authorization on the checkout it embeds
    (step 4), and that checkout being this one (step 5) are each checked, and each failure is named
    by its error code ("Error Codes"), before anything is charged."""
    if case == "the platform's profile has no signing_keys":
        ap2_platform.signing_keys = []
    checkout = ready_checkout(ucp_store.http, profile=ap2_platform.profile_url)
    other = ready_checkout(ucp_store.http, "teapot", 1, profile=ap2_platform.profile_url)
    before = _stock(ucp_store, "green_tea")
    now = ucp_store.clock()
    stranger = ec.generate_private_key(ec.SECP256R1())
    if case == "its kid names no key of the platform":
        ap2_platform.kid = "rotated_away"
    embedded = {"the checkout's terms tampered with": _tamper_total(checkout),
                "a forged merchant_authorization": _forge_authorization(checkout),
                "the merchant_authorization of another checkout": {**checkout, "ap2": other["ap2"]},
                "another checkout altogether": other,
                "no merchant_authorization": {k: v for k, v in checkout.items() if k != "ap2"}}.get(case, checkout)
    mandate = ap2_platform.mandate(
        embedded, ucp_store.base, now,
        key=stranger if case == "signed by a key the platform does not publish" else None,
        holder=stranger if case == "bound by a key that is not the holder's" else None,
        audience="https://another-store.example/.well-known/ucp" if case == "bound for another store" else None)
    if case == "expired":
        ucp_store.clock.advance(minutes=16)
    answer = _complete(ucp_store, ap2_platform, checkout["id"], checkout_mandate=mandate)
    _refused(ucp_store, processor, answer, checkout, code, before)


def test_a_mandate_that_discloses_no_checkout_is_refused_mandate_scope_mismatch(ucp_store, ap2_platform, processor):
    """"Mandate Structure": the checkout mandate MUST contain the full checkout response; one that
    verifies but discloses none is bound to no checkout (``mandate_scope_mismatch``)."""
    checkout = ready_checkout(ucp_store.http, profile=ap2_platform.profile_url)
    before = _stock(ucp_store, "green_tea")
    at = int(ucp_store.clock().timestamp())
    claims = {"iat": at, "exp": at + 600, "cnf": {"jwk": jwk(ap2_platform.holder)}}
    mandate = bind(issue(claims, ap2_platform.key, ap2_platform.kid, disclosed={"checkout_id": checkout["id"]}),
                   ap2_platform.holder, aud=f"{ucp_store.base}/.well-known/ucp", iat=at)
    answer = _complete(ucp_store, ap2_platform, checkout["id"], checkout_mandate=mandate)
    _refused(ucp_store, processor, answer, checkout, "mandate_scope_mismatch", before)


def test_a_checkout_changed_after_the_mandate_is_refused_mandate_scope_mismatch(ucp_store, ap2_platform, processor):
    """"Verify Terms Match": the embedded checkout's terms (id, totals, line items) must match the
    session as it stands. Here the store signed both checkouts, but the quantity changed after the
    user authorized the first: ``mandate_scope_mismatch``, naming what changed, nothing charged;
    a mandate over the checkout as it now is completes it."""
    checkout = ready_checkout(ucp_store.http, "mug", 1, profile=ap2_platform.profile_url)
    mandate = ap2_platform.mandate(checkout, ucp_store.base, ucp_store.clock())
    changed = ucp_store.http.put(f"/checkout-sessions/{checkout['id']}", headers=headers(ap2_platform.profile_url),
                                 json={"line_items": [{"id": checkout["line_items"][0]["id"],
                                                       "item": {"id": "mug"}, "quantity": 2}]}).json()
    before = _stock(ucp_store, "mug")
    answer = _complete(ucp_store, ap2_platform, checkout["id"], checkout_mandate=mandate)
    _refused(ucp_store, processor, answer, changed, "mandate_scope_mismatch", before)
    assert "line_items, totals" in answer.json()["detail"]
    fresh = ap2_platform.mandate(changed, ucp_store.base, ucp_store.clock())
    assert _complete(ucp_store, ap2_platform, checkout["id"], checkout_mandate=fresh).json()["status"] == "completed"


def test_the_platform_key_is_the_creators_not_the_completers(ucp_store, ap2_platform, processor):
    """"Signing Key Requirements" (platform provider flow: the key is in the platform profile's
    ``signing_keys``): the keys are those of the profile that created the checkout, read once then.
    Another platform that learned the session's id and completes naming its own profile cannot
    pass a mandate signed with its own key."""
    with Platform(ap2=True) as intruder:
        checkout = ready_checkout(ucp_store.http, profile=ap2_platform.profile_url)
        before = _stock(ucp_store, "green_tea")
        intruder.kid = ap2_platform.kid
        intruder.signing_keys = [jwk(intruder.key, intruder.kid)]
        mandate = intruder.mandate(checkout, ucp_store.base, ucp_store.clock())
        answer = _complete(ucp_store, intruder, checkout["id"], checkout_mandate=mandate)
        _refused(ucp_store, processor, answer, checkout, "mandate_invalid_signature", before)
        assert intruder.profile_reads == 0 and ap2_platform.profile_reads == 1
