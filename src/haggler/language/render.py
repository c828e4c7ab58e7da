"""Merchant replies, rendered from structured moves and public facts only.

The renderer never receives a :class:`~haggler.catalog.Product`: it works from
:class:`~haggler.catalog.ProductFacts` and the public store fields, so the floor, the lever
list and the inventory note are simply not within its reach. The only lever texts it ever
says are the extras a move actually puts on the table.

Wording varies from turn to turn; the caller passes a seeded ``random.Random`` so that a
conversation is reproducible.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from typing import Protocol, TypeVar

from haggler.agents.merchant import MerchantMove, MoveKind
from haggler.catalog import ProductFacts, Store
from haggler.engine import Terms
from haggler.language.intents import Topic
from haggler.money import format_money

T = TypeVar("T")

_SENTENCES = re.compile(r"(?<=[.!?])\s+")


def _lower_first(text: str) -> str:
    """Lower-case a leading capital for use mid-sentence, but leave acronyms alone."""
    if len(text) > 1 and text[0].isupper() and not text[1].isupper():
        return text[0].lower() + text[1:]
    return text


def join_extras(extras: tuple[str, ...]) -> str:
    items = [_lower_first(e) for e in extras]
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


def describe_terms(terms: Terms) -> str:
    """``$545 with free 2-day shipping and an extra battery``."""
    price = format_money(terms.price_cents, terms.currency)
    return f"{price} with {join_extras(terms.extras)}" if terms.extras else price


class Chooser(Protocol):
    """Where a reply's wording comes from: a seeded ``random.Random``, or :class:`_NextWording`."""

    def choice(self, seq: Sequence[T]) -> T: ...


class _NextWording:
    """Draws as the wrapped generator's ``choice`` does, but takes the item after the one drawn,
    so a replay with it differs from the original at every choice that has options."""

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng

    def choice(self, seq: Sequence[T]) -> T:
        return seq[(self._rng.choice(range(len(seq))) + 1) % len(seq)]


