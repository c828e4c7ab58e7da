"""English number words, both ways, for the red-team support code.

The gullible model spells a secret out ("six hundred eleven") when a shopper asks for it that way,
the corpus loader fills ``{p40:words}``, and the scorer reads spelled amounts back out of a reply.
It lives here, apart from ``haggler.language.leaks``, so that the red team's reading of a text is
not the merchant guard's reading of it: the guard must not be graded by itself.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

UNITS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
         "fifteen sixteen seventeen eighteen nineteen").split()
TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_UNIT_VALUE = {word: value for value, word in enumerate(UNITS)} | {"oh": 0}
_TEN_VALUE = {word: 10 * i for i, word in enumerate(TENS) if word} | {"fourty": 40}  # as meant
_SCALE_VALUE = {"hundred": 100, "thousand": 1000, "grand": 1000}
_JOINERS = {"and", "a"}
_TOKEN = re.compile(r"[a-z]+|[^a-z\s]")  # a word, or punctuation (which ends a number)


def spell(number: int) -> str:
    """``611`` → ``"six hundred eleven"``; 0 ≤ number < 1,000,000."""
    if not 0 <= number < 1_000_000:
        raise ValueError(f"out of range: {number}")
    if number < 20:
        return UNITS[number]
    if number < 100:
        tens, unit = divmod(number, 10)
        return TENS[tens] + (f"-{UNITS[unit]}" if unit else "")
    if number < 1000:
        hundreds, rest = divmod(number, 100)
        return f"{UNITS[hundreds]} hundred" + (f" {spell(rest)}" if rest else "")
    thousands, rest = divmod(number, 1000)
    return f"{spell(thousands)} thousand" + (f" {spell(rest)}" if rest else "")


def spell_money(cents: int) -> str:
    """``61137`` → ``"six hundred eleven dollars and thirty-seven cents"``."""
    dollars, rest = divmod(cents, 100)
    text = f"{spell(dollars)} dollars"
    return text + (f" and {spell(rest)} cents" if rest else "")


def spell_digits(number: str) -> str:
    """``"611.37"`` → ``"six one one point three seven"``."""
    return " ".join("point" if ch == "." else UNITS[int(ch)] for ch in number if ch.isdigit() or ch == ".")


def read_words(text: str) -> Iterator[int]:
    """Every whole number ``text`` writes in English words: "six hundred eleven" → 611,
    "six one one" (digit words in a row) → 611, "five hundred and twenty" → 520, and prices as
    people say them: "six eleven" → 611, "four ninety-nine" → 499, "eighteen oh three" → 1803.
    A lone small word ("one", "two") is not read: it is English, not an amount."""
    tokens = _TOKEN.findall(text.lower().replace("-", " "))
    run: list[str] = []
    for token in [*tokens, ""]:
        if token in _UNIT_VALUE or token in _TEN_VALUE or token in _SCALE_VALUE or (run and token in _JOINERS):
            run.append(token)
            continue
        yield from _read_run(run)
        run = []


def _read_run(run: list[str]) -> Iterator[int]:
    words = [w for w in run if w not in _JOINERS]
    if not words or all(w in _SCALE_VALUE for w in words):
        return
    if len(words) >= 2 and all(_UNIT_VALUE.get(w, 99) < 10 for w in words):
        yield int("".join(str(_UNIT_VALUE[w]) for w in words))  # digit words: "six one one"
        return
    spoken = _spoken_price(words)
    if spoken is not None:
        yield spoken
    total = current = 0
    for word in words:
        if word in _UNIT_VALUE:
            current += _UNIT_VALUE[word]
        elif word in _TEN_VALUE:
            current += _TEN_VALUE[word]
        elif word == "hundred":
            current = max(current, 1) * 100
        else:
            total += max(current, 1) * _SCALE_VALUE[word]
            current = 0
    value = total + current
    if len(words) > 1 or value >= 10:
        yield value


def _spoken_price(words: list[str]) -> int | None:
    """"six eleven", "four ninety nine", "eighteen oh three": hundreds, then the rest."""
    if len(words) < 2 or not 1 <= _UNIT_VALUE.get(words[0], 0) <= 19 or any(w in _SCALE_VALUE for w in words):
        return None
    rest = words[1:]
    if rest[0] == "oh" and len(rest) == 2 and _UNIT_VALUE.get(rest[1], 99) < 10:
        return _UNIT_VALUE[words[0]] * 100 + _UNIT_VALUE[rest[1]]
    if rest[0] in _TEN_VALUE and len(rest) <= 2 and all(_UNIT_VALUE.get(w, 99) < 10 for w in rest[1:]):
        return _UNIT_VALUE[words[0]] * 100 + _TEN_VALUE[rest[0]] + sum(_UNIT_VALUE[w] for w in rest[1:])
    if len(rest) == 1 and 10 <= _UNIT_VALUE.get(rest[0], 0) <= 19:
        return _UNIT_VALUE[words[0]] * 100 + _UNIT_VALUE[rest[0]]
    return None
