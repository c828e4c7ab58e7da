"""Reading UCP request bodies and headers into the checkout core's inputs.

Every field read is checked for its type here, so that a wrong one is a 400 naming it (422 for an
order update, as UCP's conformance suite expects) rather than a 500 later. Fields the merchant does
not read (item titles and prices, the handlers an agent echoes back) are ignored: the store prices
from its own data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from haggler.commerce.merchant_data import Address
from haggler.commerce.sessions import FulfillmentRequest, LineRequest, PaymentRequest, SessionInput
from haggler.errors import HagglerError, InvalidInput, Unprocessable
from haggler.protocols.ucp.settings import UCP_VERSION
from haggler.protocols.ucp.views import ADJUSTMENT_FIELDS, BUYER_FIELDS, CONSENT_FIELDS, EVENT_FIELDS
from haggler.protocols.ucp.views import INSTRUMENT_FIELDS
from haggler.timestamps import parse_rfc3339

_CURRENCY = re.compile(r"[A-Z]{3}")
# RFC 8941 dictionary members as UCP-Agent carries them: key="string" (or a bare token).
_MEMBER = re.compile(r'\s*([a-z*][a-z0-9_.*-]*)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;,\s]+))\s*[;,]?')
_VERSION = re.compile(r"\d{4}-\d{2}-\d{2}")
# An AP2 checkout mandate: an SD-JWT, a compact JWS with optional disclosures and key binding after ~.
_MANDATE = re.compile(r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+(~[A-Za-z0-9_.~-]*)?")
_ADJUSTMENT_STATUSES = ("pending", "completed", "failed")


class VersionUnsupported(InvalidInput):
    """The platform speaks a later UCP than this merchant (UCP overview, "Version Negotiation").
    Its answer is ``requires_escalation``, which MUST come with a ``continue_url`` (checkout,
    "Continue URL"): the store's own front page, where the buyer can carry on by hand."""

    def __init__(self, message: str, continue_url: str | None) -> None:
        super().__init__(message)
        self.continue_url = continue_url

    def fields(self) -> dict[str, Any]:
        found = {"error": self.message, "code": "version_unsupported"}
        return {**found, "continue_url": self.continue_url} if self.continue_url else found


class Agent(NamedTuple):
    """What the ``UCP-Agent`` header says: the platform's profile URL and its UCP version."""

    profile: str | None
    version: str | None


def read_agent(header: str | None, *, required: bool = True, store: str | None = None) -> Agent:
    """The ``UCP-Agent`` header, which every request MUST carry (UCP checkout REST binding, "HTTP
    Headers"); a version later than :data:`UCP_VERSION` is refused (overview, "Version Negotiation":
    the business MUST return ``version_unsupported``). Not ``required`` where a person may come
    too: an order's permalink. ``store``: the store's base URL, whose front page a refusal names."""
    if header is None or not header.strip():
        if not required:
            return Agent(None, None)
        raise InvalidInput('the UCP-Agent header is required: profile="https://platform.example/profile"')
    members = {m.group(1): m.group(2) if m.group(2) is not None else m.group(3) for m in _MEMBER.finditer(header)}
    version = members.get("version")
    if version is not None:
        if not _VERSION.fullmatch(version):
            raise InvalidInput(f"UCP-Agent version must be a date (YYYY-MM-DD), got {version!r}")
        if version > UCP_VERSION:
            raise VersionUnsupported(f"Version {version} is not supported. This business implements version "
                                     f"{UCP_VERSION}.", f"{store}/" if store else None)
    return Agent(members.get("profile"), version)


def cancel_reason(body: Mapping[str, Any]) -> str | None:
    """Why the platform cancels, if it says: ``intent_trace.reason_code`` as ACP's cancel carries it
    (``org.haggler.negotiation``, docs/checkout.md); ``price_sensitivity`` may bring a counter-offer."""
    if body.get("intent_trace") is None:
        return None
    trace = _object(body["intent_trace"], "intent_trace")
    return _text(trace.get("reason_code"), "intent_trace.reason_code")


def _fail(where: str, why: str, *, kind: type[HagglerError] = InvalidInput) -> HagglerError:
    return kind(f"{where} {why}")


def _object(value: Any, where: str, kind: type[HagglerError] = InvalidInput) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, "must be an object", kind=kind)
    return value


def _list(value: Any, where: str, kind: type[HagglerError] = InvalidInput) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, "must be an array", kind=kind)
    return value


def _text(value: Any, where: str, *, optional: bool = False, kind: type[HagglerError] = InvalidInput) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise _fail(where, "must be a non-empty string", kind=kind)
    return value


def _count(value: Any, where: str, kind: type[HagglerError] = InvalidInput) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(where, "must be a whole number of at least 1", kind=kind)
    return value