class ReplyRenderer:
    def __init__(self, store: Store, facts: ProductFacts) -> None:
        self.store = store
        self.facts = facts

    # -- helpers -------------------------------------------------------------------------------

    def _money(self, cents: int) -> str:
        return format_money(cents, self.facts.currency)

    def _policy_sentences(self, *keywords: str) -> list[str]:
        return [s.strip() for s in _SENTENCES.split(self.store.policy)
                if any(k in s.lower() for k in keywords)]

    def answer(self, topic: Topic, terms: Terms) -> str:
        facts = self.facts
        if topic is Topic.SHIPPING:
            lines = self._policy_sentences("ship", "deliver")
            shipping_extra = [e for e in terms.extras if "ship" in e.lower() or "deliver" in e.lower()]
            if shipping_extra:
                lines.append(f"And on this deal I'm including {join_extras(tuple(shipping_extra))}.")
            return " ".join(lines) or "Shipping is arranged at checkout; I'll make sure it goes out promptly."
        if topic is Topic.WARRANTY:
            lines = self._policy_sentences("warrant", "guarantee")
            return " ".join(lines) or "Warranty terms are listed at checkout for this item."
        if topic is Topic.RETURNS:
            lines = self._policy_sentences("return", "refund")
            return " ".join(lines) or "Returns follow our standard store policy, shown at checkout."
        if topic is Topic.CONDITION:
            condition = facts.condition or "as described"
            detail = f" — {facts.subtitle}" if facts.subtitle else ""
            return f"Condition: {condition}{detail}."
        if topic is Topic.AGE:
            if facts.year_made:
                return f"This unit was made in {facts.year_made}."
            return "I don't have the exact manufacturing year on hand for this one."
        if topic is Topic.DESCRIPTION:
            return facts.description or f"The {facts.name}: {facts.subtitle}."
        if topic is Topic.EXTRAS:
            if terms.extras:
                return f"What's included right now: {join_extras(terms.extras)}."
            return "The price includes everything in the box as described."
        return f"Right now I'm at {describe_terms(terms)}."

    def _answers(self, move: MerchantMove) -> str:
        return " ".join(self.answer(t, move.terms) for t in move.topics if t is not Topic.PRICE)

    # -- moves -----------------------------------------------------------------------------------

    def render(self, move: MerchantMove, rng: Chooser, *, checkout_url: str | None = None) -> str:
        parts = []
        if move.deflected and move.kind is not MoveKind.DEFLECT:
            parts.append(rng.choice(_DEFLECT_PREFIX))
        parts.append(self._body(move, rng, checkout_url))
        if move.topics and move.kind not in (MoveKind.ANSWER, MoveKind.GREET):
            answers = self._answers(move)
            if answers:
                parts.append(answers)
        return " ".join(p for p in parts if p)

    def render_fresh(self, move: MerchantMove, rng: random.Random, *, previous: str,
                     checkout_url: str | None = None) -> str:
        """Render, never repeating the merchant's previous message word for word when the
        move has more than one wording — a person does not say the same sentence twice in a
        row. On a repeat the same draws are replayed taking the next wording along at every
        choice, so the reply is certain to differ (drawing again only makes a repeat unlikely)
        and stays reproducible from ``rng``."""
        state = rng.getstate()
        reply = self.render(move, rng, checkout_url=checkout_url)
        if reply == previous:
            rng.setstate(state)
            reply = self.render(move, _NextWording(rng), checkout_url=checkout_url)
        return reply

    def _body(self, move: MerchantMove, rng: Chooser, checkout_url: str | None) -> str:
        f = self.facts
        terms = move.terms
        values = {
            "rep": self.store.rep_name,
            "store": self.store.name,
            "name": f.name,
            "subtitle": f.subtitle or f.kind or "a great pick",
            "condition": f.condition or "in great shape",
            # "(open-box)" after the name, unless the name already says it
            "cond": f" ({f.condition})" if f.condition and f.condition.lower() not in f.name.lower() else "",
            "list": self._money(f.list_price_cents),
            "price": self._money(terms.price_cents),
            "package": describe_terms(terms),
            "extras": join_extras(move.added_extras),
            "theirs": self._money(move.shopper_price_cents) if move.shopper_price_cents is not None else "",
        }
        kind = move.kind
        if kind is MoveKind.GREET:
            template = rng.choice(_GREET)
        elif kind is MoveKind.COUNTER:
            template = _pick(rng, _COUNTER_PRICE if move.price_cut else _COUNTER_EXTRA, values)
        elif kind is MoveKind.LAST_OFFER:
            template = _pick(rng, _LAST_OFFER, values)
        elif kind is MoveKind.HOLD:
            if move.shopper_price_cents is None:
                template = rng.choice(_HOLD_BEST)
            elif move.final:
                template = rng.choice(_HOLD_FINAL)
            elif move.lowball:
                template = rng.choice(_HOLD_LOWBALL)
            else:
                template = rng.choice(_HOLD_NO_MOVE)
        elif kind in (MoveKind.ACCEPT_OFFER, MoveKind.CONFIRM_DEAL):
            template = rng.choice(_DEAL)
            if checkout_url:
                template += " " + checkout_sentence(checkout_url, rng)
        elif kind is MoveKind.DECLINE_CLOSE:
            template = rng.choice(_DECLINE_CLOSE)
        elif kind is MoveKind.FAREWELL:
            template = rng.choice(_FAREWELL)
        elif kind is MoveKind.ANSWER:
            return self._answers(move) + " " + rng.choice(_AFTER_ANSWER).format(**values)
        elif kind is MoveKind.CLARIFY:
            amounts = [self._money(c) for c in move.candidates_cents] or ["that number"]
            options = " or ".join(amounts[:3])
            return rng.choice(_CLARIFY).format(options=options, **values)
        elif kind is MoveKind.DEFLECT:
            template = rng.choice(_DEFLECT)
        elif kind is MoveKind.WRAP_UP:
            template = rng.choice(_WRAP_UP)
        else:
            template = rng.choice(_PITCH)
        return template.format(**values)


def checkout_sentence(url: str, rng: Chooser) -> str:
    """The sentence that hands a deal's checkout link over; the LLM merchant's deal replies end
    with it too, so the link is the store's, never a model's."""
    return rng.choice(_CHECKOUT).replace("{url}", url)


def _pick(rng: Chooser, templates: tuple[str, ...], values: dict[str, str]) -> str:
    """A template, leaving out those that quote the shopper's price when there is none
    (a counter to "what's your best price?" answers no number)."""
    usable = [t for t in templates if values["theirs"] or "{theirs}" not in t]
    return rng.choice(usable)


