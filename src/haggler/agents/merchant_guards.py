"""The guards between a language model and a store's shopper: what the model may commit and say.

The model proposes, the framework disposes (``../shared/DESIGN.md``, principle 2). Two guards:

``dispose`` turns a model's proposed move into a :class:`MerchantMove` the engine accepts, or
refuses it: a price below what covers the reserve (the floor plus the store's secret margin,
net of the extras' cost) is raised to the merchant's lowest quote before anything is committed;
an acceptance of an offer that does not cover it becomes that lowest quote instead; extras are
only the product's own levers; the price never rises above the standing ask; and the chat's
last message still ends it.

``Wording.problem`` reads a reply the model wrote before it is sent, as a manipulator would hope
to read it: it may state no amount but the public ones and the terms just decided (so no floor,
no lever cost, no number near them in any encoding ``language/leaks`` reads), no run of words
from the inventory note or the persona, no lever not yet on the table, and it must say what was
decided (the price it commits to; no deal that was not made). A reply with a problem is
regenerated or replaced by the template renderer's, which cannot see hidden state at all.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from haggler.agents.merchant import MERCHANT, SHOPPER, MerchantAgent, MerchantHistory, MerchantMove, MoveKind
from haggler.catalog import Lever, Product, Store
from haggler.engine import Action, Negotiation, Terms
from haggler.language.intents import Intent, IntentKind
from haggler.language.leaks import amounts_in, reveals
from haggler.language.merchant_reading import read_merchant_reply
from haggler.money import to_cents

#: Words in a row shared with the inventory note, the persona or an unoffered lever that make
#: a reply a leak.
LEAK_RUN = 4

_WORDS = re.compile(r"[a-z0-9]+")
#: Words that read as the merchant agreeing; a reply with no deal behind it may not use them.
_AGREEING = re.compile(r"\b(?:deal|sold|agreed?|accept(?:ed|ing)?|it'?s yours|you(?:'ve)? got it|"
                       r"works for (?:me|us)|(?:that|it) works|done)\b", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Disposed:
    move: MerchantMove
    #: The guard raised the proposed price (or turned an acceptance into a counter) to the floor.
    clamped: bool


def dispose(agent: MerchantAgent, state: MerchantHistory, negotiation: Negotiation, intent: Intent, *,
            action: str, price: float | None, extras: Sequence[str], last_message: bool) -> Disposed | None:
    """The move a model's proposal amounts to once the owner's limits are enforced, or None when
    it cannot be carried out at all (an acceptance with no offer on the table, an unknown action).
    ``state`` is ``agent.history(negotiation)``."""
    ask = state.ask
    offered = intent.amount_cents if intent.kind is IntentKind.OFFER else None
    disposed: Disposed | None
    if action == "accept":
        disposed = _accept(agent, ask, negotiation, offered)
    elif action in ("counter", "last_offer"):
        disposed = _offer(agent, ask, price, extras, final=action == "last_offer", offered=offered)
    elif action == "hold":
        disposed = Disposed(MerchantMove(MoveKind.HOLD, Action.MESSAGE, ask, shopper_price_cents=offered), False)
    elif action == "decline":
        disposed = Disposed(MerchantMove(MoveKind.DECLINE_CLOSE, Action.REJECT, ask, shopper_price_cents=offered),
                            False)
    elif action == "answer":
        disposed = Disposed(MerchantMove(MoveKind.ANSWER, Action.MESSAGE, ask, topics=intent.topics), False)
    else:
        return None
    if disposed is not None and last_message and not disposed.move.closes:
        # The chat's last message: whatever the model wanted, the merchant's reply ends it.
        disposed = Disposed(MerchantMove(MoveKind.WRAP_UP, Action.MESSAGE, ask), disposed.clamped)
    return disposed


def _accept(agent: MerchantAgent, ask: Terms, negotiation: Negotiation, offered: int | None) -> Disposed | None:
    shopper = negotiation.standing.get(SHOPPER)
    if offered is None or shopper is None:
        return None  # only an offer made in this very turn can be taken
    if agent.covers(shopper):
        return Disposed(MerchantMove(MoveKind.ACCEPT_OFFER, Action.ACCEPT, shopper, shopper_price_cents=offered),
                        False)
    lowest = Terms(agent.lowest_quote(ask.extras), ask.currency, ask.extras)
    return _as_move(ask, lowest, final=True, offered=offered, clamped=True)


def _offer(agent: MerchantAgent, ask: Terms, price: float | None, extras: Sequence[str], *, final: bool,
           offered: int | None) -> Disposed:
    package = ask.extras + tuple(lv.offer_text for lv in _levers(agent.product, extras)
                                 if lv.offer_text not in ask.extras)
    cents = ask.price_cents if price is None else _cents(price, ask.price_cents)
    if agent.lowest_quote(package) > ask.price_cents:
        package = ask.extras  # extras the asking price cannot carry are not given
    lowest = agent.lowest_quote(package)
    terms = Terms(max(lowest, min(cents, ask.price_cents)), ask.currency, package)
    return _as_move(ask, terms, final=final, offered=offered, clamped=cents < lowest)


def _as_move(ask: Terms, terms: Terms, *, final: bool, offered: int | None, clamped: bool) -> Disposed:
    if terms == ask and not final:
        return Disposed(MerchantMove(MoveKind.HOLD, Action.MESSAGE, ask, shopper_price_cents=offered), clamped)
    added = tuple(e for e in terms.extras if e not in ask.extras)
    kind = MoveKind.LAST_OFFER if final else MoveKind.COUNTER
    return Disposed(MerchantMove(kind, Action.OFFER, terms, added_extras=added, final=final,
                                 shopper_price_cents=offered, price_cut=terms.price_cents < ask.price_cents),
                    clamped)


def _cents(price: float, fallback: int) -> int:
    try:
        return to_cents(str(price))
    except ValueError:
        return fallback


def _levers(product: Product, named: Iterable[str]) -> list[Lever]:
    """The product's levers the model named (by their text, or a part of it); invented extras
    ("a second unit free") name none and are dropped."""
    chosen: list[Lever] = []
    for name in named:
        key = name.strip().casefold()
        for lever in product.levers:
            text = lever.offer_text.casefold()
            if key and (key == text or key in text or text in key) and lever not in chosen:
                chosen.append(lever)
                break
    return chosen


class Wording:
    """Checks one chat's merchant replies: built per turn from the product, the store and what
    has been said (the shopper's own amounts and the merchant's earlier replies are public)."""

    def __init__(self, agent: MerchantAgent, store: Store, state: MerchantHistory, negotiation: Negotiation,
                 transcript: Sequence[tuple[str, str]]) -> None:
        product = agent.product
        self.agent = agent
        self.product = product
        self.list_price = product.list_price_cents
        public_texts = [product.name, product.subtitle, product.description, product.kind or "",
                        product.condition or "", str(product.year_made or ""), store.name, store.tagline,
                        store.policy, store.rep_name, store.city or "", store.about or "", store.headline or "",
                        *(text for _, text in transcript)]
        self.asks = {*state.asks, state.ask.price_cents, self.list_price}
        self.public_amounts = {a for text in public_texts for a in amounts_in(text)}
        public_words = {run for text in public_texts for run in _runs(text)}
        offered = set(_offered_extras(negotiation))
        self.hidden_runs = {run for text in (product.inventory_note, product.merchant_persona or "",
                                             *(lv.offer_text for lv in product.levers if lv.offer_text not in offered))
                            for run in _runs(text)} - public_words
        self.secrets = _secrets(agent)

    def problem(self, text: str, move: MerchantMove) -> str | None:
        """Why ``text`` may not be sent as the reply for ``move``; None when it may."""
        committed = self._committed(move)
        secret = reveals(text, self.secrets, except_for=committed)
        if secret is not None:
            return "it gives away the store's hidden limits"
        stated = amounts_in(text)
        allowed = self.public_amounts | self.asks | committed | {self.list_price - a for a in committed}
        stray = [a for a in stated if a not in allowed]
        if stray:
            return f"it states an amount that is not part of the terms ({stray[0] / 100:g})"
        if set(_runs(text)) & self.hidden_runs:
            return "it repeats the store's private notes"
        if not move.is_deal and (_AGREEING.search(text) or read_merchant_reply(
                text, closed=move.closes, list_price_cents=self.list_price).deal):
            return "it sounds like an agreement, and no deal was made"
        if move.action is Action.OFFER or move.is_deal:
            price = move.terms.price_cents
            if price not in stated:
                return f"it does not state the price of these terms ({price / 100:.2f})"
        return None

    def _committed(self, move: MerchantMove) -> set[int]:
        """Amounts the reply for ``move`` may state: its terms' price, the shopper's offer it
        answers, and the value of each extra on the table as the lever's public text gives it."""
        amounts = {move.terms.price_cents}
        if move.shopper_price_cents is not None:
            amounts.add(move.shopper_price_cents)
        for extra in move.terms.extras:
            amounts.update(amounts_in(extra))
        return amounts


def _offered_extras(negotiation: Negotiation) -> Iterable[str]:
    """Every extra the merchant has put on the table in this chat (public from then on)."""
    for turn in negotiation.turns:
        if turn.party == MERCHANT and turn.terms is not None:
            yield from turn.terms.extras


def _secrets(agent: MerchantAgent) -> list[int]:
    """The amounts a reply must not give away: floor and reserve, how far each lies below list
    price (in money and in percent), and what each lever costs the store."""
    product = agent.product
    list_price = product.list_price_cents
    amounts = [product.floor_cents, agent.reserve, list_price - product.floor_cents, list_price - agent.reserve]
    for limit in (product.floor_cents, agent.reserve):
        percent = round(100 * limit / list_price) if list_price else 0
        amounts += [percent * 100, (100 - percent) * 100]
    amounts += [lever.cost for lever in product.levers if lever.cost > 0]
    return [a for a in amounts if a > 0]


def _runs(text: str) -> list[tuple[str, ...]]:
    words = _WORDS.findall(text.casefold())
    return [tuple(words[i:i + LEAK_RUN]) for i in range(len(words) - LEAK_RUN + 1)]

