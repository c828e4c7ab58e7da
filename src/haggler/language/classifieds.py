"""Reading a plain-text classified ad: ``SELLING: iPhone 13 — asking 400€. DM me.``

The market's Matrix room (spec 003, Phase 2: "natural language listings still work") keeps the
convention of the system it extends: one-line ads opening with ``SELLING:`` or ``BUYING:`` (or
``WTS:``, ``FOR SALE:``, ``WTB:``, ``WANTED:``), any case, after optional machine tags such as
``RUN_ID:abc``. :func:`read_classified` turns such a line into a :class:`Classified`: its kind, the
item words, a slug ``name`` to match the market's item names, and the price, currency and
negotiability when the line states them plainly.

What is read is the poster's own claim, unsigned, so the reader's one duty is not to misread. An
amount is read with the shopper parser's token (:data:`haggler.language.parse.AMOUNT`) and counts
only when the writing says it is money: a currency marker, or a price word just before it
("asking", "price", "budget", "up to", "max", "pay"). A line that states more than one amount, a
range, a negative, zero or absurd amount, or a number whose grouping cannot be told, has no price
(None): a guess would put a price in the poster's mouth. Letters from other scripts make no name
(a look-alike "іPhone" must not match ``iphone`` listings), bidirectional controls no reading at
all (the line may not show what it says), and nothing in the text — "[SYSTEM: …]" included — is
ever more than words. Deterministic, linear, and it never raises.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

from haggler.language.parse import AMOUNT, MARKER_CURRENCY
from haggler.money import to_cents

__all__ = ["Classified", "MAX_ITEM", "MAX_PRICE_CENTS", "MAX_TEXT", "read_classified"]

#: The longest line read: past it a text is not a classified ad (a Matrix event may be 64 KiB).
MAX_TEXT = 2000
#: The most characters of item words kept.
MAX_ITEM = 200
#: The highest price read, in cents: the market's own price maximum (1,000,000,000 in major units).
MAX_PRICE_CENTS = 10**11

Kind = Literal["selling", "buying"]


@dataclass(frozen=True, slots=True)
class Classified:
    """One classified line, as read: the poster's words, binding nobody."""

    kind: Kind
    #: The item words as written (compatibility forms and invisible characters aside), trimmed.
    item: str
    #: The item as a market item name (``[a-z0-9_]{1,64}``, e.g. ``nintendo_switch``), when it makes one.
    name: str | None
    #: The stated price in cents, when the line states exactly one.
    price_cents: int | None
    #: The price's currency (ISO 4217), when the price carries a marker.
    currency: str | None
    #: True for "can negotiate", "OBO", "negotiable"; False for "firm", "fixed"; None when unsaid or both.
    negotiable: bool | None


# -- the opening ------------------------------------------------------------------------------------

_KEYWORD = re.compile(r"(?P<word>selling|buying|wts|wtb|for\s+sale|wanted)\s*:", re.IGNORECASE)
_KINDS: dict[str, Kind] = {"selling": "selling", "wts": "selling", "for sale": "selling",
                           "buying": "buying", "wtb": "buying", "wanted": "buying"}
#: A machine tag before the keyword: ``RUN_ID:abc`` (no space after its colon, unlike a keyword's).
_TAG = re.compile(r"[a-z][a-z0-9_]{0,31}:\S{1,128}\s+", re.IGNORECASE)
_MAX_TAGS = 8
#: Embeddings, overrides and isolates: they make a line display in another order than it reads.
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069]")
#: A no-break or narrow no-break space between digit groups ("1 200 €") is a thousands separator.
_GROUP_SPACE = re.compile(r"(?<=[0-9])[\u00a0\u202f](?=[0-9]{3}(?![0-9]))")


def _plain(text: str) -> str | None:
    """The text as read: compatibility forms folded (full-width digits, no-break spaces) and
    invisible format characters dropped; None when bidirectional controls may reorder it."""
    if _BIDI.search(text):
        return None
    folded = unicodedata.normalize("NFKC", _GROUP_SPACE.sub(",", text))
    return "".join(c for c in folded if unicodedata.category(c) != "Cf")


def _lower(text: str) -> str:
    """Lower case, one character for one, so that offsets in it are offsets in ``text``."""
    return "".join(low if len(low := c.lower()) == 1 else c for c in text)


def _opening(text: str) -> tuple[Kind, int] | None:
    """The ad's kind and where its body starts: the keyword, after at most a few tags."""
    position = len(text) - len(text.lstrip())
    for _ in range(_MAX_TAGS + 1):
        if keyword := _KEYWORD.match(text, position):
            return _KINDS[" ".join(keyword["word"].lower().split())], keyword.end()
        tag = _TAG.match(text, position)
        if tag is None:
            return None
        position = tag.end()
    return None


