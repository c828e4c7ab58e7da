"""The request edge against hostile input, on every surface, over real HTTP: NUL characters and
lone surrogates wherever text enters (JSON values and field names, query parameters, path
segments), JSON nested 100,000 deep, and bodies over the size cap — each refused with 400 in the
surface's own error shape, with nothing stored; NUL and surrogates on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import logging
import socket
import time
from dataclasses import dataclass
from typing import Any

import pytest
from sqlalchemy import Table, func, select

from haggler.protocols.agents_json.capabilities import API, SESSION_PATH
from haggler.protocols.transactions.settings import ExchangeSettings
from haggler.server.config import DEFAULT_MAX_BODY_BYTES
from haggler.server.json_body import MAX_DEPTH
from haggler.storage.schema import agent_sessions, cart_items, chats, exchange_agents, messages, services
from tests.protocols.transactions.support import SLA, list_service, register
from tests.support.error_bodies import error_body
from tests.support.rawhttp import chunk, exchange

CAP = DEFAULT_MAX_BODY_BYTES
#: Text no store can keep: PostgreSQL refuses NUL, no UTF-8 encoder takes a lone surrogate.
UNSTORABLE = {"nul": ("nul\x00here", "NUL"), "high-surrogate": ("\ud800", "surrogate"),
              "low-surrogate": ("tail \udfff", "surrogate")}


def assert_refused(response: Any, envelope: bool, *words: str) -> None:
    """400 in the surface's exact error shape, the message holding each of ``words``."""
    assert response.status_code == 400, response.text
    body = response.json()
    message = body["error"]
    assert body == error_body(response, message, envelope)
    assert isinstance(message, str)
    for word in words:
        assert word in message, (word, message)


def rows(store, table: Table) -> int:
    with store.app.state.service.db.read() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar_one()


class Visitor:
    """One of each caller: an open chat, an agents.json session, a registered exchange agent."""

    def __init__(self, store) -> None:
        self.store = store
        self.product = store.catalog.products[0].id
        self.chat = store.start().json()["session_id"]
        token = store.http.post(SESSION_PATH, json={"agent_name": "edge"}).json()["data"]["session_token"]
        self.agent_session = {"X-Agent-Session": token}
        self.exchange_agent = register(store.http, "edge")

    def post(self, route: "JsonRoute", body: dict[str, Any]) -> Any:
        headers = {"Content-Type": "application/json", **self.headers(route.caller)}
        return self.store.http.post(route.path.format(chat=self.chat), content=json.dumps(body).encode(),
                                    headers=headers)

    def get(self, path: str, caller: str | None = None, **params: str) -> Any:
        return self.store.http.get(path.format(chat=self.chat), params=params, headers=self.headers(caller))

    def headers(self, caller: str | None) -> dict[str, str]:
        return {"session": self.agent_session, "agent": self.exchange_agent.auth}.get(caller or "", {})


@dataclass(frozen=True)
class JsonRoute:
    """A route taking a JSON body: the fields that make it succeed, the one hostile text goes in,
    and the table a success would write to."""

    name: str
    path: str
    fields: dict[str, Any]
    field: str
    table: Table
    envelope: bool = False
    caller: str | None = None  # "session" (agents.json) or "agent" (exchange) to authenticate


JSON_ROUTES = [
    JsonRoute("store chat start", "/api/store/chat/start", {"product_id": "aerion-v12-cordless"}, "product_id",
              chats),
    JsonRoute("store chat message", "/api/store/chat/{chat}/message", {"message": "hello"}, "message", messages),
    JsonRoute("agents.json session agent_name", SESSION_PATH, {"agent_name": "bot"}, "agent_name", agent_sessions,
              envelope=True),
    JsonRoute("agents.json session purpose", SESSION_PATH, {"purpose": "buy"}, "purpose", agent_sessions,
              envelope=True),
    JsonRoute("agents.json cart.add", f"{API}/cart", {"item_id": "aerion-v12-cordless", "quantity": 1},
              "item_id", cart_items, envelope=True, caller="session"),
    JsonRoute("exchange register", "/v1/agents", {"name": "bot"}, "name", exchange_agents),
    JsonRoute("exchange service", "/v1/services", {"name": "S", "description": "d", "basePriceCents": 100,
                                                   "priceModel": "fixed", "sla": SLA}, "description", services,
              caller="agent"),
]


@pytest.mark.parametrize("route", JSON_ROUTES, ids=[r.name for r in JSON_ROUTES])
def test_unstorable_text_in_a_json_value_or_field_name_is_400_and_nothing_is_stored(make_store, db_url, route):
    store = make_store(db_url=db_url)
    visitor = Visitor(store)
    before = rows(store, route.table)
    for text, named in UNSTORABLE.values():
        in_value = visitor.post(route, {**route.fields, route.field: text})
        assert_refused(in_value, route.envelope, repr(route.field), named)
        in_name = visitor.post(route, {**route.fields, f"x{text}": 1})
        assert_refused(in_name, route.envelope, "field name", named)
        nested = visitor.post(route, {**route.fields, "deep": {"list": [1, {"k": text}]}})
        assert_refused(nested, route.envelope, "'deep.list[1].k'", named)
    assert rows(store, route.table) == before
    assert visitor.post(route, route.fields).status_code in (200, 201)  # the same call, with text it can keep


