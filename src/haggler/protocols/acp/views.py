"""What crosses the wire, and nothing more: checkout sessions, orders, errors and the discovery
document, in the shapes of ACP 2026-04-17 (``openapi.agentic_checkout.yaml`` and ``rfc.discovery.md``).

Amounts are integer minor units throughout, currencies lower case as ACP's examples write them.
A payment credential never goes back out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from haggler.commerce.counter_offers import CounterOffer
from haggler.commerce.merchant_data import Address
from haggler.commerce.pricing import Line
from haggler.commerce.sessions import (AUTHENTICATION, CANCELED, COMPLETED, ESCALATION, IN_PROGRESS, READY, THREE_DS,
                                      Priced)
from haggler.orders import Order
from haggler.payments.handler import AuthenticationRequest, PaymentHandler
from haggler.payments.simulated import AUTHENTICATION_TOKEN, SIMULATED_HANDLER_ID
from haggler.payments.stripe_handler import StripeHandler
from haggler.protocols.acp.settings import ACP_VERSION, SUPPORTED_VERSIONS
from haggler.protocols.negotiate_v1 import capability as negotiation
from haggler.timestamps import utc_z

_SPEC = "https://github.com/agentic-commerce-protocol/agentic-commerce-protocol/blob/main"
DISCOUNT = "discount"
#: The discount extension as a checkout names it (rfc.discount_extension.md, "Extension Declaration").
DISCOUNT_EXTENSION = {"name": DISCOUNT, "extends": ["$.CheckoutSessionCreateRequest.discounts",
                                                   "$.CheckoutSessionUpdateRequest.discounts",
                                                   "$.CheckoutSession.discounts"],
                      "spec": f"{_SPEC}/rfcs/rfc.discount_extension.md"}

# -- statuses --------------------------------------------------------------------------------------

#: The core's statuses in ACP's words (a session the core still calls incomplete is not ready for payment).
_STATUS = {READY: "ready_for_payment", IN_PROGRESS: "complete_in_progress", ESCALATION: "requires_escalation",
           AUTHENTICATION: "authentication_required", COMPLETED: "completed", CANCELED: "canceled"}


def status(core_status: str) -> str:
    return _STATUS.get(core_status, "not_ready_for_payment")


# -- payment handlers ------------------------------------------------------------------------------

#: ACP's card handler (rfc.payment_handlers.md, "Card Tokenization Handler"), with the URLs of the
#: release's own example session (examples.agentic_checkout.json), whose config schema is the RFC's.
_TOKENIZED_CARD = {"name": "dev.acp.tokenized.card", "version": "2026-01-22", "display_name": "Card",
                   "spec": "https://acp.dev/handlers/tokenized.card", "requires_delegate_payment": True,
                   "requires_pci_compliance": False,
                   "config_schema": "https://acp.dev/schemas/handlers/tokenized.card/config.json",
                   "instrument_schemas": ["https://acp.dev/schemas/handlers/tokenized.card/instrument.json"]}
#: The brands Stripe processes; whether the account accepts one is Stripe's to say when it charges.
STRIPE_BRANDS = ("visa", "mastercard", "amex", "discover", "diners", "jcb", "unionpay")


def handler(payment_handler: PaymentHandler) -> dict[str, Any] | None:
    """A payment handler as ``capabilities.payment.handlers[]`` describes it (rfc.payment_handlers.md),
    None for one this module cannot describe: the simulated one (test stores only, it takes no money)
    as haggler's own, Stripe as the tokenized card handler whose delegated token (a shared payment
    token granted to ``merchant_id``, the store's Stripe account) the agent sends, 3-D Secure
    supported when the store has a return page for Stripe or the acquirer's details for the agent to
    run it (:func:`runs_3ds_with_agents`)."""
    if payment_handler.id == SIMULATED_HANDLER_ID:
        return {**_TOKENIZED_CARD, "id": payment_handler.id, "name": "dev.haggler.simulated",
                "display_name": "Test card", "requires_delegate_payment": False, "psp": "simulated",
                "config": {"environment": "test", "supports_3ds": True,
                           "tokens": {"success": "success_token", "decline": "fail_token",
                                      "authentication_required": AUTHENTICATION_TOKEN}}}
    if isinstance(payment_handler, StripeHandler):
        return {**_TOKENIZED_CARD, "id": payment_handler.id, "psp": "stripe",
                "config": {"merchant_id": payment_handler.account_id, "psp": "stripe",
                           "accepted_brands": list(STRIPE_BRANDS),
                           "supports_3ds": payment_handler.return_url is not None
                           or runs_3ds_with_agents(payment_handler),
                           "environment": payment_handler.environment}}
    return None




def runs_3ds_with_agents(payment_handler: PaymentHandler) -> bool:
    """Whether a charge through the handler can ask the buyer's agent to run 3-D Secure
    (``authentication_required``, with ``authentication_metadata``): the simulated one always,
    Stripe when its operator gave it the acquirer's details, which Stripe's API does not say."""
    if payment_handler.id == SIMULATED_HANDLER_ID:
        return True
    return isinstance(payment_handler, StripeHandler) and bool(payment_handler.acquirers)


def interventions(payment_handlers: Mapping[str, PaymentHandler]) -> tuple[str, ...]:
    """The interventions the store can ask an agent for: 3-D Secure when one of its handlers can."""
    return (THREE_DS,) if any(runs_3ds_with_agents(h) for h in payment_handlers.values()) else ()


def handlers(payment_handlers: Mapping[str, PaymentHandler]) -> list[dict[str, Any]]:
    """The declarations of the handlers the store charges through, by id; those this module cannot
    describe are left out."""
    described = (handler(payment_handlers[h]) for h in sorted(payment_handlers))
    return [d for d in described if d is not None]


def capabilities(declared: Sequence[Mapping[str, Any]], supported: Sequence[str]) -> dict[str, Any]:
    """A session's ``capabilities``: the handlers (:func:`handlers`), the interventions both the
    agent and the store can handle (``supported``: rfc.capability_negotiation.md §7.1, the seller
    MUST return the intersection; none is required up front, the issuer decides) and the discount
    extension."""
    return {"payment": {"handlers": list(declared)}, "interventions": {"supported": list(supported)},
            "extensions": [DISCOUNT_EXTENSION]}


def authentication_metadata(asked: AuthenticationRequest) -> dict[str, Any]:
    """ACP's ``AuthenticationMetadata``: the acquirer and the directory server, as the handler knew
    them (no ``flow_preference``: the store has none, and the issuer decides)."""
    a = asked.acquirer
    details = {"acquirer_bin": a.bin, "acquirer_country": a.country, "acquirer_merchant_id": a.merchant_id,
               "merchant_name": a.merchant_name}
    if a.requestor_id:
        details["requestor_id"] = a.requestor_id
    return {"acquirer_details": details, "directory_server": asked.directory_server}


# -- checkout sessions -----------------------------------------------------------------------------


def _total(kind: str, text: str, amount: int) -> dict[str, Any]:
    return {"type": kind, "display_text": text, "amount": amount}


def address(a: Address) -> dict[str, Any]:
    """An address as ACP's: the second street line was kept after a line break (``reading.address``)."""
    one, _, two = (a.street_address or "").partition("\n")
    out = {"name": a.full_name or "", "line_one": one, "city": a.locality or "", "state": a.region or "",
           "country": a.country or "", "postal_code": a.postal_code or ""}
    if two:
        out["line_two"] = two
    return out


