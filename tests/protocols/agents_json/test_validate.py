"""Tests for the agents.json manifest validator and loader.

URL loading runs against a real local HTTP server, not mocks, so redirects,
headers and body limits are exercised the way httpx really sees them.
"""

from __future__ import annotations

import copy
import json
import re
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from haggler.protocols.agents_json.schema import load_schema, manifest_validator
from haggler.protocols.agents_json.validate import (
    MAX_BODY_BYTES,
    ManifestLoadError,
    ManifestReport,
    Problem,
    check_manifest,
    load_manifest,
    render_report,
    validate_manifest,
)

# The "Full Example" of the agents.json 0.1.0 spec, verbatim.
FULL_EXAMPLE_TEXT = """\
{
  "schema_version": "0.1.0",
  "site": {
    "name": "Acme Ceramics",
    "url": "https://acmeceramics.example.com",
    "description": "Handmade ceramic mugs, bowls, and vases",
    "contact": "support@acmeceramics.example.com"
  },
  "capabilities": [
    {
      "name": "search",
      "description": "Search the product catalog",
      "endpoint": "/.well-known/agents/api/search",
      "method": "GET",
      "params": {
        "q": { "type": "string", "required": true, "description": "Search query" },
        "page": { "type": "integer", "default": 1, "description": "Page number" },
        "limit": { "type": "integer", "default": 20, "description": "Results per page" }
      },
      "requires_session": false
    },
    {
      "name": "browse",
      "description": "List products with optional filters",
      "endpoint": "/.well-known/agents/api/browse",
      "method": "GET",
      "params": {
        "category": { "type": "string", "description": "Filter by category" },
        "sort": { "type": "string", "enum": ["price_asc", "price_desc", "newest"], "default": "newest" },
        "page": { "type": "integer", "default": 1 },
        "limit": { "type": "integer", "default": 20 }
      },
      "requires_session": false
    },
    {
      "name": "detail",
      "description": "Get full details for a product",
      "endpoint": "/.well-known/agents/api/detail",
      "method": "GET",
      "params": {
        "id": { "type": "string", "required": true, "description": "Product ID" }
      },
      "requires_session": false
    },
    {
      "name": "cart.add",
      "description": "Add a product to the cart",
      "endpoint": "/.well-known/agents/api/cart",
      "method": "POST",
      "params": {
        "item_id": { "type": "string", "required": true, "description": "Product ID" },
        "quantity": { "type": "integer", "required": true, "description": "Quantity to add" }
      },
      "requires_session": true
    },
    {
      "name": "cart.view",
      "description": "View the current cart",
      "endpoint": "/.well-known/agents/api/cart",
      "method": "GET",
      "requires_session": true
    },
    {
      "name": "cart.update",
      "description": "Update quantity of a cart item",
      "endpoint": "/.well-known/agents/api/cart",
      "method": "PATCH",
      "params": {
        "item_id": { "type": "string", "required": true, "description": "Product ID" },
        "quantity": { "type": "integer", "required": true, "description": "New quantity (0 to remove)" }
      },
      "requires_session": true
    },
    {
      "name": "cart.remove",
      "description": "Remove an item from the cart",
      "endpoint": "/.well-known/agents/api/cart",
      "method": "DELETE",
      "params": {
        "item_id": { "type": "string", "required": true, "description": "Product ID to remove" }
      },
      "requires_session": true
    },
    {
      "name": "checkout",
      "description": "Start checkout and get a URL for the human to complete payment",
      "endpoint": "/.well-known/agents/api/checkout",
      "method": "POST",
      "requires_session": true,
      "human_handoff": true
    }
  ],
  "session": {
    "create": "/.well-known/agents/api/session",
    "delete": "/.well-known/agents/api/session",
    "ttl_seconds": 1800
  },
  "rate_limit": {
    "requests_per_minute": 60,
    "max_sessions": 5
  },
  "audit": {
    "enabled": true,
    "endpoint": "/.well-known/agents/api/audit",
    "public_key": "MCowBQYDK2VwAyEABkii3p4rtgXxez3sB2DfGel553kx4EAKWBLMFCYV6YM="
  },
  "docs_url": "https://acmeceramics.example.com/docs/agents"
}
"""
FULL_EXAMPLE = json.loads(FULL_EXAMPLE_TEXT)
RAW_KEY = "A" * 43 + "="  # base64 of 32 zero bytes


