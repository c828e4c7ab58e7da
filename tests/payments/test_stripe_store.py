"""A store on Stripe, end to end over real HTTP: ``haggler serve`` as an operator runs it, with its
Stripe key and API base in its environment, the API base being a local fake of Stripe's API
(tests/support/fake_stripe.py) that the real SDK in the store talks to. A buyer's agent pays a UCP
checkout with a PaymentMethod and an ACP checkout with a shared payment token granted to the store;
a UCP buyer asked for 3-D Secure goes through the store's continue_url page to Stripe's and back.

The declarations are checked against the protocols' own schemas: ACP's OpenAPI document and its
payment handler RFC's card config schema (vendored, tests/protocols/acp/contract), UCP's official
models of its 2026-01-11 schemas (the conformance suite's SDK, where the workspace has it) and the
handler's own config schema (docs/schemas/org.haggler.stripe.json)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
from sqlalchemy import select

from haggler.catalog import load_catalog
from haggler.orders import Order, list_orders
from haggler.payments.stripe_handler import ACQUIRERS_ENV, API_BASE_ENV, KEY_ENV
from haggler.storage.database import open_database
from haggler.storage.schema import commerce_inventory, deal_redemptions

try:
    from tests.support import acp, ucp
    from tests.support.checkout import close_a_deal
    from tests.support.fake_stripe import ACCOUNT_ID, API_KEY, FakeStripe
    from tests.support.servers import ProcessServer
except ImportError:  # pragma: no cover
    from support import acp, ucp  # type: ignore[no-redef]
    from support.checkout import close_a_deal  # type: ignore[no-redef]
    from support.fake_stripe import ACCOUNT_ID, API_KEY, FakeStripe  # type: ignore[no-redef]
    from support.servers import ProcessServer  # type: ignore[no-redef]

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
RETURN_URL = "https://shop.example/checkout/return"
#: A platform profile the store will not fetch (a real store reaches no loopback address): no webhook.
PLATFORM = "http://127.0.0.1:9/profile.json"
STRIPE_CONFIG = json.loads((ROOT / "docs" / "schemas" / "org.haggler.stripe.json").read_text())
#: The acquirer's details the operator gives for 3-D Secure run by buyers' agents (Visa only).
VISA_ACQUIRER = {"acquirer_bin": "412345", "acquirer_country": "US", "acquirer_merchant_id": "acq-merchant-1",
                 "merchant_name": "Tea Shop"}
#: The UCP conformance suite's SDK: UCP's own models of its 2026-01-11 schemas (tests/protocols/ucp/test_ucp_cli.py).
UCP_SDK = Path(os.environ.get("HAGGLER_UCP_CONFORMANCE") or ROOT.parent / "shared" / "ucp-conformance") / "sdk" / "src"


@dataclass
class Store:
    server: ProcessServer
    db_url: str

    @property
    def base(self) -> str:
        return self.server.base

    def orders(self) -> list[Order]:
        db = open_database(self.db_url, existing=True)
        try:
            with db.read() as conn:
                return list_orders(conn)
        finally:
            db.dispose()

    def stock(self, product_id: str) -> int:
        db = open_database(self.db_url, existing=True)
        try:
            with db.read() as conn:
                return int(conn.execute(select(commerce_inventory.c.quantity)
                                        .where(commerce_inventory.c.product_id == product_id)).scalar_one())
        finally:
            db.dispose()

    def redemptions(self) -> int:
        db = open_database(self.db_url, existing=True)
        try:
            with db.read() as conn:
                return len(conn.execute(select(deal_redemptions.c.deal_id)).all())
        finally:
            db.dispose()


@pytest.fixture(scope="module")
def server() -> Iterator[FakeStripe]:
    with FakeStripe() as fake:
        yield fake


@pytest.fixture(scope="module")
def store(server: FakeStripe, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A real store, seeded with the tea shop, serving UCP and ACP, with Stripe as its one handler
    (no simulation secret): the account asked of Stripe at start-up, 3-D Secure returning to RETURN_URL
    or, for Visa cards, run by ACP agents with the acquirer's details in the environment."""
    where = tmp_path_factory.mktemp("stripe-store")
    url = f"sqlite:///{where}/shop.db"
    ucp.seed(url)
    env = {KEY_ENV: API_KEY, API_BASE_ENV: server.base, "HAGGLER_STRIPE_RETURN_URL": RETURN_URL,
           "HAGGLER_ACP_API_KEY": acp.KEY, ACQUIRERS_ENV: json.dumps({"visa": VISA_ACQUIRER})}
    with ProcessServer("--db", url, "--data-dir", str(where / "data"), cwd=where, env=env) as process:
        assert f"payments through Stripe (handler stripe, account {ACCOUNT_ID}, sandbox" in process.log()
        yield Store(process, url)