def _address(value: Any, where: str) -> Address:
    a = _object(value, where)
    text = {name: _text(a.get(name), f"{where}.{name}", optional=True)
            for name in ("id", "street_address", "address_locality", "address_region", "postal_code",
                         "address_country", "full_name", "first_name", "last_name")}
    names = " ".join(n for n in (text["first_name"], text["last_name"]) if n)
    return Address(text["id"], text["street_address"], text["address_locality"], text["address_region"],
                   text["postal_code"], text["address_country"], names or text["full_name"])


def _buyer(value: Any) -> dict[str, Any]:
    b = _object(value, "buyer")
    buyer: dict[str, Any] = {}
    for name in BUYER_FIELDS:
        if b.get(name) is None:
            continue
        if name == "consent":
            consent = _object(b[name], "buyer.consent")
            for key, flag in consent.items():
                if key in CONSENT_FIELDS and not isinstance(flag, bool):
                    raise InvalidInput(f"buyer.consent.{key} must be true or false")
            buyer[name] = {k: consent[k] for k in CONSENT_FIELDS if k in consent}
        else:
            buyer[name] = _text(b[name], f"buyer.{name}")
    # A full name sent under the camel-case spelling some platforms use.
    if "full_name" not in buyer and isinstance(b.get("fullName"), str) and b["fullName"].strip():
        buyer["full_name"] = b["fullName"]
    return buyer


def _fulfillment(value: Any) -> FulfillmentRequest | None:
    methods = _list(_object(value, "fulfillment").get("methods", []), "fulfillment.methods")
    if not methods:
        return None
    if len(methods) > 1:
        raise InvalidInput("fulfillment.methods: this store ships every line one way; send one method")
    m = _object(methods[0], "fulfillment.methods[0]")
    kind = m.get("type", "shipping")
    if kind != "shipping":
        raise InvalidInput(f"fulfillment.methods[0].type: only shipping is offered, not {kind!r}")
    destinations = None
    if m.get("destinations") is not None:
        destinations = tuple(_address(d, f"fulfillment.methods[0].destinations[{i}]")
                             for i, d in enumerate(_list(m["destinations"], "fulfillment.methods[0].destinations")))
    option = None
    for i, g in enumerate(_list(m.get("groups") or [], "fulfillment.methods[0].groups")):
        chosen = _object(g, f"fulfillment.methods[0].groups[{i}]").get("selected_option_id")
        option = option or _text(chosen, f"fulfillment.methods[0].groups[{i}].selected_option_id", optional=True)
    return FulfillmentRequest(_text(m.get("id"), "fulfillment.methods[0].id", optional=True), "shipping", destinations,
                              _text(m.get("selected_destination_id"), "fulfillment.methods[0].selected_destination_id",
                                    optional=True), option)


def _payment(value: Any) -> dict[str, Any]:
    p = _object(value, "payment")
    instruments = []
    for i, instrument in enumerate(p.get("instruments") or []):
        found = _object(instrument, f"payment.instruments[{i}]")
        for name in ("id", "handler_id", "type"):
            _text(found.get(name), f"payment.instruments[{i}].{name}")
        instruments.append({k: found[k] for k in INSTRUMENT_FIELDS if k in found})
    payment: dict[str, Any] = {"instruments": instruments}
    selected = _text(p.get("selected_instrument_id"), "payment.selected_instrument_id", optional=True)
    if selected is not None:
        payment["selected_instrument_id"] = selected
    return payment


def session_input(body: Mapping[str, Any], *, creating: bool, webhook_url: str | None,
                  mandate_keys: tuple[Mapping[str, Any], ...] | None = None,
                  creator: str | None = None) -> SessionInput:
    """A create or update request. Update replaces what it sends (UCP checkout, "Update Checkout");
    what it leaves out — the buyer, the fulfillment, the discount codes — stays as it was.
    ``webhook_url`` and ``mandate_keys`` come from the creator's profile, never from the body;
    ``creator``: a create's platform, the profile its ``UCP-Agent`` names."""
    lines = None
    if "line_items" in body or creating:
        items = _list(body.get("line_items"), "line_items")
        if not items:
            raise InvalidInput("line_items must hold at least one line")
        lines = []
        for i, raw in enumerate(items):
            li = _object(raw, f"line_items[{i}]")
            item = _object(li.get("item"), f"line_items[{i}].item")
            lines.append(LineRequest(_text(li.get("id"), f"line_items[{i}].id", optional=True),
                                     str(_text(item.get("id"), f"line_items[{i}].item.id")),
                                     _count(li.get("quantity"), f"line_items[{i}].quantity")))
    currency = _text(body.get("currency"), "currency", optional=not creating)
    if currency is not None and not _CURRENCY.fullmatch(currency):
        raise InvalidInput(f"currency must be an ISO 4217 code such as USD, got {currency!r}")
    codes = None
    if body.get("discounts") is not None:
        raw_codes = _list(_object(body["discounts"], "discounts").get("codes", []), "discounts.codes")
        codes = tuple(str(_text(c, f"discounts.codes[{i}]")) for i, c in enumerate(raw_codes))
    return SessionInput(
        currency=currency,
        lines=tuple(lines) if lines is not None else None,
        buyer=_buyer(body["buyer"]) if body.get("buyer") is not None else None,
        discount_codes=codes,
        fulfillment=_fulfillment(body["fulfillment"]) if body.get("fulfillment") is not None else None,
        payment=_payment(body["payment"]) if isinstance(body.get("payment"), dict) and
        ("instruments" in body["payment"] or "selected_instrument_id" in body["payment"]) else None,
        webhook_url=webhook_url,
        mandate_keys=mandate_keys,
        creator=creator,
    )


