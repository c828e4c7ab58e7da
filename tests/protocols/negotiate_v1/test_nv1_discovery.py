"""negotiate.v1 §2 (discovery) and §8 (versioning), against a real server."""

from __future__ import annotations

import html
import re

import httpx

REQUIRED_ENDPOINTS = {
    "start_chat": ("url_template", {"{product_id}"}),
    "send_message": ("url_template", {"{session_id}", "{url_encoded_message}"}),
    "read_history": ("url_template", {"{session_id}"}),
    "catalog": ("url", set()),
}
LIMIT_FIELDS = {"max_chat_starts_per_hour_per_ip", "max_messages_per_chat", "session_idle_ttl_seconds",
                "max_message_length_chars", "currency"}


def test_s2_both_discovery_urls_serve_identical_bytes(store):
    a = store.http.get("/negotiate.json")
    b = store.http.get("/.well-known/negotiate.json")
    assert a.status_code == b.status_code == 200
    assert a.content == b.content


def test_s2_discovery_content_type_and_cors_without_origin_header(store):
    for path in ("/negotiate.json", "/.well-known/negotiate.json"):
        response = store.http.get(path)
        assert response.headers["content-type"] == "application/json; charset=utf-8"
        assert response.headers["access-control-allow-origin"] == "*"


def test_s2_required_fields(store):
    doc = store.http.get("/negotiate.json").json()
    assert doc["negotiate_protocol"] == "negotiate.v1"
    assert {"name", "rep_name", "tagline", "policy"} <= set(doc["store"])
    assert isinstance(doc["products"], list) and doc["products"]
    assert set(doc["limits"]) >= LIMIT_FIELDS
    assert all(isinstance(doc["limits"][k], int) and doc["limits"][k] > 0 for k in LIMIT_FIELDS - {"currency"})


def test_s2_endpoints_are_absolute_with_their_placeholders(store):
    endpoints = store.http.get("/negotiate.json").json()["endpoints"]
    for key, (field, placeholders) in REQUIRED_ENDPOINTS.items():
        entry = endpoints[key]
        assert entry["method"] == "GET"
        url = entry[field]
        assert url.startswith(store.base + "/"), url
        assert set(re.findall(r"\{[a-z_]+\}", url)) == placeholders


def test_s2_url_templates_work_when_filled_in(store):
    endpoints = store.http.get("/negotiate.json").json()["endpoints"]
    pid = store.catalog.products[1].id
    started = store.http.get(endpoints["start_chat"]["url_template"].replace("{product_id}", pid))
    assert started.status_code == 201
    sid = started.json()["session_id"]
    said = store.http.get(endpoints["send_message"]["url_template"].replace("{session_id}", sid)
                          .replace("{url_encoded_message}", "hello%20there"))
    assert said.status_code == 200
    history = store.http.get(endpoints["read_history"]["url_template"].replace("{session_id}", sid))
    assert [m["speaker"] for m in history.json()["history"]] == ["merchant", "shopper", "merchant"]
    assert store.http.get(endpoints["catalog"]["url"]).status_code == 200


def test_s2_products_carry_page_and_start_chat_urls(make_store):
    from haggler.protocols.negotiate_v1.settings import StoreLimits

    store = make_store(limits=StoreLimits(max_chat_starts_per_hour_per_ip=100))
    products = store.http.get("/negotiate.json").json()["products"]
    assert [p["id"] for p in products] == [p.id for p in store.catalog.products]
    for product in products:
        assert {"id", "name", "list_price", "currency", "page_url", "start_chat_url"} <= set(product)
        page = store.http.get(product["page_url"])
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        assert html.escape(product["name"]) in page.text
        assert product["start_chat_url"].startswith(store.base)
        assert store.http.get(product["start_chat_url"]).status_code == 201


def test_s2_list_prices_are_decimal_numbers_matching_the_catalog(store):
    products = {p["id"]: p for p in store.http.get("/negotiate.json").json()["products"]}
    for product in store.catalog.products:
        assert round(products[product.id]["list_price"] * 100) == product.list_price_cents


def test_s2_public_url_is_used_for_every_absolute_url(make_store):
    # Reached at 127.0.0.1 here, which a store with a public URL answers to only when allowed.
    store = make_store(public_url="https://shop.example.com/", allowed_hosts=("127.0.0.1",))
    raw = store.http.get("/negotiate.json").text
    assert "127.0.0.1" not in raw
    doc = store.http.get("/negotiate.json").json()
    assert doc["endpoints"]["catalog"]["url"] == "https://shop.example.com/api/store/catalog"
    started = store.start().json()
    assert started["next"].startswith("https://shop.example.com/api/store/chat/")


def test_s2_without_public_url_the_request_base_is_used(store):
    doc = httpx.get(f"http://localhost:{store.server.port}/negotiate.json").json()
    assert doc["endpoints"]["catalog"]["url"] == f"http://localhost:{store.server.port}/api/store/catalog"


def test_s2_limits_reflect_the_configured_limits(make_store):
    from haggler.protocols.negotiate_v1.settings import StoreLimits

    store = make_store(limits=StoreLimits(3, 7, 120, 300))
    limits = store.http.get("/negotiate.json").json()["limits"]
    assert limits == {"max_chat_starts_per_hour_per_ip": 3, "max_messages_per_chat": 7,
                      "session_idle_ttl_seconds": 120, "max_message_length_chars": 300, "currency": "USD"}


def test_s2_catalog_endpoint_lists_every_product(store):
    response = store.http.get("/api/store/catalog")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    assert response.headers["access-control-allow-origin"] == "*"
    products = response.json()["products"]
    assert {p["id"] for p in products} == {p.id for p in store.catalog.products}
    assert all("description" in p for p in products)