@pytest.fixture(scope="module")
def test_store(server: FakeStripe, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """A test store on Stripe (its simulation secret lets it reach a platform on loopback) whose
    operator set no return URL: UCP's 3-D Secure returns to the store's own page all the same."""
    where = tmp_path_factory.mktemp("stripe-test-store")
    url = f"sqlite:///{where}/shop.db"
    ucp.seed(url)
    env = {KEY_ENV: API_KEY, API_BASE_ENV: server.base}
    with ProcessServer("--db", url, "--data-dir", str(where / "data"), "--simulation-secret", ucp.SECRET, cwd=where,
                       env=env) as process:
        assert "3-D Secure returns UCP buyers to the store's own page" in process.log()
        yield Store(process, url)


@pytest.fixture
def fake(server: FakeStripe) -> FakeStripe:
    server.reset()
    return server


def ucp_payment(token: str) -> dict[str, Any]:
    return {"payment_data": {"id": "card_1", "handler_id": "stripe", "type": "card", "brand": "visa",
                             "last_digits": "4242", "credential": {"type": "token", "token": token}}}


def ucp_ready(http: httpx.Client) -> dict[str, Any]:
    return ucp.ready_checkout(http, "green_tea", 2, profile=PLATFORM)


def total(body: dict[str, Any]) -> int:
    return int(next(t["amount"] for t in body["totals"] if t["type"] == "total"))


def the_one_payment_intent(fake: FakeStripe, amount: int, return_url: str = RETURN_URL) -> dict[str, Any]:
    """The only PaymentIntent the store created: for ``amount`` in US dollars, under an idempotency
    key, bringing the buyer back to ``return_url`` after 3-D Secure (the operator's, unless UCP's page)."""
    [sent] = [r for r in fake.requests if (r.method, r.path) == ("POST", "/v1/payment_intents")]
    assert (sent.params["amount"], sent.params["currency"], sent.params["return_url"]) == (str(amount), "usd",
                                                                                             return_url)
    assert sent.idempotency_key
    [intent] = fake.intents.values()
    return intent


def placed(store: Store, checkout_id: str) -> list[Order]:
    return [o for o in store.orders() if o.session_id == checkout_id]


# -- the declarations --------------------------------------------------------------------------------


def test_the_ucp_profile_and_checkout_declare_stripe_as_ucps_schemas_and_the_handlers_own_describe(
        store: Store, fake: FakeStripe) -> None:
    profile = httpx.get(f"{store.base}/.well-known/ucp").json()
    [declared] = profile["payment"]["handlers"]  # a real store: no simulated handler, none listed for tests
    assert declared["id"] == "stripe" and declared["name"] == "org.haggler.stripe"
    assert declared["config"] == {"environment": "sandbox", "identity": {"access_token": ACCOUNT_ID},
                                  "accepted_tokens": ["payment_method", "shared_payment_token"], "supports_3ds": True}
    jsonschema.validate(declared["config"], STRIPE_CONFIG, cls=jsonschema.Draft202012Validator)
    assert declared["spec"].startswith("https://haggler.org/")  # UCP: a name's spec on its authority's origin
    with httpx.Client(base_url=store.base) as http:
        assert ucp_ready(http)["payment"]["handlers"] == [declared]
    if not UCP_SDK.is_dir():
        pytest.skip(f"UCP's models are not at {UCP_SDK} (the conformance suite's SDK; set HAGGLER_UCP_CONFORMANCE)")
    checked = subprocess.run([sys.executable, "-c", (
        "import json, sys\n"
        f"sys.path.insert(0, {str(UCP_SDK)!r})\n"
        "from ucp_sdk.models.discovery.profile_schema import UcpDiscoveryProfile\n"
        "from ucp_sdk.models.schemas.shopping.types.payment_identity import PaymentIdentity\n"
        "profile = UcpDiscoveryProfile.model_validate(json.loads(sys.stdin.read()))\n"
        "[handler] = profile.payment.handlers\n"
        "PaymentIdentity.model_validate(handler.config['identity'])\n"
        "print(handler.name)\n")], input=json.dumps(profile), capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and checked.stdout.strip() == "org.haggler.stripe", checked.stderr


def card_config_schema() -> dict[str, Any]:
    """The card handler's config schema as ACP's payment handler RFC gives it (§10.4.1)."""
    rfc = (acp.CONTRACT / "rfc.payment_handlers.md").read_text()
    blocks = (json.loads(block) for block in re.findall(r"```json\n(\{\n  \"\$schema\".*?)\n```", rfc, re.S))
    return next(b for b in blocks if b["$id"] == "https://acp.dev/schemas/handlers/tokenized.card/config.json")


def test_an_acp_session_declares_stripe_as_acps_card_handler(store: Store, fake: FakeStripe) -> None:
    with httpx.Client(base_url=store.base) as http:
        session = acp.ready_session(http, "green_tea", 2)
    acp.conforms(session, "CheckoutSession")
    [declared] = session["capabilities"]["payment"]["handlers"]
    assert {k: declared[k] for k in ("id", "name", "psp", "requires_delegate_payment")} == {
        "id": "stripe", "name": "dev.acp.tokenized.card", "psp": "stripe", "requires_delegate_payment": True}
    jsonschema.validate(declared["config"], card_config_schema(), cls=jsonschema.Draft202012Validator)
    assert {k: declared["config"][k] for k in ("merchant_id", "psp", "environment", "supports_3ds")} == {
        "merchant_id": ACCOUNT_ID, "psp": "stripe", "environment": "sandbox", "supports_3ds": True}


# -- paying --------------------------------------------------------------------------------------


def test_a_ucp_checkout_paid_with_a_payment_method_is_one_payment_intent_and_one_order(
        store: Store, fake: FakeStripe) -> None:
    with httpx.Client(base_url=store.base) as http:
        checkout = ucp_ready(http)
        done = http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=ucp.headers(PLATFORM),
                         json=ucp_payment("pm_card_visa"))
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    intent = the_one_payment_intent(fake, total(checkout), f"{store.base}/pay/{checkout['id']}")
    assert intent["status"] == "succeeded" and fake.charges == 1
    [order] = placed(store, checkout["id"])
    assert (order.id, order.door, order.total_cents) == (done.json()["order"]["id"], "ucp", total(checkout))
    assert (order.payment_handler, order.payment_reference) == ("stripe", intent["id"])


def test_an_acp_checkout_paid_with_a_shared_payment_token_is_one_payment_intent_and_one_order(
        store: Store, fake: FakeStripe) -> None:
    with httpx.Client(base_url=store.base) as http:
        session = acp.ready_session(http, "green_tea", 2)
        token = fake.grant("pm_card_visa", "usd", total(session))  # the agent's delegated payment, at Stripe
        done = http.post(f"/checkout_sessions/{session['id']}/complete", headers=acp.headers(),
                         json=acp.pay(token, handler_id="stripe"))
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    intent = the_one_payment_intent(fake, total(session))
    assert fake.requests[-1].params["shared_payment_granted_token"] == token
    assert intent["status"] == "succeeded" and fake.charges == 1
    [order] = placed(store, session["id"])
    assert (order.id, order.door, order.total_cents) == (done.json()["order"]["id"], "acp", total(session))
    assert (order.payment_handler, order.payment_reference) == ("stripe", intent["id"])


def test_acps_older_payment_data_pays_through_stripe_the_same_way(store: Store, fake: FakeStripe) -> None:
    with httpx.Client(base_url=store.base) as http:
        session = acp.ready_session(http, "green_tea", 1)
        done = http.post(f"/checkout_sessions/{session['id']}/complete", headers=acp.headers(),
                         json={"payment_data": {"token": fake.grant("pm_card_visa"), "provider": "stripe"}})
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    [order] = placed(store, session["id"])
    assert (order.payment_handler, order.payment_reference) == ("stripe", next(iter(fake.intents)))


def test_a_declined_card_leaves_no_order_in_either_checkout(store: Store, fake: FakeStripe) -> None:
    with httpx.Client(base_url=store.base) as http:
        checkout = ucp_ready(http)
        ucp_done = http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=ucp.headers(PLATFORM),
                             json=ucp_payment("pm_card_chargeDeclined"))
        session = acp.ready_session(http, "green_tea", 2)
        acp_done = http.post(f"/checkout_sessions/{session['id']}/complete", headers=acp.headers(),
                             json=acp.pay(fake.grant("pm_card_chargeDeclined"), handler_id="stripe"))
    assert ucp_done.status_code == 402 and "Your card was declined." in ucp_done.text
    assert acp_done.status_code == 402 and acp_done.json()["code"] == "payment_declined"
    assert placed(store, checkout["id"]) == [] and placed(store, session["id"]) == []
    assert fake.charges == 0 and len(fake.intents) == 2  # Stripe kept each declined PaymentIntent


