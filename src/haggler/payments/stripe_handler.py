"""Stripe as a payment handler, through the official ``stripe`` SDK (the optional ``haggler[stripe]`` extra).

Each charge is one PaymentIntent, created and confirmed in a single request (``confirm=true``) that
carries the charge's idempotency key as Stripe's ``Idempotency-Key``. One request, one key: when the
answer to it is lost (a timeout), the retry with the same key is answered by Stripe from its record of
the first request, so a payment is never taken twice. Stripe replays the *original* answer, though,
and a PaymentIntent moves on after it (the buyer completes 3-D Secure), so a replayed answer is
followed by a read of the PaymentIntent as it is now.

The credential's ``token`` is a Stripe id, and its prefix says what it is: a PaymentMethod (``pm_…``)
is confirmed as ``payment_method``; a shared payment token (``spt_…``), which a buyer's agent was
granted for this store's account (ACP's delegated payment, Stripe's Agentic Commerce), as
``shared_payment_granted_token``, from which Stripe clones the buyer's PaymentMethod.

3-D Secure run by the buyer's agent (ACP's ``authentication_required``): a PaymentIntent left in
``requires_action`` answers, besides Stripe's own page, an :class:`AuthenticationRequest` when the
operator gave the acquirer's details for the card's network (``HAGGLER_STRIPE_3DS_ACQUIRERS``:
Stripe's API does not publish them; the network is the PaymentMethod's ``card.brand``). The agent's
result then confirms that same PaymentIntent with Stripe's parameters for 3-D Secure run outside
Stripe (``payment_method_options[card][three_d_secure]``: ``cryptogram``, ``transaction_id``,
``version``, ``electronic_commerce_indicator``, ``ares_trans_status``; Stripe's "Import 3D Secure
results", a feature Stripe enables per account), and ``error_on_requires_action`` so that Stripe
does not start a 3-D Secure of its own; a failed result cancels the PaymentIntent: nothing is taken.

The SDK is imported when a handler is built, never when ``haggler.payments`` is imported, so a store
without the extra runs and only a store configured for Stripe needs it.
"""

from __future__ import annotations

import importlib
import json
import os
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from haggler.payments.handler import DIRECTORY_SERVERS, Acquirer, AuthenticationRequest, Charge, ChargeResult
from haggler.payments.handler import PaymentOutcome, PaymentSetupError, PaymentUnavailable

#: Where the secret key comes from when none is passed: an environment variable, never a command line
#: (where any user of the machine can read it in the process list).
KEY_ENV = "HAGGLER_STRIPE_API_KEY"
#: For tests only: where the SDK sends its requests instead of Stripe (a local fake of Stripe's API).
API_BASE_ENV = "HAGGLER_STRIPE_API_BASE"
INSTALL_HINT = "pip install 'haggler[stripe]'"
#: The keys that can create PaymentIntents: secret (``sk_``) and restricted (``rk_``); a publishable
#: key (``pk_``) cannot, and the ``_live_`` ones take real money.
KEY_PREFIXES = ("sk_", "rk_")
LIVE_KEY_PREFIXES = ("sk_live_", "rk_live_")
#: A token with this prefix is a shared payment token, confirmed as ``shared_payment_granted_token``.
SHARED_TOKEN_PREFIX = "spt_"
#: The PaymentIntent parameters a credential's token goes in: a refusal naming one is the buyer's.
_METHOD_PARAM, _SHARED_TOKEN_PARAM = "payment_method", "shared_payment_granted_token"

AUTHENTICATION_NEEDED = "the card issuer asks the buyer to authenticate the payment (3-D Secure)"
#: Where the acquirer's details for 3-D Secure run by a buyer's agent come from: a JSON object by
#: directory server (``visa``, ``mastercard``, ``american_express``), each ``{"acquirer_bin",
#: "acquirer_country", "acquirer_merchant_id", "merchant_name"[, "requestor_id"]}``, as the acquirer
#: (Stripe, on request) gave them to the store.
ACQUIRERS_ENV = "HAGGLER_STRIPE_3DS_ACQUIRERS"
#: Each acquirer field, and its longest value (EMV 3-D Secure's, as ACP's AuthenticationMetadata has them).
_ACQUIRER_FIELDS = {"acquirer_bin": 11, "acquirer_country": 2, "acquirer_merchant_id": 35, "merchant_name": 40,
                    "requestor_id": 35}
