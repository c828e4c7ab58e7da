"""The scenario file format: a set of scenarios saved as JSON, to share and rerun exactly.

::

    {"format": "haggler.scenarios", "version": 1,
     "scenarios": [{"id": "m1-0000", "currency": "USD", "list_price": 499.99,
                    "seller_reservation": 400, "buyer_reservation": 450.5, "max_rounds": 20,
                    "extras": [{"name": "warranty", "cost": 25, "value": 60}],
                    "tags": ["multi", "zopa"]}]}

Amounts are decimal numbers in the file (at most two decimals; strings such as ``"499.99"``
are accepted too) and integer cents inside. ``id``, ``list_price``, ``seller_reservation``
and ``buyer_reservation`` are required; ``currency`` (USD), ``max_rounds`` (20), ``extras``
and ``tags`` (none) have defaults. :func:`save_scenarios` always writes every field, and
loading what it wrote gives back equal scenarios.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterable

from haggler.lab.scenario import Extra, Scenario
from haggler.money import amount_cents, is_exact_cents, positive_cents, to_decimal_number

FORMAT = "haggler.scenarios"
VERSION = 1

_SCENARIO_FIELDS = {"id", "currency", "list_price", "seller_reservation", "buyer_reservation",
                    "max_rounds", "extras", "tags"}
_REQUIRED = ("id", "list_price", "seller_reservation", "buyer_reservation")
_EXTRA_FIELDS = {"name", "cost", "value"}
_CURRENCY = re.compile(r"[A-Z]{3}")


class ScenarioFileError(ValueError):
    """A scenario file that cannot be loaded. ``index``, ``scenario_id`` and ``field`` say
    where, when the problem is inside one scenario."""

    def __init__(self, message: str, *, index: int | None = None, scenario_id: str | None = None,
                 field: str | None = None, source: str | None = None) -> None:
        where = []
        if source:
            where.append(source)
        if index is not None:
            where.append(f"scenarios[{index}]" + (f" (id {scenario_id!r})" if scenario_id else ""))
        if field:
            where.append(f"field {field!r}")
        super().__init__(": ".join([", ".join(where), message]) if where else message)
        self.index = index
        self.scenario_id = scenario_id
        self.field = field
        self.source = source


# -- writing --------------------------------------------------------------------------------------


def dump_scenario(scenario: Scenario) -> dict[str, Any]:
    return {
        "id": scenario.id,
        "currency": scenario.currency,
        "list_price": to_decimal_number(scenario.list_price_cents),
        "seller_reservation": to_decimal_number(scenario.seller_reservation_cents),
        "buyer_reservation": to_decimal_number(scenario.buyer_reservation_cents),
        "max_rounds": scenario.max_rounds,
        "extras": [
            {"name": e.name, "cost": to_decimal_number(e.cost_cents), "value": to_decimal_number(e.value_cents)}
            for e in scenario.extras
        ],
        "tags": list(scenario.tags),
    }


def dump_scenarios(scenarios: Iterable[Scenario]) -> dict[str, Any]:
    """The JSON-ready document for a set of scenarios."""
    scenarios = tuple(scenarios)
    ids = [s.id for s in scenarios]
    if len(set(ids)) != len(ids):
        duplicate = next(i for i in ids if ids.count(i) > 1)
        raise ValueError(f"scenario ids must be distinct; {duplicate!r} appears more than once")
    return {"format": FORMAT, "version": VERSION, "scenarios": [dump_scenario(s) for s in scenarios]}


def save_scenarios(path: str | Path, scenarios: Iterable[Scenario]) -> Path:
    path = Path(path)
    text = json.dumps(dump_scenarios(scenarios), indent=2, ensure_ascii=False) + "\n"
    path.write_text(text, encoding="utf-8")
    return path


# -- reading --------------------------------------------------------------------------------------


def load_scenarios(path: str | Path) -> tuple[Scenario, ...]:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioFileError(f"cannot read the file: {exc.strerror or exc}", source=str(path)) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScenarioFileError(f"not valid JSON: {exc}", source=str(path)) from exc
    return parse_scenarios(data, source=str(path))


def parse_scenarios(data: Any, *, source: str | None = None) -> tuple[Scenario, ...]:
    """Validate a decoded scenario document and build its scenarios."""
    if not isinstance(data, dict):
        raise ScenarioFileError("the document must be a JSON object", source=source)
    if data.get("format") != FORMAT:
        raise ScenarioFileError(f"'format' must be {FORMAT!r}, got {data.get('format')!r}", source=source)
    version = data.get("version")
    if version != VERSION or isinstance(version, bool):
        raise ScenarioFileError(f"unsupported 'version' {version!r} (this haggler reads version {VERSION})",
                                source=source)
    unknown = set(data) - {"format", "version", "scenarios"}
    if unknown:
        raise ScenarioFileError(f"unknown top-level fields {sorted(unknown)}", source=source)
    items = data.get("scenarios")
    if not isinstance(items, list):
        raise ScenarioFileError("'scenarios' must be a list", source=source)
    out: list[Scenario] = []
    seen: dict[str, int] = {}
    for index, item in enumerate(items):
        scenario = _parse_scenario(item, index, source)
        if scenario.id in seen:
            raise ScenarioFileError(f"duplicate id (also scenarios[{seen[scenario.id]}])", index=index,
                                    scenario_id=scenario.id, field="id", source=source)
        seen[scenario.id] = index
        out.append(scenario)
    return tuple(out)


def _parse_scenario(item: Any, index: int, source: str | None) -> Scenario:
    def fail(message: str, field: str | None = None) -> ScenarioFileError:
        return ScenarioFileError(message, index=index, scenario_id=sid, field=field, source=source)

    sid: str | None = None
    if not isinstance(item, dict):
        raise fail("a scenario must be a JSON object")
    raw_id = item.get("id")
    if isinstance(raw_id, str) and raw_id.strip():
        sid = raw_id
    for name in _REQUIRED:
        if name not in item:
            raise fail("missing", name)
    if sid is None:
        raise fail(f"must be a non-empty string, got {raw_id!r}", "id")
    unknown = set(item) - _SCENARIO_FIELDS
    if unknown:
        raise fail(f"unknown fields {sorted(unknown)}")

    currency = item.get("currency", "USD")
    if not isinstance(currency, str) or not _CURRENCY.fullmatch(currency):
        raise fail(f"must be a three-letter upper-case currency code, got {currency!r}", "currency")
    max_rounds = item.get("max_rounds", 20)
    if isinstance(max_rounds, bool) or not isinstance(max_rounds, int) or max_rounds < 1:
        raise fail(f"must be a whole number of at least 1, got {max_rounds!r}", "max_rounds")

    prices = {}
    for name in ("list_price", "seller_reservation", "buyer_reservation"):
        try:
            prices[name] = _amount(item[name], positive=True)
        except ValueError as exc:
            raise fail(str(exc), name) from None
    if prices["seller_reservation"] > prices["list_price"]:
        raise fail(f"must not be above list_price ({item['seller_reservation']!r} > {item['list_price']!r})",
                   "seller_reservation")

    raw_extras = item.get("extras", [])
    if not isinstance(raw_extras, list):
        raise fail(f"must be a list, got {type(raw_extras).__name__}", "extras")
    extras: list[Extra] = []
    names: set[str] = set()
    for j, raw in enumerate(raw_extras):
        where = f"extras[{j}]"
        if not isinstance(raw, dict):
            raise fail("must be an object with name, cost and value", where)
        missing = [k for k in ("name", "cost", "value") if k not in raw]
        if missing:
            raise fail(f"missing {', '.join(missing)}", where)
        unknown = set(raw) - _EXTRA_FIELDS
        if unknown:
            raise fail(f"unknown fields {sorted(unknown)}", where)
        name = raw["name"]
        if not isinstance(name, str) or not name.strip():
            raise fail(f"must be a non-empty string, got {name!r}", f"{where}.name")
        if name in names:
            raise fail(f"duplicate extra name {name!r}", f"{where}.name")
        names.add(name)
        amounts = {}
        for key in ("cost", "value"):
            try:
                amounts[key] = _amount(raw[key], positive=False)
            except ValueError as exc:
                raise fail(str(exc), f"{where}.{key}") from None
        extras.append(Extra(name, cost_cents=amounts["cost"], value_cents=amounts["value"]))

    tags = item.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise fail(f"must be a list of strings, got {tags!r}", "tags")

    try:
        return Scenario(
            id=sid,
            list_price_cents=prices["list_price"],
            seller_reservation_cents=prices["seller_reservation"],
            buyer_reservation_cents=prices["buyer_reservation"],
            extras=tuple(extras),
            currency=currency,
            max_rounds=max_rounds,
            tags=tuple(tags),
        )
    except ValueError as exc:  # anything Scenario checks that the file checks above missed
        raise fail(str(exc)) from None


def _amount(value: Any, *, positive: bool) -> int:
    """Cents from a file amount: a number or a numeric string with at most two decimals."""
    cents = positive_cents(value, allow_strings=True) if positive else amount_cents(value, allow_strings=True)
    if not is_exact_cents(value, cents):
        raise ValueError(f"must have at most two decimal places, got {value!r}")
    if cents < 0:
        raise ValueError(f"must not be negative, got {value!r}")
    return cents