def _line(priced: Priced, line: Line) -> dict[str, Any]:
    total = priced.line_total(line)
    off = line.subtotal_cents - total
    out: dict[str, Any] = {
        "id": line.id, "item": {"id": line.product_id, "name": line.title, "unit_amount": line.unit_price_cents},
        "quantity": line.quantity, "name": line.title, "unit_amount": line.unit_price_cents,
        "product_id": line.product_id,
        "totals": [_total("items_base_amount", "Base amount", line.subtotal_cents),
                   *([_total("items_discount", "Discount", off)] if off else []),
                   _total("subtotal", "Subtotal", total), _total("total", "Total", total)],
    }
    if line.image_url:
        out["images"] = [line.image_url]
    if off and priced.deal is not None:
        out["discount_details"] = [{"code": priced.deal.code, "type": "fixed", "amount": off,
                                    "description": "Negotiated price", "source": "coupon"}]
    return out


#: The core's rejection reasons in ACP's: a deal already bought has reached its one use.
_REASONS = {"discount_code_already_applied": "discount_code_usage_limit_reached"}


def _discounts(priced: Priced) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The discount extension's ``discounts`` and the warnings it surfaces in ``messages``."""
    session = priced.session
    currency = session.currency.lower()
    dealt = next((i for i, li in enumerate(session.lines) if priced.deal and li.id == priced.deal.line_id), None)
    applied = []
    for d in priced.discounts:
        entry: dict[str, Any] = {"id": f"di_{d.code}", "code": d.code, "coupon": {"id": d.code, "name": d.title},
                                 "amount": d.amount_cents}
        if priced.deal is not None and d.code == priced.deal.code and dealt is not None:
            entry["coupon"].update(amount_off=d.amount_cents, currency=currency, duration="once", max_redemptions=1)
            entry["allocations"] = [{"path": f"$.line_items[{dealt}]", "amount": d.amount_cents}]
        applied.append(entry)
    rejected, warnings = [], []
    codes = list(session.discount_codes)
    for r in priced.rejections:
        reason = _REASONS.get(r.reason, r.reason)
        rejected.append({"code": r.code, "reason": reason, "message": r.content})
        where = next((i for i, c in enumerate(codes) if c == r.code), None)
        warning = {"type": "warning", "code": reason, "content_type": "plain", "content": r.content}
        if where is not None:
            warning["param"] = f"$.discounts.codes[{where}]"
        warnings.append(warning)
    return {"codes": codes, "applied": applied, "rejected": rejected}, warnings


