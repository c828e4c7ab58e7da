"""Reading a merchant's reply from the shopper's side.

A negotiate.v1 store answers every shopper turn with ``{message, closed, next}``. Our own store
adds a structured ``offer`` (and ``deal`` once agreed); other stores — ones whose merchant is
an LLM, say — send only the text. :func:`read_merchant_reply` turns either into a
:class:`MerchantReading`: the merchant's current asking price, the extras bundled with it,
whether it said the offer is final, and whether the chat ended with or without a deal.

Structured data, when present, wins over text. Free text is read with hand-written,
pre-compiled rules (no model), deterministic and never raising. The hard part is telling the
merchant's *own* price from other numbers in the same reply: the shopper's offer quoted back
("$450 is a bit low for this one, but I can do $520"), the list price ("it's normally $899"),
the value of an extra ("a $45 value"), a discount ("I'll knock $40 off"), model numbers and
specs ("V12", "2-day", "64 mm", "1,100 sq ft"). Each number gets a role from the words
around it, and the merchant's price is the last one that reads as the merchant's own.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from haggler.money import cents_or_none, to_cents

__all__ = ["MerchantReading", "read_merchant_reply", "split_extras"]


@dataclass(frozen=True, slots=True)
class MerchantReading:
    """What one merchant reply says, from the shopper's point of view."""

    #: The merchant's current asking price, when the reply states one.
    price_cents: int | None
    #: Descriptions of the extras included in the merchant's offer, as written.
    extras: tuple[str, ...] = ()
    #: The merchant said this is its final / last / best-it-can-do offer.
    final: bool = False
    #: A deal was concluded.
    deal: bool = False
    #: The chat is over.
    closed: bool = False
    #: The chat closed without a deal.
    walked_away: bool = False
    #: An amount off ("I'll knock $40 off") mentioned with no resulting price stated; the
    #: reader cannot apply it because it does not know the previous asking price.
    discount_cents: int | None = None
    #: The checkout link of a concluded deal, when given.
    checkout_url: str | None = None
    #: The price and extras are the store's own structured terms (its ``offer`` or ``deal``), not
    #: read from the text: what the store will bind, whatever its text says.
    structured: bool = False


# --------------------------------------------------------------------------- amounts

_AMOUNT = re.compile(
    r"""
    (?<![\w.,$€£¥/#-])
    (?P<cur>(?:us\$|ca\$|a\$|usd|eur|gbp|cad|aud|[$€£¥])\s?)?
    (?P<num>[0-9]{1,3}(?:,[0-9]{3})+(?:\.[0-9]{1,2})?|[0-9]+(?:\.[0-9]{1,2})?)
    (?P<k>k)?
    (?![\w%]|[.,][0-9])
    (?P<post>\s?(?:[$€£¥]|(?:dollars?|bucks|usd|eur|euros?|gbp|pounds?)\b))?
    """,
    re.VERBOSE,
)
_URL = re.compile(r"\b(?:https?://|www\.)\S+")

_DOLLARS = frozenset({"USD", "CAD", "AUD", "NZD", "SGD", "HKD"})
# The currencies a marker can stand for ("$" and "bucks": any dollar).
_MARKER_CURRENCIES: dict[str, frozenset[str]] = {
    "$": _DOLLARS, "dollar": _DOLLARS, "dollars": _DOLLARS, "bucks": _DOLLARS, "us$": frozenset({"USD"}),
    "usd": frozenset({"USD"}), "ca$": frozenset({"CAD"}), "cad": frozenset({"CAD"}), "a$": frozenset({"AUD"}),
    "aud": frozenset({"AUD"}), "€": frozenset({"EUR"}), "eur": frozenset({"EUR"}), "euro": frozenset({"EUR"}),
    "euros": frozenset({"EUR"}), "£": frozenset({"GBP"}), "gbp": frozenset({"GBP"}), "pound": frozenset({"GBP"}),
    "pounds": frozenset({"GBP"}), "¥": frozenset({"JPY", "CNY"}),
}


