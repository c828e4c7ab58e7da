"""Stripe as a payment handler, through the official ``stripe`` SDK (the optional ``haggler[stripe]`` extra).

Each charge is one PaymentIntent, created and confirmed in a single request (``confirm=true``) that
carries the charge's idempotency key as Stripe's ``Idempotency-Key``. One request, one key: when the
answer to it is lost (a timeout), the retry with the same key is answered by Stripe from its record of
the first request, so a payment is never taken twice. Stripe replays the *original* answer, though,
and a PaymentIntent moves on after it (the buyer completes 3-D Secure), so a replayed answer is
followed by a read of the PaymentIntent as it is now.

The SDK is imported when a handler is built, never when ``haggler.payments`` is imported, so a store
without the extra runs and only a store configured for Stripe needs it.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

from haggler.payments.handler import Charge, ChargeResult, PaymentOutcome, PaymentSetupError, PaymentUnavailable

#: Where the secret key comes from when none is passed: an environment variable, never a command line
#: (where any user of the machine can read it in the process list).
KEY_ENV = "HAGGLER_STRIPE_API_KEY"
INSTALL_HINT = "pip install 'haggler[stripe]'"

AUTHENTICATION_NEEDED = "the card issuer asks the buyer to authenticate the payment (3-D Secure)"


class StripeHandler:
    """Charges cards through Stripe PaymentIntents; the credential's ``token`` is the PaymentMethod
    (``pm_…``) the buyer's agent obtained from Stripe.

    ``return_url`` is where Stripe sends the buyer back after 3-D Secure: with it, a charge that needs
    authentication comes back with a page to send the buyer to (``action_url``); without it Stripe
    expects the authentication to run in Stripe.js, which an agent cannot do, so set it for agentic
    checkout. ``api_base`` points the SDK elsewhere than ``https://api.stripe.com`` (a test double).
    """

    def __init__(self, api_key: str | None = None, *, handler_id: str = "stripe", return_url: str | None = None,
                 api_base: str | None = None, timeout: float = 30.0, max_network_retries: int = 2) -> None:
        try:
            self._stripe: ModuleType = importlib.import_module("stripe")
        except ImportError as exc:
            raise PaymentSetupError(f"the Stripe payment handler needs the `stripe` package: {INSTALL_HINT}") from exc
        key = api_key or os.environ.get(KEY_ENV)
        if not key:
            raise PaymentSetupError(f"the Stripe payment handler needs a secret API key: set {KEY_ENV}")
        self.id = handler_id
        self.return_url = return_url
        self._client = self._stripe.StripeClient(
            key, base_addresses={"api": api_base} if api_base else None, max_network_retries=max_network_retries,
            http_client=self._stripe.RequestsClient(timeout=timeout))

    def charge(self, charge: Charge) -> ChargeResult:
        """Take ``charge`` with one confirmed PaymentIntent; see :class:`PaymentHandler`."""
        if not charge.credential.get("token"):
            return ChargeResult(PaymentOutcome.DECLINED, reason="the payment credential carries no token")
        stripe = self._stripe
        intents = self._client.v1.payment_intents
        try:
            intent = intents.create(self._params(charge), {"idempotency_key": charge.idempotency_key})
            if _replayed(intent):
                intent = intents.retrieve(intent.id)
        except stripe.CardError as exc:
            return _declined(exc.error)
        except stripe.InvalidRequestError as exc:
            if exc.param == "payment_method":  # the buyer's token: no such PaymentMethod, or one that cannot pay
                return ChargeResult(PaymentOutcome.DECLINED, reason="the payment method was not accepted")
            raise PaymentSetupError(f"Stripe rejected the charge request: {exc.user_message}") from exc
        except (stripe.APIConnectionError, stripe.APIError, stripe.RateLimitError) as exc:
            answer = f"HTTP {exc.http_status}" if exc.http_status else "no answer"
            raise PaymentUnavailable(f"Stripe did not answer ({type(exc).__name__}, {answer}); "
                                     "retry with the same idempotency key") from exc
        except (stripe.AuthenticationError, stripe.PermissionError) as exc:
            raise PaymentSetupError(f"Stripe refused the API key (HTTP {exc.http_status}): check {KEY_ENV} "
                                    "holds a secret key of the account, with PaymentIntents write access") from exc
        except stripe.IdempotencyError as exc:
            raise PaymentSetupError("the idempotency key was already used for a different charge "
                                    f"(Stripe: {exc.user_message})") from exc
        return self._result(intent)

    def _params(self, charge: Charge) -> dict[str, Any]:
        params: dict[str, Any] = {
            "amount": charge.amount_cents, "currency": charge.currency.lower(),
            "payment_method": charge.credential["token"], "payment_method_types": ["card"], "confirm": True,
            "return_url": self.return_url, "metadata": dict(charge.metadata)}
        if charge.description:
            params["description"] = charge.description
        return {name: value for name, value in params.items() if value is not None}

    def _result(self, intent: Any) -> ChargeResult:
        """A PaymentIntent's state as the checkout needs it."""
        if intent.status == "succeeded":
            return ChargeResult(PaymentOutcome.SUCCEEDED, reference=intent.id)
        if intent.status == "requires_action":
            redirect = getattr(intent.next_action, "redirect_to_url", None)  # absent for `use_stripe_sdk`
            return ChargeResult(PaymentOutcome.ACTION_REQUIRED, reference=intent.id, reason=AUTHENTICATION_NEEDED,
                                action_url=redirect.url if redirect else None)
        if intent.status in ("requires_payment_method", "canceled"):  # failed authentication, a later decline
            return _declined(intent.last_payment_error, intent.id)
        raise PaymentUnavailable(f"Stripe has not settled payment {intent.id} yet (status {intent.status}); "
                                 "retry with the same idempotency key to read it again")


def _declined(error: Any, reference: str | None = None) -> ChargeResult:
    """A decline, in the words Stripe writes for the buyer (a card error's message is meant to be shown
    to them, and does not give away a suspicion of fraud), with the PaymentIntent it happened on."""
    intent = getattr(error, "payment_intent", None)
    reason = getattr(error, "message", None) or "the payment was declined"
    return ChargeResult(PaymentOutcome.DECLINED, reference=intent.id if intent else reference, reason=reason)


def _replayed(intent: Any) -> bool:
    """Whether Stripe answered from its idempotency record instead of acting on the request."""
    response = intent.last_response
    return response is not None and response.headers.get("idempotent-replayed") == "true"
