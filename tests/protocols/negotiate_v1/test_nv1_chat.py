"""negotiate.v1 §3 (chat flow), §5 (POST equivalents) and §6 (errors), against a real server."""

from __future__ import annotations

import re
from urllib.parse import quote

import httpx
import pytest

PLACEHOLDER = "{url_encoded_message}"


def test_s3_1_start_returns_201_with_session_greeting_and_next(store):
    response = store.start()
    assert response.status_code == 201
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    body = response.json()
    assert re.fullmatch(r"[A-Za-z0-9_-]{16,}", body["session_id"])
    assert store.catalog.store.rep_name in body["greeting"]
    assert body["next"] == f"{store.base}/api/store/chat/{body['session_id']}/say?message={PLACEHOLDER}"


def test_s3_2_next_is_absolute_and_keeps_the_literal_placeholder(store):
    body = store.start().json()
    for _ in range(3):
        assert body["next"].startswith("http://127.0.0.1:")
        assert PLACEHOLDER in body["next"]
        response = store.say(body["next"], "what's the warranty?")
        assert response.status_code == 200
        body = response.json()
        assert set(body) >= {"message", "closed", "next"}
        assert body["closed"] is False


def test_s3_2_full_negotiation_by_following_next_ends_in_a_deal(store):
    product = store.catalog.products[0]
    body = store.start(product.id).json()
    assert body["offer"]["price"] * 100 == pytest.approx(product.list_price_cents)
    body = store.say(body["next"], "would you take $450?").json()
    assert body["closed"] is False and body["offer"]["price"] * 100 >= product.floor_cents
    body = store.say(body["next"], "deal").json()
    assert body["closed"] is True
    assert body["next"] is None
    deal = body["deal"]
    assert deal["price"] * 100 >= product.floor_cents
    assert deal["checkout_url"].startswith(store.base + "/checkout/")
    page = store.http.get(deal["checkout_url"])
    assert page.status_code == 200
    assert product.name in page.text
    assert f"{deal['price']:,}" .rstrip("0").rstrip(".") in page.text.replace("$", "")


def test_s3_2_after_close_say_returns_400_this_chat_is_closed(store):
    body = store.start().json()
    last_next = body["next"]
    body = store.say(last_next, "no thanks, bye").json()
    assert body["closed"] is True and body["next"] is None and "deal" not in body
    response = store.say(last_next, "hello again?")
    assert response.status_code == 400
    assert response.json()["error"] == "this chat is closed"


def test_s3_3_history_lists_every_turn_in_order(store):
    body = store.start().json()
    sid = body["session_id"]
    sent = ["hi there", "what's the warranty?", "how about $300?"]
    replies = [body["greeting"]]
    for text in sent:
        body = store.say(body["next"], text).json()
        replies.append(body["message"])
    history = store.http.get(f"/api/store/chat/{sid}").json()
    assert history["session_id"] == sid
    expected = [{"speaker": "merchant", "message": replies[0]}]
    for text, reply in zip(sent, replies[1:]):
        expected += [{"speaker": "shopper", "message": text}, {"speaker": "merchant", "message": reply}]
    assert history["history"] == expected



def test_s3_3_history_carries_the_offer_on_the_table_then_the_deal(store):
    """A widget resuming a chat shows the standing offer from the history alone: the offer the
    last reply carried (not the opening one), none once the chat is closed, then the deal."""
    product = next(p for p in store.catalog.products if p.id == "breeze-hc3-clearance")
    body = store.start(product.id).json()
    opening = body["offer"]
    url = f"/api/store/chat/{body['session_id']}"
    assert store.http.get(url).json()["offer"] == opening
    for text in ("how about $300?", "how about $350?"):
        body = store.say(body["next"], text).json()
        assert store.http.get(url).json()["offer"] == body["offer"]
    assert body["offer"] != opening  # the merchant moved: the history has the latest terms
    body = store.say(body["next"], "deal").json()
    history = store.http.get(url).json()
    assert history["closed"] is True and "offer" not in history
    assert history["deal"] == body["deal"]


def test_s3_3_a_walked_away_chat_has_no_offer_in_history(store):
    body = store.start().json()
    store.say(body["next"], "no thanks, bye")
    history = store.http.get(f"/api/store/chat/{body['session_id']}").json()
    assert history["closed"] is True and "offer" not in history and "deal" not in history

def test_s3_message_is_url_decoded_once_including_unicode_and_reserved_characters(store):
    body = store.start().json()
    text = "Ça coûte combien? 100% sûr & <ok> #1 + plus"
    store.say(body["next"], text)
    history = store.http.get(f"/api/store/chat/{body['session_id']}").json()["history"]
    assert history[1] == {"speaker": "shopper", "message": text}


def test_s5_post_start_and_message_with_cors(store):
    started = store.http.post("/api/store/chat/start", json={"product_id": store.catalog.products[2].id},
                              headers={"Origin": "https://widget.example"})
    assert started.status_code == 201
    assert started.headers["access-control-allow-origin"] == "*"
    sid = started.json()["session_id"]
    reply = store.http.post(f"/api/store/chat/{sid}/message", json={"message": "is shipping free?"})
    assert reply.status_code == 200
    assert reply.headers["access-control-allow-origin"] == "*"
    assert reply.json()["closed"] is False
    history = store.http.get(f"/api/store/chat/{sid}").json()["history"]
    assert history[1]["message"] == "is shipping free?"


