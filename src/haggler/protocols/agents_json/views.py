"""The store's ``/.well-known/agents.json``: built from the same capability declarations the
API enforces, plus the session, rate-limit and audit settings the store runs with."""

from __future__ import annotations

from functools import cache
from typing import Any, Iterable, Literal

from pydantic import BaseModel, Field, create_model

from haggler.protocols.agents_json.capabilities import AUDIT_PATH, SESSION_PATH, Capability, Param
from haggler.protocols.agents_json.sessions import AGENT_FIELDS
from haggler.protocols.agents_json.settings import AgentsSettings
from haggler.protocols.negotiate_v1.views import ProductModel
from haggler.server.openapi import Operation, WireModel
from haggler.server.openapi import Param as OpenAPIParam
from haggler.server.responses import RequestId
from haggler.web.checkout_routes import page_operations

__all__ = ["SCHEMA_VERSION", "build_manifest", "openapi_operations"]

SCHEMA_VERSION = "0.1.0"


def build_manifest(*, site_name: str, site_url: str, description: str | None, capabilities: Iterable[Capability],
                   settings: AgentsSettings, public_key: str | None) -> dict[str, Any]:
    manifest: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "site": {"name": site_name, "url": site_url},
        "capabilities": [c.published() for c in capabilities],
        "session": {"create": SESSION_PATH, "delete": SESSION_PATH, "ttl_seconds": settings.session_ttl_seconds},
        "rate_limit": {"requests_per_minute": settings.requests_per_minute, "max_sessions": settings.max_sessions},
        "audit": {"enabled": settings.audit_enabled, "endpoint": AUDIT_PATH},
    }
    if description:
        manifest["site"]["description"] = description
    if settings.audit_enabled and public_key:
        manifest["audit"]["public_key"] = public_key
    return manifest


# -- the wire shapes, for the OpenAPI document (the dicts built above are what is sent) -------------


class EnvelopeError(WireModel):
    """Every agents.json error: ``{"ok": false, "error": "...", "request_id": "..."}``."""

    ok: Literal[False]
    error: str
    request_id: RequestId = None


class ManifestModel(BaseModel):
    """``/.well-known/agents.json`` (the full rules: the spec's JSON Schema, ``agents.schema.json``)."""

    schema_version: str
    site: dict[str, str]
    capabilities: list[dict[str, Any]]
    session: dict[str, Any]
    rate_limit: dict[str, int]
    audit: dict[str, Any]


#: The session's body: who the agent is, each field optional and bounded as the service checks it.
SessionBody: type[BaseModel] = create_model(
    "SessionBody", __base__=WireModel,
    **{name: (str | None, Field(None, max_length=limit)) for name, limit in AGENT_FIELDS.items()})  # type: ignore[call-overload]


class SessionCreated(WireModel):
    session_token: str
    session_id: str
    expires_at: str
    capabilities: list[str]


class SessionEnded(WireModel):
    session_id: str
    ended: bool


class ArtifactModel(WireModel):
    """A signed audit artifact, served as is (not wrapped) so that it can be saved and verified."""

    session_id: str
    site: str | dict[str, Any]
    created_at: str
    ended_at: str
    agent: dict[str, Any] | None
    events: list[dict[str, Any]]
    root_hash: str
    signature: str
    public_key: str


class PageModel(WireModel):
    items: list[ProductModel]
    page: int
    limit: int
    total: int
    has_more: bool
    query: str | None = None
    category: str | None = None
    sort: str | None = None


class DetailModel(ProductModel):
    negotiable: bool


class PointerModel(WireModel):
    protocol: Literal["negotiate.v1"]
    product_id: str
    discovery_url: str
    start_chat: dict[str, str]
    list_price: float
    currency: str
    redeem: str


class CartLineModel(WireModel):
    item_id: str
    name: str
    quantity: int
    unit_price_cents: int
    unit_price: str
    line_total_cents: int
    line_total: str
    list_price_cents: int | None
    list_price: str | None
    currency: str
    extras: list[str]
    deal_id: str | None
    negotiated: bool