# -- 3-D Secure ----------------------------------------------------------------------------------------

AUTHENTICATED = {"outcome": "authenticated", "outcome_details": {
    "three_ds_cryptogram": "AbCdEfGhIjKlMnOpQrStUvWxY0=", "electronic_commerce_indicator": "05",
    "transaction_id": "dsTransId_abc123", "version": "2.2.0"}}


def acp_awaiting_authentication(http: httpx.Client, fake: FakeStripe) -> tuple[dict[str, Any], dict[str, Any]]:
    """An ACP session paid with a shared token for a card whose issuer asks for 3-D Secure: the
    session and the completion's payment."""
    session = acp.ready_session(http, "green_tea", 2)
    payment = acp.pay(fake.grant("pm_card_authenticationRequired", "usd", total(session)), handler_id="stripe")
    first = http.post(f"/checkout_sessions/{session['id']}/complete", headers=acp.headers(), json=payment)
    assert first.status_code == 200, first.text
    body = first.json()
    acp.conforms(body, "CheckoutSession")
    assert body["status"] == "authentication_required"
    assert body["authentication_metadata"] == {"acquirer_details": VISA_ACQUIRER, "directory_server": "visa"}
    assert "continue_url" not in body
    return session, payment


def test_rfc_agentic_checkout_4_4_acp_3ds_on_stripe_from_requires_action_to_the_order(
        store: Store, fake: FakeStripe) -> None:
    """rfc.agentic_checkout §4.4, §8, §9.7 against Stripe: the PaymentIntent in requires_action is
    authentication_required with the operator's acquirer for the card's network; complete without
    authentication_result is 400 requires_3ds; with an authenticated one the same PaymentIntent is
    confirmed with Stripe's imported 3-D Secure fields, and the order placed: one charge."""
    with httpx.Client(base_url=store.base) as http:
        session, payment = acp_awaiting_authentication(http, fake)
        intent = the_one_payment_intent(fake, total(session))
        assert intent["status"] == "requires_action" and fake.charges == 0
        missing = http.post(f"/checkout_sessions/{session['id']}/complete", headers=acp.headers(), json=payment)
        assert missing.status_code == 400 and (missing.json()["code"], missing.json()["param"]) == (
            "requires_3ds", "$.authentication_result")
        done = http.post(f"/checkout_sessions/{session['id']}/complete", headers=acp.headers(),
                         json={**payment, "authentication_result": AUTHENTICATED})
    assert done.status_code == 200 and done.json()["status"] == "completed", done.text
    [confirm] = [r for r in fake.requests if r.path == f"/v1/payment_intents/{intent['id']}/confirm"]
    assert confirm.params["payment_method_options"]["card"]["three_d_secure"] == {
        "cryptogram": "AbCdEfGhIjKlMnOpQrStUvWxY0=", "transaction_id": "dsTransId_abc123", "version": "2.2.0",
        "electronic_commerce_indicator": "05", "ares_trans_status": "Y"}
    assert fake.intents[intent["id"]]["status"] == "succeeded" and fake.charges == 1 and len(fake.intents) == 1
    [order] = placed(store, session["id"])
    assert (order.id, order.payment_handler, order.payment_reference) == (
        done.json()["order"]["id"], "stripe", intent["id"])


