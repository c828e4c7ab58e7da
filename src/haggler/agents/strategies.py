"""Negotiation strategies behind the one :class:`~haggler.agents.decider.Decider` interface.

Classic single-issue strategies from the literature (Faratin, Sierra & Jennings 1998; the
NegMAS/Genius families), and adapters that put haggler's own store merchant and shopper agents
behind the same interface:

* :class:`TimeDependent` — concedes from its best price to its reservation on a time curve:
  ``target(t) = best + (reservation - best) * t ** (1 / e)``, so ``e < 1`` is Boulware (firm
  until late), ``e = 1`` linear, ``e > 1`` a conceder (the NegMAS/Faratin parameterisation).
* :class:`RelativeTitForTat` / :class:`AbsoluteTitForTat` — mirror the counterpart's last
  concession, as a ratio or in cents.
* :class:`Firm` — a very firm clock that never concedes past the counterpart's best offer and
  takes any acceptable offer in the last round.
* :class:`Hardliner` — never moves from its opening.
* :class:`NaiveAcceptFirst` — takes the first acceptable offer; otherwise offers its reservation.
* :class:`StoreMerchant` / :class:`DefaultShopper` — the store's merchant agent and the
  shopper agent, driven through views and decisions.

Every strategy accepts when the counterpart's last offer is at least as good for it as what it
would offer next (the AC-next rule), and none proposes past its reservation — and
:func:`~haggler.agents.decider.guard` makes sure of that anyway.

Best prices: the seller's is the list price; the buyer's opening anchor is half the list price,
or 80% of its own reservation when that is lower (an anchor above one's own ceiling leaves no
room to concede).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from functools import lru_cache
from math import trunc
from typing import TYPE_CHECKING

from haggler.agents.decider import (
    ACCEPT,
    BUYER,
    REJECT,
    SELLER,
    Decider,
    DeciderView,
    Decision,
    acceptable,
    guard,
    net_cents,
)
from haggler.engine import Action, Negotiation, Terms

if TYPE_CHECKING:  # imported where used: the lab's strategies load without the store's agents
    from haggler.agents.merchant import MerchantAgent, MerchantHistory
    from haggler.agents.shopper import ShopperAgent, ShopperTurn

__all__ = [
    "STRATEGIES", "AbsoluteTitForTat", "DefaultShopper", "Firm", "Hardliner", "NaiveAcceptFirst",
    "RelativeTitForTat", "StoreMerchant", "TimeDependent", "best_price",
]

#: The buyer's opening anchor: this share of list price, or BUYER_ANCHOR_OF_RESERVATION of its
#: reservation when that is lower.
BUYER_ANCHOR_OF_LIST = 0.5
BUYER_ANCHOR_OF_RESERVATION = 0.8

#: Builds a Terms without its Python-level __new__ (see the engine's Terms): the hot path.
_new_tuple = tuple.__new__


def best_price(view: DeciderView) -> int:
    """The best price this side would ever propose: its opening."""
    reservation = view.reservation_cents
    if view.role == SELLER:
        return max(view.list_price_cents, reservation)
    anchor = int(min(view.list_price_cents * BUYER_ANCHOR_OF_LIST, reservation * BUYER_ANCHOR_OF_RESERVATION))
    return max(1, min(anchor, reservation))


def _at_least_as_good(view: DeciderView, terms: Terms, net: int) -> bool:
    """Whether the counterpart's ``terms`` are at least as good for this side as offering
    terms of net ``net`` (a bare price is its own net) — and acceptable at all."""
    if not acceptable(view, terms):
        return False
    if view.role == SELLER:
        return net_cents(view, terms) >= net
    return net_cents(view, terms) <= net


def _time_factor(inverse: float, round_: int, max_rounds: int) -> float:
    """``t ** (1/e)`` at ``round_`` of ``max_rounds`` (``inverse`` is ``1/e``): 0 at the first
    round, 1 from the last."""
    last_round = max_rounds - 1
    t = 1.0 if last_round <= 0 or round_ >= last_round else round_ / last_round
    return t ** inverse


@lru_cache(maxsize=256)
def _time_curve(inverse: float, max_rounds: int) -> tuple[float, ...]:
    """``t ** (1/e)`` for each round of ``max_rounds`` (none when that is not a whole number).
    The same for every decider with this exponent, so it is cached here rather than on the
    decider: a tournament makes a fresh decider for every negotiation."""
    try:
        return tuple(_time_factor(inverse, r, max_rounds) for r in range(max_rounds))
    except TypeError:
        return ()


class _PriceStrategy:
    """A strategy that plans a price each turn and accepts anything at least as good."""

    name = "price-strategy"
    #: The sides this strategy can play.
    roles = (SELLER, BUYER)

    def next_price(self, view: DeciderView) -> int:  # pragma: no cover - abstract
        raise NotImplementedError

    def decide(self, view: DeciderView) -> Decision:
        price = self.next_price(view)
        reservation = view.reservation_cents
        best = best_price(view)
        if view.role == SELLER:
            price = min(max(price, reservation), best)
        else:
            price = max(min(price, reservation), min(best, reservation))
        theirs = view.their_offers
        if theirs and _at_least_as_good(view, theirs[-1], price):
            return ACCEPT
        return Terms(price, view.currency)

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class TimeDependent(_PriceStrategy):
    """Concedes on a clock: ``e < 1`` Boulware, ``e = 1`` linear, ``e > 1`` conceder.

    At relative time ``t`` (0 in the first round, 1 in the last) it offers
    ``best + (reservation - best) * t ** (1/e)``, rounded towards its own side; so it offers
    its best price first and its reservation in the last round.
    """

    def __init__(self, e: float = 1.0, name: str | None = None) -> None:
        if not e > 0:
            raise ValueError("the concession exponent e must be positive")
        self.e = e
        self._inverse = 1.0 / e
        self.name = name or f"time-dependent(e={e:g})"
        # Per-negotiation constants, remembered from the last view (see decide) as one immutable
        # tuple, so that a decider shared between threads never reads half of it: (reservation,
        # list price, side, rounds, best price, concession span, t ** (1/e) for each round, the
        # price for each round).
        self._state: tuple[int, int, str | None, int, int, int, tuple[float, ...], tuple[int, ...]] = (
            0, 0, None, 0, 0, 0, (), ())

    def next_price(self, view: DeciderView) -> int:
        best = best_price(view)
        shift = int(abs(best - view.reservation_cents) * view.time ** self._inverse)
        return best - shift if view.role == SELLER else best + shift

    def _refresh(self, role: str, reservation: int, list_price: int,
                 max_rounds: int) -> tuple[int, int, tuple[int, ...]]:
        """The best price, the concession span and the price of each round for this side, these
        prices and these rounds; the time curve is kept from the last view when the rounds are
        the same."""
        if role == SELLER:
            best = list_price if list_price > reservation else reservation
            span = best - reservation
        else:
            best = int(min(list_price * BUYER_ANCHOR_OF_LIST, reservation * BUYER_ANCHOR_OF_RESERVATION))
            if best > reservation:
                best = reservation
            if best < 1:
                best = 1
            span = reservation - best
        _, _, _, rounds, _, _, factors, _ = self._state
        if max_rounds != rounds:
            factors = _time_curve(self._inverse, max_rounds)
        prices = self._prices(role, best, span, factors)
        self._state = (reservation, list_price, role, max_rounds, best, span, factors, prices)
        return best, span, prices

    @staticmethod
    def _prices(role: str, best: int, span: int, factors: tuple[float, ...]) -> tuple[int, ...]:
        """The price at each of these points of the time curve: the best price, conceded by the
        span times the factor, rounded towards this side (the one place the formula lives).

        ``trunc`` of a float is ``int`` of it, without the type call (a third of the cost), and
        the span is made a float once, as ``int * float`` makes it each time."""
        span_f = float(span)
        if role == SELLER:
            return tuple([best - trunc(span_f * factor) for factor in factors])
        return tuple([best + trunc(span_f * factor) for factor in factors])

    def price_plan(self, role: str, reservation_cents: int, list_price_cents: int,
                   max_rounds: int) -> tuple[int, ...] | None:
        """The price :meth:`decide` offers in each round (see
        :class:`~haggler.agents.decider.PricePlanner`): its AC-next test against a bare price is
        the plan's contract. None for a subclass that decides otherwise (:class:`Firm` reads the
        counterpart's offers), or rounds that are not a whole number."""
        if type(self).decide is not TimeDependent.decide:
            return None
        prices = self._refresh(role, reservation_cents, list_price_cents, max_rounds)[2]
        return prices if len(prices) == max_rounds else None

    def decide(self, view: DeciderView) -> Decision:
        # The hot path of the lab when it does not use price_plan: the per-negotiation constants
        # (best price, span, the price of each round) are computed when a view shows other
        # prices or rounds than the one before, so a turn is a lookup and the AC-next test; the
        # arithmetic is the same as next_price's. No clamping is needed: the target lies between
        # the best price and the reservation by construction.
        role, reservation, list_price, round_, max_rounds, _, theirs, _, currency = view
        state_reservation, state_list_price, state_role, rounds, best, span, _, prices = self._state
        if (reservation != state_reservation or list_price != state_list_price or role != state_role
                or max_rounds != rounds):
            best, span, prices = self._refresh(role, reservation, list_price, max_rounds)
        try:
            if round_ < 0:  # a negative index would read the prices from the end
                raise IndexError(round_)
            price = prices[round_]
        except (IndexError, TypeError):  # outside the rounds, or not a whole number: the curve itself
            price = self._prices(role, best, span, (_time_factor(self._inverse, round_, max_rounds),))[0]
        if theirs:
            last = theirs[-1]
            if last.extras or last.currency != currency:
                if _at_least_as_good(view, last, price):
                    return ACCEPT
            elif last.price_cents >= price if role == SELLER else last.price_cents <= price:
                return ACCEPT
        return _new_tuple(Terms, (price, currency, ()))

    def __repr__(self) -> str:
        return f"TimeDependent(e={self.e!r})"