def test_nul_in_a_store_query_parameter_is_400_and_the_message_is_not_stored(make_store, db_url):
    store = make_store(db_url=db_url)
    visitor = Visitor(store)
    before = rows(store, messages)
    assert_refused(visitor.get("/api/store/chat/{chat}/say", message="hi\x00there"), False, "'message'", "NUL")
    assert_refused(visitor.get("/api/store/chat/start", product_id="aerion-v12-cordless\x00"), False,
                   "'product_id'", "NUL")
    # %ED%A0%80 is how a lone surrogate (U+D800) would be percent-encoded: not UTF-8 at all
    encoded = store.http.get(f"/api/store/chat/{visitor.chat}/say?message=hi%ED%A0%80")
    assert_refused(encoded, False, "'message'", "UTF-8")
    assert rows(store, messages) == before
    assert visitor.get("/api/store/chat/{chat}/say", message="hi there").status_code == 200


def test_nul_in_agents_json_and_exchange_query_parameters_is_400_in_their_shapes(make_store, db_url):
    visitor = Visitor(make_store(db_url=db_url))
    assert_refused(visitor.get(f"{API}/search", q="vacuum\x00"), True, "'q'", "NUL")
    assert_refused(visitor.get(f"{API}/detail", id="aerion-v12-cordless\x00"), True, "'id'", "NUL")
    assert_refused(visitor.get("/v1/wallets/me/ledger", "agent", limit="5\x00"), False, "'limit'", "NUL")


@pytest.mark.parametrize(("path", "envelope", "caller"), [
    ("/api/store/chat/{chat}%00", False, None),
    ("/api/store/chat/{chat}%00/say?message=hi", False, None),
    ("/checkout/deal_%00abc", False, None),
    (f"{API}/audit/ses_%00abc", True, None),
    ("/v1/services/svc_%00abc", False, "agent"),
    ("/v1/transactions/txn_%00abc/negotiations", False, "agent"),
], ids=["store history", "store say", "store checkout", "agents.json audit", "exchange service",
        "exchange transaction"])
def test_nul_in_a_path_id_is_400_naming_the_segment(make_store, db_url, path, envelope, caller):
    visitor = Visitor(make_store(db_url=db_url))
    before = rows(visitor.store, messages)
    response = visitor.get(path, caller)
    assert_refused(response, envelope, "path segment", "%00", "NUL")
    assert rows(visitor.store, messages) == before


def test_an_encoded_lone_surrogate_in_a_path_id_is_400(store):
    assert_refused(store.http.get("/checkout/deal_%ED%A0%80"), False, "'deal_%ED%A0%80'", "UTF-8")


# -- nesting ------------------------------------------------------------------------------------------

def nested(depth: int, inner: str = "1") -> str:
    return "[" * depth + inner + "]" * depth


@pytest.mark.parametrize("route", JSON_ROUTES, ids=[r.name for r in JSON_ROUTES])
def test_json_nested_100000_deep_is_400_naming_the_limit_and_nothing_is_stored(make_store, route):
    store = make_store(max_body_bytes=1_000_000)  # room for 100,000 levels: the depth is what gets refused
    visitor = Visitor(store)
    before = rows(store, route.table)
    headers = {"Content-Type": "application/json", **visitor.headers(route.caller)}
    path = route.path.format(chat=visitor.chat)
    for body in (nested(100_000), '{"%s": %s}' % (route.field, nested(100_000, '"x"'))):
        response = store.http.post(path, content=body.encode(), headers=headers)
        assert_refused(response, route.envelope, "nested too deeply", f"at most {MAX_DEPTH} levels")
    assert rows(store, route.table) == before


def test_nesting_up_to_the_limit_is_read_and_brackets_inside_strings_do_not_count(make_store):
    store = make_store(exchange=ExchangeSettings(allow_deposits=True))  # the consumer funds its wallet
    visitor = Visitor(store)
    provider = visitor.exchange_agent
    consumer = register(store.http, "consumer")
    consumer.deposit(1_000)
    service = list_service(provider, base=100, model="fixed")
    transaction = {"serviceId": service, "maxPriceCents": 100}
    # the body object is one level, so its "input" may hold MAX_DEPTH - 1 more
    fits = json.dumps({**transaction, "input": json.loads(nested(MAX_DEPTH - 1))})
    assert consumer.http.post("/v1/transactions", content=fits.encode(),
                              headers=consumer.auth).status_code == 201
    deeper = json.dumps({**transaction, "input": json.loads(nested(MAX_DEPTH))})
    assert_refused(consumer.http.post("/v1/transactions", content=deeper.encode(), headers=consumer.auth),
                   False, "nested too deeply")
    said = store.http.post(f"/api/store/chat/{visitor.chat}/message", json={"message": "[{" * 500})
    assert said.status_code == 200, said.text


