"""The store's OpenAPI document (``/openapi.json``, browsable at ``/docs``: ``web/api_docs.py``):
FastAPI's list of routes and the plain routes (``server/plain_routes.py``), with each operation's
real query parameters, request body and responses filled in from the protocols' own views, which
own the wire shapes.

The routes read and check their requests themselves (one error vocabulary, each surface's error
shape), so nothing here runs on a request: it is documentation, and the fuzz test
(``tests/test_openapi_fuzz.py``) holds every response the store gives to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import models_json_schema

from haggler.server.plain_routes import PlainRoute

HTML = "text/html"
#: A response with no body (a 204).
NO_BODY = "no body"
_REF = "#/components/schemas/{model}"
_PATH_PARAM = re.compile(r"{(\w+)}")


class WireModel(BaseModel):
    """A wire shape as the document describes it: exactly these fields (extra ones are a mismatch)."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Param:
    """A query parameter: its JSON Schema (``{"type": "string"}``, with bounds or an enum)."""

    name: str
    schema: Mapping[str, Any]
    required: bool = False
    description: str = ""


@dataclass(frozen=True)
class Media:
    """A JSON body served under another media type than ``application/json`` (a JSON Schema
    file is ``application/schema+json``), with the model of its JSON."""

    media_type: str
    model: type[BaseModel]


@dataclass(frozen=True)
class Operation:
    """What one operation takes and answers. ``responses`` maps a status code to the model of
    its JSON body, to a :class:`Media` for JSON under another media type, to the media type of
    a text body (:data:`HTML` for a page, ``text/javascript`` for a script), or to
    :data:`NO_BODY`."""

    summary: str
    responses: Mapping[int, type[BaseModel] | Media | str]
    query: tuple[Param, ...] = ()
    body: type[BaseModel] | None = None
    body_required: bool = True
    #: ``body`` is an HTML form's fields (``application/x-www-form-urlencoded``), not JSON.
    form: bool = False
    #: False for an operation answered from memory (the catalog, a shipped file): it cannot meet
    #: a database in trouble, so it documents no 503.
    uses_database: bool = True
    tags: tuple[str, ...] = field(default=())


#: (method, path) → its documentation; method in lower case, path as routed.
Operations = Mapping[tuple[str, str], Operation]

_REASONS = {200: "OK", 201: "Created", 202: "Accepted", 303: "See other: the page to show next (Location)",
            400: "Bad request: the message names what is wrong", 204: "No content", 304: "Not modified",
            401: "Unauthorized", 402: "Insufficient funds", 403: "Forbidden", 404: "Not found",
            405: "Method not allowed", 409: "Conflict", 410: "Gone", 422: "Unprocessable",
            425: "Too early", 429: "Too many requests: see Retry-After",
            503: "The database is unreachable, too slow or full: retry after Retry-After"}


def install_openapi(app: FastAPI, operations: Iterable[Operations]) -> None:
    """Serve the document at the app's ``openapi_url`` (``/openapi.json``), built once, on first
    request, from ``operations`` over the app's routes. An operation documented here that the app
    does not route is an error: the document must describe what is served."""
    documented: dict[tuple[str, str], Operation] = {}
    for group in operations:
        documented.update(group)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = _build(app, documented)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _build(app: FastAPI, documented: Mapping[tuple[str, str], Operation]) -> dict[str, Any]:
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    models = {m for op in documented.values() for m in _models(op)}
    names = [m.__name__ for m in models]
    clashes = sorted({name for name in names if names.count(name) > 1})
    if clashes:
        # Components are keyed by class name: two shapes under one name would silently become one.
        raise ValueError(f"two different wire models share the name {clashes[0]!r}; rename one")
    _, definitions = models_json_schema([(m, "serialization") for m in sorted(models, key=lambda m: m.__name__)],
                                        ref_template=_REF)
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(definitions.get("$defs", {}))
    paths = schema["paths"]
    for route in app.routes:  # FastAPI lists only its own routes; a plain route is its Operation alone
        if isinstance(route, PlainRoute):
            for method in route.methods:
                paths.setdefault(route.path, {})[method.lower()] = {"operationId": route.operation_id}
    for (method, path), op in documented.items():
        if method not in paths.get(path, {}):
            raise ValueError(f"OpenAPI documents {method.upper()} {path}, which the app does not serve")
        paths[path][method] = _operation(path, paths[path][method], op)
    return schema


def _models(op: Operation) -> list[type[BaseModel]]:
    found = [m.model if isinstance(m, Media) else m for m in op.responses.values() if not isinstance(m, str)]
    return found + ([op.body] if op.body is not None else [])


def _ref(model: type[BaseModel]) -> dict[str, str]:
    return {"$ref": _REF.format(model=model.__name__)}


def _operation(path: str, generated: dict[str, Any], op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": op.summary, "operationId": generated.get("operationId")}
    if op.tags:
        out["tags"] = list(op.tags)
    declared = {p["name"]: p for p in generated.get("parameters", []) if p.get("in") == "path"}
    path_params = [declared.get(name, {"name": name, "in": "path", "required": True, "schema": {"type": "string"}})
                   for name in _PATH_PARAM.findall(path)]
    query = [{"name": p.name, "in": "query", "required": p.required, "schema": dict(p.schema),
              **({"description": p.description} if p.description else {})} for p in op.query]
    if path_params or query:
        out["parameters"] = path_params + query
    if op.body is not None:
        media = "application/x-www-form-urlencoded" if op.form else "application/json"
        out["requestBody"] = {"required": op.body_required, "content": {media: {"schema": _ref(op.body)}}}
    out["responses"] = {str(status): _response(status, model) for status, model in sorted(_with_outage(op).items())}
    return out


def _with_outage(op: Operation) -> dict[int, type[BaseModel] | Media | str]:
    """``op``'s responses and, for an operation that uses the database and answers errors, its 503
    (the error edge's answer when the database is in trouble), in the shape of its first
    documented client error."""
    responses = dict(op.responses)
    shape = next((model for status, model in sorted(responses.items())
                  if 400 <= status < 500 and isinstance(model, type)), None)
    if shape is not None and op.uses_database:
        responses.setdefault(503, shape)
    return responses


def _response(status: int, model: type[BaseModel] | Media | str) -> dict[str, Any]:
    described: dict[str, Any] = {"description": _REASONS.get(status, str(status))}
    if isinstance(model, Media):
        described["content"] = {model.media_type: {"schema": _ref(model.model)}}
    elif isinstance(model, str):
        if model != NO_BODY:  # a text body: a page, a script
            described["content"] = {model: {"schema": {"type": "string"}}}
    else:
        described["content"] = {"application/json": {"schema": _ref(model)}}
    return described
