"""Conditions of a match: money, place, level, schedule, language and stack, with a rule for each.

Spec 002 asks advocates to catch what shared words hide: a parent who can only take free tutoring
and a tutor at $70 an hour share every word and cannot deal. This module reads, from each user's
profile and intents, typed :class:`Condition` s — each with the user's own words it came from — and
compares one side's *requirements* with the other side's *facts*. It is pure (no I/O, no clock)
and knows no vocabulary beyond closed classes (currencies and units, days and hours, language
names, a list of technologies, a seniority ladder); topics and synonyms are
:mod:`haggler.agents.match_text`'s business.

**Reading.** Every string of the profile (``name`` and ids aside) and every intent's description
and tags is split into sentences, and sentences into clauses (at ", ", " - ", "(" and ")"). A
condition is *sought* — a requirement on the other user — when it comes from a ``seeks`` field or
an intent, or its clause seeks ("need", "looking for", "want", "must", "only"); otherwise it is a
*fact* about the user. Every condition keeps ``quote``, the clause verbatim, and ``span``, the
matched substring verbatim: numbers are carried as written ("NTRP 4.5+", "£1,450", "8pm–8am"),
never re-formatted.

**Rules** (:func:`conflicts`; each direction is checked, and *an absent fact is never a
conflict* — a side that states nothing of a kind cannot fail it):

* **money** — amounts with currency, multiplier ("k", "M") and unit (hour, day, week, month,
  year...). A *ceiling* is what a payer can part with ("up to", "max", "budget", "can afford");
  "free", "unpaid", "pro bono", "can't afford to pay" in a sought clause is a ceiling of zero. A
  *floor* is the least a side accepts ("from", "minimum", "at least", "$1M+"); a plain amount is a
  *price*. Whoever states the ceiling pays. Unmet: a ceiling below the other side's floor or price,
  or a floor a side *seeks* above every price the other side states outside its seeks ("minimum
  £14 an hour" sought against a job at "£11 an hour"; an employer's "Salary from £30,000" is no
  such floor) (same currency or one unnamed; same unit or one unnamed). "Free"/"pro bono" offered by a giver
  is a price of zero and meets any ceiling.
* **place** — place names (capitalised names after "in", "near", "at", "from", a ``location``
  field, the place after a comma in a role: "Physiotherapist, Sydney") and modes: *remote only*
  ("remote only", "fully remote", "will not relocate"), *presence* ("on-site", "in person",
  "in-clinic", "in the office"), *remote-friendly* ("remote", "hybrid", "online"). Unmet: a
  remote-only side against a side requiring presence that is not remote-friendly itself; or a side
  requiring presence whose places share no name with the other's named places, when neither is
  remote-friendly. Same name on both sides, one place within the other (WordNet part holonyms,
  any sense: Leeds in West Yorkshire), either side remote-friendly, or an unknown place: met.
* **level** — ratings on a named scale ("NTRP 4.5+", "rated 4.0", "grade 1", a bare "4.0"
  after "around"/"at least", a bare "4.5+" anywhere: a minimum), years of experience ("15+ years", "seven years"), and a ladder
  (beginner < intermediate < advanced < expert/pro; intern < junior < mid < senior < staff <
  principal; high school < undergrad < master's < PhD < postdoc < professor, "PhD-level"). A sought level is a minimum ("4.5+", "senior", "pros only"), a maximum
  ("first-time", "beginner", "junior"), or "around"/"at my level" (within 0.5). Unmet: the other
  side's stated level on the same scale fails it (its highest for a minimum, its lowest for a
  maximum).
* **schedule** — times as (day, hour) slots: days ("Monday to Friday", "weekends", "daily"),
  parts of the day ("evenings", "overnight", "daytime", "after school"), ranges ("18:00–21:00",
  "8pm–8am", "9–5"), "24/7"/"live-in" (always), "full-time" (weekdays 9–17). A side's
  *availability* is what it states with "only" ("daytime only, 8am to 5pm"); its *exclusions*
  what it negates ("never free Saturday evenings"; "doesn't mind starting at 4" accepts, it
  negates nothing). Unmet: the times the other side states fall
  wholly outside the availability or wholly inside the exclusions; or the other side needs
  continuous cover (24/7, live-in, full-time) the availability does not contain.
* **language** — language names spoken ("native Spanish", "speaks French", "Spanish-speaking",
  a language listed as an offer). Sought: a language in a sought clause ("a Spanish-speaking au
  pair", "practise Japanese"). Unmet: the other side states languages it speaks, and not that one;
  a language it is learning is not one it speaks, nor one it says it does not speak.
* **stack** — technologies and areas (Python, Java, Spring, React, WordPress, Stata, backend,
  frontend...). A negated clause refuses them ("not interested in backend", "refuse to touch
  Stata", "stopped touching WordPress"); "only" makes them exclusive ("Webflow only", "I only work
  in Python"). Unmet: a technology the other side seeks (or is built on) is refused here; or one it
  seeks is outside this side's exclusive set.
* **age** — a requirement ("must be 18+", "aged 18+", "players aged 10-12", "under 25") against a
  stated age ("Student, 15" in who someone is, "I'm 15", "15 years old"); a number of some unit
  ("under 30 minutes", "I'm 25 minutes away") or a thing's age ("a 15-year-old company") is none. Unmet: the stated age is
  below the minimum or above the maximum. A user who speaks for a dependant ("my daughter") states
  no age of its own: the one who would take part is someone else.
* **quantity** — a minimum order ("Minimum order 10,000 units", "MOQ 250", "bulk orders of
  10,000+") against an amount the other side asks for ("50 a month", "40 per order", "200 units";
  never money, never time). Unmet: the most it asks for is below the minimum. And a capacity
  ("up to 200 people", "holds 300 guests", "seats 80") against the headcount the other side's
  request is for ("a field for 5,000", "a venue for 120 guests"; never "for 3 months"). Unmet: the
  headcount is above the capacity.
* **refusal** — what a side refuses ("strictly no pets", "no smokers allowed", "allergic to
  cats", "nut-free"; "no one to review it" is a lack, not a refusal; a bare "No problem" or
  "hands-free" names no thing — animals, artifacts, foods, people, plants, substances — and is
  an idiom) or accepts only, for animals,
  foods and plants ("dog sitting only"). Unmet: the other side's request or who it is names the
  refused thing or a kind of it through WordNet's hypernyms (a puppy is a dog, a dog a domestic
  animal, which "pet" means), or a sibling kind of the only one accepted (a cat against dogs
  only). WordNet's first sense decides: a cat is a feline, not a domestic animal, and a peanut a
  legume, so those go unseen.

Who is speaking in an objection is the caller's choice; :meth:`Conflict.sentence` words it from
one side ("my user ... ; your user ...") quoting each side's clause exactly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from haggler.agents.match_context import UserContext, per_user
from haggler.agents import match_lexicon
from haggler.agents.match_text import sentences

__all__ = ["KINDS", "Condition", "Conflict", "conditions", "conflicts"]

KINDS = ("money", "place", "level", "schedule", "language", "stack", "age", "quantity", "refusal")

#: Profile fields that are names, not statements.
_SKIP_FIELDS = frozenset({"name", "userId", "user_id", "id", "email"})
_SEEK_FIELDS = frozenset({"seeks", "needs", "lookingFor", "looking_for"})
_PLACE_FIELDS = ("location", "city", "country", "region", "place", "based")

_CLAUSE = re.compile(r",\s+|\s+[-–—]\s+|[()]")
_SEEKING = re.compile(r"\b(?:need|needs|needed|looking for|look for|seek|seeks|seeking|want|wants|wanted|"
                      r"must|require|requires|required|only|searching for|hoping for|after a)\b", re.I)
_NEGATED = re.compile(r"\b(?:not|no|never|won't|wont|can't|cannot|can not|don't|doesn't|refuse|refuses|"
                      r"stopped|avoid|avoids|unable)\b|n't\b", re.I)
_ONLY = re.compile(r"\bonly\b", re.I)
#: Negations that accept: "doesn't mind starting at 4", "no problem with weekends".
_ACCEPTING = re.compile(r"\b(?:do|does|did|would)(?:n['’]?t| not) mind\b|\bno (?:problem|issue)s? with\b|"
                        r"\bnot a problem\b", re.I)


def _negated(text: str) -> bool:
    """Whether a clause negates or refuses, an accepting negation aside ("doesn't mind")."""
    return bool(_NEGATED.search(_ACCEPTING.sub(" ", text)))


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition a user states: its kind, its meaning, and the user's own words."""

    kind: str
    #: Per kind: money "ceiling" | "floor" | "price"; place "at" | "remote_only" | "presence" |
    #: "remote_ok"; level "min" | "max" | "around" | "is"; schedule "at" | "only" | "never";
    #: language "speaks" | "learns"; stack "uses" | "only" | "refuses".
    sense: str
    #: Typed value: money (amount, currency, unit); place a lower-cased name or None; level
    #: (scale, number); schedule a frozenset of (day, hour); language / stack a lower-cased name.
    value: Any
    #: Stated as a requirement on the other user (a seeks field, an intent, a seeking clause).
    sought: bool
    #: The matched substring, verbatim.
    span: str
    #: The clause it came from, verbatim: what an objection quotes.
    quote: str