def manifest() -> dict:
    """A fresh copy of the spec's example, for a test to break."""
    return copy.deepcopy(FULL_EXAMPLE)


def rule_problems(problems: list[Problem]) -> set[tuple[str, str]]:
    """(rule, where) of the problems found by the spec's numbered rules."""
    return {(p.rule, p.where) for p in problems if p.rule.startswith("rule ")}


def test_shipped_schema_is_the_canonical_draft07_schema() -> None:
    schema = load_schema()
    manifest_validator().check_schema(schema)
    assert schema["$id"] == "https://agents-protocol.org/schemas/agents.schema.json"
    assert schema["$schema"] == "http://json-schema.org/draft-07/schema#"


def test_full_example_passes_clean() -> None:
    report = validate_manifest(FULL_EXAMPLE)
    assert report.ok
    assert report.errors == []
    assert report.warnings == []
    # The example's key is DER-wrapped rather than raw: accepted, but noted.
    assert [(p.where, p.rule) for p in report.notes] == [("audit.public_key", "audit")]
    assert "SubjectPublicKeyInfo" in report.notes[0].message


def _drop_schema_version(doc: dict) -> None:
    del doc["schema_version"]


def _drop_site_name(doc: dict) -> None:
    del doc["site"]["name"]


def _drop_site_url(doc: dict) -> None:
    del doc["site"]["url"]


def _drop_site(doc: dict) -> None:
    del doc["site"]


def _empty_capabilities(doc: dict) -> None:
    doc["capabilities"] = []


def _capabilities_not_array(doc: dict) -> None:
    doc["capabilities"] = {"search": FULL_EXAMPLE["capabilities"][0]}


def _drop_method(doc: dict) -> None:
    del doc["capabilities"][2]["method"]


def _drop_name(doc: dict) -> None:
    del doc["capabilities"][0]["name"]


def _drop_endpoint(doc: dict) -> None:
    del doc["capabilities"][7]["endpoint"]


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (_drop_schema_version, ("rule 1", "schema_version")),
        (_drop_site_name, ("rule 2", "site.name")),
        (_drop_site_url, ("rule 2", "site.url")),
        (_drop_site, ("rule 2", "site")),
        (_empty_capabilities, ("rule 3", "capabilities")),
        (_capabilities_not_array, ("rule 3", "capabilities")),
        (_drop_method, ("rule 4", "capabilities[2].method")),
        (_drop_name, ("rule 4", "capabilities[0].name")),
        (_drop_endpoint, ("rule 4", "capabilities[7].endpoint")),
    ],
)
def test_each_rule_broken_alone_is_reported_with_its_number_and_path(breakage, expected) -> None:
    doc = manifest()
    breakage(doc)
    report = validate_manifest(doc)
    assert not report.ok
    assert rule_problems(report.errors) == {expected}
    assert any(p.rule == "schema" for p in report.errors), "the schema catches these too"


def test_rule_5_missing_session_is_a_warning_naming_the_capabilities() -> None:
    doc = manifest()
    del doc["session"]
    report = validate_manifest(doc)
    assert report.ok
    assert report.errors == []
    assert rule_problems(report.warnings) == {("rule 5", "session")}
    message = report.warnings[0].message
    for name in ("cart.add", "cart.view", "cart.update", "cart.remove", "checkout"):
        assert repr(name) in message
    assert "'search'" not in message


def test_rule_5_is_quiet_when_no_capability_needs_a_session() -> None:
    doc = manifest()
    del doc["session"]
    doc["capabilities"] = doc["capabilities"][:3]
    assert validate_manifest(doc).warnings == []


