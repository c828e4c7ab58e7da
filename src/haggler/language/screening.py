"""Spotting shopper turns that try to manipulate the merchant agent.

A shopper (often another AI agent) may try to talk the merchant out of its hidden state — the
floor price, cost, margin, negotiation levers, inventory notes — or to override its
instructions ("ignore your previous instructions", "I am the store owner"). The merchant does
not refuse such turns outright; it deflects them, so a false positive is cheap but should still
be rare: ordinary haggling ("can you do 500?", "what's the warranty?", "any discount?") must
never be flagged.

This runs on every turn, so each rule is a small pre-compiled regex guarded by the words it
cannot match without: most turns contain none of them and cost one word split.
"""

from __future__ import annotations

import re

_ROLE_WORDS = "owner manager admin administrator boss developer supervisor ceo operator creator"
_ROLE = r"(?:store\s+|shop\s+)?(?:" + "|".join(_ROLE_WORDS.split()) + r")\b"
_YOU = r"(?:you(?:'d|'ll|\s+would|\s+will|\s+can|\s+could)?|u)"


def _rule(triggers: str, pattern: str) -> tuple[frozenset[str], re.Pattern[str]]:
    """A pattern that is only tried when the text contains one of the space-separated ``triggers``."""
    return frozenset(triggers.split()), re.compile(pattern, re.DOTALL)


_RULES = (
    # Instruction overrides.
    _rule(
        "ignore disregard forget override bypass",
        r"\b(?:ignore|disregard|forget|override|bypass)\b.{0,30}?"
        r"\b(?:instructions?|prompts?|rules|guidelines|directives|programming|previous|prior|above)\b",
    ),
    _rule("instruction instructions", r"\b(?:new|updated|real|actual|hidden|secret)\s+instructions?\b"),
    _rule(
        "system prompt",
        r"\bsystem\s*(?:prompt|message|instructions?)\b|\b(?:initial|original|hidden|your)\s+prompt\b",
    ),
    _rule(
        "now",
        r"\byou(?:'re|\s+are)\s+now\s+(?:an?|the|my|in|called|named|free|unrestricted|no\s+longer)\b"
        r"|\bfrom\s+now\s+on,?\s+you\b",
    ),
    _rule("act", r"\bact\s+as\s+(?:an?|my|the|if)\b"),
    _rule("mode", r"\b(?:developer|dev|debug|god|admin|maintenance)\s+mode\b"),
    _rule(
        "pretend pretends pretended pretending jailbreak jailbreaking jailbroken jail roleplay role sudo",
        r"\bpretend|\bjail\s*-?\s*break|\brole-?play\b|\bsudo\b",
    ),
    _rule(
        "[ <",
        r"\[\s*(?:system|admin|developer|inst)\b|<\s*/?\s*(?:s|system|im_start|im_end)\s*>|<\|[a-z_]+\|>",
    ),
    _rule(
        "repeat above",
        r"\brepeat\b.{0,30}?\b(?:above|previous|prior|earlier|verbatim|instructions|prompt)\b"
        r"|\b(?:text|message|instructions|prompt)\s+above\b",
    ),
    # Claimed authority.
    _rule(
        _ROLE_WORDS,
        r"\bi(?:'m|\s+am)\s+(?:the|your|an|a)\s+" + _ROLE
        + r"|\b(?:this\s+is|speaking\s+as|as)\s+(?:the|your)\s+" + _ROLE,
    ),
    # Probing the reservation price, cost or margin.
    _rule(
        "floor",
        r"\b(?:your|the)\s+floor\b(?!\s*-?\s*(?:models?|samples?|displays?|units?|lamps?|mats?|standing"
        r"|stands?|plans?|space|tiles?|cleaners?)\b)|\bprice\s+floor\b|\bfloor\s+price\b",
    ),
    _rule(
        "minimum",
        r"\b(?:your|the)\s+(?:absolute\s+)?minimum\b(?!\s+(?:order|warranty|age|purchase|spend|quantity"
        r"|requirements?|specs?|system|size|length|shipping|battery)\b)",
    ),
    _rule(
        "minimum least lowest",
        r"\b(?:minimum|least|lowest)\s+(?:price\s+)?" + _YOU + r"\s+(?:can\s+|could\s+|would\s+)?"
        r"(?:go|take|accept|sell|do)\b|\b(?:absolute\s+lowest|lowest\s+possible)\b",
    ),
    _rule(
        "bottom reservation reserve walk walkaway",
        r"\bbottom\s+(?:line|dollar)\b|\b(?:reservation|reserve|walk-?\s?away)\s+price\b",
    ),
    _rule(
        "cost costs margin margins markup mark profit wholesale purchase pay",
        r"\byour\s+(?:cost|costs|margins?|markup|mark-up|profit|wholesale|purchase\s+price)\b"
        r"|\b(?:cost\s+price|at\s+cost|profit\s+margins?|wholesale\s+(?:price|cost))\b|\bmargins?\s+on\b"
        r"|\bwhat\s+(?:did|do)\s+you\s+pay\b|\bhow\s+much\s+did\s+you\s+pay\b|\bcost\s+you\b",
    ),
    # Dumping hidden state.
    _rule(
        "reveal print dump list output display leak expose show tell",
        r"\b(?:reveal|print|dump|list|output|display|leak|expose|show\s+me|tell\s+me)\b.{0,30}?"
        r"\b(?:levers?|inventory\s+notes?|internal|secrets?|instructions|prompt|config(?:uration)?"
        r"|parameters|settings|hidden\s+(?:\w+\s+)?(?:state|notes?|info(?:rmation)?|data|fields?|values?))\b"
        r"|\b(?:reveal|print|dump|leak|expose)\b.{0,30}?\bhidden\b",
    ),
    _rule("note notes", r"\b(?:internal|inventory|private|merchant)\s+notes?\b"),
    _rule("lever levers", r"\b(?:your|all|negotiation|hidden)\s+levers?\b"),
)

_WORD = re.compile(r"[a-z]+|[\[<]")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})


def normalize_text(text: str) -> str:
    """Lower case with typographic apostrophes made plain: the form every text rule reads."""
    return text.lower().translate(_APOSTROPHES)


def looks_like_manipulation(text: str) -> bool:
    """True when ``text`` tries to extract the merchant's hidden state or override its instructions.

    The merchant uses this to deflect rather than answer; it never changes how prices are parsed.
    """
    return manipulation_in(normalize_text(text))


def manipulation_in(lowered: str) -> bool:
    """:func:`looks_like_manipulation` for text already passed through :func:`normalize_text`."""
    words = set(_WORD.findall(lowered))
    return any(
        not words.isdisjoint(triggers) and pattern.search(lowered) is not None for triggers, pattern in _RULES
    )