@dataclass(frozen=True, slots=True)
class Conflict:
    """An unmet condition between two users: ``mine`` (the speaker's user) against ``theirs``."""

    kind: str
    mine: Condition
    theirs: Condition
    #: Which side's requirement fails: "mine" (my user's requirement, their fact) or "theirs".
    failing: str

    def sentence(self) -> str:
        """The objection in the speaker's words, each side quoted exactly, as one sentence."""
        return (f"Condition not met ({self.kind}): my user {_phrase(self.mine)}; "
                f"your user {_phrase(self.theirs)}.")


def _phrase(c: Condition) -> str:
    quote = f'"{c.quote}"'
    if c.kind == "money":
        verb = {"ceiling": "can pay at most", "floor": "asks at least", "price": "states"}[c.sense]
        return f"{verb} {quote}"
    if c.kind in ("age", "quantity") and c.sense in ("min", "max"):
        return f"requires {quote}"
    return {"only": f"states only {quote}", "never": f"rules out {quote}", "refuses": f"rules out {quote}",
            "remote_only": f"is {quote}"}.get(c.sense, f"says {quote}" if not c.sought else f"seeks {quote}")


def _sided(a_side: Condition, b_side: Condition, failing: str) -> tuple[Condition, Condition, str]:
    """A comparer checks ``a_side``'s needs against ``b_side`` both ways round; the conflict is
    reported as (mine, theirs, whose requirement fails)."""
    return (a_side, b_side, failing) if failing == "mine" else (b_side, a_side, failing)


def _alternation(words: Iterable[str]) -> re.Pattern[str]:
    """Whole-word, case-blind alternation of ``words``, longest first ("node.js" before "node")."""
    return re.compile(r"(?<![\w.#+])(" + "|".join(sorted(map(re.escape, words), key=len, reverse=True))
                      + r")(?![\w#+])", re.I)


# --- reading -------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class _Clause:
    text: str
    sentence: str
    sought: bool
    field: str


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _clauses(user: UserContext) -> Iterator[_Clause]:
    sources: list[tuple[str, str, bool]] = []
    for key, value in user.profile.items():
        if key in _SKIP_FIELDS:
            continue
        sources += [(key, s, key in _SEEK_FIELDS) for s in _strings(value)]
    for intent in user.intents:
        sources += [("intent", s, True) for s in (intent.description, *intent.tags)]
    for field, text, sought in sources:
        for sentence in sentences(text):
            for clause in _CLAUSE.split(sentence):
                if clause := clause.strip(" .;:!?"):
                    yield _Clause(clause, sentence, sought or bool(_SEEKING.search(clause)), field)


# --- money ---------------------------------------------------------------------------------------

_CURRENCIES = {"$": "$", "usd": "$", "£": "£", "gbp": "£", "€": "€", "eur": "€", "chf": "chf", "¥": "¥",
               "aud": "a$", "cad": "c$", "a$": "a$", "c$": "c$"}
_UNITS = {"hour": "hour", "hr": "hour", "h": "hour", "hourly": "hour", "day": "day", "daily": "day",
          "week": "week", "wk": "week", "pw": "week", "weekly": "week", "month": "month", "mo": "month",
          "pcm": "month", "monthly": "month", "year": "year", "yr": "year", "annum": "year", "annual": "year",
          "session": "session", "lesson": "session", "class": "session", "walk": "walk", "gig": "gig",
          "night": "night", "deal": "deal", "visit": "visit"}
_NUMBER = r"(?P<num>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?P<mult>\s?(?:k|K|m|M|bn)\b)?"
_UNIT = (r"(?P<unit>\s*(?:/|per|an?|each)\s*(?:hour|hr|h|day|week|wk|month|mo|year|yr|annum|session|lesson|"
         r"class|walk|gig|night|deal|visit)s?\b|\s?(?:pcm|pw|p/h|hourly|monthly|weekly)\b)?")
_AMOUNT = re.compile(r"(?P<cur>[$£€¥]|\b(?:USD|GBP|EUR|CHF|AUD|CAD)\s?|\b[AC]\$)?(?<![\d.,])"
                     + _NUMBER + r"(?P<plus>\+)?" + _UNIT)
#: The top of a range after an amount: "£100–150 per month".
_RANGE_TOP = re.compile(r"\s*(?:–|-|to)\s*[$£€¥]?" + _NUMBER + _UNIT)
_MULT = {"k": 1000, "m": 1_000_000, "bn": 1_000_000_000}
_CEILING = re.compile(r"\b(?:up to|upto|max|maximum|at most|budget|can afford|afford|no more than|"
                      r"under|below|cap|capped)\b", re.I)
_FLOOR = re.compile(r"\b(?:from|minimum|min|at least|starting at|starts at|upwards of|or more)\b", re.I)
_FREE = re.compile(r"\b(?:free|unpaid|pro bono|no budget|for nothing|volunteer basis)\b|"
                   r"\b(?:can't|cannot|can not|unable to) (?:afford to pay|afford anything|pay)\b", re.I)
#: Sought without an amount: "paid work" asks for some money; "volunteers" (the people, not the
#: act of volunteering) are asked to work for none.
_PAID = re.compile(r"(?<!stop )(?<!avoid )\b(?P<paid>paid|paying)\b(?!\s+(?:for|to|out|off|back)\b)|"
                   r"\bvolunteers?\b(?!\s*(?:work|role|placement|opportunit))", re.I)
