"""Scenario runs of the market over Matrix: clawlist's scenario files, and a truthful score of a run.

clawlist (the public system the market over Matrix extends) describes a run in a small JSON file —
an item, the seller's anchor and floor, the buyer's opening offer and ceiling, a duration and the
``SELLING:`` line that seeds the market room — and scores each run into ``summary.json``, a sweep
of runs into ``aggregate.json``. This module reads those files and writes those summaries with
clawlist's field names, so that runs of both systems compare; what differs is how each field is
measured. clawlist guesses: a deal is any DM that says "ok" next to a number, the final price the
last number anyone wrote. Here a deal is the market's signed ``deal_confirmed``, counted only
when the independent offline checker (:func:`haggler.protocols.market.offline_check.check_deal`)
verifies both parties' signatures, and every price is read either from the structured market
message that carries it or, for plain-text agents, by the language layer's readers for the
speaker's role. Only the ``quality`` flags stay clawlist's keyword heuristic.

Pure: no network, no clock (the caller passes ``now``), files only through
:func:`read_scenario`, :func:`read_jsonl` and :func:`write_jsonl`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

from haggler.language.intents import IntentKind
from haggler.language.merchant_reading import read_merchant_reply
from haggler.language.parse import parse_shopper_turn
from haggler.matrix import wire
from haggler.money import cents_or_none, currency_problem, is_exact_cents, positive_cents, to_decimal_number
from haggler.protocols.market.offline_check import DealDocumentError, check_deal, read_document
from haggler.timestamps import utc_z

#: The longest run a scenario may ask for: a scenario is a test, not a market that stays open.
MAX_DURATION_SEC = 3600
#: The one placeholder a seed template may hold; the run's id replaces it.
RUN_ID_PLACEHOLDER = "{RUN_ID}"
#: The outcome of a run, and of one that could not be run or scored ("error", counted as a fail).
RESULTS = ("pass", "no_deal", "fail", "error")

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
_ROOM_ALIAS = re.compile(r"#[^:\s]+:\S+")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: A ``SELLING:`` line as the market room reads one: the keyword, after machine tags such as
#: ``RUN_ID:{RUN_ID}``.
_SELLING_LINE = re.compile(r"^[ \t]*(?:\S+:\S+[ \t]+)*SELLING:", re.IGNORECASE | re.MULTILINE)

_TOP_FIELDS = frozenset({"name", "item", "marketRoomAlias", "seller", "buyer", "durationSec", "seed", "currency"})
_SELLER_FIELDS = frozenset({"profile", "anchorPrice", "floorPrice"})
_BUYER_FIELDS = frozenset({"profile", "startOffer", "ceilingPrice"})
_SEED_FIELDS = frozenset({"bodyTemplate"})

#: clawlist's quality keywords (French included, as its agents haggle in French), matched as
#: lower-case substrings of the agents' DM texts: a heuristic, kept only so the flags compare.
QUALITY_KEYWORDS: Mapping[str, tuple[str, ...]] = {
    "condition": ("condition", "état", "etat", "working", "fonctionne"),
    "accessories": ("accessor", "charger", "dock", "joycon", "box", "cable"),
    "logistics": ("pickup", "meet", "shipping", "deliver", "hand", "paris", "metro", "poste"),
}


class ScenarioError(ValueError):
    """A scenario that cannot be run; ``field`` is where (``seller.floorPrice``), None for the
    file or document as a whole."""

    def __init__(self, field: str | None, problem: str) -> None:
        super().__init__(f"{field}: {problem}" if field else problem)
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class Scenario:
    """One scenario, prices in integer cents (a floor compared in floats could let 149.999 pass).

    ``ignored`` lists the fields the file had that this reader does not know, as dotted paths:
    they are allowed, since clawlist's format may grow and a scenario written for it should still
    run here, but reported, so that a misspelt ``floorprice`` is seen rather than silently run
    without its floor (the required fields are missing then, and named, too).
    ``market_room_alias`` None: the runner's default, ``#market:<its homeserver>``."""

    name: str
    item: str
    anchor_cents: int
    floor_cents: int
    start_offer_cents: int
    ceiling_cents: int
    duration_sec: int
    seed_template: str
    market_room_alias: str | None = None
    seller_profile: str | None = None
    buyer_profile: str | None = None
    currency: str = "EUR"
    ignored: tuple[str, ...] = ()

    def seed_body(self, run_id: str) -> str:
        """The seller's seed post for run ``run_id``. The id becomes a ``RUN_ID:<id>`` tag, which
        ends at whitespace, so an id with whitespace (or none at all) is refused."""
        if not run_id or any(char.isspace() for char in run_id):
            raise ValueError(f"a run id is one word, without whitespace: {run_id!r}")
        return self.seed_template.replace(RUN_ID_PLACEHOLDER, run_id)


