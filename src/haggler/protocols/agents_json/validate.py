"""Validate an agents.json manifest and report every problem at once.

A site owner fixing a manifest wants the whole list, not one error per run, so
nothing here stops at the first problem.  Two layers are checked: the canonical
JSON Schema, and the five "Validation" rules of the agents.json 0.1.0 spec, each
reported under its own number even when the schema already caught the same
thing, so a report can be read against the spec.  The schema and the rules
disagree on purpose in one place: the schema's `schema_version` pattern accepts
"1.0" and rejects pre-release versions, while rule 1 asks for strict semver.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from haggler.protocols.agents_json.schema import manifest_validator

WELL_KNOWN_PATH = "/.well-known/agents.json"
MAX_BODY_BYTES = 1024 * 1024
MAX_REDIRECTS = 5
REQUIRED_MEDIA_TYPE = "application/json; charset=utf-8"

# semver.org's regular expression for SemVer 2.0.0, ASCII digits only.
_SEMVER = re.compile(
    r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)"
    r"(?:-((?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*)"
    r"(?:\.(?:0|[1-9][0-9]*|[0-9]*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# DER header of an Ed25519 SubjectPublicKeyInfo; the raw key follows it.
_ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")
_MAX_MESSAGE = 300


@dataclass(frozen=True)
class Problem:
    """One finding: where it is (a JSON path, a URL or a line/column), what is
    wrong, and which check found it ("schema", "rule 1" ... "rule 5", or the
    name of an extra check)."""

    where: str
    message: str
    rule: str


@dataclass
class ManifestReport:
    """Everything found about one manifest.  Only errors make it fail; warnings
    are worth fixing; notes are accepted deviations worth knowing about."""

    errors: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)
    notes: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def merged(self, other: ManifestReport) -> ManifestReport:
        """This report followed by `other`, e.g. fetch problems then content problems."""
        return ManifestReport(
            self.errors + other.errors, self.warnings + other.warnings, self.notes + other.notes
        )


@dataclass
class LoadedManifest:
    """A manifest as fetched or read.  `document` is only meaningful when
    `parsed` is true (JSON `null` is a document too); `report` holds what went
    wrong in transport: status, media type, encoding, JSON syntax."""

    source: str
    location: str
    document: object = None
    parsed: bool = False
    report: ManifestReport = field(default_factory=ManifestReport)


class ManifestLoadError(Exception):
    """Nothing could be fetched or read at all, so there is nothing to report on."""


def json_path(parts: Iterable[str | int]) -> str:
    """Render a path the way people write it: `capabilities[2].method`."""
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            out += f".{part}" if out else part
        else:
            out += f"[{json.dumps(part)}]"
    return out or "(root)"


def is_semver(value: object) -> bool:
    """Strict Semantic Versioning 2.0.0, pre-release and build metadata included."""
    return isinstance(value, str) and _SEMVER.fullmatch(value) is not None


def validate_manifest(doc: object) -> ManifestReport:
    """Check a parsed agents.json document against the schema, the spec's five
    Validation rules and a few extra consistency checks."""
    report = ManifestReport()
    _check_schema(doc, report)
    manifest = doc if isinstance(doc, dict) else {}
    capabilities = manifest.get("capabilities")
    capabilities = capabilities if isinstance(capabilities, list) else []
    _check_rule_1(manifest, report)
    _check_rule_2(manifest, report)
    _check_rule_3(manifest, report)
    _check_rule_4(capabilities, report)
    _check_rule_5(manifest, capabilities, report)
    _check_duplicate_names(capabilities, report)
    _check_endpoints(manifest, capabilities, report)
    _check_audit(manifest, report)
    return report


def _check_schema(doc: object, report: ManifestReport) -> None:
    errors = manifest_validator().iter_errors(doc)
    for error in sorted(errors, key=lambda e: (json_path(e.absolute_path), e.message)):
        message = error.message
        if len(message) > _MAX_MESSAGE:  # messages embed the offending value, which may be huge
            message = message[: _MAX_MESSAGE - 1] + "…"
        report.errors.append(Problem(json_path(error.absolute_path), message, "schema"))


def _require_string(obj: dict, key: str, where: str, rule: str, report: ManifestReport) -> None:
    if key not in obj:
        report.errors.append(Problem(where, "is missing", rule))
    elif not isinstance(obj[key], str) or not obj[key]:
        report.errors.append(Problem(where, "must be a non-empty string", rule))


def _check_rule_1(manifest: dict, report: ManifestReport) -> None:
    if "schema_version" not in manifest:
        report.errors.append(Problem("schema_version", "is missing", "rule 1"))
    elif not is_semver(manifest["schema_version"]):
        report.errors.append(
            Problem(
                "schema_version",
                f"{manifest['schema_version']!r} is not a semver version (MAJOR.MINOR.PATCH[-pre][+build])",
                "rule 1",
            )
        )


def _check_rule_2(manifest: dict, report: ManifestReport) -> None:
    site = manifest.get("site")
    if not isinstance(site, dict):
        message = "is missing" if site is None else "must be an object with name and url"
        report.errors.append(Problem("site", message, "rule 2"))
        return
    for key in ("name", "url"):
        _require_string(site, key, f"site.{key}", "rule 2", report)


def _check_rule_3(manifest: dict, report: ManifestReport) -> None:
    capabilities = manifest.get("capabilities")
    if capabilities is None:
        report.errors.append(Problem("capabilities", "is missing", "rule 3"))
    elif not isinstance(capabilities, list):
        report.errors.append(Problem("capabilities", "must be an array", "rule 3"))
    elif not capabilities:
        report.errors.append(Problem("capabilities", "must not be empty", "rule 3"))


def _check_rule_4(capabilities: list, report: ManifestReport) -> None:
    for index, capability in enumerate(capabilities):
        where = f"capabilities[{index}]"
        if not isinstance(capability, dict):
            report.errors.append(Problem(where, "must be an object with name, endpoint and method", "rule 4"))
            continue
        for key in ("name", "endpoint", "method"):
            _require_string(capability, key, f"{where}.{key}", "rule 4", report)


def _capability_label(index: int, capability: dict) -> str:
    name = capability.get("name")
    return repr(name) if isinstance(name, str) else f"capabilities[{index}]"


def _check_rule_5(manifest: dict, capabilities: list, report: ManifestReport) -> None:
    # A warning, not an error: the spec says SHOULD and lets agents use defaults.
    needing = [
        _capability_label(index, capability)
        for index, capability in enumerate(capabilities)
        if isinstance(capability, dict) and capability.get("requires_session") is True
    ]
    if needing and not isinstance(manifest.get("session"), dict):
        report.warnings.append(
            Problem(
                "session",
                f"no session object, but {', '.join(needing)} require a session; agents must fall "
                "back to defaults, and the spec defines no default session.create URL",
                "rule 5",
            )
        )


def _check_duplicate_names(capabilities: list, report: ManifestReport) -> None:
    first_seen: dict[str, int] = {}
    for index, capability in enumerate(capabilities):
        name = capability.get("name") if isinstance(capability, dict) else None
        if not isinstance(name, str):
            continue
        if name in first_seen:
            report.warnings.append(
                Problem(
                    f"capabilities[{index}].name",
                    f"duplicate capability name {name!r} (first at capabilities[{first_seen[name]}])",
                    "duplicate name",
                )
            )
        else:
            first_seen[name] = index


def _origin(url: str) -> tuple[str, str, int] | None:
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


def _endpoint_problem(value: str, site_origin: tuple[str, str, int] | None) -> str | None:
    """Why an endpoint is not the origin-relative path the spec asks for, if it isn't."""
    if value.startswith("/") and not value.startswith("//"):
        return None
    # A network-path reference ("//host/path") keeps the site's scheme.
    absolute = (site_origin[0] if site_origin else "https") + ":" + value if value.startswith("//") else value
    target = _origin(absolute)
    if target is None:
        return f"{value!r} should be a path starting with '/' (relative to the site origin)"
    if site_origin is not None and target != site_origin:
        return f"{value!r} is on another origin than site.url; agents would send requests (and session tokens) there"
    return f"{value!r} is an absolute URL; the spec wants a path relative to the site origin"