def test_multiple_problems_are_all_reported() -> None:
    doc = manifest()
    doc["schema_version"] = "v0.1.0"
    del doc["site"]["url"]
    del doc["capabilities"][1]["method"]
    del doc["capabilities"][4]["endpoint"]
    doc["capabilities"][5]["method"] = "FETCH"
    doc["session"]["ttl_seconds"] = 30
    report = validate_manifest(doc)
    assert rule_problems(report.errors) == {
        ("rule 1", "schema_version"),
        ("rule 2", "site.url"),
        ("rule 4", "capabilities[1].method"),
        ("rule 4", "capabilities[4].endpoint"),
    }
    schema_paths = {p.where for p in report.errors if p.rule == "schema"}
    assert schema_paths == {
        "schema_version",
        "site",
        "capabilities[1]",
        "capabilities[4]",
        "capabilities[5].method",
        "session.ttl_seconds",
    }


@pytest.mark.parametrize("version", ["1.0", "v0.1.0", "0.1.0-", "01.1.0", "0.1.0+", "0.1.0\n", "0.1", 1])
def test_bad_semver_breaks_rule_1(version) -> None:
    doc = manifest()
    doc["schema_version"] = version
    report = validate_manifest(doc)
    assert ("rule 1", "schema_version") in rule_problems(report.errors)


@pytest.mark.parametrize("version", ["0.1.0", "1.2.3-rc.1+build.5", "10.20.30", "1.0.0-alpha.0.x-y"])
def test_good_semver_satisfies_rule_1(version) -> None:
    doc = manifest()
    doc["schema_version"] = version
    report = validate_manifest(doc)
    assert not any(p.rule == "rule 1" for p in report.errors)


def test_schema_pattern_and_rule_1_disagree_and_both_are_reported() -> None:
    # The canonical schema allows "1.0" and forbids pre-releases; rule 1 is the reverse.
    doc = manifest()
    doc["schema_version"] = "1.0"
    assert [p.rule for p in validate_manifest(doc).errors] == ["rule 1"]
    doc["schema_version"] = "1.2.3-rc.1+build.5"
    assert [p.rule for p in validate_manifest(doc).errors] == ["schema"]


def test_non_object_document_fails_schema_and_rules_1_to_3() -> None:
    report = validate_manifest([FULL_EXAMPLE])
    assert ("(root)", "schema") in {(p.where, p.rule) for p in report.errors}
    assert rule_problems(report.errors) == {
        ("rule 1", "schema_version"),
        ("rule 2", "site"),
        ("rule 3", "capabilities"),
    }


def test_schema_paths_point_into_params_and_uri_format_is_checked() -> None:
    doc = manifest()
    doc["capabilities"][0]["params"]["page-size"] = {"type": "int"}
    doc["site"]["url"] = "not a url"
    doc["docs_url"] = "https://acmeceramics.example.com/docs/agents"
    wheres = {p.where: p.message for p in validate_manifest(doc).errors}
    assert 'capabilities[0].params["page-size"].type' in wheres
    assert "is not a 'uri'" in wheres["site.url"]


def test_duplicate_capability_names_warn() -> None:
    doc = manifest()
    doc["capabilities"][3]["name"] = "search"
    report = validate_manifest(doc)
    assert report.ok
    [warning] = report.warnings
    assert (warning.where, warning.rule) == ("capabilities[3].name", "duplicate name")
    assert "capabilities[0]" in warning.message


@pytest.mark.parametrize(
    ("endpoint", "fragment"),
    [
        ("api/search", "should be a path starting with '/'"),
        ("https://evil.example/api/search", "another origin"),
        ("//evil.example/api/search", "another origin"),
        ("http://acmeceramics.example.com/api/search", "another origin"),  # scheme differs
        ("https://acmeceramics.example.com:443/api/search", "is an absolute URL"),
    ],
)
def test_endpoints_that_are_not_origin_relative_paths_warn(endpoint, fragment) -> None:
    doc = manifest()
    doc["capabilities"][0]["endpoint"] = endpoint
    report = validate_manifest(doc)
    assert report.ok
    assert [(p.where, p.rule) for p in report.warnings] == [("capabilities[0].endpoint", "endpoint")]
    assert fragment in report.warnings[0].message


def test_session_and_audit_endpoints_are_checked_too() -> None:
    doc = manifest()
    doc["session"]["delete"] = "https://other.example/session"
    doc["audit"]["endpoint"] = "audit"
    assert {p.where for p in validate_manifest(doc).warnings} == {"session.delete", "audit.endpoint"}


