"""Speaking ACP to a store in tests: its key, the headers every request carries, request bodies,
and ACP's own JSON Schemas (vendored under ``tests/protocols/acp/contract``) to check answers by."""

from __future__ import annotations

import functools
import uuid
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import yaml

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
