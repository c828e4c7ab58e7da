"""Owner mandates (spec 003, "Owner Mandate Format", "Security Model"): the pure core of enforcement.

An owner signs a mandate for its agent; the trust layer verifies the signature and hands this
module the mandate's JSON. :func:`parse_mandate` reads it into a :class:`Mandate`, and
:func:`check` / :func:`enforce` decide whether one action the agent wants to take stays within
it. Nothing here does I/O or checks signatures; it fails closed: whatever the mandate does not
positively allow is a violation.

Amounts are integer cents (the wire's ``"maxSpend": 200`` is 20000), read with
:mod:`haggler.money`; an amount with a fraction of a cent is refused, never rounded.

The rules, each named by the mandate field (the :attr:`Violation.constraint`) it protects:

``agentId``
    the mandate belongs to another agent than the one acting.
``currency``
    the action's amount is in another currency than the mandate's.
``issuedAt``
    the action is dated before the mandate was issued (the mandate cannot have authorised it).
``dealMustCloseBy``
    the action is dated after the deadline (exactly at it is allowed). It binds either role.
``canNegotiate`` / ``canUseSealedBid`` / ``canAcceptInstantMatch``
    the protocol the action belongs to is not permitted: ``natural_language`` offers need
    ``canNegotiate``, ``sealed_bid`` bids need ``canUseSealedBid``, ``instant_match`` needs
    ``canAcceptInstantMatch`` (for a buyer, accepting the listing price; for a seller, accepting a
    buyer's instant match). The spec has no permission for ``double_auction`` (its "Future"
    protocol 4): its bids and asks are price discovery by the agent, so they need
    ``canNegotiate``. A confirmation needs the permission of the protocol that produced the deal:
    an agent that may not use a protocol may not close a deal through it either. Posting a
    listing needs no permission (it commits to no deal; its ask is still held to the floor).
``minAcceptablePrice``
    a seller never lists, offers, bids (sealed ``minPrice``), asks (double auction) or confirms
    below it (exactly at it is allowed). A mandate without one does not let its agent sell.
``maxSpend``
    bounds the *total* of every buyer action: the unit price times the quantity, plus the
    listing's shipping cost where it states one. A buyer never offers, bids (sealed ``maxPrice``,
    double auction), instant-matches or confirms a total above it (exactly at it is allowed). A
    mandate without one does not let its agent buy.
``budget``
    (optional; AP2's open payment mandate ``payment.budget``: ``{"max", "currency"}``) bounds the
    buyer's spend across deals: the totals of its pending and confirmed deals (``spent``, which the
    caller reads from the market) plus this action's total never exceed ``max``.
``quantityOnHand``
    (optional) bounds a seller's units across deals: the units of its pending and confirmed deals
    (``spent``) plus this action's quantity never exceed it.
``requiredCondition``
    a buyer never acts on a listing worse than it (``new`` > ``like_new`` > ``good`` > ``fair`` >
    ``poor``), nor on one whose condition the action does not state.
``requiredAccessories``
    a buyer never acts on a listing missing one of them (exact names), nor on one whose
    accessories the action does not state.

``requiresOwnerApproval`` is not a violation: :func:`needs_owner_approval` tells the caller that
a confirmed deal must wait for the owner before it is final.

Malformed input (an unknown role, an action kind the role cannot take, a naive datetime) is an
:class:`~haggler.errors.InvalidInput`, not a violation.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from haggler.errors import Forbidden, InvalidInput
from haggler.money import amount_cents, is_exact_cents
from haggler.protocols.fields import json_object
from haggler.timestamps import parse_rfc3339

ROLES = ("seller", "buyer")
PROTOCOLS = ("natural_language", "sealed_bid", "instant_match", "double_auction")
#: Item conditions, best first (spec 003, Listing: ``item.condition``).
CONDITIONS = ("new", "like_new", "good", "fair", "poor")
SUPPORTED_VERSIONS = ("0.1.0",)

#: Action kinds and the protocol each belongs to (``confirm`` carries its own; ``list`` none).
KIND_PROTOCOL: dict[str, str | None] = {
    "list": None,
    "offer": "natural_language",
    "sealed_bid": "sealed_bid",
    "instant_match": "instant_match",
    "order": "double_auction",
    "confirm": None,
}
#: What each role may do at all (a seller accepts an instant match by confirming it).
ROLE_KINDS = {
    "seller": ("list", "offer", "sealed_bid", "order", "confirm"),
    "buyer": ("offer", "sealed_bid", "instant_match", "order", "confirm"),
}
#: The permission each protocol needs (see the module docstring for double_auction).
PROTOCOL_PERMISSION = {
    "natural_language": "canNegotiate",
    "sealed_bid": "canUseSealedBid",
    "instant_match": "canAcceptInstantMatch",
    "double_auction": "canNegotiate",
}

_CURRENCY = re.compile(r"[A-Z]{3}")
_TOP_FIELDS = ("mandateVersion", "issuedAt", "agentId", "constraints", "permissions", "signature", "publicKey")
_CONSTRAINT_FIELDS = (
    "minAcceptablePrice", "maxSpend", "budget", "quantityOnHand", "currency", "requiredCondition",
    "requiredAccessories", "dealMustCloseBy",
)
_BUDGET_FIELDS = ("type", "max", "currency")
#: AP2's type name for a cumulative budget (its open payment mandate's ``payment.budget``).
BUDGET_TYPE = "payment.budget"
MAX_QUANTITY = 1_000_000
_PERMISSION_FIELDS = ("canNegotiate", "canAcceptInstantMatch", "canUseSealedBid", "requiresOwnerApproval")
MAX_ID_LENGTH = 200
MAX_ACCESSORIES = 50


@dataclass(frozen=True)
class Mandate:
    """An owner's verified, immutable instructions to one agent. Amounts in cents."""

    agent_id: str
    issued_at: datetime
    currency: str
    min_acceptable_price: int | None = None
    max_spend: int | None = None
    budget: int | None = None
    quantity_on_hand: int | None = None
    required_condition: str | None = None
    required_accessories: tuple[str, ...] = ()
    deal_must_close_by: datetime | None = None
    can_negotiate: bool = False
    can_accept_instant_match: bool = False
    can_use_sealed_bid: bool = False
    requires_owner_approval: bool = True

    def permits(self, permission: str) -> bool:
        return {
            "canNegotiate": self.can_negotiate,
            "canAcceptInstantMatch": self.can_accept_instant_match,
            "canUseSealedBid": self.can_use_sealed_bid,
        }[permission]


