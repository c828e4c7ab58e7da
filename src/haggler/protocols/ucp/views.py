"""What crosses the wire, and nothing more: the discovery profile, checkout sessions, orders, order
events and errors, in UCP 2026-01-11's shapes (``source/schemas/shopping`` of UCP's specification).

A payment credential never leaves (UCP overview, "Credential Flow": businesses MUST NOT echo
credentials back); an instrument goes back with the fields listed in :data:`INSTRUMENT_FIELDS` only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict
from datetime import datetime
from typing import Any

from haggler.commerce.counter_offers import CounterOffer
from haggler.commerce.merchant_data import Address
from haggler.commerce.sessions import COMPLETED, Priced
from haggler.orders import Order
from haggler.payments.handler import PaymentHandler
from haggler.payments.simulated import FAIL_TOKEN, SIMULATED_HANDLER_ID, SUCCESS_TOKEN
from haggler.payments.stripe_handler import StripeHandler
from haggler.protocols.negotiate_v1 import capability as negotiation
from haggler.protocols.ucp.settings import UCP_VERSION
from haggler.timestamps import utc_z

SHOPPING = "dev.ucp.shopping"
CHECKOUT = f"{SHOPPING}.checkout"
ORDER = f"{SHOPPING}.order"
#: The checkout extensions this merchant implements, with their parent.
EXTENSIONS = (f"{SHOPPING}.discount", f"{SHOPPING}.fulfillment", f"{SHOPPING}.buyer_consent")
#: The AP2 mandates extension (ap2-mandates.md): active for a checkout only when negotiated.
AP2 = f"{SHOPPING}.ap2_mandate"
_DOCS = "https://ucp.dev"
#: Where the business profile is served: the store's UCP identity, which its webhooks name.
PROFILE_PATH = "/.well-known/ucp"
#: The store's page for a buyer whose payment waits for them (checkout.md, "Continue URL"): a page
#: for a person, beside the JSON API at /checkout-sessions/{id} (``web/continue_page.py``).
CONTINUE_PATH = "/pay/{session_id}"

#: The instrument fields sent back in a checkout's ``payment.instruments``.
INSTRUMENT_FIELDS = ("id", "handler_id", "handler_name", "type", "brand", "last_digits", "expiry_month",
                     "expiry_year", "rich_text_description", "rich_card_art", "billing_address")
#: The buyer fields kept and sent back (``consent``: the buyer-consent extension).
BUYER_FIELDS = ("first_name", "last_name", "full_name", "email", "phone_number", "consent")
CONSENT_FIELDS = ("analytics", "preferences", "marketing", "sale_of_data")
EVENT_FIELDS = ("id", "occurred_at", "type", "line_items", "tracking_number", "tracking_url", "carrier", "description")
ADJUSTMENT_FIELDS = ("id", "type", "occurred_at", "status", "line_items", "amount", "description")


def _capability(name: str, *, extends: str | None = None, detail: bool = True) -> dict[str, Any]:
    short = name.rsplit(".", 1)[1]
    entry: dict[str, Any] = {"name": name, "version": UCP_VERSION}
    if detail:
        entry["spec"] = f"{_DOCS}/specification/{short}"
        entry["schema"] = f"{_DOCS}/schemas/shopping/{short}.json"
    if extends:
        entry["extends"] = extends
    return entry


# -- payment handlers ------------------------------------------------------------------------------

#: How each handler this merchant can name is described in its profile and checkouts. Only the
#: handlers the store can charge through are offered, plus, with a simulation secret, the two the
#: conformance suite expects a test merchant to list (``google_pay``, ``shop_pay``): a completion
#: through either is refused as unavailable, since no processor stands behind them here.
_HANDLERS: dict[str, dict[str, Any]] = {
    SIMULATED_HANDLER_ID: {
        "id": SIMULATED_HANDLER_ID, "name": "dev.ucp.mock_payment", "version": UCP_VERSION,
        "spec": f"{_DOCS}/specs/mock", "config_schema": f"{_DOCS}/schemas/mock.json",
        "instrument_schemas": [f"{_DOCS}/schemas/shopping/types/card_payment_instrument.json"],
        "config": {"supported_tokens": [SUCCESS_TOKEN, FAIL_TOKEN]},
    },
    "google_pay": {
        "id": "google_pay", "name": "google.pay", "version": UCP_VERSION,
        "spec": "https://developers.google.com/merchant/ucp/guides/gpay-payment-handler",
        "config_schema": "https://pay.google.com/gp/p/ucp/2026-01-11/schemas/gpay_config.json",
        "instrument_schemas": ["https://pay.google.com/gp/p/ucp/2026-01-11/schemas/gpay_card_payment_instrument.json"],
        "config": {"api_version": 2, "api_version_minor": 0,
                   "merchant_info": {"merchant_name": "haggler test store", "merchant_id": "TEST"},
                   "allowed_payment_methods": [{"type": "CARD", "parameters": {
                       "allowedAuthMethods": ["PAN_ONLY"], "allowedCardNetworks": ["VISA", "MASTERCARD"]}}]},
    },
    "shop_pay": {
        "id": "shop_pay", "name": "com.shopify.shop_pay", "version": UCP_VERSION,
        "spec": "https://shopify.dev/ucp/handlers/shop_pay",
        "config_schema": "https://shopify.dev/ucp/handlers/shop_pay/config.json",
        "instrument_schemas": ["https://shopify.dev/ucp/handlers/shop_pay/instrument.json"],
        "config": {"shop_id": "haggler-test-store"},
    },
}
#: Listed with a simulation secret for platforms under test; never chargeable.
LISTED_FOR_TESTS = ("google_pay", "shop_pay")

#: Stripe through haggler: UCP 2026-01-11 has no Stripe handler, so the store declares haggler's own
#: (a PSP-hosted "tokenize to process" handler, as UCP's processor tokenizer example describes one),
#: named and specified on haggler's origin as UCP's namespace rules ask (docs/payments.md).
STRIPE_HANDLER = "org.haggler.stripe"
STRIPE_HANDLER_VERSION = "2026-11-28"
STRIPE_SPEC = "https://haggler.org/specs/stripe"
#: Its config's schema: ``docs/schemas/org.haggler.stripe.json``.
STRIPE_CONFIG_SCHEMA = "https://haggler.org/schemas/stripe.json"


def stripe_entry(handler: StripeHandler) -> dict[str, Any]:
    """The Stripe handler as a UCP business declares it: a card instrument whose token credential is
    a Stripe PaymentMethod or shared payment token for the account named in ``config.identity`` (a
    UCP ``PaymentIdentity``, which a tokenizer binds the token to), in that account's environment,
    with 3-D Secure supported: Stripe brings the buyer back to the checkout's own page
    (:data:`CONTINUE_PATH`), whatever the operator set."""
    return {"id": handler.id, "name": STRIPE_HANDLER, "version": STRIPE_HANDLER_VERSION, "spec": STRIPE_SPEC,
            "config_schema": STRIPE_CONFIG_SCHEMA,
            "instrument_schemas": [f"{_DOCS}/schemas/shopping/types/card_payment_instrument.json"],
            "config": {"environment": handler.environment,
                       "identity": {"access_token": handler.account_id},
                       "accepted_tokens": ["payment_method", "shared_payment_token"],
                       "supports_3ds": True}}


def handler_entries(handlers: Mapping[str, PaymentHandler], listed: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The declarations of the handlers a checkout names: those the store charges through, then
    those ``listed`` for tests; a handler this module cannot describe is left out."""
    entries = []
    for handler_id in (*sorted(handlers), *(h for h in listed if h not in handlers)):
        handler = handlers.get(handler_id)
        if isinstance(handler, StripeHandler):
            entries.append(stripe_entry(handler))
        elif handler_id in _HANDLERS:
            entries.append(_HANDLERS[handler_id])
    return entries


