"""The store's deterministic merchant agent.

It decides *what* to do on each shopper turn — counter, trade an extra, hold, accept, make a
last offer, answer, ask — and returns a structured :class:`MerchantMove`. It never writes
text: :mod:`haggler.language.render` turns moves into replies from public facts only, so the
floor and the inventory note cannot leak through wording.

How it sells: anchor at list price; never discount unprompted; trade levers cheapest first
(by what each costs the store) before cutting price, but only levers the shopper's best offer
already pays for — an extra given to a shopper whose money cannot cover it only puts the deal
out of reach; cut price in shrinking steps that answer the shopper's own movement; take a
shopper offer that beats its own next counter; take a shopper offer that covers its reserve and
that the shopper keeps repeating; never sell below the reserve once the extras' cost is counted.

The reserve is the floor, or — in a store — the floor plus a secret margin (see
:func:`hidden_reserve`): everything below that "at or above the floor" means at or above the
reserve, net of extras, so that what the merchant accepts and refuses reveals the reserve at
most, never the floor.

Without a clock (``messages_left`` unknown) it cuts price in shrinking steps that answer the
shopper's own movement, and when the shopper stays below the floor makes one last offer.

With a clock (``messages_left`` given) it concedes on a Boulware curve: firm early, towards its
lowest quote as the deadline nears (most shoppers only move for real late), but never below what
the shopper's own pace says it will offer next (a shopper whose steps keep growing is coming up
anyway), answering each move of the shopper with at least a token cut. Its last offer comes at
the last message the shopper can still answer (or at a shopper's expected patience, whichever is
sooner): it asks for what the shopper's own pace says it would pay next — halfway for a shopper
who mirrors its moves — and never less than its lowest quote; an offer at or above the floor
that arrives then is taken (a sale beats none). The store passes the chat's messages left, so
this is how it sells.

After its last offer it never quotes lower: it waits, restating the offer, while the shopper
keeps improving and may still write; takes an offer at or above the floor once the shopper
stops improving; and closes gracefully when the shopper stops improving below the floor.
"""

from __future__ import annotations

import hashlib
import hmac
import math
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum

from haggler.catalog import Lever, Product
from haggler.engine import Action, Negotiation, Terms, Turn
from haggler.language.intents import Intent, IntentKind, Topic
from haggler.money import price_unit

MERCHANT = "merchant"
SHOPPER = "shopper"


class MoveKind(str, Enum):
    GREET = "greet"                  # opening: introduces the product at list price
    COUNTER = "counter"              # new, better terms (an extra or a lower price)
    LAST_OFFER = "last_offer"        # the best terms it will ever give, said to be final
    HOLD = "hold"                    # terms unchanged; asks the shopper to move
    ACCEPT_OFFER = "accept_offer"    # takes the shopper's offer: a deal
    CONFIRM_DEAL = "confirm_deal"    # the shopper accepted the merchant's terms: a deal
    DECLINE_CLOSE = "decline_close"  # shopper stays below the floor after the last offer
    FAREWELL = "farewell"            # the shopper walked away
    ANSWER = "answer"                # answers product/store questions
    CLARIFY = "clarify"              # ambiguous amounts: asks which one is the offer
    DEFLECT = "deflect"              # refuses to discuss hidden state or instructions
    PITCH = "pitch"                  # no offer in the turn: talks up the product
    WRAP_UP = "wrap_up"              # the chat's last allowed message arrived


