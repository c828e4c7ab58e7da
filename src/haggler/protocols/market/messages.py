"""The market's message schemas and their validation (spec 003: Message Types, Owner Mandate Format,
Phase 1: Schema Definition).

One JSON Schema (draft 2020-12) per message type ships in ``schemas/<name>.json``; each is
self-contained (its own ``$defs``) so that ``GET /market/schemas`` can hand any one of them to an
agent as is. Every schema refuses unknown fields, so a typo or an injected field never slips
through.

:func:`validate` picks the schema by the message's ``type`` and raises :class:`InvalidMessage`
(HTTP 422) naming the JSON pointer of one failing field. The owner mandate has no ``type``
field (spec 003: Owner Mandate Format), so it is validated by name: ``validate(m, "mandate")``.

Two checks are haggler's own, because jsonschema's would be wrong or absent:

* ``multipleOf`` is checked in exact rational arithmetic on the number as written, so
  ``170.1`` is a multiple of ``0.01`` (in floats, 170.1 / 0.01 is 17009.999999999998);
* ``format: date-time`` is checked (RFC 3339, a time zone required): jsonschema skips it unless
  the optional rfc3339-validator package is installed.

A message is first put to a check compiled from its schema (:func:`_accepts`), which accepts
exactly what jsonschema accepts at a tenth of the cost; only a message it does not accept is
walked by jsonschema, which names the error.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Callable, Iterator, Mapping
from fractions import Fraction
from functools import cache
from importlib import resources
from numbers import Number
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, ValidationError
from jsonschema.validators import extend

from haggler.errors import Unprocessable
from haggler.timestamps import parse_rfc3339

#: Every schema shipped, by name (the file is ``schemas/<name>.json``).
SCHEMA_NAMES: tuple[str, ...] = (
    "listing", "wanted", "contact_request", "protocol_agreement", "sealed_bid", "instant_match", "offer",
    "deal_confirmed", "mandate", "order",
)
#: The schemas chosen by a message's ``type`` field; the mandate has none.
MESSAGE_TYPES: tuple[str, ...] = tuple(name for name in SCHEMA_NAMES if name != "mandate")


class InvalidMessage(Unprocessable):
    """A market message that does not match its schema (HTTP 422). ``path`` is the JSON pointer
    (RFC 6901) of the failing field, e.g. ``/item/condition``; ``""`` is the message itself."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path or 'the message'}: {reason}")
        self.path = path
        self.reason = reason

    def fields(self) -> dict[str, Any]:
        return {"error": self.message, "path": self.path}


def schema_names() -> tuple[str, ...]:
    """The names :func:`schema` knows, in spec order."""
    return SCHEMA_NAMES


def schema(name: str) -> dict[str, Any]:
    """A copy of the JSON Schema called ``name`` (a message ``type``, or ``"mandate"``)."""
    return copy.deepcopy(_load(_known(name)))


def validate(message: object, name: str | None = None) -> None:
    """Check ``message`` against the schema for its ``type`` (or the schema ``name``, for the
    mandate); raise :class:`InvalidMessage` naming the most specific failing field.

    When several fields fail, the deepest pointer is reported, ties broken by pointer text, so
    the same message always gets the same answer.
    """
    if name is None:
        if not isinstance(message, Mapping):
            raise InvalidMessage("", "must be a JSON object")
        kind = message.get("type")
        if "type" not in message:
            raise InvalidMessage("/type", f"is required; one of: {', '.join(MESSAGE_TYPES)}")
        if not isinstance(kind, str) or kind not in MESSAGE_TYPES:
            hint = " (a mandate has no type field: validate it as \"mandate\")" if kind == "mandate" else ""
            raise InvalidMessage("/type", f"unknown message type {_show(kind)}; one of: {', '.join(MESSAGE_TYPES)}{hint}")
        name = kind
    if _accepts(_known(name))(message):
        return
    _check(_validator(name), message)


@cache
def _accepts(name: str) -> Callable[[object], bool]:
    """Whether the schema ``name`` surely accepts a message: a check compiled once from the
    schema (:func:`_compiled`), several times cheaper than jsonschema's walk, which stays the
    judge of everything else. It says yes only to a message jsonschema accepts too, so a yes
    skips jsonschema; a no (a bad message, or one it is not sure of) goes to jsonschema, which
    finds the error to report. A schema holding a keyword it does not know is always left to
    jsonschema."""
    try:
        check = _compiled(_inlined(_load(name), _load(name).get("$defs", {}), ()))
    except _Unsupported:
        return lambda message: False

    def accepts(message: object) -> bool:
        try:
            return check(message)
        except _Unsure:
            return False
    return accepts