def test_a_failed_authentication_on_stripe_cancels_the_payment_intent_and_places_no_order(
        store: Store, fake: FakeStripe) -> None:
    with httpx.Client(base_url=store.base) as http:
        session, payment = acp_awaiting_authentication(http, fake)
        declined = http.post(f"/checkout_sessions/{session['id']}/complete", headers=acp.headers(),
                             json={**payment, "authentication_result": {"outcome": "denied"}})
        after = http.get(f"/checkout_sessions/{session['id']}", headers=acp.headers()).json()
    assert declined.status_code == 402 and declined.json()["code"] == "payment_declined"
    [intent] = fake.intents.values()
    assert intent["status"] == "canceled" and fake.charges == 0
    assert placed(store, session["id"]) == [] and after["status"] == "ready_for_payment"


def ucp_escalated(store: Store, http: httpx.Client, fake: FakeStripe, profile: str, *,
                  line_items: list[dict[str, Any]] | None = None, **extra: Any) -> tuple[dict[str, Any], str, str]:
    """A UCP checkout paid with a card that asks for 3-D Secure: the checkout, its continue_url and
    the PaymentIntent's id. UCP's agents do not run 3-D Secure, so the acquirer's details are not
    used: the checkout requires escalation, and continue_url is the store's page, which Stripe is
    told to bring the buyer back to."""
    checkout = ucp.ready_checkout(http, "green_tea", 2, profile=profile, **extra)
    if line_items is not None:
        checkout = http.put(f"/checkout-sessions/{checkout['id']}", headers=ucp.headers(profile),
                            json={"id": checkout["id"], "line_items": line_items}).json()
    answer = http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=ucp.headers(profile),
                       json=ucp_payment("pm_card_authenticationRequired"))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    page = f"{store.base}/pay/{checkout['id']}"
    assert body["status"] == "requires_escalation" and body["continue_url"] == page
    assert "authentication_metadata" not in body and placed(store, checkout["id"]) == []
    intent = the_one_payment_intent(fake, total(checkout), page)
    return checkout, page, intent["id"]


