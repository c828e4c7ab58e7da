"""The agents.json audit artifact: its fields, redaction, building it, verifying it offline.

Everything here is pure (no HTTP, no database) so the same code builds artifacts
in the store and verifies them in ``haggler audit verify``.  The format is
exact so that anyone can verify an artifact without our code:

* ``events`` are the session's calls, each a hash chain event (``trust.chain``):
  its hash is the SHA-256 hex of its RFC 8785 canonical JSON, ``prev_hash``
  included, and ``prev_hash`` is the previous event's hash, ``""`` for the first;
* ``root_hash`` is the chain's root: the SHA-256 hex of the event hashes (hex
  strings) concatenated in order; with no events, the SHA-256 of the empty string;
* ``signature`` is the base64 Ed25519 signature of the ASCII bytes of ``root_hash``;
* ``public_key`` is base64 of the raw 32-byte Ed25519 key, the value the
  manifest publishes as ``audit.public_key``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from haggler.trust.chain import (
    chain_with_hashes,
    describe_event,
    event_hash,
    explain_root_mismatch,
    link_problems,
    root_of,
)
from haggler.trust.hashing import secret_hash
from haggler.trust.keys import PublicKeyError, decode_public_key
from haggler.trust.signatures import Signer, signature_valid, signer_among

REDACTED = "[redacted]"

# Parameter names whose values never reach an artifact.  Names are compared
# case-insensitively with "_" and "-" removed, so "Session-Token", "sessionToken"
# and "session_token" all match "sessiontoken".
SENSITIVE_KEYS = frozenset(
    {
        "token", "sessiontoken", "accesstoken", "refreshtoken", "idtoken", "xagentsession",
        "password", "passwd", "passphrase", "secret", "clientsecret",
        "apikey", "xapikey", "authorization", "proxyauthorization", "cookie", "setcookie",
        "card", "cardnumber", "ccnumber", "creditcard", "creditcardnumber", "pan",
        "cvv", "cvv2", "cvc", "cvc2", "securitycode", "pin",
    }
)
# Names ending like these are sensitive too ("stripe_api_key", "user_password"):
# an over-redacted pagination token costs less than a leaked credential.
SENSITIVE_SUFFIXES = ("token", "password", "secret", "apikey")

EVENT_FIELDS: dict[str, tuple[type, ...]] = {
    "event_id": (str,),
    "timestamp": (str,),
    "capability": (str,),
    "method": (str,),
    "params": (dict,),
    "policy_result": (str, dict),
    "response_status": (int,),
    "prev_hash": (str,),
}
ARTIFACT_FIELDS: dict[str, tuple[type, ...]] = {
    "session_id": (str,),
    "site": (str, dict),
    "created_at": (str,),
    "ended_at": (str,),
    "agent": (dict, type(None)),
    "events": (list,),
    "root_hash": (str,),
    "signature": (str,),
    "public_key": (str,),
}
_HEX64 = re.compile(r"[0-9a-f]{64}")


class ArtifactLoadError(ValueError):
    """An artifact could not be read, fetched or parsed."""


@dataclass
class VerificationReport:
    """Outcome of verify_artifact: what passed (``checked``) and what failed (``problems``)."""

    problems: list[str] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def utc_timestamp(moment: datetime | None = None) -> str:
    """ISO 8601 UTC with milliseconds and a ``Z``: one fixed form, so hashes are stable."""
    moment = moment or datetime.now(UTC)
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def is_sensitive(name: str) -> bool:
    """Whether a parameter name is in SENSITIVE_KEYS or ends with a SENSITIVE_SUFFIXES entry."""
    normalized = name.lower().replace("_", "").replace("-", "")
    return normalized in SENSITIVE_KEYS or normalized.endswith(SENSITIVE_SUFFIXES)


def redact(params: Any) -> Any:
    """Return a copy of ``params`` with every sensitive key's value replaced by ``[redacted]``.

    Walks nested dicts and lists, because a card number nested in ``payment``
    leaks just as well as a top-level one.  The input is not modified.
    """
    if isinstance(params, Mapping):
        return {
            key: REDACTED if isinstance(key, str) and is_sensitive(key) else redact(value)
            for key, value in params.items()
        }
    if isinstance(params, list | tuple):
        return [redact(item) for item in params]
    return params


def hash_token(token: str) -> str:
    """How a session token appears in an artifact: ``sha256:<hex>``.

    The agent that holds the token can recognise its session; nobody reading
    the artifact can replay it.
    """
    return "sha256:" + secret_hash(token)


def make_event(
    capability: str,
    method: str,
    params: Mapping[str, Any],
    policy_result: str | dict[str, Any],
    response_status: int,
    *,
    event_id: str | None = None,
    timestamp: str | None = None,
) -> dict[str, Any]:
    """An unchained event (no ``prev_hash`` yet) with its params already redacted.

    Redacting when the call is recorded keeps secrets out of storage too, not
    only out of the published artifact.
    """
    return {
        "event_id": event_id or uuid.uuid4().hex,
        "timestamp": timestamp or utc_timestamp(),
        "capability": capability,
        "method": method.upper(),
        "params": redact(params),
        "policy_result": policy_result,
        "response_status": response_status,
    }


def build_artifact(
    *,
    session_id: str,
    site: str | dict[str, Any],
    created_at: str,
    ended_at: str,
    agent: dict[str, Any] | None,
    raw_events: Iterable[Mapping[str, Any]],
    signer: Signer,
    session_token: str | None = None,
) -> dict[str, Any]:
    """The complete signed artifact for a session that has ended.

    Params are redacted again (harmless if ``make_event`` already did).  With
    ``session_token``, every occurrence of the raw token anywhere in the events
    or ``agent`` (a URL, a free-text field) is replaced by its hash, and
    ``agent["session_token_hash"]`` records that hash, so the token appears
    only hashed.
    """
    events: list[Any] = [{**event, "params": redact(event.get("params", {}))} for event in raw_events]
    agent = dict(agent) if agent is not None else None
    if session_token:
        hashed = hash_token(session_token)
        events = _replace_substring(events, session_token, hashed)
        agent = _replace_substring(agent or {}, session_token, hashed)
        agent["session_token_hash"] = hashed
    chained, hashes = chain_with_hashes(events)
    root = root_of(hashes)
    return {
        "session_id": session_id,
        "site": site,
        "created_at": created_at,
        "ended_at": ended_at,
        "agent": agent,
        "events": chained,
        "root_hash": root,
        "signature": signer.sign(root.encode("ascii")),
        "public_key": signer.public_key_b64,
    }


def _replace_substring(value: Any, old: str, new: str) -> Any:
    if isinstance(value, str):
        return value.replace(old, new)
    if isinstance(value, Mapping):
        return {_replace_substring(k, old, new): _replace_substring(v, old, new) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_replace_substring(item, old, new) for item in value]
    return value


def load_artifact(source: str) -> dict[str, Any]:
    """Read an artifact from a file path or an http(s) URL; ArtifactLoadError says what went wrong."""
    if source.startswith(("http://", "https://")):
        try:
            response = httpx.get(source, timeout=10.0, follow_redirects=True)
        except httpx.HTTPError as exc:
            raise ArtifactLoadError(f"could not fetch {source}: {exc}") from exc
        if response.status_code != 200:
            raise ArtifactLoadError(f"could not fetch {source}: HTTP {response.status_code}")
        text = response.text
    else:
        try:
            text = Path(source).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ArtifactLoadError(f"could not read {source}: {exc}") from exc
    try:
        artifact = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArtifactLoadError(f"{source} is not valid JSON: {exc}") from exc
    if not isinstance(artifact, dict):
        raise ArtifactLoadError(f"{source} holds a JSON {type(artifact).__name__}, not an artifact object")
    return artifact


# --- verification -------------------------------------------------------------


def verify_artifact(artifact: Any, *, trusted_keys: Iterable[str] | None = None) -> VerificationReport:
    """Check an artifact offline and say precisely what fails.

    In order: fields present and typed; each ``prev_hash`` links to the previous
    event (catches removal and reordering); ``root_hash`` matches the events
    (catches altered events, naming the one altered where the chain allows);
    the signature is valid for ``root_hash`` under ``public_key``; and, given
    ``trusted_keys`` (e.g. the manifest's ``audit.public_key``), that the key is
    one of them.  A malformed artifact stops after the field check, since
    hashes over it would only add noise.
    """
    report = VerificationReport()
    _check_structure(artifact, report)
    if not report.ok:
        return report
    events: list[dict[str, Any]] = artifact["events"]
    hashes = [event_hash(event) for event in events]
    _check_links(events, hashes, report)
    public_key = _load_public_key(artifact["public_key"], report)
    _check_root(artifact, hashes, public_key, report)
    _check_signature(artifact, public_key, trusted_keys, report)
    return report


def _type_names(types: tuple[type, ...]) -> str:
    names = {str: "string", dict: "object", list: "array", int: "integer", type(None): "null"}
    return " or ".join(names[t] for t in types)


def _field_problems(obj: Mapping[str, Any], spec: Mapping[str, tuple[type, ...]], where: str) -> list[str]:
    problems = []
    for name, types in spec.items():
        if name not in obj:
            problems.append(f"{where}: missing field {name!r}")
        elif isinstance(obj[name], bool) or not isinstance(obj[name], types):
            problems.append(f"{where}: field {name!r} must be {_type_names(types)}, found {obj[name]!r}")
    return problems


def _check_structure(artifact: Any, report: VerificationReport) -> None:
    if not isinstance(artifact, Mapping):
        report.problems.append(f"artifact must be a JSON object, found {type(artifact).__name__}")
        return
    problems = _field_problems(artifact, ARTIFACT_FIELDS, "artifact")
    if isinstance(artifact.get("root_hash"), str) and not _HEX64.fullmatch(artifact["root_hash"]):
        problems.append(f"artifact: root_hash must be 64 lowercase hex digits, found {artifact['root_hash']!r}")
    events = artifact.get("events")
    if isinstance(events, list):
        seen: dict[str, int] = {}
        for index, event in enumerate(events):
            if not isinstance(event, Mapping):
                problems.append(f"event {index}: must be a JSON object, found {type(event).__name__}")
                continue
            problems += _field_problems(event, EVENT_FIELDS, describe_event(events, index))
            event_id = event.get("event_id")
            if isinstance(event_id, str):
                if event_id in seen:
                    first = seen[event_id]
                    problems.append(f"event {index}: event_id {event_id!r} repeats event {first} (a duplicated event)")
                seen.setdefault(event_id, index)
    report.problems += problems
    if not problems:
        report.checked.append(f"artifact and its {len(events)} events have all required fields, correctly typed")


def _check_links(events: list[dict[str, Any]], hashes: list[str], report: VerificationReport) -> None:
    problems = link_problems(events, hashes)
    report.problems += problems
    if not problems:
        report.checked.append(f"hash chain links all {len(events)} events in order")


def _check_root(
    artifact: Mapping[str, Any],
    hashes: list[str],
    public_key: Ed25519PublicKey | None,
    report: VerificationReport,
) -> None:
    stated = artifact["root_hash"]
    computed = root_of(hashes)
    if computed == stated:
        report.checked.append("root_hash matches the events")
        return

    def signed(root: str) -> bool:
        return public_key is not None and signature_valid(public_key, artifact["signature"], root.encode("ascii"))

    report.problems.append(
        f"root_hash does not match the events: the events hash to {computed}, the artifact states {stated}; "
        + explain_root_mismatch(artifact["events"], hashes, stated, signed)
    )


def _load_public_key(value: str, report: VerificationReport) -> Ed25519PublicKey | None:
    try:
        return decode_public_key(value)
    except PublicKeyError as exc:
        report.problems.append(f"public_key {exc}")
        return None


def _check_signature(
    artifact: Mapping[str, Any],
    public_key: Ed25519PublicKey | None,
    trusted_keys: Iterable[str] | None,
    report: VerificationReport,
) -> None:
    stated_key = artifact["public_key"]
    root = artifact["root_hash"].encode("ascii")
    trusted = [key.strip() for key in trusted_keys] if trusted_keys is not None else None
    if public_key is not None:
        if signature_valid(public_key, artifact["signature"], root):
            report.checked.append("signature is valid for root_hash under public_key")
        else:
            message = f"signature does not verify for root_hash {artifact['root_hash']} under public_key {stated_key}"
            signer = signer_among(trusted or [], artifact["signature"], root)
            if signer is not None:
                message += f"; it does verify under trusted key {signer}, so public_key was replaced"
            else:
                message += " (the signature was altered, root_hash was altered, or it was signed with another key)"
            report.problems.append(message)
    if trusted is None:
        return
    if stated_key in trusted:
        report.checked.append("public_key is one of the trusted keys")
    else:
        listed = ", ".join(trusted) or "none given"
        report.problems.append(f"public_key {stated_key} is not one of the trusted keys: {listed}")