class _Unsupported(Exception):
    """A schema keyword :func:`_compiled` does not compile."""


class _Unsure(Exception):
    """A value a compiled check cannot judge as jsonschema would (a list of non-strings that
    must be unique): jsonschema is asked instead."""


#: Keywords that only annotate: jsonschema asserts nothing with them.
_ANNOTATIONS = frozenset({"$schema", "$id", "$defs", "$comment", "title", "description", "default", "examples",
                          "deprecated", "readOnly", "writeOnly"})
Check = Callable[[Any], bool]


def _is_number(value: Any) -> bool:
    """jsonschema's ``number``: any number but a bool."""
    return isinstance(value, Number) and not isinstance(value, bool)


#: jsonschema's draft 2020-12 types (``integer``: an int, or a float with no fraction).
_TYPES: dict[str, Check] = {
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "null": lambda value: value is None,
    "number": _is_number,
    "integer": lambda value: not isinstance(value, bool) and (
        isinstance(value, int) or (isinstance(value, float) and value.is_integer())),
}


def _all(checks: list[Check]) -> Check:
    if not checks:
        return lambda value: True
    if len(checks) == 1:
        return checks[0]

    def every(value: Any) -> bool:
        for check in checks:
            if not check(value):
                return False
        return True
    return every


def _compiled(node: Any) -> Check:
    """A function of an instance that is True exactly when jsonschema (draft 2020-12, with this
    module's ``multipleOf`` and format checker) finds no error in it against ``node`` — the
    keywords the market's schemas use, each as jsonschema's ``_keywords`` checks it; raises
    :class:`_Unsupported` for any other, :class:`_Unsure` (when run) for a value it cannot judge.
    Exact rather than merely cautious, so that ``not`` and ``if`` may negate it."""
    if node is True:
        return lambda value: True
    if node is False:
        return lambda value: False
    if not isinstance(node, dict):
        raise _Unsupported(repr(node))
    unknown = set(node) - _ANNOTATIONS - _KEYWORDS
    if unknown or "patternProperties" in node or "prefixItems" in node:
        raise _Unsupported(", ".join(sorted(unknown)) or "patternProperties or prefixItems")
    checks = [compile_(node[keyword], node) for keyword, compile_ in _KEYWORD_ORDER if keyword in node]
    return _all(checks)


def _type(types: Any, node: Mapping[str, Any]) -> Check:
    kinds = [_TYPES[kind] for kind in (types if isinstance(types, list) else [types])]
    return lambda value: any(kind(value) for kind in kinds)


def _strings(values: list[Any]) -> frozenset[str]:
    if not all(isinstance(value, str) for value in values):
        raise _Unsupported(f"enum or const of non-strings: {values!r}")
    return frozenset(values)


def _enum(values: Any, node: Mapping[str, Any]) -> Check:
    # jsonschema's equal() compares a string to anything with ==: only an equal string matches.
    allowed = _strings(list(values))
    return lambda value: isinstance(value, str) and value in allowed


def _const(expected: Any, node: Mapping[str, Any]) -> Check:
    return _enum([expected], node)


def _pattern(pattern: str, node: Mapping[str, Any]) -> Check:
    search = re.compile(pattern).search
    return lambda value: not isinstance(value, str) or search(value) is not None


def _format(name: str, node: Mapping[str, Any]) -> Check:
    conforms = _format_checker().conforms
    return lambda value: conforms(value, name)


def _min_length(least: int, node: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, str) or len(value) >= least


def _max_length(most: int, node: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, str) or len(value) <= most


def _minimum(least: Any, node: Mapping[str, Any]) -> Check:
    return lambda value: not _is_number(value) or not value < least


def _maximum(most: Any, node: Mapping[str, Any]) -> Check:
    return lambda value: not _is_number(value) or not value > most


def _exclusive_minimum(bound: Any, node: Mapping[str, Any]) -> Check:
    return lambda value: not _is_number(value) or not value <= bound