def _other_currency(m: re.Match[str], currency: str | None) -> bool:
    """Whether the amount is marked with a currency that cannot be ``currency`` (the deal's):
    "pay 400€" in a dollar negotiation is no price of it."""
    if currency is None:
        return False
    markers = [m[group].strip() for group in ("cur", "post") if m[group]]
    return any(currency.upper() not in _MARKER_CURRENCIES.get(marker, frozenset({currency.upper()}))
               for marker in markers)

# What may follow a number written without a currency marker for it to count as a price.
_BARE_FOLLOWER = re.compile(
    r"""(?:\s*(?:$|[.,!?;:)\]]|[—–]|-\s))
      | \s+(?:and|with|plus|is|was|would|will|works?|sounds?|for|if|but|or|then|today|sorry|final
          |firm|flat|even|total|including|includes|shipped|delivered|tops|max|it|that|doesn'?t|isn'?t
          |won'?t|seems|feels|out|on|&)\b""",
    re.VERBOSE,
)
# What may come just before such a number: a price phrase or the start of a clause.
_BARE_LEAD = re.compile(
    r"""(?:^|[\s(])(?:do|at|to|than|for|is|it'?s|be|of|offer|price|pay|go|meet|say|make\s+it|around|about
          |only|just|least|below|under|above|over|from|was|were|now|need|want|get|take|accept|counter(?:ed)?
          |move|drop|down|up|so|then|offering|your|my|our|yours)\s*:?\s*$
      | (?:^|[.!?;:,—–(]\s*|\b(?:hmm+|ok(?:ay)?|well|alright|sure|right|look|honestly)[,!]?\s*)$""",
    re.VERBOSE,
)
_YEAR_BEFORE = re.compile(r"\b(?:in|since|from|year|model|made|built|the|a|of|circa|early|late|mid)\s*$")
_YEAR_AFTER = re.compile(r"\s*(?:model|version|edition|line|colou?rway|release|season|vintage)\b")

# -- roles, tried in this order ------------------------------------------------------------------