def test_audit_enabled_without_public_key_warns() -> None:
    doc = manifest()
    del doc["audit"]["public_key"]
    report = validate_manifest(doc)
    assert report.ok
    assert [(p.where, p.rule) for p in report.warnings] == [("audit.public_key", "audit")]
    assert "verify" in report.warnings[0].message


@pytest.mark.parametrize(
    ("key", "fragment"),
    [("not base64!", "not valid base64"), ("AAAA", "decodes to 3 bytes"), ("A" * 86 + "==", "decodes to 64 bytes")],
)
def test_public_keys_that_are_not_ed25519_warn(key, fragment) -> None:
    doc = manifest()
    doc["audit"]["public_key"] = key
    report = validate_manifest(doc)
    assert [(p.where, p.rule) for p in report.warnings] == [("audit.public_key", "audit")]
    assert fragment in report.warnings[0].message
    assert report.notes == []


def test_raw_32_byte_public_key_is_clean() -> None:
    doc = manifest()
    doc["audit"]["public_key"] = RAW_KEY
    report = validate_manifest(doc)
    assert (report.errors, report.warnings, report.notes) == ([], [], [])


def test_render_report_lists_every_problem_with_rule_and_path() -> None:
    doc = manifest()
    del doc["capabilities"][2]["method"]
    del doc["session"]
    text = render_report(validate_manifest(doc))
    lines = text.splitlines()
    assert lines[0] == "FAILED: 2 error(s), 1 warning(s), 1 note(s)"
    assert "error   [rule 4] capabilities[2].method: is missing" in lines
    assert "error   [schema] capabilities[2]: 'method' is a required property" in lines
    assert any(line.startswith("warning [rule 5] session: ") for line in lines)
    assert len(lines) == 5


def test_render_report_ok() -> None:
    assert render_report(ManifestReport()) == "OK: 0 error(s), 0 warning(s), 0 note(s)"


# --- loading --------------------------------------------------------------------------

GOOD_BODY = FULL_EXAMPLE_TEXT.encode()
GOOD_TYPE = "application/json; charset=utf-8"
ROUTES: dict[str, tuple[int, dict[str, str], bytes]] = {
    "/.well-known/agents.json": (200, {"Content-Type": GOOD_TYPE}, GOOD_BODY),
    "/no-charset.json": (200, {"Content-Type": "application/json"}, GOOD_BODY),
    "/html.json": (200, {"Content-Type": "text/html; charset=utf-8"}, GOOD_BODY),
    "/latin1.json": (200, {"Content-Type": "application/json; charset=iso-8859-1"}, GOOD_BODY),
    "/untyped.json": (200, {}, GOOD_BODY),
    "/broken.json": (200, {"Content-Type": GOOD_TYPE}, b'{\n  "schema_version": "0.1.0",\n  "site": }'),
    "/bad-utf8.json": (200, {"Content-Type": GOOD_TYPE}, b'{\n  "site": "caf\xe9"}'),
    "/bom.json": (200, {"Content-Type": GOOD_TYPE}, b"\xef\xbb\xbf" + GOOD_BODY),
    "/huge.json": (200, {"Content-Type": GOOD_TYPE}, b" " * MAX_BODY_BYTES + b"{}"),
    "/redirect": (302, {"Location": "/.well-known/agents.json"}, b""),
    "/loop": (302, {"Location": "/loop"}, b""),
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.server.requested.append(self.path)  # type: ignore[attr-defined]
        status, headers, body = ROUTES.get(self.path, (404, {"Content-Type": "text/plain"}, b"not found"))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # keep test output quiet
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    httpd.requested = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def base(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize("suffix", ["", "/"])
def test_bare_origin_resolves_to_well_known_location(server, suffix) -> None:
    server.requested.clear()
    loaded = load_manifest(base(server) + suffix)
    assert server.requested == ["/.well-known/agents.json"]
    assert loaded.location == base(server) + "/.well-known/agents.json"
    assert loaded.parsed and loaded.document == FULL_EXAMPLE
    report = check_manifest(base(server) + suffix)
    assert report.ok and report.warnings == []


def test_redirect_is_followed_and_noted(server) -> None:
    loaded = load_manifest(base(server) + "/redirect")
    assert loaded.location == base(server) + "/.well-known/agents.json"
    assert loaded.document == FULL_EXAMPLE
    assert [p.rule for p in loaded.report.notes] == ["http"]
    assert loaded.report.errors == []


def test_redirect_loop_is_a_load_error(server) -> None:
    with pytest.raises(ManifestLoadError, match="more than 5 redirects"):
        load_manifest(base(server) + "/loop")


def test_404_is_an_error_and_the_body_is_not_parsed(server) -> None:
    loaded = load_manifest(base(server) + "/nowhere.json")
    assert not loaded.parsed
    [error] = loaded.report.errors
    assert error.rule == "http" and "HTTP 404" in error.message
    assert not check_manifest(base(server) + "/nowhere.json").ok


def test_missing_charset_is_a_warning(server) -> None:
    report = check_manifest(base(server) + "/no-charset.json")
    assert report.ok
    assert [(p.rule, "no charset" in p.message) for p in report.warnings] == [("content-type", True)]


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/html.json", "'text/html; charset=utf-8'"),
        ("/latin1.json", "charset is 'iso-8859-1'"),
        ("/untyped.json", "no Content-Type"),
    ],
)
def test_wrong_media_type_or_charset_is_an_error(server, path, fragment) -> None:
    loaded = load_manifest(base(server) + path)
    assert loaded.parsed, "the content is still checked"
    [error] = loaded.report.errors
    assert error.rule == "content-type" and fragment in error.message
    assert error.where == base(server) + path


