"""An agent's whole visit over real HTTP: find a product, haggle for it over negotiate.v1,
redeem the deal into the cart, hand the checkout to its human, who places the order; then
anyone verifies the signed trail of the visit."""

from __future__ import annotations

import re

from sqlalchemy import create_engine, func, select

from haggler.money import format_money
from haggler.protocols.agents_json.audit import verify_artifact
from haggler.protocols.agents_json.capabilities import API, SESSION_PATH
from haggler.storage.schema import agent_sessions, orders
from tests.support.error_bodies import error_body


def haggle_a_deal(store, product, headers: dict[str, str]) -> dict:
    """Follow the manifest's negotiate pointer into the product's negotiate.v1 chat and close a deal."""
    pointer = store.http.get(f"{API}/negotiate", params={"id": product.id}, headers=headers).json()["data"]
    body = store.http.get(pointer["start_chat"]["url"]).json()
    body = store.say(body["next"], "would you take $450?").json()
    return store.say(body["next"], "deal").json()["deal"]


def new_session(store) -> dict[str, str]:
    token = store.http.post(SESSION_PATH, json={"agent_name": "e2e"}).json()["data"]["session_token"]
    return {"X-Agent-Session": token}


def test_negotiate_redeem_checkout_place_once_and_verify(store):
    product = store.catalog.products[0]
    manifest = store.http.get("/.well-known/agents.json").json()
    headers = new_session(store)

    deal = haggle_a_deal(store, product, headers)
    agreed_cents = round(deal["price"] * 100)
    assert product.floor_cents <= agreed_cents <= product.list_price_cents

    added = store.http.post(f"{API}/cart", json={"item_id": product.id, "quantity": 1, "deal_id": deal["id"]},
                            headers=headers)
    assert added.status_code == 200, added.text
    line = added.json()["data"]["lines"][0]
    assert line["unit_price_cents"] == agreed_cents and line["deal_id"] == deal["id"]
    again = store.http.post(f"{API}/cart", json={"item_id": product.id, "quantity": 1, "deal_id": deal["id"]},
                            headers=headers)
    assert again.status_code == 409 and again.json()["ok"] is False
    wrong = store.http.post(f"{API}/cart", json={"item_id": store.catalog.products[1].id, "quantity": 1,
                                                 "deal_id": deal["id"]}, headers=headers)
    assert wrong.status_code in (400, 409) and product.id in wrong.json()["error"]

    checkout = store.http.post(f"{API}/checkout", headers=headers).json()["data"]
    url = checkout["url"]
    assert url.startswith(store.base + "/checkout/cart/")
    page = store.http.get(url)
    assert page.status_code == 200 and product.name in page.text
    assert format_money(agreed_cents) in page.text and re.search(r"<form[^>]*method=\"?post", page.text, re.I)

    form = {"name": "Ada Lovelace", "email": "ada@example.com", "address": "12 Analytical Row, London"}
    missing = store.http.post(url, data={**form, "email": "not-an-address"})
    assert missing.status_code == 400 and "not an email address" in missing.text and "Order placed" not in missing.text
    placed = store.http.post(url, data=form)
    assert placed.status_code == 303 and placed.headers["location"] == url.removeprefix(store.base)
    shown = store.http.get(url)
    assert "Order placed" in shown.text and "Ada Lovelace" in shown.text and "<form" not in shown.text
    assert store.http.post(url, data=form).status_code == 303  # placing the same checkout twice...
    engine = create_engine(store.app.state.service.db.url)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(orders)).scalar_one() == 1  # ...makes one order
        ended = conn.execute(select(agent_sessions.c.id, agent_sessions.c.end_reason)).one()
    assert ended.end_reason == "checkout"
    assert store.http.get(f"{API}/cart", headers=headers).status_code == 401  # checkout completion ended it

    artifact = store.http.get(f"{API}/audit/{ended.id}").json()
    assert [e["capability"] for e in artifact["events"]] == ["negotiate", "cart.add", "cart.add", "cart.add",
                                                            "checkout"]
    assert [e["response_status"] for e in artifact["events"]][1:3] == [200, 409]
    assert verify_artifact(artifact, trusted_keys=[manifest["audit"]["public_key"]]).ok


def test_an_expired_deal_is_refused_over_http_and_the_refusal_is_audited(store):
    """A deal is redeemable only before it expires (deal_ttl); after, cart.add is 410 naming the
    deal and when it expired, the cart stays empty, and the trail records the refusal."""
    product = store.catalog.products[0]
    deal = haggle_a_deal(store, product, new_session(store))
    store.clock.advance(seconds=store.app.state.agents.settings.deal_ttl_seconds + 1)
    headers = new_session(store)  # the first session has expired by now too
    refused = store.http.post(f"{API}/cart", json={"item_id": product.id, "quantity": 1, "deal_id": deal["id"]},
                              headers=headers)
    assert refused.status_code == 410, refused.text
    assert refused.json()["ok"] is False and deal["id"] in refused.json()["error"] and "expired" in refused.json()["error"]
    assert store.http.get(f"{API}/cart", headers=headers).json()["data"]["lines"] == []
    assert store.http.delete(SESSION_PATH, headers=headers).status_code == 200
    engine = create_engine(store.app.state.service.db.url)
    with engine.connect() as conn:
        ended = conn.execute(select(agent_sessions.c.id).where(agent_sessions.c.end_reason == "deleted")).scalar_one()
    events = store.http.get(f"{API}/audit/{ended}").json()["events"]
    assert [(e["capability"], e["response_status"]) for e in events] == [("cart.add", 410), ("cart.view", 200)]


def test_a_call_and_its_audit_event_commit_together(store, monkeypatch):
    """If recording the event fails after the cart changed, the cart change is rolled back too:
    no change in a session ever goes unaudited."""
    product = store.catalog.products[0]
    headers = new_session(store)
    trail = store.app.state.agents.trail

    def fail(*args, **kwargs):
        raise RuntimeError("crash between the effect and its event")

    monkeypatch.setattr(trail, "record", fail)
    with_crash = store.http.post(f"{API}/cart", json={"item_id": product.id, "quantity": 2}, headers=headers)
    assert with_crash.status_code == 500  # a clean answer in the envelope, not a reset connection
    assert with_crash.json() == error_body(with_crash, "internal server error", envelope=True)
    monkeypatch.undo()
    lines = store.http.get(f"{API}/cart", headers=headers).json()["data"]["lines"]
    assert lines == []