# An amount off, not a price.
_DISCOUNT_AFTER = re.compile(r"\s*(?:off|discount|less|cheaper|reduction|knocked\s+off|taken\s+off)\b")
_DISCOUNT_BEFORE = re.compile(
    r"\b(?:knock(?:\s+(?:it|another|an?\s+extra))?(?:\s+off)?|shave(?:\s+off)?|take\s+off|discount\s+of"
    r"|reduction\s+of|down\s+by|lower\s+by|off\s+by)\s*:?\s*(?:an?\s+)?(?:extra\s+|another\s+)?$"
)
# The value of an extra, a difference, a saving: not a price.
_OTHER_AFTER = re.compile(
    r"\s*(?:retail\s+)?(?:value|worth)\b|\s*(?:more|less|higher|lower)\s+than\b|\s*(?:in\s+)?savings?\b"
    r"|\s*(?:above|below|under|over)\s+(?:list|retail|msrp|what)\b|\s*apart\b"
)
_OTHER_BEFORE = re.compile(
    r"\b(?:worth|valued\s+at|value\s+of|saving(?:\s+you)?|save(?:\s+you)?|savings\s+of|difference\s+of"
    r"|gap\s+of|an\s+extra|another|additional|only\s+(?:a|an)|within|off\s+by)\s*:?\s*(?:about\s+|around\s+)?$"
)
# Firmly the merchant's own: "can't go below $500", "not below $350", "at least $395".
_MINE_FLOOR_BEFORE = re.compile(
    r"""(?:\b(?:can'?t|cannot|can\s+not|won'?t|will\s+not|not\s+going\s+to|unable\s+to|couldn'?t|wouldn'?t)
            \s+(?:go|sell(?:\s+it)?|do\s+it|let\s+it\s+go|come\s+down|drop|take|accept|do)?\s*(?:any\s+)?
            (?:lower|below|under|less|cheaper)(?:\s+than)?
        |\b(?:not|nothing|no(?:\s+less)?)\s+(?:(?:a\s+(?:penny|cent|dollar)|one\s+cent|any)\s+)?
            (?:below|under|lower\s+than|less\s+than|cheaper\s+than|than)
        |\bat\s+least|\bminimum(?:\s+(?:is|of))?|\bno\s+less\s+than)\s*:?\s*$""",
    re.VERBOSE,
)
# A list or earlier price: used only when nothing else is stated.
_REF_BEFORE = re.compile(
    r"""\b(?:list(?:ed)?(?:\s+price)?(?:\s+(?:is|of|at|for))?|retails?(?:\s+(?:at|for))?|msrp(?:\s+(?:is|of))?
        |normally(?:\s+\w+)?(?:\s+(?:at|for))?|usually(?:\s+\w+)?(?:\s+(?:at|for))?|originally|regularly
        |was|were|countered\s+(?:at|with)|started\s+at|from|full\s+price(?:\s+(?:is|of))?|earlier|before)
        \s*:?\s*$""",
    re.VERBOSE,
)
_REF_AFTER = re.compile(r"\s*(?:earlier|before|originally|previously|last\s+time|list\b|retail\b|msrp\b)")
# The merchant's own price, by the words before it.
_MINE_BEFORE = re.compile(
    r"""(?:\b(?:i|we)(?:'ll|\s+will|\s+can|\s+could|'d|\s+would|'m\s+able\s+to|\s+am\s+able\s+to)?
            (?:\s+(?:now|happily|gladly|still|just|only|also|even|definitely|really))?
            \s+(?:do(?:\s+it)?(?:\s+(?:for|at))?|go(?:\s+(?:to|down\s+to|as\s+low\s+as))?|offer(?:\s+(?:it|you))?(?:\s+(?:for|at))?
               |make\s+it|let\s+(?:it|you\s+have\s+it)\s+go\s+(?:for|at)|sell(?:\s+it)?(?:\s+(?:to\s+you\s+)?(?:for|at))?
               |come\s+down\s+to|drop(?:\s+(?:it|the\s+price))?\s+to|meet\s+you\s+at|accept|take|settle\s+(?:on|at|for)
               |part\s+with\s+it\s+for|need|want|ask(?:\s+for)?|price\s+it\s+at)
        |(?:i'?m|we'?re|i\s+am|we\s+are)\s+(?:now\s+|currently\s+)?(?:at|asking(?:\s+for)?)
        |\bmoved\s+to|\bdown\s+to|\bcome\s+down\s+to
        |\b(?:best|lowest|final|last|bottom|absolute)\b(?:\s+[\w']+){0,5}?\s+(?:is|would\s+be|'s)
        |\b(?:my|our)\s+(?:final\s+|best\s+|last\s+|new\s+|bottom\s+)?(?:offer|price|number|line|ask)\s*(?:is|of|stands\s+at|would\s+be)?
        |\b(?:how|what)\s+about(?:\s+we\s+(?:meet|settle|say)\s+(?:at|on))?
        |\bmeet\s+(?:me\s+|you\s+)?(?:at|in\s+the\s+middle\s+at)
        |\b(?:it'?s\s+)?yours\s+for|\bfor\s+you\s*,?
        |\b(?:price|priced|it)\s+(?:is\s+|at\s+|is\s+at\s+)|\bpriced
        |\b(?:deal|sold|agreed)\s+(?:at|for)|\bit'?s|\bthat'?s|\bcan\s+do|\bcould\s+do
        )\s*:?\s*$""",
    re.VERBOSE,
)
# ... or by the words after it.
_MINE_AFTER = re.compile(
    r"""\s*,?\s*(?:and\s+it'?s\s+yours|is\s+(?:my|our)\b|is\s+(?:the|as)\s+(?:absolute\s+)?(?:best|lowest|low|least)
        |is\s+where\s+(?:i|we)\s+stand|is\s+a\s+(?:\w+\s+)?(?:price|deal)|was\s+my|(?:final|firm)\b
        |(?:and\s+)?that'?s\s+(?:my\s+)?(?:final|firm|the\s+best|it)|is\s+(?:fair|firm|final|doable|possible)
        |works\s+for\s+(?:me|us)|and\s+we\s+have\s+a\s+deal|it\s+is)""",
    re.VERBOSE,
)
# The shopper's number, quoted back.
_THEIRS_BEFORE = re.compile(
    r"""(?:(?:you'?re|you\s+are)\s+(?:still\s+)?(?:at|offering|asking\s+for|proposing)
        |\byou\s+(?:offered|said|proposed|suggested|mentioned|want(?:ed)?|bid|asked\s+for|came\s+in\s+at)
        |\b(?:your|the)\s+(?:\w+\s+)?(?:offer|bid|number|counter(?:offer)?)\s*(?:of|at|is)?
        |\byour|\bare\s+you\s+offering|\byou\s+offering
        |\b(?:above|beyond|more\s+than|up\s+from|higher\s+than)
        )\s*:?\s*$""",
    re.VERBOSE,
)
_THEIRS_AFTER = re.compile(
    r"""\s*(?:[?!.]\s*)?(?:is|was|seems|sounds|feels|would\s+be|'s)\s+(?:[\w']+\s+){0,3}?
          (?:low|below|off|short|under|not|a\s+stretch|out\s+of|too|less|lowball|insulting|ambitious|tough|far)\b
      | \s*(?:doesn'?t|does\s+not|won'?t|will\s+not|isn'?t|is\s+not|can'?t|hasn'?t|has\s+not|wouldn'?t
          |would\s+not|just\s+(?:doesn'?t|won'?t|isn'?t))\b
      | \s*\?\s*(?:no\b|nah|not\b|i\s+can'?t|we\s+can'?t|that'?s\s+(?:too|way|a\s+bit|not)|sorry|hmm|ha\b|come\s+on)
      | \s*(?:again|hasn'?t\s+changed)\b""",
    re.VERBOSE,
)
_NEGATED_BEFORE = re.compile(
    r"\b(?:can'?t|cannot|won'?t|couldn'?t|wouldn'?t|not|never|unable\s+to|no\s+way|no\s+can\s+do|refuse\s+to)\b"
    r"(?:\s+\S+){0,4}?\s*$"
)
_CLAUSE_BREAK = re.compile(r"[.!?;]\s|[—–:]|\b(?:but|however|though|although|instead|so)\b")
_PARTNER_BEFORE = re.compile(r"\s*(?:or|and|,|/|-|–|to)\s*(?:maybe\s+|even\s+)?$")

