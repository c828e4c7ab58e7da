"""A fake of Stripe's HTTP API on a free loopback port, speaking the PaymentIntents endpoints as the
official ``stripe`` SDK calls them (form-encoded requests, JSON answers shaped like Stripe's objects
and errors), so the Stripe payment handler's tests run the real SDK over real HTTP.

What it does as Stripe does:

- ``POST /v1/payment_intents`` creates a PaymentIntent; with ``confirm=true`` it pays with the
  ``payment_method`` at once, behaving as Stripe's documented test PaymentMethods do
  (``TEST_CARDS``): ``pm_card_visa`` succeeds, ``pm_card_chargeDeclined`` (and
  ``pm_card_visa_chargeDeclined``) is declined with a 402 ``card_error`` (``card_declined``,
  ``generic_decline``), ``pm_card_visa_chargeDeclinedInsufficientFunds`` likewise with
  ``insufficient_funds``, and ``pm_card_authenticationRequired`` / ``pm_card_threeDSecure2Required``
  leave it in ``requires_action``: its ``next_action`` is a ``redirect_to_url`` when the request
  gave a ``return_url``, else ``use_stripe_sdk``. Any other PaymentMethod is a 400 ``resource_missing``.
  With ``shared_payment_granted_token`` instead it pays with the PaymentMethod the token was granted
  for (as Stripe clones it), an unknown token being a 400 ``resource_missing`` naming that parameter.
- ``POST /v1/test_helpers/shared_payment/granted_tokens`` grants the account a shared payment token
  (``spt_…``) for a test ``payment_method``, as Stripe's test helper does (its ``usage_limits`` are
  kept, not enforced).
- ``GET /v1/account`` answers the key's account, ``ACCOUNT_ID``.
- ``GET /v1/payment_intents/{id}`` reads one back; ``GET /v1/payment_methods/{id}`` a test
  PaymentMethod, with its ``card.brand`` (``pm_card_mastercard_threeDSecure`` is a Mastercard asking
  for 3-D Secure, ``pm_card_discover_threeDSecure`` a Discover card doing so; the others are Visa).
- ``POST /v1/payment_intents/{id}/confirm`` with 3-D Secure run outside Stripe
  (``payment_method_options[card][three_d_secure]``, Stripe's import of 3-D Secure results) on a
  PaymentIntent in ``requires_action``: ``cryptogram``, ``transaction_id`` and ``version`` are
  required (400 ``parameter_missing``); ``ares_trans_status`` ``Y``, ``A`` or ``I`` takes the
  money, any other fails the authentication (``requires_payment_method``); any other confirmation
  is a 400 ``payment_intent_unexpected_state``.
- ``POST /v1/payment_intents/{id}/cancel`` cancels one not yet succeeded (else 400
  ``payment_intent_unexpected_state``).
- ``Idempotency-Key``: a POST with a key seen before (for the same API key) gets the stored answer
  again, status and body, with ``Idempotent-Replayed: true``, and does nothing; with other parameters
  or on another endpoint it is a 400 ``idempotency_error``. Errors before the endpoint runs (a refused key) are not stored.
- ``Authorization: Bearer KEY``: only the fake's own ``sk_test_`` key is accepted, else a 401.

The buyer's side of 3-D Secure: ``POST`` the ``redirect_to_url`` URL with the form field
``outcome=complete`` (the PaymentIntent succeeds and the money is taken) or ``outcome=fail`` (it goes
back to ``requires_payment_method`` with a ``last_payment_error``), as the buttons of Stripe's test
authentication page do.

Test switches: ``delay`` (seconds) answers every API request that much later, after acting on it,
as a Stripe whose answer is slow to arrive (to trip a client timeout); ``failing_with`` (an HTTP
status) answers every API request with that ``api_error``, acting on nothing; ``shared_tokens``
(on by default) off refuses ``shared_payment_granted_token`` as an unknown parameter, as Stripe does an
account without its shared payment token preview; ``in_flight`` (idempotency keys) answers a create
under one of them 409 ``idempotency_error``, acting on nothing, as Stripe answers a request whose key
another request is still using.

Kept for the test to check: ``requests``, each API request received (``Sent``); ``charges``, the
number of payments taken (money moved), which an idempotent retry must not increase; ``intents``,
the PaymentIntents by id; ``granted``, the shared payment tokens by id.
"""