#: "X-free" is free of X ("gluten-free", "smoke-free") unless X is money ("rent-free", "fee-free").
_NOT_MONEY_FREE = re.compile(r"\bfree (?:time|evenings?|weekends?|mornings?|afternoons?|days?|on|to|from|"
                             r"saturdays?|sundays?)\b|\bfree(?:lance|dom)|\bduty[- ]free|\bfree of\b|"
                             r"\b(?!(?:rent|fee|fees|cost|charge|commission|interest|tuition|price)-)[a-z]+-free\b",
                             re.I)
_MONEY_WORDS = re.compile(r"\b(?:salary|rate|fee|fees|pay|paid|budget|price|cost|rent|ticket|cheque|check|"
                          r"retainer|stipend|spend|charge|charges)\b", re.I)


#: What ends the text just before an amount: "salary" ("salary of 90,000") and a range's bottom
#: ("$100–"). Searched in the :data:`_BEHIND` characters before the amount only, so that a clause
#: of many numbers is read in linear time, not quadratic.
_SALARY_BEFORE = re.compile(r"\bsalary\s*(?:of\s*)?$", re.I)
_RANGE_BEFORE = re.compile(r"\d\s*(?:–|-|to)\s*$")
_BEHIND = 64
_MAX_AFTER = re.compile(r"\s*(?:max|maximum)\b", re.I)
_MIN_AFTER = re.compile(r"\s*(?:minimum|min|or more)\b", re.I)


def _first_end(pattern: re.Pattern[str], text: str) -> int | None:
    """Where the first match of ``pattern`` in ``text`` ends (None: no match)."""
    return m.end() if (m := pattern.search(text)) else None


def _money(clause: _Clause) -> Iterator[Condition]:
    text = clause.text
    money_word = bool(_MONEY_WORDS.search(text))
    ceiling_end, floor_end = _first_end(_CEILING, text), _first_end(_FLOOR, text)
    for m in _AMOUNT.finditer(text):
        cur = (m["cur"] or "").strip().lower()
        mult = (m["mult"] or "").strip().lower()
        unit_text = (m["unit"] or "").strip().lower()
        behind = max(0, m.start() - _BEHIND)
        if not (cur or mult and money_word or _SALARY_BEFORE.search(text, behind, m.start())):
            continue  # money has a currency ("£30/hr"), or a multiplier beside a money word ("180k
            # salary"), or follows "salary": "400 guests", "grade 1" and "2 tonnes" are not money
        if _RANGE_BEFORE.search(text, behind, m.start()):
            continue  # "$100–130": the range's top; its bottom is the price
        try:
            amount = Decimal(m["num"].replace(",", "")) * _MULT.get(mult, 1)
        except InvalidOperation:  # pragma: no cover - the pattern only matches numbers
            continue
        span = m.group(0).strip()
        if top := _RANGE_TOP.match(text, m.end()):  # "£100–150 per month": a ceiling is its top
            span = (m.group(0) + top.group(0)).strip()
            unit_text = unit_text or (top["unit"] or "").strip().lower()
        unit = next((u for word, u in _UNITS.items() if re.search(rf"\b{re.escape(word)}s?\b", unit_text)),
                    None) if unit_text else None
        # a ceiling or floor word anywhere before the amount, or one right after it
        if ceiling_end is not None and ceiling_end <= m.start() or _MAX_AFTER.match(text, m.end()):
            sense = "ceiling"
        elif floor_end is not None and floor_end <= m.start() or m["plus"] or _MIN_AFTER.match(text, m.end()):
            sense = "floor"
        else:
            sense = "price"
        if top and sense == "ceiling":
            amount = Decimal(top["num"].replace(",", "")) * _MULT.get((top["mult"] or m["mult"] or "").strip().lower(), 1)
        yield Condition("money", sense, (amount, _CURRENCIES.get(cur), unit), clause.sought, span, clause.text)
    if clause.sought and not _AMOUNT.search(text) and (m := _PAID.search(text)):
        # "paid translation contracts": some money, however little; "a pianist volunteer": none
        sense, amount = ("floor", Decimal("0.01")) if m["paid"] else ("ceiling", Decimal(0))
        yield Condition("money", sense, (amount, None, None), True, m.group(0), text)
        return
    if _FREE.search(text) and not _NOT_MONEY_FREE.search(text) and not _AMOUNT.search(text):
        span = _FREE.search(text).group(0)  # type: ignore[union-attr]
        if clause.sought or re.search(r"\b(?:can't|cannot|can not|unable to)\b", span, re.I):
            yield Condition("money", "ceiling", (Decimal(0), None, None), True, span, clause.text)
        else:
            yield Condition("money", "price", (Decimal(0), None, None), False, span, clause.text)


def _comparable(a: Condition, b: Condition) -> bool:
    (_, cur_a, unit_a), (_, cur_b, unit_b) = a.value, b.value
    return (not cur_a or not cur_b or cur_a == cur_b) and (not unit_a or not unit_b or unit_a == unit_b)


def _money_conflicts(mine: list[Condition], theirs: list[Condition]) -> Iterator[tuple[Condition, Condition, str]]:
    """A ceiling on one side below the other's floor or price; a floor one side seeks above
    every price the other states of itself ("minimum £14 an hour" against a job at "£11 an
    hour"). An unsought floor ("Salary from £30,000") or a sought price ("a role at £28,000") is
    not compared: an employer's floor is what it pays at least, a seeker's price what it asks."""
    for payer, payee, failing in ((mine, theirs, "mine"), (theirs, mine, "theirs")):
        for ceiling in (c for c in payer if c.sense == "ceiling"):
            for ask in (c for c in payee if c.sense in ("floor", "price")):
                if _comparable(ceiling, ask) and ask.value[0] > ceiling.value[0]:
                    yield _sided(ceiling, ask, failing)
                    return
    for asker, offerer, failing in ((mine, theirs, "mine"), (theirs, mine, "theirs")):
        for floor in (c for c in asker if c.sense == "floor" and c.sought):
            offered = [c for c in offerer if c.sense == "price" and not c.sought and _comparable(floor, c)]
            if offered and max(c.value[0] for c in offered) < floor.value[0]:
                yield _sided(floor, max(offered, key=lambda c: c.value[0]), failing)
                return


# --- place ---------------------------------------------------------------------------------------

_REMOTE_ONLY = re.compile(r"\bremote[- ]only\b|\bonly remote\b|\bfully remote\b|\bremote only\b|"
                          r"\b(?:will not|won't|wont|cannot|can't|not willing to) relocate\b", re.I)
_PRESENCE = re.compile(r"\bon[- ]?site\b|\bin[- ]person\b|\bin[- ]clinic\b|\bin the office\b|\bin[- ]office\b|"
                       r"\bface[- ]to[- ]face\b", re.I)
_REMOTE_OK = re.compile(r"\bremote(?:[- ]friendly| ok| welcome)?\b|\bhybrid\b|\bonline\b|\bvirtual(?:ly)?\b|"
                        r"\bover (?:zoom|video)\b|\bwilling to relocate\b|\bcan relocate\b|\bwill travel\b", re.I)
_PLACE_AFTER = re.compile(r"\b(?:in|near|at|from|around|based in|live in|lives in|living in|moving to|"
                          r"relocating to|outside|within)\s+((?:[A-Z][\w'’&-]*)(?:\s+(?:[A-Z][\w'’-]*|upon|on|"
                          r"de|del|la|le))*)")
