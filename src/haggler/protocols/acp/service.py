"""ACP's checkout operations, without HTTP: the caller's key and API version checked, the request
read, the checkout core asked, the answer shaped, idempotency kept.

Idempotency (rfc.agentic_checkout.md §6): every POST carries an ``Idempotency-Key``, scoped to the
caller's key and the endpoint's path. The first answer is kept, a refusal (4xx) included (§6.3: the
original response, with its status); a 5xx is not (§6.5), nor a 409 or 429 that asks to retry in a
moment (``commerce/idempotency.py``), so the same request sent again runs again. The same key with
the same body (semantic JSON equality) answers the kept status and body again, marked
``Idempotent-Replayed``; with another body it is 422 ``idempotency_conflict``, and while the first
still runs 409 ``idempotency_in_flight``.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from haggler.catalog import Catalog
from haggler.commerce.idempotency import IdempotencyKeys, Kept, KeyInFlight, KeyReused
from haggler.commerce.order_events import OrderEvents
from haggler.commerce.counter_offers import Caller, CounterOffers
from haggler.commerce.sessions import FINAL, AuthenticationRefused, CheckoutSessions, Priced
from haggler.errors import HagglerError, Unauthorized
from haggler.orders import Order
from haggler.payments.handler import PaymentHandler
from haggler.protocols.acp import reading, views
from haggler.protocols.acp.settings import AcpSettings
from haggler.protocols.acp.webhooks import OrderWebhooks
from haggler.server.errors import status_for
from haggler.storage.database import Database

#: How long an answered idempotency key is kept (§6.6: at least 24 hours).
IDEMPOTENCY_TTL = timedelta(hours=48)
#: The door ACP orders come through (orders.door).
DOOR = "acp"
_NOT_CANCELABLE = 405


class AcpService:
    def __init__(self, db: Database, clock: Callable[[], datetime], settings: AcpSettings,
                 handlers: Mapping[str, PaymentHandler], *, catalog: Catalog | None = None,
                 deal_ttl: timedelta = timedelta(hours=24), counter_offers: CounterOffers | None = None,
                 webhooks: OrderWebhooks | None = None) -> None:
        """``catalog``: the store's negotiable products, sellable here too; ``deal_ttl``: how long
        a deal closed in chat can be bought (the same lifetime every other door honours);
        ``counter_offers``: the store's answer to a cancel over price (None: none); ``webhooks``:
        where placed orders are announced (default: as ``settings`` say)."""
        self.db = db
        self.clock = clock
        self.settings = settings
        self.sessions = CheckoutSessions(db, clock, DOOR, handlers, catalog=catalog, deal_ttl=deal_ttl,
                                         agent_authentication=True)
        self.keys = IdempotencyKeys(db, clock, DOOR + ":", IDEMPOTENCY_TTL)
        self.handler_ids = tuple(sorted(handlers))
        #: The handlers a session offers, declared.
        self.handlers = views.handlers(handlers)
        #: The interventions the store can ask an agent for (3-D Secure), declared.
        self.interventions = views.interventions(handlers)
        self.counter_offers = counter_offers
        self.webhooks = webhooks or OrderWebhooks(settings, find=self._placed)
        #: The order events ACP owes the platform (``commerce/order_events.py``).
        self.events = OrderEvents(db, clock, {DOOR: self.webhooks})

    # -- the caller ----------------------------------------------------------------------------------

    def authorize(self, authorization: str | None, version: str | None) -> None:
        """The Bearer key (compared in constant time), then ``API-Version``."""
        expected = self.settings.api_key
        scheme, _, presented = (authorization or "").partition(" ")
        if expected is None or scheme.lower() != "bearer" or not hmac.compare_digest(
                presented.strip().encode(), expected.encode()):
            raise Unauthorized("a valid ACP API key is required: Authorization: Bearer <key>")
        reading.api_version(version)

    # -- discovery -----------------------------------------------------------------------------------

    def discovery(self, base: str) -> dict[str, Any]:
        return views.discovery(base, self.interventions)

    # -- checkout sessions ---------------------------------------------------------------------------

    def create(self, key: str | None, body: dict[str, Any], base: str) -> Kept:
        return self._idempotent(key, "/checkout_sessions", body, lambda: Kept(201, self._checkout(
            self.sessions.create(reading.session_input(body, previous=None), base=base), base)))

    def get(self, session_id: str, base: str) -> Kept:
        return Kept(200, self._checkout(self.sessions.get(session_id), base))

    def update(self, key: str | None, session_id: str, body: dict[str, Any], base: str) -> Kept:
        def run() -> Kept:
            previous = self.sessions.peek(session_id)
            request = reading.session_input(body, previous=previous)
            priced = self.sessions.update(session_id, request)
            asked = request.fulfillment.selected_option_id if request.fulfillment is not None and \
                body.get("selected_fulfillment_options") is not None else None
            return Kept(200, self._checkout(priced, base, asked_option=asked))
        return self._idempotent(key, f"/checkout_sessions/{session_id}", body, run)

    def cancel(self, key: str | None, session_id: str, body: dict[str, Any], base: str, *,
               caller: Caller | None = None) -> Kept:
        """§4.5; canceled with ``intent_trace.reason_code`` ``price_sensitivity``, the answer may
        carry the store's counter-offer (``commerce/counter_offers.py``)."""
        def run() -> Kept:
            reason = reading.cancel_request(body)
            current = self.sessions.peek(session_id)
            if current.status in FINAL:
                return Kept(_NOT_CANCELABLE, views.error(
                    _NOT_CANCELABLE, f"checkout session {session_id} is {current.status} and cannot be canceled",
                    {"code": "not_cancelable"}))
            canceled = self.sessions.cancel(session_id)
            answer = self._checkout(canceled, base)
            offer = self.counter_offers.after_cancel(canceled, reason, caller, base) if self.counter_offers else None
            if offer is not None:
                views.add_counter_offer(answer, offer)
            return Kept(200, answer)
        return self._idempotent(key, f"/checkout_sessions/{session_id}/cancel", body, run)

    def complete(self, key: str | None, session_id: str, body: dict[str, Any], base: str) -> Kept:
        """Charge and place the order through the checkout core: on success the session is
        ``completed`` with its ``order``; a declined payment is 402 and leaves no order; a payment
        that waits for the buyer answers the session in ``authentication_required`` with
        ``authentication_metadata`` (the agent runs 3-D Secure and sends ``authentication_result``
        with the same payment), or, for a handler that only has a page for it, in
        ``requires_escalation`` with ``continue_url``. A placed order is announced to the store's
        order webhook (``order_create``) once the answer is sent, by the request that placed it only
        (a replay announces nothing)."""
        def run() -> Kept:
            payment = reading.payment_request(body, self.handler_ids)
            try:
                priced, order = self.sessions.complete(session_id, payment, door=DOOR,
                                                       buyer=reading.complete_buyer(body))
            except AuthenticationRefused as exc:  # rfc.agentic_checkout §4.4, §9.7: requires_3ds at this param
                raise reading.Refused(exc.message, "requires_3ds" if exc.missing else "invalid",
                                      "$.authentication_result") from None
            return Kept(200, self._checkout(priced, base, order),
                        after=self.events.after_placed(DOOR, order.id if order is not None else None))
        return self._idempotent(key, f"/checkout_sessions/{session_id}/complete", body, run)

    def _placed(self, order_id: str) -> tuple[Order, Priced] | None:
        """An ACP order with its session as priced now (what its webhook event is made from)."""
        found = self.sessions.placed(order_id)
        if found is None or found[1] is None:
            return None
        return found[0], self.sessions.get(found[1].id)

    def _checkout(self, priced: Priced, base: str, order: Order | None = None, *,
                  asked_option: str | None = None) -> dict[str, Any]:
        """The session as ACP's; ``asked_option``: the option the request selected, if it did."""
        body = views.checkout(priced, self.handlers, order, base, self.interventions)
        if asked_option is not None and priced.selected_option is None:
            # §8: a selected option MUST be one of fulfillment_options; one that is not is not taken.
            body["messages"].append({"type": "error", "code": "invalid", "content_type": "plain",
                                     "param": "$.selected_fulfillment_options[0].option_id",
                                     "content": f"Fulfillment option {asked_option!r} is not offered for this "
                                                "destination"})
        return body

    # -- idempotency and refusals --------------------------------------------------------------------

    @staticmethod
    def _refusal(exc: HagglerError) -> Kept:
        status = status_for(exc)
        return Kept(status, views.error(status, exc.message, exc.fields()))

    def _idempotent(self, key: str | None, path: str, body: dict[str, Any], run: Callable[[], Kept]) -> Kept:
        """``run`` once per key (see the module's docstring)."""
        checked = reading.idempotency_key(key)
        try:
            return self.keys.run(self.keys.owner(self.settings.api_key or "", path), checked, "POST " + path,
                                 body, run, self._refusal)
        except KeyReused:
            raise reading.IdempotencyConflict(
                "Idempotency-Key has already been used with a different request body") from None
        except KeyInFlight:
            raise reading.IdempotencyInFlight(
                "A request with this Idempotency-Key is currently being processed") from None

    def sweep(self) -> int:
        """Forget answered idempotency keys older than :data:`IDEMPOTENCY_TTL`; how many."""
        return self.keys.sweep()