class Firm(TimeDependent):
    """A very firm clock that never asks for less than the counterpart has already offered.

    Three rules on top of :class:`TimeDependent` with a small exponent (``e = 0.05``: it gives
    up almost nothing until the last tenth of the negotiation):

    * its price never concedes past the best offer the counterpart has made so far (the best
      net for this side): an agent that already offered that much will take it again, so any
      concession beyond it only gives value away;
    * it accepts the counterpart's offer when it is at least as good as that price (AC-next);
    * in the last round it accepts any offer at or past its reservation: there is no later
      turn, and an agreement at the reservation is worth no less than walking away.

    Against the ANAC field (``benchmarks/anac.py``) this is what separates it from a plain
    Boulware clock: conceders and adaptive agents that read firmness as strength give way, and
    the counterpart's own best offer is the floor of the endgame rather than the reservation.
    """

    def __init__(self, e: float = 0.05, name: str = "firm") -> None:
        super().__init__(e, name=name)

    def next_price(self, view: DeciderView) -> int:
        price = super().next_price(view)
        theirs = view.their_offers
        if not theirs:
            return price
        if view.role == SELLER:
            return max(price, max(net_cents(view, terms) for terms in theirs))
        return min(price, min(net_cents(view, terms) for terms in theirs))

    def decide(self, view: DeciderView) -> Decision:
        decision = _PriceStrategy.decide(self, view)
        theirs = view.their_offers
        if (decision is not ACCEPT and theirs and view.round >= view.max_rounds - 1
                and _at_least_as_good(view, theirs[-1], view.reservation_cents)):
            return ACCEPT
        return decision

    def __repr__(self) -> str:
        return f"Firm(e={self.e!r})"