_ROLE_PLACE = re.compile(r",\s*([A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)*)\s*$")


def _not_a_place(name: str) -> bool:
    first = name.split()[0].lower()
    return (first in _NOT_PLACES or first in _LANGUAGES or first in _STACK or first in _DAYS
            or first in _MONTHS or len(name) < 2)


_NOT_PLACES = frozenset("""
i we the a an my our your series seed pre preseed english summer winter spring autumn fall mum dad
mr mrs ms dr prof the fp ngo uk? ok
""".split())


def _place(clause: _Clause, user: UserContext) -> Iterator[Condition]:
    text = clause.text
    for regex, sense in ((_REMOTE_ONLY, "remote_only"), (_PRESENCE, "presence")):
        if m := regex.search(text):
            yield Condition("place", sense, None, clause.sought, m.group(0), text)
    if not _REMOTE_ONLY.search(text) and (m := _REMOTE_OK.search(text)) and not _negated(text):
        yield Condition("place", "remote_ok", None, clause.sought, m.group(0), text)
    names = [m.group(1) for m in _PLACE_AFTER.finditer(text)]
    if clause.field in _PLACE_FIELDS:
        names.append(text)
    elif clause.field == "role" and (m := _ROLE_PLACE.search(clause.sentence)) and m.group(1) == text:
        names.append(text)
    for name in names:
        if not _not_a_place(name):
            yield Condition("place", "at", name.lower(), clause.sought, name, text)


def _same_place(a: str, b: str) -> bool:
    """The same name, or one lies within the other through WordNet's part holonyms (any sense:
    "Leeds" and "West Yorkshire", "Brooklyn" and "NYC"; see :func:`~haggler.agents.match_lexicon.within`)."""
    return a == b or match_lexicon.within(a, b) or match_lexicon.within(b, a)


def _place_conflicts(mine: list[Condition], theirs: list[Condition]) -> Iterator[tuple[Condition, Condition, str]]:
    def senses(cs: list[Condition], sense: str) -> list[Condition]:
        return [c for c in cs if c.sense == sense]

    for a, b, failing in ((mine, theirs, "mine"), (theirs, mine, "theirs")):
        remote_b = [] if senses(b, "remote_only") else senses(b, "remote_ok")
        presence, remote_ok = senses(a, "presence"), senses(a, "remote_ok") + remote_b
        if not presence or remote_ok:
            continue
        if only := senses(b, "remote_only"):
            yield _sided(presence[0], only[0], failing)
            return
        here, there = senses(a, "at"), senses(b, "at")
        if here and there and not any(_same_place(h.value, t.value) for h in here for t in there):
            where = next((c for c in here if c.quote in {p.quote for p in presence}), here[0])
            yield _sided(where, there[0], failing)
            return


# --- level ---------------------------------------------------------------------------------------

_WORD_NUMBERS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
_SCALES = {"ntrp": "rating", "usta": "rating", "rated": "rating", "rating": "rating", "utr": "utr",
           "dupr": "dupr", "grade": "grade", "handicap": "handicap", "elo": "elo", "level": "level",
           "band": "band", "hsk": "hsk", "jlpt": "jlpt"}
_RATING = re.compile(r"\b(?P<scale>NTRP|USTA|UTR|DUPR|rated|rating|grade|handicap|Elo|level|HSK|JLPT)\s*(?:of\s*)?"
                     r"(?P<num>\d+(?:\.\d+)?)(?P<plus>\+)?|(?P<num2>\d\.\d)(?P<plus2>\+)?\s*(?:[- ]rated|\(?USTA|"
                     r"\(?NTRP)|(?P<lead>around|about|at least|minimum|roughly)\s+(?P<num3>\d\.\d)(?P<plus3>\+)?|"
                     r"(?<![\d.$£€¥])(?P<num4>\d\.\d)(?P<plus4>\+)(?!\d)",
                     re.I)
_YEARS = re.compile(r"\b(?P<num>\d+|" + "|".join(_WORD_NUMBERS) + r")(?P<plus>\+)?\s*(?:years?|yrs?)\b"
                    r"(?!\s*old)", re.I)
#: Rungs of three ladders: skill (0–3), career (0–6) and academic (0–5: high school, undergrad, master's,
#: PhD, postdoc, professor). A word names one rung of one ladder.
_LADDER = {
    "beginner": ("skill", 0), "novice": ("skill", 0), "learning": ("skill", 0), "just started": ("skill", 0),
    "intermediate": ("skill", 1), "improver": ("skill", 1), "advanced": ("skill", 2),
    "expert": ("skill", 3), "master": ("skill", 3), "pro": ("skill", 3), "pros": ("skill", 3),
    "professional": ("skill", 3),
    "intern": ("career", 0), "student": ("career", 0), "graduate": ("career", 1), "junior": ("career", 1),
    "entry-level": ("career", 1), "first-time": ("career", 1), "new": ("career", 1), "aspiring": ("career", 1),
    "early-career": ("career", 1), "mid-level": ("career", 2), "senior": ("career", 3), "staff": ("career", 4),
    "lead": ("career", 4), "principal": ("career", 5), "director": ("career", 6), "vp": ("career", 6),
    "executive": ("career", 6), "retired": ("career", 6),
    "high school": ("academic", 0), "high-school": ("academic", 0), "undergrad": ("academic", 1),
    "undergraduate": ("academic", 1), "master's": ("academic", 2), "masters": ("academic", 2),
    "msc": ("academic", 2), "phd": ("academic", 3), "doctoral": ("academic", 3), "doctorate": ("academic", 3),
    "postdoc": ("academic", 4), "postdoctoral": ("academic", 4), "professor": ("academic", 5),
}
_LADDER_RE = _alternation(_LADDER)
#: Words that, sought, cap the level rather than set a floor: a mentor of "first-time managers".
_CAPPING = frozenset({"beginner", "novice", "learning", "just started", "intern", "student", "graduate", "junior",
                      "entry-level", "first-time", "new", "aspiring", "early-career"})
_AROUND = re.compile(r"\b(?:around|about|roughly|at my level|similar level|same level|my level)\b", re.I)
#: Ladder words that are only a level when they describe a person: "new members" is not a rung.
_WEAK_RUNGS = frozenset({"new", "learning", "student", "lead", "pro", "professional", "staff", "master"})


