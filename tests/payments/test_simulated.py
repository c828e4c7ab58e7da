"""The simulated payment handler: the UCP suite's tokens, card numbers, idempotency, and 3-D Secure
run by the buyer's agent."""

from __future__ import annotations

from dataclasses import replace

import pytest

from haggler.payments.handler import AuthenticationRequest, AuthenticationResult, Charge, PaymentOutcome
from haggler.payments.handler import PaymentUnavailable
from haggler.payments.simulated import AUTHENTICATION_TOKEN, SIMULATED_ACQUIRER, SimulatedPaymentHandler, luhn_valid


def charge(credential: dict, key: str = "k1") -> Charge:
    return Charge(1000, "USD", credential, key)


def test_the_suites_tokens_succeed_and_fail():
    handler = SimulatedPaymentHandler()
    ok = handler.charge(charge({"type": "token", "token": "success_token"}, "a"))
    assert ok.succeeded and ok.reference.startswith("sim_")
    declined = handler.charge(charge({"type": "token", "token": "fail_token"}, "b"))
    assert declined.outcome is PaymentOutcome.DECLINED and "fail_token" in declined.reason
    assert not handler.charge(charge({"type": "token", "token": "made_up"}, "c")).succeeded


def test_a_card_succeeds_when_its_number_passes_luhn():
    handler = SimulatedPaymentHandler()
    assert handler.charge(charge({"type": "card", "number": "4242 4242 4242 4242"}, "a")).succeeded
    assert not handler.charge(charge({"type": "card", "number": "4242424242424241"}, "b")).succeeded
    assert not luhn_valid("4242-4242-4242-4242") and not luhn_valid("42")


def test_the_same_key_answers_what_it_did_the_first_time():
    handler = SimulatedPaymentHandler()
    first = handler.charge(charge({"type": "token", "token": "success_token"}))
    assert handler.charge(charge({"type": "token", "token": "fail_token"})) == first


AUTHENTICATE = {"type": "spt", "token": AUTHENTICATION_TOKEN}
AUTHENTICATED = AuthenticationResult("authenticated", "AbCdEfGhIjKlMnOpQrStUvWxY0=", "05", "ds-1", "2.2.0")


def test_the_authentication_token_asks_for_3ds_with_the_simulated_acquirer_until_the_result_comes():
    handler = SimulatedPaymentHandler()
    first = handler.charge(charge(AUTHENTICATE))
    assert first.outcome is PaymentOutcome.ACTION_REQUIRED and first.action_url is None
    assert first.authentication == AuthenticationRequest(SIMULATED_ACQUIRER, "visa")
    assert handler.charge(charge(AUTHENTICATE)) == first  # a replay of the key: still waiting
    paid = handler.charge(replace(charge(AUTHENTICATE), authentication=AUTHENTICATED))
    assert paid.succeeded and paid.reference == first.reference
    # once settled, the key answers what it did, with or without a result
    assert handler.charge(charge(AUTHENTICATE)) == paid
    assert handler.charge(replace(charge(AUTHENTICATE), authentication=AuthenticationResult("denied"))) == paid


def test_a_failed_authentication_is_a_decline_that_stays_one():
    handler = SimulatedPaymentHandler()
    handler.charge(charge(AUTHENTICATE))
    declined = handler.charge(replace(charge(AUTHENTICATE), authentication=AuthenticationResult("denied")))
    assert declined.outcome is PaymentOutcome.DECLINED and "denied" in (declined.reason or "")
    assert handler.charge(replace(charge(AUTHENTICATE), authentication=AUTHENTICATED)) == declined


def test_a_charge_is_read_back_by_its_reference_as_its_last_answer_stands():
    handler = SimulatedPaymentHandler()
    card = {"type": "token", "token": AUTHENTICATION_TOKEN}
    asked = handler.charge(charge(card))
    assert handler.retrieve(asked.reference).outcome is PaymentOutcome.ACTION_REQUIRED
    handler.charge(replace(charge(card), authentication=AuthenticationResult("authenticated")))
    assert handler.retrieve(asked.reference).succeeded


def test_a_reference_it_never_gave_is_no_answer():
    with pytest.raises(PaymentUnavailable, match="sim_unknown"):
        SimulatedPaymentHandler().retrieve("sim_unknown")
