"""HTTP for the deal checkout page: ``GET`` shows the deal (or its order), ``POST`` buys it.

Every answer is a page for a person, errors included: an unknown link is a 404 page, an expired
deal 410, a deal held by an agent's cart 409, a form with problems 400 with the form again.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import HTMLResponse, RedirectResponse, Response

from pydantic import Field

from haggler.catalog import Catalog
from haggler.errors import Conflict, Gone, InvalidInput, NotFound
from haggler.orders import BUYER_FIELDS, BuyerInvalid, read_buyer
from haggler.server.openapi import HTML, NO_BODY, Operation, WireModel
from haggler.server.form_body import read_form_body
from haggler.web.checkout import deal_page, notice_page, unknown_link_page
from haggler.web.deal_checkout import DealCheckout

DEAL_CHECKOUT_PATH = "/checkout/{deal_id}"


def build_router(checkout: DealCheckout) -> APIRouter:
    router = APIRouter()
    catalog = checkout.catalog

    def answer(deal_id: str, values: dict[str, str] | None = None,
               problems: dict[str, str] | None = None) -> HTMLResponse:
        """The deal's page as it stands: its order, a refusal, or the form (with ``problems``: 400)."""
        try:
            state = checkout.state(deal_id)
        except NotFound:
            return HTMLResponse(unknown_link_page(catalog), status_code=404)
        if state.order is None and state.in_cart:
            return HTMLResponse(notice_page(
                catalog, "This deal is in a shopping agent's cart",
                "A shopping agent has put this deal in its cart: complete the purchase at that cart's checkout."),
                status_code=409)
        if state.order is None and state.expires_at <= checkout.clock():
            return HTMLResponse(notice_page(
                catalog, "This deal has expired",
                f"The price agreed in this chat held until {state.expires_at.strftime('%Y-%m-%d %H:%M UTC')}.",
                link=(f"/store/p/{state.deal.product_id}", "Start a new chat about this product")), status_code=410)
        return HTMLResponse(deal_page(catalog, state, values, problems), status_code=400 if problems and state.order is None else 200)

    @router.get(DEAL_CHECKOUT_PATH, response_class=HTMLResponse)
    def show(deal_id: str) -> HTMLResponse:
        return answer(deal_id)

    @router.post(DEAL_CHECKOUT_PATH, response_class=HTMLResponse)
    async def buy(request: Request, deal_id: str) -> Response:
        form = await read_checkout_form(request, catalog)
        if isinstance(form, HTMLResponse):
            return form
        try:
            await run_in_threadpool(checkout.place, deal_id, read_buyer(form))
        except BuyerInvalid as exc:
            return await run_in_threadpool(answer, deal_id, form, exc.problems)
        except (NotFound, Conflict, Gone):  # the page says which
            return await run_in_threadpool(answer, deal_id)
        return RedirectResponse(f"/checkout/{deal_id}", status_code=303)

    return router


async def read_checkout_form(request: Request, catalog: Catalog) -> dict[str, str] | HTMLResponse:
    """The checkout form's fields, or the page that says the body was not a form (400): a person
    gets a page, never a JSON error."""
    try:
        return await read_form_body(request)
    except InvalidInput as exc:
        return HTMLResponse(notice_page(catalog, "That form could not be read", f"{exc} Please go back and "
                                        "submit the form again."), status_code=400)


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
