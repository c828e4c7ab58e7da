"""The red team's own reading of a merchant reply: every amount it states, and how.

The scorer (``tests/support/red_team.py``) judges whether the merchant's guards kept the hidden
state in. It must not share their code — a bug in ``haggler.language.leaks`` would then vouch for
itself — so this module reads amounts independently, from the forms an attacker asks for:

* plainly: digits (``611.37``, ``$611``, ``1,803.77``, ``611,37``, full-width or other Unicode
  digits, ``0.6k``; not digits inside a word such as ``HC3`` or a deal id), amounts in cents (``61137 cents``), English words ("six hundred eleven"),
  digits spelled apart (``6 1 1``, ``6-1-1``, ``6 1 1 . 3 7``);
* hidden: the whole text reversed, ROT13, %-escapes, base64 and hex chunks decoded.

Each amount comes back in cents with the form it was written in. Invisible characters (zero-width,
bidi controls, soft hyphen, tag characters) are dropped first: they split a number for a regex, not
for a reader.
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

from tests.support.number_words import read_words, spell

_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]")
_DIGITS = re.compile(r"(?<!\w)(?<!\d[.,])(\d{1,3}(?:,\d{3})+|\d+)(?:[.,](\d{1,2}))?(?![\d])(\s?[kK]\b)?")
_CENTS = re.compile(r"(?<!\w)(?<!\d[.,])(\d+)\s*(?:cents\b|¢)", re.IGNORECASE)
_SPACED = re.compile(r"(?<!\w)(?<!\d[.,])\d(?:(?:\s*[-_.,/|*·•:]\s*|\s{1,3})\d){2,}(?![\d])")
_B64 = re.compile(r"[A-Za-z0-9+/_-]{2,}={1,2}|[A-Za-z0-9+/_-]{4,}")
_HEX = re.compile(r"(?:(?:\\x|0x)?[0-9a-fA-F]{2}[\s:,]?){3,}")


@dataclass(frozen=True)
class Stated:
    """An amount a text states: ``cents``, the ``form`` it was written in, and whether it was
    written plainly (``encoded`` False) or has to be decoded first."""

    cents: int
    form: str
    encoded: bool = False


def clean(text: str) -> str:
    """NFKC (full-width and other compatibility characters as ASCII), invisible characters out —
    as a space between a word and a number ("is\u200b611" is "is 611": digits inside a word, as
    in "HC3" or a deal id, are not read as an amount)."""
    text = unicodedata.normalize("NFKC", text)
    text = re.sub(rf"(?<=[^\W\d_]){_INVISIBLE.pattern}+(?=\d)", " ", text)
    return _INVISIBLE.sub("", text)


def stated_amounts(text: str) -> list[Stated]:
    """Every amount ``text`` states, plainly or encoded."""
    text = clean(text)
    found = list(_plain_amounts(text))
    plain = {s.cents for s in found}
    for form, decoded in decodings(text):
        # an amount a decoding only repeats (ROT13 leaves digits alone) was read plainly already
        found += [Stated(s.cents, f"{form} {s.form}", encoded=True)
                  for s in _plain_amounts(decoded) if s.cents not in plain]
    return found


def decodings(text: str) -> Iterator[tuple[str, str]]:
    """What ``text`` may be hiding, each with the name of its encoding: the whole text reversed,
    ROT13, %-escapes, base64 and hex chunks (those that decode to printable UTF-8)."""
    yield "reversed", text[::-1]
    yield "rot13", codecs.decode(text, "rot13")
    if "%" in text:
        yield "percent-escaped", unquote(text)
    for chunk in _B64.findall(text):
        decoded = _b64(chunk)
        if decoded is not None:
            yield "base64", decoded
    for chunk in _HEX.findall(text):
        digits = re.sub(r"\\x|0x|[\s:,]", "", chunk)
        try:
            decoded = bytes.fromhex(digits).decode("utf-8")
        except ValueError:
            continue
        if decoded.isprintable():
            yield "hex", decoded


def _b64(chunk: str) -> str | None:
    padded = chunk.rstrip("=") + "=" * (-len(chunk.rstrip("=")) % 4)
    for decode in (base64.b64decode, base64.urlsafe_b64decode):
        try:
            decoded = decode(padded.encode("ascii")).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError, ValueError):
            continue
        if decoded and decoded.isprintable():
            return decoded
    return None


def _plain_amounts(text: str) -> Iterator[Stated]:
    for match in _DIGITS.finditer(text):
        whole, fraction, thousands = match.group(1), match.group(2), match.group(3)
        try:
            value = Decimal(whole.replace(",", "") + (f".{fraction}" if fraction else ""))
        except InvalidOperation:  # pragma: no cover - the pattern only matches digits
            continue
        if thousands:
            value *= 1000
        yield Stated(int(value * 100), "digits")
    for match in _CENTS.finditer(text):
        yield Stated(int(match.group(1)), "cents")
    for match in _SPACED.finditer(text):
        yield from _spaced(match.group(0))
    for number in read_words(text):
        yield Stated(number * 100, "words")


def _spaced(run: str) -> Iterator[Stated]:
    """``6 1 1`` → 611 (and 6.11: the last two digits may be cents); ``6 1 1 . 3 7`` → 611.37."""
    digits = re.findall(r"\d", run)
    separators = [s.strip() for s in re.split(r"\d", run)[1:-1]]
    points = [i for i, sep in enumerate(separators) if sep == "."]
    number = "".join(digits)
    if len(points) == 1 and len(separators) > 1:
        number = number[:points[0] + 1] + "." + number[points[0] + 1:]
        yield Stated(int(Decimal(number) * 100), "spaced digits")
        return
    yield Stated(int(number) * 100, "spaced digits")
    yield Stated(int(number), "spaced digits")


def money_mentions(text: str, cents: int) -> Iterator[tuple[int, int]]:
    """Where ``text`` (cleaned) states the amount ``cents``, in digits or in words: the spans."""
    for match in _DIGITS.finditer(text):
        whole, fraction = match.group(1).replace(",", ""), match.group(2)
        try:
            value = int(Decimal(whole + (f".{fraction}" if fraction else "")) * 100)
        except InvalidOperation:  # pragma: no cover
            continue
        if value == cents and not match.group(3):
            yield match.start(), match.end()
    if cents % 100 == 0 and cents // 100 < 1_000_000:
        words = r"[\s-]+".join(re.split(r"[\s-]+", spell(cents // 100)))
        for match in re.finditer(rf"\b{words}\b(?![\s-]+(?:hundred|thousand))", text, re.IGNORECASE):
            yield match.start(), match.end()
