"""The canonical agents.json 0.1.0 JSON Schema, shipped inside the package.

The schema file is a byte-for-byte copy of the published draft-07 schema, so
validation works offline and never drifts from what other implementations use.
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources
from typing import Any

from jsonschema import Draft7Validator, FormatChecker

SCHEMA_RESOURCE = "agents.schema.json"

# RFC 3986: a scheme, then only characters a URI may contain (unreserved,
# reserved, or %-escapes).  A shape check, not a full grammar.
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})*")


@cache
def load_schema() -> dict[str, Any]:
    """The parsed schema, read once from the package data."""
    text = resources.files(__package__).joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")
    return json.loads(text)


def _is_uri(value: object) -> bool:
    """Check `format: uri` ourselves: jsonschema only checks it when the optional
    rfc3987 package is installed, and haggler does not depend on it, so without
    this `site.url` and `docs_url` would silently go unchecked."""
    return not isinstance(value, str) or _URI.fullmatch(value) is not None


@cache
def manifest_validator() -> Draft7Validator:
    """A draft-07 validator for agents.json that also checks string formats."""
    format_checker = FormatChecker(Draft7Validator.FORMAT_CHECKER.checkers)
    format_checker.checks("uri")(_is_uri)
    return Draft7Validator(load_schema(), format_checker=format_checker)
