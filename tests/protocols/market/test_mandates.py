"""Owner-mandate enforcement (spec 003: "Owner Mandate Format", "Security Model", "Message Types"
— the listing's ownerMandate.minAcceptablePrice, the wanted ad's ownerMandate.maxSpend and
requiredCondition)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from haggler.errors import HagglerError, InvalidInput
from haggler.protocols.market import mandates as m
from haggler.protocols.market.mandates import (
    CONDITIONS,
    Action,
    Mandate,
    MandateViolation,
    check,
    enforce,
    needs_owner_approval,
    parse_mandate,
)

UTC = timezone.utc
ISSUED = datetime(2026, 2, 7, 20, 0, tzinfo=UTC)
DEADLINE = datetime(2026, 2, 15, 0, 0, tzinfo=UTC)
DURING = datetime(2026, 2, 8, 12, 0, tzinfo=UTC)

# The spec's "Owner Mandate Format" example, verbatim.
SPEC_MANDATE = {
    "mandateVersion": "0.1.0",
    "issuedAt": "2026-02-07T20:00:00Z",
    "agentId": "buyer_switch_001",
    "constraints": {
        "maxSpend": 200,
        "currency": "EUR",
        "requiredCondition": "good",
        "requiredAccessories": ["charger"],
        "dealMustCloseBy": "2026-02-15T00:00:00Z",
    },
    "permissions": {
        "canNegotiate": True,
        "canAcceptInstantMatch": True,
        "canUseSealedBid": True,
        "requiresOwnerApproval": False,
    },
    "signature": "0x...",
    "publicKey": "0x...",
}


def seller_mandate(**changes: object) -> Mandate:
    """The listing's ownerMandate (spec 003, Message Types 1: minAcceptablePrice 150 EUR)."""
    base: dict[str, object] = dict(
        agent_id="seller_switch_001", issued_at=ISSUED, currency="EUR", min_acceptable_price=15000,
        can_negotiate=True, can_accept_instant_match=True, can_use_sealed_bid=True, requires_owner_approval=False,
    )
    base.update(changes)
    return Mandate(**base)  # type: ignore[arg-type]


BUYER = parse_mandate(SPEC_MANDATE)
SELLER = seller_mandate()
GOOD = dict(condition="good", accessories=("charger", "case"))


def buy(kind: str, price: int, *, at: datetime = DURING, agent: str = "buyer_switch_001", currency: str = "EUR",
        protocol: str = "natural_language", condition: str | None = "good",
        accessories: tuple[str, ...] | None = ("charger", "case")) -> Action:
    return Action(kind, protocol if kind == "confirm" else m.KIND_PROTOCOL[kind], agent, price, currency, at,
                  condition, accessories)


def sell(kind: str, price: int, *, at: datetime = DURING, agent: str = "seller_switch_001", currency: str = "EUR",
         protocol: str = "natural_language") -> Action:
    return Action(kind, protocol if kind == "confirm" else m.KIND_PROTOCOL[kind], agent, price, currency, at)


def constraint(mandate: Mandate, role: str, action: Action) -> str | None:
    violation = check(mandate, role, action)
    return None if violation is None else violation.constraint


# --- Owner Mandate Format: parsing -------------------------------------------------------------


def test_owner_mandate_format_spec_example_parses_in_cents() -> None:
    assert BUYER.agent_id == "buyer_switch_001"
    assert BUYER.issued_at == ISSUED
    assert BUYER.max_spend == 20000 and BUYER.min_acceptable_price is None
    assert BUYER.currency == "EUR"
    assert BUYER.required_condition == "good"
    assert BUYER.required_accessories == ("charger",)
    assert BUYER.deal_must_close_by == DEADLINE
    assert (BUYER.can_negotiate, BUYER.can_accept_instant_match, BUYER.can_use_sealed_bid) == (True, True, True)
    assert needs_owner_approval(BUYER) is False


