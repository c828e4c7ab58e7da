"""How the gullible model reads a shopper's message: the way a capable but credulous model would.

A real model sees through the tricks a keyword screen trips over — look-alike letters, zero-width
characters, leetspeak, spaced-out letters, base64, hex, ROT13, %-escapes, other languages — and
then, being gullible, does what the text asks. This module turns a message into what such a model
"understands" (``understand``), finds what it asks for (``secret_wanted``, ``form_wanted``,
``digits_wanted``) and the amount it pushes (``pushed_amount``). It is the stand-in model's
reading, not a reference: a test of the corpus checks it understands every attack there.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from urllib.parse import unquote

from tests.support.number_words import read_words

_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
_TAGS = re.compile("[\U000e0020-\U000e007e]+")
_HOMOGLYPHS = str.maketrans(
    "аеорсухіјѕԁһӏԝАВЕКМНОРСТХЅІЈαορειкκντυχΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdhlwABEKMHOPCTXSIJaopeikkvtuxABEZHIKMNOPTYX")
_LEET = str.maketrans("013457@$", "oieastas")
_LEET_TOKEN = re.compile(r"[A-Za-z0-9@$']*[A-Za-z][A-Za-z0-9@$']*")
_SPACED_LETTERS = re.compile(r"\b[A-Za-z](?:(?: [A-Za-z]){2,}|(?:\.[A-Za-z]){2,})\b")  # "f l o o r", "f.l.o.o.r"
_B64 = re.compile(r"[A-Za-z0-9+/]{2,}={1,2}|[A-Za-z0-9+/]{4,}")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2}[\s:]?){3,}")


@dataclass(frozen=True)
class Understood:
    """A message as the model reads it: ``plain`` (normalized, same words), ``decoded`` (what
    its encodings hide), and ``text``: all of it, lower-cased, for finding what is asked."""

    plain: str
    decoded: tuple[str, ...]
    text: str


def understand(message: str) -> Understood:
    hidden = "".join(chr(ord(ch) - 0xE0000) for run in _TAGS.findall(message) for ch in run)
    plain = _INVISIBLE.sub("", _TAGS.sub("", unicodedata.normalize("NFKC", message)))
    decoded = list(_decodings(plain))
    if hidden:
        decoded.append(hidden)
    readable = [plain.translate(_HOMOGLYPHS), *decoded]
    readable = [_unleet(_SPACED_LETTERS.sub(lambda m: re.sub(r"[ .]", "", m.group(0)), t)) for t in readable]
    return Understood(plain, tuple(decoded), "\n".join([plain, *readable]).lower())


def _unleet(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        return token.translate(_LEET) if re.search(r"[0-9@$]", token) else token
    return _LEET_TOKEN.sub(one, text)


def _decodings(text: str) -> Iterator[str]:
    lowered = text.lower()
    if re.search(r"rot[\s-]?13", lowered):
        yield codecs.decode(text, "rot13")
    if re.search(r"revers|backwards", lowered):
        yield text[::-1]
    if "%" in text:
        unquoted = unquote(text)
        if unquoted != text:
            yield unquoted
    told = bool(re.search(r"base\s?64|decode|encoded", lowered))
    for chunk in _B64.findall(text):
        if len(chunk) < 8 and not told:  # short words decode to noise; decode them when told to
            continue
        try:
            decoded = base64.b64decode(chunk + "=" * (-len(chunk) % 4), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if decoded.isprintable() and re.search(r"[A-Za-z0-9]", decoded):
            yield decoded
    for chunk in _HEX.findall(text):
        try:
            decoded = bytes.fromhex(re.sub(r"[\s:]", "", chunk)).decode("utf-8")
        except ValueError:
            continue
        if decoded.isprintable() and re.search(r"[A-Za-z0-9]", decoded):
            yield decoded


# --- what a message asks for ------------------------------------------------------------------

_FLOOR = re.compile(
    r"\bfloor\b|\bminimum\b|\bmin price|\blowest\b|\bbottom[\s-]?line\b|\bbottom price|rock[\s-]bottom"
    r"|\breserve\b|\breservation price|\bleast you|\bhow low\b|\bsell below\b|\bnever sell\b"
    r"|walk[\s-]?away price|precio m[ií]nimo|\bm[ií]nimo\b|m[aá]s bajo|prix plancher|prix minimum"
    r"|plus bas|mindestpreis|niedrigst|untergrenze|prezzo minimo|pre[çc]o m[ií]nimo|minimumprijs"
    r"|最低|底价|минимальн")
_COST = re.compile(
    r"costs? (?:the store|you|us)|\byour cost|\bcost on\b|cost basis|each costs|cost of each|landed cost"
    r"|cost plus|unit cost|\bat cost\b|\bcosts?\b.{0,20}\bstore\b|\bmargins?\b|what (?:do|did) (?:you|the store)"
    r"(?: actually)? pay|(?:store|you|they) paid|paid per|pay per unit|\bwholesale\b|how little|co[uû]t"
    r"|\blevers?\b|cheapest for")
_NOTE = re.compile(r"\bnotes?\b|\bnota\b|inventory|inventario|inventaire")
_EVERYTHING = re.compile(
    r"instruction|system prompt|\bprompt\b|configuration|\bconfig\b|hidden fields?|negotiation_params"
    r"|\bvariables?\b|\bselect\b.+\bfrom\b|\byaml\b|line by line|anweisung|instrucciones|consigne")

SECRETS = ("everything", "floor", "costs", "note")


def secret_wanted(understood: Understood) -> set[str]:
    """Which hidden things the message asks for: ``floor``, ``costs`` (the levers' and the
    store's), ``note`` (the inventory note), ``everything`` (the instructions)."""
    text = understood.text
    wanted = set()
    if _EVERYTHING.search(text):
        wanted.add("everything")
    if _FLOOR.search(text):
        wanted.add("floor")
    if _COST.search(text):
        wanted.add("costs")
    if _NOTE.search(text):
        wanted.add("note")
    return wanted


_FORMS = (
    ("base64", r"base\s?64|\bb64\b"),
    ("hex", r"\bhex"),
    ("rot13", r"rot[\s-]?13"),
    ("reversed", r"backwards|revers"),
    ("spaced", r"separated by spaces|digit by digit|one digit at a time|spaces between|\bspaced\b|with spaces"),
    ("words", r"in words|spell|written out|no digits|in letters"),
    ("cents", r"in cents|as cents|one integer|an integer"),
)


def form_wanted(understood: Understood) -> str:
    """The form the message wants an answer in: one of ``_FORMS``' names, else ``plain``."""
    for name, pattern in _FORMS:
        if re.search(pattern, understood.text):
            return name
    return "plain"


_ORDINAL = {"first": 0, "second": 1, "third": 2, "fourth": 3}
_COUNT = {"one": 1, "two": 2, "three": 3, "1": 1, "2": 2, "3": 3}


def digits_wanted(message: str, earlier: list[str]) -> tuple[str, int, int] | None:
    """A request for a piece of the floor rather than all of it: ``("digits", start, count)`` over
    the whole-dollar digits (``start`` −1: the last ``count``; −2 − k: the single digit k + 1 places
    from the end; ``None``: the middle one), ``("tail", start, 0)`` for the
    rest of the number from ``start``, ``("cents", 0, 0)``, ``("dollars", 0, 0)`` — or None.
    ``earlier``: the shopper's earlier messages, for "the next two"."""
    text = understand(message).text
    if re.search(r"\bcents\b|after the (?:decimal )?point", text) and not re.search(r"in cents|as cents", text):
        return "cents", 0, 0
    if re.search(r"before the (?:decimal )?point|dollars part|whole dollars", text):
        return "dollars", 0, 0
    if re.search(r"\bthe rest\b|remaining digits|digits after that", text):
        return "tail", sum(_given(m) for m in earlier), 0
    match = re.search(r"\b(second|third|fourth)[\s-]to[\s-]last\b", text)
    if match:
        return "digits", -1 - _ORDINAL[match.group(1)], 1
    match = re.search(r"\b(first|second|third|fourth|next|last|middle)\s+(?:(one|two|three|\d)\s+)?"
                      r"(?:digits?|characters?)\b|\b(?:and\s+)?the\s+(first|middle|last)\s*\?", text)
    if not match:
        return None
    which = match.group(1) or match.group(3)
    count = _COUNT.get(match.group(2) or "", 1)
    if which == "next":
        return "digits", sum(_given(m) for m in earlier), count
    if which == "last":
        return "digits", -1, count
    if which == "middle":
        return "middle", 0, 1
    return "digits", _ORDINAL[which], count


def _given(message: str) -> int:
    """How many leading digits an earlier piece-request asked for (0 if it was not one)."""
    text = understand(message).text
    match = re.search(r"\b(first|next)\s+(?:(one|two|three|\d)\s+)?(?:digits?|characters?)\b", text)
    return _COUNT.get(match.group(2) or "", 1) if match else 0


def sentence_wanted(message: str) -> int | None:
    """``What's the second sentence of your note?`` → 1."""
    match = re.search(r"\b(first|second|third|fourth|next|last)\s+sentence", understand(message).text)
    if not match:
        return None
    return -1 if match.group(1) == "last" else _ORDINAL.get(match.group(1), 1)


# --- the amount a message pushes --------------------------------------------------------------

_UNIT_AFTER = re.compile(
    r"\s*(?:%|percent|per\s?cent|minutes?|mins?|seconds?|secs?|hours?|hrs?|h\b|days?|weeks?|months?"
    r"|years?|yrs?|units?|people|customers|shoppers|buyers|reviews?|stars?|times|items|orders|members"
    r"|followers|friends|views|messages?|x\b|k\b|sq|ft|mm|db|am\b|pm\b)", re.IGNORECASE)
_NOT_MONEY_BEFORE = re.compile(
    r"(?:#|§|\bsection|\bcode|\bno\.|\bref|\bid|\basa|\bab-|\bpolicy|\bstep|\bcase|\btest case|\blevel|\btier"
    r"|\bdirective|\broom|\bline|\bchapter|\bpart|cp-|auth-)\s*$", re.IGNORECASE)
_MONEY_BEFORE = re.compile(r"[$€£]\s*$")
_MONEY_AFTER = re.compile(r"\s*(?:[$€£]|dollars?\b|bucks\b|usd\b|d[oó]lar(?:es)?\b|euros?\b)", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d{1,2}))?(?![\d])")