def _exclusive_maximum(bound: Any, node: Mapping[str, Any]) -> Check:
    return lambda value: not _is_number(value) or not value >= bound


def _multiple_of(divisor: Any, node: Mapping[str, Any]) -> Check:
    step = Fraction(str(divisor))

    def multiple(value: Any) -> bool:
        # _exact_multiple_of: an int n is a multiple of p/q when p divides n*q.
        if isinstance(value, int) and not isinstance(value, bool):
            return value * step.denominator % step.numerator == 0
        if not _is_number(value):
            return True
        return not any(True for _ in _exact_multiple_of(_NUMBERS, divisor, value, node))
    return multiple


class _NumberTypes:
    """What :func:`_exact_multiple_of` asks of its validator: whether a value is a number."""

    @staticmethod
    def is_type(value: Any, kind: str) -> bool:
        return _TYPES[kind](value)


_NUMBERS = _NumberTypes()


def _properties(properties: Mapping[str, Any], node: Mapping[str, Any]) -> Check:
    """``properties`` and ``additionalProperties`` together: one pass over the object's fields."""
    known = {name: _compiled(schema) for name, schema in properties.items()}
    return _fields(known, node.get("additionalProperties", True))


def _additional(extra: Any, node: Mapping[str, Any]) -> Check:
    if "properties" in node:
        return lambda value: True  # checked with the properties
    return _fields({}, extra)


def _fields(known: dict[str, Check], extra: Any) -> Check:
    other = _compiled(extra)

    def fields(value: Any) -> bool:
        if not isinstance(value, dict):
            return True
        for name, field in value.items():
            if not known.get(name, other)(field):
                return False
        return True
    return fields


def _required(names: list[str], node: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, dict) or all(name in value for name in names)


def _dependent_required(needs: Mapping[str, list[str]], node: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, dict) or all(
        need in value for name, names in needs.items() if name in value for need in names)


def _min_properties(least: int, node: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, dict) or len(value) >= least


def _max_properties(most: int, node: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, dict) or len(value) <= most


def _items(items: Any, node: Mapping[str, Any]) -> Check:
    item = _compiled(items)
    return lambda value: not isinstance(value, list) or all(item(each) for each in value)


def _min_items(least: int, node: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, list) or len(value) >= least


def _max_items(most: int, node: Mapping[str, Any]) -> Check:
    return lambda value: not isinstance(value, list) or len(value) <= most


def _unique_items(unique: Any, node: Mapping[str, Any]) -> Check:
    if not unique:
        return lambda value: True

    def distinct(value: Any) -> bool:
        if not isinstance(value, list):
            return True
        if not all(isinstance(each, str) for each in value):
            raise _Unsure("uniqueItems over values that are not all strings")
        return len(set(value)) == len(value)
    return distinct


def _all_of(schemas: list[Any], node: Mapping[str, Any]) -> Check:
    return _all([_compiled(schema) for schema in schemas])


def _any_of(schemas: list[Any], node: Mapping[str, Any]) -> Check:
    checks = [_compiled(schema) for schema in schemas]
    return lambda value: any(check(value) for check in checks)


def _one_of(schemas: list[Any], node: Mapping[str, Any]) -> Check:
    checks = [_compiled(schema) for schema in schemas]
    return lambda value: sum(1 for check in checks if check(value)) == 1


def _not(schema: Any, node: Mapping[str, Any]) -> Check:
    check = _compiled(schema)
    return lambda value: not check(value)


def _if(schema: Any, node: Mapping[str, Any]) -> Check:
    condition = _compiled(schema)
    then = _compiled(node.get("then", True))
    otherwise = _compiled(node.get("else", True))
    return lambda value: then(value) if condition(value) else otherwise(value)


def _ignored(value: Any, node: Mapping[str, Any]) -> Check:
    """``then`` and ``else``: read by ``if`` (without one, jsonschema ignores them)."""
    return lambda instance: True


