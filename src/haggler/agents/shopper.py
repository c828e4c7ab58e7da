"""The deterministic shopper agent: haggles for one product against any negotiate.v1 store.

It works from :class:`~haggler.language.merchant_reading.MerchantReading` (so it runs against
stores that send only free text) and produces :class:`ShopperTurn` s that carry both natural
text and the structured JSON-extension message.

How it buys:

* opens with a credible anchor — about 60% of list, never below what a merchant would dismiss
  as a lowball (55% of list) unless its budget forces it, and never above its target or budget;
* concedes in shrinking steps (a share of the room left to its ceiling), a share that grows as
  the turns run out (Boulware-ish: firm early, more pliable late);
* answers the merchant's movement: when the merchant does not move it barely moves; when the
  merchant gives a lot (price or extras it values) it gives more — never past its ceiling;
* probes for a merchant on a clock: early in a long chat every other offer repeats the last.
  A merchant that answers moves holds then (and that hold is no stall); one that comes down
  anyway concedes on a clock, saving its best terms for last — so from then on the shopper
  only creeps up and waits for the merchant's last offer instead of meeting it halfway;
* makes its last offer its best (its ceiling) when the merchant is still above its budget:
  with no turn left to hold back for, only the deal is left to win or lose — and so it does at
  once when a merchant on a clock stops coming down above its budget;
* values extras: an extra whose description contains a keyword of ``extra_values`` is worth
  that much, so "$540 + battery worth $80" is effectively $460 against its target — but it
  NEVER accepts a cash price above its budget, whatever the extras;
* accepts a price within budget when it is at or below its target or its own next offer, when
  the merchant says it is final, when the gap is too small to be worth another round, when
  it has no room left, when a merchant on a clock stops coming down, or near the end (its last turn against a merchant on a clock, one turn
  earlier otherwise); walks away politely from a final price above budget; gives up politely
  after ``max_turns``;
* commits only to a price it names: an acceptance (or a confirmation) states the price it
  accepts, in its text and as a JSON offer of exactly that price, which a store takes as
  acceptance when it meets its ask. A bare "I'll take it" would bind whatever the store has on
  the table, while the shopper only knows the price it read — and a merchant's text can misstate
  it or carry someone else's number. So the most a store can hold it to is a price it decided to
  pay, never above its budget: a misread can cost a deal, never the budget;
* checks the deal a store reports: the store's structured deal (see
  :attr:`~haggler.language.merchant_reading.MerchantReading.structured`) above its budget is not
  its deal (outcome ``over_budget``); a deal read from text is held to the price it named;
* never reveals its budget: its highest offer is a round amount strictly below the budget, and
  no text it writes states the budget or talks about a budget, maximum or limit — save an
  acceptance naming the merchant's own price when that happens to equal it, which says no more
  than accepting does.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from haggler.language.merchant_reading import MerchantReading
from haggler.money import format_money, price_unit, to_decimal_number

__all__ = ["ShopperAgent", "ShopperGoal", "ShopperOutcome", "ShopperTurn", "mentions_amount", "structured_message"]

OFFER, ACCEPT, WALK_AWAY, ASK = "offer", "accept", "walk_away", "ask"
#: The reason of an outcome whose deal the store reported above the budget: not the shopper's deal.
OVER_BUDGET = "over_budget"


@dataclass(frozen=True)
class ShopperGoal:
    list_price_cents: int
    #: The hidden ceiling: the agent never pays more, and never says it.
    budget_cents: int
    #: A price the shopper would be happy with (extras' value counted); None: no target.
    target_cents: int | None = None
    #: Keyword → value in cents of an extra whose description contains the keyword,
    #: e.g. {"shipping": 3000, "battery": 8000}.
    extra_values: Mapping[str, int] = field(default_factory=dict)
    currency: str = "USD"

    def __post_init__(self) -> None:
        if self.list_price_cents <= 0:
            raise ValueError("list_price_cents must be positive")
        if self.budget_cents <= 0:
            raise ValueError("budget_cents must be positive")
        if self.target_cents is not None and self.target_cents <= 0:
            raise ValueError("target_cents must be positive")
        if any(v < 0 for v in self.extra_values.values()):
            raise ValueError("extra values must not be negative")

    def extras_value(self, extras: tuple[str, ...] | list[str]) -> int:
        """What the extras are worth to this shopper: each keyword counts once."""
        texts = [e.casefold() for e in extras]
        return sum(value for key, value in self.extra_values.items()
                   if key.strip() and any(key.casefold().strip() in t for t in texts))


@dataclass(frozen=True)
class ShopperTurn:
    kind: str  # "offer" | "accept" | "walk_away" | "ask"
    #: The price offered, or accepted (an acceptance names its price); None for the others.
    price_cents: int | None
    text: str
    #: The JSON-extension message, e.g. {"action": "offer", "price": 450}. An acceptance is an
    #: offer of exactly the price it accepts: a store takes it as acceptance when it meets its ask
    #: and can bind no more.
    structured: dict[str, Any]


@dataclass(frozen=True)
class ShopperOutcome:
    agreed: bool
    #: The deal price (cash), or None without a deal.
    price_cents: int | None
    extras: tuple[str, ...]
    #: "deal", "walked_away" (the shopper left), "gave_up" (turn limit),
    #: "merchant_closed" (the merchant ended the chat without a deal), or "over_budget" (the store
    #: reported a deal above the budget: not the shopper's deal, so not agreed).
    reason: str
    turns: int


def structured_message(kind: str, price_cents: int | None) -> dict[str, Any]:
    """The JSON-extension message of a turn of ``kind`` at ``price_cents``. An acceptance goes out
    as an offer of exactly its price: a bare {"action": "accept"} would bind whatever the store
    has on the table."""
    structured: dict[str, Any] = {OFFER: {"action": "offer"}, ACCEPT: {"action": "offer"},
                                  WALK_AWAY: {"action": "walk_away"}, ASK: {"action": "best_price"}}[kind]
    if price_cents is not None:
        structured = {**structured, "price": to_decimal_number(price_cents)}
    return structured


def check_binding(kind: str, price_cents: int | None, budget_cents: int) -> None:
    """Every turn that can bind the shopper (an offer, an acceptance) names its price, within
    the budget: a RuntimeError otherwise, whoever wrote the turn."""
    if kind in (OFFER, ACCEPT) and (price_cents is None or price_cents > budget_cents):
        raise RuntimeError(f"refusing to {kind} at {price_cents!r}: not a price within the budget")


def _amount_forms(cents: int) -> list[str]:
    whole, frac = divmod(cents, 100)
    wholes = [str(whole)] + ([f"{whole:,}"] if whole >= 1000 else [])
    if frac:
        return [f"{w}.{frac:02d}" for w in wholes]
    return wholes + [f"{w}.00" for w in wholes]


def mentions_amount(text: str, cents: int) -> bool:
    """Whether ``text`` states ``cents`` in any usual way: "$1,234", "1234", "1,234.00",
    "$611.37" — as a whole number, not as part of a larger one."""
    for form in _amount_forms(cents):
        if re.search(r"(?<![\d,.])" + re.escape(form) + r"(?![\d]|[.,]\d)", text):
            return True
    return False


_FORBIDDEN = re.compile(r"\b(?:budget|max(?:imum)?|limit|ceiling|most\s+i\s+can|can'?t\s+go\s+(?:above|over|higher))\b",
                        re.IGNORECASE)

_OPEN = (
    "Hi! I'm interested in this one. Would you take {p}?",
    "Hello! I'd like to buy it — how about {p}?",
    "Hi there. Would you consider {p} for it?",
)
_AFTER_MOVE = (
    "Thanks for moving on that. I can go to {p}.",
    "I appreciate it. How about {p}?",
    "That helps. Would you do {p}?",
    "We're getting closer — I could do {p}.",
)
_AFTER_HOLD = (
    "I can come up a little: {p}.",
    "Okay, I'll nudge up to {p}.",
    "Let me stretch a bit — would you take {p}?",
)
_STAY = (
    "I'll have to stay at {p}.",
    "I'm going to stay at {p} on this one.",
)
# An acceptance names its price (see the module docstring): "deal at $X" is an offer of X.
_ACCEPT = (
    "Deal — I'll take it at {p}.",
    "Sounds good, I'll take it at {p}.",
    "Great, you've got a deal at {p}.",
    "Deal at {p}! Let's do it.",
)
_CONFIRM = (
    "Great — deal at {p}. Thank you!",
    "Deal at {p}! Thanks, I'll take it.",
)
_WALK = (
    "Thanks, but that's more than I can spend. I'll pass.",
    "I appreciate it, but that's above what I'm willing to pay. I'll pass on this one.",
    "Thanks for your time — that's more than I want to spend, so I'll pass.",
)
_GIVE_UP = (
    "We don't seem to be getting there. Thanks for your time — I'll pass.",
    "I think we're stuck, so I'll pass on this one. Thanks for chatting!",
)
_ASK = (
    "What's the best price you can do on it?",
    "Is there any flexibility on the price?",
)


class ShopperAgent:
    """Haggles over one product. One object per negotiation: feed it each merchant reading
    and send the turns it returns (``turn.text`` as free text or ``turn.structured`` as JSON)
    until :attr:`done`."""

    MAX_TURNS = 20
    #: The opening offer as a fraction of list price (jittered by the seed), and the least
    #: fraction it may open at when its budget allows (a merchant ignores lowballs).
    ANCHOR = 0.60
    MIN_ANCHOR = 0.55
    #: The opening leaves at least this share of the ceiling, and this fraction of list
    #: price, as room to concede.
    ANCHOR_SHARE = 0.88
    ANCHOR_ROOM = 0.30
    #: Share of the remaining room conceded per step, early and (added) late in the chat.
    STEP_EARLY = 0.10
    STEP_LATE = 0.30
    #: Share of the remaining room conceded when the merchant did not move at all.
    STEP_STALLED = 0.04
    #: What an added extra we put no value on counts as, as movement (fraction of list).
    GESTURE = 0.03
    #: A gap this small (fraction of list) is not worth another round.
    CLOSE_GAP = 0.015
    #: Through this share of its turns it repeats every other offer: a probe that tells a
    #: merchant who concedes on a clock (it moves anyway) from one who answers our moves.
    PROBE_SHARE = 0.3
    #: Probing needs this many turns; a shorter chat has no turns to spare.
    PROBE_MIN_TURNS = 8
    #: Share of the remaining room conceded per turn against a merchant on a clock.
    CREEP = 0.01
    #: Bound to the cap (``to_the_cap``): the concession curve's exponent, from the opening to
    #: the cap over the turns (below 1: Boulware, firm until late), and the opening, a fraction
    #: of list price or of the cap, whichever is lower.
    BOUND_E = 0.05
    BOUND_ANCHOR = 0.40
    BOUND_ANCHOR_OF_CAP = 0.80

    def __init__(self, goal: ShopperGoal, *, seed: int | None = None, max_turns: int | None = None,
                 to_the_cap: bool = False) -> None:
        """``to_the_cap``: the merchant is bound to the same deadline, ``max_turns`` (the lab's
        alternating offers), rather than a store that may close the chat or a merchant reading
        a shopper's patience. The rules that guard against that give way: the shopper does not
        take a merchant's terms because its clock stopped coming down, does not walk away
        before its last turn, and concedes on a firm time curve to its cap by the turn before
        its last, offering its budget in its last turn rather than giving up."""
        max_turns = self.MAX_TURNS if max_turns is None else max_turns
        if max_turns < 2:
            raise ValueError("max_turns must be at least 2")
        self.goal = goal
        self.max_turns = max_turns
        self.to_the_cap = to_the_cap
        self._rng = random.Random(seed)
        self.unit = price_unit(goal.list_price_cents)
        self.fine = min(self.unit, 100)
        budget = goal.budget_cents
        # The highest amount it will ever offer: round, and strictly below the budget so that
        # no offer states the budget itself.
        ceiling = (budget - 1) // self.fine * self.fine
        if ceiling <= 0:
            ceiling = (budget - 1) if budget > 1 else budget
        self.ceiling = ceiling
        self.turns: list[ShopperTurn] = []
        self.offers: list[int] = []
        self._ask: int | None = None
        self._ask_extras: tuple[str, ...] = ()
        self._ask_effective: int | None = None
        self._merchant_holds = 0
        #: Whether the merchant conceded while we stood still: it concedes on a clock, so the
        #: best terms come last and our own concessions only buy a worse price.
        self._clock_merchant = False
        #: Share of the gap between its terms and our last offer the merchant just closed.
        self._move_share = 0.0
        self._accepted = False
        #: The price our last acceptance named (when :attr:`_accepted`).
        self._accepted_price: int | None = None
        #: The deal (price, extras) the merchant announced without closing, once we confirmed it.
        self._confirming: tuple[int, tuple[str, ...]] | None = None
        self._outcome: ShopperOutcome | None = None

    # -- state -------------------------------------------------------------------------------

    @property
    def done(self) -> bool:
        return self._outcome is not None

    @property
    def outcome(self) -> ShopperOutcome | None:
        return self._outcome

    @property
    def cap(self) -> int:
        """The most it will offer: its ceiling, or its target when that is lower."""
        target = self.goal.target_cents
        return min(self.ceiling, target) if target is not None else self.ceiling

    # -- turns -------------------------------------------------------------------------------

    def first_turn(self, greeting: MerchantReading) -> ShopperTurn:
        """The opening turn, after reading the merchant's greeting."""
        if self.turns:
            raise RuntimeError("first_turn() was already called")
        # A greeting opens the chat: it neither closes it nor concludes a deal.
        turn = self._respond(replace(greeting, deal=False, closed=False, walked_away=False), opening=True)
        assert turn is not None
        return turn

    def next_turn(self, reading: MerchantReading) -> ShopperTurn | None:
        """The turn answering ``reading``; None once the negotiation is over (see :attr:`outcome`)."""
        if not self.turns:
            raise RuntimeError("call first_turn() first")
        if self.done:
            return None
        return self._respond(reading, opening=False)

    def sent_instead(self, turn: ShopperTurn) -> None:
        """Record that ``turn``, written by someone else (the LLM shopper's model), was sent in
        place of the turn this agent just returned. What it decides next, and the deal it holds a
        store to, then follow what was actually said: the offers made, the price an acceptance
        named, a walk-away. The same decision in other words (kind and price) changes only the
        record of the words. ``turn`` is held to the budget like every turn this agent emits."""
        if not self.turns:
            raise RuntimeError("no turn of this agent to replace")
        check_binding(turn.kind, turn.price_cents, self.goal.budget_cents)
        mine = self.turns[-1]
        self.turns[-1] = turn
        if (turn.kind, turn.price_cents) == (mine.kind, mine.price_cents):
            return
        if mine.kind == OFFER:
            self.offers.pop()
        self._confirming, self._outcome = None, None
        self._accepted = turn.kind == ACCEPT
        self._accepted_price = turn.price_cents if self._accepted else None
        if turn.kind == OFFER:
            assert turn.price_cents is not None  # check_binding
            self.offers.append(turn.price_cents)
        elif turn.kind == WALK_AWAY:
            self._finish(False, None, (), "walked_away")

    # -- deciding ----------------------------------------------------------------------------

    def _respond(self, reading: MerchantReading, *, opening: bool) -> ShopperTurn | None:
        goal = self.goal
        if self._confirming is not None and not reading.walked_away:
            # We confirmed, at its price, a deal the merchant announced: that is the deal, unless
            # the store's own terms say it is above the budget.
            confirmed_price, confirmed_extras = self._confirming
            price = self._deal_price(reading, confirmed_price) if reading.deal else confirmed_price
            extras = reading.extras if reading.deal and reading.extras else confirmed_extras
            if price is not None and price > goal.budget_cents:
                self._finish(False, None, (), OVER_BUDGET)
            else:
                self._finish(True, price, extras, "deal")
            return None
        self._confirming = None
        if reading.deal:
            # What the shopper last committed to: the price its acceptance named, or else its
            # last offer (the merchant took it).
            committed = self._accepted_price if self._accepted else (self.offers[-1] if self.offers else None)
            price = self._deal_price(reading, committed)
            extras = reading.extras or self._ask_extras
            if price is not None and price > goal.budget_cents:
                # The store's own terms put the deal above the budget: not a deal we agreed to.
                if reading.closed:
                    self._finish(False, None, (), OVER_BUDGET)
                    return None
                return self._walk(_WALK, OVER_BUDGET)
            if price is not None and (reading.closed or self._accepted):
                self._finish(True, price, extras, "deal")
                return None
            # The merchant took our offer but the store wants a confirmation: at the price.
            if price is not None:
                self._confirming = (price, tuple(extras))
                return self._emit(ACCEPT, price, _CONFIRM)
            # A deal at no price we named or read is none we can stand behind.
        if reading.closed:
            self._finish(False, None, (), "merchant_closed")
            return None
        if len(self.turns) >= self.max_turns:
            self._finish(False, None, (), "gave_up")
            return None
        self._accepted = False

        moved = self._observe(reading)
        ask = self._ask
        if ask is None:
            # No price stated yet: ask for one (twice at most), then open from list price.
            asked = sum(1 for t in self.turns if t.kind == ASK)
            if asked < 2 and len(self.turns) < self.max_turns - 1:
                return self._emit(ASK, None, _ASK)
            ask = goal.list_price_cents

        within = ask <= goal.budget_cents
        turns_left = self.max_turns - len(self.turns)
        planned = self._plan(ask, moved, opening)
        last = self.offers[-1] if self.offers else None

        if within:
            if self._worth_taking(reading, ask, planned, moved):
                return self._accept(ask)
        else:
            if reading.final:
                return self._walk(_WALK, "walked_away")
            if last is not None and last >= self.cap and self._merchant_holds >= 2 and not self.to_the_cap:
                return self._walk(_WALK, "walked_away")
        if turns_left <= 1 and not self.to_the_cap:
            return self._walk(_GIVE_UP, "gave_up")
        templates: tuple[str, ...]
        if opening or not self.offers:
            templates = _OPEN
        elif last is not None and planned <= last:
            templates = _STAY
        elif moved > 0:
            templates = _AFTER_MOVE
        else:
            templates = _AFTER_HOLD
        self.offers.append(planned)
        return self._emit(OFFER, planned, templates)

    @staticmethod
    def _deal_price(reading: MerchantReading, committed: int | None) -> int | None:
        """The price of the deal ``reading`` announces. The store's structured terms are what it
        bound. Without them it is ``committed``, the price the shopper last named (its
        acceptance, or its offer the merchant took) — what it agreed to pay and all a store can
        hold it to — rather than a number read from text, which may misstate the price or be
        someone else's; the text's price only when the shopper named none."""
        if reading.structured or committed is None:
            return reading.price_cents
        return committed

    def _worth_taking(self, reading: MerchantReading, ask: int, planned: int, moved: int) -> bool:
        """Whether to take the merchant's terms (``ask`` is within budget) rather than counter."""
        goal = self.goal
        if goal.target_cents is not None and ask - goal.extras_value(self._ask_extras) <= goal.target_cents:
            return True
        if planned >= ask or reading.final or self.max_turns - len(self.turns) <= self._accept_turns_left():
            return True
        if self._clock_merchant and moved <= 0 and not self.to_the_cap:
            # A merchant on a clock that stops coming down has reached its best terms.
            return True
        last = self.offers[-1] if self.offers else None
        return last is not None and (ask - last <= max(goal.list_price_cents * self.CLOSE_GAP, self.fine)
                                     or last >= self.cap)

    def _accept_turns_left(self) -> int:
        """With this few turns left it takes any terms within budget. A merchant on a clock
        saves its best terms for its last offer, so it waits for that one; otherwise it takes
        the terms one turn earlier, before a store's message limit can end the chat."""
        return 1 if self._clock_merchant or self.to_the_cap else 2

    def _observe(self, reading: MerchantReading) -> int:
        """Record the merchant's terms; return how far (in value to us) they moved."""
        price = reading.price_cents
        if price is None and reading.discount_cents is not None and self._ask is not None:
            price = max(1, self._ask - reading.discount_cents)
        if price is None:
            self._merchant_holds += 1
            return 0
        extras = reading.extras if reading.extras or price != self._ask else self._ask_extras
        effective = price - self.goal.extras_value(extras)
        moved = 0
        if self._ask_effective is not None:
            # An extra we put no value on is still a concession: answer it as a small move.
            known = {e.casefold() for e in self._ask_extras}
            gestures = sum(1 for e in extras if e.casefold() not in known and not self.goal.extras_value((e,)))
            moved = self._ask_effective - effective + int(gestures * self.GESTURE * self.goal.list_price_cents)
            if self._ask_effective > effective and self._stood_still():
                self._clock_merchant = True
            if moved <= 0:
                # Holding in answer to our own standing still is no stall on its part.
                self._merchant_holds += 0 if self._stood_still() else 1
            else:
                self._merchant_holds = 0
                gap = self._ask_effective - (self.offers[-1] if self.offers else 0)
                self._move_share = moved / gap if gap > 0 else 1.0
        self._ask, self._ask_extras, self._ask_effective = price, tuple(extras), effective
        return max(0, moved)

    def _stood_still(self) -> bool:
        """Whether our latest offer repeated the one before as a probe: a merchant that answers
        moves has nothing to answer then. (Repeating the cap is no probe: there it has no more
        to give, and a merchant holding against it is stalling.)"""
        offers = self.offers
        return len(offers) >= 2 and offers[-1] == offers[-2] < self.cap

    def _probing(self) -> bool:
        """Whether the next offer repeats the last one as a probe (see :attr:`PROBE_SHARE`)."""
        if self._clock_merchant or self.max_turns < self.PROBE_MIN_TURNS:
            return False
        if len(self.turns) >= self.max_turns * self.PROBE_SHARE:
            return False
        return len(self.offers) % 2 == 1

    def _anchor(self, ask: int) -> int:
        reference = min(self.goal.list_price_cents, ask)
        cap = self.cap
        share = self.ANCHOR + self._rng.uniform(-0.03, 0.03)
        if self.to_the_cap:
            # Bound to the cap, a merchant cannot close on a lowball and the shopper has every
            # turn to the deadline to come up: it opens lower, as the lab's buyers do.
            anchor = min(reference * self.BOUND_ANCHOR, cap * self.BOUND_ANCHOR_OF_CAP)
            return max(1, min(int(anchor) // self.fine * self.fine, cap))
        anchor = min(reference * share, cap * self.ANCHOR_SHARE, cap - reference * self.ANCHOR_ROOM)
        if anchor < reference * self.MIN_ANCHOR:
            anchor = min(reference * self.MIN_ANCHOR, cap) if cap >= reference * self.MIN_ANCHOR else cap * 0.9
        cents = int(anchor) // self.unit * self.unit
        if cents <= 0:
            cents = int(anchor) // self.fine * self.fine
        return max(1, min(cents, cap))

    def _plan(self, ask: int, moved: int, opening: bool) -> int:
        """The offer it would make next (never above its cap, never below its last offer)."""
        if not self.offers:
            return self._anchor(ask)
        last = self.offers[-1]
        if self.to_the_cap:
            return self._bound_plan(last)
        room = self.cap - last
        if room <= 0 or self._probing():
            return last
        if self._clock_merchant:
            if moved <= 0 and ask > self.goal.budget_cents:
                # Its clock stopped above our budget: only our best offer can still make a deal.
                return self.cap
            return self._creep(last, room)
        if self.max_turns - len(self.turns) <= 2:
            # Its last offer: nothing is left to hold back for, only a deal to win or lose.
            return self.cap
        tau = min(1.0, len(self.offers) / self.max_turns)
        base = room * (self.STEP_EARLY + self.STEP_LATE * tau)
        if moved <= 0 and not self._stood_still():
            step = room * self.STEP_STALLED
        else:
            step = base * min(2.0, max(0.5, 0.5 + 3.0 * self._move_share))
        step = min(step, room * 0.6)
        grid = self.unit if step >= 2 * self.unit else self.fine
        target = (last + int(step)) // grid * grid
        target = max(target, last + self.fine)
        target = min(target, self.cap)
        return max(target, last)

    def _bound_plan(self, last: int) -> int:
        """Bound to the cap: from the opening to the cap on a Boulware curve over the turns —
        the cap from the turn before its last, so that a merchant's last offer can still meet
        it — never below the last offer. Its very last offer is the budget itself, when no
        target is set: the merchant's next move is its last, taking that or nothing, and a
        merchant whose floor lies between the cap and the budget would otherwise lose a deal
        both could make (the market's guard offers a walking agent's limit for the same
        reason)."""
        if len(self.turns) >= self.max_turns - 1 and self.goal.target_cents is None:
            return max(last, self.goal.budget_cents)
        last_turn = self.max_turns - 2
        tau = min(1.0, len(self.turns) / last_turn) if last_turn > 0 else 1.0
        opening = self.offers[0]
        target = opening + int((self.cap - opening) * tau ** (1 / self.BOUND_E))
        target = target // self.fine * self.fine if tau < 1.0 else self.cap
        return max(last, min(target, self.cap))

    def _creep(self, last: int, room: int) -> int:
        """A token step against a merchant on a clock: enough that it never reads as a stall
        (a merchant may close on a shopper who stands still), too little to meet its price
        before its clock brings it down."""
        step = max(self.fine, int(room * self.CREEP) // self.fine * self.fine)
        return min(last + step, self.cap)

    # -- emitting ----------------------------------------------------------------------------

    def _emit(self, kind: str, price: int | None, templates: tuple[str, ...]) -> ShopperTurn:
        check_binding(kind, price, self.goal.budget_cents)
        text = self._rng.choice(templates)
        if price is not None:
            text = text.format(p=format_money(price, self.goal.currency))
        if self._leaks(text, price):  # pragma: no cover - the templates hold no other amounts
            text = {OFFER: "Would you take {p}?", ACCEPT: _ACCEPT[0], WALK_AWAY: _WALK[0], ASK: _ASK[0]}[kind]
            if price is not None:
                text = text.format(p=format_money(price, self.goal.currency))
        turn = ShopperTurn(kind, price, text, structured_message(kind, price))
        self.turns.append(turn)
        return turn

    def _leaks(self, text: str, price: int | None) -> bool:
        budget = self.goal.budget_cents
        if _FORBIDDEN.search(text):
            return True
        return price != budget and mentions_amount(text, budget)

    def _accept(self, price: int) -> ShopperTurn:
        """Accept the merchant's terms at ``price``, the price it read: the acceptance names it."""
        self._accepted, self._accepted_price = True, price
        return self._emit(ACCEPT, price, _ACCEPT)

    def _walk(self, templates: tuple[str, ...], reason: str) -> ShopperTurn:
        turn = self._emit(WALK_AWAY, None, templates)
        self._finish(False, None, (), reason)
        return turn

    def _finish(self, agreed: bool, price: int | None, extras: tuple[str, ...], reason: str) -> None:
        self._outcome = ShopperOutcome(agreed, price, tuple(extras), reason, len(self.turns))