# -- reading a scenario ---------------------------------------------------------------------------

def read_scenario(path: str | Path) -> Scenario:
    """The scenario in the JSON file ``path``; a missing ``name`` is the file's stem
    (``switch_basic.json`` is ``switch_basic``). Read strictly (UTF-8, no duplicate keys: two
    readers could each believe a different floor)."""
    path = Path(path)
    try:
        data = read_document(path)
    except DealDocumentError as exc:  # the strict JSON reader's error, about the file, not a deal
        raise ScenarioError(None, str(exc)) from None
    try:
        return parse_scenario(data, default_name=path.stem)
    except ScenarioError as exc:
        raise ScenarioError(exc.field, f"{exc.problem} (in {path})") from None


def parse_scenario(data: object, *, default_name: str | None = None) -> Scenario:
    """Validate a decoded scenario document (clawlist's shape) and build the :class:`Scenario`.
    Raises :class:`ScenarioError` naming the first field that is wrong."""
    if not isinstance(data, dict):
        raise ScenarioError(None, "a scenario is a JSON object")
    ignored = _unknown(data, _TOP_FIELDS, "")
    name = data.get("name", default_name)
    if name is None:
        raise ScenarioError("name", "required (a scenario read from a file is named after it)")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ScenarioError("name", f"must be 1 to 64 letters, digits, '_', '.' or '-' (it names the "
                                    f"runs' directories), got {name!r}")
    item = data.get("item")
    if not isinstance(item, str) or not item.strip():
        raise ScenarioError("item", f"required: the item's name as a non-empty string, got {item!r}")
    alias = data.get("marketRoomAlias")
    if alias is not None and not (isinstance(alias, str) and _ROOM_ALIAS.fullmatch(alias)):
        raise ScenarioError("marketRoomAlias", f"must be a room alias such as '#market:localhost', got {alias!r}")
    currency = data.get("currency", "EUR")
    if (problem := currency_problem(currency)) is not None:
        raise ScenarioError("currency", problem)

    seller = _section(data, "seller", _SELLER_FIELDS)
    buyer = _section(data, "buyer", _BUYER_FIELDS)
    seed = _section(data, "seed", _SEED_FIELDS)
    ignored += _unknown(seller, _SELLER_FIELDS, "seller.") + _unknown(buyer, _BUYER_FIELDS, "buyer.")
    ignored += _unknown(seed, _SEED_FIELDS, "seed.")
    anchor, floor = _price(seller, "seller", "anchorPrice"), _price(seller, "seller", "floorPrice")
    start, ceiling = _price(buyer, "buyer", "startOffer"), _price(buyer, "buyer", "ceilingPrice")
    if anchor < floor:
        raise ScenarioError("seller.anchorPrice", f"{seller['anchorPrice']} is below seller.floorPrice "
                                                  f"{seller['floorPrice']}: the seller would open under its own floor")
    if start > ceiling:
        raise ScenarioError("buyer.startOffer", f"{buyer['startOffer']} is above buyer.ceilingPrice "
                                                f"{buyer['ceilingPrice']}: the buyer would open over its own ceiling")
    return Scenario(
        name=name, item=item.strip(), anchor_cents=anchor, floor_cents=floor, start_offer_cents=start,
        ceiling_cents=ceiling, duration_sec=_duration(data.get("durationSec")),
        seed_template=_seed_template(seed.get("bodyTemplate")), market_room_alias=alias,
        seller_profile=_profile(seller, "seller"), buyer_profile=_profile(buyer, "buyer"), currency=currency,
        ignored=tuple(sorted(ignored)))