def back_from_stripe(http: httpx.Client, page: str, intent: str, status: str) -> httpx.Response:
    """The buyer's browser sent back by Stripe: the return URL with Stripe's query added."""
    return http.get(page, params={"payment_intent": intent, "redirect_status": status})


def test_checkout_continue_url_ucp_3ds_on_stripe_is_finalized_at_the_stores_page(
        test_store: Store, fake: FakeStripe) -> None:
    """checkout.md, "Continue URL": the platform hands the buyer to continue_url, where the checkout
    is finalized. The store's page sends the buyer on to Stripe's 3-D Secure page (303); the buyer
    authenticates there and Stripe sends them back; the page reads the PaymentIntent, places the one
    order, says so, and the platform is sent order_placed (order.md, "Events"). One PaymentIntent,
    one charge, though the operator set no return URL."""
    with ucp.Platform() as platform, httpx.Client(base_url=test_store.base) as http:
        checkout, page, intent = ucp_escalated(test_store, http, fake, platform.profile_url)
        sent = http.get(page)
        assert (sent.status_code, sent.headers["location"]) == (303, f"{fake.base}/3d_secure/{intent}")
        assert httpx.post(sent.headers["location"], data={"outcome": "complete"}).status_code == 200  # at Stripe
        back = back_from_stripe(http, page, intent, "succeeded")
        assert back.status_code == 200 and "Payment complete" in back.text, back.text
        session = http.get(f"/checkout-sessions/{checkout['id']}", headers=ucp.headers(platform.profile_url)).json()
        event = platform.wait_for("order_placed")
    [order] = placed(test_store, checkout["id"])
    assert session["status"] == "completed" and session["order"]["id"] == order.id == event["id"]
    assert order.id in back.text and (order.payment_handler, order.payment_reference) == ("stripe", intent)
    assert fake.charges == 1 and len(fake.intents) == 1
    assert [e["event_type"] for e in platform.events] == ["order_placed"]


