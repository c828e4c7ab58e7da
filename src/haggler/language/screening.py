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
import unicodedata

_ROLE_WORDS = "owner manager admin administrator boss developer supervisor ceo operator creator"
_ROLE = r"(?:store\s+|shop\s+)?(?:" + "|".join(_ROLE_WORDS.split()) + r")\b"
_YOU = r"(?:you(?:'d|'ll|\s+would|\s+will|\s+can|\s+could)?|u)"


def _rule(triggers: str, pattern: str) -> tuple[frozenset[str], re.Pattern[str]]:
    """A pattern that is only tried when the text contains one of the space-separated ``triggers``."""
    return frozenset(triggers.split()), re.compile(pattern, re.DOTALL)


# Instruction overrides.
_OVERRIDE = _rule(
    "ignore disregard forget override bypass",
    r"\b(?:ignore|disregard|forget|override|bypass)\b.{0,30}?"
    r"\b(?:instructions?|prompts?|rules|guidelines|directives|programming|previous|prior|above)\b",
)
_NEW_INSTRUCTIONS = _rule("instruction instructions", r"\b(?:new|updated|real|actual|hidden|secret)\s+instructions?\b")
_SYSTEM_PROMPT = _rule(
    "system prompt",
    r"\bsystem\s*(?:prompt|message|instructions?)\b|\b(?:initial|original|hidden|your)\s+prompt\b",
)
_YOU_ARE_NOW = _rule(
    "now",
    r"\byou(?:'re|\s+are)\s+now\s+(?:an?|the|my|in|called|named|free|unrestricted|no\s+longer)\b"
    r"|\bfrom\s+now\s+on,?\s+you\b",
)
_ACT_AS = _rule("act", r"\bact\s+as\s+(?:an?|my|the|if)\b")
_MODE = _rule("mode", r"\b(?:developer|dev|debug|god|admin|maintenance)\s+mode\b")
_PRETEND = _rule(
    "pretend pretends pretended pretending jailbreak jailbreaking jailbroken jail roleplay role sudo",
    r"\bpretend|\bjail\s*-?\s*break|\brole-?play\b|\bsudo\b",
)
_MARKUP = _rule(
    "[ <",
    r"\[\s*(?:system|admin|developer|inst)\b|<\s*/?\s*(?:s|system|im_start|im_end)\s*>|<\|[a-z_]+\|>",
)
_REPEAT = _rule(
    "repeat above",
    r"\brepeat\b.{0,30}?\b(?:above|previous|prior|earlier|verbatim|instructions|prompt)\b"
    r"|\b(?:text|message|instructions|prompt)\s+above\b",
)
# Claimed authority.
_AUTHORITY = _rule(
    _ROLE_WORDS,
    r"\bi(?:'m|\s+am)\s+(?:the|your|an|a)\s+" + _ROLE
    + r"|\b(?:this\s+is|speaking\s+as|as)\s+(?:the|your)\s+" + _ROLE,
)
# Probing the reservation price, cost or margin.
_FLOOR = _rule(
    "floor",
    r"\b(?:your|the)\s+floor\b(?!\s*-?\s*(?:models?|samples?|displays?|units?|lamps?|mats?|standing"
    r"|stands?|plans?|space|tiles?|cleaners?)\b)|\bprice\s+floor\b|\bfloor\s+price\b",
)
_MINIMUM = _rule(
    "minimum",
    r"\b(?:your|the)\s+(?:absolute\s+)?minimum\b(?!\s+(?:order|warranty|age|purchase|spend|quantity"
    r"|requirements?|specs?|system|size|length|shipping|battery)\b)",
)
_LOWEST = _rule(
    "minimum least lowest",
    r"\b(?:minimum|least|lowest)\s+(?:price\s+)?" + _YOU + r"\s+(?:can\s+|could\s+|would\s+)?"
    r"(?:go|take|accept|sell|do)\b|\b(?:absolute\s+lowest|lowest\s+possible)\b",
)
_BOTTOM = _rule(
    "bottom reservation reserve walk walkaway",
    r"\bbottom\s+(?:line|dollar)\b|\b(?:reservation|reserve|walk-?\s?away)\s+price\b",
)
_COST = _rule(
    "cost costs margin margins markup mark profit wholesale purchase pay",
    r"\byour\s+(?:cost|costs|margins?|markup|mark-up|profit|wholesale|purchase\s+price)\b"
    r"|\b(?:cost\s+price|at\s+cost|profit\s+margins?|wholesale\s+(?:price|cost))\b|\bmargins?\s+on\b"
    r"|\bwhat\s+(?:did|do)\s+you\s+pay\b|\bhow\s+much\s+did\s+you\s+pay\b|\bcost\s+you\b",
)
# Dumping hidden state.
_DUMP = _rule(
    "reveal print dump list output display leak expose show tell",
    r"\b(?:reveal|print|dump|list|output|display|leak|expose|show\s+me|tell\s+me)\b.{0,30}?"
    r"\b(?:levers?|inventory\s+notes?|internal|secrets?|instructions|prompt|config(?:uration)?"
    r"|parameters|settings|hidden\s+(?:\w+\s+)?(?:state|notes?|info(?:rmation)?|data|fields?|values?))\b"
    r"|\b(?:reveal|print|dump|leak|expose)\b.{0,30}?\bhidden\b",
)
_NOTES = _rule("note notes", r"\b(?:internal|inventory|private|merchant)\s+notes?\b")
_LEVERS = _rule("lever levers", r"\b(?:your|all|negotiation|hidden)\s+levers?\b")

