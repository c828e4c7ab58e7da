"""negotiate.v1's routes are plain Starlette routes (server/plain_routes.py): a HEAD never takes
a turn or starts a chat, a wrong method is the usual JSON 405, and the OpenAPI document still
describes every one of them."""

from __future__ import annotations

from haggler.protocols.negotiate_v1 import views
from haggler.server.plain_routes import PlainRoute


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
    assert {(next(iter(r.methods)).lower(), r.path) for r in plain} == set(views.openapi_operations())
    ids = [op["operationId"] for ops in document["paths"].values() for op in ops.values()]
    assert len(ids) == len(set(ids))
    for route in plain:
        operation = document["paths"][route.path][next(iter(route.methods)).lower()]
        assert operation["operationId"] == route.operation_id
        assert operation["responses"] and operation["summary"]
