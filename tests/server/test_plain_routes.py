"""negotiate.v1's routes, a polling match agent's pickup and respond, an exchange transaction's
opening and messages, the market's writes, and an agents.json agent's session and capability
calls are plain Starlette routes served by the plain-route lane (server/plain_routes.py): a HEAD never takes a turn or starts a chat, a wrong method is the usual
JSON 405, errors come out in the app's shapes, and the OpenAPI document still describes every one
of them. (Counting by route template: tests/server/test_prometheus_metrics.py.)"""

from __future__ import annotations

from haggler.protocols.agents_json.capabilities import SESSION_PATH
from haggler.protocols.market import views as market_views
from haggler.protocols.market.routes import PREFIX as MARKET_PREFIX
from haggler.protocols.matching import views as matching_views
from haggler.protocols.matching.routes import PREFIX as MATCHING_PREFIX
from haggler.protocols.negotiate_v1 import views
from haggler.protocols.transactions import views as exchange_views
from haggler.protocols.transactions.routes import PREFIX as EXCHANGE_PREFIX
from haggler.server.plain_routes import PlainRoute

#: The match turn's two routes and a transaction's four: the rest of those APIs is FastAPI's.
MATCH_TURN = {("post", MATCHING_PREFIX + "/agents/{agent_id}/negotiations/pickup"),
              ("post", MATCHING_PREFIX + "/agents/{agent_id}/negotiations/{negotiation_id}/respond")}
TRANSACTION = {("post", EXCHANGE_PREFIX + "/transactions"),
               *(("post", EXCHANGE_PREFIX + "/transactions/{transaction_id}/" + action)
                 for action in ("negotiate", "complete", "cancel"))}
#: The market's writes (every POST and the order's DELETE but the operator's clearing); its
#: reads are FastAPI's.
MARKET_WRITES = {(method, path) for method, path in market_views.openapi_operations(MARKET_PREFIX)
                 if method != "get" and path != MARKET_PREFIX + "/books/{item}/clear"}


def test_head_is_refused_and_takes_no_turn(store):
    started = store.start().json()
    say = started["next"].replace("{url_encoded_message}", "would%20you%20take%20%24100%3F")
    assert store.http.head(say).status_code == 405
    assert store.http.head(f"{views.START_PATH}?product_id={store.catalog.products[0].id}").status_code == 405
    history = store.http.get(f"/api/store/chat/{started['session_id']}").json()["history"]
    assert len(history) == 1  # the greeting alone
    assert store.start().status_code == 201


def test_a_wrong_method_is_the_usual_json_405(store):
    started = store.start().json()
    response = store.http.post(f"/api/store/chat/{started['session_id']}/say?message=hi")
    assert response.status_code == 405
    assert response.json() == {"error": "method not allowed", "request_id": response.headers["x-request-id"]}


def test_the_openapi_document_describes_every_plain_route(store):
    document = store.http.get("/openapi.json").json()
    plain = [route for route in store.app.routes if isinstance(route, PlainRoute)]
    assert MATCH_TURN <= set(matching_views.openapi_operations(MATCHING_PREFIX))
    assert TRANSACTION <= set(exchange_views.openapi_operations(EXCHANGE_PREFIX))
    agents_json = {("post", SESSION_PATH),
                   *((c.method.lower(), c.endpoint) for c in store.app.state.agents.capabilities)}
    assert ({(next(iter(r.methods)).lower(), r.path) for r in plain}
            == set(views.openapi_operations()) | MATCH_TURN | TRANSACTION | MARKET_WRITES | agents_json)
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    for route in plain:
        operation = document["paths"][route.path][next(iter(route.methods)).lower()]
        assert operation["operationId"] == route.operation_id
        assert operation["responses"] and operation["summary"]


def test_a_domain_error_on_a_plain_route_is_answered_by_the_apps_handler(store):
    response = store.http.get("/api/store/chat/no_such_chat/say", params={"message": "hi"})
    assert response.status_code == 404
    assert response.json() == {"error": "unknown session_id: no_such_chat",
                               "request_id": response.headers["x-request-id"]}
    assert response.headers["access-control-allow-origin"] == "*"  # CORS still wraps the lane


def test_an_unexpected_error_on_a_plain_route_is_the_error_edges_json_500(store, monkeypatch):
    started = store.start().json()

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in the turn")

    monkeypatch.setattr(store.app.state.service, "answer", broken)
    response = store.say(started["next"], "hello")
    assert response.status_code == 500
    assert response.json() == {"error": "internal server error", "request_id": response.headers["x-request-id"]}
    monkeypatch.undo()
    assert store.say(started["next"], "hello").status_code == 200  # the same connection goes on



def test_the_match_turn_routes_answer_a_wrong_method_and_a_bad_key_as_before(store):
    pickup = "/api/agents/agt_nobody/negotiations/pickup"
    for response in (store.http.get(pickup), store.http.head(pickup),
                     store.http.get("/api/agents/agt_nobody/negotiations/neg_x/respond")):
        assert response.status_code == 405
    refused = store.http.post(pickup, headers={"Authorization": "Bearer agt_key_not_issued"})
    assert refused.status_code == 401
    assert refused.json()["error"] == "unknown key"


def test_a_transactions_route_answers_a_wrong_method_and_a_bad_key_as_before(store):
    assert store.http.get("/v1/transactions/txn_x/negotiate").status_code == 405
    refused = store.http.post("/v1/transactions", json={}, headers={"Authorization": "Bearer not-a-key"})
    assert refused.status_code == 401
