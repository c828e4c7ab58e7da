"""A UCP platform for the merchant's tests: a loopback server that serves the platform's profile
(naming its order webhook, and with ``ap2=True`` listing checkout and the AP2 mandates extension
with its P-256 signing key) and records the order events delivered to it, as a platform receives
them (the exact body, the headers) and checks their signature; it makes AP2 checkout mandates
(SD-JWT+KB, ``tests/support/sd_jwt.py``) and checks the store's merchant authorization with PyJWT.
And helpers to speak UCP to a store (headers, a ready-to-complete checkout)."""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import jwt
import rfc8785
from cryptography.hazmat.primitives.asymmetric import ec
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from haggler.commerce.merchant_data import load_seed, read_seed
from haggler.server.threaded import ThreadedServer
from haggler.storage.database import open_database

try:
    from tests.support.sd_jwt import b64url, bind, issue, jwk
except ImportError:  # pragma: no cover
    from support.sd_jwt import b64url, bind, issue, jwk  # type: ignore[no-redef]

#: The tests' own data set, in the UCP conformance suite's CSV layout.
TEA_SHOP = Path(__file__).resolve().parent.parent / "protocols" / "ucp" / "tea_shop"
SECRET = "test-simulation-secret"
VERSION = "2026-01-11"
AP2 = "dev.ucp.shopping.ap2_mandate"


def seed(db_url: str, directory: Path = TEA_SHOP) -> None:
    """Load a data set into the database at ``db_url`` (migrating it first)."""
    db = open_database(db_url)
    try:
        with db.write() as conn:
            load_seed(conn, read_seed(directory))
    finally:
        db.dispose()


@dataclass(frozen=True)
class Delivery:
    """One webhook request as it arrived."""

    headers: dict[str, str]
    body: bytes