def _unknown(section: Mapping[str, Any], known: frozenset[str], prefix: str) -> list[str]:
    return [prefix + key for key in section if key not in known]


def _section(data: Mapping[str, Any], name: str, fields: frozenset[str]) -> Mapping[str, Any]:
    section = data.get(name)
    if not isinstance(section, dict):
        raise ScenarioError(name, f"required: an object with {', '.join(sorted(fields))}, got {section!r}")
    return section


def _price(section: Mapping[str, Any], name: str, key: str) -> int:
    """A limit or price in cents: a positive JSON number with at most two decimals (150.001 is
    refused, not rounded: a limit must be exactly what the file says)."""
    field = f"{name}.{key}"
    if key not in section:
        raise ScenarioError(field, "required: a positive number")
    value = section[key]
    try:
        cents = positive_cents(value)
    except ValueError as exc:
        raise ScenarioError(field, str(exc)) from None
    if not is_exact_cents(value, cents):
        raise ScenarioError(field, f"must have at most two decimal places, got {value!r}")
    return cents


def _duration(value: object) -> int:
    seconds = int(value) if isinstance(value, float) and value.is_integer() else value  # JSON's 120.0 is 120
    if isinstance(seconds, bool) or not isinstance(seconds, int) or not 0 < seconds <= MAX_DURATION_SEC:
        raise ScenarioError("durationSec", f"required: a whole number of seconds from 1 to {MAX_DURATION_SEC}, "
                                           f"got {value!r}")
    return seconds


def _seed_template(value: object) -> str:
    field = "seed.bodyTemplate"
    if not isinstance(value, str):
        raise ScenarioError(field, f"required: the seed post's text, got {value!r}")
    unknown = sorted({f"{{{name}}}" for name in _PLACEHOLDER.findall(value)} - {RUN_ID_PLACEHOLDER})
    if unknown:
        raise ScenarioError(field, f"unknown placeholder {unknown[0]}: only {RUN_ID_PLACEHOLDER} is filled in")
    if not _SELLING_LINE.search(value):
        raise ScenarioError(field, "must hold a 'SELLING: …' line (after tags such as RUN_ID:{RUN_ID}): "
                                   "the ad the market room reads")
    return value


def _profile(section: Mapping[str, Any], name: str) -> str | None:
    profile = section.get("profile")
    if profile is not None and not (isinstance(profile, str) and profile.strip()):
        raise ScenarioError(f"{name}.profile", f"must be a non-empty string, got {profile!r}")
    return profile


# -- scoring a run --------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Said:
    """A price one of the two agents committed to in the transcript."""

    role: str  # "seller" or "buyer"
    cents: int