class _TitForTat(_PriceStrategy):
    """Opens at its best price and holds until the counterpart has moved; then :meth:`mirror`
    turns the counterpart's last move (its net before and after) into this side's next price."""

    def next_price(self, view: DeciderView) -> int:
        mine = view.my_offers
        if not mine:
            return best_price(view)
        last = net_cents(view, mine[-1])
        theirs = view.their_offers
        if len(theirs) < 2:
            return last
        return self.mirror(view, last, net_cents(view, theirs[-2]), net_cents(view, theirs[-1]))

    def mirror(self, view: DeciderView, mine: int, before: int, after: int) -> int:  # pragma: no cover - abstract
        raise NotImplementedError


class RelativeTitForTat(_TitForTat):
    """Mirrors the counterpart's last concession as a ratio: when its price moved from ``a``
    to ``b``, this side moves from its own last price ``x`` to ``x * a / b`` (Faratin's relative
    tit-for-tat with a window of one). Opens at its best price and holds until the counterpart
    has moved."""

    name = "tit-for-tat-relative"

    def mirror(self, view: DeciderView, mine: int, before: int, after: int) -> int:
        if before <= 0 or after <= 0:
            return mine
        price = mine * before / after
        # Round towards this side's own interest.
        return int(price) + (1 if view.role == SELLER and price != int(price) else 0)


class AbsoluteTitForTat(_TitForTat):
    """Mirrors the counterpart's last concession in cents: when it gave ``d`` cents (or took
    them back), this side gives (or takes back) the same ``d``."""

    name = "tit-for-tat-absolute"

    def mirror(self, view: DeciderView, mine: int, before: int, after: int) -> int:
        # A seller lowers its price by what the buyer raised its own; a buyer raises its price
        # by what the seller lowered its own: the same formula for both sides.
        return mine - (after - before)


class Hardliner(_PriceStrategy):
    """Never concedes: always offers its opening, accepts only offers at least as good."""

    name = "hardliner"

    def next_price(self, view: DeciderView) -> int:
        return best_price(view)