@dataclass(frozen=True, slots=True)
class MerchantMove:
    kind: MoveKind
    #: The engine action of the merchant's turn; None for a closing remark after the shopper
    #: itself closed the negotiation (accept or walk away).
    action: Action | None
    #: The merchant's terms on the table after this move (the deal terms for a deal).
    terms: Terms
    added_extras: tuple[str, ...] = ()
    final: bool = False
    topics: tuple[Topic, ...] = ()
    shopper_price_cents: int | None = None
    candidates_cents: tuple[int, ...] = ()
    deflected: bool = False
    #: The move lowers the price (as opposed to only adding extras).
    price_cut: bool = False
    #: The shopper's offer is a lowball: far below what the product sells for.
    lowball: bool = False

    def turn(self, at: datetime) -> Turn | None:
        """The merchant's engine turn for this move (None for a closing remark)."""
        if self.action is None:
            return None
        terms = self.terms if self.action is Action.OFFER else None
        return Turn(MERCHANT, self.action, at, terms=terms, final=self.final)

    @property
    def is_deal(self) -> bool:
        return self.kind in (MoveKind.ACCEPT_OFFER, MoveKind.CONFIRM_DEAL)

    @property
    def closes(self) -> bool:
        return self.kind in (MoveKind.ACCEPT_OFFER, MoveKind.CONFIRM_DEAL, MoveKind.DECLINE_CLOSE,
                             MoveKind.FAREWELL, MoveKind.WRAP_UP)


def hidden_reserve(product: Product, secret: bytes, margin: float) -> int:
    """The least a store's merchant takes for ``product``: its floor plus a secret share of the
    room between floor and list, up to ``margin`` of it, drawn once per product from the store's
    secret. Whatever a shopper learns from what the merchant accepts and refuses, over any
    number of chats, is this price: the floor itself stays anywhere within that margin below."""
    digest = hmac.new(secret, b"floor-margin\x00" + product.id.encode(), hashlib.sha256).digest()
    share = int.from_bytes(digest[:8], "big") / 2**64
    return product.floor_cents + int(share * margin * (product.list_price_cents - product.floor_cents))


def _ceil_to(cents: int, unit: int) -> int:
    return int(math.ceil(cents / unit)) * unit


def _with_lever(ask: Terms, lever: Lever) -> Terms:
    """``ask`` with ``lever`` added to its extras."""
    return Terms(ask.price_cents, ask.currency, ask.extras + (lever.offer_text,))


def _mirror(offers: tuple[int, ...], asks: tuple[int, ...]) -> int | None:
    """Where a tit-for-tat shopper would meet the merchant, or None when the shopper's last
    move does not mirror the merchant's last price cut. Mirroring the same cents, it accepts
    up to the midpoint of the two standing prices; mirroring the same ratio, up to their
    geometric mean."""
    if len(asks) < 2 or len(offers) < 2 or offers[-2] <= 0:
        return None
    cut, ask = asks[-2] - asks[-1], asks[-1]
    raise_ = offers[-1] - offers[-2]
    if cut <= 0 or raise_ <= 0:
        return None
    if abs(raise_ - cut) <= 1:
        return (offers[-1] + ask) // 2
    if abs(offers[-1] / offers[-2] - asks[-2] / ask) <= 1e-3:
        return math.isqrt(offers[-1] * ask)
    return None


@dataclass(frozen=True, slots=True)
class MerchantHistory:
    """What the merchant needs from the conversation so far, derived from the engine state."""

    ask: Terms
    ask_is_final: bool
    price_concessions: int
    #: The size of the merchant's latest price cut (steps only ever shrink).
    last_price_step: int | None
    shopper_offers: tuple[int, ...]
    #: The merchant's offered prices, oldest first (the opening included).
    asks: tuple[int, ...] = ()
    #: The shopper's turns so far (offers or not), the current one included.
    shopper_turns: int = 0

    def after(self, turn: Turn) -> MerchantHistory:
        """The history once ``turn`` has been applied: one step, so that a stored history can
        be carried forward turn by turn instead of derived from every turn again."""
        terms = turn.terms
        if turn.party == SHOPPER:
            offers = self.shopper_offers
            if turn.action is Action.OFFER and terms is not None:
                offers = (*offers, terms.price_cents)
            # Built field by field, not with dataclasses.replace: a replay folds every turn.
            return MerchantHistory(self.ask, self.ask_is_final, self.price_concessions, self.last_price_step,
                                   offers, self.asks, self.shopper_turns + 1)
        if turn.action is not Action.OFFER or terms is None:
            return self
        price = terms.price_cents
        previous = self.asks[-1] if self.asks else self.ask.price_cents
        cut = previous - price
        return MerchantHistory(terms, turn.final, self.price_concessions + (cut > 0),
                               cut if cut > 0 else self.last_price_step, self.shopper_offers,
                               (*self.asks, price), self.shopper_turns)

    @property
    def shopper_stalls(self) -> int:
        """How many of the shopper's latest offers in a row did not beat its earlier best: the
        offers after the first one at its best."""
        offers = self.shopper_offers
        return len(offers) - 1 - offers.index(max(offers)) if offers else 0