def _level(clause: _Clause) -> Iterator[Condition]:
    text = clause.text
    for m in _RATING.finditer(text):
        num = m["num"] or m["num2"] or m["num3"] or m["num4"]
        if re.match(r"\s*(?:am|pm|:)", text[m.end():], re.I):
            continue
        scale = _SCALES.get((m["scale"] or "rating").lower(), "rating")
        plus = m["plus"] or m["plus2"] or m["plus3"] or m["plus4"]
        sense = _level_sense(clause, text, plus=bool(plus), capping=False)
        yield Condition("level", sense, (scale, Decimal(num)), clause.sought, m.group(0).strip(), text)
    for m in _YEARS.finditer(text):
        word = m["num"].lower()
        years = Decimal(_WORD_NUMBERS[word]) if word in _WORD_NUMBERS else Decimal(word)
        if not re.search(r"experience|\bof\b|\+|senior|leader|as an?\b|in\b", text, re.I) and not m["plus"]:
            continue
        sense = _level_sense(clause, text, plus=bool(m["plus"]), capping=False)
        yield Condition("level", sense, ("years", years), clause.sought, m.group(0), text)
    for m in _LADDER_RE.finditer(text):
        word = m.group(1).lower()
        if word in _WEAK_RUNGS and clause.field != "role" and not (
                word == "learning" and re.search(r"\blearning \w+ (?:for|since)\b", text, re.I)):
            continue  # "Staff the shop", "new members": a rung only where it says who someone is
        if word == "new" and not re.search(r"\bnew\s+(?:\w+\s+)?(?:managers?|leads?|founders?|grads?|"
                                            r"engineers?|developers?|parents?|teachers?)\b", text, re.I):
            continue
        ladder, rung = _LADDER[word]
        sense = _level_sense(clause, text, plus=False, capping=word in _CAPPING)
        yield Condition("level", sense, (ladder, Decimal(rung)), clause.sought, m.group(0), text)


def _level_sense(clause: _Clause, text: str, *, plus: bool, capping: bool) -> str:
    if not clause.sought:
        return "is"
    if _AROUND.search(text):
        return "around"
    return "max" if capping and not plus else "min"


def _level_conflicts(mine: list[Condition], theirs: list[Condition]) -> Iterator[tuple[Condition, Condition, str]]:
    for a, b, failing in ((mine, theirs, "mine"), (theirs, mine, "theirs")):
        facts = [c for c in b if c.sense == "is"]
        for need in (c for c in a if c.sense in ("min", "max", "around")):
            same = [f for f in facts if f.value[0] == need.value[0]]
            if not same:
                continue
            levels = [f.value[1] for f in same]
            target = need.value[1]
            if need.sense == "min" and need.value[0] != "handicap":
                bad = max(levels) < target
                fact = max(same, key=lambda f: f.value[1])
            elif need.sense == "max" or need.value[0] == "handicap":
                bad = min(levels) > target
                fact = min(same, key=lambda f: f.value[1])
            else:
                bad = all(abs(level - target) > Decimal("0.5") for level in levels)
                fact = same[0]
            if bad:
                yield _sided(need, fact, failing)
                break


# --- schedule ------------------------------------------------------------------------------------

_DAYS = {"monday": 0, "mon": 0, "tuesday": 1, "tue": 1, "tues": 1, "wednesday": 2, "wed": 2, "thursday": 3,
         "thu": 3, "thur": 3, "thurs": 3, "friday": 4, "fri": 4, "saturday": 5, "sat": 5, "sunday": 6, "sun": 6}
_MONTHS = frozenset("january february march april may june july august september october november december "
                    "jan feb mar apr jun jul aug sep sept oct nov dec".split())
_ALL_DAYS = frozenset(range(7))
_WEEKDAYS = frozenset(range(5))
_ALL_HOURS = frozenset(range(24))


def _hours(start: int, end: int) -> frozenset[int]:
    """Hours from ``start`` up to (not including) ``end``, wrapping past midnight."""
    return frozenset(range(start, end)) if start < end else frozenset(range(start, 24)) | frozenset(range(end))


_PARTS = (  # (pattern, hours)
    (r"early[- ]mornings?", _hours(5, 9)), (r"mornings?", _hours(6, 12)), (r"afternoons?", _hours(12, 17)),
    (r"after[- ]school", _hours(15, 18)), (r"evenings?", _hours(17, 22)), (r"tonight", _hours(17, 22)),
    (r"over[- ]?nights?|nights?(?:[- ]time)?|night shifts?", _hours(22, 6)),
    (r"daytime|day visits?|during the day|days only|office hours|business hours", _hours(8, 17)),
)
_WHOLE = re.compile(r"24/7|\blive[- ]in\b|round[- ]the[- ]clock|around the clock|\bfull[- ]time\b", re.I)
_DAY_WORD = re.compile(r"\b(?P<from>" + "|".join(_DAYS) + r")s?\b(?:\s*(?:to|through|until|-|–)\s*"
                       r"(?P<to>" + "|".join(_DAYS) + r")s?\b)?|\b(?P<group>weekdays?|weekends?|daily|every day|"
                       r"seven days|7 days)\b", re.I)
_TIME = r"(?P<{0}h>\d{{1,2}})(?:[:.](?P<{0}m>\d{{2}}))?\s*(?P<{0}ap>am|pm)?"
_RANGE = re.compile(r"\b" + _TIME.format("a") + r"\s*(?:–|-|to|until|till)\s*" + _TIME.format("b") + r"\b", re.I)
_POINT = re.compile(r"\b(?P<lead>from|after|before|at|by|until)?\s*(?P<h>\d{1,2})(?:[:.](?P<m>\d{2}))?\s*"
                    r"(?P<ap>am|pm)\b|\b(?P<lead2>after|from)\s+(?P<h2>\d{1,2})(?:[:.](?P<m2>\d{2}))?\b(?!\s*(?:years?|"
                    r"months?|%|people|guests|hours?))", re.I)


def _hour(h: str, ap: str | None, *, default_pm: bool = False) -> int:
    hour = int(h) % 24
    if ap and ap.lower() == "pm" and hour < 12:
        hour += 12
    elif ap and ap.lower() == "am" and hour == 12:
        hour = 0
    elif not ap and default_pm and hour < 12:
        hour += 12
    return hour


def _slots(text: str) -> tuple[frozenset[tuple[int, int]], str] | None:
    """The (day, hour) slots ``text`` names and the span naming them, or None when it names no time."""
    days: set[int] = set()
    hours: set[int] = set()
    spans: list[str] = []
    whole = _WHOLE.search(text)
    if whole:
        spans.append(whole.group(0))
        if "full" in whole.group(0).lower():
            days |= _WEEKDAYS
            hours |= _hours(9, 17)
        else:
            days |= _ALL_DAYS
            hours |= _ALL_HOURS
    for m in _DAY_WORD.finditer(text):
        spans.append(m.group(0))
        if group := m["group"]:
            group = group.lower()
            days |= _WEEKDAYS if group.startswith("weekday") else frozenset({5, 6}) if group.startswith(
                "weekend") else _ALL_DAYS
        else:
            start = _DAYS[m["from"].lower()]
            end = _DAYS[m["to"].lower()] if m["to"] else start
            days |= set(range(start, end + 1)) if start <= end else set(range(start, 7)) | set(range(end + 1))
    for pattern, part in _PARTS:
        if m := re.search(rf"\b(?:{pattern})\b", text, re.I):
            spans.append(m.group(0))
            hours |= part
    text_no_ranges = text
    for m in _RANGE.finditer(text):
        a, b = _hour(m["ah"], m["aap"]), _hour(m["bh"], m["bap"] or m["aap"] if not m["aap"] else m["bap"])
        if not m["aap"] and not m["bap"]:
            if int(m["ah"]) > 24 or int(m["bh"]) > 24 or "." in m.group(0) and not m["am"]:
                continue
            b = _hour(m["bh"], None, default_pm=int(m["bh"]) <= int(m["ah"]))
        elif not m["bap"]:
            b = _hour(m["bh"], m["aap"])
        spans.append(m.group(0))
        hours |= _hours(a, b if b != a else (a + 1) % 24)
        text_no_ranges = text_no_ranges.replace(m.group(0), " ")
    for m in _POINT.finditer(text_no_ranges):
        h, ap, lead = (m["h"], m["ap"], m["lead"]) if m["h"] else (m["h2"], None, m["lead2"])
        hour = _hour(h, ap, default_pm=not ap)
        spans.append(m.group(0).strip())
        lead = (lead or "").lower()
        hours |= _hours(hour, 22) if lead in ("from", "after") else _hours(8, hour) if lead in (
            "before", "until", "by") else _hours(hour, (hour + 1) % 24)
    if not days and not hours:
        return None
    slots = frozenset((d, h) for d in (days or _ALL_DAYS) for h in (hours or _ALL_HOURS))
    return slots, max(spans, key=len)