from __future__ import annotations

import asyncio
import re
import secrets
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

import httpx

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from haggler.server.threaded import ThreadedServer

API_KEY = "sk_test_fake_51HagglerStripeKey"
ACCOUNT_ID = "acct_1HagglerFakeStore"


@dataclass(frozen=True)
class Card:
    """How a test PaymentMethod behaves: ``decline`` is ``(decline_code, message)``."""

    decline: tuple[str, str] | None = None
    authenticate: bool = False
    brand: str = "visa"


GENERIC_DECLINE = Card(decline=("generic_decline", "Your card was declined."))
THREE_D_SECURE = Card(authenticate=True)
TEST_CARDS: dict[str, Card] = {
    "pm_card_visa": Card(),
    "pm_card_chargeDeclined": GENERIC_DECLINE,
    "pm_card_visa_chargeDeclined": GENERIC_DECLINE,
    "pm_card_visa_chargeDeclinedInsufficientFunds": Card(
        decline=("insufficient_funds", "Your card has insufficient funds.")),
    "pm_card_authenticationRequired": THREE_D_SECURE,
    "pm_card_threeDSecure2Required": THREE_D_SECURE,
    "pm_card_mastercard_threeDSecure": Card(authenticate=True, brand="mastercard"),
    "pm_card_discover_threeDSecure": Card(authenticate=True, brand="discover"),
}
#: The ``ares_trans_status`` values after which an issuer takes an imported authentication.
AUTHENTICATED = ("Y", "A", "I")

#: Stripe's words when the buyer fails 3-D Secure (``payment_intent_authentication_failure``).
AUTHENTICATION_FAILED = ("The provided PaymentMethod has failed authentication. You can provide payment_method_data "
                         "or a new PaymentMethod to attempt to fulfill this PaymentIntent again.")


@dataclass(frozen=True)
class Sent:
    """One API request as the fake received it (form fields decoded, see ``decode_form``)."""

    method: str
    path: str
    idempotency_key: str | None
    params: dict[str, Any]


@dataclass(frozen=True)
class Answer:
    status: int
    body: dict[str, Any]