_MINE, _UNKNOWN, _REF, _THEIRS, _OTHER, _DISCOUNT = "mine", "unknown", "ref", "theirs", "other", "discount"
_WINDOW = 70


@dataclass(slots=True)
class _Amount:
    start: int
    end: int
    cents: int
    money: bool
    role: str = _UNKNOWN


def _scan(text: str, list_price_cents: int | None, currency: str | None = None) -> list[_Amount]:
    found: list[_Amount] = []
    for m in _AMOUNT.finditer(text):
        if _other_currency(m, currency):
            continue
        try:
            cents = to_cents(Decimal(m["num"].replace(",", "")) * (1000 if m["k"] else 1))
        except ValueError:  # an absurd number is not a price
            continue
        money = bool(m["cur"] or m["post"] or m["k"])
        start, end = m.start("num") if not m["cur"] else m.start(), m.end()
        num_end = m.end("k") if m["k"] else m.end("num")
        before = text[max(0, start - _WINDOW) : start]
        if not money:
            after_num = text[num_end : num_end + _WINDOW]
            if "." not in m["num"] and 190_000 <= cents <= 210_000 and (
                    _YEAR_BEFORE.search(before) or _YEAR_AFTER.match(after_num)):
                continue
            if not _BARE_FOLLOWER.match(after_num):
                continue
            if not _BARE_LEAD.search(before):
                continue
            if list_price_cents is None:
                if cents < 10_00:
                    continue
            elif not (list_price_cents * 0.4 <= cents <= list_price_cents * 1.6):
                continue
        if cents <= 0:
            continue
        found.append(_Amount(start, end, cents, money))
    return found