def payment_request(body: Mapping[str, Any]) -> PaymentRequest:
    """A completion: ``payment_data`` (the instrument, with its credential), ``risk_signals``, and
    the AP2 extension's ``ap2.checkout_mandate`` when the platform sends one (UCP AP2 mandates,
    "Step 3: Submission"), here only checked for its form: ``ap2.py`` verifies it where AP2 was
    negotiated."""
    data = _object(body.get("payment_data"), "payment_data")
    handler = str(_text(data.get("handler_id"), "payment_data.handler_id"))
    credential = data.get("credential")
    if credential is not None:
        _text(_object(credential, "payment_data.credential").get("type"), "payment_data.credential.type")
    mandate = None
    if body.get("ap2") is not None:
        raw = _object(body["ap2"], "ap2").get("checkout_mandate")
        mandate = _text(raw, "ap2.checkout_mandate")
        if not _MANDATE.fullmatch(str(mandate)):
            raise InvalidInput("ap2.checkout_mandate must be an SD-JWT (header.payload.signature[~disclosures])")
    if body.get("risk_signals") is not None:
        _object(body["risk_signals"], "risk_signals")
    return PaymentRequest(handler, credential, _text(data.get("id"), "payment_data.id", optional=True), mandate)


def _log(value: Any, where: str, fields: tuple[str, ...], check: Any) -> list[dict[str, Any]]:
    entries = []
    for i, raw in enumerate(_list(value, where, Unprocessable)):
        entry = _object(raw, f"{where}[{i}]", Unprocessable)
        check(entry, f"{where}[{i}]")
        entries.append({k: entry[k] for k in fields if k in entry})
    return entries


def _when(value: Any, where: str) -> None:
    text = _text(value, where, kind=Unprocessable)
    try:
        if parse_rfc3339(str(text)).tzinfo is None:
            raise ValueError
    except ValueError:
        raise Unprocessable(f"{where} must be an RFC 3339 time with a zone") from None


def _line_refs(value: Any, where: str, *, required: bool) -> None:
    if value is None and not required:
        return
    for i, ref in enumerate(_list(value, where, Unprocessable)):
        r = _object(ref, f"{where}[{i}]", Unprocessable)
        _text(r.get("id"), f"{where}[{i}].id", kind=Unprocessable)
        _count(r.get("quantity"), f"{where}[{i}].quantity", Unprocessable)


def _event(entry: Mapping[str, Any], where: str) -> None:
    for name in ("id", "type"):
        _text(entry.get(name), f"{where}.{name}", kind=Unprocessable)
    _when(entry.get("occurred_at"), f"{where}.occurred_at")
    _line_refs(entry.get("line_items"), f"{where}.line_items", required=True)


def _adjustment(entry: Mapping[str, Any], where: str) -> None:
    for name in ("id", "type"):
        _text(entry.get(name), f"{where}.{name}", kind=Unprocessable)
    _when(entry.get("occurred_at"), f"{where}.occurred_at")
    if entry.get("status") not in _ADJUSTMENT_STATUSES:
        raise Unprocessable(f"{where}.status must be one of {', '.join(_ADJUSTMENT_STATUSES)}")
    amount = entry.get("amount")
    if amount is not None and (isinstance(amount, bool) or not isinstance(amount, int) or amount < 0):
        raise Unprocessable(f"{where}.amount must be a whole number of minor units, not negative")
    _line_refs(entry.get("line_items"), f"{where}.line_items", required=False)


def order_update(body: Mapping[str, Any]) -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """An order update's fulfillment events and adjustments (None: not sent), each checked against
    UCP's order schema; anything else in the body (lines, totals) is the merchant's and not read."""
    events = None
    fulfillment = body.get("fulfillment")
    if fulfillment is not None:
        found = _object(fulfillment, "fulfillment", Unprocessable).get("events")
        if found is not None:
            events = _log(found, "fulfillment.events", EVENT_FIELDS, _event)
    adjustments = None
    if body.get("adjustments") is not None:
        adjustments = _log(body["adjustments"], "adjustments", ADJUSTMENT_FIELDS, _adjustment)
    return events, adjustments