# -- the profile -----------------------------------------------------------------------------------


def profile_url(base: str) -> str:
    return f"{base}{PROFILE_PATH}"


def capabilities(base: str) -> list[dict[str, Any]]:
    """The business's capabilities as its profile lists them: checkout and order, checkout's
    extensions (AP2's with the presentation format it reads, ap2-mandates.md, "Business Profile
    Advertisement"), and ``org.haggler.negotiation``: where to haggle before paying."""
    ap2 = {"name": AP2, "version": UCP_VERSION, "spec": f"{_DOCS}/specification/ap2-mandates",
           "schema": f"{_DOCS}/schemas/shopping/ap2_mandate.json", "extends": CHECKOUT,
           "config": {"vp_formats_supported": {"dc+sd-jwt": {}}}}
    return [_capability(CHECKOUT), _capability(ORDER), *(_capability(name, extends=CHECKOUT) for name in EXTENSIONS),
            ap2, negotiation.ucp_capability(base)]


def negotiated(base: str, platform: Iterable[str]) -> frozenset[str]:
    """The names of the capabilities active between this business and a platform whose profile
    lists the names ``platform`` (overview.md, "Intersection Algorithm"): the business's that the
    platform names too, less every extension whose parent is not among them, until none is left
    without one."""
    named = set(platform)
    active = {c["name"]: c.get("extends") for c in capabilities(base) if c["name"] in named}
    while True:
        orphans = [name for name, parent in active.items() if parent is not None and parent not in active]
        if not orphans:
            return frozenset(active)
        for name in orphans:
            del active[name]


