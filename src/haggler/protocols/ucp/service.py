"""UCP's checkout and order operations, without HTTP: the agent's header checked, the request read,
the checkout core asked, the answer shaped, idempotency kept, and the order webhooks due after it.

Idempotency (UCP checkout REST binding, "HTTP Headers"): with an ``idempotency-key`` (each
platform's keys apart, by the profile its ``UCP-Agent`` names), the first answer is stored with a
fingerprint of the request (method, path and body, whatever its spacing or key order); the same key
with the same request answers the stored status and body again, with another request 409. A refusal
is an answer too (a declined payment is declined again, not charged again); a 5xx, or a 409 or 429
asking to retry in a moment, is not stored, so sending it again runs it again. The keys are kept by
the checkout core's ``IdempotencyKeys`` (``haggler/commerce/idempotency.py``); docs/ucp.md says why
the claimed profile is scope enough.
"""

from __future__ import annotations

import hmac
import json
import secrets
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from haggler.catalog import Catalog
from haggler.commerce.counter_offers import Caller, CounterOffer, CounterOffers
from haggler.commerce import order_events
from haggler.commerce.idempotency import IdempotencyKeys, Kept, KeyReused
from haggler.commerce.order_events import OrderEvents
from haggler.commerce.sessions import CheckoutSessions, Priced, Resumed
from haggler.errors import Conflict, Forbidden, HagglerError, InvalidInput, NotFound, Unprocessable
from haggler.orders import Order, order_for, update_details
from haggler.payments.handler import PaymentHandler
from haggler.protocols.ucp import ap2, reading, views
from haggler.protocols.ucp.settings import UcpSettings
from haggler.protocols.ucp.webhooks import SHIPPED, Webhooks
from haggler.server.errors import status_for
from haggler.storage.database import Database
from haggler.trust.jws import public_jwk
from haggler.trust.signatures import Signer

#: How long an answered idempotency key is kept (the REST binding: at least 24 hours).
IDEMPOTENCY_TTL = timedelta(hours=48)
#: The door UCP orders come through (orders.door).
DOOR = "ucp"
#: The idempotency records' owner in ``idempotency_keys`` (the exchange keys its own per agent):
#: ``ucp:`` and a digest of the platform's profile URL, so that one platform's keys never meet another's.
_IDEMPOTENCY_OWNER = "ucp:"