def test_invalid_json_is_reported_with_line_and_column(server) -> None:
    loaded = load_manifest(base(server) + "/broken.json")
    assert not loaded.parsed
    [error] = loaded.report.errors
    assert (error.where, error.rule) == ("line 3, column 11", "json")
    assert error.message.startswith("invalid JSON: Expecting value")


def test_invalid_utf8_is_reported_with_line_and_column(server) -> None:
    loaded = load_manifest(base(server) + "/bad-utf8.json")
    assert not loaded.parsed
    [error] = loaded.report.errors
    assert (error.where, error.rule) == ("line 2, column 15", "encoding")
    assert "0xe9" in error.message


def test_byte_order_mark_warns_but_parses(server) -> None:
    loaded = load_manifest(base(server) + "/bom.json")
    assert loaded.parsed and loaded.document == FULL_EXAMPLE
    assert [p.rule for p in loaded.report.warnings] == ["encoding"]


def test_body_over_one_mebibyte_is_refused(server) -> None:
    loaded = load_manifest(base(server) + "/huge.json")
    assert not loaded.parsed
    [error] = loaded.report.errors
    assert "larger than 1048576 bytes" in error.message


def test_unreachable_host_is_a_clear_load_error() -> None:
    with socket.socket() as sock:  # a port that was free a moment ago: nobody listens there
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ManifestLoadError, match=rf"cannot fetch http://127\.0\.0\.1:{port}/\.well-known/agents\.json"):
        load_manifest(f"http://127.0.0.1:{port}", timeout=2)


def test_unsupported_scheme_is_a_load_error() -> None:
    with pytest.raises(ManifestLoadError, match="unsupported URL scheme 'ftp'"):
        load_manifest("ftp://shop.example/agents.json")


def test_file_loading(tmp_path) -> None:
    good = tmp_path / "agents.json"
    good.write_bytes(GOOD_BODY)
    loaded = load_manifest(str(good))
    assert loaded.location == str(good) and loaded.document == FULL_EXAMPLE
    assert check_manifest(str(good)).ok

    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": "0.1.0",}')
    report = check_manifest(str(broken))
    assert [(p.where, p.rule) for p in report.errors] == [("line 1, column 28", "json")]


def test_missing_file_is_a_clear_load_error(tmp_path) -> None:
    missing = tmp_path / "nope.json"
    with pytest.raises(ManifestLoadError, match=re.escape(f"cannot read {missing}: No such file or directory")):
        load_manifest(str(missing))