# -- size ------------------------------------------------------------------------------------------------

SIZE_ROUTES = [  # (route, a body it accepts, the surface's words for a body over the cap, envelope)
    ("/api/store/chat/{chat}/message", b'{"message": "hi"}', f"the request body is larger than {CAP} bytes", False),
    (SESSION_PATH, b"{}", f"the request body is too large (at most {CAP} bytes)", True),
    ("/v1/agents", b'{"name": "bot"}', f"the request body is larger than {CAP} bytes", False),
]
SIZE_IDS = ["store", "agents.json", "exchange"]


def post_head(store, path: str, *headers: str) -> str:
    return "\r\n".join([f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{store.server.port}",
                        "Content-Type: application/json", *headers])


@pytest.mark.parametrize(("path", "accepted", "refusal", "envelope"), SIZE_ROUTES, ids=SIZE_IDS)
def test_a_declared_10_mb_body_is_refused_before_a_byte_of_it_is_sent(store, path, accepted, refusal, envelope):
    chat = store.start().json()["session_id"]
    before = rows(store, messages), rows(store, agent_sessions), rows(store, exchange_agents)
    # Only the headers go out: a server that read the body first would wait here until the timeout.
    response = exchange(store.server.port, post_head(store, path.format(chat=chat), "Content-Length: 10000000"))
    assert response.status == 400
    assert response.json() == error_body(response, refusal, envelope)
    assert response.headers["connection"] == "close"  # the rest of the body is not read either
    assert (rows(store, messages), rows(store, agent_sessions), rows(store, exchange_agents)) == before


@pytest.mark.parametrize(("path", "accepted", "refusal", "envelope"), SIZE_ROUTES, ids=SIZE_IDS)
def test_a_chunked_body_is_cut_off_at_the_cap_without_waiting_for_its_end(store, path, accepted, refusal,
                                                                         envelope):
    chat = store.start().json()["session_id"]
    head = post_head(store, path.format(chat=chat), "Transfer-Encoding: chunked")
    with socket.create_connection(("127.0.0.1", store.server.port), timeout=10) as sock:
        sock.sendall(head.encode() + b"\r\n\r\n" + b"".join(chunk(b" " * 8192) for _ in range(CAP // 8192)))
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):  # exactly the cap: the server reads on, waiting for the end
            sock.recv(1)
    # The same bytes and one more, and the body never ends: the answer comes at the cap.
    response = exchange(store.server.port, head, [chunk(b" " * 8192) for _ in range(CAP // 8192)] + [chunk(b" ")])
    assert response.status == 400
    assert response.json() == error_body(response, refusal, envelope)
    assert response.headers["connection"] == "close"


@pytest.mark.parametrize(("path", "accepted", "refusal", "envelope"), SIZE_ROUTES, ids=SIZE_IDS)
def test_a_body_of_exactly_the_cap_is_read(store, path, accepted, refusal, envelope):
    chat = store.start().json()["session_id"]
    padded = accepted + b" " * (CAP - len(accepted))
    response = store.http.post(path.format(chat=chat), content=padded, headers={"Content-Type": "application/json"})
    assert response.status_code in (200, 201), response.text


@pytest.mark.parametrize(("path", "accepted", "refusal", "envelope"), SIZE_ROUTES, ids=SIZE_IDS)
def test_a_client_that_disconnects_mid_body_is_one_quiet_log_line(store, caplog, path, accepted, refusal,
                                                                  envelope):
    """Not a bug, so no traceback: one line at info naming the request, and nothing stored."""
    chat = store.start().json()["session_id"]
    before = rows(store, messages), rows(store, agent_sessions), rows(store, exchange_agents)
    caplog.set_level(logging.INFO, logger="haggler")
    with socket.create_connection(("127.0.0.1", store.server.port), timeout=10) as sock:
        sock.sendall(post_head(store, path.format(chat=chat), "Content-Length: 100").encode() + b"\r\n\r\n" +
                     accepted[:5])
    deadline = time.monotonic() + 60
    while not any(record.name == "haggler" for record in caplog.records):  # the edge's line, quiet or not
        assert time.monotonic() < deadline, "the server logged nothing about the disconnect"
        time.sleep(0.05)
    logged = [record for record in caplog.records if record.name == "haggler"]
    assert [(record.levelno, record.exc_info) for record in logged if "disconnected" in record.getMessage()] == [
        (logging.INFO, None)]
    assert not [record for record in logged if record.levelno >= logging.WARNING]
    assert (rows(store, messages), rows(store, agent_sessions), rows(store, exchange_agents)) == before