def _new_entries(name: str, recorded: list[dict[str, Any]], sent: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The entries of ``sent`` that the log ``recorded`` does not hold yet, in the order sent. The
    log is append-only: 422 when a recorded entry is left out, or comes again other than as recorded
    (compared as canonical JSON, so byte for byte but for spacing and key order), or an id is sent
    twice."""
    by_id: dict[str, dict[str, Any]] = {}
    for entry in sent:
        if entry["id"] in by_id:
            raise Unprocessable(f"{name}: {entry['id']} is sent twice")
        by_id[entry["id"]] = entry
    missing = [e["id"] for e in recorded if e["id"] not in by_id]
    if missing:
        raise Unprocessable(f"{name} are append-only: {', '.join(missing)} cannot be removed")
    changed = [e["id"] for e in recorded if _canonical(by_id[e["id"]]) != _canonical(e)]
    if changed:
        raise Unprocessable(f"{name} are append-only: {', '.join(changed)} cannot change once recorded")
    known = {e["id"] for e in recorded}
    return [e for e in sent if e["id"] not in known]


def _within_total(order: Order, adjustments: list[dict[str, Any]]) -> None:
    """422 for an adjustment whose amount is more than the order's total: UCP gives an amount no
    sign and no bound, and no refund or credit of an order can be worth more than was paid for it
    (the amount is never negative: ``reading.order_update``)."""
    for adjustment in adjustments:
        if adjustment.get("amount", 0) > order.total_cents:
            raise Unprocessable(f"adjustments: the amount of {adjustment['id']}, {adjustment['amount']}, is more "
                                f"than the order's total, {order.total_cents}")


def _canonical(entry: dict[str, Any]) -> str:
    return json.dumps(entry, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class UcpService:
    def __init__(self, db: Database, clock: Callable[[], datetime], settings: UcpSettings,
                 handlers: Mapping[str, PaymentHandler], *, signer: Signer, catalog: Catalog | None = None,
                 deal_ttl: timedelta = timedelta(hours=24), counter_offers: CounterOffers | None = None) -> None:
        """``signer``: the store's ES256 key, which signs the order webhooks and AP2's merchant
        authorizations and the profile publishes;
        ``catalog``: the store's negotiable products, sellable here too; ``deal_ttl``: how long
        a deal closed in chat can be bought (the agents.json cart's and checkout page's lifetime);
        ``counter_offers``: the store's answer to a cancel over price (None: none)."""
        self.db = db
        self.clock = clock
        self.settings = settings
        self.signer = signer
        self.sessions = CheckoutSessions(db, clock, DOOR, handlers, catalog=catalog, deal_ttl=deal_ttl,
                                         on_file=settings.data_on_file)
        self.webhooks = Webhooks(settings, signer, find=self.sessions.placed)
        #: The order events UCP owes its platforms (``commerce/order_events.py``).
        self.events = OrderEvents(db, clock, {DOOR: self.webhooks})
        self.counter_offers = counter_offers
        self.keys = IdempotencyKeys(db, clock, _IDEMPOTENCY_OWNER, IDEMPOTENCY_TTL)
        listed = views.LISTED_FOR_TESTS if settings.simulation_secret else ()
        #: The handlers a checkout names, declared: those it can charge through, then those listed for tests.
        self.handlers = views.handler_entries(handlers, listed)

    # -- discovery ---------------------------------------------------------------------------------

    def profile(self, base: str) -> dict[str, Any]:
        """``/.well-known/ucp`` for a store whose links start at ``base``."""
        return views.profile(base, self.handlers, [public_jwk(self.signer)])

    # -- checkout sessions -------------------------------------------------------------------------

    def create(self, agent_header: str | None, key: str | None, body: dict[str, Any], base: str) -> Kept:
        """Create Checkout: 201 with the session. The profile its ``UCP-Agent`` names is read here
        and only here, and the checkout keeps what it says: the order webhook, and, when AP2 is in
        both sides' capabilities, the platform's signing keys, which lock the session into AP2's
        mandate flow (``ap2.py``)."""
        agent = reading.read_agent(agent_header, store=base)

        def run() -> Kept:
            platform = self.webhooks.platform(agent.profile)
            locked = views.AP2 in views.negotiated(base, platform.capabilities)
            request = reading.session_input(body, creating=True, webhook_url=platform.webhook_url,
                                            mandate_keys=platform.signing_keys if locked else None,
                                            creator=agent.profile)
            return Kept(201, self._checkout(self.sessions.create(request, base=base), base))
        return self._idempotent(agent, key, "POST /checkout-sessions", body, run)

    def get(self, agent_header: str | None, session_id: str, base: str) -> Kept:
        """Get Checkout: the session as it stands, completed and canceled ones included."""
        reading.read_agent(agent_header, store=base)
        return Kept(200, self._checkout(self.sessions.get(session_id), base))

    def update(self, agent_header: str | None, key: str | None, session_id: str, body: dict[str, Any],
               base: str) -> Kept:
        """Update Checkout: the body's id, when sent, must be the session's. The order webhook stays
        the one the creator's profile named: anyone who knows a session's id could otherwise send an
        update naming their own profile and receive the order, buyer and address included."""
        agent = reading.read_agent(agent_header, store=base)

        def run() -> Kept:
            if body.get("id") is not None and body["id"] != session_id:
                raise InvalidInput(f"the body's id {body['id']!r} is not the session's {session_id!r}")
            request = reading.session_input(body, creating=False, webhook_url=None)
            return Kept(200, self._checkout(self.sessions.update(session_id, request), base))
        return self._idempotent(agent, key, f"PUT /checkout-sessions/{session_id}", body, run)

    def cancel(self, agent_header: str | None, key: str | None, session_id: str, body: dict[str, Any],
               base: str, *, caller: Caller | None = None) -> Kept:
        """Cancel Checkout: 409 for a session already completed or canceled. Canceled over price
        (``intent_trace.reason_code``), the answer may carry the store's counter-offer
        (``commerce/counter_offers.py``)."""
        agent = reading.read_agent(agent_header, store=base)

        def run() -> Kept:
            reason = reading.cancel_reason(body)
            canceled = self.sessions.cancel(session_id)
            offer = self.counter_offers.after_cancel(canceled, reason, caller, base) if self.counter_offers else None
            return Kept(200, self._checkout(canceled, base, offer=offer))
        return self._idempotent(agent, key, f"POST /checkout-sessions/{session_id}/cancel", body, run)

    def complete(self, agent_header: str | None, key: str | None, session_id: str, body: dict[str, Any],
                 base: str) -> Kept:
        """Charge and place the order (``haggler/commerce/sessions.py``), then tell the platform's
        webhook ``order_placed``; a payment that waits for the buyer answers the checkout in
        ``requires_escalation``, with the store's page as where they continue, which the processor
        brings them back to (:meth:`resume`). A session locked into AP2 is charged only once its
        mandate is verified (``ap2.py``)."""
        agent = reading.read_agent(agent_header, store=base)

        def run() -> Kept:
            payment = replace(reading.payment_request(body), return_url=views.continue_url(base, session_id))

            def authorize(priced: Priced) -> None:
                keys = priced.session.mandate_keys
                if keys is not None:
                    ap2.check_mandate(payment.mandate, views.checkout(priced, base, self.handlers),
                                      platform_keys=keys, signer=self.signer, audience=views.profile_url(base),
                                      now=self.clock())
            priced, order = self.sessions.complete(session_id, payment, door=DOOR, authorize=authorize)
            return Kept(200, self._checkout(priced, base, order),
                        after=self.events.after_placed(DOOR, order.id if order is not None else None))
        return self._idempotent(agent, key, f"POST /checkout-sessions/{session_id}/complete", body, run)

    def resume(self, session_id: str) -> tuple[Resumed, Callable[[], object] | None]:
        """The buyer at the checkout's ``continue_url`` (checkout.md, "Continue URL": the buyer
        continues and finalizes the checkout there): the payment read back from the processor and
        settled (``CheckoutSessions.resume``), and, once there is an order, its ``order_placed`` sent
        after the page is answered, as after a completion (recorded once with the order, whoever
        placed it: a second visit or a racing completion sends nothing more)."""
        resumed = self.sessions.resume(session_id)
        return resumed, self.events.after_placed(DOOR, resumed.order.id if resumed.order is not None else None)

    def _checkout(self, priced: Priced, base: str, order: Order | None = None, *,
                  offer: CounterOffer | None = None) -> dict[str, Any]:
        """The checkout as UCP shows it, with its order once there is one and the counter-offer a
        cancel brought, signed last where AP2 locks the session (ap2-mandates.md: the business
        MUST include ``ap2.merchant_authorization`` in all checkout responses)."""
        if order is None and priced.session.order_id is not None:
            with self.db.read() as conn:
                order = order_for(conn, order_id=priced.session.order_id)
        body = views.checkout(priced, base, self.handlers, order)
        if offer is not None:
            views.add_counter_offer(body, offer)
        if priced.session.mandate_keys is not None:
            ap2.sign_checkout(body, self.signer)
        return body

    # -- orders ------------------------------------------------------------------------------------

    def _order(self, order_id: str) -> Order:
        with self.db.read() as conn:
            found = order_for(conn, order_id=order_id)
        if found is None or found.door != DOOR:
            raise NotFound(f"order {order_id} not found")
        return found

    def get_order(self, agent_header: str | None, order_id: str, base: str) -> Kept:
        """An order placed through UCP (another door's order is not found here). Its permalink, so
        asked without ``UCP-Agent`` too."""
        reading.read_agent(agent_header, required=False, store=base)
        return Kept(200, views.order(self._order(order_id), base))

    def update_order(self, agent_header: str | None, key: str | None, order_id: str, body: dict[str, Any],
                     base: str) -> Kept:
        """Record the fulfillment events and adjustments sent, for the platform that placed the order
        only (403 for any other). UCP's REST binding defines no order update (order changes go
        from the business to the platform, by webhook); the conformance suite sends one, so the
        store takes what its logs can hold: both are append-only (UCP order, "Data Model"), so an
        entry already recorded must come again exactly as recorded and is never dropped, new ones
        are added after it (422 otherwise), and an adjustment's amount is at most the order's total."""
        agent = reading.read_agent(agent_header, store=base)

        def run() -> Kept:
            self._placed_by(self._order(order_id), agent)
            events, adjustments = reading.order_update(body)

            def change(order: Order, details: dict[str, Any]) -> dict[str, Any]:
                for name, sent in (("events", events), ("adjustments", adjustments)):
                    if sent is None:
                        continue
                    recorded = list(details.get(name) or ())
                    added = _new_entries(name, recorded, sent)
                    if name == "adjustments":
                        _within_total(order, added)
                    details[name] = [*recorded, *added]
                return details
            return Kept(200, views.order(self._change_order(order_id, change)[0], base))
        return self._idempotent(agent, key, f"PUT /orders/{order_id}", body, run)

    def _placed_by(self, order: Order, agent: reading.Agent) -> None:
        """403 unless ``agent`` names the profile the order's checkout was created with. Not 404: the
        order's permalink answers anyone with its id, so hiding it here would hide nothing, and a
        platform whose profile URL changed is better told why. The profile is only claimed (UCP
        2026-01-11 authenticates no platform): this keeps platforms off each other's orders, and
        the logs being append-only is what keeps a recorded entry as it was."""
        session = self.sessions.session_of(order)
        creator = session.creator if session is not None else None
        if creator is None or agent.profile != creator:
            raise Forbidden(f"order {order.id} can be updated only by the platform that placed it (the profile its "
                            "checkout was created with)")

    def _change_order(self, order_id: str, change: Callable[[Order, dict[str, Any]], dict[str, Any]], *,
                      announce: tuple[str, str] | None = None) -> tuple[Order, str | None]:
        """Change the order's details; with ``announce`` (an event's kind, the base of its links),
        owe the platform that event in the same transaction, once per kind. The order as changed,
        and the event to send once the answer is out (None: none, or owed already)."""
        with self.db.write() as conn:
            found = order_for(conn, order_id=order_id)
            if found is None or found.door != DOOR:
                raise NotFound(f"order {order_id} not found")
            details = change(found, dict(found.details or {}))
            update_details(conn, order_id, details)
            placed = order_for(conn, order_id=order_id)
            event = None
            if announce is not None and not order_events.owed(conn, DOOR, order_id, announce[0]):
                event = order_events.record(conn, DOOR, order_id, announce[0], announce[1], self.clock())
        assert placed is not None
        return placed, event

    # -- simulation --------------------------------------------------------------------------------

    def simulation_allowed(self, secret: str | None) -> None:
        """403 unless ``secret`` is the store's simulation secret (compared in constant time)."""
        expected = self.settings.simulation_secret
        if expected is None or secret is None or not hmac.compare_digest(secret.encode(), expected.encode()):
            raise Forbidden("a simulation endpoint needs the store's Simulation-Secret")

    def simulate_shipping(self, secret: str | None, order_id: str, base: str) -> Kept:
        """Record that the whole order shipped and tell the platform's webhook ``order_shipped``."""
        self.simulation_allowed(secret)
        now = self.clock()

        def ship(order: Order, details: dict[str, Any]) -> dict[str, Any]:
            event = views.shipped_event("evt_" + secrets.token_hex(8), order, now, base)
            details["events"] = [*(details.get("events") or ()), event]
            return details
        order, shipped = self._change_order(order_id, ship, announce=(SHIPPED, base))
        return Kept(200, views.order(order, base), after=self.events.after(shipped))

    # -- idempotency -------------------------------------------------------------------------------

    def sweep(self) -> int:
        """Forget the answered idempotency keys older than :data:`IDEMPOTENCY_TTL` (the store's
        background sweep); how many."""
        return self.keys.sweep()

    @staticmethod
    def _refusal(exc: HagglerError) -> Kept:
        """A refusal as the error edge words it on UCP's paths, but for ``request_id``: a kept one is
        answered again to later requests, which ``X-Request-Id`` names."""
        status = status_for(exc)
        return Kept(status, views.error(status, exc.message, exc.fields()))

    def _idempotent(self, agent: reading.Agent, key: str | None, what: str, body: dict[str, Any],
                    run: Callable[[], Kept]) -> Kept:
        if key is None:
            return run()
        try:
            # The webhook due after the first answer goes with it only (Kept.after); a replay sends none.
            return self.keys.run(self.keys.owner(agent.profile or ""), key, what, body, run, self._refusal)
        except KeyReused:
            raise Conflict("this idempotency-key was used for a different request") from None