def _classify(text: str, amounts: list[_Amount], list_price_cents: int | None) -> None:
    previous: _Amount | None = None
    for a in amounts:
        before = text[max(0, a.start - _WINDOW) : a.start]
        after = text[a.end : a.end + _WINDOW]
        clause = _CLAUSE_BREAK.split(before)[-1]
        if _DISCOUNT_AFTER.match(after) or _DISCOUNT_BEFORE.search(before):
            a.role = _DISCOUNT
        elif _OTHER_AFTER.match(after) or _OTHER_BEFORE.search(before):
            a.role = _OTHER
        elif list_price_cents is not None and not (list_price_cents * 0.3 <= a.cents <= list_price_cents * 3):
            a.role = _OTHER
        elif _MINE_FLOOR_BEFORE.search(before) or _MINE_AFTER.match(after):
            a.role = _MINE
        elif (_THEIRS_BEFORE.search(before) or _THEIRS_AFTER.match(after)
              or _NEGATED_BEFORE.search(clause)):
            a.role = _THEIRS
        elif (previous is not None and previous.role == _THEIRS and a.start - previous.end <= 12
              and _PARTNER_BEFORE.fullmatch(text, previous.end, a.start)):
            a.role = _THEIRS
        elif _REF_BEFORE.search(before) or _REF_AFTER.match(after):
            a.role = _REF
        elif _MINE_BEFORE.search(before):
            a.role = _MINE
        else:
            a.role = _UNKNOWN
        previous = a


def _choose(amounts: list[_Amount]) -> _Amount | None:
    for role in (_MINE, _UNKNOWN, _REF):
        chosen = [a for a in amounts if a.role == role]
        if chosen:
            return chosen[-1]
    return None


# --------------------------------------------------------------------------- extras

# A clause of extras right after the merchant's price: "$635 with free shipping and a case".
_ATTACHED = re.compile(
    r"""\s*,?\s*(?:with|plus|including|includes|incl\.?
        |(?:and\s+)?(?:(?:i|we)'?ll\s+|(?:i|we)\s+will\s+|(?:i|we)\s+can\s+)?(?:also\s+)?(?:throw\s+in|toss\s+in|include|add))\s+""",
    re.VERBOSE,
)
# A clause of extras after a giving verb anywhere: "I'll throw in the carrying case".
_GIVING = re.compile(
    r"""\b(?P<verb>throw(?:ing)?\s+in|toss(?:ing)?\s+in|includ(?:e|es|ed|ing)|add(?:ing)?|plus|bundl(?:e|ing)\s+in)
        (?:\s+right\s+now)?\s*:?\s+""",
    re.VERBOSE,
)
_CLAUSE_END = re.compile(r"[.!?](?=\s|$)|\s[—–-]\s|[—–;(\n]")
_CLAUSE_TAIL = re.compile(
    r"""\s+(?:for\s+you|to\s+that|on\s+the\s+house|is\s+where|is\s+a\b|is\s+my|was\s+my|is\s+the|is\s+included
          |are\s+included|if\s+you|today|right\s+now|as\s+well|too|thrown\s+in|free\s+of\s+charge
          |at\s+no\s+(?:extra\s+)?(?:cost|charge)|so\s+you|which|that\s+(?:makes|brings|comes)|all\s+for)\b
      | ,\s*(?:on\s+the\s+house|free\s+of\s+charge|at\s+no\b|all\s+for\b|which\b|so\b|if\b)
      | (?:,\s*|\s+)(?:and|but|so|or)\s+(?:(?:i|we|you|it|that|this|there)(?:'ll|'d|'re|'m|'s|'ve)?\b|[$€£]|[0-9])""",
    re.VERBOSE,
)
_NOT_EXTRAS = re.compile(
    r"(?:[$€£¥0-9]|it\b|that\b|this\b|to\b|on\b|in\b|up\b|more\b|anything|everything|all\b|something|what"
    r"|you\b|me\b|us\b|them\b|taxes?\b|shipping\s+costs?\b|fees?\b)"
)
_COSTS = re.compile(r"(?:taxe?s?|shipping|delivery|handling|fees?|s&h|vat)\b")
_SEPARATOR = re.compile(r",\s+and\s+|,\s+|\s+and\s+|\s+plus\s+")

# First words that start an extra of their own ("... and a spare filter"), as opposed to a
# word continuing a compound item ("milk pitcher and knock box set"). A heuristic: when the
# list is written "a, b and c", an "and" inside an item cannot be told from the one between
# items without some vocabulary.
_STARTERS = frozenset(
    """a an the some our my your another both free complimentary extra additional bonus extended spare
    replacement upgrade upgraded premium deluxe new protective travel carrying carry gift wall wall-mount
    wireless hard-shell hardshell soft leather walnut wooden bamboo balanced precision single-dose cleaning
    installation in-home on-site professional priority expedited express overnight next-day same-day
    lifetime warranty shipping delivery setup set-up accessory accessories starter charging screen case
    cover stand mount filter filters battery batteries cable charger bag bags box kit subscription
    membership coffee beans lessons training support service""".split()
)
_NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten eleven twelve".split())
_RATE = re.compile(r"^\S+\s+\S+\s+(?:a|an|per|each|every)\s+(?:day|week|month|year|quarter)\b")