def _check_endpoints(manifest: dict, capabilities: list, report: ManifestReport) -> None:
    site = manifest.get("site")
    site_url = site.get("url") if isinstance(site, dict) else None
    site_origin = _origin(site_url) if isinstance(site_url, str) else None
    endpoints = [
        (f"capabilities[{index}].endpoint", capability.get("endpoint"))
        for index, capability in enumerate(capabilities)
        if isinstance(capability, dict)
    ]
    for section, keys in (("session", ("create", "delete")), ("audit", ("endpoint",))):
        block = manifest.get(section)
        if isinstance(block, dict):
            endpoints += [(f"{section}.{key}", block.get(key)) for key in keys]
    for where, value in endpoints:
        problem = _endpoint_problem(value, site_origin) if isinstance(value, str) else None
        if problem:
            report.warnings.append(Problem(where, problem, "endpoint"))


def _check_audit(manifest: dict, report: ManifestReport) -> None:
    audit = manifest.get("audit")
    if not isinstance(audit, dict):
        return
    key = audit.get("public_key")
    if audit.get("enabled") is True and key is None:
        report.warnings.append(
            Problem("audit.public_key", "audit is enabled but no public key is published, so "
                    "agents cannot verify audit artifacts offline", "audit")
        )
    if not isinstance(key, str):
        return
    try:
        raw = base64.b64decode(key, validate=True)
    except (binascii.Error, ValueError):
        report.warnings.append(Problem("audit.public_key", "is not valid base64", "audit"))
        return
    if len(raw) == 44 and raw.startswith(_ED25519_SPKI_PREFIX):
        # The spec's own example publishes this form, so it must be accepted.
        report.notes.append(
            Problem("audit.public_key", "is a DER SubjectPublicKeyInfo (as in the spec's example), not "
                    "the raw 32-byte Ed25519 key; verifiers must strip its 12-byte header", "audit")
        )
    elif len(raw) != 32:
        report.warnings.append(
            Problem("audit.public_key", f"decodes to {len(raw)} bytes; an Ed25519 public key is "
                    "32 raw bytes (or a 44-byte DER SubjectPublicKeyInfo)", "audit")
        )


