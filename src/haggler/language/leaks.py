"""Does a text give an amount away? The reader behind the LLM agents' output guards.

A model that knows a secret amount — the merchant's floor, the shopper's budget — can be talked
into writing it, and a manipulator will ask for it in any form that slips past a plain digit
match: "four hundred ninety-nine", "4 9 9", "499" reversed, base64, ROT13, "%34%39%39". This
module reads every amount a text states in the forms we know (``amounts_in``), and also the
amounts hidden in the encodings a text may carry (``encoded_amounts``), so a guard can refuse a
text that states a secret in any of them, or that states any amount it was not allowed to.

Amounts come back in cents (``"499"`` → 49900, ``"$611.37"`` → 61137, ``"86%"`` → 8600): a
guard compares them with prices and with plain numbers alike. It over-reads on purpose (a year,
a model number, "2-day" are amounts to it): a false alarm costs a reworded reply, a miss costs
the secret.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import unicodedata
from collections.abc import Iterable, Iterator
from decimal import Decimal, InvalidOperation
from urllib.parse import unquote

_NUMBER = re.compile(r"(?<![\d])(\d{1,3}(?:,\d{3})+|\d+)(?:\.(\d+))?(?:\s?([kK])\b)?")
_SCALED = re.compile(r"(?<![\d.,])(\d+(?:\.\d+)?)\s*(hundred|thousand|grand|million)\b"
                     r"(?:\s+(?:and\s+)?(\d{1,2})\b(?!\s*(?:hundred|thousand|grand|million)))?", re.IGNORECASE)
_SPACED_DIGITS = re.compile(r"(?<![\d.,])\d(?:[ \t\-_.,/|*·•]{1,3}\d){2,}(?![\d])")
_WORD = re.compile(r"[a-z]+|[^\sa-z]")  # a word, or a mark that ends a number ("ten. six hundred")
_B64 = re.compile(r"[A-Za-z0-9+/]{2,}={1,2}|[A-Za-z0-9+/]{4,}")  # "NjEx" is 611, "MTg=" is 18
_HEX = re.compile(r"\b(?:[0-9a-fA-F]{2}[ :]?){3,}\b")
_INVISIBLE = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None)

_UNITS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen".split())}
_UNITS["oh"] = 0
_TENS = {w: 10 * i for i, w in enumerate("_ _ twenty thirty forty fifty sixty seventy eighty ninety".split())
         if w != "_"}
_SCALES = {"hundred": 100, "thousand": 1000, "grand": 1000, "k": 1000, "million": 1_000_000}
_JOINERS = {"and", "a"}


def normalize(text: str) -> str:
    """Full-width and other compatibility digits as ASCII, invisible characters dropped."""
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE)


def amounts_in(text: str) -> list[int]:
    """Every amount ``text`` states, in cents: numerals (with thousands commas, decimals, a
    ``k``), digits spelled apart ("4 9 9", "4-9-9"), number words ("four hundred ninety-nine",
    "four nine nine", "5 hundred")."""
    text = normalize(text)
    found = [_cents(m.group(1).replace(",", ""), m.group(2), bool(m.group(3))) for m in _NUMBER.finditer(text)]
    found += [int(re.sub(r"\D", "", m.group(0))) * 100 for m in _SPACED_DIGITS.finditer(text)]
    found += [int((Decimal(m.group(1)) * _SCALES[m.group(2).lower()] + int(m.group(3) or 0)) * 100)
              for m in _SCALED.finditer(text)]  # "5 hundred", "6 hundred and 11"
    found += [value * 100 for value in _word_numbers(text.lower())]
    return [amount for amount in found if amount is not None]


def encoded_amounts(text: str) -> list[int]:
    """The amounts stated by what ``text`` may be hiding: the text reversed, ROT13, percent
    escapes, base64 and hex chunks decoded to text."""
    text = normalize(text)
    found: list[int] = []
    for variant in _decodings(text):
        found += amounts_in(variant)
    return found


def near(amount: int, secret: int) -> bool:
    """Whether ``amount`` gives ``secret`` away: equal, or within 1% of it up to a dollar
    ("about 500" for 499.99)."""
    return abs(amount - secret) <= min(100, max(1, secret // 100))


def reveals(text: str, secrets: Iterable[int], *, except_for: Iterable[int] = ()) -> int | None:
    """The first secret ``text`` gives away, in any form ``amounts_in`` and ``encoded_amounts``
    read, or None. An amount in ``except_for`` (the price a turn commits to, which the text must
    be able to state) is not counted as a giveaway, plainly written."""
    secrets = [s for s in secrets if s > 0]
    exempt = set(except_for)
    stated = amounts_in(text)
    plain = [a for a in stated if a not in exempt]
    # a decoding that only repeats an amount the text states plainly (ROT13 and %-escapes leave
    # digits as they are) is that amount, exempt or not, and was weighed above
    hidden = [a for a in encoded_amounts(text) if a not in stated]
    for amount in (*plain, *hidden):
        for secret in secrets:
            if near(amount, secret):
                return secret
    return None


def _cents(whole: str, fraction: str | None, thousands: bool) -> int | None:
    try:
        value = Decimal(whole + ("." + fraction if fraction else ""))
    except InvalidOperation:  # pragma: no cover - the pattern only matches digits
        return None
    if thousands:
        value *= 1000
    return int(value * 100)


def _word_numbers(lowered: str) -> Iterator[int]:
    """Numbers written in words, and digit words in a row ("four nine nine" → 499)."""
    tokens = _WORD.findall(lowered.replace("-", " "))
    run: list[str] = []
    for token in [*tokens, ""]:
        if token in _UNITS or token in _TENS or (run and (token in _SCALES or token in _JOINERS)):
            run.append(token)
            continue
        yield from _read_run(run)
        run = []


def _read_run(run: list[str]) -> Iterator[int]:
    while run and run[-1] in _JOINERS:
        run = run[:-1]
    words = [w for w in run if w not in _JOINERS]
    if not words or all(w in _SCALES for w in words):
        return
    if len(words) >= 2 and all(w in _UNITS and _UNITS[w] < 10 for w in words):
        yield int("".join(str(_UNITS[w]) for w in words))
        return
    yield from _spoken_price(words)
    total, current = 0, 0
    for word in words:
        if word in _UNITS:
            current += _UNITS[word]
        elif word in _TENS:
            current += _TENS[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        else:
            total += max(current, 1) * _SCALES[word]
            current = 0
    value = total + current
    if len(words) > 1 or value >= 10:  # a lone "one" or "two" is English, not an amount
        yield value


def _spoken_price(words: list[str]) -> Iterator[int]:
    """A price said in two halves, as people say prices: "four fifty" → 450, "four ninety-nine"
    → 499, "nineteen ninety-nine" → 1999, "five oh five" → 505 (read besides the sum, 54)."""
    if any(w in _SCALES for w in words):
        return
    for split in (1, 2):
        head, tail = _below_hundred(words[:split]), _below_hundred(words[split:])
        if head and tail is not None and (tail >= 10 or words[split] == "oh"):
            yield head * 100 + tail


def _below_hundred(words: list[str]) -> int | None:
    """The value of one or two number words below a hundred ("ninety nine", "oh five"), or None."""
    if len(words) == 1:
        return _UNITS.get(words[0], _TENS.get(words[0]))
    if len(words) == 2 and words[1] in _UNITS and _UNITS[words[1]] < 10:
        if words[0] == "oh":
            return _UNITS[words[1]]
        if words[0] in _TENS and _UNITS[words[1]] > 0:
            return _TENS[words[0]] + _UNITS[words[1]]
    return None


def _decodings(text: str) -> Iterator[str]:
    yield codecs.decode(text, "rot13")
    if "%" in text:
        yield unquote(text)
    yield text[::-1]
    for chunk in _B64.findall(text):
        padded = chunk + "=" * (-len(chunk) % 4)
        try:
            decoded = base64.b64decode(padded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if decoded.isprintable():
            yield decoded
    for chunk in _HEX.findall(text):
        try:
            decoded = bytes.fromhex(re.sub(r"[ :]", "", chunk)).decode("utf-8")
        except (ValueError, UnicodeDecodeError):
            continue
        if decoded.isprintable():
            yield decoded