#: Each keyword's compiler, cheapest checks first (an instance fails at its first failing one).
_KEYWORD_ORDER: tuple[tuple[str, Callable[[Any, Mapping[str, Any]], Check]], ...] = (
    ("type", _type), ("const", _const), ("enum", _enum), ("required", _required),
    ("minLength", _min_length), ("maxLength", _max_length), ("minimum", _minimum), ("maximum", _maximum),
    ("exclusiveMinimum", _exclusive_minimum), ("exclusiveMaximum", _exclusive_maximum),
    ("minItems", _min_items), ("maxItems", _max_items), ("minProperties", _min_properties),
    ("maxProperties", _max_properties), ("dependentRequired", _dependent_required), ("pattern", _pattern),
    ("format", _format), ("multipleOf", _multiple_of), ("uniqueItems", _unique_items),
    ("properties", _properties), ("additionalProperties", _additional), ("items", _items),
    ("allOf", _all_of), ("anyOf", _any_of), ("oneOf", _one_of), ("not", _not), ("if", _if),
    ("then", _ignored), ("else", _ignored),
)
_KEYWORDS = frozenset(keyword for keyword, _ in _KEYWORD_ORDER)


def validate_definition(value: object, definition: str) -> None:
    """Check ``value`` against one of the definitions every schema shares in its ``$defs``
    (``"agentRef"``, ``"id"``): :class:`InvalidMessage` names the field relative to ``value``."""
    _check(_definition_validator(definition), value)


def _check(validator: Any, instance: object) -> None:
    """Raise :class:`InvalidMessage` for the deepest failing pointer (ties broken by pointer
    text), so the same instance always gets the same answer."""
    errors = [(_pointer(error), _reason(error), error.validator) for error in validator.iter_errors(instance)]
    if errors:
        pointer, reason, _ = min(errors, key=lambda e: (-_depth(e[0]), e[0], str(e[2]), e[1]))
        raise InvalidMessage(pointer, reason)


def _known(name: str) -> str:
    if name not in SCHEMA_NAMES:
        raise KeyError(f"no market schema called {name!r}; known: {', '.join(SCHEMA_NAMES)}")
    return name


@cache
def _load(name: str) -> dict[str, Any]:
    text = resources.files(__package__).joinpath("schemas", f"{name}.json").read_text(encoding="utf-8")
    return json.loads(text)


def _exact_multiple_of(validator: Any, divisor: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    """``multipleOf`` on the decimal number as written (its shortest repr), not on binary floats."""
    if not validator.is_type(instance, "number"):
        return
    if isinstance(instance, float) and not math.isfinite(instance):
        yield ValidationError(f"{instance!r} is not a finite number")
        return
    if (Fraction(str(instance)) / Fraction(str(divisor))).denominator != 1:
        yield ValidationError(f"{instance!r} is not a multiple of {divisor}")


_Validator = extend(Draft202012Validator, {"multipleOf": _exact_multiple_of})

_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})")


def _is_date_time(value: object) -> bool:
    """RFC 3339 ``date-time``: the shape, a time zone, and a real date and time."""
    if not isinstance(value, str):
        return True
    if not _RFC3339.fullmatch(value):
        return False
    try:
        parse_rfc3339(value)
    except ValueError:
        return False
    return True


@cache
def _format_checker() -> FormatChecker:
    checker = FormatChecker(Draft202012Validator.FORMAT_CHECKER.checkers)
    checker.checks("date-time")(_is_date_time)
    return checker


@cache
def _validator(name: str) -> Any:
    schema = _load(name)
    return _Validator(_inlined(schema, schema.get("$defs", {}), ()), format_checker=_format_checker())


def _inlined(node: Any, defs: Mapping[str, Any], within: tuple[str, ...]) -> Any:
    """``node`` with each reference to one of ``defs`` (``{"$ref": "#/$defs/<name>"}``, beside
    at most a ``description``) replaced by the definition itself, itself inlined: jsonschema
    looks a reference up again on every message it checks, a fifth of a market message's
    validation. The same subschemas check the same instance paths, so every error (its
    keyword, its schema, its field) is the one the reference gave. A definition already being
    inlined (``within``: a cycle) keeps its reference. ``node`` is not changed: the schemas are
    also served as written."""
    if isinstance(node, list):
        return [_inlined(item, defs, within) for item in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_DEFS) and set(node) <= {"$ref", "description"}:
        name = ref[len(_DEFS):]
        if name in defs and name not in within:
            return _inlined(defs[name], defs, (*within, name))
    return {key: _inlined(value, defs, within) for key, value in node.items()}


#: How a schema refers to one of its own definitions.
_DEFS = "#/$defs/"


