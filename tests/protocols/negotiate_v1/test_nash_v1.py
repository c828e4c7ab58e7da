"""nash.v1, negotiate.v1's successor name, as the store serves it (against a real server).

pier39's shopper connector looks up ``/nash.json`` and ``/.well-known/nash.json`` before the
negotiate.v1 files and reads a top-level ``checkout_url`` from the reply that closes a chat with
a deal. The store serves both names; the negotiate.v1 files stay exactly as they were.
"""

from __future__ import annotations

NASH_PATHS = ("/nash.json", "/.well-known/nash.json")


def test_both_nash_paths_serve_identical_bytes_with_the_discovery_headers(store):
    a, b = (store.http.get(path) for path in NASH_PATHS)
    assert a.status_code == b.status_code == 200
    assert a.content == b.content
    for response in (a, b):
        assert response.headers["content-type"] == "application/json; charset=utf-8"
        assert response.headers["access-control-allow-origin"] == "*"


def test_the_nash_document_is_the_negotiate_document_with_the_version_key_renamed(store):
    nash = store.http.get("/nash.json").json()
    negotiate = store.http.get("/negotiate.json").json()
    assert nash.pop("nash_protocol") == "nash.v1"
    assert negotiate.pop("negotiate_protocol") == "negotiate.v1"
    assert "negotiate_protocol" not in nash and "nash_protocol" not in negotiate
    assert nash == negotiate


def test_the_nash_document_uses_the_public_url_as_the_negotiate_one_does(make_store):
    store = make_store(public_url="https://shop.example.com/", allowed_hosts=("127.0.0.1",))
    nash = store.http.get("/.well-known/nash.json").json()
    assert nash["endpoints"]["catalog"]["url"] == "https://shop.example.com/api/store/catalog"
    assert nash["endpoints"] == store.http.get("/negotiate.json").json()["endpoints"]


def test_the_reply_that_closes_with_a_deal_carries_an_absolute_top_level_checkout_url(store):
    body = store.start().json()
    body = store.say(body["next"], "would you take $450?").json()
    assert "checkout_url" not in body  # open: no deal yet
    body = store.say(body["next"], "deal").json()
    assert body["closed"] is True
    assert body["checkout_url"] == body["deal"]["checkout_url"] == f"{store.base}/checkout/{body['deal']['id']}"
    assert store.http.get(body["checkout_url"]).status_code == 200


def test_a_chat_closed_without_a_deal_has_no_checkout_url(store):
    body = store.start().json()
    body = store.say(body["next"], "no thanks, bye").json()
    assert body["closed"] is True and "checkout_url" not in body


def test_the_openapi_document_lists_the_nash_paths_and_the_reply_field(store):
    spec = store.http.get("/openapi.json").json()
    for path in (*NASH_PATHS, "/negotiate.json", "/.well-known/negotiate.json"):
        assert "get" in spec["paths"][path], path
    schemas = spec["components"]["schemas"]
    assert "checkout_url" in schemas["ReplyModel"]["properties"]
    assert schemas["NashDescriptorModel"]["properties"]["nash_protocol"]["const"] == "nash.v1"
