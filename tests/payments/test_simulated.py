"""The simulated payment handler: the UCP suite's tokens, card numbers, and idempotency."""

from __future__ import annotations

from haggler.payments.handler import Charge, PaymentOutcome
from haggler.payments.simulated import SimulatedPaymentHandler, luhn_valid


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