def definition(name: str) -> dict[str, Any]:
    """A copy of ``$defs/<name>``, one of the definitions the schemas share (``"id"``,
    ``"publicKey"``): what a body that is not a message (a registration) takes its fields' forms
    from, rather than a copy of its own."""
    return copy.deepcopy(_shared_defs(name)[name])


def _shared_defs(definition: str) -> dict[str, Any]:
    """The ``$defs`` of the first schema that defines ``definition`` (a test holds a definition
    several files share to one form)."""
    defs = next((_load(name)["$defs"] for name in SCHEMA_NAMES if definition in _load(name).get("$defs", {})), None)
    if defs is None:
        raise KeyError(f"no market schema defines {definition!r}")
    return defs


@cache
def _definition_validator(definition: str) -> Any:
    """A validator of ``$defs/<definition>``."""
    defs = _shared_defs(definition)
    return _Validator({"$defs": defs, "$ref": f"#/$defs/{definition}"}, format_checker=_format_checker())


def _escape(part: object) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


def _pointer(error: ValidationError) -> str:
    """The pointer of the field at fault: for a missing or unknown field, that field itself."""
    path = "".join(f"/{_escape(part)}" for part in error.absolute_path)
    instance = error.instance
    if error.validator == "required" and isinstance(instance, Mapping):
        missing = [field for field in error.validator_value if field not in instance]
        if missing:
            return f"{path}/{_escape(missing[0])}"
    if error.validator == "additionalProperties" and isinstance(instance, Mapping):
        known = error.schema.get("properties", {})
        extra = sorted(field for field in instance if field not in known)
        if extra:
            return f"{path}/{_escape(extra[0])}"
    if error.validator == "dependentRequired" and isinstance(instance, Mapping):
        missing = sorted(
            need for field, needs in error.validator_value.items() if field in instance
            for need in needs if need not in instance
        )
        if missing:
            return f"{path}/{_escape(missing[0])}"
    return path


def _depth(pointer: str) -> int:
    return pointer.count("/")


def _show(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False) if _jsonable(value) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_JSON_TYPES = {"object": "an object", "array": "an array", "string": "a string", "number": "a number",
               "integer": "an integer", "boolean": "true or false", "null": "null"}


def _reason(error: ValidationError) -> str:
    """What is wrong, without echoing a long value back."""
    kind, value, schema = error.validator, error.validator_value, error.schema
    if kind == "required":
        return "is required"
    if kind == "additionalProperties":
        return "is not an allowed field"
    if kind == "dependentRequired":
        return "is required here: " + error.message
    if kind == "not" or schema is False:
        about = schema.get("description") if isinstance(schema, Mapping) else None
        return f"is not allowed here ({about.rstrip('.')})" if about else "is not allowed here"
    if kind == "type":
        kinds = value if isinstance(value, list) else [value]
        return "must be " + " or ".join(_JSON_TYPES.get(k, str(k)) for k in kinds)
    if kind == "enum":
        return "must be one of: " + ", ".join(str(v) for v in value)
    if kind == "const":
        return f"must be {_show(value)}"
    if kind == "pattern":
        about = schema.get("description") if isinstance(schema, Mapping) else None
        return f"is not in the expected form ({about.rstrip('.')})" if about else f"must match the pattern {value}"
    if kind == "format":
        return {"date-time": "must be an RFC 3339 date-time with a time zone, e.g. 2026-02-07T23:00:00Z",
                "date": "must be an RFC 3339 date, e.g. 2026-02-08"}.get(value, f"is not a valid {value}")
    if kind == "multipleOf":
        return f"must be a multiple of {value} (at most {_decimals(value)} decimal places)"
    limits = {"minimum": "must be at least {}", "maximum": "must be at most {}",
              "exclusiveMinimum": "must be greater than {}", "exclusiveMaximum": "must be less than {}",
              "minLength": "must be at least {} characters long", "maxLength": "must be at most {} characters long",
              "minItems": "must have at least {} items", "maxItems": "must have at most {} items",
              "minProperties": "must have at least {} fields", "maxProperties": "must have at most {} fields"}
    if kind in limits:
        return limits[kind].format(value)
    if kind == "uniqueItems":
        return "must not repeat an item"
    return error.message if len(error.message) <= 200 else error.message[:197] + "..."


def _decimals(step: object) -> int:
    fraction = Fraction(str(step))
    places = 0
    while (fraction * 10**places).denominator != 1 and places < 20:
        places += 1
    return places