class FakeStripe:
    def __init__(self, api_key: str = API_KEY) -> None:
        assert api_key.startswith("sk_test_"), "the fake takes test-mode secret keys only"
        self.api_key = api_key
        self.delay = 0.0
        self.failing_with: int | None = None
        self.shared_tokens = True
        self.in_flight: set[str] = set()
        self.requests: list[Sent] = []
        self.intents: dict[str, dict[str, Any]] = {}
        self.granted: dict[str, dict[str, Any]] = {}
        self.charges = 0
        self._answers: dict[tuple[str, str], tuple[str, dict[str, Any], Answer]] = {}
        self._lock = threading.Lock()
        app = Starlette(routes=[
            Route("/v1/payment_intents", self._create, methods=["POST"]),
            Route("/v1/payment_intents/{intent}", self._retrieve, methods=["GET"]),
            Route("/v1/payment_intents/{intent}/confirm", self._confirm, methods=["POST"]),
            Route("/v1/payment_intents/{intent}/cancel", self._cancel, methods=["POST"]),
            Route("/v1/payment_methods/{method}", self._payment_method, methods=["GET"]),
            Route("/v1/test_helpers/shared_payment/granted_tokens", self._grant, methods=["POST"]),
            Route("/v1/account", self._account, methods=["GET"]),
            Route("/3d_secure/{intent}", self._authenticate, methods=["POST"]),
        ])
        self._server = ThreadedServer(app)
        self.base = self._server.base

    def __enter__(self) -> FakeStripe:
        self._server.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)

    def grant(self, payment_method: str, currency: str = "usd", max_amount: int = 100_000) -> str:
        """A shared payment token for ``payment_method``, granted to this account through the test
        helper over HTTP, as a buyer's agent has Stripe grant one to a seller."""
        answer = httpx.post(f"{self.base}/v1/test_helpers/shared_payment/granted_tokens",
                            headers={"Authorization": f"Bearer {self.api_key}"},
                            data={"payment_method": payment_method, "usage_limits[currency]": currency,
                                  "usage_limits[max_amount]": str(max_amount)})
        assert answer.status_code == 200, answer.text
        return str(answer.json()["id"])

    def reset(self) -> None:
        """Forget every request, PaymentIntent and stored answer, and turn the switches off."""
        with self._lock:
            self.delay, self.failing_with, self.shared_tokens, self.charges = 0.0, None, True, 0
            self.in_flight.clear()
            self.requests.clear()
            self.intents.clear()
            self.granted.clear()
            self._answers.clear()

    async def _create(self, request: Request) -> Response:
        return await self._post(request, self._pay)

    async def _confirm(self, request: Request) -> Response:
        return await self._post(request, lambda params: self._on_intent(request, params, self._authenticated))

    async def _cancel(self, request: Request) -> Response:
        return await self._post(request, lambda params: self._on_intent(request, params, self._canceled))

    async def _post(self, request: Request, act: Any) -> Response:
        """A POST under Stripe's idempotency rules, ``act`` (params → Answer) run once per key."""
        params = decode_form((await request.body()).decode())
        key = request.headers.get("idempotency-key")
        with self._lock:
            self.requests.append(Sent("POST", request.url.path, key, params))
            answer, replayed = self._answer_once(request, key, params, act)
        return await self._respond(answer, key, replayed)

    def _answer_once(self, request: Request, key: str | None, params: dict[str, Any],
                     act: Any) -> tuple[Answer, bool]:
        """The answer to a POST, and whether it is a replay of a stored one."""
        refused = self._refused(request)
        if refused is not None:
            return refused, False
        if key in self.in_flight:
            return _error(409, "idempotency_error",
                          "There is currently another in-progress request using this Idempotent Key (that probably "
                          "means you submitted twice, and the other request is still going through): "
                          f"{key}. Please try again later."), False
        stored = self._answers.get((self.api_key, key)) if key else None
        if stored is None:
            answer = act(params)
            if key:
                self._answers[(self.api_key, key)] = (request.url.path, params, answer)
            return answer, False
        first_path, first_params, answer = stored
        if (first_path, first_params) != (request.url.path, params):
            return _error(400, "idempotency_error",
                          "Keys for idempotent requests can only be used with the same parameters they were first "
                          f"used with. Try using a key other than '{key}' if you meant to execute a different "
                          "request."), False
        return answer, True

    async def _retrieve(self, request: Request) -> Response:
        intent_id = request.path_params["intent"]
        with self._lock:
            self.requests.append(Sent("GET", request.url.path, None, {}))
            refused = self._refused(request)
            if refused is not None:
                answer = refused
            elif (intent := self.intents.get(intent_id)) is None:
                answer = _error(404, "invalid_request_error", f"No such payment_intent: '{intent_id}'",
                                code="resource_missing", param="intent")
            else:
                answer = Answer(200, dict(intent))
        return await self._respond(answer, None, replayed=False)

    def _on_intent(self, request: Request, params: dict[str, Any], act: Any) -> Answer:
        """``act`` (intent, params → Answer) on the PaymentIntent the path names, or a 404."""
        intent = self.intents.get(request.path_params["intent"])
        if intent is None:
            return _error(404, "invalid_request_error", f"No such payment_intent: '{request.path_params['intent']}'",
                          code="resource_missing", param="intent")
        return act(intent, params)

    def _authenticated(self, intent: dict[str, Any], params: dict[str, Any]) -> Answer:
        """A confirmation with 3-D Secure run outside Stripe (the only confirmation the fake knows)."""
        three_d_secure = params.get("payment_method_options", {}).get("card", {}).get("three_d_secure")
        if intent["status"] != "requires_action" or three_d_secure is None:
            return _unexpected(intent, "confirm")
        missing = next((p for p in ("cryptogram", "transaction_id", "version") if not three_d_secure.get(p)), None)
        if missing is not None:
            return _error(400, "invalid_request_error", f"Missing required param: {missing}.", code="parameter_missing",
                          param=f"payment_method_options[card][three_d_secure][{missing}]")
        intent["next_action"] = None
        if three_d_secure.get("ares_trans_status") in AUTHENTICATED:
            self._succeed(intent)
        else:
            intent["status"] = "requires_payment_method"
            intent["last_payment_error"] = {"type": "card_error", "message": AUTHENTICATION_FAILED,
                                            "code": "payment_intent_authentication_failure"}
        return Answer(200, dict(intent))

    def _canceled(self, intent: dict[str, Any], params: dict[str, Any]) -> Answer:
        if intent["status"] in ("succeeded", "canceled"):
            return _unexpected(intent, "cancel")
        intent.update(status="canceled", next_action=None, cancellation_reason=params.get("cancellation_reason"))
        return Answer(200, dict(intent))

    async def _payment_method(self, request: Request) -> Response:
        method = request.path_params["method"]
        with self._lock:
            self.requests.append(Sent("GET", request.url.path, None, {}))
            answer = self._refused(request)
            if answer is None and method not in TEST_CARDS:
                answer = _no_such("PaymentMethod", "payment_method", method)
            if answer is None:
                answer = Answer(200, {"id": method, "object": "payment_method", "type": "card", "livemode": False,
                                      "card": {"brand": TEST_CARDS[method].brand, "last4": "3155"}})
        return await self._respond(answer, None, replayed=False)

    async def _grant(self, request: Request) -> Response:
        params = decode_form((await request.body()).decode())
        with self._lock:
            self.requests.append(Sent("POST", request.url.path, request.headers.get("idempotency-key"), params))
            answer = self._refused(request)
            method = params.get("payment_method")
            if answer is None and method not in TEST_CARDS:
                answer = _no_such("PaymentMethod", "payment_method", method)
            if answer is None:
                token = {"id": _id("spt"), "object": "shared_payment.granted_token", "created": int(time.time()),
                         "livemode": False, "payment_method": method,
                         "usage_limits": params.get("usage_limits", {})}
                self.granted[token["id"]] = token
                answer = Answer(200, dict(token))
        return await self._respond(answer, None, replayed=False)

    async def _account(self, request: Request) -> Response:
        with self._lock:
            self.requests.append(Sent("GET", request.url.path, None, {}))
            answer = self._refused(request) or Answer(200, {"id": ACCOUNT_ID, "object": "account",
                                                            "charges_enabled": True, "country": "US"})
        return await self._respond(answer, None, replayed=False)

    async def _authenticate(self, request: Request) -> Response:
        outcome = decode_form((await request.body()).decode()).get("outcome")
        with self._lock:
            intent = self.intents.get(request.path_params["intent"])
            if intent is None or intent["status"] != "requires_action" or outcome not in ("complete", "fail"):
                return PlainTextResponse("nothing to authenticate", status_code=400)
            intent["next_action"] = None
            if outcome == "complete":
                self._succeed(intent)
            else:
                intent["status"] = "requires_payment_method"
                intent["last_payment_error"] = {"type": "invalid_request_error", "message": AUTHENTICATION_FAILED,
                                                "code": "payment_intent_authentication_failure"}
        return PlainTextResponse(f"authentication {outcome}d")

    def _refused(self, request: Request) -> Answer | None:
        """The answers given before an endpoint runs (so never stored for a retry): a switched-on
        outage, or an API key that is not the fake's."""
        if self.failing_with is not None:
            return _error(self.failing_with, "api_error", "An unknown error occurred")
        given = request.headers.get("authorization", "").removeprefix("Bearer ")
        if given != self.api_key:
            shown = f"{given[:8]}****{given[-4:]}" if given else "none"
            return _error(401, "invalid_request_error", f"Invalid API Key provided: {shown}")
        return None

    def _pay(self, params: dict[str, Any]) -> Answer:
        """Create the PaymentIntent and, asked to confirm it, pay with its PaymentMethod."""
        try:
            amount = int(params["amount"])
            currency = params["currency"]
        except (KeyError, ValueError):
            return _error(400, "invalid_request_error", "Missing required param: amount and currency.",
                          code="parameter_missing", param="amount")
        method = params.get("payment_method")
        shared = params.get("shared_payment_granted_token")
        if shared is not None:
            if not self.shared_tokens:
                return _error(400, "invalid_request_error", "Received unknown parameter: shared_payment_granted_token",
                              code="parameter_unknown", param="shared_payment_granted_token")
            if shared not in self.granted:
                return _no_such("shared_payment_granted_token", "shared_payment_granted_token", shared)
            method = self.granted[shared]["payment_method"]
        elif method is not None and method not in TEST_CARDS:
            return _no_such("PaymentMethod", "payment_method", method)
        intent = new_intent(amount, currency, {**params, "payment_method": method} if method else params)
        self.intents[intent["id"]] = intent
        if params.get("confirm") != "true" or method is None:
            return Answer(200, dict(intent))
        card = TEST_CARDS[method]
        if card.decline:
            decline_code, message = card.decline
            error = {"type": "card_error", "code": "card_declined", "decline_code": decline_code, "message": message,
                     "charge": _id("ch"), "doc_url": "https://stripe.com/docs/error-codes/card-declined"}
            intent.update(status="requires_payment_method", last_payment_error=error, latest_charge=error["charge"])
            return Answer(402, {"error": {**error, "payment_intent": dict(intent)}})
        if card.authenticate:
            intent["status"] = "requires_action"
            if "return_url" in params:
                intent["next_action"] = {"type": "redirect_to_url", "redirect_to_url": {
                    "url": f"{self.base}/3d_secure/{intent['id']}", "return_url": params["return_url"]}}
            else:
                intent["next_action"] = {"type": "use_stripe_sdk", "use_stripe_sdk": {
                    "type": "three_d_secure_redirect", "source": _id("src")}}
            return Answer(200, dict(intent))
        self._succeed(intent)
        return Answer(200, dict(intent))

    def _succeed(self, intent: dict[str, Any]) -> None:
        intent.update(status="succeeded", amount_received=intent["amount"], latest_charge=_id("ch"),
                      last_payment_error=None)
        self.charges += 1

    async def _respond(self, answer: Answer, key: str | None, replayed: bool) -> Response:
        if self.delay:
            await asyncio.sleep(self.delay)
        headers = {"request-id": _id("req")}
        if key:
            headers["idempotency-key"] = key
        if replayed:
            headers["idempotent-replayed"] = "true"
        return JSONResponse(answer.body, status_code=answer.status, headers=headers)


