"""Turning a shopper's chat turn into an :class:`~haggler.language.intents.Intent`.

Two inputs are accepted:

* a structured JSON message (``{"action": "offer", "price": 520}``), which agents should prefer
  because it cannot be misread — malformed ones raise :class:`StructuredMessageError` so the
  caller can tell the agent exactly what to fix;
* free text, read with hand-written, pre-compiled regexes rather than a model: this runs on every
  turn, must be deterministic, and must never raise.

The free-text rules are deliberately conservative about money, because a misread amount can close
a deal at the wrong price. A number counts as an amount only when the writing says it is money (a
currency sign or word, a ``k`` suffix, an offer phrase such as "can you do", or a message that is
just the number). Years, model numbers, units ("30-day", "2 years"), percentages and negated
amounts ("but not 550") are not offers, and when several amounts remain with no clear choice the
result is AMBIGUOUS so the merchant can ask rather than guess.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from decimal import ROUND_FLOOR, Decimal
from typing import Any

from haggler.language.intents import Intent, IntentKind, Topic
from haggler.language.screening import manipulation_in, normalize_text
from haggler.money import offered_cents, to_cents


class StructuredMessageError(ValueError):
    """A JSON message that names an action but cannot be turned into an intent."""


# --------------------------------------------------------------------------- structured messages

_ACTIONS: dict[str, IntentKind] = {
    "offer": IntentKind.OFFER,
    "accept": IntentKind.ACCEPT,
    "walk_away": IntentKind.WALK_AWAY,
    "reject": IntentKind.WALK_AWAY,
    "decline": IntentKind.WALK_AWAY,
    "leave": IntentKind.WALK_AWAY,
    "question": IntentKind.QUESTION,
    "best_price": IntentKind.BEST_PRICE,
}
_DOCUMENTED_ACTIONS = "offer, accept, walk_away, question, best_price"
_TOPIC_NAMES = ", ".join(topic.value for topic in Topic)


def parse_structured_message(text: str) -> Intent | None:
    """Map a JSON ``{"action": ...}`` message onto an intent, or None when ``text`` is free text.

    Anything that is not a JSON object with an ``"action"`` key is free text (None), so a shopper
    who happens to type braces is not punished. Once a message does name an action, mistakes are
    errors rather than guesses: silently treating ``{"action": "offer", "price": "cheap"}`` as
    chat would leave the agent wondering why its offer was ignored.
    """
    stripped = text.strip()
    if not stripped.startswith("{"):
        return None
    try:
        message = json.loads(stripped)
    except (ValueError, RecursionError):
        return None
    if not isinstance(message, dict) or "action" not in message:
        return None

    action = message["action"]
    if not isinstance(action, str):
        raise StructuredMessageError(f"'action' must be a string, got {action!r}")
    kind = _ACTIONS.get(action.strip().lower())
    if kind is None:
        raise StructuredMessageError(f"unknown action {action!r}; expected one of {_DOCUMENTED_ACTIONS}")

    if kind is IntentKind.OFFER:
        return Intent(
            IntentKind.OFFER,
            amount_cents=_structured_price(message),
            requested_extras=_structured_extras(message),
        )
    if kind is IntentKind.QUESTION:
        return Intent(IntentKind.QUESTION, topics=(_structured_topic(message),))
    return Intent(kind)


def _structured_price(message: dict[str, Any]) -> int:
    if "price" not in message:
        raise StructuredMessageError("an offer needs a 'price' (a positive number in the store currency)")
    try:
        return offered_cents(message["price"])
    except ValueError as exc:
        raise StructuredMessageError(f"'price' {exc}") from exc


def _structured_extras(message: dict[str, Any]) -> tuple[str, ...]:
    extras = message.get("extras")
    if extras is None:
        return ()
    if not isinstance(extras, list) or not all(isinstance(item, str) for item in extras):
        raise StructuredMessageError(f"'extras' must be a list of strings, got {extras!r}")
    return tuple(item.strip() for item in extras if item.strip())


def _structured_topic(message: dict[str, Any]) -> Topic:
    topic = message.get("topic")
    if topic is None:
        return Topic.DESCRIPTION
    if isinstance(topic, str):
        try:
            return Topic(topic.strip().lower())
        except ValueError:
            pass
    raise StructuredMessageError(f"unknown topic {topic!r}; expected one of {_TOPIC_NAMES}")


# --------------------------------------------------------------------------- free text: amounts

#: A number, with an optional currency marker before (``pre``) or after (``post``) and an optional
#: "k". The guards keep out numbers glued to words or other numbers (HP07, V15, S24, 15th, 2kg,
#: 10%, 1.2.3, 24/7, 10:30). Reads lower-case text; the classifieds reader uses it too.
AMOUNT = re.compile(
    r"""
    (?<![\w.,#/:'])
    (?P<pre>(?:us\$|usd|eur|gbp|cad|aud|[$€£])\s?)?
    (?P<num>[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]{1,2})?|[0-9]+(?:\.[0-9]{1,2})?)
    (?P<k>k)?
    (?:-?ish)?
    (?![\w%"″]|[.,:/][0-9])
    (?P<post>\s?[$€£]|\s?(?:bucks|dollars?|usd|eur|euros?|gbp|pounds?|quid|cad|aud)\b)?
    """,
    re.VERBOSE,
)
#: The currency each marker :data:`AMOUNT` reads stands for (ISO 4217), keyed by the marker
#: stripped; "$" is the US dollar.
MARKER_CURRENCY = {
    "$": "USD", "us$": "USD", "usd": "USD", "bucks": "USD", "dollar": "USD", "dollars": "USD",
    "€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR",
    "£": "GBP", "gbp": "GBP", "pound": "GBP", "pounds": "GBP", "quid": "GBP",
    "cad": "CAD", "aud": "AUD",
}
_PERCENT = re.compile(r"(?<![\w.,#/:])(?P<num>[0-9]{1,3}(?:\.[0-9]{1,2})?)\s?(?:%|per\s?cent\b|pct\b)")
_PHONE = re.compile(
    r"(?<![\w.])\+?(?:[0-9]{1,2}[\s.-])?\(?[0-9]{3}\)?[\s.-]?[0-9]{3}[\s.-][0-9]{4}(?![0-9])|[0-9]{8,}"
)

# Words that make the number before them a quantity, duration or spec rather than money.
_UNIT_AFTER = re.compile(
    r"""\s*-?\s*(?:
        (?:second|sec|minute|min|hour|hr|day|night|week|wk|month|mo|year|yr|decade|time|cycle|charge
          |star|unit|item|piece|pc|pack|set|pair|bag|kid|person|user|owner|seat|door|port|core|thread
          |speed|gear|colou?r|page|photo|pic|picture|question|review|mile|km|meter|metre|cm|mm|inch
          |ft|foot|yard|kg|gram|lb|gb|tb|mb|ghz|mhz|hz|mp|megapixel|watt|volt|mah|amp|oz|ml|liter
          |litre|gallon|rpm|fps|dpi|generation|gen|percent|pct|store|shop)s?
      | batter(?:y|ies) | box(?:es)? | inches | feet | people | children | am | pm | o'?clock
      | per\s?cent | of\s+(?:them|those|these|us|each|the)
    )\b""",
    re.VERBOSE,
)
# Phrases just before a number that make it an offer: "can you do", "I'll pay", "how about", ...
_OFFER_LEAD = re.compile(
    r"""\b(?:do|pay|paying|offer|offering|take|give|go(?:\s+(?:to|up\s+to|as\s+high\s+as))?|at|for|about
        |around|say|make\s+it|(?:do|pay|go|offer|spend|afford)\s+is
        |meet(?:\s+(?:you|me))?(?:\s+(?:at|in\s+the\s+middle\s+at))?|settle(?:\s+(?:on|at|for))?|accept
        |spend|between|from|budget(?:\s+is)?|max(?:imum)?(?:\s+is)?|limit(?:\s+is)?|offer\s+is
        |think(?:ing)?(?:\s+(?:of|about))?|thoughts\s+on|than|above|over|under|below|up\s+to|afford|swing
        |stretch\s+to
        |counter(?:\s+(?:at|with))?|manage|approximately|roughly|maybe|perhaps)
      (?:\s+(?:you|ya|u|me|it))?
      \s*:?\s*
      (?:(?:like|maybe|just|only|around|about|roughly|say|perhaps|something\s+like|an?\s+even|even)\s+)*$
    """,
    re.VERBOSE,
)
# ... and just after it: "500?", "500 ok?", "500, final", "500 is fair", "500 if you include the case".
_OFFER_TAIL = re.compile(
    r"""\s*(?:\?
      | (?:ok(?:ay)?|work|works|fine|good|cool|alright|fair|possible|doable)\s*\?
      | ,?\s*(?:final|firm|cash|tops|max|flat|total|out\s+the\s+door|shipped|delivered|no\s+more
         |and\s+(?:it'?s|we|i'?ll|you)|is\s+(?:my|fair|ok|okay|reasonable|fine|good)
         |for\s+(?:it|this|that|both|the)|would\s+(?:work|be)|if\s+(?:you|it)|plus|including
         |be\s+(?:ok|okay|fine|enough|acceptable|possible|doable|alright|reasonable|too\s+low)
         |(?:sounds?|seems?)\s+(?:fair|good|right|reasonable|ok|okay))\b)""",
    re.VERBOSE,
)
# Filler that may surround a number when the message is "essentially just the number".
_FILLER_ONLY = re.compile(
    r"[\W_]*(?:(?:ok(?:ay)?|hmm+|um+|uh+|well|then|so|maybe|like|just|alright|fine|say|please|pls"
    r"|i\s+guess|perhaps|sure)[\W_]*)*"
)
# Connectors between alternative amounts: "500 or 520", "between 450 and 500", "450-500".
_PARTNER = re.compile(r"\s*[?!]*\s*(?:or|and|to|-|–|—|/|,)\s*(?:(?:maybe|even|like|perhaps)\s+)?")

# Negation before an amount in the same clause ("can't do 550", "but not 550", "won't pay 550"),
# except questions ("can't you do 500?", "why not 500?") and ceilings ("no more than 500").
_CLAUSE_BREAK = re.compile(r"[,;.!?]|\b(?:but|how\s+about|what\s+about|instead|though|although|however)\b")
_NEGATED_BEFORE = re.compile(
    r"(?<!why )\b(?:not|never|no|won'?t|can'?t|cannot|couldn'?t|wouldn'?t|shouldn'?t|don'?t|didn'?t"
    r"|isn'?t|ain'?t|refuse\s+to)\b"
    r"(?!\s+(?:you|u|we|i|know|mind|think|care|suppose|see|believe)\b)"
    r"(?:\s+\S+){0,4}?\s*$"
)
_CEILING_BEFORE = re.compile(
    r"\b(?:more|higher|over|above|beyond|past|greater|less|lower|under|below)(?:\s+than)?\s*:?\s*$"
)
# Negation after an amount: "550 is too much", "550? no way", "550 won't work".
_NEGATED_AFTER = re.compile(
    r"""(?:\s*[?!.]+)?\s*(?:no\s+way|nope|nah|no\b(?!\s+(?:more|less|higher|lower|problem)))
      | (?:\s*[?!.,]+)?\s*(?:is|'s|seems|sounds|feels|looks|was|would\s+be|it'?s|that'?s)\s+
        (?:(?:way|a\s+bit|a\s+little|just|kind\s+of|kinda|still|far|rather|pretty|really|much|definitely
           |honestly|totally)\s+)*
        (?:too\b|out\s+of\b|over\s+(?:my|the)\b|above\s+(?:my|the)\b|beyond\b|more\s+than\s+i\b|a\s+lot\b
           |steep|crazy|insane|ridiculous|expensive|pricey|high\b|much\b|not\b(?!\s+bad)|a\s+no\b
           |a\s+stretch|outrageous|nuts)
      | \s*(?:won'?t|doesn'?t|does\s+not|will\s+not|isn'?t|is\s+not|ain'?t|can'?t)\s+(?:work|happen|do|fly|be)
      | (?:\s*[?!.]+)?\s*(?:(?:way|much|far)\s+)?too\s+(?:much|high|steep|expensive|rich|pricey)
    """,
    re.VERBOSE,
)
# Someone else's price being quoted, not offered: "you said 550", "listed at 549", "it was 600".
_QUOTED_PRICE_BEFORE = re.compile(
    r"\b(?:you\s+said|you'?re\s+asking|you\s+are\s+asking|asking(?:\s+price)?(?:\s+(?:of|is))?"
    r"|listed(?:\s+(?:at|for))?|list\s+price(?:\s+(?:of|is))?|your\s+price(?:\s+(?:of|is))?"
    r"|retails?(?:\s+(?:at|for))?|msrp(?:\s+(?:of|is))?|originally|was)\s*:?\s*$"
)
# Years: "the 2019 model", "from 2021", "2020 version".
_YEAR_BEFORE = re.compile(
    r"\b(?:the|a|from|in|since|year|model|made|built|bought|circa|of|is\s+it|was\s+it|before|after)\s*$"
)
_YEAR_AFTER = re.compile(
    r"\s*(?:model|version|edition|release|vintage|year|or\s+(?:newer|older|later|earlier))\b"
)
# Discounts: "$50 off", "knock 50 off", "a discount of $50", "10% off", "10 percent student discount".
_DOLLARS_OFF_AFTER = re.compile(r"\s*(?:off|discount|less|cheaper)\b")
_PERCENT_OFF_AFTER = re.compile(r"\s*(?:\w+\s+)?(?:off|discount|less|cheaper|lower|reduction|down)\b")
_DISCOUNT_BEFORE = re.compile(
    r"\b(?:discount\s+of|reduction\s+of|knock(?:\s+(?:it\s+)?off)?|shave(?:\s+off)?|take\s+off|minus"
    r"|down\s+by|lower\s+by)\s*:?\s*(?:(?:an?|another|extra)\s+)?$"
)
# "can you do 10%?" / "give me 10%" — a bare percentage after an offer verb is a discount too.
_PERCENT_LEAD = re.compile(r"\b(?:do|give\s+(?:me|us)|get|offer)\s+(?:(?:an?|another|extra)\s+)?$")

_WINDOW = 48  # characters of context examined either side of a number
_MIN_PLAIN_CENTS = 10_00  # with no asking price to compare against, "take 2" is a quantity, not $2

# Cheap word-level guards for the context patterns above (see _scan_amounts).
_NEGATION_WORDS = frozenset(
    "not never no t cannot cant wont dont didnt isnt aint couldnt wouldnt shouldnt refuse".split()
)
_QUOTED_PRICE_WORDS = frozenset("said asking listed list price retail retails msrp originally was".split())
_DIGIT = re.compile(r"[0-9]")
_PHONE_HINT = re.compile(r"[0-9]{3}[\s.)-]{0,2}[0-9]{3}")


@dataclass(slots=True)
class _Amount:
    start: int
    end: int
    cents: int
    lead: bool  # written right after an offer phrase ("can you do 500"): the preferred choice
    money: bool  # clearly money so far
    partnered: bool = False  # joined to a neighbouring amount by "or"/"and"/"-": a real alternative


@dataclass(slots=True)
class _Scan:
    text: str
    may_negate: bool  # the turn holds a negation word, so negation before an amount is possible
    amounts: list[_Amount] = field(default_factory=list)
    discount_wanted: bool = False  # "10% off" with no asking price to apply it to
    rejected_amount: bool = False  # an amount was negated ("550 is too much")
    year_mentioned: bool = False  # "the 2019 model"

    def negated(self, start: int, end: int) -> bool:
        """Whether the number at ``start:end`` is rejected ("not 550", "550 is too much")."""
        text = self.text
        if self.may_negate:
            before = _CLAUSE_BREAK.split(text[max(0, start - _WINDOW) : start])[-1]
            if _NEGATED_BEFORE.search(before) and not _CEILING_BEFORE.search(before):
                return True
        return _NEGATED_AFTER.match(text, end, end + _WINDOW) is not None

    def add_discount(self, start: int, end: int, offer_cents: int | None) -> None:
        """Record "N off": an offer when there is an asking price it fits under, else a plain request."""
        if offer_cents is not None and offer_cents > 0:
            self.amounts.append(_Amount(start, end, offer_cents, lead=True, money=True))
        else:
            self.discount_wanted = True


def _scan_percentages(scan: _Scan, reference_cents: int | None) -> None:
    text = scan.text
    for m in _PERCENT.finditer(text):
        start, end = m.span()
        before = text[max(0, start - _WINDOW) : start]
        if not (
            _PERCENT_OFF_AFTER.match(text, end, end + _WINDOW)
            or _DISCOUNT_BEFORE.search(before)
            or _PERCENT_LEAD.search(before)
        ):
            continue  # "100% authentic"
        percent = Decimal(m["num"])
        if not 0 < percent < 100 or scan.negated(start, end):
            continue
        offer = None
        if reference_cents is not None:
            exact = Decimal(reference_cents) * (100 - percent) / 100
            offer = int(exact.quantize(Decimal(1), rounding=ROUND_FLOOR))  # against the shopper, as offered_cents
        scan.add_discount(start, end, offer)


def _scan_amounts(text: str, words: set[str], reference_cents: int | None) -> _Scan:
    """The amounts in ``text`` that are clearly money and not negated, in written order."""
    if _DIGIT.search(text) is None:
        return _Scan(text, may_negate=False)
    if _PHONE_HINT.search(text):
        text = _PHONE.sub(lambda m: " " * len(m.group()), text)
    scan = _Scan(text, may_negate=not words.isdisjoint(_NEGATION_WORDS))
    if "%" in text or "per" in words or "percent" in words or "pct" in words:
        _scan_percentages(scan, reference_cents)
    may_quote = not words.isdisjoint(_QUOTED_PRICE_WORDS)

    candidates: list[_Amount] = []
    for m in AMOUNT.finditer(text):
        start, end = m.span()
        num, has_k, has_currency = m["num"], bool(m["k"]), bool(m["pre"] or m["post"])
        if not m["post"] and _UNIT_AFTER.match(text, end):
            continue  # "30-day", "2 years", "5 stars"
        try:
            cents = to_cents(num.replace(",", "")) * (1000 if has_k else 1)
        except ValueError:  # an absurd number is not an offer
            continue
        if cents == 0:
            continue
        before = text[max(0, start - _WINDOW) : start]

        if _DOLLARS_OFF_AFTER.match(text, end) or _DISCOUNT_BEFORE.search(before):
            if not scan.negated(start, end):
                scan.add_discount(start, end, None if reference_cents is None else reference_cents - cents)
            continue
        if may_quote and _QUOTED_PRICE_BEFORE.search(before):
            continue  # "you said 550": their price, not ours
        if scan.negated(start, end):
            scan.rejected_amount = True
            continue

        plain = not has_currency and not has_k
        year_like = plain and len(num) == 4 and num[:2] in ("19", "20")
        if year_like and (_YEAR_BEFORE.search(before) or _YEAR_AFTER.match(text, end)):
            scan.year_mentioned = True
            continue
        if plain and not _plausible(cents, "." in num, year_like, reference_cents):
            continue
        lead = _OFFER_LEAD.search(before) is not None
        # A year-like number needs an offer phrase: "is it 2019 or 2020?" is not a price.
        money = lead or (
            not year_like and (has_currency or has_k or _OFFER_TAIL.match(text, end) is not None)
        )
        candidates.append(_Amount(start, end, cents, lead=lead, money=money))

    links = _link_alternatives(text, candidates)
    if candidates and not scan.amounts and not any(a.money for a in candidates):
        _accept_bare_numbers(text, candidates, chained=all(links))
    scan.amounts.extend(a for a in candidates if a.money)
    scan.amounts.sort(key=lambda a: a.start)
    return scan


def _plausible(cents: int, has_decimals: bool, year_like: bool, reference_cents: int | None) -> bool:
    """Whether a number written without a currency marker could be a price for this item."""
    if reference_cents is None:
        return has_decimals or cents >= _MIN_PLAIN_CENTS
    if year_like:  # "2019" against a $549 asking price is a year
        return reference_cents / 4 <= cents <= reference_cents * 4
    return reference_cents / 50 <= cents <= reference_cents * 20


def _accept_bare_numbers(text: str, candidates: list[_Amount], *, chained: bool) -> None:
    """A message that is essentially just a number ("500", "hmm, 480 then", "500 or 520") is money.
    ``chained``: every neighbouring pair of candidates is linked as alternatives."""
    rest = text[: candidates[0].start] + " " + text[candidates[-1].end :]
    if chained and _FILLER_ONLY.fullmatch(rest):
        for amount in candidates:
            amount.money = True


def _link_alternatives(text: str, amounts: list[_Amount]) -> list[bool]:
    """Join amounts written as alternatives ("500 or 520", "450-500"); money spreads along links.
    Returns, for each neighbouring pair, whether it is linked."""
    links = [
        _PARTNER.fullmatch(text, left.end, right.start) is not None
        for left, right in zip(amounts, amounts[1:], strict=False)
    ]
    for i, linked in enumerate(links):
        if linked:
            amounts[i].partnered = amounts[i + 1].partnered = True
            amounts[i + 1].money = amounts[i + 1].money or amounts[i].money
    for i in reversed(range(len(links))):
        if links[i]:
            amounts[i].money = amounts[i].money or amounts[i + 1].money
    return links


def _choose(amounts: list[_Amount]) -> tuple[IntentKind, int | None, tuple[int, ...]]:
    """One distinct amount is an offer; several are ambiguous unless exactly one has an offer phrase."""
    distinct = list(dict.fromkeys(a.cents for a in amounts))
    if len(distinct) == 1:
        return IntentKind.OFFER, distinct[0], ()
    led = {a.cents for a in amounts if a.lead}
    if len(led) == 1 and not any(a.partnered for a in amounts if a.cents in led):
        return IntentKind.OFFER, led.pop(), ()
    return IntentKind.AMBIGUOUS, None, tuple(distinct)


# --------------------------------------------------------------------------- free text: the rest

# A following "but"/"if"/"unless" turns acceptance or walking away into a condition:
# "sounds good but what about shipping?", "no thanks, unless you can do better".
_QUALIFIER = re.compile(
    r"\b(?:but|unless|if|as\s+long\s+as|provided|on\s+condition)\b(?!\s+(?:thanks?|thank\s+you|cheers)\b)"
)
# Each many-branched pattern below comes with the words every one of its matches contains; the
# pattern is only tried when the turn holds one of them, which keeps typical turns fast.
_ACCEPT_WORDS = frozenset(
    "deal sold done agreed accepted take buy grab sounds let lets accept agree please works got count"
    " ok okay k kk alright fine yes yeah yep yup sure perfect great".split()
)
_ACCEPT = re.compile(
    r"""\b(?:it'?s|that'?s|we(?:'ve|\s+have)?(?:\s+got)?|you(?:'ve|\s+have)?\s+got(?:\s+yourself)?)
        \s+a\s+deal\b
      | ^[\W_]*(?:(?:ok(?:ay)?|alright|fine|great|perfect|cool|then|yes|yeah|yep|sure)[\W_]+)*
        (?:deal|sold|done|agreed|accepted)\b(?!\s+(?:out|yet|with)\b)
      | \bdone\s+deal\b
      | \bi(?:'ll|\s+will|'d|\s+would)\s+(?:take|buy|grab)\s+(?:it|that|this|one)\b
      | \bsounds\s+(?:good|great|fair|perfect|fine|like\s+a\s+(?:deal|plan))\b
      | \blet'?s\s+(?:do\s+(?:it|this|that)|go|proceed|make\s+it\s+happen)\b
      | \bi\s+(?:accept|agree)\b | \bagreed\b | \baccepted\b
      | \byes,?\s+please\b | \bworks\s+for\s+me\b | \bthat\s+works\b
      | \byou\s+got\s+it\b | \bcount\s+me\s+in\b | \btake\s+my\s+money\b
      | ^[\W_]*(?:ok(?:ay)?|k|kk|alright|fine|yes|yeah|yep|yup|sure|perfect|great)[\W_]*$
    """,
    re.VERBOSE,
)
_WALK_AWAY_WORDS = frozenset(
    "no thanks thank ty rich pass passing interested bye goodbye ya cya farewell forget out elsewhere"
    " mind nevermind nvm deal walk walking not done up".split()
)
_WALK_AWAY = re.compile(
    r"""\bno,?\s+(?:thanks?|thank\s+you|ty)\b | \bthanks?,?\s+but\s+no\b
      | \btoo\s+rich\s+for\s+(?:me|my\s+blood)\b
      | \bi(?:'ll|\s+will|'m\s+going\s+to|\s+am\s+going\s+to|'m\s+gonna)\s+pass\b
      | \bpass(?:ing)?\s+on\s+(?:this|that|it)\b | ^[\W_]*pass[\W_]*$
      | \b(?:not|no\s+longer)\s+interested\b
      | \b(?:good\s*-?\s*)?bye\b | \bsee\s+ya\b | \bcya\b | \bfarewell\b
      | \bforget\s+(?:it|about\s+it|the\s+whole\s+thing)\b
      | \b(?:i'?m|i\s+am)\s+out\b(?!\s+of\b)
      | \b(?:look|shop|go|buy|try)(?:ing)?\s+(?:\w+\s+)?elsewhere\b
      | \bnever\s*mind\b | \bnvm\b
      | \b(?:no|not\s+a)\s+deal\b
      | \bwalk(?:ing)?\s+away\b | \bi'?ll\s+walk\b
      | \bnot\s+(?:for\s+me|buying)\b | \b(?:i'?m|i\s+am|we'?re)\s+done\b | \bi\s+give\s+up\b
    """,
    re.VERBOSE,
)
_BEST_PRICE_WORDS = frozenset(
    "best do go better lower special lowest bottom come bring drop knock move discount discounts cheaper"
    " wiggle flexible flexibility negotiable any give cut too".split()
)
_BEST_PRICE = re.compile(
    r"""\bbest\s+(?:price|offer|deal|(?:you\s+)?can\s+do)\b
      | \b(?:do|go)\s+(?:any\s+|a\s+(?:bit|little)\s+|some(?:thing)?\s+)?(?:better|lower|cheaper|less)\b
      | \b(?:better|lower|special)\s+(?:price|deal|offer)\b | \blowest\b | \bbottom\s+(?:line|dollar)\b
      | \bcome\s+down\b | \bbring\s+(?:it|the\s+price)\s+down\b | \bdrop\s+(?:the\s+)?price\b
      | \bknock\s+(?:some(?:thing)?|a\s+(?:bit|little))\s+off\b | \bmove\s+on\s+(?:the\s+)?price\b
      | \bdiscounts?\b | \bcheaper\b | \bwiggle\s+room\b | \bflexib(?:le|ility)\b | \bnegotiable\b
      | \bany\s+(?:room|give)\b | \bgive\s+me\s+a\s+(?:deal|break)\b | \bcut\s+me\s+a\s+deal\b
      | \btoo\s+(?:much|expensive|pricey|high|steep)\b
    """,
    re.VERBOSE,
)
_TOPIC_WORDS = frozenset(
    "ship ships shipping shipped shipment deliver delivery deliveries delivered delivers arrive arrives"
    " arrival arriving postage courier warranty warranties warrantied guarantee guaranteed guarantees"
    " return returns returned returnable returning refund refunds refunded refundable condition scratch"
    " scratches scratched scratchy used refurb refurbished damage damaged damages dent dents dented wear"
    " worn brand open flaw flaws defect defects crack cracks cracked new how what which year model when"
    " tell spec specs specification specifications feature features detail details describe description"
    " dimensions more color colors colour colours throw throwing include includes included including"
    " bundle bundles bundled bundling accessory accessories extra extras freebie freebies come comes"
    " sweeten price cost asking".split()
)
_TOPICS = re.compile(
    r"""(?P<shipping>\b(?:ship(?:s|ping|ped|ment)?|deliver(?:y|ies|ed|s)?|arriv(?:e|es|al|ing)|postage
          |courier)\b)
      | (?P<warranty>\b(?:warrant(?:y|ies|eed)|guarantee[ds]?)\b)
      | (?P<returns>\b(?:return(?:s|ed|able|ing)?|refund(?:s|ed|able)?)\b)
      | (?P<condition>\b(?:condition|scratch(?:es|ed|y)?|used(?!\s+to\b)|refurb(?:ished)?|damaged?|damages
          |dent(?:s|ed)?|wear\s+and\s+tear|worn|brand[\s-]new|open[\s-]box|flaws?|defects?|crack(?:s|ed)?
          |is\s+it\s+new)\b|\bnew\s*\?)
      | (?P<age>\b(?:how\s+old|what\s+year|which\s+year|year\s+(?:made|of\s+manufacture|manufactured|built)
          |model\s+year|when\s+was\s+it\s+(?:made|built|manufactured|released|bought|purchased))\b)
      | (?P<description>\b(?:tell\s+me\s+(?:more\s+)?about|specs?|specifications?|features?|details?
          |what\s+is\s+it|what'?s\s+it|what\s+is\s+this|what'?s\s+this|describe|description|dimensions
          |how\s+big|more\s+info(?:rmation)?|colou?rs?)\b)
      | (?P<extras>\b(?:throw(?:ing)?\s+(?:\w+\s+){0,3}?in|includ(?:e|es|ed|ing)|bundl(?:e|es|ed|ing)
          |accessor(?:y|ies)|extras?|freebies?|comes?\s+with|sweeten)\b)
      | (?P<price>\b(?:how\s+much|what(?:'s|\s+is)\s+(?:the|its|it's)\s+(?:price|cost)|what\s+does\s+it\s+cost
          |asking\s+price)\b|\b(?:price|cost)\s*\?)
    """,
    re.VERBOSE,
)
_TOPIC_BY_GROUP = {topic.value: topic for topic in Topic}

_WORD = re.compile(r"[a-z]+")


def _unqualified(pattern: re.Pattern[str], text: str) -> bool:
    """Whether ``pattern`` occurs with no "but"/"if"/"unless" after its last occurrence."""
    matches = list(pattern.finditer(text))
    return bool(matches) and _QUALIFIER.search(text, matches[-1].end()) is None


def _topics(text: str, words: set[str], year_mentioned: bool) -> tuple[Topic, ...]:
    """The topics asked about, in written order without repeats."""
    found: dict[Topic, None] = {}
    if not words.isdisjoint(_TOPIC_WORDS):
        found = dict.fromkeys(_TOPIC_BY_GROUP[m.lastgroup] for m in _TOPICS.finditer(text) if m.lastgroup)
    if year_mentioned:
        found.setdefault(Topic.AGE)
    return tuple(found)


def _parse_free_text(text: str, reference_cents: int | None, manipulation: bool) -> Intent:
    """Free-text rules, in priority order: amounts, walking away, best price, acceptance, questions."""
    words = set(_WORD.findall(text))
    scan = _scan_amounts(text, words, reference_cents)
    topics = _topics(text, words, scan.year_mentioned)
    if scan.amounts:
        kind, amount, candidates = _choose(scan.amounts)
        return Intent(kind, amount, candidates, topics, manipulation)
    if not words.isdisjoint(_WALK_AWAY_WORDS) and _unqualified(_WALK_AWAY, text):
        kind = IntentKind.WALK_AWAY
    elif (
        scan.discount_wanted
        or scan.rejected_amount
        or not words.isdisjoint(_BEST_PRICE_WORDS) and _BEST_PRICE.search(text) is not None
    ):
        kind = IntentKind.BEST_PRICE
    elif not words.isdisjoint(_ACCEPT_WORDS) and _unqualified(_ACCEPT, text):
        kind = IntentKind.ACCEPT
    elif topics:
        kind = IntentKind.QUESTION
    else:
        kind = IntentKind.CHAT
    return Intent(kind, topics=topics, manipulation=manipulation)


def parse_shopper_turn(text: str, *, reference_cents: int | None = None) -> Intent:
    """Read one shopper turn: a structured JSON message if it is one, otherwise free text.

    ``reference_cents`` is the merchant's current asking price. It turns "10% off" and "$50 off"
    into concrete offers and rules out numbers that cannot be a price for this item ("take 2" on
    a $549 item). Free text never raises; a malformed structured message raises
    :class:`StructuredMessageError`. Every result carries the manipulation screening verdict, so
    the merchant can deflect probing whatever else the turn says.
    """
    normalized = normalize_text(text)
    manipulation = manipulation_in(normalized)
    intent = parse_structured_message(text)
    if intent is not None:
        return replace(intent, manipulation=manipulation)
    return _parse_free_text(normalized, reference_cents, manipulation)