def checkout(priced: Priced, declared: Sequence[Mapping[str, Any]], order: Order | None, base: str,
             offered: Sequence[str] = ()) -> dict[str, Any]:
    """A checkout session offering the ``declared`` handlers (:func:`handlers`) and, of the
    ``offered`` interventions (:func:`interventions`), those the agent said it handles; with
    ``order`` (a completion's answer) its order too."""
    session = priced.session
    currency = session.currency.lower()
    discounts, messages = _discounts(priced)
    body: dict[str, Any] = {
        "id": session.id,
        "protocol": {"version": ACP_VERSION},
        "capabilities": capabilities(declared, [i for i in offered if i in (session.interventions or ())]),
        "status": status(session.status),
        "currency": currency,
        "line_items": [_line(priced, li) for li in session.lines],
        "fulfillment_options": [{"type": "shipping", "id": o.id, "title": o.title,
                                 "totals": [_total("fulfillment", o.title, o.price_cents)]} for o in priced.options],
        "totals": _totals(priced),
        "messages": messages,
        "links": [],
        "created_at": utc_z(session.created_at),
        "expires_at": utc_z(session.expires_at),
        "discounts": discounts,
    }
    waiting = priced.awaiting_buyer
    if waiting is not None:  # the processor's own page (3-D Secure), where the buyer authorizes
        body["continue_url"] = waiting.action_url
        messages.append({"type": "error", "code": "requires_3ds", "resolution": "requires_buyer_input",
                         "content_type": "plain",
                         "content": f"{waiting.reason or 'The buyer must authorize the payment'}: continue at "
                                    "continue_url, then complete the session again with the same payment"})
    asked = priced.awaiting_authentication
    if asked is not None:  # rfc.agentic_checkout §8: authentication_required MUST come with authentication_metadata
        body["authentication_metadata"] = authentication_metadata(asked)
        messages.append({"type": "error", "code": "requires_3ds", "resolution": "requires_buyer_input",
                         "content_type": "plain", "param": "$.authentication_metadata",
                         "content": "The card issuer asks the buyer to authenticate the payment (3-D Secure): run it "
                                    "with authentication_metadata, then complete the session again with the same "
                                    "payment_data and its authentication_result"})
    buyer = {k: v for k, v in (session.buyer or {}).items() if k in BUYER_FIELDS}
    if buyer.get("email"):
        body["buyer"] = buyer
    f = session.fulfillment
    destination = f.destination if f else None
    if destination is not None:
        details: dict[str, Any] = {"name": destination.full_name or session.buyer_name or "",
                                   "address": address(destination)}
        if session.buyer_email:
            details["email"] = session.buyer_email
        body["fulfillment_details"] = details
    chosen = priced.selected_option
    if chosen is not None:
        body["selected_fulfillment_options"] = [{"type": "shipping", "option_id": chosen.id,
                                                 "item_ids": [li.id for li in session.lines]}]
    if order is not None:
        body["order"] = order_view(priced, order, base)
    return body


def _totals(priced: Priced) -> list[dict[str, Any]]:
    """A session's totals, the negotiated price as the items' discount."""
    line_off = sum(li.subtotal_cents - priced.line_total(li) for li in priced.session.lines)
    t = priced.totals
    totals = [_total("items_base_amount", "Items", t.subtotal_cents)]
    if line_off:
        totals.append(_total("items_discount", "Negotiated price", line_off))
    totals.append(_total("subtotal", "Subtotal", t.subtotal_cents - line_off))
    if t.discount_cents - line_off:
        totals.append(_total("discount", "Discounts", t.discount_cents - line_off))
    if t.fulfillment_cents is not None:
        totals.append(_total("fulfillment", "Shipping", t.fulfillment_cents))
    totals.append(_total("total", "Total", t.total_cents))
    return totals