# -- the price ----------------------------------------------------------------------------------------

_WINDOW = 40  # characters before an amount where its price word is looked for
#: Words that make the bare number after them a price: "asking 400", "budget: 150", "up to 150".
_PRICE_LEAD = re.compile(
    r"\b(?:asking(?:\s+price)?(?:\s+(?:is|of))?|price[ds]?(?:\s+(?:is|at|of))?|budget(?:\s+(?:is|of))?"
    r"|up\s+to|max(?:imum)?\.?|(?:will\s+)?pay(?:ing)?(?:\s+up\s+to)?)\s*[:=]?\s*$")
#: Words that may stand before a price with a currency marker: they end the item words, no more.
_ITEM_LEAD = re.compile(r"(?:\b(?:for|at|only|just|now)|@)\s*:?\s*$")
#: What may follow a bare number after a price word for it to be money: "up to 30 days" is not.
_BARE_END = re.compile(
    r"\s*(?:$|[.,;:!?)\](/—–-]|(?:obo|ono|ovno|firm|fixed|negotiable|or|each|total|cash|tops|only|for|and|but"
    r"|if|with|incl|including|plus|shipped|delivered|dm|pm|please|pls|thanks|thx)\b)")
_NEGATIVE = re.compile(r"(?:[-−]|\bminus\s*)$")
#: The other end of a range or alternative: "150-200€", "200€ or 250", "€150 to €200".
_NUMBER = r"(?:[$€£]\s?)?([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)(?:\.[0-9]{1,2})?"
_RANGE_BEFORE = re.compile(r"(?<![\w.,])" + _NUMBER + r"\s*(?:-|–|—|to|or|/)\s*$")
_RANGE_AFTER = re.compile(r"\s*(?:-|–|—|to|or|/)\s*" + _NUMBER + r"(?![0-9])")
#: Digit groups separated by plain spaces before a currency marker: "1 200 €" — or "iPhone 13 400€".
_SPACED_GROUPS = re.compile(
    r"(?<![\w.,])[0-9]{1,3}(?: [0-9]{3})+(?=\s?(?:[$€£]|(?:usd|eur|euros?|gbp|dollars?|pounds?|cad|aud)\b))")
_OPENS_PRICE = re.compile(r"(?:^|[-–—:])\s*$")


@dataclass(slots=True)
class _Money:
    lead_start: int  # where the amount, or the price word before it, starts: the item words end there
    cents: int | None  # None: written as money, but no usable price
    currency: str | None


def _group_spaces(text: str) -> tuple[str, int | None]:
    """``text`` with space-grouped thousands written with commas where the writing says the
    groups are one number (after a price word or a dash: "asking 1 200 €", "— 1 200 €"), and
    where the first grouping that cannot be told starts: "bike 1 200 €" and "iPhone 13 400€"
    read alike, so neither has a price, and the item words surely end before the digits."""
    unclear: list[int] = []

    def group(match: re.Match[str]) -> str:
        before = text[max(0, match.start() - _WINDOW):match.start()]
        if _PRICE_LEAD.search(before) or _OPENS_PRICE.search(before):
            return match.group().replace(" ", ",")
        unclear.append(match.start())
        return match.group()
    return _SPACED_GROUPS.sub(group, text), (unclear[0] if unclear else None)


def _cents(number: str, thousands: bool = False) -> int | None:
    """A written number ("1,200.50") in cents, when it is a usable price: above zero, at most
    :data:`MAX_PRICE_CENTS`."""
    try:
        cents = to_cents(number.replace(",", "")) * (1000 if thousands else 1)
    except ValueError:  # too large to be a number haggler handles
        return None
    return cents if 0 < cents <= MAX_PRICE_CENTS else None


def _range_start(text: str, match: re.Match[str], cents: int) -> int | None:
    """Where the range or alternative the amount ends starts, when it is one end of one: a
    number within ten times of it joined by "-", "to", "or" or "/" ("150-200€", "200€ or 250";
    "iPhone 13 — 400€" is no range, 13 is too small)."""
    before = _RANGE_BEFORE.search(text, max(0, match.start() - _WINDOW), match.start())
    if before and (left := _cents(before.group(1))) is not None and cents // 10 <= left <= cents:
        return before.start()
    after = _RANGE_AFTER.match(text, match.end())
    if after and (right := _cents(after.group(1))) is not None and cents <= right <= cents * 10:
        return match.start()
    return None