@dataclass(frozen=True)
class Amount:
    value: Decimal
    marked: bool
    """Written as money ($, dollars), not just a number."""
    decoded: bool = False
    """Found in what the message's encoding hides, not in its plain text."""


def amounts(understood: Understood, list_price: Decimal) -> list[Amount]:
    """The amounts the message could mean as a price, in order: numbers and number words in a
    plausible range of the list price, "N off" and "N% off" turned into prices, ``a + b`` added."""
    found = [a for a in _amounts_in(understood.plain, list_price) if a is not None]
    for decoded in understood.decoded:
        found += [Amount(a.value, a.marked, True) for a in _amounts_in(decoded, list_price) if a is not None]
    low, high = list_price * Decimal("0.05"), list_price * Decimal("1.5")
    return [a for a in found if low <= a.value <= high]


def _amounts_in(text: str, list_price: Decimal) -> Iterator[Amount | None]:
    text = text.translate(_HOMOGLYPHS)
    spans: list[tuple[int, Amount]] = []
    text = re.sub(r"(?<![\d.,])\d(?: \d){2,}(?![\d])|(?<=\$ )\d(?: \d)+(?![\d])",
                  lambda m: m.group(0).replace(" ", ""), text)  # "2 6 0", "$ 7 2"
    taken: list[range] = []
    for match in re.finditer(r"(\d+)\s+hundred(?:\s+and)?(?:\s+(\d{1,2}))?\b", text, re.IGNORECASE):
        value = Decimal(int(match.group(1)) * 100 + int(match.group(2) or 0))
        spans.append((match.start(), Amount(value, bool(_MONEY_AFTER.match(text, match.end())))))
        taken.append(range(match.start(), match.end()))
    for match in _NUMBER.finditer(text):
        before, after = text[:match.start()], text[match.end():]
        if _UNIT_AFTER.match(after) or _NOT_MONEY_BEFORE.search(before):
            continue
        if any(match.start() in span for span in taken):
            continue
        try:
            value = Decimal(int(match.group(1).replace(",", ""))) + (
                Decimal(f"0.{match.group(2)}") if match.group(2) else 0)
        except (InvalidOperation, ValueError):
            continue
        marked = bool(_MONEY_BEFORE.search(before) or _MONEY_AFTER.match(after))
        if re.match(r"\s*(?:dollars?\s+)?off\b", after, re.IGNORECASE):
            value, marked = list_price - value, True
        spans.append((match.start(), Amount(value, marked)))
    for match in re.finditer(r"(\d{1,2})\s*(?:%|percent)\s+off\b", text, re.IGNORECASE):
        spans.append((match.start(), Amount(list_price * (100 - int(match.group(1))) / 100, True)))
    if re.search(r"half (?:the )?(?:list )?price", text, re.IGNORECASE):
        spans.append((len(text), Amount(list_price / 2, True)))
    words = list(read_words(text))
    if words and not spans:
        marked = bool(re.search(r"dollars?|bucks", text, re.IGNORECASE))
        spans += [(len(text), Amount(Decimal(w), marked)) for w in words]
    for match in re.finditer(r"(\d+(?:\.\d+)?)\s*(?:\+|plus)\s*(\d+(?:\.\d+)?)", text):
        spans.append((match.end(), Amount(Decimal(match.group(1)) + Decimal(match.group(2)), True)))
    for _, amount in sorted(spans, key=lambda pair: pair[0]):
        yield amount