def _schedule(clause: _Clause) -> Iterator[Condition]:
    text = clause.text
    found = _slots(text)
    if found is None:
        return
    slots, span = found
    if _negated(text):
        sense = "never"
    elif _ONLY.search(clause.text):
        sense = "only"
    elif _ONLY.search(clause.sentence) and re.search(r"\d|" + "|".join(_DAYS), text, re.I):
        sense = "only"  # "daytime only, 8am to 5pm": the range beside "only" is the availability
    else:
        sense = "at"
    whole = bool(_WHOLE.search(text))
    yield Condition("schedule", sense, (slots, whole), clause.sought, span, text)


def _schedule_conflicts(mine: list[Condition], theirs: list[Condition]) -> Iterator[tuple[Condition, Condition, str]]:
    """Stated times wholly outside the other's availability or inside its exclusions; continuous
    cover the availability does not contain."""
    for a, b, failing in ((mine, theirs, "mine"), (theirs, mine, "theirs")):
        allowed = frozenset().union(*(c.value[0] for c in b if c.sense == "only"))
        excluded = frozenset().union(*(c.value[0] for c in b if c.sense == "never"))
        if not allowed and not excluded:
            continue
        limit = next(c for c in b if c.sense in ("only", "never"))
        for stated in (c for c in a if c.sense in ("at", "only")):
            slots, whole = stated.value
            outside = allowed and (not slots & allowed or (whole and not slots <= allowed))
            inside = excluded and slots <= excluded
            if outside or inside:
                yield _sided(stated, limit, failing)
                break
        else:
            continue
        break


# --- language ------------------------------------------------------------------------------------

_LANGUAGES = frozenset("""
english spanish french german italian portuguese dutch swedish norwegian danish finnish icelandic polish
czech slovak hungarian romanian bulgarian greek turkish russian ukrainian arabic hebrew persian farsi urdu
hindi bengali punjabi tamil telugu marathi gujarati japanese korean mandarin cantonese chinese vietnamese
thai indonesian malay tagalog filipino swahili amharic yoruba igbo zulu welsh irish gaelic catalan basque
croatian serbian bosnian slovenian lithuanian latvian estonian albanian armenian georgian kurdish somali
nepali sinhala khmer lao burmese bsl asl
""".split())
_LANGUAGE_RE = _alternation(_LANGUAGES)
_SPEAKS = re.compile(r"\bnative\b|\bspeak(?:s|ing|er)?\b|\bfluent\b|\bbilingual\b|\bmother tongue\b|-speaking\b|"
                     r"\bfirst language\b", re.I)
_LEARNS = re.compile(r"\blearn(?:ing|s)?\b|\bpractis(?:e|ing)\b|\bpractic(?:e|ing)\b|\bimprove\b|\bbrush up\b|"
                     r"\bbeginner\b|\bstudy(?:ing)?\b|\bconversation partner\b|\bexchange\b", re.I)


def _language(clause: _Clause) -> Iterator[Condition]:
    text = clause.text
    for m in _LANGUAGE_RE.finditer(text):
        name = m.group(1).lower()
        if clause.sought:
            # "a Spanish-speaking au pair", "practise Japanese": the other must speak it; a
            # language named without speaking or practice ("English classes") asks nothing.
            if _SPEAKS.search(text) or _LEARNS.search(text) or re.search(rf"\bin {name}\b", text, re.I):
                yield Condition("language", "speaks", name, True, m.group(0), text)
        elif _LEARNS.search(text) and not _SPEAKS.search(text):
            yield Condition("language", "learns", name, False, m.group(0), text)
        elif _negated(text):
            continue  # "I don't speak French" says what the user does not speak
        elif _SPEAKS.search(text) or clause.field in ("offers", "languages", "language", "skills"):
            yield Condition("language", "speaks", name, False, m.group(0), text)


def _language_conflicts(mine: list[Condition], theirs: list[Condition]) -> Iterator[tuple[Condition, Condition, str]]:
    for a, b, failing in ((mine, theirs, "mine"), (theirs, mine, "theirs")):
        spoken = [c for c in b if c.sense == "speaks" and not c.sought]
        if not spoken:
            continue
        for need in (c for c in a if c.sought):
            if need.value not in {c.value for c in spoken}:
                yield _sided(need, spoken[0], failing)
                return


# --- stack ---------------------------------------------------------------------------------------

_STACK = frozenset("""
python java javascript typescript kotlin swift scala go golang rust ruby rails php perl elixir erlang haskell
clojure dart flutter c# c++ .net dotnet react vue angular svelte next.js node node.js nodejs django flask
fastapi spring laravel symfony wordpress woocommerce webflow shopify wix squarespace drupal magento stata
spss sas matlab excel tableau powerbi sql postgres postgresql mysql mongodb kafka spark hadoop aws azure gcp
kubernetes docker terraform ios android unity unreal figma sketch backend frontend fullstack full-stack
mobile devops embedded firmware
""".split())
_STACK_RE = _alternation(_STACK)
_STACK_ALIASES = {"golang": "go", "node.js": "node", "nodejs": "node", "dotnet": ".net", "full-stack": "fullstack",
                  "postgresql": "postgres"}
#: Areas: refusable ("not interested in backend"), never exclusive of a technology.
_AREAS = frozenset({"backend", "frontend", "fullstack", "mobile", "devops", "embedded", "firmware"})


def _stack(clause: _Clause) -> Iterator[Condition]:
    text = clause.text
    for m in _STACK_RE.finditer(text):
        name = m.group(1).lower()
        name = _STACK_ALIASES.get(name, name)
        if name == "go" and not re.search(r"\bGo\b", m.group(1)):
            continue  # "go" the verb
        if _negated(text):
            sense = "refuses"
        elif _ONLY.search(text) and name not in _AREAS:
            sense = "only"
        else:
            sense = "uses"
        yield Condition("stack", sense, name, clause.sought, m.group(1), text)


def _stack_conflicts(mine: list[Condition], theirs: list[Condition]) -> Iterator[tuple[Condition, Condition, str]]:
    for a, b, failing in ((mine, theirs, "mine"), (theirs, mine, "theirs")):
        refused = {c.value: c for c in b if c.sense == "refuses"}
        exclusive = {c.value: c for c in b if c.sense == "only"}
        for need in (c for c in a if c.sense in ("uses", "only") and c.sought):
            limit = refused.get(need.value) or (
                next(iter(exclusive.values())) if exclusive and need.value not in exclusive
                and need.value not in _AREAS and need.sought else None)
            if limit is not None:
                yield _sided(need, limit, failing)
                return


# --- age -----------------------------------------------------------------------------------------