def manifest_url(url: str) -> str:
    """Where to fetch: a bare origin means its well-known agents.json location."""
    parts = urlsplit(url)
    if parts.path in ("", "/") and not parts.query and not parts.fragment:
        return urlunsplit((parts.scheme, parts.netloc, WELL_KNOWN_PATH, "", ""))
    return url


def load_manifest(source: str, *, timeout: float = 10.0) -> LoadedManifest:
    """Fetch (http/https URL) or read (file path) a manifest, recording what is
    wrong with how it is served; raise ManifestLoadError if nothing arrives."""
    scheme = urlsplit(source).scheme.lower()
    if scheme in ("http", "https"):
        return _load_url(source, manifest_url(source), timeout)
    if "://" in source:
        raise ManifestLoadError(f"unsupported URL scheme {scheme!r} in {source}; use http(s) or a file path")
    return _load_file(source)


def check_manifest(source: str, *, timeout: float = 10.0) -> ManifestReport:
    """Load and validate in one go: what `haggler validate-manifest` prints."""
    loaded = load_manifest(source, timeout=timeout)
    if not loaded.parsed:
        return loaded.report
    return loaded.report.merged(validate_manifest(loaded.document))


def _load_file(source: str) -> LoadedManifest:
    try:
        body = Path(source).read_bytes()
    except OSError as exc:
        raise ManifestLoadError(f"cannot read {source}: {exc.strerror or exc}") from exc
    loaded = LoadedManifest(source=source, location=source)
    _parse(body, loaded)
    return loaded