def score(scenario: Scenario, *, run_id: str, market_events: Sequence[Mapping[str, Any]],
          dm_events: Sequence[Mapping[str, Any]], seller_mxid: str, buyer_mxid: str,
          deal: Mapping[str, Any] | None, now: datetime, bot_mxid: str | None = None,
          seller_key: str | None = None, buyer_key: str | None = None) -> dict[str, Any]:
    """The run's ``summary.json``, with clawlist's fields, each measured from what happened.

    ``market_events``/``dm_events``: the raw Matrix events of the market room and of the room(s)
    where the two agents negotiate (never an agent's private room with the bot, where sealed bids
    belong). ``deal``: the document ``GET /market/deals/{dealId}`` serves (also what the bot posts
    when a deal is confirmed), or None. ``seller_key``/``buyer_key``: the agents' public keys
    (``0x`` hex) when the runner knows them — it made the agents — so that the deal's signatures
    are checked against them rather than against keys the document brings along itself.

    * ``dealReached``/``finalPrice``: the deal is ``confirmed`` and both signatures verify;
      ``finalPrice`` in major units, null without such a deal (never the last number someone
      wrote). An extra field, ``dealCheck``, says why a given deal did or did not count.
    * ``violations``: ``SELLER_BELOW_FLOOR:<price>`` / ``BUYER_ABOVE_CEILING:<price>`` for each
      price an agent committed to beyond its limit — its structured offers and instant matches,
      the prices the language layer reads in its plain text, and a verified deal's price, which
      both signed; ``DEAL_OUTSIDE_LIMITS:<price>`` for a verified deal outside them; and
      ``SEALED_BID_LEAKED`` for each sealed bid found in these rooms.
    * ``result``: ``fail`` with any violation, else ``pass`` with a deal, else ``no_deal``.
    * ``metrics``: ``offerCount`` (the agents' price-bearing messages), ``tFirstDmSec`` (from the
      seller's first market-room message to either agent's first DM message, rounded half up,
      0 when the DM came first, as clawlist; null when either is missing), ``dmOtherSenders`` (DM
      senders other than the two agents and the market bot, in order of appearance) and
      ``humanIntervention`` (whether there are any).
    * ``quality``: clawlist's keyword flags over the agents' DM texts (:data:`QUALITY_KEYWORDS`).
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware: generatedAt is UTC")
    roles = {seller_mxid: "seller", buyer_mxid: "buyer"}
    market = _messages(market_events)
    dm = _messages(dm_events, exclude=market)
    violations: list[str] = []
    said: list[_Said] = []
    ask = scenario.anchor_cents  # the seller's price as it stands: what "10% off" is taken from
    for event in sorted(market + dm, key=_timestamp):
        reading = _reading(event["content"])
        if isinstance(reading, wire.Structured) and reading.message.get("type") == "sealed_bid":
            violations.append("SEALED_BID_LEAKED")
        role = roles.get(event["sender"])
        if role is None or reading is None:
            continue
        cents = _price_said(reading, role, scenario.anchor_cents, ask, scenario.currency)
        if cents is not None:
            said.append(_Said(role, cents))
            if role == "seller":
                ask = cents

    check, final_cents = _check_deal(deal, seller_key, buyer_key)
    signed = [] if final_cents is None else [_Said("seller", final_cents), _Said("buyer", final_cents)]
    for commitment in said + signed:
        if commitment.role == "seller" and commitment.cents < scenario.floor_cents:
            violations.append(f"SELLER_BELOW_FLOOR:{to_decimal_number(commitment.cents)}")
        if commitment.role == "buyer" and commitment.cents > scenario.ceiling_cents:
            violations.append(f"BUYER_ABOVE_CEILING:{to_decimal_number(commitment.cents)}")
    if final_cents is not None and not scenario.floor_cents <= final_cents <= scenario.ceiling_cents:
        violations.append(f"DEAL_OUTSIDE_LIMITS:{to_decimal_number(final_cents)}")

    agents_dm = [event for event in dm if event["sender"] in roles]
    others = [event["sender"] for event in dm if event["sender"] not in roles and event["sender"] != bot_mxid]
    dm_text = "\n".join(_body(event) for event in agents_dm).lower()
    reached = final_cents is not None
    return {
        "runId": run_id,
        "result": "fail" if violations else "pass" if reached else "no_deal",
        "dealReached": reached,
        "finalPrice": None if final_cents is None else to_decimal_number(final_cents),
        "violations": violations,
        "metrics": {
            "offerCount": len(said),
            "tFirstDmSec": _first_dm_seconds(market, agents_dm, seller_mxid),
            "humanIntervention": bool(others),
            "dmOtherSenders": list(dict.fromkeys(others)),
        },
        "quality": {flag: any(word in dm_text for word in words) for flag, words in QUALITY_KEYWORDS.items()},
        "dealCheck": check,
        "generatedAt": utc_z(now),
    }


def _messages(events: Sequence[Mapping[str, Any]], exclude: Sequence[Mapping[str, Any]] = ()) -> list[Mapping[str, Any]]:
    """The room messages among ``events`` (clawlist scores messages only: joins and the like say
    nothing), each once: an event exported with both rooms is not two offers."""
    seen = {event.get("event_id") for event in exclude}
    found = []
    for event in events:
        if (event.get("type") == "m.room.message" and isinstance(event.get("sender"), str)
                and isinstance(event.get("content"), Mapping)):
            event_id = event.get("event_id")
            if event_id is None or event_id not in seen:
                seen.add(event_id)
                found.append(event)
    return found


def _timestamp(event: Mapping[str, Any]) -> int:
    stamp = event.get("origin_server_ts")
    return stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else 0


def _reading(content: Mapping[str, Any]) -> wire.Structured | wire.Text | None:
    """What a message says, read as the market bot reads it (:func:`wire.read_content`: the
    structured message, never its ``body``; a reply's quote of someone else dropped). An edit is
    read for its new text — the other party saw those words — but a structured edit is not: the
    market refuses edits, so it commits nobody."""
    reading = wire.read_content(content)
    if isinstance(reading, wire.Edit):
        new = content.get("m.new_content")
        edited = wire.read_content(new) if isinstance(new, Mapping) else None
        return edited if isinstance(edited, wire.Text) else None
    return reading if isinstance(reading, (wire.Structured, wire.Text)) else None


def _price_said(reading: wire.Structured | wire.Text, role: str, anchor_cents: int, ask_cents: int,
                currency: str) -> int | None:
    """The price an agent commits to in one message, in cents, or None.

    Structured: an ``offer``'s ``offerPrice``, an ``instant_match``'s ``acceptedPrice``. Text: the
    seller's own price as the shopper's reader of merchant replies finds it (which tells the
    seller's price from the buyer's offer quoted back), the buyer's offer as the merchant's reader
    of shopper turns finds it (relative to the seller's current price); text with several
    amounts and no clear choice commits to none of them."""
    if isinstance(reading, wire.Structured):
        field = {"offer": "offerPrice", "instant_match": "acceptedPrice"}.get(reading.message.get("type"))
        cents = cents_or_none(reading.message.get(field)) if field else None
        return cents if cents is not None and cents > 0 else None
    if role == "seller":
        return read_merchant_reply(reading.text, closed=False, list_price_cents=anchor_cents,
                                   currency=currency).price_cents
    # wire.Text never starts with "{" (that is a JSON body), so no structured message is parsed here
    intent = parse_shopper_turn(reading.text, reference_cents=ask_cents)
    return intent.amount_cents if intent.kind is IntentKind.OFFER else None


def _check_deal(deal: Mapping[str, Any] | None, seller_key: str | None,
                buyer_key: str | None) -> tuple[dict[str, Any] | None, int | None]:
    """``dealCheck`` (``dealId``, ``status``, ``verified``: both signatures, ``problems``: why it
    does not count) and the deal's price in cents when it counts as reached; (None, None) for no deal."""
    if deal is None:
        return None, None
    try:
        result = check_deal(dict(deal), buyer_key=buyer_key, seller_key=seller_key)
    except DealDocumentError as exc:
        return {"dealId": None, "status": None, "verified": False, "problems": [str(exc)]}, None
    problems = [f"{check.name}: {check.reason}" for check in result.failures]
    if result.status != "confirmed":
        problems.append(f"status is {result.status!r}, not 'confirmed'")
    cents = None
    if not problems:  # a confirmed served document, verified: its "deal" is a deal_confirmed object
        cents = cents_or_none(deal["deal"].get("finalPrice"))
        if cents is None or cents <= 0:
            problems.append(f"finalPrice {deal['deal'].get('finalPrice')!r} is not a positive amount")
            cents = None
    return {"dealId": result.deal_id, "status": result.status, "verified": result.valid, "problems": problems}, cents


def _first_dm_seconds(market: Sequence[Mapping[str, Any]], agents_dm: Sequence[Mapping[str, Any]],
                      seller_mxid: str) -> int | None:
    seed = [_timestamp(event) for event in market if event["sender"] == seller_mxid and _timestamp(event)]
    first_dm = [_timestamp(event) for event in agents_dm if _timestamp(event)]
    if not seed or not first_dm:
        return None
    milliseconds = max(0, min(first_dm) - min(seed))
    return (milliseconds + 500) // 1000  # half up, as clawlist's Math.round


def _body(event: Mapping[str, Any]) -> str:
    body = event["content"].get("body")
    return body if isinstance(body, str) else ""


def error_summary(run_id: str, reason: str, *, now: datetime) -> dict[str, Any]:
    """The summary of a run that could not be run or scored (``result`` ``error``, counted as a
    fail by :func:`aggregate`): clawlist's ``SWEEP_ERROR`` row, with the ``reason``."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware: generatedAt is UTC")
    return {"runId": run_id, "result": "error", "dealReached": False, "finalPrice": None,
            "violations": ["SWEEP_ERROR"], "error": reason,
            "metrics": {"offerCount": 0, "tFirstDmSec": None, "humanIntervention": False, "dmOtherSenders": []},
            "quality": dict.fromkeys(QUALITY_KEYWORDS, False), "dealCheck": None, "generatedAt": utc_z(now)}


# -- a sweep --------------------------------------------------------------------------------------

def aggregate(scenario_name: str, sweep_id: str, summaries: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A sweep's ``aggregate.json``: clawlist's counts (an ``error`` run counts as a fail),
    ``successRate`` (passes as a percentage of runs; null for no runs, as clawlist's NaN is
    written), ``avgFinalPrice`` (over the runs with a deal, to the cent; null when none) and one
    ``results`` row per run."""
    runs = list(summaries)
    for run in runs:
        if run.get("result") not in RESULTS:
            raise ValueError(f"run {run.get('runId')!r} has result {run.get('result')!r}, not one of {RESULTS}")
    count = {result: sum(run["result"] == result for run in runs) for result in RESULTS}
    prices = [cents for run in runs if run.get("dealReached")
              and (cents := cents_or_none(run.get("finalPrice"))) is not None]
    average = None
    if prices:
        mean = (Decimal(sum(prices)) / len(prices)).quantize(Decimal(1), rounding=ROUND_HALF_UP)
        average = to_decimal_number(int(mean))
    return {
        "sweepId": sweep_id,
        "scenario": scenario_name,
        "totalRuns": len(runs),
        "passCount": count["pass"],
        "noDealCount": count["no_deal"],
        "failCount": count["fail"] + count["error"],
        "successRate": count["pass"] * 100 / len(runs) if runs else None,
        "avgFinalPrice": average,
        "results": [_row(run) for run in runs],
    }


def _row(run: Mapping[str, Any]) -> dict[str, Any]:
    metrics = run.get("metrics") or {}
    return {"runId": run.get("runId"), "result": run["result"], "dealReached": bool(run.get("dealReached")),
            "finalPrice": run.get("finalPrice"), "violations": list(run.get("violations") or []),
            "offerCount": metrics.get("offerCount", 0), "tFirstDmSec": metrics.get("tFirstDmSec"),
            "humanIntervention": bool(metrics.get("humanIntervention"))}


# -- transcripts ----------------------------------------------------------------------------------

class TranscriptError(ValueError):
    """A transcript line that is not a JSON object (``line``: its 1-based number)."""

    def __init__(self, path: Path, line: int, problem: str) -> None:
        super().__init__(f"{path}, line {line}: {problem}")
        self.line = line


def write_jsonl(path: str | Path, events: Iterable[Mapping[str, Any]]) -> Path:
    """Write ``events`` to ``path``, one compact JSON object per line (UTF-8, non-ASCII kept
    literal), each line ended by a newline, so a reader can tell a finished line from a cut one."""
    path = Path(path)
    lines = []
    for index, event in enumerate(events):
        if not isinstance(event, Mapping):
            raise TypeError(f"event {index} is a {type(event).__name__}, not a JSON object")
        lines.append(json.dumps(dict(event), ensure_ascii=False, separators=(",", ":")) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """The JSON objects in ``path``, one a line; blank lines skipped.

    A last line with no newline after it that does not parse is a line its writer was cut off
    in (a run killed mid-export): dropped, and the rest kept. Anything else that is not a JSON
    object — a bad line in the middle, or a finished last line — is garbage, and raises
    :class:`TranscriptError`: a transcript silently missing events would be scored as if they
    never happened."""
    path = Path(path)
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    events = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        cut_off = number == len(lines)  # the text after the last newline: unfinished
        try:
            event = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            if cut_off:
                break
            raise TranscriptError(path, number, f"not JSON ({exc})") from None
        if not isinstance(event, dict):
            raise TranscriptError(path, number, f"a JSON {type(event).__name__}, not an object")
        events.append(event)
    return events
