"""The customers' data on file — saved addresses, payment instruments — is used by naming it (an
email, an instrument's id) on a test store only, over real HTTP. Nothing in UCP 2026-01-11's REST
binding proves the caller is that customer (identity-linking.md is not implemented here), so a real
store reveals no saved address to an email and charges no instrument on file without a credential."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from haggler.payments.handler import ChargeResult, PaymentOutcome
from haggler.storage.schema import commerce_addresses

try:
    from tests.support.processors import Scripted
    from tests.support.ucp import create_body, headers, pay, ready_checkout
except ImportError:  # pragma: no cover
    from support.processors import Scripted  # type: ignore[no-redef]
    from support.ucp import create_body, headers, pay, ready_checkout  # type: ignore[no-redef]

STRANGER = "https://stranger.example/p.json"
ANAS_PLACE = {"street_address": "1 Elm St", "address_locality": "Portland", "address_region": "OR",
              "postal_code": "97201", "address_country": "US"}


def destinations(store, fulfillment: dict) -> list | None:
    body = create_body("mug", 1, buyer={"email": "ana@example.com"}, fulfillment=fulfillment)
    answer = store.http.post("/checkout-sessions", headers=headers(STRANGER), json=body)
    assert answer.status_code == 201, answer.text
    return answer.json()["fulfillment"]["methods"][0]["destinations"]


def saved_addresses(store) -> int:
    with store.app.state.ucp.db.read() as conn:
        return conn.execute(select(func.count()).select_from(commerce_addresses)).scalar_one()


def test_a_test_store_offers_a_known_customers_saved_addresses(ucp_store):
    """What the conformance suite's data expects of a test store (fulfillment_test.py: a known
    customer's addresses are offered, the same place sent again is the saved address)."""
    assert [d["id"] for d in destinations(ucp_store, {"methods": [{"type": "shipping"}]})] == ["a_home", "a_work"]
    sent = {"methods": [{"type": "shipping", "destinations": [ANAS_PLACE]}]}
    assert [d["id"] for d in destinations(ucp_store, sent)] == ["a_home"]


def test_a_real_store_reveals_no_saved_address_to_an_email(make_ucp_store):
    """Only an email is sent: no destination is offered, and Ana's street is nowhere in the answer.
    An address sent for her email is neither matched against hers (whose id would tell the sender
    that she lives there) nor saved under her email."""
    store = make_ucp_store(secret=None)
    before = saved_addresses(store)
    assert destinations(store, {"methods": [{"type": "shipping"}]}) is None
    sent = {"methods": [{"type": "shipping", "destinations": [ANAS_PLACE]}]}
    [given] = destinations(store, sent)
    assert given["id"].startswith("dest_") and given["street_address"] == "1 Elm St"
    assert saved_addresses(store) == before


@pytest.mark.parametrize("secret", ["test-simulation-secret", None], ids=["test store", "real store"])
def test_an_instrument_on_file_pays_without_a_credential_on_a_test_store_only(make_ucp_store, secret):
    """A completion naming ``card_ok`` (on file) and carrying no credential: a test store charges the
    token on file, as the conformance suite's data expects; a real store refuses it, 400, and
    charges nothing, while the same instrument with its credential goes through."""
    processor = Scripted(ChargeResult(PaymentOutcome.SUCCEEDED, "ch_1"))
    store = make_ucp_store(secret=secret, payment_handlers=(processor,))
    checkout = ready_checkout(store.http, "mug", 1, profile=STRANGER)
    path = f"/checkout-sessions/{checkout['id']}/complete"
    named = {"payment_data": {"id": "card_ok", "handler_id": processor.id, "type": "card"}}
    answer = store.http.post(path, headers=headers(STRANGER), json=named)
    if secret is not None:
        assert answer.status_code == 200, answer.text
        assert [c.credential for c in processor.charges] == [{"type": "token", "token": "success_token"}]
        return
    assert answer.status_code == 400, answer.text
    assert "carries no credential" in answer.json()["detail"] and "on file" in answer.json()["detail"]
    assert processor.charges == []
    assert store.http.get(f"/checkout-sessions/{checkout['id']}", headers=headers()).json()["status"] == \
        "ready_for_complete"
    assert store.http.post(path, headers=headers(STRANGER), json=pay()).status_code == 200