class NaiveAcceptFirst(_PriceStrategy):
    """Accepts the first acceptable offer; until then, offers its reservation."""

    name = "accept-first"

    def next_price(self, view: DeciderView) -> int:
        return view.reservation_cents


# -- adapters of haggler's own agents ------------------------------------------------------------

_LAB_AT = datetime(2000, 1, 1, tzinfo=timezone.utc)


class StoreMerchant:
    """The store's :class:`~haggler.agents.merchant.MerchantAgent` as a seller decider.

    Each turn it builds a catalog product from the view (floor = reservation, list price, one
    lever per extra valued at its cost), extends its negotiation with the offers made since its
    last turn (the offers the merchant said were final as final, so that it closes after its last
    offer as the store does), reads the buyer's last offer as an OFFER intent — with the rounds
    left as the chat's messages left, so that the merchant knows the deadline, and as bound to
    it (the merchant paces its concessions to the last round, not to a chat shopper's
    patience) — and maps the merchant's move back: a counter or last offer is an OFFER, a hold
    re-offers the standing terms (final after a last offer), a graceful close is a REJECT.
    """

    name = "store-merchant"
    roles = (SELLER,)

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._agent: MerchantAgent | None = None
        #: Lever offer text → extra name, and back.
        self._names: dict[str, str] = {}
        self._offer_texts: dict[str, str] = {}
        #: Indices of this negotiation's own offers the merchant said were final.
        self._finals: set[int] = set()
        #: The negotiation so far, as the merchant sees it: each turn extends it (no replay).
        self._negotiation: Negotiation | None = None
        #: The merchant's history of that negotiation, folded turn by turn as the store keeps it
        #: (None: fold it from the turns), and the agent it was folded for.
        self._history: MerchantHistory | None = None
        self._history_agent: MerchantAgent | None = None

    def _agent_for(self, view: DeciderView):
        from haggler.agents.merchant import MerchantAgent
        from haggler.catalog import Lever, Product

        key = (view.reservation_cents, view.list_price_cents, tuple(view.extras.items()), view.currency)
        if key != self._key:
            levers = tuple(Lever(name, cost) for name, cost in view.extras.items())
            product = Product(id="lab", name="Lab item", kind=None, subtitle="", description="", year_made=None,
                              condition=None, list_price_cents=max(view.list_price_cents, view.reservation_cents),
                              currency=view.currency, floor_cents=view.reservation_cents, levers=levers,
                              inventory_note="")
            self._agent = MerchantAgent(product)
            self._names = {lever.offer_text: lever.text for lever in levers}
            self._offer_texts = {v: k for k, v in self._names.items()}
            self._key = key
        return self._agent

    def _terms(self, terms: Terms) -> Terms:
        """Merchant terms (lever offer texts) → lab terms (extra names)."""
        if not terms.extras:
            return terms
        return Terms(terms.price_cents, terms.currency, tuple(self._names.get(e, e) for e in terms.extras))

    def _merchant_terms(self, terms: Terms) -> Terms:
        """Lab terms (extra names) → merchant terms (lever offer texts)."""
        to_merchant = self._offer_texts
        return Terms(terms.price_cents, terms.currency, tuple(to_merchant.get(e, e) for e in terms.extras))

    def decide(self, view: DeciderView) -> Decision:
        from haggler.agents.merchant import MERCHANT, SHOPPER
        from haggler.engine import Rules, Turn
        from haggler.language.intents import Intent, IntentKind

        if view.role != SELLER:
            raise ValueError("the store merchant only sells")
        agent = self._agent_for(view)
        mine, theirs = view.my_offers, view.their_offers
        if not mine:
            # A new negotiation: no offer of ours is final yet, and nothing is applied.
            self._finals.clear()
            self._negotiation = None
        if not theirs:
            return self._terms(mine[-1]) if mine else agent.greet().terms
        negotiation = self._negotiation
        if negotiation is None or len(negotiation.turns) > len(mine) + len(theirs):
            # A new negotiation (or views not continuing this one): start from scratch.
            negotiation = self._negotiation = Negotiation(Rules((MERCHANT, SHOPPER), strict_alternation=False))
            self._history = None
        if self._history_agent is not agent:
            self._history = None
        history = self._history
        merchant_terms = self._merchant_terms
        # The turns alternate, the merchant's first when it opened; apply only those not yet applied.
        merchant_parity = 0 if len(mine) == len(theirs) else 1
        for j in range(len(negotiation.turns), len(mine) + len(theirs)):
            i = j >> 1
            if (j & 1) == merchant_parity:
                turn = Turn(MERCHANT, Action.OFFER, _LAB_AT, terms=merchant_terms(mine[i]), final=i in self._finals)
            else:
                turn = Turn(SHOPPER, Action.OFFER, _LAB_AT, terms=merchant_terms(theirs[i]))
            negotiation.apply(turn)
            if history is not None:
                history = history.after(turn)
        if history is None:  # the fold of every turn: what respond would derive without it
            history = agent.history(negotiation)
        self._history, self._history_agent = history, agent
        last = theirs[-1]
        # The buyer answers this move and every later one, up to the last round: in this round
        # too when the merchant moved first, from the next one when the buyer did.
        buyer_first = len(theirs) > len(mine)
        move = agent.respond(negotiation, Intent(IntentKind.OFFER, amount_cents=last.price_cents),
                             messages_left=view.max_rounds - view.round - buyer_first, history=history,
                             to_the_cap=True)
        standing = self._terms(negotiation.standing.get(MERCHANT, agent.opening_terms()))
        if move.action is Action.ACCEPT:
            return ACCEPT if acceptable(view, last) else standing
        if move.action is Action.REJECT:
            return REJECT
        proposed = self._terms(move.terms) if move.action is Action.OFFER else standing
        if _at_least_as_good(view, last, net_cents(view, proposed)):
            return ACCEPT
        if move.final or (move.action is Action.MESSAGE and len(mine) - 1 in self._finals):
            # A hold after a last offer restates it: still final (the standing offer is our last one).
            self._finals.add(len(mine))
        # The merchant counts each extra's cost against its floor as the scenario does, so the
        # guard finds nothing to clamp; it stays, as for every decider, the framework's last word.
        return guard(proposed, view)