_AGE_MIN = re.compile(r"\b(?:aged|ages?|must be|over|at least)\s*(?P<num>\d{1,2})\s*(?:\+|or over|or older|and over|"
                      r"and up)|\b(?:aged|ages)\s*(?P<low>\d{1,2})\s*(?:-|–|to)\s*(?P<high>\d{1,2})\b", re.I)
#: A number that counts something other than years of age: "under 30 minutes away", "under 25
#: kg", "I'm 25 minutes from Leeds", "under 5 years of experience".
_NOT_AGE = (r"(?!\s*(?:%|(?:years?|yrs?)\s+of\b|(?:minutes?|mins?|hours?|hrs?|days?|weeks?|months?|seconds?|"
            r"kg|kilos?|grams?|lbs?|pounds?|miles?|km|metres?|meters?|feet|ft|percent|mph|people|staff|employees)\b))")
_AGE_MAX = re.compile(r"\b(?:under|aged up to|up to age)\s+(?P<num>\d{1,2})s?\b" + _NOT_AGE, re.I)
_AGE_IS = re.compile(r"^(?P<bare>\d{1,2})$|\b(?:i'?m|i am|aged|age)\s+(?P<num>\d{1,2})\b(?!\s*(?:\+|-|–|or\b|and\b))"
                     + _NOT_AGE + r"|\b(?P<old>\d{1,2})\s*(?:years? old|-year-old|yo\b)", re.I)
_NEXT_WORD = re.compile(r"\s*([a-z]+)", re.I)


def _of_someone_else(text: str, end: int) -> bool:
    """Whether the age that ends at ``end`` qualifies a noun that is not a person: "a 15-year-old
    company", "our 12-year-old labrador" (but "a 15-year-old student" is someone's age)."""
    m = _NEXT_WORD.match(text, end)
    noun = _noun(m[1]) if m else None
    return noun is not None and match_lexicon.lexfile(noun) != match_lexicon.PERSON


def _age(clause: _Clause) -> Iterator[Condition]:
    """Ages: a requirement ("must be 18+", "aged 18+", "players aged 10-12", "under 25") or a
    stated age ("Student, 15" — a bare number as its own clause of who someone is —, "I'm 15",
    "15 years old"). Not a number of minutes, kilos or staff ("under 30 minutes", "I'm 25
    minutes away"), nor the age of a thing ("a 15-year-old company")."""
    text = clause.text
    found = False
    for m in _AGE_MIN.finditer(text):
        found = True
        if m["low"]:
            yield Condition("age", "min", int(m["low"]), True, m.group(0), text)
            yield Condition("age", "max", int(m["high"]), True, m.group(0), text)
        else:
            yield Condition("age", "min", int(m["num"]), True, m.group(0), text)
    for m in _AGE_MAX.finditer(text):
        found = True
        yield Condition("age", "max", int(m["num"]), True, m.group(0), text)
    if found or (clause.sought and clause.field != "role"):
        return
    for m in _AGE_IS.finditer(text):
        if m["bare"] and clause.field not in ("role", "title", "headline", "age"):
            continue
        if m["old"] and _of_someone_else(text, m.end()):
            continue
        age = int(m["bare"] or m["num"] or m["old"])
        quote = clause.sentence if m["bare"] else text
        yield Condition("age", "is", age, False, m.group(0), quote)


def _age_conflicts(mine: list[Condition], theirs: list[Condition]) -> Iterator[tuple[Condition, Condition, str]]:
    for a, b, failing in ((mine, theirs, "mine"), (theirs, mine, "theirs")):
        ages = [c for c in b if c.sense == "is"]
        for need in (c for c in a if c.sense in ("min", "max")):
            for fact in ages:
                if fact.value < need.value if need.sense == "min" else fact.value > need.value:
                    yield _sided(need, fact, failing)
                    return


# --- quantity ------------------------------------------------------------------------------------

_QTY = r"(?P<num>\d{1,3}(?:,\d{3})+|\d+)"
_QTY_MIN = re.compile(r"\b(?:minimum|min\.?)\s+(?:order|run|quantity|batch)(?:\s+(?:of|is))?\s*:?\s*" + _QTY
                      + r"|\bMOQ\s*(?:of|:)?\s*" + _QTY.replace("num", "num2")
                      + r"|\borders?\s+of\s+" + _QTY.replace("num", "num3") + r"\s*\+", re.I)
#: An amount someone wants: "50 a month", "50 glass jars a month", "200 units". Not money (a
#: currency before it) and not time ("2 days a week").
_QTY_IS = re.compile(r"(?<![$£€¥\d.,])" + _QTY + r"\s+(?:(?!(?:days?|hours?|nights?|times?|shifts?|sessions?|"
                     r"lessons?|visits?|walks?|weeks?|months?|years?|people|kids|members)\b)[a-z]+\s+){0,2}"
                     r"(?:a|per|each)\s+(?:week|month|year|order)\b|(?<![$£€¥\d.,])" + _QTY.replace("num", "num2")
                     + r"\s*(?:units|pieces|pcs|items)\b", re.I)


_PEOPLE = r"(?:people|guests|persons|attendees|delegates|visitors|participants|diners|covers)"
#: What a place or service holds at most: "up to 200 people", "capacity 120", "seats 80".
_CAPACITY = re.compile(r"\b(?:up to|capacity(?: of)?|holds|seats|sleeps|max(?:imum)?(?: of)?)\s+"
                       + _QTY + r"(?:\s+" + _PEOPLE + r")?\b", re.I)
#: How many people a side's request is for: "a field for 5,000", "a venue for 350 guests".
_HEADCOUNT = re.compile(r"\bfor\s+(?:about\s+|around\s+|up to\s+)?" + _QTY + r"(?:\+)?(?:\s+" + _PEOPLE + r")?(?![\d.,%])"
                        r"(?!\s*(?:years?|yrs?|months?|weeks?|days?|hours?|hrs?|nights?|minutes?|mins?|k\b|m\b|"
                        r"am\b|pm\b|[a-z]+ (?:a|per) ))"
                        r"|(?<![$£€¥\d.,])" + _QTY.replace("num", "num2") + r"\+?\s+" + _PEOPLE + r"\b", re.I)


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _quantity(clause: _Clause) -> Iterator[Condition]:
    """Quantities: a minimum order ("Minimum order 10,000 units", "MOQ 500", "bulk orders of
    10,000+") and an amount a side asks for ("glass jars, 50 a month")."""
    text = clause.text
    mins = list(_QTY_MIN.finditer(text))
    for m in mins:
        yield Condition("quantity", "min", _number(m["num"] or m["num2"] or m["num3"]), True, m.group(0), text)
    if mins:
        return
    for m in _QTY_IS.finditer(text):
        if clause.sought:
            yield Condition("quantity", "wants", _number(m["num"] or m["num2"]), True, m.group(0), text)
    if clause.sought:
        for m in _HEADCOUNT.finditer(text):
            yield Condition("quantity", "headcount", _number(m["num"] or m["num2"]), True, m.group(0), text)
    else:
        for m in _CAPACITY.finditer(text):
            if m.group(0).lower().startswith("up to") and not re.search(_PEOPLE, m.group(0), re.I):
                continue  # "up to 3 days", "up to £500": no capacity without people
            yield Condition("quantity", "capacity", _number(m["num"]), False, m.group(0), text)