@dataclass(frozen=True)
class Action:
    """One thing an agent wants to do, in cents, with the listing facts a buyer acts on.

    ``price`` is the action's amount: the ask of a listing, an offer's price, a sealed bid's
    ``minPrice`` (seller) or ``maxPrice`` (buyer), an instant match's accepted price, a double
    auction order's price, a confirmation's final price. ``condition`` and ``accessories`` are
    the listing's, when the action concerns one (``None``: not stated); ``shipping`` the listing's
    shipping cost (0: none stated). ``quantity`` is how many units (a double-auction order's; 1
    otherwise).
    Build them with :func:`listing`, :func:`offer`, :func:`sealed_bid`, :func:`instant_match`,
    :func:`order` and :func:`confirm`.
    """

    kind: str
    protocol: str | None
    agent_id: str
    price: int
    currency: str
    at: datetime
    condition: str | None = None
    accessories: tuple[str, ...] | None = None
    quantity: int = 1
    shipping: int = 0

    @property
    def total(self) -> int:
        """What the action commits the buyer to pay: price × quantity + shipping, in cents."""
        return self.price * self.quantity + self.shipping

    def __post_init__(self) -> None:
        if self.kind not in KIND_PROTOCOL:
            raise InvalidInput(f"kind must be one of {', '.join(KIND_PROTOCOL)}, not {self.kind!r}")
        expected = KIND_PROTOCOL[self.kind]
        if self.kind == "confirm":
            if self.protocol not in PROTOCOLS:
                raise InvalidInput(f"protocol must be one of {', '.join(PROTOCOLS)}, not {self.protocol!r}")
        elif self.protocol != expected:
            raise InvalidInput(f"a {self.kind} belongs to protocol {expected!r}, not {self.protocol!r}")
        if isinstance(self.price, bool) or not isinstance(self.price, int) or self.price <= 0:
            raise InvalidInput(f"price must be a positive whole number of cents, not {self.price!r}")
        if not isinstance(self.at, datetime) or self.at.tzinfo is None:
            raise InvalidInput("at must be a timezone-aware datetime")
        if isinstance(self.quantity, bool) or not isinstance(self.quantity, int) or self.quantity <= 0:
            raise InvalidInput(f"quantity must be a positive whole number, not {self.quantity!r}")
        if isinstance(self.shipping, bool) or not isinstance(self.shipping, int) or self.shipping < 0:
            raise InvalidInput(f"shipping must be a whole number of cents, at least 0, not {self.shipping!r}")
        if self.condition is not None and self.condition not in CONDITIONS:
            raise InvalidInput(f"condition must be one of {', '.join(CONDITIONS)}, not {self.condition!r}")
        if self.accessories is not None and not isinstance(self.accessories, tuple):
            object.__setattr__(self, "accessories", tuple(self.accessories))