#: A PaymentMethod's ``card.brand`` as the directory server of its network; other brands have none here.
_DIRECTORY_SERVER = {"visa": "visa", "mastercard": "mastercard", "amex": "american_express"}
#: The 3-D Secure outcomes as EMV 3-D Secure's ``transStatus``, which Stripe takes as ``ares_trans_status``.
_TRANS_STATUS = {"authenticated": "Y", "attempt_acknowledged": "A", "informational": "I"}


def read_acquirers(text: str) -> dict[str, Acquirer]:
    """The acquirers of :data:`ACQUIRERS_ENV`, each field checked (present, a string, within its
    length; the country two letters), so that a mistake stops start-up naming the field rather than
    sending agents metadata no directory server takes."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise PaymentSetupError(f"{ACQUIRERS_ENV} is not JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise PaymentSetupError(f"{ACQUIRERS_ENV} must be a JSON object by directory server "
                                f"({', '.join(DIRECTORY_SERVERS)})")
    acquirers = {}
    for server, fields in raw.items():
        where = f"{ACQUIRERS_ENV}: {server}"
        if server not in DIRECTORY_SERVERS:
            raise PaymentSetupError(f"{where} is not a directory server ({', '.join(DIRECTORY_SERVERS)})")
        if not isinstance(fields, dict) or set(fields) - set(_ACQUIRER_FIELDS):
            raise PaymentSetupError(f"{where} must be an object of {', '.join(_ACQUIRER_FIELDS)}")
        for name, longest in _ACQUIRER_FIELDS.items():
            value = fields.get(name)
            if value is None and name == "requestor_id":
                continue
            if not isinstance(value, str) or not value.strip() or len(value) > longest:
                raise PaymentSetupError(f"{where}.{name} must be a string of 1 to {longest} characters")
        if not (fields["acquirer_country"].isascii() and fields["acquirer_country"].isalpha()):
            raise PaymentSetupError(f"{where}.acquirer_country must be an ISO 3166-1 alpha-2 code")
        acquirers[server] = Acquirer(fields["acquirer_bin"], fields["acquirer_country"].upper(),
                                     fields["acquirer_merchant_id"], fields["merchant_name"],
                                     fields.get("requestor_id"))
    return acquirers


def check_key(key: str) -> None:
    """Refuse what cannot be a secret key before anything is sent (a publishable key pasted by
    mistake, a line copied with its spaces), naming the variable and never the key itself."""
    if not key.startswith(KEY_PREFIXES) or any(c.isspace() for c in key):
        raise PaymentSetupError(f"{KEY_ENV} does not hold a Stripe secret key: it must start with sk_ (secret) or "
                                "rk_ (restricted), without spaces; a publishable key (pk_) cannot take payments")


class StripeHandler:
    """Charges cards through Stripe PaymentIntents; the credential's ``token`` is the PaymentMethod
    (``pm_…``) or the shared payment token (``spt_…``) the buyer's agent obtained from Stripe.

    ``return_url`` is where Stripe sends the buyer back after 3-D Secure, for a charge that brings no
    page of its own (:attr:`Charge.return_url`, which UCP's checkout sets to the store's page): with
    one, a charge that needs authentication comes back with a page to send the buyer to
    (``action_url``); without either Stripe expects the authentication to run in Stripe.js, which an
    agent cannot do. ``account_id`` is the Stripe account the key charges for (``acct_…``), which the
    checkouts publish so that a buyer's agent scopes the token it obtains to this store; when not
    given it is asked of Stripe here, which also proves the key before the first buyer pays.
    ``acquirers``: the acquirer's details by directory server, for 3-D Secure run by a buyer's agent
    (when not given, :data:`ACQUIRERS_ENV`; none: agents are not asked to). ``api_base`` points the
    SDK elsewhere than ``https://api.stripe.com`` (a test double).
    """

    def __init__(self, api_key: str | None = None, *, handler_id: str = "stripe", return_url: str | None = None,
                 account_id: str | None = None, api_base: str | None = None, timeout: float = 30.0,
                 max_network_retries: int = 2, acquirers: Mapping[str, Acquirer] | None = None) -> None:
        key = api_key or os.environ.get(KEY_ENV)
        if not key:
            raise PaymentSetupError(f"the Stripe payment handler needs a secret API key: set {KEY_ENV}")
        check_key(key)
        if account_id is not None and not account_id.startswith("acct_"):
            raise PaymentSetupError(f"a Stripe account id starts with acct_, got {account_id!r}")
        try:
            self._stripe: ModuleType = importlib.import_module("stripe")
        except ImportError as exc:
            raise PaymentSetupError(f"the Stripe payment handler needs the `stripe` package: {INSTALL_HINT}") from exc
        self.id = handler_id
        self.return_url = return_url
        if acquirers is None:
            acquirers = read_acquirers(os.environ[ACQUIRERS_ENV]) if os.environ.get(ACQUIRERS_ENV) else {}
        self.acquirers: dict[str, Acquirer] = dict(acquirers)
        #: ``production`` for a key that takes real money (``sk_live_``, ``rk_live_``), else ``sandbox``
        #: (Stripe's test mode), in the words both checkout protocols declare a handler's environment with.
        self.environment = "production" if key.startswith(LIVE_KEY_PREFIXES) else "sandbox"
        self._http = self._stripe.RequestsClient(timeout=timeout)
        self._client = self._stripe.StripeClient(
            key, base_addresses={"api": api_base} if api_base else None, max_network_retries=max_network_retries,
            http_client=self._http)
        self.account_id: str = account_id or self._ask_account()

    def _ask_account(self) -> str:
        """The key's account, from ``GET /v1/account``. Its connection is closed afterwards, so that
        a store forking its workers next (``serve --workers``) shares no socket between them."""
        try:
            return str(self._client.v1.accounts.retrieve_current().id)
        except self._troubles as exc:
            raise self._trouble(exc, "read access to the account",
                                "the account the key belongs to is not known") from exc
        finally:
            self._http.close()

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
            if intent.status == "requires_action" and charge.authentication is not None:
                return self._authenticated(intent, charge)
            return self._result(intent)
        except stripe.CardError as exc:
            return _declined(exc.error)
        except stripe.InvalidRequestError as exc:
            # The buyer's token: no such PaymentMethod or grant, or one that cannot pay (but a parameter
            # Stripe does not know at all, for an account without shared payment tokens, is the operator's).
            if exc.param in (_METHOD_PARAM, _SHARED_TOKEN_PARAM) and exc.code != "parameter_unknown":
                return ChargeResult(PaymentOutcome.DECLINED, reason="the payment method was not accepted")
            raise PaymentSetupError(f"Stripe rejected the charge request: {exc.user_message}") from exc
        except stripe.IdempotencyError as exc:
            raise PaymentSetupError("the idempotency key was already used for a different charge "
                                    f"(Stripe: {exc.user_message})") from exc
        except self._troubles as exc:
            raise self._trouble(exc, "PaymentIntents write access", "retry with the same idempotency key") from exc

    def retrieve(self, reference: str) -> ChargeResult:
        """The PaymentIntent ``reference`` as it stands now (``GET /v1/payment_intents/{id}``), read as
        a charge's answer is: how the store's page learns that the buyer it sent to 3-D Secure came
        back authenticated (or not). An id Stripe does not know under this key is the operator's
        problem (another account's key), not the buyer's."""
        try:
            return self._result(self._client.v1.payment_intents.retrieve(reference))
        except self._stripe.InvalidRequestError as exc:
            raise PaymentSetupError(f"Stripe cannot read payment {reference}: {exc.user_message}") from exc
        except self._troubles as exc:
            raise self._trouble(exc, "PaymentIntents read access", "read it again later") from exc

    def _authenticated(self, intent: Any, charge: Charge) -> ChargeResult:
        """The PaymentIntent waiting for 3-D Secure, continued with the buyer's result under a key of
        its own (the charge's and the result's): confirmed with it when the issuer authenticated, else
        canceled, so that no later confirmation can take the money."""
        result = charge.authentication
        assert result is not None
        intents = self._client.v1.payment_intents
        options = {"idempotency_key": f"{charge.idempotency_key}-3ds-{result.digest}"}
        if not result.authenticated:
            intents.cancel(intent.id, {"cancellation_reason": "abandoned"}, options)
            return ChargeResult(PaymentOutcome.DECLINED, reference=intent.id,
                                reason=f"3-D Secure authentication did not succeed ({result.outcome}): nothing was "
                                       "charged")
        three_d_secure = {"cryptogram": result.cryptogram, "transaction_id": result.transaction_id,
                          "version": result.version,
                          "electronic_commerce_indicator": result.electronic_commerce_indicator,
                          "ares_trans_status": _TRANS_STATUS[result.outcome]}
        confirmed = intents.confirm(intent.id, {"payment_method_options": {"card": {"three_d_secure": three_d_secure}},
                                                "error_on_requires_action": True}, options)
        if _replayed(confirmed):
            confirmed = intents.retrieve(intent.id)
        return self._result(confirmed)

    @property
    def _troubles(self) -> tuple[type[Exception], ...]:
        """The SDK's errors that are neither the buyer's nor the request's: no answer, or the key refused."""
        stripe = self._stripe
        return (stripe.APIConnectionError, stripe.APIError, stripe.RateLimitError, stripe.AuthenticationError,
                stripe.PermissionError)

    def _trouble(self, exc: Any, access: str, then: str) -> Exception:
        """One of :attr:`_troubles` as the handler reports it: a Stripe that did not answer (down,
        slow, throttling: ``then`` says what to do) is :class:`PaymentUnavailable`; a key it refuses,
        or one without ``access``, is the operator's :class:`PaymentSetupError`."""
        if isinstance(exc, (self._stripe.AuthenticationError, self._stripe.PermissionError)):
            return PaymentSetupError(f"Stripe refused the API key (HTTP {exc.http_status}): check {KEY_ENV} "
                                     f"holds a secret key of the account, with {access}")
        answer = f"HTTP {exc.http_status}" if exc.http_status else "no answer"
        return PaymentUnavailable(f"Stripe did not answer ({type(exc).__name__}, {answer}); {then}")

    def _params(self, charge: Charge) -> dict[str, Any]:
        token = str(charge.credential["token"])
        source = _SHARED_TOKEN_PARAM if token.startswith(SHARED_TOKEN_PREFIX) else _METHOD_PARAM
        params: dict[str, Any] = {
            "amount": charge.amount_cents, "currency": charge.currency.lower(), source: token,
            "payment_method_types": ["card"], "confirm": True,
            "return_url": charge.return_url or self.return_url,
            "metadata": dict(charge.metadata)}
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
                                action_url=redirect.url if redirect else None,
                                authentication=self._authentication_request(intent))
        if intent.status in ("requires_payment_method", "canceled"):  # failed authentication, a later decline
            return _declined(intent.last_payment_error, intent.id)
        raise PaymentUnavailable(f"Stripe has not settled payment {intent.id} yet (status {intent.status}); "
                                 "retry with the same idempotency key to read it again")


    def _authentication_request(self, intent: Any) -> AuthenticationRequest | None:
        """What a buyer's agent needs to run 3-D Secure for ``intent``: the acquirer the operator gave
        for the network of its card (read from its PaymentMethod), or None when none was given."""
        method = intent.payment_method
        if not self.acquirers or method is None:
            return None
        if isinstance(method, str):
            method = self._client.v1.payment_methods.retrieve(method)
        card = getattr(method, "card", None)
        server = _DIRECTORY_SERVER.get(getattr(card, "brand", None) or "")
        acquirer = self.acquirers.get(server) if server else None
        return AuthenticationRequest(acquirer, server) if acquirer and server else None


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