def profile(base: str, handlers: Sequence[Mapping[str, Any]],
            signing_keys: Sequence[Mapping[str, str]]) -> dict[str, Any]:
    """``/.well-known/ucp``: the shopping service over REST at the store's root, its capabilities,
    the payment handlers offered (``handlers``: :func:`handler_entries`), and the public keys (JWK)
    its order webhooks and AP2 merchant authorizations are signed with (overview.md, "Business
    Profile"; order.md, "Webhook Signature Verification"; ap2-mandates.md, "Business Authorization")."""
    return {
        "ucp": {
            "version": UCP_VERSION,
            "services": {SHOPPING: {
                "version": UCP_VERSION,
                "spec": f"{_DOCS}/specification/reference",
                "rest": {"schema": f"{_DOCS}/services/shopping/rest.openapi.json", "endpoint": base},
            }},
            "capabilities": capabilities(base),
        },
        "payment": {"handlers": list(handlers)},
        "signing_keys": [dict(key) for key in signing_keys],
    }


# -- checkout sessions -----------------------------------------------------------------------------


def _totals(pairs: Iterable[tuple[str, int | None, str | None]]) -> list[dict[str, Any]]:
    out = []
    for kind, amount, text in pairs:
        if amount is None:
            continue
        entry: dict[str, Any] = {"type": kind, "amount": amount}
        if text:
            entry["display_text"] = text
        out.append(entry)
    return out


def address(a: Address | Mapping[str, Any], *, with_id: bool = True) -> dict[str, Any]:
    """A destination (or an order's stored one) as UCP's postal address."""
    d = asdict(a) if isinstance(a, Address) else dict(a)
    out = {"id": d.get("id"), "full_name": d.get("full_name"), "street_address": d.get("street_address"),
           "address_locality": d.get("locality"), "address_region": d.get("region"),
           "postal_code": d.get("postal_code"), "address_country": d.get("country")}
    if not with_id:
        out.pop("id")
    return {k: v for k, v in out.items() if v is not None}