def listing(agent_id: str, ask: int, currency: str, at: datetime) -> Action:
    """A seller posts a listing asking ``ask`` cents."""
    return Action("list", None, agent_id, ask, currency, at)


def offer(agent_id: str, price: int, currency: str, at: datetime, *, condition: str | None = None,
          accessories: tuple[str, ...] | None = None, shipping: int = 0) -> Action:
    """A natural-language offer (either party) of ``price`` cents."""
    return Action("offer", "natural_language", agent_id, price, currency, at, condition, accessories,
                  shipping=shipping)


def sealed_bid(agent_id: str, limit: int, currency: str, at: datetime, *, condition: str | None = None,
               accessories: tuple[str, ...] | None = None, shipping: int = 0) -> Action:
    """A sealed bid: the seller's ``minPrice`` or the buyer's ``maxPrice``, in cents."""
    return Action("sealed_bid", "sealed_bid", agent_id, limit, currency, at, condition, accessories,
                  shipping=shipping)


def instant_match(agent_id: str, accepted_price: int, currency: str, at: datetime, *, condition: str | None,
                  accessories: tuple[str, ...] | None, shipping: int = 0) -> Action:
    """A buyer accepts a listing's price at once; the listing's condition and accessories."""
    return Action("instant_match", "instant_match", agent_id, accepted_price, currency, at, condition, accessories,
                  shipping=shipping)


def order(agent_id: str, price: int, currency: str, at: datetime, *, quantity: int = 1) -> Action:
    """A double-auction order: a seller's ask or a buyer's bid of ``price`` cents a unit."""
    return Action("order", "double_auction", agent_id, price, currency, at, quantity=quantity)


def confirm(agent_id: str, final_price: int, currency: str, at: datetime, *, protocol: str,
            condition: str | None = None, accessories: tuple[str, ...] | None = None, quantity: int = 1,
            shipping: int = 0) -> Action:
    """A deal confirmation at ``final_price`` cents a unit, reached through ``protocol``."""
    return Action("confirm", protocol, agent_id, final_price, currency, at, condition, accessories, quantity,
                  shipping)


@dataclass(frozen=True)
class Violation:
    """The mandate field an action breaks and why, in words safe to log and show."""

    constraint: str
    reason: str


class MandateViolation(Forbidden):
    """An action the agent's owner mandate forbids; the framework refuses it (agent can't override)."""

    def __init__(self, violation: Violation) -> None:
        super().__init__(f"mandate violation ({violation.constraint}): {violation.reason}")
        self.violation = violation
        self.constraint = violation.constraint

    def fields(self) -> dict[str, Any]:
        """The spec's refusal (HTTP 403): ``{"error": "mandate_violation", "constraint", "reason"}``."""
        return {"error": "mandate_violation", "constraint": self.constraint, "reason": self.violation.reason}


def needs_owner_approval(mandate: Mandate) -> bool:
    """True when a deal the agent confirms must wait for the owner's approval before it is final."""
    return mandate.requires_owner_approval


