"""The storefront over HTTP: the front page, a page per product, and the widget's script.

negotiate.v1's API (including the POSTs the widget drives) stays in
``protocols/negotiate_v1/routes.py``; this router only serves what a person's browser loads.
"""

from __future__ import annotations

from typing import Callable

from fastapi import APIRouter, Request
from starlette.responses import HTMLResponse, Response

from haggler.catalog import Catalog
from haggler.errors import NotFound
from haggler.protocols.negotiate_v1.views import page_url
from haggler.server.openapi import HTML, NO_BODY, Operation
from haggler.server.responses import ErrorBody
from haggler.web import storefront
from haggler.web.widget import JAVASCRIPT_TYPE, WIDGET_PATH, WidgetScript

#: The route of the pages ``views.page_url`` links to (the discovery document, the front page).
PRODUCT_PATH = page_url("", "{product_id}")


def build_router(catalog: Catalog, base_of: Callable[[Request], str]) -> APIRouter:
    router = APIRouter()
    script = WidgetScript.load()
    front = storefront.front_page(catalog)  # the same for every request: built once

    @router.get("/", response_class=HTMLResponse)
    def front_page() -> HTMLResponse:
        return HTMLResponse(front)

    @router.get(PRODUCT_PATH, response_class=HTMLResponse)
    def product_page(request: Request, product_id: str) -> HTMLResponse:
        product = catalog.product(product_id)
        if product is None:
            raise NotFound(f"unknown product_id: {product_id}")
        return HTMLResponse(storefront.product_page(catalog, product.facts, base_of(request)))

    @router.get(WIDGET_PATH)
    def widget(request: Request) -> Response:
        return script.response(request.headers.get("if-none-match"))

    return router


def openapi_operations() -> dict[tuple[str, str], Operation]:
    """The storefront's operations as the OpenAPI document describes them."""
    tag = ("pages",)
    return {
        ("get", "/"): Operation("The store front", {200: HTML}, tags=tag),
        ("get", PRODUCT_PATH): Operation("A product's page, with the haggling chat", {200: HTML, 404: ErrorBody},
                                         tags=tag, uses_database=False),
        ("get", WIDGET_PATH): Operation("The embeddable haggling chat widget's script",
                                        {200: JAVASCRIPT_TYPE, 304: NO_BODY}, tags=tag),
    }
