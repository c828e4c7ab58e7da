"""The Stripe payment handler with the real ``stripe`` SDK over real HTTP, against a local fake of
Stripe's PaymentIntents API (tests/support/fake_stripe.py) that behaves as Stripe's test cards do."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace

import httpx
import pytest

from haggler.payments import (
    Charge,
    ChargeResult,
    PaymentOutcome,
    PaymentSetupError,
    PaymentUnavailable,
    StripeHandler,
)
from haggler.payments.handler import Acquirer, AuthenticationRequest, AuthenticationResult
from haggler.payments.stripe_handler import ACQUIRERS_ENV, KEY_ENV
from tests.support.fake_stripe import ACCOUNT_ID, API_KEY, FakeStripe

#: The client timeout of the cases about a Stripe too slow for it (whose answer takes 3x this).
#: Every other case gets PATIENT, so that a loaded machine cannot turn an answer into a timeout.
TIMEOUT = 0.5
PATIENT = 60.0
RETURN_URL = "https://shop.example/checkout/return"


@pytest.fixture(scope="module")
def server() -> Iterator[FakeStripe]:
    with FakeStripe() as fake:
        yield fake


@pytest.fixture
def fake(server: FakeStripe) -> FakeStripe:
    server.reset()
    return server


def handler(fake: FakeStripe, **options: object) -> StripeHandler:
    options = {"api_key": API_KEY, "api_base": fake.base, "return_url": RETURN_URL, "account_id": ACCOUNT_ID,
               "timeout": PATIENT, "max_network_retries": 0, **options}
    return StripeHandler(**options)  # type: ignore[arg-type]


def card(token: str, key: str = "order-1-attempt-1", amount_cents: int = 1850) -> Charge:
    return Charge(amount_cents=amount_cents, currency="EUR", credential={"type": "stripe_token", "token": token},
                  idempotency_key=key, description="Haggled lamp", metadata={"order": "order-1"})


def test_a_good_card_is_charged_once_with_the_payment_intent_as_reference(fake: FakeStripe) -> None:
    result = handler(fake).charge(card("pm_card_visa"))
    assert result == ChargeResult(PaymentOutcome.SUCCEEDED, reference=result.reference)
    intent = fake.intents[result.reference]
    assert intent["status"] == "succeeded" and intent["amount_received"] == 1850
    assert fake.charges == 1
    [sent] = fake.requests
    assert sent.idempotency_key == "order-1-attempt-1"
    assert sent.params == {"amount": "1850", "currency": "eur", "payment_method": "pm_card_visa",
                           "payment_method_types": ["card"], "confirm": "true", "return_url": RETURN_URL,
                           "metadata": {"order": "order-1"}, "description": "Haggled lamp"}


@pytest.mark.parametrize(("token", "reason"), [
    ("pm_card_chargeDeclined", "Your card was declined."),
    ("pm_card_visa_chargeDeclinedInsufficientFunds", "Your card has insufficient funds."),
])
def test_a_declined_card_says_why_in_stripes_words_for_the_buyer(fake: FakeStripe, token: str, reason: str) -> None:
    result = handler(fake).charge(card(token))
    assert (result.outcome, result.reason) == (PaymentOutcome.DECLINED, reason)
    intent = fake.intents[result.reference]  # the PaymentIntent the decline happened on, for the records
    assert intent["status"] == "requires_payment_method"
    assert intent["client_secret"] not in repr(result) and API_KEY not in repr(result)
    assert fake.charges == 0


def test_a_token_stripe_does_not_know_is_declined_and_creates_nothing(fake: FakeStripe) -> None:
    result = handler(fake).charge(card("pm_made_up_by_the_agent"))
    assert result == ChargeResult(PaymentOutcome.DECLINED, reason="the payment method was not accepted")
    assert fake.intents == {} and fake.charges == 0


def test_a_shared_payment_token_is_confirmed_as_the_granted_token_not_as_a_payment_method(fake: FakeStripe) -> None:
    token = fake.grant("pm_card_visa")
    result = handler(fake).charge(card(token))
    assert result.succeeded and fake.charges == 1
    sent = fake.requests[-1]
    assert sent.params["shared_payment_granted_token"] == token and "payment_method" not in sent.params
    assert sent.idempotency_key == "order-1-attempt-1"


@pytest.mark.parametrize("token", ["spt_never_granted", "vt_01J8Z3WXYZ9ABC"])
def test_a_shared_token_stripe_never_granted_is_declined(fake: FakeStripe, token: str) -> None:
    # vt_…: the ACP specification's own example of a delegated token, which is no Stripe id.
    result = handler(fake).charge(card(token))
    assert result == ChargeResult(PaymentOutcome.DECLINED, reason="the payment method was not accepted")
    assert fake.intents == {} and fake.charges == 0


def test_a_shared_token_for_a_declined_card_is_declined_in_stripes_words(fake: FakeStripe) -> None:
    result = handler(fake).charge(card(fake.grant("pm_card_chargeDeclined")))
    assert (result.outcome, result.reason) == (PaymentOutcome.DECLINED, "Your card was declined.")


def test_an_account_without_shared_payment_tokens_is_the_operators_problem_not_a_decline(fake: FakeStripe) -> None:
    token = fake.grant("pm_card_visa")
    fake.shared_tokens = False
    with pytest.raises(PaymentSetupError, match="unknown parameter: shared_payment_granted_token"):
        handler(fake).charge(card(token))
    assert fake.charges == 0


def test_a_credential_without_a_token_is_declined_without_asking_stripe(fake: FakeStripe) -> None:
    result = handler(fake).charge(Charge(1850, "EUR", {"type": "stripe_token"}, "order-1-attempt-1"))
    assert result == ChargeResult(PaymentOutcome.DECLINED, reason="the payment credential carries no token")
    assert fake.requests == []


@pytest.mark.parametrize(("outcome", "then"), [("complete", PaymentOutcome.SUCCEEDED),
                                               ("fail", PaymentOutcome.DECLINED)])
def test_3d_secure_sends_the_buyer_to_stripe_and_the_retry_reads_how_it_ended(
        fake: FakeStripe, outcome: str, then: PaymentOutcome) -> None:
    stripe = handler(fake)
    first = stripe.charge(card("pm_card_authenticationRequired"))
    assert first.outcome is PaymentOutcome.ACTION_REQUIRED and "3-D Secure" in (first.reason or "")
    assert first.action_url == f"{fake.base}/3d_secure/{first.reference}"
    assert fake.charges == 0  # nothing taken before the buyer authenticates

    assert httpx.post(first.action_url, data={"outcome": outcome}).status_code == 200  # the buyer, at Stripe
    after = stripe.charge(card("pm_card_authenticationRequired"))  # the same charge, the same key

    assert (after.outcome, after.reference) == (then, first.reference)
    assert fake.charges == (1 if then is PaymentOutcome.SUCCEEDED else 0)
    if then is PaymentOutcome.DECLINED:
        assert "failed authentication" in (after.reason or "")
    assert [(sent.method, sent.path) for sent in fake.requests] == [
        ("POST", "/v1/payment_intents"), ("POST", "/v1/payment_intents"),
        ("GET", f"/v1/payment_intents/{first.reference}")]  # replayed, so read as it is now


def test_3d_secure_without_a_return_url_has_no_page_to_send_the_buyer_to(fake: FakeStripe) -> None:
    result = handler(fake, return_url=None).charge(card("pm_card_threeDSecure2Required"))
    assert result.outcome is PaymentOutcome.ACTION_REQUIRED and result.action_url is None
    assert "return_url" not in fake.requests[0].params
    assert fake.intents[result.reference]["next_action"]["type"] == "use_stripe_sdk"


def test_a_charges_own_return_url_is_sent_instead_of_the_handlers(fake: FakeStripe) -> None:
    """The checkout's own page for the buyer's return (UCP's continue_url) wins over the operator's,
    and with it a handler set up without one still has a page to send the buyer to."""
    own = "https://shop.example/pay/chk_1"
    for stripe in (handler(fake), handler(fake, return_url=None)):
        fake.reset()
        result = stripe.charge(replace(card("pm_card_threeDSecure2Required"), return_url=own))
        assert fake.requests[0].params["return_url"] == own
        assert result.action_url == f"{fake.base}/3d_secure/{result.reference}"


@pytest.mark.parametrize(("outcome", "then"), [("complete", PaymentOutcome.SUCCEEDED),
                                               ("fail", PaymentOutcome.DECLINED)])
def test_retrieve_reads_the_payment_intent_as_the_buyer_left_it_without_charging(
        fake: FakeStripe, outcome: str, then: PaymentOutcome) -> None:
    stripe = handler(fake)
    first = stripe.charge(card("pm_card_authenticationRequired"))
    assert first.reference is not None and stripe.retrieve(first.reference) == first  # still waiting for the buyer
    assert httpx.post(first.action_url, data={"outcome": outcome}).status_code == 200
    after = stripe.retrieve(first.reference)
    assert (after.outcome, after.reference) == (then, first.reference)
    assert [(sent.method, sent.path) for sent in fake.requests][1:] == [
        ("GET", f"/v1/payment_intents/{first.reference}")] * 2  # reads only: no second create, no confirm
    assert fake.charges == (1 if then is PaymentOutcome.SUCCEEDED else 0)


def test_retrieve_without_an_answer_is_unavailable_and_an_unknown_id_a_setup_error(fake: FakeStripe) -> None:
    stripe = handler(fake)
    with pytest.raises(PaymentSetupError, match="pi_unknown"):
        stripe.retrieve("pi_unknown")
    fake.failing_with = 503
    with pytest.raises(PaymentUnavailable, match="HTTP 503"):
        stripe.retrieve("pi_unknown")


def test_the_same_key_twice_charges_once_and_gives_the_same_reference(fake: FakeStripe) -> None:
    stripe = handler(fake)
    first = stripe.charge(card("pm_card_visa"))
    second = stripe.charge(card("pm_card_visa"))
    assert first == second and first.succeeded
    assert fake.charges == 1 and len(fake.intents) == 1
    other = stripe.charge(card("pm_card_visa", key="order-2-attempt-1"))
    assert other.reference != first.reference and fake.charges == 2  # another key is another payment


def test_a_key_reused_for_another_amount_is_refused_and_charges_nothing_more(fake: FakeStripe) -> None:
    stripe = handler(fake)
    stripe.charge(card("pm_card_visa"))
    with pytest.raises(PaymentSetupError, match="idempotency key was already used for a different charge"):
        stripe.charge(card("pm_card_visa", amount_cents=999))
    assert fake.charges == 1


def test_a_key_another_request_still_uses_is_unavailable_not_a_setup_error(fake: FakeStripe) -> None:
    """Stripe answers 409 while another request with the key is still going through (a completion
    taken over while the first still waits). That request may take the money, so the checkout must
    keep its hold and ask again: PaymentUnavailable, never the setup error that gives it back."""
    stripe = handler(fake)
    first = card("pm_card_visa")
    fake.in_flight.add(first.idempotency_key)
    with pytest.raises(PaymentUnavailable, match="retry with the same idempotency key"):
        stripe.charge(first)
    fake.in_flight.clear()
    assert stripe.charge(first).succeeded and fake.charges == 1


def test_a_timeout_is_unavailable_and_the_retry_finds_the_payment_stripe_took(fake: FakeStripe) -> None:
    fake.delay = 3 * TIMEOUT
    stripe = handler(fake, timeout=TIMEOUT, max_network_retries=1)
    started = time.monotonic()
    with pytest.raises(PaymentUnavailable, match=r"APIConnectionError, no answer\); retry with the same"):
        stripe.charge(card("pm_card_visa"))
    assert time.monotonic() - started < 2 * fake.delay + 5  # gave up, did not wait the answers out
    # Stripe acted on the first request; the SDK's own retry carried the same key and charged nothing more.
    assert [sent.idempotency_key for sent in fake.requests] == ["order-1-attempt-1"] * 2
    assert fake.charges == 1

    fake.delay = 0.0
    retried = stripe.charge(card("pm_card_visa"))
    assert retried.succeeded and retried.reference == next(iter(fake.intents))
    assert fake.charges == 1


@pytest.mark.parametrize(("status", "attempts"), [(500, 2), (503, 2), (429, 1)])  # the SDK retries 5xx, not 429
def test_stripe_failing_is_unavailable_after_the_sdks_retries(fake: FakeStripe, status: int, attempts: int) -> None:
    fake.failing_with = status
    with pytest.raises(PaymentUnavailable, match=f"HTTP {status}"):
        handler(fake, max_network_retries=1).charge(card("pm_card_visa"))
    assert len(fake.requests) == attempts and fake.intents == {} and fake.charges == 0


def test_a_wrong_api_key_is_a_setup_error_that_names_the_variable_not_the_key(fake: FakeStripe) -> None:
    wrong = "sk_test_not_the_fakes_key_4242"
    with pytest.raises(PaymentSetupError) as caught:
        handler(fake, api_key=wrong).charge(card("pm_card_visa"))
    assert KEY_ENV in str(caught.value) and "refused the API key" in str(caught.value)
    assert wrong not in str(caught.value)
    assert fake.intents == {}


def test_the_key_comes_from_the_environment_when_not_given(fake: FakeStripe, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(PaymentSetupError, match=KEY_ENV):
        handler(fake, api_key=None)
    monkeypatch.setenv(KEY_ENV, API_KEY)
    assert handler(fake, api_key=None).charge(card("pm_card_visa")).succeeded


@pytest.mark.parametrize("key", ["pk_test_51Publishable", "sk_test_copied with a space", " sk_test_padded",
                                 "whsec_not_an_api_key"])
def test_a_key_that_cannot_be_a_secret_key_is_refused_before_anything_is_sent(fake: FakeStripe, key: str) -> None:
    with pytest.raises(PaymentSetupError) as caught:
        handler(fake, api_key=key)
    assert KEY_ENV in str(caught.value) and "sk_" in str(caught.value) and key.strip() not in str(caught.value)
    assert fake.requests == []


def test_the_account_is_asked_of_stripe_when_not_given(fake: FakeStripe) -> None:
    stripe = handler(fake, account_id=None)
    assert (stripe.account_id, stripe.environment) == (ACCOUNT_ID, "sandbox")
    assert [(sent.method, sent.path) for sent in fake.requests] == [("GET", "/v1/account")]
    assert handler(fake).account_id == ACCOUNT_ID and len(fake.requests) == 1  # given: not asked


def test_building_the_handler_proves_the_key(fake: FakeStripe) -> None:
    with pytest.raises(PaymentSetupError, match=rf"refused the API key \(HTTP 401\): check {KEY_ENV}.*read access"):
        handler(fake, api_key="sk_test_not_the_fakes_key_4242", account_id=None)
    fake.failing_with = 503
    with pytest.raises(PaymentUnavailable, match="the account the key belongs to is not known"):
        handler(fake, account_id=None)


def test_an_account_id_is_checked_and_a_live_key_is_live(fake: FakeStripe) -> None:
    with pytest.raises(PaymentSetupError, match="acct_"):
        handler(fake, account_id="1HagglerFakeStore")
    assert handler(fake, api_key="rk_live_51Restricted").environment == "production"


def test_without_the_sdk_building_the_handler_says_which_extra_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "stripe", None)  # `import stripe` now raises ImportError
    with pytest.raises(PaymentSetupError, match=r"pip install 'haggler\[stripe\]'"):
        StripeHandler(API_KEY)


def test_haggler_payments_imports_without_the_sdk_and_does_not_load_it() -> None:
    code = ("import sys\n"
            "import haggler.payments\n"
            "print('stripe' in sys.modules)\n"
            "sys.modules['stripe'] = None\n"
            "try:\n    haggler.payments.StripeHandler('sk_test_x')\n"
            "except haggler.payments.PaymentSetupError as exc:\n    print(exc)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    loaded, message = result.stdout.splitlines()
    assert loaded == "False"
    assert "pip install 'haggler[stripe]'" in message


# -- 3-D Secure run by the buyer's agent -------------------------------------------------------------

VISA_ACQUIRER = Acquirer(bin="412345", country="US", merchant_id="acq-merchant-1", merchant_name="Tea Shop")
MASTERCARD_ACQUIRER = Acquirer(bin="512345", country="US", merchant_id="acq-merchant-2", merchant_name="Tea Shop",
                               requestor_id="req-7")
ACQUIRERS = {"visa": VISA_ACQUIRER, "mastercard": MASTERCARD_ACQUIRER}
AUTHENTICATED = AuthenticationResult("authenticated", "AbCdEfGhIjKlMnOpQrStUvWxY0=", "05", "ds-trans-1", "2.2.0")


def authenticated(charge: Charge, result: AuthenticationResult = AUTHENTICATED) -> Charge:
    return replace(charge, authentication=result)


@pytest.mark.parametrize(("token", "directory_server", "acquirer"), [
    ("pm_card_authenticationRequired", "visa", VISA_ACQUIRER),
    ("pm_card_mastercard_threeDSecure", "mastercard", MASTERCARD_ACQUIRER)])
def test_3d_secure_names_the_acquirer_the_operator_gave_for_the_cards_network(
        fake: FakeStripe, token: str, directory_server: str, acquirer: Acquirer) -> None:
    result = handler(fake, acquirers=ACQUIRERS).charge(card(token))
    assert result.outcome is PaymentOutcome.ACTION_REQUIRED
    assert result.authentication == AuthenticationRequest(acquirer, directory_server)
    assert result.action_url is not None  # Stripe's own page too: the protocol picks
    assert ("GET", f"/v1/payment_methods/{token}") in [(s.method, s.path) for s in fake.requests]


def test_3d_secure_without_acquirer_details_asks_no_agent_and_invents_none(fake: FakeStripe) -> None:
    assert handler(fake).charge(card("pm_card_authenticationRequired")).authentication is None
    # a network the operator gave no acquirer for (and one with no directory server here) neither
    assert handler(fake, acquirers={"mastercard": MASTERCARD_ACQUIRER}).charge(
        card("pm_card_authenticationRequired", key="k-2")).authentication is None
    assert handler(fake, acquirers=ACQUIRERS).charge(
        card("pm_card_discover_threeDSecure", key="k-3")).authentication is None


def test_an_authenticated_result_confirms_the_same_payment_intent_with_stripes_3ds_import_fields(
        fake: FakeStripe) -> None:
    stripe = handler(fake, acquirers=ACQUIRERS)
    first = stripe.charge(card("pm_card_authenticationRequired"))
    done = stripe.charge(authenticated(card("pm_card_authenticationRequired")))
    assert (done.outcome, done.reference) == (PaymentOutcome.SUCCEEDED, first.reference)
    assert fake.charges == 1 and len(fake.intents) == 1
    [confirm] = [s for s in fake.requests if s.path.endswith("/confirm")]
    assert confirm.path == f"/v1/payment_intents/{first.reference}/confirm"
    assert confirm.params["payment_method_options"] == {"card": {"three_d_secure": {
        "cryptogram": AUTHENTICATED.cryptogram, "transaction_id": "ds-trans-1", "version": "2.2.0",
        "electronic_commerce_indicator": "05", "ares_trans_status": "Y"}}}
    assert confirm.params["error_on_requires_action"] == "true"
    assert confirm.idempotency_key and confirm.idempotency_key.startswith("order-1-attempt-1-3ds-")


def test_the_same_authenticated_result_twice_confirms_once(fake: FakeStripe) -> None:
    stripe = handler(fake, acquirers=ACQUIRERS)
    stripe.charge(card("pm_card_authenticationRequired"))
    first = stripe.charge(authenticated(card("pm_card_authenticationRequired")))
    again = stripe.charge(authenticated(card("pm_card_authenticationRequired")))  # a lost answer, sent again
    assert first == again and first.succeeded and fake.charges == 1
    assert len([s for s in fake.requests if s.path.endswith("/confirm")]) == 1  # the intent had succeeded


@pytest.mark.parametrize("outcome", ["denied", "rejected", "abandoned", "canceled", "not_supported"])
def test_a_failed_authentication_cancels_the_payment_intent_and_takes_nothing(fake: FakeStripe, outcome: str) -> None:
    stripe = handler(fake, acquirers=ACQUIRERS)
    first = stripe.charge(card("pm_card_authenticationRequired"))
    declined = stripe.charge(authenticated(card("pm_card_authenticationRequired"), AuthenticationResult(outcome)))
    assert (declined.outcome, declined.reference) == (PaymentOutcome.DECLINED, first.reference)
    assert outcome in (declined.reason or "")
    assert fake.intents[first.reference]["status"] == "canceled" and fake.charges == 0
    assert not [s for s in fake.requests if s.path.endswith("/confirm")]
    # the buyer cannot take it later at Stripe's page either
    assert httpx.post(f"{fake.base}/3d_secure/{first.reference}", data={"outcome": "complete"}).status_code == 400
    assert fake.charges == 0


@pytest.mark.parametrize(("given", "problem"), [
    ("not json", "not JSON"),
    ('["visa"]', "JSON object"),
    ('{"discover": {}}', "not a directory server"),
    ('{"visa": {"acquirer_bin": "1", "acquirer_country": "US", "acquirer_merchant_id": "m"}}', "merchant_name"),
    ('{"visa": {"acquirer_bin": "123456789012", "acquirer_country": "US", "acquirer_merchant_id": "m", '
     '"merchant_name": "n"}}', "acquirer_bin"),
    ('{"visa": {"acquirer_bin": "1", "acquirer_country": "U1", "acquirer_merchant_id": "m", "merchant_name": "n"}}',
     "acquirer_country"),
    ('{"visa": {"acquirer_bin": "1", "acquirer_country": "US", "acquirer_merchant_id": "m", "merchant_name": "n", '
     '"flow": "x"}}', "must be an object of")])
def test_acquirer_details_from_the_environment_are_checked_when_the_handler_is_built(
        fake: FakeStripe, monkeypatch: pytest.MonkeyPatch, given: str, problem: str) -> None:
    monkeypatch.setenv(ACQUIRERS_ENV, given)
    with pytest.raises(PaymentSetupError, match=problem) as refused:
        handler(fake)
    assert ACQUIRERS_ENV in str(refused.value)


def test_acquirer_details_come_from_the_environment_when_not_given(fake: FakeStripe,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ACQUIRERS_ENV, '{"visa": {"acquirer_bin": "412345", "acquirer_country": "us", '
                                      '"acquirer_merchant_id": "acq-merchant-1", "merchant_name": "Tea Shop"}}')
    assert handler(fake).acquirers == {"visa": VISA_ACQUIRER}
