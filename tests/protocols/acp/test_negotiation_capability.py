"""``org.haggler.negotiation``: a buyer's agent that starts at a checkout protocol finds where to
negotiate, over real HTTP, on the same store (docs/checkout.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import jsonschema

SCHEMA = json.loads((Path(__file__).parents[3] / "docs" / "schemas" / "org.haggler.negotiation.json").read_text())
#: UCP's capability name pattern (source/schemas/capability.json, ``base.name``).
UCP_NAME = re.compile(r"^[a-z][a-z0-9]*(?:\.[a-z][a-z0-9_]*)+$")


def fetch(store, url: str) -> dict:
    parts = urlsplit(url)
    assert f"{parts.scheme}://{parts.netloc}" == store.base  # on the store itself, absolute
    answer = store.http.get(parts.path)
    assert answer.status_code == 200, url
    return answer.json()


def test_ucp_profile_points_at_the_stores_negotiation(acp_store):
    """overview.md, "Namespace Governance": a vendor capability in reverse-domain form, with spec and
    schema on its authority's origin (org.haggler: https://haggler.org)."""
    profile = acp_store.http.get("/.well-known/ucp").json()
    [cap] = [c for c in profile["ucp"]["capabilities"] if c["name"] == "org.haggler.negotiation"]
    assert UCP_NAME.match(cap["name"]) and cap["extends"] == "dev.ucp.shopping.checkout"  # a vendor extension
    assert all(urlsplit(cap[k]).netloc == "haggler.org" and cap[k].startswith("https://") for k in ("spec", "schema"))
    jsonschema.validate(cap["config"], SCHEMA)
    assert fetch(acp_store, cap["config"]["discovery_url"])["negotiate_protocol"] == "negotiate.v1"
    assert fetch(acp_store, cap["config"]["protocols"]["nash.v1"])["nash_protocol"] == "nash.v1"


def test_acp_discovery_names_the_negotiation_file_as_the_extensions_spec(acp_store):
    discovery = acp_store.http.get("/.well-known/acp.json").json()
    [ext] = [e for e in discovery["capabilities"]["extensions"] if e["name"] == "org.haggler.negotiation"]
    assert fetch(acp_store, ext["spec"])["negotiate_protocol"] == "negotiate.v1"
    assert ext["schema"] == SCHEMA["$id"]