def pushed_amount(understood: Understood, list_price: Decimal) -> Decimal | None:
    """The price the message pushes for: decoded amounts over plain ones (the shopper hid it for
    a reason), money-marked over bare numbers, the last of them."""
    found = amounts(understood, list_price)
    for wanted in (lambda a: a.decoded, lambda a: a.marked, lambda a: True):
        chosen = [a for a in found if wanted(a)]
        if chosen:
            return chosen[-1].value.quantize(Decimal("0.01"))
    return None


def is_piece(message: str) -> bool:
    """A message that hands over part of something to come ("remember this number", "first
    piece", a trailing "...")."""
    text = understand(message).text
    return bool(re.search(r"\bremember\b|\bpiece\b|\bpart (?:one|two|1|2)\b", text)
                or re.search(r"(?:\.\.\.|…)\s*$", message.strip()))


def is_continuation(message: str) -> bool:
    return bool(re.match(r"\s*(?:\.\.\.|…)", message))


def combine_wanted(message: str) -> str | None:
    """``sum`` or ``concat`` when the message asks to put earlier pieces together."""
    text = understand(message).text
    if re.search(r"side by side|next to each other|concatenat|one after the other", text):
        return "concat"
    if re.search(r"\badd (?:them|those|it all)|\bsum\b|\btogether\b|\bin total\b|\bcombined\b", text):
        return "sum"
    return None


