"""The simulated payment handler: what UCP's conformance suite pays with, and what a store's own
tests pay with. It takes no money, so a store offers it only when it runs with a simulation secret
(``haggler serve --simulation-secret``).

Its credentials are the suite's (``mock_payment_handler``): a token credential ``success_token``
succeeds and ``fail_token`` is declined; a card credential succeeds when its number passes the Luhn
check (the suite's 4242 4242 4242 4242 does). Like a real processor, a second charge with an
idempotency key already used answers what the first one did, whatever it carries.

``authentication_token`` is a card whose issuer asks for 3-D Secure: the charge needs the buyer to
authenticate, and says how with the simulated acquirer (:data:`SIMULATED_ACQUIRER`, test values:
no directory server knows them). The same charge sent again with the buyer's authentication result
succeeds when the result is authenticated and is declined otherwise, as an issuer would decide; until
then a replay of the key answers that authentication is still needed. :meth:`retrieve` reads a
charge back by its reference as its last answer stands (the simulated card offers no page to
authenticate at, so nothing moves it on but the same charge sent again).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from haggler.payments.handler import Acquirer, AuthenticationRequest, Charge, ChargeResult, PaymentOutcome
from haggler.payments.handler import PaymentUnavailable

#: The handler's id in the checkout protocols.
SIMULATED_HANDLER_ID = "mock_payment_handler"
SUCCESS_TOKEN = "success_token"
FAIL_TOKEN = "fail_token"
AUTHENTICATION_TOKEN = "authentication_token"
#: The acquirer a simulated 3-D Secure names: a test store's, so made up and said to be.
SIMULATED_ACQUIRER = Acquirer(bin="000000", country="US", merchant_id="haggler-simulated",
                              merchant_name="haggler test store (simulated)")
#: Charges remembered per idempotency key; the oldest are forgotten first.
_REMEMBERED = 10_000


def luhn_valid(number: str) -> bool:
    """Whether a card number (digits, spaces allowed) passes the Luhn check."""
    digits = [int(c) for c in number if c.isdigit()]
    if len(digits) < 12 or any(not (c.isdigit() or c == " ") for c in number):
        return False
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2:
            d *= 2
            d -= 9 if d > 9 else 0
        total += d
    return total % 10 == 0


class SimulatedPaymentHandler:
    """Answers charges from their credential alone; never raises :class:`PaymentUnavailable`."""

    id = SIMULATED_HANDLER_ID

    def __init__(self) -> None:
        self._done: OrderedDict[str, ChargeResult] = OrderedDict()
        #: The idempotency key of each reference given, to read a charge back by it.
        self._keys: dict[str, str] = {}
        self._lock = threading.Lock()

    def charge(self, charge: Charge) -> ChargeResult:
        with self._lock:
            found = self._done.get(charge.idempotency_key)
            if found is None or (found.outcome is PaymentOutcome.ACTION_REQUIRED and charge.authentication):
                found = self._decide(charge)
                self._done[charge.idempotency_key] = found
                if found.reference is not None:
                    self._keys[found.reference] = charge.idempotency_key
                if len(self._done) > _REMEMBERED:
                    forgotten = self._done.popitem(last=False)[1].reference
                    self._keys.pop(forgotten or "", None)
            return found

    def retrieve(self, reference: str) -> ChargeResult:
        """The last answer for the charge ``reference`` names; one it does not remember (forgotten, or
        given by another process) is no answer, as from a processor that cannot be asked now."""
        with self._lock:
            found = self._done.get(self._keys.get(reference, ""))
        if found is None:
            raise PaymentUnavailable(f"the simulated handler does not remember payment {reference}")
        return found

    @staticmethod
    def _decide(charge: Charge) -> ChargeResult:
        credential = charge.credential
        reference = "sim_" + hashlib.sha256(charge.idempotency_key.encode()).hexdigest()[:24]
        if credential.get("type") == "card":
            if luhn_valid(str(credential.get("number", ""))):
                return ChargeResult(PaymentOutcome.SUCCEEDED, reference)
            return ChargeResult(PaymentOutcome.DECLINED, reason="the card number is not valid")
        token = credential.get("token")
        if token == SUCCESS_TOKEN:
            return ChargeResult(PaymentOutcome.SUCCEEDED, reference)
        if token == FAIL_TOKEN:
            return ChargeResult(PaymentOutcome.DECLINED, reason="the payment was declined (simulated fail_token)")
        if token == AUTHENTICATION_TOKEN:
            result = charge.authentication
            if result is None:
                return ChargeResult(PaymentOutcome.ACTION_REQUIRED, reference,
                                    reason="the card issuer asks the buyer to authenticate (simulated 3-D Secure)",
                                    authentication=AuthenticationRequest(SIMULATED_ACQUIRER, "visa"))
            if result.authenticated:
                return ChargeResult(PaymentOutcome.SUCCEEDED, reference)
            return ChargeResult(PaymentOutcome.DECLINED, reference,
                                reason=f"3-D Secure authentication did not succeed ({result.outcome}): nothing was "
                                       "charged")
        return ChargeResult(PaymentOutcome.DECLINED, reason="unknown payment token")


__all__ = ["AUTHENTICATION_TOKEN", "FAIL_TOKEN", "SIMULATED_ACQUIRER", "SIMULATED_HANDLER_ID", "SUCCESS_TOKEN",
           "SimulatedPaymentHandler", "luhn_valid"]
