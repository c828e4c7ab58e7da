"""Speaking ACP to a store in tests: its key, the headers every request carries, request bodies,
and ACP's own JSON Schemas (vendored under ``tests/protocols/acp/contract``) to check answers by."""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from haggler.server.threaded import ThreadedServer

KEY = "acp-test-key-0123456789abcdef"
VERSION = "2026-04-17"
CONTRACT = Path(__file__).resolve().parent.parent / "protocols" / "acp" / "contract"
OPENAPI = CONTRACT / "openapi.agentic_checkout.yaml"


def headers(key: str | None = None, *, api_key: str = KEY, version: str | None = VERSION) -> dict[str, str]:
    sent = {"Authorization": f"Bearer {api_key}", "Idempotency-Key": key or str(uuid.uuid4()),
            "Request-Id": str(uuid.uuid4())}
    if version is not None:
        sent["API-Version"] = version
    return sent


ADDRESS = {"name": "Ada Lovelace", "line_one": "1 Analytical Way", "line_two": "Flat 2", "city": "Portland",
           "state": "OR", "country": "US", "postal_code": "97201"}


def create_body(product_id: str = "green_tea", quantity: int = 1, **extra: Any) -> dict[str, Any]:
    return {"line_items": [{"id": product_id, "quantity": quantity}], "currency": "usd",
            "capabilities": {"extensions": ["discount"]}, **extra}


def ready_body(product_id: str = "green_tea", quantity: int = 1, **extra: Any) -> dict[str, Any]:
    """A create body with a buyer and an address; the ground option still to be chosen."""
    return create_body(product_id, quantity, **{"buyer": {"email": "ada@example.com", "first_name": "Ada"},
                                                "fulfillment_details": {"name": "Ada Lovelace", "address": ADDRESS},
                                                **extra})


def ready_session(http: httpx.Client, product_id: str = "green_tea", quantity: int = 1, **extra: Any) -> dict[str, Any]:
    """A session with an address and ground shipping chosen: ready for payment."""
    created = http.post("/checkout_sessions", headers=headers(), json=ready_body(product_id, quantity, **extra))
    assert created.status_code == 201, created.text
    chosen = http.post(f"/checkout_sessions/{created.json()['id']}", headers=headers(),
                       json={"selected_fulfillment_options": [{"type": "shipping", "option_id": "ground",
                                                               "item_ids": []}]})
    assert chosen.status_code == 200 and chosen.json()["status"] == "ready_for_payment", chosen.text
    return dict(chosen.json())


def pay(token: str = "success_token", handler_id: str = "mock_payment_handler") -> dict[str, Any]:
    return {"payment_data": {"handler_id": handler_id,
                             "instrument": {"type": "card", "credential": {"type": "spt", "token": token}}}}


@functools.cache
def _document() -> dict[str, Any]:
    return dict(yaml.safe_load(OPENAPI.read_text()))


def conforms(body: Any, schema: str) -> None:
    """Fails unless ``body`` is valid against the named schema of ACP's own OpenAPI document."""
    document = _document()
    jsonschema.validate(body, {"$ref": f"#/components/schemas/{schema}", "components": document["components"]},
                        cls=jsonschema.Draft202012Validator, format_checker=jsonschema.FormatChecker())


WEBHOOK_OPENAPI = CONTRACT / "openapi.agentic_checkout_webhook.yaml"
WEBHOOK_SECRET = "whsec_test_0123456789abcdef"
#: The receiver's window for a signature's timestamp (the webhook document's recommendation).
SIGNATURE_WINDOW = 300


def webhook_conforms(event: Any) -> None:
    """Fails unless ``event`` is a valid ``WebhookEvent`` of ACP's webhook document, whose ``Order``
    is the checkout document's (its ``./openapi.agentic_checkout.yaml#...`` reference resolved)."""
    webhook = yaml.safe_load(WEBHOOK_OPENAPI.read_text())
    base = "https://contract.acp.test/"
    registry = Registry().with_resource(base + OPENAPI.name, Resource.from_contents(
        _document(), default_specification=DRAFT202012))
    schema = {"$id": base + WEBHOOK_OPENAPI.name, "$ref": "#/components/schemas/WebhookEvent",
              "components": webhook["components"]}
    jsonschema.Draft202012Validator(schema, registry=registry,
                                    format_checker=jsonschema.FormatChecker()).validate(event)


@dataclass
class Received:
    """One webhook request as it arrived, and what the receiver answered."""

    headers: dict[str, str]
    body: bytes
    status: int


class Receiver:
    """The agent platform's order webhook receiver, as the webhook document describes it: it checks
    ``Merchant-Signature`` (HMAC-SHA256 of ``<t>.<raw body>`` under ``secret``, ``t`` within
    :data:`SIGNATURE_WINDOW` of now) and answers 401 when it fails, else ``statuses`` first (one a
    request), then 200 ``{"received": true}``; ``events`` holds what it took, ``requests`` all."""

    def __init__(self, secret: str = WEBHOOK_SECRET, statuses: tuple[int, ...] = ()) -> None:
        self.secret = secret
        self.events: list[dict[str, Any]] = []
        self.requests: list[Received] = []
        self._statuses = list(statuses)
        self._lock = threading.Lock()

        async def order_events(request: Request) -> Response:
            body = await request.body()
            status = 200 if self.verifies(request.headers.get("merchant-signature"), body) else 401
            with self._lock:
                if status == 200 and self._statuses:
                    status = self._statuses.pop(0)
                self.requests.append(Received(dict(request.headers), body, status))
                if status == 200:
                    self.events.append(json.loads(body))
            if status == 401:
                return JSONResponse({"type": "invalid_request", "code": "invalid_signature",
                                     "message": "Webhook signature verification failed."}, status_code=401)
            return JSONResponse({"received": True}, status_code=status)

        self._server = ThreadedServer(Starlette(routes=[Route(WEBHOOK_PATH, order_events, methods=["POST"])]))
        self.url = ""

    def verifies(self, header: str | None, body: bytes, now: float | None = None) -> bool:
        """Whether ``header`` is a valid signature of ``body`` at ``now`` (default: the wall clock)."""
        found = re.fullmatch(r"t=(\d+),v1=([0-9a-f]{64})", header or "")
        if found is None:
            return False
        at, mac = int(found[1]), found[2]
        expected = hmac.new(self.secret.encode(), f"{at}.".encode() + body, hashlib.sha256).hexdigest()
        return abs((time.time() if now is None else now) - at) <= SIGNATURE_WINDOW and hmac.compare_digest(
            mac, expected)

    def wait(self, count: int = 1, timeout: float = 10.0) -> list[dict[str, Any]]:
        """The first ``count`` events taken, waiting for them up to ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                if len(self.events) >= count:
                    return list(self.events)
            time.sleep(0.02)
        raise AssertionError(f"{count} order events expected within {timeout}s; got {self.events}")

    def __enter__(self) -> "Receiver":
        self._server.__enter__()
        self.url = self._server.base + WEBHOOK_PATH
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)


#: Where the webhook document's receiver takes order events.
WEBHOOK_PATH = "/agentic_checkout/webhooks/order_events"