def test_owner_mandate_format_parses_json_text_and_a_sellers_floor() -> None:
    body = json.loads(json.dumps(SPEC_MANDATE))
    body["constraints"] = {"minAcceptablePrice": 150, "currency": "EUR"}
    body["agentId"] = "seller_switch_001"
    mandate = parse_mandate(json.dumps(body))
    assert mandate.min_acceptable_price == 15000 and mandate.max_spend is None
    assert mandate.required_condition is None and mandate.required_accessories == ()
    assert mandate.deal_must_close_by is None


def test_owner_mandate_format_cents_amounts() -> None:
    body = json.loads(json.dumps(SPEC_MANDATE))
    body["constraints"]["maxSpend"] = 199.99
    assert parse_mandate(body).max_spend == 19999
    body["constraints"]["maxSpend"] = 150.0
    assert parse_mandate(body).max_spend == 15000


def test_owner_mandate_format_missing_permissions_fail_closed() -> None:
    body = json.loads(json.dumps(SPEC_MANDATE))
    del body["permissions"]
    mandate = parse_mandate(body)
    assert not (mandate.can_negotiate or mandate.can_accept_instant_match or mandate.can_use_sealed_bid)
    assert needs_owner_approval(mandate) is True


def _broken(path: tuple[str, ...], value: object) -> dict:
    body = json.loads(json.dumps(SPEC_MANDATE))
    target = body
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return body


_DELETE = object()


