"""Reading ACP requests into the checkout core's inputs, and ACP's coded refusals.

Every field read is checked for its type here, so that a wrong one is a 400 in ACP's error shape
naming it by JSONPath (``param``) rather than a 500 later. Fields the merchant does not read (item
names and prices, affiliate attribution, risk signals) are ignored: the store prices from its own data.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import Any

from haggler.commerce.idempotency import KeyInFlight, KeyReused
from haggler.commerce.merchant_data import Address
from haggler.commerce.sessions import FulfillmentRequest, LineRequest, PaymentRequest, Session, SessionInput
from haggler.errors import InvalidInput
from haggler.payments.handler import AUTHENTICATED_OUTCOMES, AuthenticationResult
from haggler.protocols.acp.settings import SUPPORTED_VERSIONS
from haggler.protocols.acp.views import BUYER_FIELDS

_CURRENCY = re.compile(r"[A-Za-z]{3}")
#: A member name JSONPath writes with a dot (RFC 9535 §2.5.1.1); any other in brackets.
_MEMBER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: ``AuthenticationResult.outcome`` (openapi.agentic_checkout.yaml): a closed enum.
AUTHENTICATION_OUTCOMES = ("abandoned", "attempt_acknowledged", "authenticated", "canceled", "denied", "informational",
                           "internal_error", "not_supported", "processing_error", "rejected")
#: ``outcome_details.electronic_commerce_indicator``: a closed enum.
_ECI = ("01", "02", "05", "06", "07")
#: ``outcome_details``' fields, all required when it is there.
_OUTCOME_DETAILS = ("three_ds_cryptogram", "electronic_commerce_indicator", "transaction_id", "version")


class Refused(InvalidInput):
    """A 400 with ACP's ``code`` and, when a field is to blame, its JSONPath ``param``."""

    def __init__(self, message: str, code: str = "invalid", param: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.param = param

    def fields(self) -> dict[str, Any]:
        return {"code": self.code, **({"param": self.param} if self.param else {})}


class IdempotencyConflict(KeyReused):
    """Same key, another body (rfc.agentic_checkout.md §6.4: 422 ``idempotency_conflict``)."""

    def fields(self) -> dict[str, Any]:
        return {"code": "idempotency_conflict"}


class IdempotencyInFlight(KeyInFlight):
    """Same key while the first request runs (§6.4: 409 ``idempotency_in_flight``, Retry-After)."""

    def fields(self) -> dict[str, Any]:
        return {"code": "idempotency_in_flight"}


def api_version(header: str | None) -> str:
    """``API-Version``, which every request MUST carry and the server MUST validate (§2.1); a
    refusal is 400 ``missing_api_version`` or ``unsupported_api_version`` naming the versions accepted."""
    accepted = ", ".join(SUPPORTED_VERSIONS)
    if header is None or not header.strip():
        raise Refused(f"the API-Version header is required (supported versions: {accepted})", "missing_api_version")
    if header.strip() not in SUPPORTED_VERSIONS:
        raise Refused(f"API-Version {header.strip()!r} is not supported (supported versions: {accepted})",
                      "unsupported_api_version")
    return header.strip()


def idempotency_key(header: str | None) -> str:
    """``Idempotency-Key``, required on every POST (§6.1: 400 ``idempotency_key_required``)."""
    if header is None or not header.strip():
        raise Refused("Idempotency-Key header is required on all POST requests", "idempotency_key_required")
    if len(header) > 255:
        raise Refused("Idempotency-Key must be at most 255 characters", "invalid")
    return header


def _object(value: Any, where: str) -> Mapping[str, Any]:
    if not isinstance(value, dict):
        raise Refused(f"{where} must be an object", param=where)
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise Refused(f"{where} must be an array", param=where)
    return value


def _text(value: Any, where: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise Refused(f"{where} must be a non-empty string", param=where)
    return value


#: Where a null most likely meant "no discount codes", which ACP says with an empty ``codes``.
_CLEARS_CODES = ("$.discounts", "$.discounts.codes", "$.coupons")


def _given(body: Mapping[str, Any], name: str, where: str) -> bool:
    """Whether the request sets ``name``. ``null`` is not "absent": rfc.agentic_checkout.md §6.2
    makes it "clear this field", but no field of ACP's request schemas allows null (none is
    nullable, and the discount extension clears its codes with an empty ``codes``), so a null is a
    400 naming the field rather than a change silently not made (docs/acp.md)."""
    if name not in body:
        return False
    if body[name] is None:
        clear = "; discounts.codes [] clears the codes" if where in _CLEARS_CODES else ""
        raise Refused(f"{where} cannot be null: ACP's schema allows no null here (leave the field out "
                      f"to keep it as it is{clear})", param=where)
    return True


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Refused(f"{where} must be a whole number of at least 1", param=where)
    return value


def _lines(body: Mapping[str, Any]) -> tuple[LineRequest, ...]:
    items = _list(body.get("line_items"), "$.line_items")
    if not items:
        raise Refused("line_items must hold at least one item", param="$.line_items")
    lines = []
    for i, raw in enumerate(items):
        where = f"$.line_items[{i}]"
        item = _object(raw, where)
        # ACP's Item carries no quantity, its examples do: one unit unless the agent says more.
        quantity = _count(item["quantity"], f"{where}.quantity") if "quantity" in item else 1
        lines.append(LineRequest(None, str(_text(item.get("id"), f"{where}.id")), quantity))
    return tuple(lines)


def _buyer(value: Any, where: str) -> dict[str, Any]:
    b = _object(value, where)
    _text(b.get("email"), f"{where}.email")
    return {name: _text(b[name], f"{where}.{name}") for name in BUYER_FIELDS if _given(b, name, f"{where}.{name}")}


def address(value: Any, where: str) -> Address:
    """An ACP address as the core's: its id a digest of the place (so that the same address sent
    again is the same destination), ``line_two`` kept after a line break in the street."""
    a = _object(value, where)
    text = {name: _text(a.get(name), f"{where}.{name}")
            for name in ("name", "line_one", "city", "state", "country", "postal_code")}
    given = _given(a, "line_two", f"{where}.line_two")
    two = _text(a["line_two"], f"{where}.line_two") if given and a["line_two"] != "" else None
    street = str(text["line_one"]) + (f"\n{two}" if two else "")
    place = "\n".join(str(v) for v in (text["name"], street, text["city"], text["state"], text["country"],
                                       text["postal_code"]))
    return Address("addr_" + hashlib.sha256(place.encode()).hexdigest()[:16], street, text["city"], text["state"],
                   text["postal_code"], str(text["country"]).upper(), text["name"])


def _fulfillment(body: Mapping[str, Any], previous: Session | None) -> FulfillmentRequest | None:
    """The destination (``fulfillment_details.address``) and the option chosen
    (``selected_fulfillment_options``); what the request leaves out stays as it was."""
    destination = None
    if _given(body, "fulfillment_details", "$.fulfillment_details"):
        details = _object(body["fulfillment_details"], "$.fulfillment_details")
        if _given(details, "address", "$.fulfillment_details.address"):
            destination = address(details["address"], "$.fulfillment_details.address")
    option = None
    if _given(body, "selected_fulfillment_options", "$.selected_fulfillment_options"):
        chosen = _list(body["selected_fulfillment_options"], "$.selected_fulfillment_options")
        for i, raw in enumerate(chosen):
            where = f"$.selected_fulfillment_options[{i}]"
            entry = _object(raw, where)
            if entry.get("type", "shipping") != "shipping":
                raise Refused(f"{where}.type: this store only ships", "unsupported", f"{where}.type")
            option = _text(entry.get("option_id"), f"{where}.option_id")
    if destination is None and option is None:
        return None
    before = previous.fulfillment if previous is not None else None
    if destination is not None:
        return FulfillmentRequest(None, "shipping", (destination,), destination.id,
                                  option or (before.selected_option_id if before else None))
    return FulfillmentRequest(None, "shipping", before.destinations if before else None,
                              before.selected_destination_id if before else None, option)


def _codes(body: Mapping[str, Any]) -> tuple[str, ...] | None:
    """``discounts.codes`` (the discount extension), or the deprecated ``coupons`` alias."""
    if _given(body, "discounts", "$.discounts"):
        discounts = _object(body["discounts"], "$.discounts")
        if not _given(discounts, "codes", "$.discounts.codes"):
            return None
        raw = discounts["codes"]
        return tuple(str(_text(c, f"$.discounts.codes[{i}]")) for i, c in enumerate(_list(raw, "$.discounts.codes")))
    if _given(body, "coupons", "$.coupons"):
        return tuple(str(_text(c, f"$.coupons[{i}]")) for i, c in enumerate(_list(body["coupons"], "$.coupons")))
    return None


def session_input(body: Mapping[str, Any], *, previous: Session | None) -> SessionInput:
    """A create (``previous`` None) or an update: what an update leaves out stays as it was."""
    creating = previous is None
    currency = _text(body.get("currency"), "$.currency", optional=not creating)
    if currency is not None and not _CURRENCY.fullmatch(currency):
        raise Refused(f"currency must be an ISO 4217 code such as usd, got {currency!r}", param="$.currency")
    return SessionInput(
        currency=currency,
        lines=_lines(body) if creating or "line_items" in body else None,
        buyer=_buyer(body["buyer"], "$.buyer") if _given(body, "buyer", "$.buyer") else None,
        discount_codes=_codes(body),
        fulfillment=_fulfillment(body, previous),
        interventions=_interventions(body),
    )


def _interventions(body: Mapping[str, Any]) -> tuple[str, ...] | None:
    """``capabilities.interventions.supported``: what the agent can handle. Values this release does
    not name are kept and never offered (rfc.capability_negotiation.md §6.4: handle unknown values
    gracefully); None when the request leaves the capabilities' interventions out."""
    if not _given(body, "capabilities", "$.capabilities"):
        return None
    capabilities = _object(body["capabilities"], "$.capabilities")
    if not _given(capabilities, "interventions", "$.capabilities.interventions"):
        return None
    interventions = capabilities["interventions"]
    where = "$.capabilities.interventions.supported"
    # ACP's schema does not require supported (rfc.capability_negotiation §4 does): absent, none is.
    supported = _list(_object(interventions, "$.capabilities.interventions").get("supported", []), where)
    return tuple(dict.fromkeys(str(_text(v, f"{where}[{i}]")) for i, v in enumerate(supported)))


def payment_request(body: Mapping[str, Any], handler_ids: tuple[str, ...]) -> PaymentRequest:
    """A completion's ``payment_data``: ``handler_id`` with ``instrument.credential`` (a delegated
    token, rfc.payment_handlers.md), or the older ``token`` with ``provider``, the handler then being
    the one named after the provider. A purchase order alone is not a way to pay here."""
    data = _object(body.get("payment_data"), "$.payment_data")
    if data.get("handler_id") is not None or data.get("instrument") is not None:
        handler = str(_text(data.get("handler_id"), "$.payment_data.handler_id"))
        instrument = _object(data.get("instrument"), "$.payment_data.instrument")
        credential = _object(instrument.get("credential"), "$.payment_data.instrument.credential")
        kind = _text(credential.get("type"), "$.payment_data.instrument.credential.type")
        token = _text(credential.get("token"), "$.payment_data.instrument.credential.token")
        return PaymentRequest(handler, {"type": str(kind), "token": str(token)},
                              authentication=authentication_result(body))
    if data.get("token") is not None or data.get("provider") is not None:
        token = _text(data.get("token"), "$.payment_data.token")
        provider = str(_text(data.get("provider"), "$.payment_data.provider"))
        return PaymentRequest(provider, {"type": "spt", "token": str(token)},
                              authentication=authentication_result(body))
    if data.get("purchase_order_number") is not None:
        raise Refused("purchase orders are not accepted: pay with one of the payment handlers offered "
                      f"({', '.join(handler_ids) or 'none'})", "unsupported", "$.payment_data")
    raise Refused("payment_data must name a handler_id and an instrument with its credential",
                  param="$.payment_data")


def authentication_result(body: Mapping[str, Any]) -> AuthenticationResult | None:
    """A completion's ``authentication_result`` as ACP's ``AuthenticationResult`` schema has it:
    ``outcome`` one of :data:`AUTHENTICATION_OUTCOMES`; ``outcome_details`` required for the
    outcomes that go on to the issuer (authenticated, attempt_acknowledged, informational), with all
    four of its fields, the ECI from its enum; no other field. None when the request has none."""
    where = "$.authentication_result"
    if not _given(body, "authentication_result", where):
        return None
    result = _object(body["authentication_result"], where)
    _no_other(result, ("outcome", "outcome_details"), where)
    outcome = str(_text(result.get("outcome"), f"{where}.outcome"))
    if outcome not in AUTHENTICATION_OUTCOMES:
        raise Refused(f"{where}.outcome must be one of {', '.join(AUTHENTICATION_OUTCOMES)}", param=f"{where}.outcome")
    if result.get("outcome_details") is None:
        if outcome in AUTHENTICATED_OUTCOMES:
            raise Refused(f"{where}.outcome_details is required when the outcome is {outcome}", "missing",
                          f"{where}.outcome_details")
        return AuthenticationResult(outcome)
    details_at = f"{where}.outcome_details"
    details = _object(result["outcome_details"], details_at)
    _no_other(details, _OUTCOME_DETAILS, details_at)
    cryptogram, eci, transaction, version = (str(_text(details.get(name), f"{details_at}.{name}"))
                                             for name in _OUTCOME_DETAILS)
    if eci not in _ECI:
        raise Refused(f"{details_at}.electronic_commerce_indicator must be one of {', '.join(_ECI)}",
                      param=f"{details_at}.electronic_commerce_indicator")
    return AuthenticationResult(outcome, cryptogram, eci, transaction, version)


def _no_other(value: Mapping[str, Any], known: tuple[str, ...], where: str) -> None:
    """Refuse a field a closed schema (``additionalProperties: false``) does not have, naming it."""
    extra = next((name for name in value if name not in known), None)
    if extra is not None:
        quoted = extra.replace("\\", "\\\\").replace("'", "\\'")
        member = f".{extra}" if _MEMBER.fullmatch(extra) else f"['{quoted}']"
        raise Refused(f"{where} has no field {extra!r} (it takes {', '.join(known)})", param=where + member)


def complete_buyer(body: Mapping[str, Any]) -> dict[str, Any] | None:
    """The buyer a completion may carry (it replaces the session's)."""
    return _buyer(body["buyer"], "$.buyer") if _given(body, "buyer", "$.buyer") else None


def cancel_request(body: Mapping[str, Any]) -> str | None:
    """A cancellation's optional ``intent_trace``, checked for its shape: its ``reason_code``
    (unknown codes are accepted, as the schema asks; ``price_sensitivity`` may bring a
    counter-offer), or None."""
    if body.get("intent_trace") is None:
        return None
    trace = _object(body["intent_trace"], "$.intent_trace")
    return _text(trace.get("reason_code"), "$.intent_trace.reason_code")