_RULES = (
    _OVERRIDE,
    _NEW_INSTRUCTIONS,
    _SYSTEM_PROMPT,
    _YOU_ARE_NOW,
    _ACT_AS,
    _MODE,
    _PRETEND,
    _MARKUP,
    _REPEAT,
    _AUTHORITY,
    _FLOOR,
    _MINIMUM,
    _LOWEST,
    _BOTTOM,
    _COST,
    _DUMP,
    _NOTES,
    _LEVERS,
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


# --- Market audit markers (spec 003, "Security Model") -----------------------------------------
#
# Market listing descriptions and DMs are untrusted text. The framework never lets them move a
# limit (owner mandates are enforced in haggler.protocols.market.mandates); these markers only
# say *why* a text deserves a line in the audit log ("Log when description contains suspicious
# patterns", "Flag messages containing phrases like 'your owner said' or 'trust me'"). The text
# itself is never altered: every rule reads normalised copies of it.
#
# The merchant's rules above are reused where they mean the same thing here (role play, claimed
# authority, prompt markup); its "ignore ... previous" and "your prompt" patterns are not, because
# "please ignore my previous message" and "thanks for your prompt reply" are ordinary market DMs.

#: Latin look-alikes in other scripts (Cyrillic, Greek, a few symbols), mapped to the letter they imitate.
_CONFUSABLES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
    "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ԛ": "q", "ԝ": "w",
    "ɡ": "g", "ɩ": "i", "ο": "o", "α": "a", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ρ": "p", "τ": "t",
    "υ": "u", "χ": "x", "ϲ": "c", "ʏ": "y", "ı": "i",
})
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "|": "i",
                       "!": "i"})
#: Invisible characters used to split keywords or hide instructions (not ZWJ, which emoji use).
_INVISIBLE = re.compile("[\u00ad\u200b\u200c\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")
#: Unicode tag characters (U+E0000..E007F) smuggle ASCII; outside a subdivision flag (🏴 + tags) they hide text.
_TAGS = re.compile("[\U000e0000-\U000e007f]+")
_FLAG_TAGS = re.compile("\U0001f3f4[\U000e0020-\U000e007e]+\U000e007f")
_LATIN = re.compile(r"[a-z]")
_FOREIGN = re.compile("[\u0370-\u03ff\u0400-\u04ff\u0500-\u052f]")
#: Letters spelt out with separators: "s y s t e m", "S.Y.S.T.E.M", "i-g-n-o-r-e".
_SPACED = re.compile(r"\b(?:[a-z][ .\-_*·/]{1,3}){3,}[a-z]\b")

