"""``/admin``: the operator's dashboard, every page behind the operator token (``auth.py``).

Without a valid session or bearer token a page answers nothing but a redirect to the login form
(303); with no operator token configured every path answers 403 and shows nothing. Every response
is ``no-store``, may not be framed and sends no referrer to another site. The routes are left out of the OpenAPI
document: they are pages for a person, not an API (``haggler`` prints the same with ``--json``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable
from urllib.parse import quote, urlsplit

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import Connection
from starlette.concurrency import run_in_threadpool

from haggler.catalog import Catalog
from haggler.errors import InvalidInput, RateLimited
from haggler.server.config import StoreConfig
from haggler.server.edge import base_url
from haggler.server.form_body import read_form_body
from haggler.server.limits import Limits
from haggler.storage.database import Database
from haggler.storage.secrets import store_secret
from haggler.web.admin import (
    exchange_report,
    market_report,
    matching_report,
    pages,
    store_reports,
)
from haggler.web.admin.auth import (
    COOKIE_PATH,
    FAILURE_DELAY,
    LOGIN_COOKIE,
    SESSION_COOKIE,
    SESSION_SECONDS,
    AdminAuth,
    new_login_nonce,
)
from haggler.web.admin.paging import Page, Window

PREFIX = "/admin"
#: What every dashboard response says to browsers and caches.
SECURITY_HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                               "form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    # Not "no-referrer": with it a browser sends "Origin: null" on the dashboard's own form posts,
    # which could not then be told from a sandboxed page's. "same-origin" still tells other sites nothing.
    "Referrer-Policy": "same-origin",
    "X-Content-Type-Options": "nosniff",
}
#: Recent deals on the overview.
RECENT_DEALS = 10
_MAX_PAGE = 10**6


@dataclass(frozen=True, slots=True)
class Viewer:
    """Someone the dashboard may show itself to; ``cookie`` is their session (None with a bearer token)."""

    cookie: str | None


def _secured(response: Response) -> Response:
    response.headers.update(SECURITY_HEADERS)
    return response


def _page_number(request: Request, name: str = "page") -> int:
    """``?page=N`` (or another name), 1 when absent or not a positive number."""
    text = request.query_params.get(name, "")
    if not (text.isascii() and text.isdigit()) or int(text[:8]) < 1:
        return 1
    return min(int(text[:8]), _MAX_PAGE)


def _safe_next(path: str | None) -> str:
    """Where to go after signing in: a dashboard path, never another site or scheme."""
    if path and (path == PREFIX or path.startswith((PREFIX + "/", PREFIX + "?"))) and "\\" not in path \
            and not urlsplit(path).netloc and len(path) < 1000:
        return path
    return PREFIX


class AdminDashboard:
    """The dashboard over one store's database and catalog."""

    def __init__(self, db: Database, catalog: Catalog, auth: AdminAuth, *, idle_ttl: timedelta,
                 limits: Limits) -> None:
        self.db = db
        self.catalog = catalog
        self.auth = auth
        self.idle_ttl = idle_ttl
        self.limits = limits

    # -- who is asking --------------------------------------------------------------------------

    def _notice(self, status: int, title: str, text: str, headers: dict[str, str] | None = None) -> Response:
        return _secured(HTMLResponse(pages.notice(self.catalog, title, text), status, headers=headers))

    def _off(self) -> Response:
        return self._notice(403, "The dashboard is off",
                            "This store runs without an operator token, so nobody can sign in to its dashboard. "
                            "Start it with --operator-token (or HAGGLER_OPERATOR_TOKEN) to switch it on.")

    async def _wrong_token(self, request: Request) -> Response | None:
        """Count a wrong token from the request's address (``server/limits.py``): the page that
        refuses it once the address is past the limit, else None after the failure's delay."""
        try:
            await run_in_threadpool(self.limits.wrong_credential, request)
        except RateLimited as exc:
            return self._too_many(exc)
        await asyncio.sleep(FAILURE_DELAY)
        return None

    def _paced(self, request: Request) -> Response | None:
        """The page that refuses to compare a token from an address past the wrong-token limit
        this second (``Limits.pace``), else None: the token may be compared."""
        try:
            self.limits.pace(request)
        except RateLimited as exc:
            return self._too_many(exc)
        return None

    def _too_many(self, exc: RateLimited) -> Response:
        return self._notice(429, "Too many attempts", exc.message[:1].upper() + exc.message[1:] + ".",
                            {"Retry-After": str(exc.retry_after_seconds)})

    async def _viewer(self, request: Request) -> Viewer | Response:
        """The viewer, or the response that refuses them."""
        if not self.auth.enabled:
            return self._off()
        authorization = request.headers.get("authorization")
        if authorization is not None:
            scheme, _, credential = authorization.partition(" ")
            paced = self._paced(request)
            if paced is not None:
                return paced
            if scheme.lower() == "bearer" and self.auth.token_matches(credential.strip()):
                return Viewer(None)
            return await self._wrong_token(request) or self._notice(
                401, "Not signed in", "That is not the operator token.", {"WWW-Authenticate": "Bearer"})
        cookie = request.cookies.get(SESSION_COOKIE)
        if self.auth.session_valid(cookie):
            return Viewer(cookie)
        target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        return _secured(RedirectResponse(f"{PREFIX}/login?next={quote(target, safe='')}", 303))

    def _cross_site(self, request: Request) -> bool:
        """Whether a form post says it comes from another site (``Origin``, ``Sec-Fetch-Site``)."""
        fetch_site = request.headers.get("sec-fetch-site")
        if fetch_site is not None and fetch_site not in ("same-origin", "none"):
            return True
        origin = request.headers.get("origin")
        if origin is None:
            return False
        own = urlsplit(base_url(request))
        return origin != f"{own.scheme}://{own.netloc}"

    async def _form(self, request: Request) -> dict[str, str]:
        """The posted form's fields (the edge caps the body's size); {} for anything that is not a
        browser's form, which then fails the CSRF check like a missing token."""
        try:
            return await read_form_body(request)
        except InvalidInput:
            return {}

    # -- pages ------------------------------------------------------------------------------------

    async def _show(self, request: Request, title: str, current: str,
                    build: Callable[[Connection], str | None]) -> Response:
        """A dashboard page: ``build(conn)`` (run in a worker thread, in a read transaction) makes
        its content, but only once the viewer is known."""
        viewer = await self._viewer(request)
        if isinstance(viewer, Response):
            return viewer

        def read() -> str | None:
            with self.db.read() as conn:
                return build(conn)

        body = await run_in_threadpool(read)
        logout = None if viewer.cookie is None else self.auth.csrf_token(f"session:{viewer.cookie}")
        if body is None:
            return _secured(HTMLResponse(pages.frame(self.catalog, "Not found", current,
                                                     "<p>There is nothing here.</p>", logout_csrf=logout), 404))
        return _secured(HTMLResponse(pages.frame(self.catalog, title, current, body, logout_csrf=logout)))

    def router(self) -> APIRouter:
        router = APIRouter(prefix=PREFIX, include_in_schema=False)
        catalog = self.catalog

        def now() -> datetime:
            return self.auth.clock()

        @router.get("")
        async def overview(request: Request) -> Response:
            def build(conn: Connection) -> str:
                every = store_reports.all_deals(conn, catalog)  # newest first: the recent ones lead
                summary = store_reports.summary(conn, catalog, now=now(), idle_ttl=self.idle_ttl, reports=every)
                return pages.overview(catalog, summary, Page.of(every, Window(0, RECENT_DEALS)))
            return await self._show(request, "Overview", PREFIX, build)

        @router.get("/chats")
        async def chats(request: Request) -> Response:
            live_only = request.query_params.get("live") == "1"
            window = Window.page(_page_number(request))

            def build(conn: Connection) -> str:
                found = store_reports.chats_page(conn, catalog, now=now(), idle_ttl=self.idle_ttl,
                                                 live_only=live_only, window=window)
                return pages.chats(found, live_only=live_only)
            return await self._show(request, "Live chats" if live_only else "Chats", f"{PREFIX}/chats", build)

        @router.get("/chats/{chat_id}")
        async def chat(request: Request, chat_id: str) -> Response:
            def build(conn: Connection) -> str | None:
                found = store_reports.transcript(conn, catalog, chat_id, now=now(), idle_ttl=self.idle_ttl) \
                    if len(chat_id) <= 64 else None
                return None if found is None else pages.transcript_page(found)
            return await self._show(request, f"Chat {chat_id}", f"{PREFIX}/chats", build)

        @router.get("/deals")
        async def deals(request: Request) -> Response:
            window = Window.page(_page_number(request))
            return await self._show(request, "Deals", f"{PREFIX}/deals",
                                    lambda conn: pages.deals(store_reports.deals_page(conn, catalog, window)))

        @router.get("/orders")
        async def orders(request: Request) -> Response:
            window = Window.page(_page_number(request))
            return await self._show(request, "Orders", f"{PREFIX}/orders",
                                    lambda conn: pages.orders(store_reports.orders_page(conn, window)))

        @router.get("/products")
        async def products(request: Request) -> Response:
            return await self._show(request, "Products", f"{PREFIX}/products",
                                    lambda conn: pages.products(store_reports.product_stats(conn, catalog)))

        @router.get("/exchange")
        async def exchange(request: Request) -> Response:
            window = Window.page(_page_number(request))
            return await self._show(request, "Exchange", f"{PREFIX}/exchange", lambda conn: pages.exchange(
                exchange_report.ledger_totals(conn), exchange_report.transactions_page(conn, window)))

        @router.get("/matching")
        async def matching(request: Request) -> Response:
            window = Window.page(_page_number(request))
            return await self._show(request, "Matching", f"{PREFIX}/matching", lambda conn: pages.matching(
                matching_report.opportunities_by_status(conn), matching_report.opportunities_page(conn, window)))

        @router.get("/market")
        async def market(request: Request) -> Response:
            books_at, deals_at = _page_number(request, "books"), _page_number(request, "deals")
            return await self._show(request, "Market", f"{PREFIX}/market", lambda conn: pages.market(
                market_report.books_page(conn, Window.page(books_at)),
                market_report.deals_page(conn, Window.page(deals_at)), market_report.deals_by_status(conn),
                books_at=books_at, deals_at=deals_at))

        self._sign_in_routes(router)
        return router

    # -- signing in and out ---------------------------------------------------------------------------

    def _cookie(self, request: Request, response: Response, name: str, value: str, max_age: int) -> None:
        response.set_cookie(name, value, max_age=max_age, path=COOKIE_PATH, httponly=True, samesite="strict",
                            secure=base_url(request).startswith("https:"))

    def _login_form(self, request: Request, status: int = 200, *, error: str | None = None,
                    next_path: str = PREFIX) -> Response:
        """The form, with a fresh pre-login cookie and the CSRF token bound to it."""
        nonce = new_login_nonce()
        response = _secured(HTMLResponse(pages.login(self.catalog, self.auth.csrf_token(f"login:{nonce}"),
                                                     error=error, next_path=next_path), status))
        self._cookie(request, response, LOGIN_COOKIE, nonce, 3600)
        return response

    def _sign_in_routes(self, router: APIRouter) -> None:
        @router.get("/login")
        async def login_form(request: Request) -> Response:
            if not self.auth.enabled:
                return self._off()
            next_path = _safe_next(request.query_params.get("next"))
            if self.auth.session_valid(request.cookies.get(SESSION_COOKIE)):
                return _secured(RedirectResponse(next_path, 303))
            return self._login_form(request, next_path=next_path)

        @router.post("/login")
        async def login(request: Request) -> Response:
            if not self.auth.enabled:
                return self._off()
            if self._cross_site(request):
                return self._notice(403, "Refused", "This form may only be sent from the dashboard itself.")
            form = await self._form(request)
            next_path = _safe_next(form.get("next"))
            nonce = request.cookies.get(LOGIN_COOKIE)
            if not self.auth.csrf_valid(f"login:{nonce}" if nonce else None, form.get("csrf")):
                return self._login_form(request, 403, error="The form expired or did not come from this page: "
                                        "please sign in again.", next_path=next_path)
            paced = self._paced(request)
            if paced is not None:
                return paced
            if not self.auth.token_matches(form.get("token", "")):
                return await self._wrong_token(request) or self._login_form(
                    request, 401, error="That is not the operator token.", next_path=next_path)
            response = _secured(RedirectResponse(next_path, 303))
            self._cookie(request, response, SESSION_COOKIE, self.auth.new_session(), SESSION_SECONDS)
            response.delete_cookie(LOGIN_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
            return response

        @router.post("/logout")
        async def logout(request: Request) -> Response:
            if not self.auth.enabled:
                return self._off()
            cookie = request.cookies.get(SESSION_COOKIE)
            form = await self._form(request)
            if self._cross_site(request) or not self.auth.session_valid(cookie) or \
                    not self.auth.csrf_valid(f"session:{cookie}", form.get("csrf")):
                return self._notice(403, "Refused", "This form may only be sent from the dashboard itself.")
            response = _secured(RedirectResponse(f"{PREFIX}/login", 303))
            response.delete_cookie(SESSION_COOKIE, path=COOKIE_PATH, httponly=True, samesite="strict")
            return response


def admin_router(config: StoreConfig, db: Database, limits: Limits) -> APIRouter:
    """The dashboard of the store ``config`` describes, its sessions keyed by the operator token
    and the store's ``admin-sessions`` secret."""
    token = config.matching.operator_token
    # Drawn here, at start-up, so no request waits on the write; a store without a token draws none.
    auth = AdminAuth(token, store_secret(db, "admin-sessions") if token else b"", config.clock)
    return AdminDashboard(db, config.catalog, auth, idle_ttl=timedelta(seconds=config.limits.session_idle_ttl_seconds),
                          limits=limits).router()