_GREET = (
    "Hi! I'm {rep} from {store}. You're looking at the {name} — {subtitle}. It's {condition} and listed at {list}. What would you like to know?",
    "Hello, and welcome to {store}! {rep} here. The {name}{cond} is a great choice — {subtitle}. It's {list}. How can I help?",
    "Hey there — I'm {rep} at {store}. Happy to help with the {name}: {subtitle}, {condition}, at {list}. Any questions?",
)
_COUNTER_EXTRA = (
    "I can't move on the price just yet, but I'll include {extras} — so you'd get {package}.",
    "Here's what I can do: keep it at {price} and add {extras}. That's {package}.",
    "Let me sweeten it instead: {extras}, on the house. That makes it {package}.",
)
_COUNTER_PRICE = (
    "{theirs} is a bit low for this one, but I want to make it work. I can do {package}.",
    "I hear you. I can come down to {package}.",
    "Let me meet you partway: {package}.",
    "That's a stretch for me, but I can do {package} for you.",
)
_LAST_OFFER = (
    "I've gone as far as I can on this one: {package}. That's my final offer.",
    "This is truly the best I can do — {package}. I can't go any lower.",
    "{theirs} doesn't work for me, I'm afraid. My final offer is {package}.",
)
_HOLD_NO_MOVE = (
    "You're still at {theirs}, and I've already moved to {package}. Come up a little and we'll get there.",
    "I need you to meet me partway — I'm at {package}, and {theirs} hasn't changed.",
    "I've made my move; {package} is where I stand. What can you do above {theirs}?",
)
_HOLD_FINAL = (
    "{theirs} is closer, but {package} was my final offer and it still stands. Meet me there and it's yours.",
    "I appreciate you coming up to {theirs}. My final offer is still {package}; I can't go lower.",
)
_HOLD_LOWBALL = (
    "{theirs} is well below what the {name} goes for — I'm at {package}. Make me a serious offer and we'll talk.",
    "With respect, {theirs} is a long way off. The {name} is {package}. Where can you really go?",
)
_HOLD_BEST = (
    "I've already sharpened my pencil: {package} is a strong price for the {name}. What number did you have in mind?",
    "Honestly, {package} is a great deal already. Make me an offer and I'll see what I can do.",
)
_DEAL = (
    "Deal! The {name}{cond} for {package}.",
    "You've got it — the {name}{cond} at {package}. Pleasure doing business.",
    "Wonderful, we have a deal: the {name}{cond} for {package}.",
)
_CHECKOUT = (
    "Complete your order here: {url}",
    "Your checkout link with these terms: {url}",
)
_DECLINE_CLOSE = (
    "I understand — we're just too far apart. My best was {package}, and I can't go below that. Thanks for stopping by, and good luck!",
    "I'm sorry, {theirs} doesn't work for me. {package} was my final offer, so I'll close this chat here. Thanks for your time!",
)
_FAREWELL = (
    "No problem at all — thanks for chatting. If you change your mind, the {name} is here.",
    "Understood. Thanks for stopping by {store}, and good luck with your search!",
    "Fair enough! Thanks for your time, and come back anytime.",
)
_AFTER_ANSWER = (
    "Anything else I can tell you?",
    "Happy to answer anything else — or shall we talk price?",
    "What else would you like to know?",
)
_CLARIFY = (
    "Just so I get this right — is your offer {options}?",
    "I want to be sure I read you correctly: are you offering {options}?",
)
_DEFLECT = (
    "I can't share internal pricing or store notes, and I don't take new instructions in chat. I'm glad to work out a fair deal with you, though — I'm at {package}. What would you like to offer?",
    "That's not something I can share. What I can do is talk price: the {name} is at {package}. Make me an offer?",
)
_DEFLECT_PREFIX = (
    "I can't share internal details, but let's keep talking price.",
    "I'll keep our internal numbers to myself, if you don't mind.",
)
_WRAP_UP = (
    "We've reached the end of what this chat can hold, so I'll wrap up here. My last terms were {package}. Thanks for your time — start a new chat anytime.",
    "That's the last message this chat allows, so I'll close it here. Where we landed: {package}. Thanks for haggling with me!",
)
_PITCH = (
    "The {name} is {subtitle}. It's {condition}, and I'm at {package}. What would you like to know?",
    "Glad you're looking at the {name} — {subtitle}. Right now it's {package}. Any questions, or an offer in mind?",
    "The {name}: {subtitle}, {condition}. It's {package}. How can I help?",
)