@pytest.mark.parametrize("path", ["/api/store/chat/start", "/api/store/chat/abc123/message"])
def test_s5_cors_preflight(store, path):
    response = store.http.options(path, headers={
        "Origin": "https://widget.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert response.status_code in (200, 204)
    assert response.headers["access-control-allow-origin"] == "*"
    assert "POST" in response.headers["access-control-allow-methods"]
    assert "content-type" in response.headers["access-control-allow-headers"].lower()


def test_s5_post_errors_are_json(store):
    assert store.http.post("/api/store/chat/start", content=b"{nope", headers={"content-type": "application/json"}).status_code == 400
    assert store.http.post("/api/store/chat/start", json={}).json()["error"] == "missing parameter: product_id"
    assert store.http.post("/api/store/chat/start", json={"product_id": "no-such-thing"}).status_code == 404
    assert store.http.post("/api/store/chat/start", json=["x"]).status_code == 400


def _assert_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json; charset=utf-8"
    body = response.json()
    assert set(body) == {"error", "request_id"} and isinstance(body["error"], str) and body["error"]
    assert body["request_id"] == response.headers["x-request-id"]
    return body["error"]


def test_s6_missing_parameters_are_400(store):
    _assert_error(store.http.get("/api/store/chat/start"), 400)
    sid = store.start().json()["session_id"]
    assert "message" in _assert_error(store.http.get(f"/api/store/chat/{sid}/say"), 400)
    _assert_error(store.http.get(f"/api/store/chat/{sid}/say", params={"message": ""}), 400)


@pytest.mark.parametrize("bad", ["has space", "a/b", "ü-umlaut", "x" * 300, "semi;colon", "<script>"])
def test_s6_malformed_product_id_is_400(store, bad):
    assert "product_id" in _assert_error(store.http.get("/api/store/chat/start", params={"product_id": bad}), 400)


def test_s6_unknown_product_is_404(store):
    _assert_error(store.http.get("/api/store/chat/start", params={"product_id": "does-not-exist"}), 404)


@pytest.mark.parametrize("sid", ["nope1234567890abcdef12", "x", "bad%20id"])
def test_s6_unknown_session_is_404_for_say_and_history(store, sid):
    _assert_error(store.http.get(f"/api/store/chat/{sid}/say", params={"message": "hi"}), 404)
    _assert_error(store.http.get(f"/api/store/chat/{sid}"), 404)


def test_s6_message_over_the_length_limit_is_400_and_not_recorded(store):
    body = store.start().json()
    limit = store.http.get("/negotiate.json").json()["limits"]["max_message_length_chars"]
    assert store.say(body["next"], "a" * limit).status_code == 200
    _assert_error(store.say(body["next"], "b" * (limit + 1)), 400)
    history = store.http.get(f"/api/store/chat/{body['session_id']}").json()["history"]
    assert len(history) == 3


def test_s6_unknown_route_and_method_are_json(store):
    _assert_error(store.http.get("/no/such/route"), 404)
    _assert_error(store.http.delete("/negotiate.json"), 405)


def test_s6_server_errors_are_json_without_traceback(make_store, monkeypatch):
    store = make_store()
    service = store.app.state.service

    def explode(*_args, **_kwargs):
        raise RuntimeError("database on fire: /secret/path")

    monkeypatch.setattr(service, "history", explode)
    sid = store.start().json()["session_id"]
    response = store.http.get(f"/api/store/chat/{sid}")
    message = _assert_error(response, 500)
    assert "fire" not in message and "Traceback" not in response.text


def test_extension_structured_json_messages(store):
    product = store.catalog.products[0]
    body = store.start(product.id).json()
    body = store.say(body["next"], '{"action": "question", "topic": "shipping"}').json()
    assert body["closed"] is False and "ship" in body["message"].lower()
    body = store.say(body["next"], '{"action": "offer", "price": 1}').json()
    assert body["closed"] is False
    body = store.say(body["next"], '{"action": "accept"}').json()
    assert body["closed"] is True
    assert body["deal"]["price"] * 100 >= product.floor_cents
    bad = store.start(product.id).json()
    _assert_error(store.say(bad["next"], '{"action": "teleport"}'), 400)


def test_extension_offer_tracks_the_merchant_terms(store):
    product = store.catalog.products[0]
    body = store.start(product.id).json()
    previous = body["offer"]["price"]
    for amount in (300, 350, 400, 450, 500):
        body = store.say(body["next"], f"I could do ${amount}").json()
        if body["closed"]:
            break
        assert body["offer"]["currency"] == "USD"
        assert body["offer"]["price"] <= previous
        assert all(isinstance(x, str) and "(" not in x for x in body["offer"]["extras"])
        previous = body["offer"]["price"]


def test_say_with_message_needing_encoding_via_quote(store):
    body = store.start().json()
    url = body["next"].replace(PLACEHOLDER, quote("I'll pay $1,000.50 — ok?", safe=""))
    assert store.http.get(url).status_code == 200


def test_replies_vary_from_turn_to_turn(store):
    body = store.start().json()
    replies = []
    for _ in range(6):  # the same turn six times: the merchant holds, in different words
        body = store.say(body["next"], "what's the warranty?").json()
        replies.append(body["message"])
    assert all(a != b for a, b in zip(replies, replies[1:]))


def test_a_seed_makes_a_conversation_reproducible(make_store):
    turns = ["hi", "how about $400?", "what's the warranty?", "$450?", "deal"]

    def converse(store) -> list[str]:
        body = store.start().json()
        said = [body["greeting"]]
        for text in turns:
            body = store.say(body["next"], text).json()
            said.append(body["message"].replace(store.base, "BASE").split("/checkout/")[0])
        return said

    first, second = converse(make_store(seed=11)), converse(make_store(seed=11))
    assert first == second
    assert converse(make_store(seed=12)) != first