def _load_url(source: str, url: str, timeout: float) -> LoadedManifest:
    try:
        with httpx.Client(follow_redirects=True, max_redirects=MAX_REDIRECTS, timeout=timeout) as client:
            with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
                body = _read_capped(response)
    except httpx.TooManyRedirects as exc:
        raise ManifestLoadError(f"cannot fetch {url}: more than {MAX_REDIRECTS} redirects") from exc
    except httpx.TimeoutException as exc:
        raise ManifestLoadError(f"cannot fetch {url}: no answer within {timeout:g} s") from exc
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise ManifestLoadError(f"cannot fetch {url}: {exc}") from exc

    final_url = str(response.url)
    loaded = LoadedManifest(source=source, location=final_url)
    report = loaded.report
    if response.history:
        report.notes.append(Problem(url, f"redirected {len(response.history)} time(s) to {final_url}", "http"))
    if response.status_code != 200:
        report.errors.append(
            Problem(final_url, f"HTTP {response.status_code} {response.reason_phrase}; expected 200", "http")
        )
        return loaded
    if body is None:
        report.errors.append(Problem(final_url, f"body is larger than {MAX_BODY_BYTES} bytes; not parsed", "http"))
        return loaded
    _check_media_type(final_url, response.headers.get("content-type"), report)
    _parse(body, loaded)
    return loaded


def _read_capped(response: httpx.Response) -> bytes | None:
    """The (decompressed) body, or None once it exceeds MAX_BODY_BYTES: a
    manifest is small, and a validator should not be made to swallow a huge one."""
    body = bytearray()
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            return None
    return bytes(body)


def _check_media_type(where: str, content_type: str | None, report: ManifestReport) -> None:
    if content_type is None:
        report.errors.append(Problem(where, f"no Content-Type; the spec requires {REQUIRED_MEDIA_TYPE}", "content-type"))
        return
    media_type, _, parameters = content_type.partition(";")
    if media_type.strip().lower() != "application/json":
        report.errors.append(
            Problem(where, f"Content-Type is {content_type!r}; the spec requires {REQUIRED_MEDIA_TYPE}", "content-type")
        )
        return
    charset = None
    for parameter in parameters.split(";"):
        name, _, value = parameter.partition("=")
        if name.strip().lower() == "charset":
            charset = value.strip().strip('"').lower()
    if charset is None:
        report.warnings.append(
            Problem(where, f"Content-Type has no charset; the spec requires {REQUIRED_MEDIA_TYPE}", "content-type")
        )
    elif charset != "utf-8":
        report.errors.append(
            Problem(where, f"charset is {charset!r}; the spec requires {REQUIRED_MEDIA_TYPE}", "content-type")
        )


def _parse(body: bytes, loaded: LoadedManifest) -> None:
    """Decode strictly as UTF-8 and parse, locating any failure by line and column."""
    report = loaded.report
    if body.startswith(codecs.BOM_UTF8):
        report.warnings.append(Problem("line 1, column 1", "starts with a byte order mark, which JSON forbids", "encoding"))
        body = body[len(codecs.BOM_UTF8):]
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = body.rfind(b"\n", 0, exc.start) + 1
        line = body.count(b"\n", 0, exc.start) + 1
        column = len(body[line_start:exc.start].decode("utf-8", errors="replace")) + 1
        report.errors.append(
            Problem(f"line {line}, column {column}", f"invalid UTF-8 (byte 0x{body[exc.start]:02x})", "encoding")
        )
        return
    try:
        loaded.document = json.loads(text)
    except json.JSONDecodeError as exc:
        report.errors.append(Problem(f"line {exc.lineno}, column {exc.colno}", f"invalid JSON: {exc.msg}", "json"))
        return
    loaded.parsed = True


def render_report(report: ManifestReport) -> str:
    """Plain text, one problem per line after a verdict line, for the CLI to print."""
    verdict = "OK" if report.ok else "FAILED"
    lines = [
        f"{verdict}: {len(report.errors)} error(s), {len(report.warnings)} warning(s), {len(report.notes)} note(s)"
    ]
    for label, problems in (("error", report.errors), ("warning", report.warnings), ("note", report.notes)):
        lines += [f"{label:<7} [{p.rule}] {p.where}: {p.message}" for p in problems]
    return "\n".join(lines)
