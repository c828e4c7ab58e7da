"""HTTP for the checkout pages: the deal's router (``GET`` shows the deal or its order, ``POST``
buys it), and the form submission and OpenAPI operations the agents.json cart's page shares.

Every answer is a page for a person, errors included: an unknown link is a 404 page, an expired
deal 410, a deal held by an agent's cart 409, a form with problems 400 with the form again.
"""

from __future__ import annotations

from functools import partial
from typing import Awaitable, Callable, Optional

from fastapi import APIRouter, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, RedirectResponse, Response

from haggler.catalog import Catalog
from haggler.errors import Conflict, Gone, InvalidInput, NotFound
from haggler.orders import BUYER_FIELDS, Buyer, BuyerInvalid, Order, read_buyer
from haggler.server.form_body import read_form_body
from haggler.server.openapi import HTML, NO_BODY, Operation, WireModel
from haggler.server.write_lane import WriteLane
from haggler.web.checkout import (deal_bought_elsewhere_page, deal_in_cart_page, deal_page, expired_deal_page,
                                  notice_page, unknown_link_page)
from haggler.web.deal_checkout import DealCheckout

DEAL_CHECKOUT_PATH = "/checkout/{deal_id}"


#: A checkout's page as it stands, given the submitted values and their problems (both None: as is).
ShowPage = Callable[[Optional[dict[str, str]], Optional[dict[str, str]]], HTMLResponse]


def form_page(html: str, problems: dict[str, str] | None, order: Order | None) -> HTMLResponse:
    """A checkout page: 400 when it shows the form again with problems, else 200."""
    return HTMLResponse(html, status_code=400 if problems and order is None else 200)


async def submit(request: Request, catalog: Catalog, place: Callable[[Buyer], Awaitable[object]], show: ShowPage,
                 done: str) -> Response:
    """A checkout form's submission, for a deal's page and a cart's alike: ``place`` the order
    (awaited: where its database work runs is the caller's choice), then 303 to ``done``
    (post/redirect/get); with problems in the form, the page again (400); when the order cannot
    be placed (unknown, expired, held elsewhere), the page saying why. A body that is not a
    browser's form gets a page too: a person never sees a JSON error."""
    try:
        form = await read_form_body(request)
    except InvalidInput as exc:
        return HTMLResponse(notice_page(catalog, "That form could not be read", f"{exc} Please go back and "
                                        "submit the form again."), status_code=400)
    try:
        await place(read_buyer(form))
    except BuyerInvalid as exc:
        return await run_in_threadpool(show, form, exc.problems)
    except (NotFound, Conflict, Gone):  # the page says which
        return await run_in_threadpool(show, None, None)
    return RedirectResponse(done, status_code=303)


def build_router(checkout: DealCheckout, in_writer: WriteLane) -> APIRouter:
    """The deal page's router. Its order is placed in ``in_writer`` (``server/write_lane.py``), as
    the cart page's is: placed from a worker thread, it held SQLite's write lock there, and every
    agent write that came in meanwhile found the database busy and went to a thread too."""
    router = APIRouter()
    catalog = checkout.catalog

    def show(deal_id: str, values: dict[str, str] | None = None,
             problems: dict[str, str] | None = None) -> HTMLResponse:
        """The deal's page as it stands: its order, a refusal, or the form."""
        try:
            state = checkout.state(deal_id)
        except NotFound:
            return HTMLResponse(unknown_link_page(catalog), status_code=404)
        if state.bought_through is not None:
            return HTMLResponse(deal_bought_elsewhere_page(catalog, state.bought_through), status_code=409)
        if state.order is None and state.in_cart:
            return HTMLResponse(deal_in_cart_page(catalog), status_code=409)
        if state.order is None and state.expires_at <= checkout.clock():
            return HTMLResponse(expired_deal_page(catalog, state), status_code=410)
        return form_page(deal_page(catalog, state, values, problems), problems, state.order)

    @router.get(DEAL_CHECKOUT_PATH, response_class=HTMLResponse)
    def deal_checkout(deal_id: str) -> HTMLResponse:
        return show(deal_id)

    @router.post(DEAL_CHECKOUT_PATH, response_class=HTMLResponse)
    async def buy(request: Request, deal_id: str) -> Response:
        return await submit(request, catalog, partial(in_writer, checkout.place, deal_id),
                            partial(show, deal_id),
                            f"/checkout/{deal_id}")

    return router


class BuyerForm(WireModel):
    """The checkout form (``application/x-www-form-urlencoded``)."""

    name: str = Field(max_length=BUYER_FIELDS["name"])
    email: str = Field(max_length=BUYER_FIELDS["email"])
    address: str = Field(max_length=BUYER_FIELDS["address"])


def page_operations(path: str, what: str) -> dict[tuple[str, str], Operation]:
    """A checkout page's two operations, for the OpenAPI document: every answer is a page."""
    tags = ("pages",)
    return {("get", path): Operation(f"{what}'s checkout page", {200: HTML, 404: HTML, 409: HTML, 410: HTML},
                                     tags=tags),
            ("post", path): Operation(f"Buy {what.lower()} (one order, however often submitted)",
                                      {303: NO_BODY, 200: HTML, 400: HTML, 404: HTML, 409: HTML, 410: HTML},
                                      body=BuyerForm, form=True, tags=tags)}


def openapi_operations() -> dict[tuple[str, str], Operation]:
    return page_operations(DEAL_CHECKOUT_PATH, "A deal closed in chat")