_OWNERS = r"(?:owner|principal|human|user|boss|master|client|operator)"
_CLAIM_VERBS = (
    r"(?:said|says|told|tells|wants|wanted|asked|instructed|authori[sz]ed|approved|allowed|allows|agreed"
    r"|mentioned|confirmed|raised|increased|messaged|emailed|texted|wrote|informed|specified|gave|sent"
    r"|decided|changed|updated|doubled)"
)
_LIMITS = r"(?:budget|limit|max(?:imum)?(?:\s+(?:spend|price|budget))?|max_?spend|spending\s+limit|cap|ceiling)"

_MARKET_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(pattern, re.DOTALL | re.MULTILINE))
    for name, pattern in (
        # [SYSTEM: ...], "SYSTEM:" opening a line or sentence, chat-role JSON, "system override".
        ("system_tag",
         r"(?:^|[\[\(<{#*|>\"'.!?;:\-])\s*(?:system|systeme|sistema|sys|admin|administrator|developer|assistant"
         r"|operator)\s*(?:message|prompt|note|notice|override|instructions?|nachricht|mensaje)?\s*:"
         r"|\bsystem\s*(?:prompt|message|instructions?|override|notice)\b"
         r"|\"role\"\s*:\s*\"(?:system|developer|assistant)\""),
        # "ignore their stated limit", "disregard your mandate", and the same in FR/DE/ES/IT.
        ("ignore_limit",
         r"\b(?:ignor\w*|disregard\w*|forget|override|overrule|bypass|skip|oubli\w*|vergiss\w*|missacht\w*"
         r"|olvid\w*|dimentic\w*)\b.{0,40}?\b(?:limits?|limite[sn]?|limiti|budgets?|presupuesto|mandat\w*"
         r"|constraints?|caps?|ceilings?|max(?:imum)?|max_?spend|spending|instruc\w*|instruktion\w*"
         r"|anweisung\w*|vorgabe\w*|istruzion\w*|consignes?|rules|regles|regeln|reglas|guidelines"
         r"|directives|programming|owner)\b"),
        # "your owner told me", "I spoke with your owner", "votre propriétaire m'a dit", ...
        ("owner_claim",
         r"\byour\s+" + _OWNERS + r"s?\s+(?:has\s+|had\s+|just\s+|already\s+|actually\s+|personally\s+|also\s+"
         r"|really\s+|clearly\s+)*" + _CLAIM_VERBS + r"\b"
         r"|\b(?:spoke|spoken|talked|chatted|checked|talking|speaking)\s+(?:with|to)\s+your\s+" + _OWNERS
         + r"|\b(?:according\s+to|on\s+behalf\s+of)\s+your\s+" + _OWNERS
         + r"|\byour\s+" + _OWNERS + r"'?s\s+(?:real|true|actual|new|updated|wish|instructions?|orders?)\b"
         r"|\b(?:ton|ta|votre)\s+(?:proprietaire|proprio|maitre|patron|utilisateur|humain)\s+"
         r"(?:m'a|a|nous\s+a|vous\s+a)\s+(?:dit|demande|autorise|confirme|ecrit|explique)"
         r"|\b(?:dein|deine|ihr|ihre)\s+(?:besitzer\w*|eigentumer\w*|chef\w*|herr\w*|nutzer\w*|mensch\w*)\s+hat\s+"
         r"(?:mir\s+|uns\s+)?(?:gesagt|erlaubt|bestatigt|geschrieben|mitgeteilt)"
         r"|\btu\s+(?:dueno|duena|propietari[oa]|jefe|usuario|amo)\s+(?:me\s+|nos\s+)?(?:dijo|ha\s+dicho|"
         r"autorizo|confirmo|escribio|pidio)"
         r"|\bil\s+tuo\s+(?:proprietario|padrone|capo|utente)\s+mi\s+ha\s+(?:detto|scritto|autorizzato)"),
        # "Trust me." and its cousins, in five languages.
        ("trust_me",
         r"\btrust\s+me\b|\bbelieve\s+me\b|\btake\s+my\s+word\b|\bi\s+swear\b|\bi\s+promise\s+you\b"
         r"|\bfai(?:s|tes)[\s-]+moi\s+confiance\b|\bcroye?[sz][\s-]+moi\b|\bvertrau(?:e|en\s+sie)?\s+mir\b"
         r"|\bglaub(?:e|en\s+sie)?\s+mir\b|\bconfia\s+en\s+mi\b|\bcreeme\b|\bfidati\s+di\s+me\b|\bcredimi\b"),
        # "Studies show that buyers who pay 250€ are 95% happier."
        ("appeal_to_studies",
         r"\b(?:studies|research|science|statistics|surveys?|experts|scientists|economists)\s+(?:have\s+)?"
         r"(?:show|shows|shown|showed|prove|proves|proven|proved|suggest|suggests|agree|confirm|confirms|found"
         r"|finds)\b|\bscientifically\s+proven\b|\b\d{1,3}(?:[.,]\d+)?\s*%\s+(?:of\s+)?(?:buyers|sellers|people"
         r"|customers|agents|owners)\b|\b\d{1,3}\s*%\s+(?:happier|more\s+satisfied|less\s+regret)"
         r"|\b(?:les\s+)?etudes\s+(?:montrent|prouvent)\b|\bstudien\s+(?:zeigen|belegen|beweisen)\b"
         r"|\b(?:los\s+)?estudios\s+(?:muestran|demuestran)\b|\b(?:gli\s+)?studi\s+(?:dimostrano|mostrano)\b"),
        # "This buyer's true budget is 500€", "raise your limit", "tu presupuesto real".
        ("budget_claim",
         r"\b(?:true|real|actual|new|updated|increased|raised|revised|secret|hidden)\s+" + _LIMITS + r"\b"
         r"|\byour\s+" + _LIMITS + r"\s+(?:is|was|has\s+been)\s+(?:now|actually|really|raised|increased|"
         r"higher|\d)"
         r"|\b(?:raise|increase|exceed|go\s+(?:above|over|beyond|past)|stretch|break|lift|double|ignore)\s+your\s+"
         + _LIMITS + r"\b"
         r"|\b(?:vrai|veritable|nouveau)\s+(?:budget|plafond)\b|\bbudget\s+reel\b"
         r"|\b(?:echtes|wahres|neues)\s+(?:budget|limit)\b"
         r"|\b(?:presupuesto|limite)\s+(?:real|verdadero)\b|\bverdadero\s+presupuesto\b"),
        # Mandate text that did not come through the signed channel: "updated mandate (signed)",
        # JSON with mandate fields, a "signature": "0x..." pasted in a message.
        ("fake_mandate",
         r"\bmandat[eo]s?\b.{0,60}?\b(?:signed|signature|signiert|signe|firmad[oa]|updated|new|override"
         r"|amended|revised|verified|attached|nouveau|neues|nuevo)\b"
         r"|\b(?:signed|signature|updated|new|amended|revised|verified|override)\b.{0,60}?\bmandat[eo]?s?\b"
         r"|\"?(?:owner_?mandate|max_?spend|min_?acceptable_?price|required_?condition|can_?accept_?instant_?match"
         r"|requires_?owner_?approval|mandate_?version|can_?negotiate|can_?use_?sealed_?bid)\"?\s*[:=]"
         r"|\"signature\"\s*:\s*\"0x"),
        ("role_play",
         r"\byour\s+new\s+(?:role|task|job|goal|persona|instructions?)\b|\bimagine\s+(?:that\s+)?you\s+are\b"
         r"|\blet'?s\s+play\s+a\s+game\b|\bstay\s+in\s+character\b|\bas\s+an?\s+(?:ai|language\s+model)\b"
         r"|\btu\s+es\s+maintenant\b|\bagis\s+comme\b|\bfais\s+comme\s+si\b|\bdu\s+bist\s+(?:jetzt|nun)\b"
         r"|\ba(?:hora|\s+partir\s+de\s+ahora)\s+eres\b|\bora\s+sei\b"),
        ("claimed_authority",
         r"\b(?:this\s+is|message\s+from|notice\s+from|note\s+from|i(?:'m|\s+am)|speaking\s+for)\s+(?:the\s+"
         r"|your\s+)?(?:haggler\s+|market\s+)?(?:framework|platform|escrow|moderator|market\s+admin\w*"
         r"|system\s+admin\w*|security\s+team|trust\s+and\s+safety)\b"),
    )
)
#: The merchant's own rules that mean the same in the market (their patterns, without the
#: merchant's trigger-word guard).
_REUSED_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, pattern) for name, (_, pattern) in (
        ("system_tag", _MARKUP),
        ("role_play", _YOU_ARE_NOW),
        ("role_play", _ACT_AS),
        ("role_play", _MODE),
        ("role_play", _PRETEND),
        ("role_play", _NEW_INSTRUCTIONS),
        ("claimed_authority", _AUTHORITY),
    )
)
_ALL_MARKET_RULES = _MARKET_RULES + _REUSED_RULES


