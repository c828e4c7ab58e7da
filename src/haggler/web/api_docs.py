"""The API's browsable reference at ``/docs``: Swagger UI over ``/openapi.json``, served by the
store itself so that the page works on a machine with no internet (FastAPI's own page loads
Swagger UI from a CDN and its icon from fastapi.tiangolo.com).

Swagger UI is a release of the npm package ``swagger-ui-dist`` vendored in ``swagger_ui/``
(its version and sha256s in ``swagger_ui/VERSION``; ``scripts/vendor-swagger-ui VERSION``
refreshes it). The page's start-up script is ``api_docs.js`` beside this module, a file rather
than inline, so the page's Content-Security-Policy lets scripts come from the store alone.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache
from html import escape
from importlib import resources

from fastapi import APIRouter
from starlette.responses import HTMLResponse, Response

from haggler.errors import NotFound
from haggler.web.widget import JAVASCRIPT_TYPE

DOCS_PATH = "/docs"
ASSETS_PATH = DOCS_PATH + "/assets"
#: What the page may load and run: the store's own files, Swagger UI's inline SVG icons (data:),
#: and requests to the store (the document, "Try it out"). Nothing from another host.
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                           "connect-src 'self'; form-action 'none'; frame-ancestors 'none'; base-uri 'none'")
#: An asset's URL carries its content's digest, so a browser may keep it as long as it likes.
ASSET_CACHE_CONTROL = "public, max-age=31536000, immutable"
#: The name each file is served under → (its path in this package, its media type).
_FILES = {
    "swagger-ui-bundle.js": ("swagger_ui/swagger-ui-bundle.js", JAVASCRIPT_TYPE),
    "swagger-ui.css": ("swagger_ui/swagger-ui.css", "text/css"),
    "favicon-32x32.png": ("swagger_ui/favicon-32x32.png", "image/png"),
    "api-docs.js": ("api_docs.js", JAVASCRIPT_TYPE),
}


@dataclass(frozen=True)
class Asset:
    body: bytes
    media_type: str
    #: The URL the page links: the digest changes with the content, so no cache serves a stale copy.
    url: str


@cache
def assets() -> dict[str, Asset]:
    """The page's files as packaged, by name (read once per process: they never change under it)."""
    package = resources.files(__package__)
    found: dict[str, Asset] = {}
    for name, (path, media_type) in _FILES.items():
        body = package.joinpath(path).read_bytes()
        found[name] = Asset(body, media_type, f"{ASSETS_PATH}/{name}?v={hashlib.sha256(body).hexdigest()[:16]}")
    return found


def docs_page(title: str, openapi_url: str) -> str:
    """The ``/docs`` page: every URL in it is the store's own."""
    files = assets()
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{escape(title)} - Swagger UI</title>
<link rel="stylesheet" href="{files['swagger-ui.css'].url}">
<link rel="icon" type="image/png" href="{files['favicon-32x32.png'].url}">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{files['swagger-ui-bundle.js'].url}"></script>
<script src="{files['api-docs.js'].url}" data-openapi-url="{escape(openapi_url)}"></script>
</body>
</html>
"""


def build_router(title: str, openapi_url: str) -> APIRouter:
    """``/docs`` and its files; out of the OpenAPI document, like FastAPI's own page."""
    router = APIRouter(include_in_schema=False)
    page = docs_page(title, openapi_url)

    @router.get(DOCS_PATH)
    def docs() -> HTMLResponse:
        return HTMLResponse(page, headers={"Content-Security-Policy": CONTENT_SECURITY_POLICY,
                                           "X-Content-Type-Options": "nosniff"})

    @router.get(ASSETS_PATH + "/{name}")
    def asset(name: str) -> Response:
        found = assets().get(name)
        if found is None:
            raise NotFound(f"no such file: {name}")
        return Response(found.body, media_type=found.media_type,
                        headers={"Cache-Control": ASSET_CACHE_CONTROL, "X-Content-Type-Options": "nosniff"})

    return router