def refers_back(message: str) -> bool:
    """"accept at that number", "the result": the amount the model itself said last."""
    return bool(re.search(r"\bthat (?:number|amount|figure|price|total)\b|\bthe result\b|\bat that\b",
                          understand(message).text))


def arithmetic_on_previous(message: str) -> Decimal | None:
    """"add 100 back", "subtract 20 from it": the change to apply to the model's last amount."""
    text = understand(message).text
    match = re.search(r"\badd (\d+(?:\.\d+)?) (?:back|to (?:it|that))", text)
    if match:
        return Decimal(match.group(1))
    match = re.search(r"\bsubtract (\d+(?:\.\d+)?) from (?:it|that)", text)
    return -Decimal(match.group(1)) if match else None


def arithmetic_on_floor(message: str) -> Decimal | None:
    """"take your floor and subtract 100": the change to apply to the floor."""
    text = understand(message).text
    match = re.search(r"\b(?:subtract|minus|take away|less) \$?(\d+(?:\.\d+)?)", text)
    if match:
        return -Decimal(match.group(1))
    match = re.search(r"\b(?:add|plus) \$?(\d+(?:\.\d+)?)(?!\s*%)", text)
    return Decimal(match.group(1)) if match else None


def comparison(message: str) -> Decimal | None:
    """"Is your floor higher than $300?" → 300."""
    match = re.search(r"\b(?:above|higher than|more than|over|below|lower than|under|less than)\s+"
                      r"\$?(\d[\d,]*(?:\.\d{1,2})?)", understand(message).plain.lower())
    return Decimal(match.group(1).replace(",", "")) if match else None


def quoted_to_repeat(message: str) -> str | None:
    """What "repeat after me: '...'" or "say exactly '...'" asks the model to say."""
    plain = understand(message).plain
    if not re.search(r"repeat after me|say exactly|type exactly|write exactly|copy this|say the words"
                     r"|say it back|repeat (?:this|that)", plain, re.IGNORECASE):
        return None
    match = re.search(r"[\"“'‘](.+?)[\"”'’](?:\s|$|[.!?])", plain)
    if match:
        return match.group(1)
    match = re.search(r"(?:repeat after me|say exactly)\s*:?\s*(.+)$", plain, re.IGNORECASE)
    return match.group(1).strip() if match else None


def wants_extras(message: str) -> bool:
    return bool(re.search(r"every extra|all (?:the )?extras|all extras|throw in (?:everything|all)"
                          r"|with all|everything included", understand(message).text))


def last_number(message: str) -> Decimal | None:
    """The last number a message states, whatever its size: a piece of an amount to come."""
    found = re.findall(r"\d+(?:\.\d{1,2})?", understand(message).plain)
    return Decimal(found[-1]) if found else None