class Platform:
    """The buyer's platform: ``profile_url`` for UCP-Agent, ``events`` as they arrive (and each
    request in ``deliveries``), ``profile_reads`` counted. The webhook answers ``statuses`` first,
    one a request, then 200. With ``ap2``, its profile lists checkout and AP2 too (``capabilities``,
    names a test may change) and publishes ``signing_keys``: the JWK of ``key``, its ``kid``."""

    def __init__(self, statuses: tuple[int, ...] = (), *, ap2: bool = False) -> None:
        self.events: list[dict[str, Any]] = []
        self.deliveries: list[Delivery] = []
        self.profile_reads = 0
        self._statuses = list(statuses)
        self._lock = threading.Lock()
        #: The platform's signing key (trusted platform provider flow) and the user's holder key.
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.kid = "platform_2026"
        self.holder = ec.generate_private_key(ec.SECP256R1())
        self.capabilities = ["dev.ucp.shopping.checkout", AP2] if ap2 else []
        self.signing_keys = [jwk(self.key, self.kid)] if ap2 else []

        async def profile(request: Request) -> JSONResponse:
            with self._lock:
                self.profile_reads += 1
            listed = [{"name": "dev.ucp.shopping.order", "version": VERSION,
                       "config": {"webhook_url": f"{self.base}/hooks/order"}},
                      *({"name": name, "version": VERSION} for name in self.capabilities)]
            return JSONResponse({"ucp": {"version": VERSION, "capabilities": listed},
                                 **({"signing_keys": self.signing_keys} if self.signing_keys else {})})

        async def hook(request: Request) -> Response:
            body = await request.body()
            with self._lock:
                self.deliveries.append(Delivery(dict(request.headers), body))
                if self._statuses:
                    return Response(status_code=self._statuses.pop(0))
                self.events.append(json.loads(body))
            return JSONResponse({"ok": True})

        self._server = ThreadedServer(Starlette(routes=[Route("/profile.json", profile),
                                                        Route("/hooks/order", hook, methods=["POST"])]))
        self.base = ""

    def __enter__(self) -> "Platform":
        self._server.__enter__()
        self.base = self._server.base
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.__exit__(*exc)

    @property
    def profile_url(self) -> str:
        return f"{self.base}/profile.json"

    def mandate(self, checkout: dict[str, Any], store: str, now: datetime, *,
                lifetime: timedelta = timedelta(minutes=15), key: ec.EllipticCurvePrivateKey | None = None,
                holder: ec.EllipticCurvePrivateKey | None = None, audience: str | None = None) -> str:
        """ap2-mandates.md, "Mandate Structure": the checkout mandate of ``checkout`` (the
        response as received, ``ap2.merchant_authorization`` included), an SD-JWT+KB made
        ``now``: issued by ``key`` (the platform's own unless another is given) under this
        platform's kid, the checkout a selectively disclosed ``checkout`` claim, ``exp`` after
        ``lifetime``, the user's holder key in ``cnf``, bound by ``holder`` (the user's unless
        another is given) for the store at base URL ``store`` (its profile URL as ``aud``)."""
        at = int(now.timestamp())
        claims = {"iat": at, "exp": at + int(lifetime.total_seconds()), "cnf": {"jwk": jwk(self.holder)}}
        sd_jwt = issue(claims, key or self.key, self.kid, disclosed={"checkout": checkout})
        return bind(sd_jwt, holder or self.holder, aud=audience or f"{store}/.well-known/ucp", iat=at)

    def wait_for(self, event_type: str, timeout: float = 5.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self._lock:
                found = next((e for e in self.events if e["event_type"] == event_type), None)
            if found is not None:
                return found
            time.sleep(0.02)
        raise AssertionError(f"no {event_type} event within {timeout}s; got {self.events}")


def signature_verifies(business_profile: dict[str, Any], delivery: Delivery, body: bytes | None = None) -> bool:
    """order.md, "Webhook Signature Verification", as a platform checks it, with PyJWT (a JOSE
    implementation that is not the store's): the key the ``Request-Signature`` header's ``kid``
    names among the business profile's ``signing_keys``, over the request body (or ``body``)."""
    signature = delivery.headers["request-signature"]
    kid = jwt.get_unverified_header(signature)["kid"]
    key = next(k for k in business_profile["signing_keys"] if k["kid"] == kid)
    try:
        jwt.PyJWS().decode_complete(signature, key=jwt.PyJWK(key), algorithms=[key["alg"]],
                                    detached_payload=delivery.body if body is None else body)
    except jwt.InvalidSignatureError:
        return False
    return True


def merchant_authorization_verifies(business_profile: dict[str, Any], checkout: dict[str, Any]) -> bool:
    """ap2-mandates.md, "Step 1" (the platform MUST verify the business's signature), with PyJWT and
    the ``rfc8785`` package directly: the detached JWS's payload put back as the base64url of the
    JCS of the checkout without ``ap2``, verified with the key its ``kid`` names among the business
    profile's ``signing_keys``, ES256 only."""
    header, empty, signature = checkout["ap2"]["merchant_authorization"].split(".")
    assert empty == ""
    payload = rfc8785.dumps({k: v for k, v in checkout.items() if k != "ap2"})
    kid = jwt.get_unverified_header(f"{header}..{signature}")["kid"]
    key = next(k for k in business_profile["signing_keys"] if k["kid"] == kid)
    try:
        jwt.PyJWS().decode(f"{header}.{b64url(payload)}.{signature}", key=jwt.PyJWK(key), algorithms=["ES256"])
    except jwt.InvalidSignatureError:
        return False
    return True


def headers(profile: str = "https://platform.example/profile.json", key: str | None = None,
            version: str | None = None) -> dict[str, str]:
    agent = f'profile="{profile}"' + (f'; version="{version}"' if version else "")
    return {"UCP-Agent": agent, "idempotency-key": key or str(uuid.uuid4()), "request-id": str(uuid.uuid4())}


def create_body(product_id: str = "green_tea", quantity: int = 1, **extra: Any) -> dict[str, Any]:
    return {"currency": "USD", "line_items": [{"item": {"id": product_id, "title": "whatever"}, "quantity": quantity}],
            "payment": {"instruments": [], "handlers": []}, **extra}


def shipping_to(country: str = "US", option: str | None = None, dest_id: str = "d1") -> dict[str, Any]:
    method: dict[str, Any] = {"type": "shipping", "destinations": [
        {"id": dest_id, "street_address": "9 Quay Rd", "address_locality": "Town", "postal_code": "12345",
         "address_country": country}], "selected_destination_id": dest_id}
    if option:
        method["groups"] = [{"selected_option_id": option}]
    return {"methods": [method]}


def ready_checkout(http: httpx.Client, product_id: str = "green_tea", quantity: int = 1,
                   profile: str = "https://platform.example/profile.json", **extra: Any) -> dict[str, Any]:
    """A checkout with a destination and the ground option chosen: ready to complete."""
    answer = http.post("/checkout-sessions", headers=headers(profile),
                       json=create_body(product_id, quantity, fulfillment=shipping_to(option="ground"), **extra))
    assert answer.status_code == 201, answer.text
    assert answer.json()["status"] == "ready_for_complete", answer.json()
    return answer.json()


def pay(token: str = "success_token", **extra: Any) -> dict[str, Any]:
    return {"payment_data": {"id": "card_ok", "handler_id": "mock_payment_handler", "type": "card", "brand": "visa",
                             "last_digits": "4242", "credential": {"type": "token", "token": token}},
            "risk_signals": {}, **extra}


def completed_order(store: Any, platform: Platform | None = None) -> tuple[dict[str, Any], str]:
    """A checkout completed with the success token (two mugs, shipped by ground), and its order's id."""
    profile = platform.profile_url if platform else "https://platform.example/profile.json"
    checkout = ready_checkout(store.http, "mug", 2, profile=profile)
    done = store.http.post(f"/checkout-sessions/{checkout['id']}/complete", headers=headers(profile), json=pay())
    return checkout, done.json()["order"]["id"]