def _starts_item(piece: str) -> bool:
    words = piece.split()
    if not words:
        return False
    if _RATE.match(piece.lower()):
        return False
    first = words[0].lower()
    return first in _STARTERS or first in _NUMBER_WORDS or first[0].isdigit()


def split_extras(clause: str) -> tuple[str, ...]:
    """Split a written list of extras ("a, b and c") into items."""
    clause = clause.strip().strip(",.;:!?").strip()
    if not clause:
        return ()
    pieces = _SEPARATOR.split(clause)
    items = [pieces[0]]
    seps = _SEPARATOR.findall(clause)
    for sep, piece in zip(seps, pieces[1:], strict=False):
        if _starts_item(piece):
            items.append(piece)
        else:
            items[-1] = items[-1] + sep + piece
    return tuple(i.strip().strip(",.;:").strip() for i in items if i.strip().strip(",.;:"))


def _clause_at(original: str, lowered: str, start: int) -> str:
    end = _CLAUSE_END.search(lowered, start)
    stop = end.start() if end else len(lowered)
    tail = _CLAUSE_TAIL.search(lowered, start, stop)
    if tail:
        stop = tail.start()
    return original[start:stop]


def _extras(original: str, lowered: str, chosen: _Amount | None, amounts: list[_Amount]) -> tuple[str, ...]:
    found: list[str] = []
    if chosen is not None:
        # the chosen mention first: its "with ..." clause is the whole package
        for a in [chosen] + [a for a in reversed(amounts) if a is not chosen]:
            if a.cents != chosen.cents or a.role not in (_MINE, _UNKNOWN, _REF):
                continue
            m = _ATTACHED.match(lowered, a.end)
            if m and not _NOT_EXTRAS.match(lowered, m.end()):
                found.extend(split_extras(_clause_at(original, lowered, m.end())))
    for m in _GIVING.finditer(lowered):
        rest = m.end()
        if _NOT_EXTRAS.match(lowered, rest):
            continue
        if m["verb"] == "plus" and _COSTS.match(lowered, rest):
            continue
        found.extend(split_extras(_clause_at(original, lowered, rest)))
    seen: set[str] = set()
    extras: list[str] = []
    for item in found:
        key = item.casefold()
        if key and key not in seen:
            seen.add(key)
            extras.append(item)
    return tuple(extras)


# --------------------------------------------------------------------------- the rest