def test_checkout_continue_url_a_failed_3ds_at_stripe_gives_the_deal_and_the_stock_back(
        test_store: Store, fake: FakeStripe) -> None:
    """checkout.md, "Continue URL": back from a failed authentication, the page says the payment did
    not go through; no order, the deal closed in chat may be bought again and the tea is back on the
    shelf, the checkout ready for another payment."""
    product = load_catalog().products[0]
    with httpx.Client(base_url=test_store.base) as http:
        deal = close_a_deal(http, product)
        before = test_store.stock("green_tea")
        lines = [{"item": {"id": "green_tea"}, "quantity": 2}, {"item": {"id": product.id}, "quantity": 1}]
        checkout, page, intent = ucp_escalated(test_store, http, fake, PLATFORM, line_items=lines,
                                               discounts={"codes": [deal["id"]]})
        assert test_store.stock("green_tea") == before - 2 and test_store.redemptions() == 1
        assert httpx.post(http.get(page).headers["location"], data={"outcome": "fail"}).status_code == 200
        back = back_from_stripe(http, page, intent, "failed")
        session = http.get(f"/checkout-sessions/{checkout['id']}", headers=ucp.headers(PLATFORM)).json()
    assert back.status_code == 200 and "did not go through" in back.text and "failed authentication" in back.text
    assert session["status"] == "ready_for_complete" and placed(test_store, checkout["id"]) == []
    assert test_store.stock("green_tea") == before and test_store.redemptions() == 0 and fake.charges == 0


def test_checkout_continue_url_stripe_not_answering_is_a_page_to_try_later_and_the_hold_stays(
        test_store: Store, fake: FakeStripe) -> None:
    with httpx.Client(base_url=test_store.base) as http:
        checkout, page, intent = ucp_escalated(test_store, http, fake, PLATFORM)
        held = test_store.stock("green_tea")
        fake.failing_with = 503
        later = http.get(page)
        fake.failing_with = None
        session = http.get(f"/checkout-sessions/{checkout['id']}", headers=ucp.headers(PLATFORM)).json()
    assert later.status_code == 503 and later.headers["retry-after"] and "in a moment" in later.text
    assert session["status"] == "requires_escalation" and test_store.stock("green_tea") == held
    assert placed(test_store, checkout["id"]) == [] and fake.intents[intent]["status"] == "requires_action"
