"""Helpers for exchange tests: registered agents that talk to a real store over HTTP."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

SLA = {"latencyMs": 200, "timeoutMs": 5000, "retries": 2}


@dataclass
class Party:
    """A registered exchange agent and an authenticated way to call the API as it."""

    http: httpx.Client
    id: str
    api_key: str

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def post(self, path: str, body: Any = None, **headers: str) -> httpx.Response:
        return self.http.post(path, json=body, headers={**self.auth, **headers})

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path, params=params, headers=self.auth)

    def wallet(self) -> dict[str, int]:
        return self.get("/v1/wallets/me").json()

    def deposit(self, cents: int) -> None:
        assert self.post("/v1/wallets/me/deposit", {"amountCents": cents}).status_code == 200

    def negotiate(self, transaction_id: str, kind: str, price: int | None = None, **extra: Any) -> httpx.Response:
        body: dict[str, Any] = {"type": kind, **extra}
        if price is not None:
            body["terms"] = {"priceCents": price, **body.get("terms", {})}
        return self.post(f"/v1/transactions/{transaction_id}/negotiate", body)


def register(http: httpx.Client, name: str) -> Party:
    response = http.post("/v1/agents", json={"name": name})
    assert response.status_code == 201, response.text
    data = response.json()
    return Party(http, data["id"], data["apiKey"])


def list_service(provider: Party, *, base: int = 500, model: str = "negotiable") -> str:
    response = provider.post("/v1/services", {"name": "Summarize a document", "description": "Up to 10 pages.",
                                              "basePriceCents": base, "priceModel": model, "sla": SLA})
    assert response.status_code == 201, response.text
    return response.json()["id"]


def open_transaction(consumer: Party, service_id: str, max_price: int, **extra: Any) -> httpx.Response:
    return consumer.post("/v1/transactions", {"serviceId": service_id, "maxPriceCents": max_price,
                                              "input": {"url": "https://example.com/doc.pdf"}, **extra})