def _buyer(buyer: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not buyer:
        return None
    out = {k: buyer[k] for k in BUYER_FIELDS if buyer.get(k) is not None}
    return out or None


def _payment(payment: Mapping[str, Any], handlers: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"handlers": list(handlers)}
    if isinstance(payment.get("selected_instrument_id"), str):
        out["selected_instrument_id"] = payment["selected_instrument_id"]
    instruments = [{k: i[k] for k in INSTRUMENT_FIELDS if k in i} for i in payment.get("instruments") or ()]
    out["instruments"] = instruments
    return out


def _messages(priced: Priced) -> list[dict[str, Any]]:
    """Why a session cannot complete yet (``recoverable``: the agent can fix it with an update), and
    each discount code that was not applied (a warning, as UCP's discount extension asks)."""
    session = priced.session
    codes = [c.lower() for c in session.discount_codes]
    messages = [{"type": "warning", "code": r.reason, "path": f"$.discounts.codes[{codes.index(r.code.lower())}]",
                 "content": r.content} for r in priced.rejections]
    waiting = priced.awaiting_buyer
    if waiting is not None:  # checkout, "Status Values": escalated errors say what the buyer must do
        messages.append({"type": "error", "code": "requires_3ds", "severity": "requires_buyer_review",
                         "content": f"{waiting.reason or 'The buyer must authorize the payment'}: hand the buyer "
                                    "to continue_url, where the checkout is finalized once they have"})
    elif session.status not in (COMPLETED, "canceled") and not priced.ready:
        f = session.fulfillment
        if f is None or f.destination is None:
            messages.append({"type": "error", "code": "missing", "path": "$.fulfillment.methods[0].selected_destination_id",
                             "content": "Choose a shipping destination", "severity": "recoverable"})
        elif priced.selected_option is None:
            messages.append({"type": "error", "code": "missing",
                             "path": "$.fulfillment.methods[0].groups[0].selected_option_id",
                             "content": "Choose a shipping option", "severity": "recoverable"})
    return messages


def _fulfillment(priced: Priced) -> dict[str, Any] | None:
    f = priced.session.fulfillment
    if f is None:
        return None
    line_ids = [line.id for line in priced.session.lines]
    group: dict[str, Any] = {"id": f.group_id, "line_item_ids": line_ids,
                             "options": [{"id": o.id, "title": o.title,
                                          "totals": _totals([("total", o.price_cents, None)])} for o in priced.options]}
    if priced.selected_option is not None:
        group["selected_option_id"] = priced.selected_option.id
    method: dict[str, Any] = {"id": f.method_id, "type": f.method_type, "line_item_ids": line_ids,
                              "destinations": None if f.destinations is None else [address(d) for d in f.destinations],
                              "groups": [group]}
    if f.selected_destination_id is not None:
        method["selected_destination_id"] = f.selected_destination_id
    return {"methods": [method]}


def checkout(priced: Priced, base: str, handlers: Sequence[Mapping[str, Any]],
             order: Order | None = None) -> dict[str, Any]:
    """A checkout session as UCP's checkout response with the fulfillment, discount and
    buyer-consent extensions, and AP2's when the session was created with it negotiated (its
    ``merchant_authorization`` is ``protocols/ucp/ap2.py``'s to add); ``handlers``:
    :func:`handler_entries`."""
    session = priced.session
    t = priced.totals
    ap2 = (AP2,) if session.mandate_keys is not None else ()
    body: dict[str, Any] = {
        "ucp": {"version": UCP_VERSION, "capabilities": [_capability(CHECKOUT, detail=False),
                                                          *(_capability(n, detail=False) for n in (*EXTENSIONS, *ap2)),
                                                          {"name": negotiation.NAME, "version": negotiation.VERSION}]},
        "id": session.id,
        "status": session.status,
        "currency": session.currency,
        "line_items": [{"id": line.id,
                        "item": {k: v for k, v in {"id": line.product_id, "title": line.title,
                                                   "price": line.unit_price_cents,
                                                   "image_url": line.image_url}.items() if v is not None},
                        "quantity": line.quantity,
                        "totals": _totals([("subtotal", line.subtotal_cents, None),
                                           ("discount", line.subtotal_cents - priced.line_total(line) or None, None),
                                           ("total", priced.line_total(line), None)])}
                       for line in session.lines],
        "totals": _totals([("subtotal", t.subtotal_cents, None),
                           ("discount", t.discount_cents or None, "Discounts"),
                           ("fulfillment", t.fulfillment_cents, "Shipping"),
                           ("total", t.total_cents, None)]),
        "messages": _messages(priced),
        "links": [],
        "expires_at": utc_z(session.expires_at),
        "payment": _payment(session.payment, handlers),
    }
    if priced.awaiting_buyer is not None:  # checkout, "Continue URL": MUST with requires_escalation
        body["continue_url"] = continue_url(base, session.id)
    buyer = _buyer(session.buyer)
    if buyer is not None:
        body["buyer"] = buyer
    fulfillment = _fulfillment(priced)
    if fulfillment is not None:
        body["fulfillment"] = fulfillment
    if session.discount_codes:
        body["discounts"] = {"codes": list(session.discount_codes),
                             "applied": [{"code": d.code, "title": d.title, "amount": d.amount_cents}
                                         for d in priced.discounts]}
    if order is not None:
        body["order"] = {"id": order.id, "permalink_url": order_url(base, order.id)}
    return body


def continue_url(base: str, session_id: str) -> str:
    """Where the buyer continues a checkout that waits for them, and where the processor brings them
    back (checkout.md, "Continue URL": server-side state behind an opaque URL, the session's id as
    unguessable as it is in the API's paths); that page finalizes the checkout."""
    return base + CONTINUE_PATH.format(session_id=session_id)


# -- orders ----------------------------------------------------------------------------------------


def order_url(base: str, order_id: str) -> str:
    return f"{base}/orders/{order_id}"


def order(o: Order, base: str) -> dict[str, Any]:
    """An order as UCP's order: its lines as placed, the buyer-facing expectation (the chosen
    option, to the chosen address), the fulfillment events and adjustments recorded since."""
    details = o.details or {}
    line_ids = details.get("line_ids") or [f"li_{i + 1}" for i in range(len(o.lines))]
    events = details.get("events") or []
    shipped: dict[str, int] = {}
    for event in events:
        if event.get("type") in ("shipped", "delivered", "in_transit"):
            for item in event.get("line_items") or ():
                shipped[item["id"]] = max(shipped.get(item["id"], 0), item["quantity"])
    lines = []
    for line_id, line in zip(line_ids, o.lines):
        done = min(shipped.get(line_id, 0), line.quantity)
        lines.append({"id": line_id, "item": {"id": line.item_id, "title": line.name, "price": line.unit_price_cents},
                      "quantity": {"total": line.quantity, "fulfilled": done},
                      "totals": _totals([("subtotal", line.line_total_cents, None),
                                         ("total", line.line_total_cents, None)]),
                      "status": "fulfilled" if done == line.quantity else "partial" if done else "processing"})
    f = details.get("fulfillment") or {}
    expectations = []
    if f.get("destination"):
        expectations.append({"id": "exp_1", "line_items": [{"id": i, "quantity": line.quantity}
                                                           for i, line in zip(line_ids, o.lines)],
                             "method_type": f.get("method_type") or "shipping",
                             "destination": address(f["destination"], with_id=False),
                             "description": f.get("option_title"), "fulfillable_on": "now"})
    totals = details.get("totals") or {}
    return {
        "ucp": {"version": UCP_VERSION, "capabilities": [_capability(ORDER, detail=False)]},
        "id": o.id,
        "checkout_id": o.session_id,
        "permalink_url": order_url(base, o.id),
        "line_items": lines,
        "fulfillment": {"expectations": expectations, "events": events},
        "adjustments": details.get("adjustments") or [],
        "totals": _totals([("subtotal", totals.get("subtotal_cents"), None),
                           ("discount", totals.get("discount_cents") or None, "Discounts"),
                           ("fulfillment", totals.get("fulfillment_cents"), "Shipping"),
                           ("total", o.total_cents, None)]),
    }


def order_event(event_type: str, event_id: str, created: datetime, o: Order, base: str) -> dict[str, Any]:
    """An order webhook's body: the whole order, never a delta (order.md, "Guidelines": "MUST send
    full order entity on updates"), with the ``event_id`` and ``created_time`` the REST binding's
    ``order_event_webhook`` requires beside the order's own fields. It carries ``event_type`` and
    the order once more under ``order`` too: that is how UCP's reference merchant sends an event
    and its conformance suite reads one."""
    whole = order(o, base)
    return {**whole, "event_id": event_id, "created_time": utc_z(created), "event_type": event_type, "order": whole}


def shipped_event(event_id: str, o: Order, at: datetime, base: str) -> dict[str, Any]:
    """The fulfillment event a simulated shipment records: every line, in full."""
    line_ids = (o.details or {}).get("line_ids") or []
    return {"id": event_id, "occurred_at": utc_z(at), "type": "shipped",
            "line_items": [{"id": i, "quantity": line.quantity} for i, line in zip(line_ids, o.lines)],
            "tracking_number": event_id.upper(), "tracking_url": order_url(base, o.id),
            "description": "Shipped (simulated)"}


def add_counter_offer(checkout_body: dict[str, Any], offer: CounterOffer) -> None:
    """A canceled checkout's answer with the store's counter-offer: an ``info`` message in words and
    the offer itself under ``org.haggler.negotiation`` (UCP responses take a vendor's fields)."""
    checkout_body["messages"].append({"type": "info", "code": "counter_offer",
                                      "content": negotiation.counter_offer_text(offer)})
    checkout_body[negotiation.NAME] = negotiation.counter_offer(offer)


# -- errors ----------------------------------------------------------------------------------------

_CODES = {400: "invalid", 402: "payment_declined", 403: "forbidden", 404: "not_found", 409: "conflict",
          413: "invalid", 422: "invalid", 429: "rate_limited", 503: "unavailable"}


def error(status: int, message: str, fields: Mapping[str, Any] | None) -> dict[str, Any]:
    """An error on UCP's paths: ``detail`` (what UCP's reference merchant answers, and its
    conformance suite reads) and UCP's ``messages`` with one error in it."""
    code = (fields or {}).get("code") or _CODES.get(status, "internal_error")
    severity = "requires_buyer_input" if code == "version_unsupported" else "recoverable"
    body: dict[str, Any] = {"detail": message,
                            "messages": [{"type": "error", "code": code, "content": message, "severity": severity}]}
    if code == "version_unsupported":
        body["status"] = "requires_escalation"
        if (fields or {}).get("continue_url"):
            body["continue_url"] = fields["continue_url"]
    return body