def _quantity_conflicts(mine: list[Condition], theirs: list[Condition]) -> Iterator[tuple[Condition, Condition, str]]:
    for a, b, failing in ((mine, theirs, "mine"), (theirs, mine, "theirs")):
        for need in (c for c in a if c.sense == "min"):
            wanted = [c for c in b if c.sense == "wants"]
            if wanted and max(c.value for c in wanted) < need.value:
                yield _sided(need, max(wanted, key=lambda c: c.value), failing)
                return
        for need in (c for c in a if c.sense == "headcount"):
            held = [c for c in b if c.sense == "capacity"]
            if held and need.value > max(c.value for c in held):
                yield _sided(need, max(held, key=lambda c: c.value), failing)
                return


# --- refusals ------------------------------------------------------------------------------------

#: A refusal, not a lack: "strictly no pets", "no smokers allowed", a clause that is only "no
#: pets"; "no one to review it" and "no sales motion yet" say what a side lacks.
_REFUSAL = re.compile(r"\b(?:strictly|absolutely)\s+no\s+(?P<no>[a-z]+)|\bno\s+(?P<no2>[a-z]+)\s+(?:allowed|accepted|"
                      r"permitted|please)\b|^no\s+(?P<no3>[a-z]+)$|\ballergic\s+to\s+(?P<to>[a-z]+)|"
                      r"\b(?P<free>[a-z]+)-free\b", re.I)
_EXCLUSIVE = re.compile(r"\b(?P<a>[a-z]+)(?:\s+[a-z]+)?\s+only\b|\bonly\s+(?P<b>[a-z]+)\b", re.I)
#: WordNet kinds whose members exclude each other under "only": animals, foods, plants (a dog
#: sitter who sits dogs only does not sit cats; "experience only" says nothing of the kind).
_EXCLUSIVE_KINDS = frozenset({5, 13, 20})
#: WordNet kinds a bare "no X" clause or an "X-free" can refuse: animals, artifacts, foods,
#: people, plants, substances ("No pets", "nut-free"); not states, acts or feelings ("No
#: problem", "No rush", "No worries", "hands-free").
_THINGS = frozenset({5, 6, 13, 18, 20, 27})


def _noun(word: str) -> str | None:
    lemma = match_lexicon.lemma(word)
    return lemma if lemma is not None and match_lexicon.lexfile(lemma) is not None else None


def _refusal(clause: _Clause) -> Iterator[Condition]:
    """What a side refuses ("strictly no pets", "allergic to cats", "nut-free") and what it
    accepts exclusively ("dog sitting only"): a fact of that side, never sought."""
    if clause.sought:
        return
    text = clause.text
    for m in _REFUSAL.finditer(text):
        if (word := _noun(m["no"] or m["no2"] or m["no3"] or m["to"] or m["free"])) is None:
            continue
        if (m["no3"] or m["free"]) and match_lexicon.lexfile(word) not in _THINGS:
            continue  # "No problem.", "No rush", "hands-free": an idiom, not a refused thing
        yield Condition("refusal", "refuses", word, False, m.group(0), text)
    for m in _EXCLUSIVE.finditer(text):
        word = _noun(m["a"] or m["b"] or "")
        if word is not None and match_lexicon.lexfile(word) in _EXCLUSIVE_KINDS:
            yield Condition("refusal", "only", word, False, m.group(0), text)


_KIND_LEVELS = 3
_LETTERS = re.compile(r"[a-z]+", re.I)


def _mentions(user: UserContext) -> list[tuple[str, _Clause]]:
    """(noun, clause) for each noun the user's sought clauses name, then those of who it is
    (``role``, ``title``, ``headline``)."""
    sought, said = [], []
    for clause in _clauses(user):
        if clause.sought or clause.field in ("role", "title", "headline"):
            (sought if clause.sought else said).extend(
                (noun, clause) for w in _LETTERS.findall(clause.text) if (noun := _noun(w)))
    return sought + said


def _refusal_conflicts(own: UserContext, other: UserContext, mine: list[Condition],
                       theirs: list[Condition]) -> Iterator[tuple[Condition, Condition, str]]:
    """One side refuses a kind of thing the other side's request names ("strictly no pets" against
    "a room where my dog can live too": a dog is a domestic animal, which "pet" means), or accepts
    only one kind and the other asks for a sibling kind ("dog sitting only" against "a cat sitter").
    ``mine`` and ``theirs`` are each side's refusals; the other side's words are read only when
    there is a refusal to hold them against."""
    for limits, b, failing in ((mine, other, "theirs"), (theirs, own, "mine")):
        if not limits:
            continue
        mentions = _mentions(b)
        named = {noun for noun, _ in mentions}
        for noun, clause in mentions:
            kinds = {noun} | match_lexicon.broader(noun, _KIND_LEVELS)
            for limit in limits:
                if limit.sense == "refuses":
                    hit = limit.value in kinds or match_lexicon.same_sense(limit.value, noun)
                else:
                    shared = match_lexicon.broader(limit.value, 2) & match_lexicon.broader(noun, 2)
                    hit = (noun != limit.value and match_lexicon.lexfile(noun) == match_lexicon.lexfile(limit.value)
                           and bool(shared) and limit.value not in named)
                if hit:
                    need = Condition("refusal", "names", noun, clause.sought, noun, clause.text)
                    yield (need, limit, failing) if failing == "mine" else (limit, need, failing)
                    return


# --- the API -------------------------------------------------------------------------------------

_READERS = {"money": _money, "level": _level, "schedule": _schedule, "language": _language, "stack": _stack,
            "age": _age, "quantity": _quantity, "refusal": _refusal}


#: A user who speaks for a dependant: its own age is not the age of who would take part.
_DEPENDANT = re.compile(r"\bmy\s+(?:\w+\s+)?(?:son|daughter|child|children|kids?|boy|girl|grandson|granddaughter)s?\b",
                        re.I)


@per_user
def conditions(user: UserContext) -> tuple[Condition, ...]:
    """Every condition ``user`` states, in the order its profile and intents state them."""
    found: list[Condition] = []
    dependant = False
    for clause in _clauses(user):
        dependant = dependant or bool(_DEPENDANT.search(clause.sentence))
        found += _place(clause, user)
        for reader in _READERS.values():
            found += reader(clause)
    if dependant:
        found = [c for c in found if not (c.kind == "age" and c.sense == "is")]
    return tuple(dict.fromkeys(found))


_COMPARE = {"money": _money_conflicts, "place": _place_conflicts, "level": _level_conflicts,
            "schedule": _schedule_conflicts, "language": _language_conflicts, "stack": _stack_conflicts,
            "age": _age_conflicts, "quantity": _quantity_conflicts}


def conflicts(own: UserContext, other: UserContext) -> tuple[Conflict, ...]:
    """The unmet conditions between ``own`` and ``other`` — at most one per kind, in the order
    of :data:`KINDS` — worded from ``own``'s side."""
    mine, theirs = conditions(own), conditions(other)
    found: list[Conflict] = []
    for kind in KINDS:
        of_kind = [c for c in mine if c.kind == kind], [c for c in theirs if c.kind == kind]
        if kind == "refusal":  # held against the other side's words, not only its conditions
            pair = next(_refusal_conflicts(own, other, *of_kind), None)
        else:
            pair = next(_COMPARE[kind](*of_kind), None)
        if pair is not None:
            found.append(Conflict(kind, *pair))
    return tuple(found)
