"""UCP's ``continue_url`` for a checkout whose payment waits for the buyer (3-D Secure): the page a
platform hands its buyer to, and the one the processor brings them back to afterwards.

UCP's checkout.md ("Continue URL") has the buyer "continue and finalize the checkout" there, so
every visit first asks the processor how the payment stands (``UcpService.resume``): still waiting,
the buyer is sent on to the processor's page (303); paid, the order is placed and the page says so;
failed, the stock and the deal go back and the page says to pay another way; no answer, the page
asks to try again later (503) and nothing changes. A GET does it, since that is how the processor
brings the buyer back; each outcome is settled once however often the page is loaded.

The path holds the session's id, as unguessable as in the API's own paths; the page shows what the
buyer needs (the store, the order's id, the amount) and nothing of theirs (no name, no address).
"""

from __future__ import annotations

import logging
from html import escape
from typing import Callable

from fastapi import APIRouter
from starlette.background import BackgroundTask
from starlette.responses import HTMLResponse, RedirectResponse, Response

from haggler.catalog import Catalog
from haggler.commerce.sessions import CANCELED, IN_PROGRESS, Resumed
from haggler.errors import NotFound, Unavailable
from haggler.money import format_money
from haggler.payments.handler import PaymentSetupError
from haggler.protocols.ucp.service import UcpService
from haggler.protocols.ucp.views import CONTINUE_PATH
from haggler.web.layout import header, page

log = logging.getLogger("haggler")

#: Sent with every answer: the page is one buyer's, never to be kept by a cache, and its address
#: (which holds the session's id) is not to be passed on to the processor's page as a referrer.
_PRIVATE = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
#: How soon to try again when the processor did not answer, or a completion is still charging.
RETRY_SECONDS = 5
_BACK = "<p>You can close this page and return to your assistant.</p>"


def build_router(ucp: UcpService, catalog: Catalog) -> APIRouter:
    router = APIRouter()

    def answer(title: str, text: str, status: int = 200, *, retry: bool = False,
               after: Callable[[], object] | None = None) -> HTMLResponse:
        headers = {**_PRIVATE, **({"Retry-After": str(RETRY_SECONDS)} if retry else {})}
        return HTMLResponse(page(title, f"{header(catalog)}<main><h2>{escape(title)}</h2>{text}</main>"),
                            status_code=status, headers=headers,
                            background=BackgroundTask(after) if after is not None else None)

    def outcome(resumed: Resumed, after: Callable[[], object] | None) -> Response:
        if resumed.action_url is not None:
            return RedirectResponse(resumed.action_url, status_code=303, headers=_PRIVATE)
        session, order = resumed.priced.session, resumed.order
        if order is not None:
            paid = format_money(order.total_cents, order.currency)
            return answer("Payment complete", f"<p>Your order <code>{escape(order.id)}</code> is placed; "
                          f"{escape(paid)} was paid.</p>{_BACK}", after=after)
        if session.status == IN_PROGRESS:
            return answer("Your payment is still being confirmed", "<p>Please reload this page in a moment.</p>",
                          503, retry=True)
        if session.status == CANCELED:
            return answer("This checkout is closed", f"<p>It was not paid, and nothing was charged.</p>{_BACK}")
        if resumed.reason is not None:  # declined just now, the hold given back
            return answer("The payment did not go through", f"<p>{escape(resumed.reason)}</p><p>Nothing was "
                          "charged. Return to your assistant to pay another way.</p>")
        if session.hold is not None:  # a payment the processor has no page for: the store settles it
            return answer("Your payment is being settled", "<p>The store is confirming it with the payment "
                          f"processor; your assistant will see the outcome.</p>{_BACK}")
        return answer("Nothing to pay here yet", f"<p>This checkout is not waiting for a payment.</p>{_BACK}")

    @router.get(CONTINUE_PATH, response_class=HTMLResponse, include_in_schema=False)
    def continue_checkout(session_id: str) -> Response:
        try:
            return outcome(*ucp.resume(session_id))
        except NotFound:
            return answer("This payment link is not known", "<p>Check the link your assistant gave you.</p>", 404)
        except (Unavailable, PaymentSetupError) as exc:
            if isinstance(exc, PaymentSetupError):  # the operator's to fix; the buyer is only told to wait
                log.warning("checkout session %s: the payment could not be read: %s", session_id, exc)
            return answer("We could not confirm your payment yet", "<p>Nothing has changed. Please reload this "
                          "page in a moment.</p>", 503, retry=True)

    return router
