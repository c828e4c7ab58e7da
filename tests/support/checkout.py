"""A deal to buy: one product haggled to a deal over the negotiate.v1 chat API, for the checkout's
tests (HTTP, browser, command line, dashboard)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import httpx

from haggler.catalog import ProductFacts


def _say(http: httpx.Client, next_url: str, message: str) -> dict[str, Any]:
    return dict(http.get(next_url.replace("{url_encoded_message}", quote(message, safe=""))).json())


def close_a_deal(http: httpx.Client, product: ProductFacts) -> dict[str, Any]:
    """Offer 70% of the list price, then say "deal" unless that already closed it; the reply's
    ``deal`` (with its ``checkout_url``). ``http`` is a client of the store (``base_url`` set)."""
    body = http.get("/api/store/chat/start", params={"product_id": product.id}).json()
    body = _say(http, body["next"], f"would you take ${product.list_price_cents * 7 // 1000}?")
    deal = dict(body.get("deal") or _say(http, body["next"], "deal")["deal"])
    assert deal["checkout_url"].startswith(str(http.base_url).rstrip("/") + "/checkout/")
    return deal