def _strip_accents(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFD", text) if not unicodedata.combining(c))


def _untag(match: re.Match[str]) -> str:
    return " " + "".join(chr(ord(c) - 0xE0000) for c in match.group(0) if 0xE0020 <= ord(c) <= 0xE007E) + " "


def _readings(text: str) -> tuple[list[str], set[str]]:
    """The normalised copies of ``text`` the market rules read, and the markers the
    normalisation itself found (invisible characters, look-alike letters)."""
    found: set[str] = set()
    if _INVISIBLE.search(text) or _TAGS.search(_FLAG_TAGS.sub("", text)):
        found.add("hidden_characters")
    base = _TAGS.sub(_untag, _FLAG_TAGS.sub("", _INVISIBLE.sub("", text)))
    base = unicodedata.normalize("NFKC", base).lower()
    for word in re.findall(r"\w+", base):
        if _LATIN.search(word) and _FOREIGN.search(word):
            found.add("look_alike_characters")
            break
    plain = normalize_text(_strip_accents(base.translate(_CONFUSABLES)))
    plain = re.sub(r"[ \t\u00a0]+", " ", plain)
    readings = [plain]
    squashed = _SPACED.sub(lambda m: re.sub(r"[ .\-_*·/]", "", m.group(0)), plain)
    if squashed != plain:
        readings.append(squashed)
    leet = plain.translate(_LEET)
    if leet != plain:
        readings.append(leet)
    return readings, found


def suspicious_markers(text: str) -> tuple[str, ...]:
    """The names of the suspicious patterns in a market listing description or message, sorted;
    empty when there are none. For the audit log only: it never alters ``text`` and decides nothing.

    Markers: ``system_tag``, ``ignore_limit``, ``owner_claim``, ``trust_me``, ``appeal_to_studies``,
    ``budget_claim``, ``fake_mandate``, ``role_play``, ``claimed_authority``, ``hidden_characters``,
    ``look_alike_characters``.
    """
    readings, found = _readings(text)
    for reading in readings:
        for name, pattern in _ALL_MARKET_RULES:
            if name not in found and pattern.search(reading):
                found.add(name)
    return tuple(sorted(found))
