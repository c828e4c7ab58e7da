"""An agent's whole visit over real HTTP: find a product, haggle for it over negotiate.v1,
redeem the deal into the cart, hand the checkout to its human, who places the order; then
anyone verifies the signed trail of the visit."""

from __future__ import annotations

import re

from sqlalchemy import create_engine, func, select

from haggler.agentsjson.audit import verify_artifact
from haggler.agentsjson.capabilities import API, SESSION_PATH
from haggler.storage.schema import agent_sessions, orders


def test_negotiate_redeem_checkout_place_once_and_verify(store):
    product = store.catalog.products[0]
    manifest = store.http.get("/.well-known/agents.json").json()
    created = store.http.post(SESSION_PATH, json={"agent_name": "e2e"})
    token = created.json()["data"]["session_token"]
    headers = {"X-Agent-Session": token}

    pointer = store.http.get(f"{API}/negotiate", params={"id": product.id}, headers=headers).json()["data"]
    body = store.http.get(pointer["start_chat"]["url"]).json()
    body = store.say(body["next"], "would you take $450?").json()
    deal = store.say(body["next"], "deal").json()["deal"]
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
    assert f"{agreed_cents / 100:,.2f}" in page.text and re.search(r"<form[^>]*method=\"?post", page.text, re.I)

    placed = store.http.post(url)
    assert placed.status_code == 200 and "Order placed" in placed.text
    assert store.http.post(url).status_code == 200  # placing the same checkout twice...
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