def decode_form(body: str) -> dict[str, Any]:
    """Stripe's form encoding back into values: ``metadata[order]=x`` into ``{"metadata": {"order": "x"}}``,
    ``payment_method_types[0]=card`` into ``{"payment_method_types": ["card"]}``, and so on at any
    depth (``payment_method_options[card][three_d_secure][version]``)."""
    decoded: dict[str, Any] = {}
    for name, value in parse_qsl(body, keep_blank_values=True):
        first, *rest = re.findall(r"^\w+|(?<=\[)\w*(?=\])", name)
        if not rest:
            decoded[name] = value
            continue
        parent: Any = decoded
        for key, below in zip([first, *rest], rest):
            if below.isdigit():
                parent = parent.setdefault(key, [])
            else:
                parent = parent.setdefault(key, {})
        if isinstance(parent, list):
            parent.append(value)
        else:
            parent[rest[-1]] = value
    return decoded


def new_intent(amount: int, currency: str, params: dict[str, Any]) -> dict[str, Any]:
    """A PaymentIntent as Stripe returns it, with the fields the SDK and the handler read."""
    intent_id = _id("pi")
    return {
        "id": intent_id, "object": "payment_intent", "amount": amount, "amount_received": 0,
        "currency": currency.lower(), "status": "requires_payment_method" if "payment_method" not in params
        else "requires_confirmation", "capture_method": "automatic", "confirmation_method": "automatic",
        "client_secret": f"{intent_id}_secret_{secrets.token_hex(12)}", "created": int(time.time()),
        "description": params.get("description"), "metadata": params.get("metadata", {}), "livemode": False,
        "payment_method": params.get("payment_method"),
        "payment_method_types": params.get("payment_method_types", ["card"]),
        "next_action": None, "last_payment_error": None, "latest_charge": None,
    }


def _error(status: int, kind: str, message: str, *, code: str | None = None, param: str | None = None) -> Answer:
    error: dict[str, Any] = {"type": kind, "message": message}
    if code:
        error["code"] = code
    if param:
        error["param"] = param
    return Answer(status, {"error": error})


def _unexpected(intent: dict[str, Any], action: str) -> Answer:
    """Stripe's 400 for an action the PaymentIntent's status does not allow."""
    return _error(400, "invalid_request_error", f"You cannot {action} this PaymentIntent because it has a status of "
                  f"{intent['status']}.", code="payment_intent_unexpected_state")


def _no_such(kind: str, param: str, value: object) -> Answer:
    """Stripe's 400 for an id it does not know, naming the parameter that carried it."""
    return _error(400, "invalid_request_error", f"No such {kind}: '{value}'", code="resource_missing", param=param)


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"