_FINAL = re.compile(
    r"""\bfinal\s+(?:offer|price|answer|terms|number)\b|\b(?:my|our)\s+final\b|\blast\s+offer\b
      | \bbest\s+(?:i|we)\s+(?:can|could)\s+(?:do|offer|go)\b
      | \b(?:can'?t|cannot|can\s+not|won'?t|will\s+not|not\s+going\s+to|unable\s+to|couldn'?t)\s+go\s+
        (?:any\s+)?(?:lower|below|down\s+(?:any\s+)?further|further|less|under)\b
      | \bno\s+lower\b|\bnot\s+(?:a\s+(?:penny|cent|dollar)\s+)?(?:below|under|lower\s+than|less\s+than)\b
      | \bas\s+(?:far|low)\s+as\s+(?:i|we)\s+(?:can\s+)?(?:go|can)\b|\b(?:rock[-\s])?bottom\s+(?:line|dollar|price)\b
      | \blowest\b|\btake\s+it\s+or\s+leave\s+it\b|(?:that'?s|is|it'?s|,)\s+firm\b|\bfirm\s+(?:at|on)\b
      | \bnon-?negotiable\b|\bnot\s+negotiable\b|\bcan'?t\s+do\s+(?:any\s+)?better\b
      | \bno\s+(?:further|more)\s+(?:discounts?|room)\b|\bgone\s+as\s+far\s+as\b""",
    re.VERBOSE,
)
_DEAL = re.compile(
    r"""^\W*(?:great|perfect|wonderful|excellent|ok(?:ay)?|alright|sure(?:\s+thing)?)?\W*deal\b(?!\s*\?)
      | \b(?:we|you)\s*(?:'ve|\s+have)?\s+(?:got\s+)?(?:ourselves\s+|yourself\s+)?a\s+deal\b(?!\s*\?)
      | \b(?:it'?s|that'?s)\s+a\s+deal\b(?!\s*\?)|\bdone\s+deal\b|\bdeal\s+(?:at|for)\b
      | \byou'?ve\s+got\s+it\b|\bpleasure\s+doing\s+business\b
      | \bcheckout\s+link\b|\bcomplete\s+your\s+(?:order|purchase)\b|\bsee\s+you\s+at\s+checkout\b
      | \bproceed\s+to\s+checkout\b|(?:^|[—–!.,:]\s*)sold\b(?!\s+out)|\bsold\s+(?:at|for|to\s+you)\b""",
    re.VERBOSE,
)
_NO_DEAL = re.compile(r"\b(?:no|not\s+a|without\s+a)\s+deal\b|\bcan'?t\s+(?:make|do)\s+(?:a|that)\s+deal\b")
_CLOSING = re.compile(
    r"\bthanks?\s+(?:you\s+)?for\s+stopping\s+by\b|\bgood\s+luck\b|\b(?:i'?ll|i\s+will|let\s+me)\s+close\s+this\s+chat\b"
    r"|\bthis\s+chat\s+is\s+(?:now\s+)?closed\b|\bcome\s+back\s+any\s*time\b|\btake\s+care\b|\bgoodbye\b"
)
_CHECKOUT_URL = re.compile(r"https?://\S+?(?=[\s)\]>,]|[.!?](?:\s|$)|$)")


def _structured_cents(value: Any) -> int | None:
    cents = cents_or_none(value)
    return cents if cents is not None and cents > 0 else None


def _structured_extras(value: Any) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(str(e).strip() for e in value if isinstance(e, str) and e.strip())


def read_merchant_reply(message: str, *, closed: bool, offer: Mapping[str, Any] | None = None,
                        deal: Mapping[str, Any] | None = None,
                        list_price_cents: int | None = None, currency: str | None = None) -> MerchantReading:
    """Read one merchant reply. ``offer``/``deal`` are the structured extension objects of a
    store that sends them (``{price, currency, extras}``, decimal prices); they win over the
    text. ``list_price_cents`` rules out numbers that cannot be this product's price;
    ``currency`` (the deal's ISO code) rules out amounts marked in another one."""
    message = message or ""
    lowered = _URL.sub(lambda m: " " * len(m.group()), message.lower().replace("\u2019", "'"))
    amounts = _scan(lowered, list_price_cents, currency)
    _classify(lowered, amounts, list_price_cents)
    chosen = _choose(amounts)
    price = chosen.cents if chosen is not None else None
    extras = _extras(message, lowered, chosen, amounts)
    discount = None
    if chosen is None:
        discounts = [a for a in amounts if a.role == _DISCOUNT]
        discount = discounts[-1].cents if discounts else None

    final = _FINAL.search(lowered) is not None
    is_deal = _DEAL.search(lowered) is not None and _NO_DEAL.search(lowered) is None
    checkout = None
    if is_deal:
        url = _CHECKOUT_URL.search(message)
        checkout = url.group() if url else None
    if not closed and not is_deal and "?" not in message and _CLOSING.search(lowered):
        closed = True

    structured = False
    for terms in (offer, deal):  # the deal, when there is one, has the last word
        if isinstance(terms, Mapping) and (cents := _structured_cents(terms.get("price"))) is not None:
            price, extras, discount = cents, _structured_extras(terms.get("extras")), None
            structured = True
    if isinstance(deal, Mapping):
        is_deal = True
        url = deal.get("checkout_url")
        checkout = url if isinstance(url, str) else checkout
    return MerchantReading(
        price_cents=price,
        extras=extras,
        final=final,
        deal=is_deal,
        closed=closed,
        walked_away=closed and not is_deal,
        discount_cents=discount,
        checkout_url=checkout,
        structured=structured,
    )