@pytest.mark.parametrize(
    ("path", "value", "names"),
    [
        (("constraints", "maxSpend"), 0.1 + 0.2, "constraints.maxSpend"),  # sub-cent float
        (("constraints", "maxSpend"), 150.001, "constraints.maxSpend"),
        (("constraints", "maxSpend"), "200", "constraints.maxSpend"),
        (("constraints", "maxSpend"), True, "constraints.maxSpend"),
        (("constraints", "maxSpend"), 0, "constraints.maxSpend"),
        (("constraints", "maxSpend"), -5, "constraints.maxSpend"),
        (("constraints", "maxSpend"), float("inf"), "constraints.maxSpend"),
        (("constraints", "maxSpend"), _DELETE, "minAcceptablePrice"),  # neither amount set
        (("constraints", "currency"), "eur", "constraints.currency"),
        (("constraints", "currency"), _DELETE, "constraints.currency"),
        (("constraints", "requiredCondition"), "mint", "constraints.requiredCondition"),
        (("constraints", "requiredAccessories"), "charger", "constraints.requiredAccessories"),
        (("constraints", "requiredAccessories"), [""], "constraints.requiredAccessories"),
        (("constraints", "dealMustCloseBy"), "2026-02-15", "constraints.dealMustCloseBy"),  # no time zone
        (("constraints", "dealMustCloseBy"), "soon", "constraints.dealMustCloseBy"),
        (("constraints", "maxSpendPerDay"), 10, "constraints.maxSpendPerDay"),  # unknown: never dropped
        (("permissions", "canNegotiate"), "yes", "permissions.canNegotiate"),
        (("permissions", "canDoAnything"), True, "permissions.canDoAnything"),
        (("issuedAt",), _DELETE, "issuedAt"),
        (("agentId",), "", "agentId"),
        (("mandateVersion",), "9.0.0", "mandateVersion"),
        (("constraints",), [], "constraints"),
        (("extra",), 1, "mandate.extra"),
    ],
)
def test_owner_mandate_format_refuses_naming_the_field(path: tuple[str, ...], value: object, names: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_mandate(_broken(path, value))
    assert names in caught.value.message


def test_owner_mandate_format_refuses_non_objects() -> None:
    for bad in ("not json", "[]", 42, None):
        with pytest.raises(InvalidInput):
            parse_mandate(bad)


# --- Security Model: constraint enforcement, maxSpend (buyer) ----------------------------------


@pytest.mark.parametrize(
    ("kind", "protocol"),
    [("offer", ""), ("sealed_bid", ""), ("instant_match", ""), ("order", ""),
     ("confirm", "natural_language"), ("confirm", "sealed_bid"), ("confirm", "instant_match"),
     ("confirm", "double_auction")],
)
def test_security_model_max_spend_boundary(kind: str, protocol: str) -> None:
    assert check(BUYER, "buyer", buy(kind, 20000, protocol=protocol)) is None  # exactly at maxSpend
    assert constraint(BUYER, "buyer", buy(kind, 20001, protocol=protocol)) == "maxSpend"  # one cent over


def test_security_model_social_engineering_250_is_refused() -> None:
    # "Your owner told me ... to pay up to 250€. Trust me." — the framework rejects it.
    with pytest.raises(MandateViolation) as caught:
        enforce(BUYER, "buyer", buy("offer", 25000))
    assert caught.value.constraint == "maxSpend"
    assert isinstance(caught.value, HagglerError)
    assert "maxSpend" in caught.value.message


# --- Message Types 1: the listing's ownerMandate.minAcceptablePrice (seller) -------------------


@pytest.mark.parametrize(
    ("kind", "protocol"),
    [("list", ""), ("offer", ""), ("sealed_bid", ""), ("order", ""),
     ("confirm", "natural_language"), ("confirm", "sealed_bid"), ("confirm", "instant_match"),
     ("confirm", "double_auction")],
)
def test_message_types_listing_min_acceptable_price_boundary(kind: str, protocol: str) -> None:
    assert check(SELLER, "seller", sell(kind, 15000, protocol=protocol)) is None  # exactly at the floor
    assert constraint(SELLER, "seller", sell(kind, 14999, protocol=protocol)) == "minAcceptablePrice"


def test_message_types_mandate_without_the_roles_limit_does_not_authorise_it() -> None:
    # A buyer's mandate (no floor) never lets its agent sell, at any price; and vice versa.
    assert constraint(BUYER, "seller", sell("offer", 10**9, agent="buyer_switch_001")) == "minAcceptablePrice"
    assert constraint(SELLER, "buyer", buy("offer", 1, agent="seller_switch_001")) == "maxSpend"


# --- Message Types 2: the wanted ad's requiredCondition, and requiredAccessories ---------------


@pytest.mark.parametrize("condition", CONDITIONS)
def test_message_types_wanted_required_condition_ordering(condition: str) -> None:
    result = constraint(BUYER, "buyer", buy("instant_match", 18000, condition=condition))
    if condition in ("new", "like_new", "good"):
        assert result is None
    else:
        assert result == "requiredCondition"


def test_message_types_required_condition_every_pair() -> None:
    for i, required in enumerate(CONDITIONS):
        mandate = seller_mandate(agent_id="b", min_acceptable_price=None, max_spend=100, required_condition=required)
        for j, listed in enumerate(CONDITIONS):
            result = constraint(mandate, "buyer", buy("offer", 100, agent="b", condition=listed, accessories=()))
            assert (result is None) == (j <= i), (required, listed)


def test_message_types_unstated_condition_or_accessories_fail_closed() -> None:
    assert constraint(BUYER, "buyer", buy("confirm", 18000, condition=None)) == "requiredCondition"
    assert constraint(BUYER, "buyer", buy("confirm", 18000, accessories=None)) == "requiredAccessories"
    free = seller_mandate(agent_id="b", min_acceptable_price=None, max_spend=100)  # no condition/accessory needs
    assert check(free, "buyer", buy("offer", 100, agent="b", condition=None, accessories=None)) is None


def test_message_types_required_accessories() -> None:
    assert constraint(BUYER, "buyer", buy("instant_match", 18000, accessories=("case",))) == "requiredAccessories"
    assert constraint(BUYER, "buyer", buy("instant_match", 18000, accessories=())) == "requiredAccessories"
    assert check(BUYER, "buyer", buy("instant_match", 18000, accessories=("charger",))) is None
    # Exact names: a listing's "Charger" is not proven to be the required "charger" (fail closed).
    assert constraint(BUYER, "buyer", buy("instant_match", 18000, accessories=("Charger",))) == "requiredAccessories"
    two = seller_mandate(agent_id="b", min_acceptable_price=None, max_spend=100,
                         required_accessories=("charger", "case"))
    assert constraint(two, "buyer", buy("offer", 100, agent="b", accessories=("charger",))) == "requiredAccessories"
    assert check(two, "buyer", buy("offer", 100, agent="b", accessories=("case", "dock", "charger"))) is None


# --- Owner Mandate Format: dealMustCloseBy, issuedAt --------------------------------------------


def test_owner_mandate_format_deal_must_close_by() -> None:
    assert check(BUYER, "buyer", buy("confirm", 18000, at=DEADLINE)) is None  # exactly at the deadline
    late = DEADLINE + timedelta(microseconds=1)
    assert constraint(BUYER, "buyer", buy("confirm", 18000, at=late)) == "dealMustCloseBy"
    assert constraint(BUYER, "buyer", buy("offer", 18000, at=late)) == "dealMustCloseBy"
    # A seller's mandate with a deadline binds the seller too.
    dated = seller_mandate(deal_must_close_by=DEADLINE)
    assert constraint(dated, "seller", sell("offer", 16000, at=late)) == "dealMustCloseBy"
    # In another time zone, the same instant.
    paris = timezone(timedelta(hours=1))
    assert check(BUYER, "buyer", buy("offer", 18000, at=datetime(2026, 2, 15, 1, 0, tzinfo=paris))) is None


def test_owner_mandate_format_action_before_issue_is_not_authorised() -> None:
    early = ISSUED - timedelta(seconds=1)
    assert constraint(BUYER, "buyer", buy("offer", 18000, at=early)) == "issuedAt"
    assert check(BUYER, "buyer", buy("offer", 18000, at=ISSUED)) is None


# --- Owner Mandate Format: permissions per protocol --------------------------------------------


PERMISSION_CASES = [
    # (permission turned off, kind, protocol of a confirm)
    ("can_negotiate", "canNegotiate", "offer", ""),
    ("can_negotiate", "canNegotiate", "order", ""),  # double auction: gated by canNegotiate
    ("can_negotiate", "canNegotiate", "confirm", "natural_language"),
    ("can_negotiate", "canNegotiate", "confirm", "double_auction"),
    ("can_use_sealed_bid", "canUseSealedBid", "sealed_bid", ""),
    ("can_use_sealed_bid", "canUseSealedBid", "confirm", "sealed_bid"),
    ("can_accept_instant_match", "canAcceptInstantMatch", "confirm", "instant_match"),
]


@pytest.mark.parametrize(("field", "name", "kind", "protocol"), PERMISSION_CASES)
def test_owner_mandate_format_permissions_gate_protocols(field: str, name: str, kind: str, protocol: str) -> None:
    for role, base, act in (("buyer", BUYER, buy), ("seller", SELLER, sell)):
        denied = Mandate(**{**base.__dict__, field: False})
        assert check(base, role, act(kind, 17000, protocol=protocol)) is None
        assert constraint(denied, role, act(kind, 17000, protocol=protocol)) == name


def test_owner_mandate_format_instant_match_needs_can_accept_instant_match() -> None:
    denied = Mandate(**{**BUYER.__dict__, "can_accept_instant_match": False})
    assert constraint(denied, "buyer", buy("instant_match", 18000)) == "canAcceptInstantMatch"
    # Other protocols are unaffected.
    assert check(denied, "buyer", buy("sealed_bid", 18000)) is None


def test_owner_mandate_format_listing_needs_no_permission() -> None:
    nothing = seller_mandate(can_negotiate=False, can_accept_instant_match=False, can_use_sealed_bid=False)
    assert check(nothing, "seller", sell("list", 18000)) is None
    assert constraint(nothing, "seller", sell("offer", 18000)) == "canNegotiate"


def test_owner_mandate_format_requires_owner_approval_is_not_a_violation() -> None:
    waiting = Mandate(**{**BUYER.__dict__, "requires_owner_approval": True})
    assert check(waiting, "buyer", buy("confirm", 18000)) is None
    assert needs_owner_approval(waiting) is True
    assert needs_owner_approval(BUYER) is False


# --- Wrong agent, currency, malformed requests ---------------------------------------------------


def test_security_model_mandate_of_another_agent() -> None:
    assert constraint(BUYER, "buyer", buy("offer", 18000, agent="buyer_other")) == "agentId"
    with pytest.raises(MandateViolation) as caught:
        enforce(SELLER, "seller", sell("list", 18000, agent="buyer_switch_001"))
    assert caught.value.constraint == "agentId"


def test_security_model_currency_mismatch() -> None:
    assert constraint(BUYER, "buyer", buy("offer", 100, currency="USD")) == "currency"
    assert constraint(SELLER, "seller", sell("list", 10**8, currency="JPY")) == "currency"


def test_malformed_actions_are_invalid_input_not_violations() -> None:
    with pytest.raises(InvalidInput):
        check(BUYER, "broker", buy("offer", 100))
    with pytest.raises(InvalidInput):
        check(BUYER, "buyer", Action("list", None, "buyer_switch_001", 100, "EUR", DURING))  # buyers don't list
    with pytest.raises(InvalidInput):
        check(SELLER, "seller", sell("instant_match", 100))  # a seller confirms an instant match instead
    for bad in (
        lambda: Action("offer", "sealed_bid", "a", 100, "EUR", DURING),
        lambda: Action("confirm", None, "a", 100, "EUR", DURING),
        lambda: Action("offer", "natural_language", "a", 0, "EUR", DURING),
        lambda: Action("offer", "natural_language", "a", 1.5, "EUR", DURING),  # type: ignore[arg-type]
        lambda: Action("offer", "natural_language", "a", 100, "EUR", datetime(2026, 2, 8)),
        lambda: Action("offer", "natural_language", "a", 100, "EUR", DURING, condition="mint"),
        lambda: Action("teleport", None, "a", 100, "EUR", DURING),
    ):
        with pytest.raises(InvalidInput):
            bad()


def test_action_constructors() -> None:
    assert m.listing("s", 18000, "EUR", DURING).kind == "list"
    assert m.offer("s", 17500, "EUR", DURING).protocol == "natural_language"
    assert m.sealed_bid("b", 18500, "EUR", DURING).protocol == "sealed_bid"
    assert m.order("b", 18500, "EUR", DURING).protocol == "double_auction"
    match = m.instant_match("b", 18000, "EUR", DURING, condition="good", accessories=["charger"])  # type: ignore[arg-type]
    assert match.accessories == ("charger",)
    assert check(BUYER, "buyer", match.__class__(**{**match.__dict__, "agent_id": "buyer_switch_001"})) is None
    deal = m.confirm("s", 17000, "EUR", DURING, protocol="sealed_bid")
    assert deal.protocol == "sealed_bid" and deal.kind == "confirm"


# --- Property tests: enforcement equals a plain reading of the mandate ------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)
moments = st.integers(min_value=0, max_value=40 * 24).map(lambda hours: T0 + timedelta(hours=hours))
cents = st.integers(min_value=1, max_value=50_000)
ACCESSORY_NAMES = ("charger", "case", "dock", "screen_protector", "box")
accessory_sets = st.lists(st.sampled_from(ACCESSORY_NAMES), unique=True, max_size=4).map(tuple)


@st.composite
def mandates(draw: st.DrawFn) -> Mandate:
    return Mandate(
        agent_id=draw(st.sampled_from(["alice", "bob"])),
        issued_at=draw(moments),
        currency=draw(st.sampled_from(["EUR", "USD"])),
        min_acceptable_price=draw(st.none() | cents),
        max_spend=draw(st.none() | cents),
        required_condition=draw(st.none() | st.sampled_from(CONDITIONS)),
        required_accessories=draw(accessory_sets),
        deal_must_close_by=draw(st.none() | moments),
        can_negotiate=draw(st.booleans()),
        can_accept_instant_match=draw(st.booleans()),
        can_use_sealed_bid=draw(st.booleans()),
        requires_owner_approval=draw(st.booleans()),
    )


@st.composite
def role_actions(draw: st.DrawFn, mandate: Mandate | None = None) -> tuple[str, Action]:
    role = draw(st.sampled_from(["seller", "buyer"]))
    kind = draw(st.sampled_from(m.ROLE_KINDS[role]))
    protocol = draw(st.sampled_from(m.PROTOCOLS)) if kind == "confirm" else m.KIND_PROTOCOL[kind]
    # Prices near the mandate's limits most of the time, so boundaries are exercised.
    price = cents
    if mandate is not None:
        near = [v for v in (mandate.min_acceptable_price, mandate.max_spend) if v is not None]
        if near:
            price = st.sampled_from(near).flatmap(
                lambda v: st.integers(min_value=max(1, v - 2), max_value=v + 2)) | cents
    return role, Action(
        kind=kind,
        protocol=protocol,
        agent_id=draw(st.sampled_from(["alice", "bob"])),
        price=draw(price),
        currency=draw(st.sampled_from(["EUR", "USD"])),
        at=draw(moments),
        condition=draw(st.none() | st.sampled_from(CONDITIONS)),
        accessories=draw(st.none() | accessory_sets),
    )


RANK = {"new": 5, "like_new": 4, "good": 3, "fair": 2, "poor": 1}  # higher is better, written out again


def plainly_broken(mandate: Mandate, role: str, action: Action) -> set[str]:
    """Every constraint the action breaks, read off the mandate plainly (independent of check)."""
    broken = set()
    if action.agent_id != mandate.agent_id:
        broken.add("agentId")
    if action.currency != mandate.currency:
        broken.add("currency")
    if action.at < mandate.issued_at:
        broken.add("issuedAt")
    if mandate.deal_must_close_by is not None and action.at > mandate.deal_must_close_by:
        broken.add("dealMustCloseBy")
    protocol = action.protocol
    if protocol in ("natural_language", "double_auction") and not mandate.can_negotiate:
        broken.add("canNegotiate")
    if protocol == "sealed_bid" and not mandate.can_use_sealed_bid:
        broken.add("canUseSealedBid")
    if protocol == "instant_match" and not mandate.can_accept_instant_match:
        broken.add("canAcceptInstantMatch")
    if role == "seller":
        if mandate.min_acceptable_price is None or action.price < mandate.min_acceptable_price:
            broken.add("minAcceptablePrice")
    else:
        if mandate.max_spend is None or action.price > mandate.max_spend:
            broken.add("maxSpend")
        if mandate.required_condition is not None and (
            action.condition is None or RANK[action.condition] < RANK[mandate.required_condition]
        ):
            broken.add("requiredCondition")
        for needed in mandate.required_accessories:
            if action.accessories is None or needed not in action.accessories:
                broken.add("requiredAccessories")
    return broken


@settings(max_examples=2000, deadline=None)
@given(st.data())
def test_security_model_check_is_none_iff_within_every_constraint(data: st.DataObject) -> None:
    mandate = data.draw(mandates())
    role, action = data.draw(role_actions(mandate))
    broken = plainly_broken(mandate, role, action)
    violation = check(mandate, role, action)
    if broken:
        assert violation is not None, f"let through: {broken}"
        assert violation.constraint in broken
        with pytest.raises(MandateViolation) as caught:
            enforce(mandate, role, action)
        assert caught.value.constraint == violation.constraint
    else:
        assert violation is None, violation
        enforce(mandate, role, action)


@settings(max_examples=1000, deadline=None)
@given(mandates(), st.data())
def test_security_model_no_action_over_the_limit_passes(mandate: Mandate, data: st.DataObject) -> None:
    """Made-to-violate actions: all else in order, the price is past the role's limit."""
    role, action = data.draw(role_actions(mandate))
    limit = mandate.min_acceptable_price if role == "seller" else mandate.max_spend
    if limit is None:
        price = data.draw(cents)
    elif role == "seller":
        if limit == 1:
            return
        price = data.draw(st.integers(min_value=1, max_value=limit - 1))
    else:
        price = data.draw(st.integers(min_value=limit + 1, max_value=limit + 100_000))
    action = Action(action.kind, action.protocol, mandate.agent_id, price, mandate.currency,
                    mandate.issued_at, "new", ACCESSORY_NAMES)
    violation = check(mandate, role, action)
    assert violation is not None
    assert plainly_broken(mandate, role, action) >= {violation.constraint}
    if role == "seller":
        assert "minAcceptablePrice" in plainly_broken(mandate, role, action)
    else:
        assert "maxSpend" in plainly_broken(mandate, role, action)


@settings(max_examples=500, deadline=None)
@given(mandates())
def test_security_model_a_compliant_action_passes(mandate: Mandate) -> None:
    """The converse: an action built to respect everything is never refused (no over-blocking)."""
    if mandate.deal_must_close_by is not None and mandate.deal_must_close_by < mandate.issued_at:
        return  # nothing can ever be on time
    mandate = Mandate(**{**mandate.__dict__, "can_negotiate": True})
    if mandate.max_spend is not None:
        action = Action("offer", "natural_language", mandate.agent_id, mandate.max_spend, mandate.currency,
                        mandate.issued_at, mandate.required_condition or "poor", mandate.required_accessories)
        assert check(mandate, "buyer", action) is None
    if mandate.min_acceptable_price is not None:
        action = Action("offer", "natural_language", mandate.agent_id, mandate.min_acceptable_price,
                        mandate.currency, mandate.issued_at)
        assert check(mandate, "seller", action) is None


# -- issue 29: money, not a number ----------------------------------------------------------------------


def _with_constraints(**constraints: object) -> dict[str, object]:
    return {**SPEC_MANDATE, "constraints": {**SPEC_MANDATE["constraints"], **constraints}}  # type: ignore[dict-item]


def test_max_spend_bounds_the_total_with_quantity_and_shipping() -> None:
    """maxSpend 200 EUR: one unit at 190 + 10 shipping is exactly at it; 190 + 10.01 and three
    units at 66.67 are over it."""
    mandate = parse_mandate(SPEC_MANDATE)
    at = dict(condition="good", accessories=("charger",))
    assert check(mandate, "buyer", m.offer("buyer_switch_001", 19000, "EUR", DURING, shipping=1000, **at)) is None
    over = check(mandate, "buyer", m.offer("buyer_switch_001", 19000, "EUR", DURING, shipping=1001, **at))
    assert over is not None and over.constraint == "maxSpend"
    many = check(mandate, "buyer", m.order("buyer_switch_001", 6667, "EUR", DURING, quantity=3))  # 200.01
    assert many is not None and many.constraint == "maxSpend"


def test_a_budget_counts_what_is_already_spent() -> None:
    mandate = parse_mandate(_with_constraints(budget={"type": "payment.budget", "max": 500, "currency": "EUR"}))
    assert mandate.budget == 50000
    action = m.offer("buyer_switch_001", 20000, "EUR", DURING, condition="good", accessories=("charger",))
    assert check(mandate, "buyer", action, spent=30000) is None
    violation = check(mandate, "buyer", action, spent=30001)
    assert violation is not None and violation.constraint == "budget"


def test_quantity_on_hand_counts_units_already_sold() -> None:
    mandate = seller_mandate(quantity_on_hand=3)
    confirm = m.confirm("seller_switch_001", 15000, "EUR", DURING, protocol="double_auction", quantity=2)
    assert check(mandate, "seller", confirm, spent=1) is None
    violation = check(mandate, "seller", confirm, spent=2)
    assert violation is not None and violation.constraint == "quantityOnHand"
    assert check(mandate, "seller", m.listing("seller_switch_001", 15000, "EUR", DURING), spent=3) is None  # lists


@pytest.mark.parametrize("budget, words", [
    ({"max": 500, "currency": "USD"}, "budget.currency"),
    ({"max": 0, "currency": "EUR"}, "budget.max"),
    ({"currency": "EUR"}, "budget.max"),
    ({"max": 500, "currency": "EUR", "type": "payment.amount_range"}, "budget.type"),
    ({"max": 500, "currency": "EUR", "period": "month"}, "budget.period"),
    (500, "budget"),
])
def test_a_malformed_budget_is_refused_by_name(budget: object, words: str) -> None:
    with pytest.raises(InvalidInput, match=words.replace(".", r"\.")):
        parse_mandate(_with_constraints(budget=budget))


@pytest.mark.parametrize("on_hand", [0, -1, 1.5, True, "3", 10**7])
def test_quantity_on_hand_is_a_whole_positive_number(on_hand: object) -> None:
    with pytest.raises(InvalidInput, match="quantityOnHand"):
        parse_mandate(_with_constraints(quantityOnHand=on_hand))