@dataclass(frozen=True, slots=True)
class Clock:
    """Where the chat stands against its message cap, from the shopper's side."""

    #: Shopper messages so far, the current one included.
    done: int
    #: Shopper messages still allowed after the current one.
    left: int
    #: The longest a shopper is expected to keep haggling, in messages, whatever the cap: a
    #: merchant that saves its last offer for message 30 sells nothing to shoppers who give up
    #: after 20.
    patience: int = 20
    #: The shopper is bound to the cap (the lab's alternating offers): it haggles to its last
    #: message, so patience does not apply, and a shopper standing still is not about to leave.
    to_the_cap: bool = False

    @property
    def horizon(self) -> int:
        """The shopper message the merchant answers with its last offer."""
        cap = self.done + self.left
        return (cap if self.to_the_cap else min(cap, self.patience)) - 1

    @property
    def time(self) -> float:
        """Relative time in [0, 1]: 1 at the last offer the shopper can still answer."""
        horizon = self.horizon
        return 1.0 if horizon <= 0 else min(1.0, self.done / horizon)

    @property
    def last_call(self) -> bool:
        """This answer is the merchant's last offer (the shopper can still take it)."""
        return self.done >= self.horizon


class MerchantAgent:
    """Decides the merchant's move for one product. Holds no per-chat state: everything it
    needs is derived from the negotiation, so any worker can answer any turn."""

    #: Fraction of the remaining room given up on the first price concession, and the least
    #: fraction later ones shrink to.
    FIRST_STEP = 0.40
    STEP_DECAY = 0.08
    MIN_STEP = 0.15
    #: The least share of the remaining room a price cut gives when the shopper moved only a little.
    MIN_RECIPROCAL = 0.25
    #: An offer below this fraction of list price is a lowball: no concession for it.
    LOWBALL = 0.5
    #: Close when the shopper is this close (fraction of list) to the merchant's next counter.
    CLOSE_ENOUGH = 0.03
    #: Take a shopper's offer at or above the floor once it has stood still this many times in a
    #: row: holding out against a shopper who will not move only loses a sale it can make.
    STALLS_TO_TAKE = 2
    #: With a clock: the concession curve's exponent (below 1: Boulware, firm until late).
    BOULWARE_E = 0.2
    #: With a clock the shopper is bound to (:attr:`Clock.to_the_cap`): firmer still. A shopper
    #: that cannot leave before the deadline moves only when it nears, so the merchant has no
    #: early concession to make to keep it talking.
    BOUND_BOULWARE_E = 0.05
    #: Bound to the cap, against a shopper whose pace shows no sign of reaching the lowest
    #: quote: the share of the room given for each share of its span the shopper gave, and the
    #: least share given (see :meth:`_reciprocal_price`).
    RECIPROCAL_SHARE = 0.5
    BOUND_LEAST_GIVE = 0.2
    #: With a clock: the token cut (fraction of the remaining room, at least one price unit,
    #: at most the shopper's own move) answering each move of the shopper.
    TOKEN_STEP = 0.01

    def __init__(self, product: Product, *, reserve_cents: int | None = None) -> None:
        self.product = product
        self.unit = price_unit(product.list_price_cents)
        #: The least the merchant takes, net of the extras' cost: the floor, or (in a store) the
        #: floor plus a secret margin, so that what it accepts and refuses reveals no more than that.
        self.reserve = product.floor_cents if reserve_cents is None else reserve_cents
        if not product.floor_cents <= self.reserve <= product.list_price_cents:
            raise ValueError(f"reserve {reserve_cents} is outside [floor, list] for {product.id}")
        #: The lowest price it quotes with no extras (see :meth:`lowest_quote`).
        self.min_quote = self.lowest_quote(())

    # -- what a package is worth to the store ------------------------------------------------

    def covers(self, terms: Terms) -> bool:
        """Whether ``terms`` earn the reserve once the extras' cost is counted: the only test of
        a deal, so that no package of extras sells below the floor."""
        return terms.price_cents - self.product.extras_cost(terms.extras) >= self.reserve

    def lowest_quote(self, extras: tuple[str, ...]) -> int:
        """The lowest price the merchant will *quote* for a package: strictly above the price
        that just covers it and rounded, so that no reply ever states that price itself."""
        bottom = self.reserve + self.product.extras_cost(extras)
        return min(self.product.list_price_cents, _ceil_to(bottom + 1, min(self.unit, 100)))

    # -- opening ---------------------------------------------------------------------------

    def opening_terms(self) -> Terms:
        return Terms(self.product.list_price_cents, self.product.currency)

    def greet(self) -> MerchantMove:
        return MerchantMove(MoveKind.GREET, Action.OFFER, self.opening_terms())

    # -- history -----------------------------------------------------------------------------

    def history(self, negotiation: Negotiation) -> MerchantHistory:
        """The history of a negotiation whose turns are all held: a fold of
        :meth:`MerchantHistory.after` over them from the list price asked and nothing offered. A
        store keeps the folded history with its chat instead, so that a turn costs the same
        whatever the chat's length."""
        state = MerchantHistory(self.opening_terms(), False, 0, None, ())
        for turn in negotiation.turns:
            state = state.after(turn)
        return state

    def shopper_terms(self, negotiation: Negotiation, price_cents: int) -> Terms:
        """The terms a shopper's bare price offers: that price for the package on the table,
        never more than the merchant is asking."""
        ask = negotiation.standing.get(MERCHANT, self.opening_terms())
        return Terms(min(price_cents, ask.price_cents), ask.currency, ask.extras)

    def shopper_turn(self, negotiation: Negotiation, intent: Intent, at: datetime, text: str | None = None) -> Turn:
        """The engine turn a shopper's intent amounts to: an offer is that price for the package
        on the table; acceptance and walking away close the negotiation; the rest is talk."""
        if intent.kind is IntentKind.OFFER and intent.amount_cents is not None:
            return Turn(SHOPPER, Action.OFFER, at, terms=self.shopper_terms(negotiation, intent.amount_cents), text=text)
        if intent.kind is IntentKind.ACCEPT:
            return Turn(SHOPPER, Action.ACCEPT, at, text=text)
        if intent.kind is IntentKind.WALK_AWAY:
            return Turn(SHOPPER, Action.REJECT, at, text=text)
        return Turn(SHOPPER, Action.MESSAGE, at, text=text)

    # -- deciding ----------------------------------------------------------------------------

    def respond(self, negotiation: Negotiation, intent: Intent, *, last_message: bool = False,
                messages_left: int | None = None, history: MerchantHistory | None = None,
                to_the_cap: bool = False) -> MerchantMove:
        """The merchant's move after the shopper's turn has been applied to ``negotiation``.

        ``messages_left`` is how many more messages the shopper may send after this one (None:
        unknown). Knowing it, the merchant holds firm early and concedes towards its lowest
        quote as the deadline nears; ``messages_left == 0`` is the last message. The clock runs to
        a chat shopper's patience (:attr:`Clock.patience`) when the cap is further away, unless
        ``to_the_cap``: a counterpart bound to the deadline, as in the lab's alternating offers,
        haggles to its last message, and a merchant that made its last offer at message 20 of 100
        would walk away from deals it could still make. ``history``
        is the negotiation's history with that turn (the store keeps it folded); without it the
        history is derived from ``negotiation``'s turns."""
        state = self.history(negotiation) if history is None else history
        outcome = negotiation.outcome
        if outcome is not None and outcome.by == SHOPPER:
            if outcome.agreed:
                assert outcome.terms is not None
                return MerchantMove(MoveKind.CONFIRM_DEAL, None, outcome.terms)
            return MerchantMove(MoveKind.FAREWELL, None, state.ask)
        clock = None
        if messages_left is not None:
            last_message = last_message or messages_left <= 0
            clock = Clock(state.shopper_turns, max(0, messages_left), to_the_cap=to_the_cap)
        move = self._decide(negotiation, state, intent, clock, last_message)
        if intent.manipulation and not move.deflected:
            move = replace(move, deflected=True)
        if last_message and not move.closes:
            return MerchantMove(MoveKind.WRAP_UP, Action.MESSAGE, state.ask, deflected=move.deflected)
        return move

    def _decide(self, negotiation: Negotiation, state: MerchantHistory, intent: Intent, clock: Clock | None,
                last_message: bool) -> MerchantMove:
        kind = intent.kind
        if kind is IntentKind.OFFER and intent.amount_cents is not None:
            return self._answer_offer(negotiation, state, intent.amount_cents, intent.topics, clock, last_message)
        if intent.manipulation:
            return MerchantMove(MoveKind.DEFLECT, Action.MESSAGE, state.ask, deflected=True)
        if kind is IntentKind.AMBIGUOUS:
            return MerchantMove(MoveKind.CLARIFY, Action.MESSAGE, state.ask, candidates_cents=intent.candidates_cents)
        if kind is IntentKind.BEST_PRICE:
            return self._best_price(state)
        if kind is IntentKind.QUESTION:
            if Topic.EXTRAS in intent.topics and not state.ask.extras:
                lever = self._next_lever(state)
                if lever is not None:
                    return self._grant_lever(state.ask, lever, topics=intent.topics)
            return MerchantMove(MoveKind.ANSWER, Action.MESSAGE, state.ask, topics=intent.topics)
        # ACCEPT and WALK_AWAY close the negotiation before the merchant is asked, so what is
        # left is talk with no offer in it.
        return MerchantMove(MoveKind.PITCH, Action.MESSAGE, state.ask, topics=intent.topics)

    def _answer_offer(self, negotiation: Negotiation, state: MerchantHistory, price: int,
                      topics: tuple[Topic, ...], clock: Clock | None, last_message: bool) -> MerchantMove:
        ask = state.ask
        offered = self.shopper_terms(negotiation, price)
        covered = self.covers(offered)
        if price >= ask.price_cents:
            return MerchantMove(MoveKind.ACCEPT_OFFER, Action.ACCEPT, offered, shopper_price_cents=price, topics=topics)
        if state.ask_is_final:
            return self._after_last_offer(negotiation, state, price, topics, last_message)
        if covered and clock is not None and (last_message or clock.last_call):
            # The shopper's last word (or as long as shoppers are expected to haggle) and a price
            # the merchant can live with: a sale beats none.
            return self._accept(negotiation, price, topics)
        if clock is not None and clock.last_call:
            return self._final_answer(negotiation, state, price, topics, clock)
        counter = self._counter(state, price) if clock is None else self._timed_counter(state, price, clock)
        # Splitting a small gap makes sense only when the merchant cannot tell how long the
        # shopper will keep moving.
        close_enough = (clock is None and counter is not None
                        and counter.price_cents - price <= self.product.list_price_cents * self.CLOSE_ENOUGH)
        stalled = state.shopper_stalls >= self.STALLS_TO_TAKE and not (clock is not None and clock.to_the_cap)
        if covered and (counter is None or price >= counter.price_cents or close_enough or stalled):
            return self._accept(negotiation, price, topics)
        # Without a clock, a shopper stuck below the floor gets the last offer; with one, the
        # deadline bounds the chat and the last offer comes when it nears.
        stuck = clock is None and not covered and state.shopper_stalls >= 2
        if counter is None or stuck:
            # Nothing left to give, or the shopper is stuck below the floor: one last offer,
            # then a graceful close once the shopper stops improving.
            return MerchantMove(MoveKind.LAST_OFFER, Action.OFFER, ask, final=True, shopper_price_cents=price)
        lowball = price < self.product.list_price_cents * self.LOWBALL
        if counter == ask or (clock is None and (lowball or state.shopper_stalls)):
            return MerchantMove(MoveKind.HOLD, Action.MESSAGE, ask, shopper_price_cents=price, topics=topics,
                                lowball=lowball)
        added = tuple(e for e in counter.extras if e not in ask.extras)
        final = (counter.price_cents <= self.lowest_quote(counter.extras)
                 and self._next_lever(replace(state, ask=counter)) is None)
        kind = MoveKind.LAST_OFFER if final else MoveKind.COUNTER
        return MerchantMove(kind, Action.OFFER, counter, added_extras=added, final=final, shopper_price_cents=price,
                            topics=topics, price_cut=counter.price_cents < ask.price_cents)

    def _accept(self, negotiation: Negotiation, price: int, topics: tuple[Topic, ...]) -> MerchantMove:
        shopper = negotiation.standing.get(SHOPPER)
        assert shopper is not None
        return MerchantMove(MoveKind.ACCEPT_OFFER, Action.ACCEPT, shopper, shopper_price_cents=price, topics=topics)

    def _after_last_offer(self, negotiation: Negotiation, state: MerchantHistory, price: int,
                          topics: tuple[Topic, ...], last_message: bool) -> MerchantMove:
        """After its last offer the merchant never quotes lower. It waits (restating the offer)
        while the shopper keeps improving and may still write; it takes an offer at or above
        the floor once the shopper stops improving or has no message left; and it closes
        gracefully when the shopper stops improving below the floor."""
        ask = state.ask
        improving = state.shopper_stalls == 0
        if self.covers(self.shopper_terms(negotiation, price)) and (not improving or last_message):
            return self._accept(negotiation, price, topics)
        if improving and not last_message:
            # final: the reply says the offer stands as the last one, not "you haven't moved".
            return MerchantMove(MoveKind.HOLD, Action.MESSAGE, ask, final=True, shopper_price_cents=price,
                                topics=topics)
        return MerchantMove(MoveKind.DECLINE_CLOSE, Action.REJECT, ask, shopper_price_cents=price)

    def _final_answer(self, negotiation: Negotiation, state: MerchantHistory, price: int,
                      topics: tuple[Topic, ...], clock: Clock) -> MerchantMove:
        """The shopper can answer this move but the merchant cannot answer back with a counter:
        its last offer. It asks for what the shopper's own pace says the shopper would offer
        next (never below its lowest quote), and takes the shopper's offer when that is as good.
        A shopper bound to the cap whose pace does not reach the lowest quote gives no sign it
        would take the floor: the last offer then stands at the ask, worth more with a shopper
        that takes whatever the deadline leaves, and no worse a bet with one that does not."""
        ask = state.ask
        fine = min(self.unit, 100)
        forecast = self._forecast(state) // fine * fine
        lowest = self.lowest_quote(ask.extras)
        if clock.to_the_cap and forecast < lowest:
            last_price = ask.price_cents
        else:
            last_price = max(lowest, min(ask.price_cents, forecast))
        if price >= last_price and self.covers(self.shopper_terms(negotiation, price)):
            return self._accept(negotiation, price, topics)
        terms = Terms(last_price, ask.currency, ask.extras)
        return MerchantMove(MoveKind.LAST_OFFER, Action.OFFER, terms, final=True, shopper_price_cents=price,
                            topics=topics, price_cut=last_price < ask.price_cents)

    @staticmethod
    def _forecast(state: MerchantHistory) -> int:
        """What the shopper will pay next, judged from its moves. A shopper that mirrors the
        merchant's moves meets it halfway (in cents, or in ratio); one that concedes on its own
        clock takes one more step as large as its last when its last three steps never shrank
        (it concedes late); otherwise its best offer so far is all there is to count on."""
        offers = state.shopper_offers
        best = max(offers)
        if len(offers) < 3:
            return best
        mirror = _mirror(offers, state.asks)
        if mirror is not None:
            return mirror
        steps = [b - a for a, b in zip(offers[-4:], offers[-3:], strict=False)]
        if len(steps) >= 3 and steps[-1] > 0 and all(a <= b for a, b in zip(steps, steps[1:], strict=False)):
            return offers[-1] + steps[-1]
        return best

    def _best_price(self, state: MerchantHistory) -> MerchantMove:
        """Asked for the best price: one concession when none was made yet, else hold."""
        if state.price_concessions == 0 and not state.ask.extras:
            counter = self._counter(state, None)
            if counter is not None:
                added = tuple(e for e in counter.extras if e not in state.ask.extras)
                return MerchantMove(MoveKind.COUNTER, Action.OFFER, counter, added_extras=added,
                                    price_cut=counter.price_cents < state.ask.price_cents)
        return MerchantMove(MoveKind.HOLD, Action.MESSAGE, state.ask)

    def _next_lever(self, state: MerchantHistory) -> Lever | None:
        """The cheapest lever not yet on the table whose cost the package can carry: the ask
        still covers it, and so does the shopper's best offer when it made one — an extra the
        shopper's money cannot pay for would only put the deal out of its reach."""
        ask = state.ask
        best = max(state.shopper_offers) if state.shopper_offers else ask.price_cents
        for lever in self.product.levers_cheapest_first():
            if lever.offer_text in ask.extras:
                continue
            if self.covers(Terms(min(ask.price_cents, best), ask.currency, ask.extras + (lever.offer_text,))):
                return lever
        return None

    def _grant_lever(self, ask: Terms, lever: Lever, *, topics: tuple[Topic, ...] = ()) -> MerchantMove:
        return MerchantMove(MoveKind.COUNTER, Action.OFFER, _with_lever(ask, lever), added_extras=(lever.offer_text,),
                            topics=topics)

    def _lever_counter(self, ask: Terms, lever: Lever | None, gap: int | None) -> Terms | None:
        """``ask`` with ``lever`` added when that is the next concession rather than a price cut:
        the lever is worth no more than the gap to the shopper's offer (or either is unknown),
        or the price cannot go lower. None otherwise."""
        if lever is not None and (gap is None or lever.value_cents is None or lever.value_cents <= gap
                                  or ask.price_cents <= self.lowest_quote(ask.extras)):
            return _with_lever(ask, lever)
        return None

    def _on_grid_below(self, ask: Terms, target: int) -> int:
        """``target``, but at least one price unit below the ask and on the price grid."""
        return min(target, (ask.price_cents - self.unit) // self.unit * self.unit)

    def _time_price(self, clock: Clock, lowest: int) -> int:
        """Where the concession curve puts the price of a package now: list price at the start,
        ``lowest`` (the package's lowest quote) at the last offer the shopper can still answer,
        Boulware in between (firm early, fast late) — most shoppers only move for real when the
        deadline nears."""
        room = self.product.list_price_cents - lowest
        if room <= 0:
            return lowest
        e = self.BOUND_BOULWARE_E if clock.to_the_cap else self.BOULWARE_E
        given = room * clock.time ** (1 / e)
        return max(lowest, _ceil_to(int(self.product.list_price_cents - given), self.unit))

    def _timed_counter(self, state: MerchantHistory, price: int, clock: Clock) -> Terms | None:
        """The next terms on the clock: the concession curve's price, or the shopper's forecast
        next offer when that is higher (no cut it would make good anyway), and at least a token
        cut (no more than the shopper's own move) whenever the shopper improved its offer, so
        that every move of the shopper is answered — unless the shopper is bound to the cap: it
        stays to the end whether answered or not, and token cuts answering a shopper that moves
        every round add up to most of the room; and such a shopper whose pace never reaches the
        lowest quote gets no more than it gave (:meth:`_reciprocal_price`). The standing terms
        when no move is due; None when nothing is left to give."""
        ask = state.ask
        offers = state.shopper_offers
        moved = offers[-1] - max(offers[:-1]) if len(offers) >= 2 else None
        lowest = self.lowest_quote(ask.extras)
        target = self._time_price(clock, lowest)
        if offers:
            forecast = self._forecast(state)
            target = max(target, forecast)
            if clock.to_the_cap and forecast < lowest:
                target = max(target, self._reciprocal_price(offers, lowest))
        lowball = price < self.product.list_price_cents * self.LOWBALL
        if not lowball and not clock.to_the_cap and (moved is None or moved > 0):
            room = ask.price_cents - lowest
            token = max(self.unit, int(room * self.TOKEN_STEP))
            if moved is not None:
                token = min(token, max(self.unit, moved))
            target = min(target, ask.price_cents - token)
        lever = self._next_lever(state)
        if target >= ask.price_cents:
            return ask if lever is not None or ask.price_cents > lowest else None
        if (with_lever := self._lever_counter(ask, lever, ask.price_cents - price)) is not None:
            return with_lever
        if ask.price_cents <= lowest:
            return None
        return Terms(max(lowest, self._on_grid_below(ask, target)), ask.currency, ask.extras)

    def _reciprocal_price(self, offers: tuple[int, ...], lowest: int) -> int:
        """The least price to answer a shopper bound to the deadline whose pace shows no sign
        of reaching the lowest quote. The curve's concessions buy nothing from such a shopper:
        one that keeps to its reservation must move first, and one that takes whatever the
        deadline leaves takes the higher price as readily. So the merchant gives of its room
        (list price to the lowest quote) at most :attr:`RECIPROCAL_SHARE` of the share of its
        own span (its opening to list price) the shopper gave, and at least
        :attr:`BOUND_LEAST_GIVE`, so that its terms leave the shopper something."""
        list_price = self.product.list_price_cents
        room = list_price - lowest
        span = list_price - offers[0]
        given = 1.0 if span <= 0 else max(0, max(offers) - offers[0]) / span
        share = min(1.0, max(self.BOUND_LEAST_GIVE, self.RECIPROCAL_SHARE * given))
        return max(lowest, int(list_price - room * share))

    def _counter(self, state: MerchantHistory, price: int | None) -> Terms | None:
        """The merchant's next concession from its current terms, or None when it has none
        left. ``price`` is the shopper's offer (None when no offer was made)."""
        ask = state.ask
        gap = ask.price_cents - price if price is not None else None
        if (with_lever := self._lever_counter(ask, self._next_lever(state), gap)) is not None:
            return with_lever
        lowest = self.lowest_quote(ask.extras)
        room = ask.price_cents - lowest
        if room <= 0:
            return None
        fraction = max(self.MIN_STEP, self.FIRST_STEP - self.STEP_DECAY * state.price_concessions)
        step = room * fraction
        offers = state.shopper_offers
        if len(offers) >= 2:
            # Reciprocity: never move more than the shopper just did — but at least a quarter
            # of the remaining room, so that two careful agents near the floor still meet
            # before the chat runs out of messages.
            step = min(step, max(offers[-1] - max(offers[:-1]), room * self.MIN_RECIPROCAL))
        if state.last_price_step is not None:
            step = min(step, state.last_price_step)
        target = _ceil_to(int(ask.price_cents - step), self.unit)
        # Every cut is at least one price unit and lands on the grid, so that rounding an
        # off-grid list price ($649.99) never makes a later step larger than an earlier one.
        return Terms(max(lowest, self._on_grid_below(ask, target)), ask.currency, ask.extras)