class DefaultShopper:
    """haggler's :class:`~haggler.agents.shopper.ShopperAgent` as a buyer decider.

    Keeps one shopper agent per negotiation (a new one whenever the view shows no offers of its
    own yet): budget = reservation, extras valued from the view, at most ``max_rounds`` turns.
    The seller's offers reach it as merchant readings; a bare-price offer of the shopper is that
    price for the package on the table (the seller's last offer's extras).
    """

    name = "default-shopper"
    roles = (BUYER,)

    def __init__(self, seed: int | None = 0) -> None:
        self.seed = seed
        self._agent: ShopperAgent | None = None

    def decide(self, view: DeciderView) -> Decision:
        from haggler.agents.shopper import ShopperAgent, ShopperGoal
        from haggler.language.merchant_reading import MerchantReading

        if view.role != BUYER:
            raise ValueError("the default shopper only buys")
        theirs = view.their_offers
        last = theirs[-1] if theirs else None
        reading = MerchantReading(price_cents=last.price_cents if last else view.list_price_cents,
                                  extras=last.extras if last else ())
        if not view.my_offers or self._agent is None:
            goal = ShopperGoal(list_price_cents=view.list_price_cents, budget_cents=view.reservation_cents,
                               extra_values=dict(view.extras), currency=view.currency)
            self._agent = ShopperAgent(goal, seed=self.seed, max_turns=max(2, view.max_rounds), to_the_cap=True)
            turn: ShopperTurn | None = self._agent.first_turn(reading)
        else:
            turn = self._agent.next_turn(reading)
        if turn is None or turn.kind == "walk_away":
            return REJECT
        if turn.kind == "accept":
            return ACCEPT if last is not None else REJECT
        if turn.kind == "offer" and turn.price_cents is not None:
            price = turn.price_cents
        else:  # asked a question: alternating offers have no talk, so it stands on its last offer
            price = view.my_offers[-1].price_cents if view.my_offers else best_price(view)
        terms = Terms(price, view.currency, last.extras if last else ())
        if last is not None and _at_least_as_good(view, last, net_cents(view, terms)):
            return ACCEPT
        return guard(terms, view)


#: Factories of the lab's strategies, by name: one fresh decider per negotiation.
STRATEGIES: dict[str, Callable[[], Decider]] = {
    "boulware": lambda: TimeDependent(0.2, name="boulware"),
    "firm": Firm,
    "linear": lambda: TimeDependent(1.0, name="linear"),
    "conceder": lambda: TimeDependent(5.0, name="conceder"),
    "tit-for-tat-relative": RelativeTitForTat,
    "tit-for-tat-absolute": AbsoluteTitForTat,
    "hardliner": Hardliner,
    "accept-first": NaiveAcceptFirst,
    "store-merchant": StoreMerchant,
    "default-shopper": DefaultShopper,
}