class CartModel(WireModel):
    lines: list[CartLineModel]
    item_count: int
    total_cents: int
    total: str
    currency: str


class CheckoutModel(WireModel):
    checkout_id: str
    url: str
    lines: list[CartLineModel]
    total_cents: int
    total: str
    currency: str
    created_at: str


@cache
def _envelope(model: type[BaseModel]) -> type[BaseModel]:
    """``{"ok": true, "data": <model>}``, the spec's success envelope: one class per data model,
    however many capabilities answer with it (the document names each shape once)."""
    return create_model(f"{model.__name__}Envelope", __base__=WireModel, ok=(Literal[True], ...), data=(model, ...))


#: What each capability's ``data`` is.
_DATA: dict[str, type[BaseModel]] = {
    "search": PageModel, "browse": PageModel, "detail": DetailModel, "negotiate": PointerModel,
    "cart.add": CartModel, "cart.view": CartModel, "cart.update": CartModel, "cart.remove": CartModel,
    "checkout": CheckoutModel,
}
_JSON_TYPES: dict[str, type] = {"string": str, "integer": int, "number": float, "boolean": bool}


def _param_schema(param: Param) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": param.type}
    if param.enum is not None:
        schema["enum"] = list(param.enum)
    if param.minimum is not None:
        schema["minimum"] = param.minimum
    if param.maximum is not None:
        schema["maximum"] = param.maximum
    if param.type == "string":
        schema["maxLength"] = param.max_length
    return schema


def _body_model(capability: Capability) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for name, param in capability.params.items():
        kind = _JSON_TYPES[param.type]
        constraints = Field(... if param.required else None, ge=param.minimum, le=param.maximum,
                            max_length=param.max_length if param.type == "string" else None)
        fields[name] = (kind if param.required else kind | None, constraints)
    title = "".join(part.title() for part in capability.name.split("."))
    return create_model(f"{title}Body", __base__=WireModel, **fields)


def openapi_operations(capabilities: Iterable[Capability], *, checkout_page: bool) -> dict[tuple[str, str], Operation]:
    """The agents.json surface's operations as the OpenAPI document describes them: the manifest,
    sessions, audit artifacts, and one operation per declared capability, its parameters derived
    from the same declarations the manifest publishes and the API enforces."""
    tag = ("agents.json",)
    errors = {400: EnvelopeError, 429: EnvelopeError}
    operations: dict[tuple[str, str], Operation] = {
        ("get", "/.well-known/agents.json"): Operation("The capability manifest", {200: ManifestModel, **errors}, tags=tag),
        ("post", SESSION_PATH): Operation("Open a session", {201: _envelope(SessionCreated), **errors},
                                          body=SessionBody, body_required=False, tags=tag),
        ("delete", SESSION_PATH): Operation("End the session (its audit trail is signed)",
                                            {200: _envelope(SessionEnded), 401: EnvelopeError, **errors}, tags=tag),
        ("get", AUDIT_PATH + "/{session_id}"): Operation(
            "A session's signed audit artifact", {200: ArtifactModel, 404: EnvelopeError, 425: EnvelopeError, **errors},
            tags=tag),
    }
    for capability in capabilities:
        responses = {200: _envelope(_DATA[capability.name]), 401: EnvelopeError, 404: EnvelopeError,
                     409: EnvelopeError, 410: EnvelopeError, **errors}
        query = tuple(OpenAPIParam(name, _param_schema(p), required=p.required, description=p.description)
                      for name, p in capability.params.items()) if capability.params_in_query else ()
        body = _body_model(capability) if not capability.params_in_query else None
        operations[(capability.method.lower(), capability.endpoint)] = Operation(
            capability.description, responses, query=query, body=body, body_required=False, tags=tag)
    if checkout_page:
        operations.update(page_operations("/checkout/cart/{checkout_id}", "An agent's cart"))
    return operations