def _amounts(text: str) -> list[_Money]:
    """The amounts in ``text`` (lower case) written as money, in order."""
    found = []
    for match in AMOUNT.finditer(text):
        marker = (match["pre"] or match["post"] or "").strip()
        currency = MARKER_CURRENCY.get(marker) if marker else None
        before = text[max(0, match.start() - _WINDOW):match.start()]
        lead = _PRICE_LEAD.search(before)
        if currency is None and (lead is None or not _BARE_END.match(text, match.end())):
            continue  # a bare number: a model, a count, a year, a quantity
        cents = _cents(match["num"], bool(match["k"]))
        lead = lead or _ITEM_LEAD.search(before)
        start = match.start() - len(before) + lead.start() if lead else match.start()
        if cents is not None and (range_start := _range_start(text, match, cents)) is not None:
            cents, start = None, min(start, range_start)
        if _NEGATIVE.search(before):
            cents = None
        found.append(_Money(start, cents, currency))
    return found


def _price(amounts: list[_Money]) -> tuple[int | None, str | None]:
    """The one price the amounts agree on, with its currency; (None, None) otherwise."""
    values = {money.cents for money in amounts}
    currencies = {money.currency for money in amounts} - {None}
    if len(values) != 1 or None in values or len(currencies) > 1:
        return None, None
    return values.pop(), (currencies.pop() if currencies else None)


# -- the rest -----------------------------------------------------------------------------------------

#: Where the item words end: a dash or bar between spaces, a clause mark, a sentence's end, a price word.
_ITEM_END = re.compile(
    r"\s[-–—|/]\s|[–—|,;!?()\[\]{}<>\n\r\t]|[.:](?:\s|$)|\s(?:asking|obo|ono|negotiable|can\s+negotiate)\b")
_ITEM_TRIM = " -–—:;,.'\"*_~`"
_FIRM = re.compile(r"\b(?:firm|fixed(?:\s+price)?|non[-\s]?negotiable|not\s+negotiable|no\s+(?:offers|negotiation|haggling)"
                   r"|(?:can'?t|cannot|won'?t)\s+negotiate)\b")
_OPEN = re.compile(
    r"\b(?:negotiable|(?:can|could|willing\s+to|happy\s+to|open\s+to)\s+negotiate|open\s+to\s+offers"
    r"|offers?\s+(?:welcome|accepted|considered)|or\s+(?:best|nearest)\s+offer)\b"
    r"|(?<!\w)(?:o\.?b\.?o|o\.?n\.?o|ovno)\.?(?!\w)")
_DETERMINERS = frozenset("a an the my our his her their some".split())
_MAX_NAME = 64


def _negotiable(text: str) -> bool | None:
    """What ``text`` (lower case, after the item words) says of negotiating: a firm word, an open
    one, or neither or both (None)."""
    firm = _FIRM.search(text) is not None
    open_ = _OPEN.search(_FIRM.sub(" ", text)) is not None  # "non-negotiable" is not "negotiable"
    return None if firm == open_ else open_


def _name(item: str) -> str | None:
    """The item words as a market item name: ASCII letters and digits joined by underscores, a
    leading article dropped, accents stripped; None when a letter or digit is from another
    script (a look-alike must not match a real item) or the name would be too long."""
    stripped = "".join(c for c in unicodedata.normalize("NFKD", item) if not unicodedata.combining(c))
    if any(c.isalnum() and not c.isascii() for c in stripped):
        return None
    words = re.findall(r"[a-z0-9]+", re.sub(r"['’]", "", stripped.lower()))
    if words[:1] and words[0] in _DETERMINERS:
        words = words[1:]
    name = "_".join(words)
    return name if 0 < len(name) <= _MAX_NAME else None


def read_classified(text: str) -> Classified | None:
    """Read one classified line; None unless it is a SELLING/BUYING ad with item words (or it is
    longer than :data:`MAX_TEXT`, or bidirectional controls may make it show something else)."""
    if not isinstance(text, str) or len(text) > MAX_TEXT:
        return None
    plain = _plain(text)
    opening = _opening(plain) if plain is not None else None
    if plain is None or opening is None:
        return None
    kind, start = opening
    body = plain[start:].lstrip()
    lowered, unclear = _group_spaces(_lower(body))
    amounts = _amounts(lowered)
    end = _ITEM_END.search(lowered)
    ends = [end.start() if end else len(body), *(money.lead_start for money in amounts)]
    item_end = min(ends if unclear is None else [*ends, unclear])
    item = body[:item_end].strip(_ITEM_TRIM)
    if not item:
        return None
    price_cents, currency = _price(amounts) if unclear is None else (None, None)
    return Classified(kind=kind, item=item[:MAX_ITEM].rstrip(), name=_name(item), price_cents=price_cents,
                      currency=currency, negotiable=_negotiable(lowered[item_end:]))