def order_view(priced: Priced, order: Order, base: str) -> dict[str, Any]:
    """The full Order (rfc.orders.md) as a completion answers it and every order webhook carries it
    (the webhook spec: the full order, not a delta): its lines, none fulfilled yet, one pending
    shipment to the session's destination, and the totals the buyer paid."""
    session = priced.session
    lines = []
    for li in session.lines:
        paid = priced.line_total(li)
        line: dict[str, Any] = {"id": li.id, "title": li.title, "product_id": li.product_id,
                                "quantity": {"ordered": li.quantity, "current": li.quantity, "fulfilled": 0},
                                "status": "processing"}
        if paid % li.quantity == 0:  # the schema's subtotal is quantity times unit_price, exactly
            line.update(unit_price=paid // li.quantity, subtotal=paid)
        else:
            line["totals"] = [_total("subtotal", "Subtotal", paid)]
        lines.append(line)
    body: dict[str, Any] = {"type": "order", "id": order.id, "checkout_session_id": session.id,
                            "permalink_url": order_url(base, session.id), "status": "confirmed",
                            "line_items": lines, "totals": _totals(priced)}
    f = session.fulfillment
    if f is not None and f.destination is not None:
        body["fulfillments"] = [{"id": f"ful_{order.id}", "type": "shipping", "status": "pending",
                                 "line_items": [{"id": li.id, "quantity": li.quantity} for li in session.lines],
                                 "destination": address(f.destination)}]
    return body


def add_counter_offer(session_body: dict[str, Any], offer: CounterOffer) -> None:
    """A canceled session's answer with the store's counter-offer: an ``info`` message in words and
    the offer itself in ``metadata`` under ``org.haggler.negotiation`` (ACP's session is closed to
    other fields; its metadata is the merchant's)."""
    session_body["messages"].append({"type": "info", "content_type": "plain",
                                     "content": negotiation.counter_offer_text(offer)})
    session_body["metadata"] = {negotiation.NAME: negotiation.counter_offer(offer)}


#: The buyer fields kept and sent back (ACP's Buyer).
BUYER_FIELDS = ("first_name", "last_name", "full_name", "email", "phone_number", "customer_id")


def order_url(base: str, session_id: str) -> str:
    """Where the order can be seen again: its checkout session (the store has no buyer-facing
    order page yet; docs/acp.md)."""
    return f"{base}/checkout_sessions/{session_id}"


# -- errors ----------------------------------------------------------------------------------------

#: A status's error code when the error names none.
_CODES = {400: "invalid", 401: "unauthorized", 402: "payment_declined", 403: "forbidden", 404: "not_found",
          405: "method_not_allowed", 409: "conflict", 410: "expired", 413: "request_too_large", 415: "invalid",
          422: "invalid", 429: "rate_limited", 503: "service_unavailable"}


def error(status_code: int, message: str, fields: Mapping[str, Any] | None) -> dict[str, Any]:
    """ACP's flat error: ``type`` from the status (a 5xx is the server's), ``code`` the error's own
    (``fields["code"]``) or the status's, ``param`` a JSONPath when the error names one.

    A declined payment (402) is ``processing_error``, as ACP's one example of a decline has it
    (``examples.mcp.agentic_checkout.json``, ``error_payment_declined``: the REST error's body,
    which the MCP binding carries in ``data``): the request was well formed, so it is not
    ``invalid_request`` (docs/acp.md)."""
    fields = fields or {}
    if status_code >= 500:
        kind = "service_unavailable" if status_code == 503 else "processing_error"
    elif status_code == 402:
        kind = "processing_error"
    else:
        kind = "invalid_request"
    body = {"type": kind, "code": fields.get("code") or _CODES.get(status_code, "processing_error"),
            "message": message}
    if fields.get("param"):
        body["param"] = fields["param"]
    return body


# -- discovery -------------------------------------------------------------------------------------


def discovery(base: str, offered: Sequence[str] = ()) -> dict[str, Any]:
    """``/.well-known/acp.json`` (rfc.discovery.md): the checkout service over REST at the store's
    root, the discount extension, ``org.haggler.negotiation`` (where to haggle before paying), and
    the ``offered`` interventions as ``intervention_types`` when there are any (§4.2: SHOULD)."""
    document: dict[str, Any] = {
        "protocol": {"name": "acp", "version": ACP_VERSION, "supported_versions": list(SUPPORTED_VERSIONS),
                     "documentation_url": f"{_SPEC}/rfcs/rfc.agentic_checkout.md"},
        "api_base_url": base,
        "transports": ["rest"],
        "capabilities": {"services": ["checkout"],
                         "extensions": [{"name": DISCOUNT, "spec": DISCOUNT_EXTENSION["spec"]},
                                        negotiation.acp_extension(base)]},
    }
    if offered:
        document["capabilities"]["intervention_types"] = list(offered)
    return document