def check(mandate: Mandate, role: str, action: Action, *, spent: int = 0) -> Violation | None:
    """The first constraint of ``mandate`` that ``action`` by an agent in ``role`` breaks, or None.

    ``spent`` is what the agent has already committed in deals that count against its
    cumulative limit (a buyer's cents against ``budget``, a seller's units against
    ``quantityOnHand``), not counting this action.

    Order: agentId, currency, issuedAt, dealMustCloseBy, the protocol's permission, the price
    limit, the cumulative limit, requiredCondition, requiredAccessories.
    """
    if role not in ROLES:
        raise InvalidInput(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    if action.kind not in ROLE_KINDS[role]:
        raise InvalidInput(f"a {role} cannot take a {action.kind} action")
    if action.agent_id != mandate.agent_id:
        return Violation("agentId", f"the mandate is {mandate.agent_id!r}'s, not {action.agent_id!r}'s")
    if action.currency != mandate.currency:
        return Violation("currency", f"the mandate is in {mandate.currency}, the action in {action.currency}")
    if action.at < mandate.issued_at:
        return Violation("issuedAt", "the action is dated before the mandate was issued")
    if mandate.deal_must_close_by is not None and action.at > mandate.deal_must_close_by:
        return Violation("dealMustCloseBy", f"the deal had to close by {mandate.deal_must_close_by.isoformat()}")
    if action.protocol is not None:
        permission = PROTOCOL_PERMISSION[action.protocol]
        if not mandate.permits(permission):
            return Violation(permission, f"the owner does not permit the {action.protocol} protocol")
    if role == "seller":
        return _seller_limits(mandate, action, spent)
    return _buyer_limits(mandate, action, spent)


def reads_spend(mandate: Mandate, role: str) -> bool:
    """Whether :func:`check` reads ``spent`` for this mandate in this role: a buyer's ``budget``,
    a seller's ``quantityOnHand`` (units in its deals). Every other constraint bounds one action
    on its own, so a caller need not sum the spend across deals for it."""
    return (mandate.budget if role == "buyer" else mandate.quantity_on_hand) is not None


def enforce(mandate: Mandate, role: str, action: Action, *, spent: int = 0) -> None:
    """Raise :class:`MandateViolation` when :func:`check` finds a violation."""
    violation = check(mandate, role, action, spent=spent)
    if violation is not None:
        raise MandateViolation(violation)


def _seller_limits(mandate: Mandate, action: Action, units_sold: int) -> Violation | None:
    floor = mandate.min_acceptable_price
    if floor is None:
        return Violation("minAcceptablePrice", "the mandate sets no minAcceptablePrice, so it does not allow selling")
    if action.price < floor:
        return Violation("minAcceptablePrice", f"{action.price} cents is below the owner's minimum of {floor}")
    on_hand = mandate.quantity_on_hand
    if on_hand is not None and action.kind != "list" and units_sold + action.quantity > on_hand:
        return Violation("quantityOnHand", f"{action.quantity} more units would exceed the {on_hand} the owner has "
                                           f"({units_sold} already in pending or confirmed deals)")
    return None


def _buyer_limits(mandate: Mandate, action: Action, spent: int) -> Violation | None:
    cap = mandate.max_spend
    if cap is None:
        return Violation("maxSpend", "the mandate sets no maxSpend, so it does not allow buying")
    if action.total > cap:
        return Violation("maxSpend", f"a total of {action.total} cents is above the owner's maximum of {cap}")
    if mandate.budget is not None and spent + action.total > mandate.budget:
        return Violation("budget", f"a total of {action.total} cents would take the spend to {spent + action.total}, "
                                   f"above the owner's budget of {mandate.budget}")
    required = mandate.required_condition
    if required is not None:
        if action.condition is None:
            return Violation("requiredCondition", f"the listing's condition is not stated; the owner requires {required}")
        if CONDITIONS.index(action.condition) > CONDITIONS.index(required):
            return Violation("requiredCondition", f"{action.condition} is worse than the required {required}")
    if mandate.required_accessories:
        if action.accessories is None:
            return Violation("requiredAccessories", "the listing's accessories are not stated")
        missing = [name for name in mandate.required_accessories if name not in action.accessories]
        if missing:
            return Violation("requiredAccessories", f"the listing lacks {', '.join(missing)}")
    return None


# --- Reading a mandate ------------------------------------------------------------------------


def parse_mandate(data: object) -> Mandate:
    """A verified mandate's JSON (a dict, or its text) in the spec's "Owner Mandate Format".

    Every error is an :class:`InvalidInput` naming the field. Unknown fields are refused: a
    constraint this version does not know must not be silently dropped. Missing permissions
    fail closed (``can*`` false, ``requiresOwnerApproval`` true).
    """
    if isinstance(data, (str, bytes)):
        try:
            data = json.loads(data)
        except ValueError as exc:
            raise InvalidInput("mandate is not valid JSON") from exc
    body = json_object(data, "mandate")
    _only(body, _TOP_FIELDS, "mandate")
    version = body.get("mandateVersion")
    if version not in SUPPORTED_VERSIONS:
        raise InvalidInput(f"mandateVersion must be one of {', '.join(SUPPORTED_VERSIONS)}, not {_show(version)}")
    agent_id = body.get("agentId")
    if not isinstance(agent_id, str) or not agent_id.strip() or len(agent_id) > MAX_ID_LENGTH:
        raise InvalidInput(f"agentId must be a non-empty string of at most {MAX_ID_LENGTH} characters")
    issued_at = _timestamp(body.get("issuedAt"), "issuedAt")

    constraints = json_object(body.get("constraints"), "constraints")
    _only(constraints, _CONSTRAINT_FIELDS, "constraints")
    currency = constraints.get("currency")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise InvalidInput(f"constraints.currency must be a three-letter upper-case code, not {_show(currency)}")
    floor = _amount(constraints, "minAcceptablePrice")
    cap = _amount(constraints, "maxSpend")
    budget = _budget(constraints.get("budget"), currency)
    on_hand = constraints.get("quantityOnHand")
    if on_hand is not None and (isinstance(on_hand, bool) or not isinstance(on_hand, int)
                                or not 1 <= on_hand <= MAX_QUANTITY):
        raise InvalidInput(f"constraints.quantityOnHand must be a whole number from 1 to {MAX_QUANTITY}, "
                           f"not {_show(on_hand)}")
    if floor is None and cap is None:
        raise InvalidInput("constraints must set minAcceptablePrice (a seller's) or maxSpend (a buyer's)")
    condition = constraints.get("requiredCondition")
    if condition is not None and condition not in CONDITIONS:
        raise InvalidInput(f"constraints.requiredCondition must be one of {', '.join(CONDITIONS)}, not {_show(condition)}")
    accessories = constraints.get("requiredAccessories", [])
    if not isinstance(accessories, list) or len(accessories) > MAX_ACCESSORIES or not all(
        isinstance(name, str) and name.strip() for name in accessories
    ):
        raise InvalidInput(
            f"constraints.requiredAccessories must be a list of at most {MAX_ACCESSORIES} non-empty strings"
        )
    deadline = constraints.get("dealMustCloseBy")
    close_by = None if deadline is None else _timestamp(deadline, "constraints.dealMustCloseBy")

    permissions = json_object(body.get("permissions", {}), "permissions")
    _only(permissions, _PERMISSION_FIELDS, "permissions")
    flags = {}
    for name in _PERMISSION_FIELDS:
        value = permissions.get(name, name == "requiresOwnerApproval")
        if not isinstance(value, bool):
            raise InvalidInput(f"permissions.{name} must be true or false, not {_show(value)}")
        flags[name] = value

    return Mandate(
        agent_id=agent_id,
        issued_at=issued_at,
        currency=currency,
        min_acceptable_price=floor,
        max_spend=cap,
        budget=budget,
        quantity_on_hand=on_hand,
        required_condition=condition,
        required_accessories=tuple(accessories),
        deal_must_close_by=close_by,
        can_negotiate=flags["canNegotiate"],
        can_accept_instant_match=flags["canAcceptInstantMatch"],
        can_use_sealed_bid=flags["canUseSealedBid"],
        requires_owner_approval=flags["requiresOwnerApproval"],
    )


def _show(value: object) -> str:
    try:
        return json.dumps(value)[:40]
    except (TypeError, ValueError):
        return repr(value)[:40]


def _only(body: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    unknown = sorted(set(body) - set(allowed), key=str)
    if unknown:
        raise InvalidInput(f"unknown field {where}.{unknown[0]}; allowed: {', '.join(allowed)}")


def _amount(constraints: dict[str, Any], name: str, where: str = "constraints") -> int | None:
    """A positive amount in major units as cents; a fraction of a cent is refused, not rounded."""
    if name not in constraints or constraints[name] is None:
        return None
    value = constraints[name]
    try:
        cents = amount_cents(value)
    except ValueError as exc:
        raise InvalidInput(f"{where}.{name} {exc}") from exc
    if not is_exact_cents(value, cents):  # amount_cents rounds; a mandate's limit must be exact
        raise InvalidInput(f"{where}.{name} must be a whole number of cents, not {_show(value)}")
    if cents <= 0:
        raise InvalidInput(f"{where}.{name} must be greater than 0, not {_show(value)}")
    return cents


def _budget(value: object, currency: str) -> int | None:
    """``constraints.budget`` in AP2's ``payment.budget`` shape, as cents; it must be in the
    mandate's currency (a budget in another currency would bound nothing the agent spends)."""
    if value is None:
        return None
    body = json_object(value, "constraints.budget")
    _only(body, _BUDGET_FIELDS, "constraints.budget")
    if body.get("type", BUDGET_TYPE) != BUDGET_TYPE:
        raise InvalidInput(f"constraints.budget.type must be {BUDGET_TYPE!r}, not {_show(body.get('type'))}")
    if body.get("currency") != currency:
        raise InvalidInput(f"constraints.budget.currency must be the mandate's currency {currency}, "
                           f"not {_show(body.get('currency'))}")
    cents = _amount(body, "max", "constraints.budget")
    if cents is None:
        raise InvalidInput("constraints.budget.max is required")
    return cents


def _timestamp(value: object, name: str) -> datetime:
    if not isinstance(value, str):
        raise InvalidInput(f"{name} must be an ISO 8601 timestamp string")
    try:
        moment = parse_rfc3339(value)
    except ValueError as exc:
        raise InvalidInput(f"{name} must be an ISO 8601 timestamp, not {_show(value)}") from exc
    if moment.tzinfo is None:
        raise InvalidInput(f"{name} must carry a time zone (e.g. a trailing Z)")
    return moment
