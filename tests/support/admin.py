"""Helpers for the dashboard's tests: a store with an operator token, chats played through its
real negotiate.v1 API, and signing in through the real login form."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from haggler.protocols.matching.settings import MatchingSettings
from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.protocols.transactions.settings import ExchangeSettings

TOKEN = "admin-operator-token-0123456789"
ACCEPT = json.dumps({"action": "accept"})
WALK_AWAY = json.dumps({"action": "walk_away"})
_CSRF = re.compile(r"name=csrf value='([^']+)'")


def offer(price: float, *extras: str) -> str:
    """A structured offer (the store's JSON extension), optionally asking for extras."""
    return json.dumps({"action": "offer", "price": price, **({"extras": list(extras)} if extras else {})})


def admin_store(make_store: Any, **config: Any) -> Any:
    """A store (conftest's ``make_store``) whose operator token opens the dashboard, whose
    chat-start limit no test reaches, and whose exchange wallets can be funded (sandbox deposits)."""
    config.setdefault("matching", MatchingSettings(operator_token=TOKEN))
    config.setdefault("exchange", ExchangeSettings(allow_deposits=True))
    config.setdefault("limits", StoreLimits(max_chat_starts_per_hour_per_ip=10**6))
    return make_store(**config)


@dataclass(frozen=True)
class Played:
    """A chat as its shopper saw it: the answers of the public API, nothing read from the store."""

    chat_id: str
    product_id: str
    closed: bool
    #: The deal the last answer carried (``price``, ``currency``, ``extras``, ``id``), if any.
    deal: dict[str, Any] | None
    messages: int


def play(store: Any, product_id: str, *said: str) -> Played:
    """Start a chat and say each message in turn, stopping when the chat closes."""
    started = store.start(product_id)
    assert started.status_code == 201, started.text
    body = started.json()
    chat_id, follow = body["session_id"], body["next"]
    answer: dict[str, Any] = {"closed": False}
    sent = 0
    for text in said:
        response = store.http.get(follow.replace("{url_encoded_message}", quote(text, safe="")))
        assert response.status_code == 200, response.text
        answer, sent = response.json(), sent + 1
        if answer["closed"]:
            break
        follow = answer["next"]
    return Played(chat_id, product_id, answer["closed"], answer.get("deal"), 1 + 2 * sent)


def csrf_of(html: str) -> str:
    found = _CSRF.search(html)
    assert found, html
    return found.group(1)


def sign_in(http: httpx.Client, token: str = TOKEN) -> httpx.Response:
    """Fill in and send the login form as a browser would (its cookie, its CSRF token)."""
    form = http.get("/admin/login")
    assert form.status_code == 200, form.text
    return http.post("/admin/login", data={"csrf": csrf_of(form.text), "token": token, "next": "/admin"},
                     follow_redirects=False)


def signed_in_client(store: Any) -> httpx.Client:
    """A client of its own (its own cookie jar), signed in to the store's dashboard."""
    http = httpx.Client(base_url=store.base, timeout=30)
    response = sign_in(http)
    assert response.status_code == 303, response.text
    return http
