"""The market's built-in agents (spec 003): a seller and a buyer deciding from structured facts only.

Each agent holds its owner's parsed :class:`~haggler.protocols.market.mandates.Mandate` and
decides what spec 003 asks of it — which protocol to use, its sealed bid, its offers, whether to
take an instant match, its double-auction order, whether to confirm a deal. Pure: no HTTP, no
I/O, no clock (the time of an action is passed in), so the served market, the lab and the tests
drive the same code.

How spec 003's Security Model is built in:

* **Structured parsing, schema validation.** An agent's inputs are :class:`ListingFacts` (read by
  :meth:`ListingFacts.from_listing` from a listing's whitelisted fields), :class:`Interest` (what
  its owner wants), prices in a :class:`~haggler.agents.decider.DeciderView` (read from offer
  messages by :func:`read_offer`) and amounts in cents. None of these types has a field that can
  hold text — no description, message, model name or price justification — so no text can reach
  a decision: there is nowhere to put it.
* **Field isolation.** Each field is checked on its own (slugs against the slug pattern, the
  condition against the enum, amounts as exact cents) and is only ever compared, never read as
  words.
* **Constraint enforcement.** Every action an agent proposes is built as a
  :class:`~haggler.protocols.market.mandates.Action` and returned only when
  :func:`~haggler.protocols.market.mandates.check` finds it within the mandate; otherwise the
  method returns None (a negotiator: REJECT). The framework enforces the mandate again when the
  action arrives; the agent never relies on that.

Offers (the natural-language protocol, structured) come from the lab's strategies
(:mod:`haggler.agents.strategies`) behind :class:`MarketNegotiator`: the agent's own limit replaces
whatever reservation the caller's view carries, and :func:`~haggler.agents.decider.guard` clamps
every offer to it before the mandate is checked.

Limits: a seller's floor is ``max(minAcceptablePrice, its own reservation)``; a buyer's limit is
``min(maxSpend, its own valuation)``. Its sealed bid and its double-auction order state that
limit truthfully: the sealed bid is built to be "truth-revealing", and in a call auction with many
traders one order barely moves the uniform price, so shading it mostly loses trades.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, ClassVar

from haggler.agents.decider import ACCEPT, BUYER, REJECT, SELLER, Decider, DeciderView, Decision, guard
from haggler.agents.strategies import STRATEGIES
from haggler.engine import Terms
from haggler.errors import InvalidInput
from haggler.money import is_exact_cents, positive_cents
from haggler.protocols.market import mandates
from haggler.protocols.market.mandates import CONDITIONS, PROTOCOL_PERMISSION, Mandate
from haggler.protocols.market.settlement import StalePrice, instant_match_price

__all__ = [
    "DOUBLE_AUCTION", "INSTANT_MATCH", "INSTANT_MATCH_SHARE", "MANY_LISTINGS", "NATURAL_LANGUAGE", "SEALED_BID",
    "Interest", "ListingFacts", "MarketBuyer", "MarketNegotiator", "MarketSeller", "read_offer",
]

NATURAL_LANGUAGE, SEALED_BID, INSTANT_MATCH, DOUBLE_AUCTION = mandates.PROTOCOLS
#: "Buyer's budget >> listing price" (spec 003, Protocol 3: Use when): the buyer proposes an
#: instant match when the ask is at most this share of its limit. Below it, what haggling could
#: still save is small next to the rounds it costs.
INSTANT_MATCH_SHARE = 0.8
#: "High liquidity (many listings for same item)" (Protocol 4: Use when): the buyer goes to the
#: item's double auction when at least this many other listings of the same item are live.
MANY_LISTINGS = 4
#: A seller's alternatives when it cannot take the protocol a buyer proposed, in its order of
#: preference: the sealed bid settles in two messages at a fair midpoint; offers discover a price;
#: an instant match only ever closes at the ask.
_SELLER_ALTERNATIVES = (SEALED_BID, NATURAL_LANGUAGE, INSTANT_MATCH)
#: The protocols two parties agree on in a protocol agreement (the double auction is a book, not
#: a conversation: an agent joins it by placing an order).
BILATERAL = (NATURAL_LANGUAGE, SEALED_BID, INSTANT_MATCH)

_SLUG = re.compile(r"[a-z0-9][a-z0-9_]{0,63}")
_CURRENCY = re.compile(r"[A-Z]{3}")
_MAX_ACCESSORIES = mandates.MAX_ACCESSORIES
_NO_EXTRAS: Mapping[str, int] = MappingProxyType({})


def _slug(value: object, field: str) -> str:
    if not isinstance(value, str) or not _SLUG.fullmatch(value):
        raise InvalidInput(f"{field} must be a slug: lowercase letters, digits and underscores, at most 64")
    return value


def _cents(value: object, field: str) -> int:
    """A positive wire amount (major units) as exact cents; a fraction of a cent is refused."""
    try:
        cents = positive_cents(value)
    except ValueError as exc:
        raise InvalidInput(f"{field} {exc}") from exc
    if not is_exact_cents(value, cents):
        raise InvalidInput(f"{field} must be a whole number of cents")
    return cents


def _object(value: object, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(f"{field} must be an object")
    return value


@dataclass(frozen=True, slots=True)
class Interest:
    """What a buyer's owner wants (spec 003, Wanted Ad: ``interests``): the item's taxonomy, compared
    for equality with a listing's. Condition and accessories are the mandate's to require."""

    category: str
    subcategory: str
    name: str

    def __post_init__(self) -> None:
        for field in ("category", "subcategory", "name"):
            _slug(getattr(self, field), field)

    def matches(self, facts: ListingFacts) -> bool:
        return (self.category, self.subcategory, self.name) == (facts.category, facts.subcategory, facts.name)


@dataclass(frozen=True, slots=True)
class ListingFacts:
    """The whitelisted, structured fields of a listing — all an agent is ever shown of one.

    There is deliberately no field for the description, the model, the price justification or
    the logistics text (spec 003, Security Model: "Agent never sees raw ``description``", "Only
    whitelisted fields passed to agent"); slots forbid adding one, and every field is checked
    on construction, so a ``ListingFacts`` cannot carry free text in disguise either."""

    category: str
    subcategory: str
    name: str
    #: One of ``mandates.CONDITIONS``.
    condition: str
    accessories: tuple[str, ...]
    ask_cents: int
    currency: str
    #: False: the price is fixed (the listing only takes an instant match).
    negotiable: bool

    def __post_init__(self) -> None:
        for field in ("category", "subcategory", "name"):
            _slug(getattr(self, field), field)
        if self.condition not in CONDITIONS:
            raise InvalidInput(f"condition must be one of {', '.join(CONDITIONS)}")
        if not isinstance(self.accessories, tuple) or len(self.accessories) > _MAX_ACCESSORIES:
            raise InvalidInput(f"accessories must be a tuple of at most {_MAX_ACCESSORIES} slugs")
        for accessory in self.accessories:
            _slug(accessory, "accessories[]")
        if type(self.ask_cents) is not int or self.ask_cents <= 0:
            raise InvalidInput("ask_cents must be a positive whole number of cents")
        if not isinstance(self.currency, str) or not _CURRENCY.fullmatch(self.currency):
            raise InvalidInput("currency must be a three-letter upper-case code")
        if type(self.negotiable) is not bool:
            raise InvalidInput("negotiable must be true or false")

    @property
    def item_key(self) -> str:
        """The item's book in the double auction: ``category.subcategory.name``."""
        return f"{self.category}.{self.subcategory}.{self.name}"

    @classmethod
    def from_listing(cls, listing: Mapping[str, Any]) -> ListingFacts:
        """Read a listing message (spec 003, message 1; the market validated it against its schema)
        field by field: ``item.category/subcategory/name/condition/accessories`` and
        ``pricing.askPrice/currency/negotiable``. Nothing else is looked at."""
        item = _object(listing.get("item"), "item")
        pricing = _object(listing.get("pricing"), "pricing")
        accessories = item.get("accessories", [])
        if not isinstance(accessories, (list, tuple)):
            raise InvalidInput("item.accessories must be a list")
        return cls(
            category=item.get("category"),  # type: ignore[arg-type]  # checked in __post_init__
            subcategory=item.get("subcategory"),  # type: ignore[arg-type]
            name=item.get("name"),  # type: ignore[arg-type]
            condition=item.get("condition"),  # type: ignore[arg-type]
            accessories=tuple(accessories),
            ask_cents=_cents(pricing.get("askPrice"), "pricing.askPrice"),
            currency=pricing.get("currency"),  # type: ignore[arg-type]
            negotiable=pricing.get("negotiable"),  # type: ignore[arg-type]
        )


def read_offer(message: Mapping[str, Any], currency: str) -> Decision | None:
    """An offer message (spec 003, message 7) as the decision it carries, from its structured
    fields only: ``action`` (offer by default, accept, reject) and ``offerPrice``. Its ``message``
    is never read. None for an offer that states its price only in words: the market's language
    layer must turn that into a price first, never an agent."""
    action = message.get("action", "offer")
    if action == "accept":
        return ACCEPT
    if action == "reject":
        return REJECT
    if action != "offer":
        raise InvalidInput("action must be offer, accept or reject")
    if message.get("offerPrice") is None:
        return None
    return Terms(_cents(message["offerPrice"], "offerPrice"), currency)


def _strategy_factory(strategy: str | Callable[[], Decider]) -> Callable[[], Decider]:
    if isinstance(strategy, str):
        try:
            return STRATEGIES[strategy]
        except KeyError:
            raise InvalidInput(f"unknown strategy {strategy!r}; known: {', '.join(sorted(STRATEGIES))}") from None
    return strategy


class MarketAgent:
    """What both built-in agents share: a mandate, a limit, and one way to turn a decision into
    an action the mandate allows (or nothing)."""

    role: ClassVar[str]

    def __init__(self, mandate: Mandate, limit_cents: int, strategy: str | Callable[[], Decider]) -> None:
        self.mandate = mandate
        #: The seller's floor or the buyer's limit, in cents: what it bids and never crosses.
        self.limit_cents = limit_cents
        self._strategy = _strategy_factory(strategy)

    def _within_limit(self, price_cents: int) -> bool:
        """Whether a price is on this agent's side of its limit: what its own reservation or
        valuation adds to the mandate, which knows only the owner's bound."""
        return price_cents >= self.limit_cents if self.role == SELLER else price_cents <= self.limit_cents

    def _deals_in(self, facts: ListingFacts) -> bool:
        """Whether this agent may act on the listing at all (overridden by the buyer)."""
        return True

    def _may(self, price_cents: int, facts: ListingFacts) -> bool:
        """Whether this agent may act at ``price_cents`` on ``facts`` before the mandate is asked:
        a positive price on its side of its limit, on a listing it deals in. Every action passes
        it, a model's price as much as the limit."""
        return 0 < price_cents and self._within_limit(price_cents) and self._deals_in(facts)

    def _act(self, build: Callable[..., mandates.Action], price_cents: int, facts: ListingFacts, at: datetime,
             **protocol: str) -> mandates.Action | None:
        """The action ``build`` makes at ``price_cents``, when the mandate allows it; else None."""
        if not self._may(price_cents, facts):
            return None
        return self._allowed(build(self.mandate.agent_id, price_cents, facts.currency, at, condition=facts.condition,
                                   accessories=facts.accessories, **protocol))

    def _allowed(self, action: mandates.Action) -> mandates.Action | None:
        """``action`` when the mandate allows it (:func:`~haggler.protocols.market.mandates.check`)."""
        return action if mandates.check(self.mandate, self.role, action) is None else None

    def sealed_bid(self, facts: ListingFacts, *, at: datetime,
                   price_cents: int | None = None) -> mandates.Action | None:
        """The sealed bid (spec 003, Protocol 2): the true limit — a buyer's ``maxPrice``, a
        seller's ``minPrice``. None when the mandate does not allow one, or the listing's price
        is fixed (it is not up for discovery). ``price_cents``: another bid than the limit (a
        model's proposal), held to the same checks: never past the limit."""
        price = self.limit_cents if price_cents is None else price_cents
        return self._act(mandates.sealed_bid, price, facts, at) if facts.negotiable else None

    def auction_order(self, facts: ListingFacts, *, at: datetime,
                      price_cents: int | None = None) -> mandates.Action | None:
        """The double-auction order (Protocol 4) for the listing's item: a buyer's bid or a seller's
        ask, one unit at its limit (see the module docstring for why truthful). None when the
        mandate does not allow one, or the listing's price is fixed. ``price_cents``: another
        price than the limit (a model's proposal), held to the same checks: never past the limit.

        A book trades the item, not a listing, so the order states no condition or accessories
        (as the market checks it): a buyer whose mandate requires either never bids there."""
        price = self.limit_cents if price_cents is None else price_cents
        if not (facts.negotiable and self._may(price, facts)):
            return None
        return self._allowed(mandates.order(self.mandate.agent_id, price, facts.currency, at))

    def offer(self, facts: ListingFacts, price_cents: int, *, at: datetime) -> mandates.Action | None:
        """An offer (spec 003, message 7) at ``price_cents`` in a natural-language negotiation over
        ``facts``, or None: never one past its limit or outside its mandate."""
        return self._act(mandates.offer, price_cents, facts, at)

    def confirm(self, facts: ListingFacts, price_cents: int, protocol: str, *,
                at: datetime) -> mandates.Action | None:
        """The agent's signature on a deal (spec 003, message 8) at ``price_cents`` reached through
        ``protocol``, or None: it never confirms a deal its mandate does not allow."""
        return self._act(mandates.confirm, price_cents, facts, at, protocol=protocol)

    def negotiator(self, facts: ListingFacts, *, clock: Callable[[], datetime]) -> MarketNegotiator:
        """A fresh :class:`MarketNegotiator` for one natural-language negotiation over ``facts``;
        ``clock`` dates each decision (the mandate's ``issuedAt`` and ``dealMustCloseBy`` bind it)."""
        return MarketNegotiator(self, facts, self._strategy(), clock)


class MarketSeller(MarketAgent):
    """The built-in seller agent. ``reservation_cents``: its own floor, when above its owner's
    ``minAcceptablePrice``; ``strategy``: a name in ``STRATEGIES`` or a factory of deciders (the
    store's merchant by default)."""

    role = SELLER

    def __init__(self, mandate: Mandate, *, reservation_cents: int | None = None,
                 strategy: str | Callable[[], Decider] = "store-merchant") -> None:
        if mandate.min_acceptable_price is None:
            raise InvalidInput("a seller's mandate must set minAcceptablePrice")
        floor = mandate.min_acceptable_price
        if reservation_cents is not None:
            floor = max(floor, reservation_cents)
        super().__init__(mandate, floor, strategy)

    def listing(self, facts: ListingFacts, *, at: datetime) -> mandates.Action | None:
        """The listing action, when it may post the listing: an ask not below its floor (its owner's
        minimum, or its own reservation when higher); else None."""
        if not self._within_limit(facts.ask_cents):
            return None
        return self._allowed(mandates.listing(self.mandate.agent_id, facts.ask_cents, facts.currency, at))

    def _takes(self, protocol: str, facts: ListingFacts) -> bool:
        if protocol not in BILATERAL or not self.mandate.permits(PROTOCOL_PERMISSION[protocol]):
            return False
        return protocol != INSTANT_MATCH or self._within_limit(facts.ask_cents)

    def agree_protocol(self, proposed: str, facts: ListingFacts) -> str | None:
        """The seller's protocol agreement (spec 003, message 4): the buyer's ``proposed`` protocol
        when its mandate permits it, else the first alternative it permits (sealed bid, natural
        language, instant match); a listing that is not negotiable only takes an instant match.
        None: nothing it may use (it declines)."""
        if not facts.negotiable:
            return INSTANT_MATCH if self._takes(INSTANT_MATCH, facts) else None
        for protocol in (proposed, *_SELLER_ALTERNATIVES):
            if self._takes(protocol, facts):
                return protocol
        return None

    def accept_instant_match(self, facts: ListingFacts, accepted_cents: int, *,
                             at: datetime) -> mandates.Action | None:
        """The seller's answer to an instant match of its listing: its confirmation at the price
        the settlement rule gives (:func:`~haggler.protocols.market.settlement.instant_match_price`:
        the live ask), or None — a stale price, or a match its mandate does not allow."""
        try:
            price = instant_match_price(facts.ask_cents, accepted_cents)
        except StalePrice:
            return None
        return self.confirm(facts, price, INSTANT_MATCH, at=at)


class MarketBuyer(MarketAgent):
    """The built-in buyer agent. ``wants``: the item its owner is after; ``valuation_cents``: its
    own limit, when below its owner's ``maxSpend``; ``strategy``: a name in ``STRATEGIES`` or a
    factory of deciders (the default shopper by default)."""

    role = BUYER

    def __init__(self, mandate: Mandate, wants: Interest, *, valuation_cents: int | None = None,
                 strategy: str | Callable[[], Decider] = "default-shopper") -> None:
        if mandate.max_spend is None:
            raise InvalidInput("a buyer's mandate must set maxSpend")
        limit = mandate.max_spend
        if valuation_cents is not None:
            limit = min(limit, valuation_cents)
        super().__init__(mandate, limit, strategy)
        self.wants = wants

    def _bargains(self) -> bool:
        """Whether the mandate lets it get a price below the ask at all."""
        return self.mandate.can_negotiate or self.mandate.can_use_sealed_bid

    def fits(self, facts: ListingFacts) -> bool:
        """Whether the listing is what the owner wants and may buy: the item (taxonomy), its
        currency, the required condition and accessories, and the budget — the ask within the
        limit, or a negotiable listing and a mandate that lets it bargain the price down."""
        mandate = self.mandate
        required = mandate.required_condition
        return (
            self.wants.matches(facts)
            and facts.currency == mandate.currency
            and (required is None or CONDITIONS.index(facts.condition) <= CONDITIONS.index(required))
            and all(name in facts.accessories for name in mandate.required_accessories)
            and (facts.ask_cents <= self.limit_cents or (facts.negotiable and self._bargains()))
        )

    def _deals_in(self, facts: ListingFacts) -> bool:
        return self.fits(facts)

    def choose_protocol(self, facts: ListingFacts, *, competing_listings: int = 0,
                        urgent: bool = False) -> str | None:
        """The protocol to propose for a listing, by spec 003's "Use when" rules, or None to pass:

        1. a fixed-price listing: an instant match when the ask is within the limit, else none;
        2. ``instant_match`` when the budget is well above the ask (ask <= ``INSTANT_MATCH_SHARE``
           of the limit);
        3. ``double_auction`` when the item is liquid (``competing_listings`` >= ``MANY_LISTINGS``);
        4. ``sealed_bid`` for a commodity (other listings of the item exist) or an ``urgent`` deal;
        5. ``natural_language`` for the rest;
        6. failing those, whatever the mandate permits: the sealed bid, then an instant match
           within the limit.

        Each rule applies only when the mandate grants its permission.
        """
        if not self.fits(facts):
            return None
        permits = self.mandate.permits
        within = facts.ask_cents <= self.limit_cents
        instant = permits("canAcceptInstantMatch") and within
        if not facts.negotiable:
            return INSTANT_MATCH if instant else None
        if instant and facts.ask_cents <= INSTANT_MATCH_SHARE * self.limit_cents:
            return INSTANT_MATCH
        if competing_listings >= MANY_LISTINGS and permits(PROTOCOL_PERMISSION[DOUBLE_AUCTION]):
            return DOUBLE_AUCTION
        sealed = permits("canUseSealedBid")
        if sealed and (urgent or competing_listings > 0):
            return SEALED_BID
        if permits("canNegotiate"):
            return NATURAL_LANGUAGE
        if sealed:
            return SEALED_BID
        return INSTANT_MATCH if instant else None

    def instant_match(self, facts: ListingFacts, *, at: datetime) -> mandates.Action | None:
        """Accept the listing at its ask (spec 003, message 6) — when it is within the limit and
        the mandate allows it; else None."""
        return self._act(mandates.instant_match, facts.ask_cents, facts, at)


class MarketNegotiator:
    """One market agent's offers in one natural-language negotiation (spec 003, Protocol 1, with
    structured offers): a :class:`~haggler.agents.decider.Decider`.

    The caller's view supplies only the clock of the negotiation (round, max rounds) and the
    offers so far; role, reservation, list price and currency are the agent's own (its limit,
    the listing's ask and currency), and there are no extras (a market offer is a price). A
    listing whose price is fixed is not haggled over: the negotiator walks away at once. The
    strategy's decision is guarded at the limit, then checked against the mandate: an offer, or
    an ACCEPT (a confirmation at the counterpart's last price), the mandate forbids becomes a
    REJECT."""

    def __init__(self, agent: MarketAgent, facts: ListingFacts, strategy: Decider,
                 clock: Callable[[], datetime]) -> None:
        roles = getattr(strategy, "roles", (SELLER, BUYER))
        if agent.role not in roles:
            raise InvalidInput(f"strategy {strategy.name!r} cannot play the {agent.role}")
        self.agent = agent
        self.facts = facts
        self.strategy = strategy
        self.clock = clock
        self.name = strategy.name
        #: Whether it has made its final offer (at its limit): a walk-away after that stands.
        self.final_offered = False

    def decide(self, view: DeciderView) -> Decision:
        agent, facts = self.agent, self.facts
        if not facts.negotiable:
            return REJECT  # a fixed price is taken by an instant match, never haggled over
        own = DeciderView(agent.role, agent.limit_cents, facts.ask_cents, view.round, view.max_rounds,
                          view.my_offers, view.their_offers, _NO_EXTRAS, facts.currency)
        decision = guard(self.strategy.decide(own), own)
        if decision is REJECT:
            decision = self._final_offer(own)
        if decision is ACCEPT:
            action = agent.confirm(facts, own.their_offers[-1].price_cents, NATURAL_LANGUAGE, at=self.clock())
        elif isinstance(decision, Terms):
            action = agent.offer(facts, decision.price_cents, at=self.clock())
        else:
            return REJECT
        return decision if action is not None else REJECT

    def _final_offer(self, view: DeciderView) -> Decision:
        """What a strategy's walk-away becomes: once, an offer at its limit, when the counterpart
        has offered and its last offer is past that limit.

        A store's shopper may walk away to draw a better price, and the store answers; on the
        market a reject ends the negotiation for both, so walking gains nothing while the
        counterpart still has a move. A strategy paced for a longer chat than the market's turn
        cap would otherwise walk from an overlap it never reached (floor 150, cap 170: the buyer
        at 169 walked while the seller, at 183, would take 170 at its last turn)."""
        if self.final_offered or not view.their_offers:
            return REJECT
        limit, theirs = self.agent.limit_cents, view.their_offers[-1].price_cents
        if (theirs <= limit) if view.role == BUYER else (theirs >= limit):
            return REJECT  # their offer is within its limit: the strategy chose not to take it
        self.final_offered = True
        return Terms(limit, self.facts.currency)
