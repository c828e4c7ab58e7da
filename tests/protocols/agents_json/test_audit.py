"""Audit artifacts: the exact format, independent verification, tampering, redaction."""

from __future__ import annotations

import base64
import copy
import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from haggler.protocols.agents_json.audit import (
    REDACTED,
    ArtifactLoadError,
    build_artifact,
    hash_token,
    load_artifact,
    make_event,
    redact,
    verify_artifact,
)
from haggler.trust.chain import chain_events, chain_with_hashes, event_hash, root_hash
from haggler.trust.keys import SigningKeys

TOKEN = "tok_" + "Zq8x" * 10  # 44 characters, like a real session token


def _raw_events() -> list[dict[str, Any]]:
    calls = [
        ("search", "GET", {"q": "mug", "page": 1}, "allowed", 200),
        ("detail", "GET", {"id": "mug-7"}, "allowed", 200),
        ("cart.add", "POST", {"item_id": "mug-7", "quantity": 2, "price": 4.5}, "allowed", 201),
        ("cart.view", "GET", {}, "allowed", 200),
        ("checkout", "POST", {"payment": {"card_number": "4242424242424242", "cvv": "123"}}, "allowed", 200),
    ]
    return [
        make_event(cap, method, params, policy, status, event_id=f"evt-{i}", timestamp=f"2025-01-01T00:00:0{i}.000Z")
        for i, (cap, method, params, policy, status) in enumerate(calls)
    ]


@pytest.fixture()
def keys(tmp_path: Path) -> SigningKeys:
    return SigningKeys(tmp_path / "data")


@pytest.fixture()
def artifact(keys: SigningKeys) -> dict[str, Any]:
    return build_artifact(
        session_id="sess-1",
        site="https://shop.example",
        created_at="2025-01-01T00:00:00.000Z",
        ended_at="2025-01-01T00:00:09.000Z",
        agent={"agent_name": "buyer-bot", "agent_version": "1.0"},
        raw_events=_raw_events(),
        signer=keys,
        session_token=TOKEN,
    )


def _independent_verify(artifact: dict[str, Any]) -> bool:
    """What a third party does with only hashlib, base64, rfc8785 and cryptography."""
    prev = ""
    hashes = []
    for event in artifact["events"]:
        if event["prev_hash"] != prev:
            return False
        prev = hashlib.sha256(rfc8785.dumps(event)).hexdigest()
        hashes.append(prev)
    root = hashlib.sha256("".join(hashes).encode("ascii")).hexdigest()
    if root != artifact["root_hash"]:
        return False
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(artifact["public_key"]))
    key.verify(base64.b64decode(artifact["signature"]), root.encode("ascii"))  # raises if invalid
    return True


def _problems(artifact: dict[str, Any], **kwargs: Any) -> str:
    report = verify_artifact(artifact, **kwargs)
    assert not report.ok
    return "\n".join(report.problems)


# --- format -----------------------------------------------------------------


def test_artifact_verifies_independently_of_our_code(artifact: dict[str, Any], keys: SigningKeys) -> None:
    assert _independent_verify(artifact)
    assert artifact["public_key"] == keys.public_key_b64
    assert len(base64.b64decode(artifact["public_key"])) == 32
    assert set(artifact) == {
        "session_id", "site", "created_at", "ended_at", "agent", "events", "root_hash", "signature", "public_key",
    }
    assert all(
        set(event) == {"event_id", "timestamp", "capability", "method", "params", "policy_result",
                       "response_status", "prev_hash"}
        for event in artifact["events"]
    )


def test_our_verifier_accepts_a_genuine_artifact(artifact: dict[str, Any], keys: SigningKeys) -> None:
    report = verify_artifact(artifact, trusted_keys=[keys.public_key_b64])
    assert report.ok, report.problems
    assert len(report.checked) == 5


def test_chain_links_and_root_follow_the_published_rules() -> None:
    events = chain_events([{"event_id": "a"}, {"event_id": "b"}])
    assert events[0]["prev_hash"] == ""
    first = hashlib.sha256(b'{"event_id":"a","prev_hash":""}').hexdigest()
    assert event_hash(events[0]) == first
    assert events[1]["prev_hash"] == first
    second = hashlib.sha256(rfc8785.dumps(events[1])).hexdigest()
    assert root_hash(events) == hashlib.sha256((first + second).encode()).hexdigest()
    assert root_hash([]) == hashlib.sha256(b"").hexdigest()
    # The hashes chaining worked out are the events' own: an artifact's root is taken over them.
    assert chain_with_hashes([{"event_id": "a"}, {"event_id": "b"}]) == (events, [first, second])
    assert chain_with_hashes([]) == ([], [])


def test_session_without_events_still_signs_and_verifies(keys: SigningKeys) -> None:
    empty = build_artifact(
        session_id="s", site="https://shop.example", created_at="t0", ended_at="t1",
        agent=None, raw_events=[], signer=keys,
    )
    assert empty["events"] == []
    assert _independent_verify(empty)
    assert verify_artifact(empty).ok


# --- tampering ----------------------------------------------------------------


def test_altered_middle_event_is_named(artifact: dict[str, Any]) -> None:
    artifact["events"][2]["params"]["quantity"] = 200
    assert not _independent_verify(artifact)
    problems = _problems(artifact)
    assert "event 3 (id 'evt-3') prev_hash does not match the hash of event 2 (id 'evt-2')" in problems
    assert "event 2 (id 'evt-2') was altered after signing" in problems
    assert "evt-1" not in problems and "evt-4" not in problems


def test_altered_prev_hash_field_names_the_event_that_holds_it(artifact: dict[str, Any]) -> None:
    artifact["events"][2]["prev_hash"] = "0" * 64
    problems = _problems(artifact)
    assert "event 2 (id 'evt-2') prev_hash does not match the hash of event 1 (id 'evt-1')" in problems
    assert "event 2 (id 'evt-2') was altered after signing" in problems
    assert "event 1 (id 'evt-1') was altered after signing" not in problems


def test_two_altered_events_are_both_named(artifact: dict[str, Any]) -> None:
    artifact["events"][0]["params"]["q"] = "vase"
    artifact["events"][2]["capability"] = "checkout"
    problems = _problems(artifact)
    assert "event 0 (id 'evt-0') was altered after signing" in problems
    assert "event 2 (id 'evt-2') was altered after signing" in problems


def test_altered_last_event_shows_in_the_root_hash(artifact: dict[str, Any]) -> None:
    artifact["events"][-1]["response_status"] = 500
    problems = _problems(artifact)
    assert "root_hash does not match the events" in problems
    assert "the last event, event 4 (id 'evt-4'), was altered" in problems
    assert "prev_hash" not in problems  # no link breaks: only the root can show it


def test_removed_middle_event_is_located(artifact: dict[str, Any]) -> None:
    removed = artifact["events"].pop(2)
    problems = _problems(artifact)
    assert "event 2 (id 'evt-3') prev_hash does not match the hash of event 1 (id 'evt-1')" in problems
    assert f"an event with hash {event_hash(removed)} was removed just before event 2 (id 'evt-3')" in problems


def test_removed_first_event_is_located(artifact: dict[str, Any]) -> None:
    artifact["events"].pop(0)
    problems = _problems(artifact)
    assert "event 0 (id 'evt-1') should start the chain" in problems
    assert "events before it were removed" in problems


def test_reordered_events_are_called_reordered(artifact: dict[str, Any]) -> None:
    events = artifact["events"]
    events[1], events[2] = events[2], events[1]
    problems = _problems(artifact)
    assert "event 1 (id 'evt-2') prev_hash does not match the hash of event 0" in problems
    assert "it matches the hash of event 2 (id 'evt-1'), so the events look reordered" in problems
    assert "the signed order is 'evt-0', 'evt-1', 'evt-2', 'evt-3', 'evt-4'" in problems


def test_changed_root_hash_is_called_out(artifact: dict[str, Any]) -> None:
    genuine = artifact["root_hash"]
    artifact["root_hash"] = hashlib.sha256(b"forged").hexdigest()
    problems = _problems(artifact)
    assert f"the events hash to {genuine}" in problems
    assert "root_hash itself was altered" in problems
    assert "signature does not verify" in problems


def test_changed_signature_is_refused(artifact: dict[str, Any]) -> None:
    signature = bytearray(base64.b64decode(artifact["signature"]))
    signature[0] ^= 1
    artifact["signature"] = base64.b64encode(bytes(signature)).decode()
    report = verify_artifact(artifact)
    assert report.problems == [
        f"signature does not verify for root_hash {artifact['root_hash']} under public_key {artifact['public_key']}"
        " (the signature was altered, root_hash was altered, or it was signed with another key)"
    ]
    assert "root_hash matches the events" in report.checked


def test_swapped_public_key_is_refused(artifact: dict[str, Any], tmp_path: Path) -> None:
    genuine = artifact["public_key"]
    artifact["public_key"] = SigningKeys(tmp_path / "other").public_key_b64
    assert "signature does not verify" in _problems(artifact)
    problems = _problems(artifact, trusted_keys=[genuine])
    assert f"it does verify under trusted key {genuine}, so public_key was replaced" in problems
    assert f"public_key {artifact['public_key']} is not one of the trusted keys" in problems


def test_attacker_resigning_with_own_key_fails_only_the_trust_check(artifact: dict[str, Any], tmp_path: Path) -> None:
    genuine = artifact["public_key"]
    forged = build_artifact(
        session_id=artifact["session_id"], site=artifact["site"], created_at=artifact["created_at"],
        ended_at=artifact["ended_at"], agent=artifact["agent"],
        raw_events=[{k: v for k, v in e.items() if k != "prev_hash"} for e in artifact["events"][:2]],
        signer=SigningKeys(tmp_path / "attacker"),
    )
    assert verify_artifact(forged).ok  # self-consistent...
    report = verify_artifact(forged, trusted_keys=[genuine])
    assert report.problems == [f"public_key {forged['public_key']} is not one of the trusted keys: {genuine}"]


def test_missing_and_mistyped_fields_are_reported(artifact: dict[str, Any]) -> None:
    del artifact["signature"]
    artifact["events"][1]["response_status"] = "200"
    artifact["events"][3]["event_id"] = "evt-2"
    problems = _problems(artifact)
    assert "artifact: missing field 'signature'" in problems
    assert "event 1 (id 'evt-1'): field 'response_status' must be integer, found '200'" in problems
    assert "event 3: event_id 'evt-2' repeats event 2 (a duplicated event)" in problems


def test_non_object_artifact_is_reported() -> None:
    assert verify_artifact([1, 2]).problems == ["artifact must be a JSON object, found list"]


def test_spki_public_key_gets_a_precise_hint(artifact: dict[str, Any]) -> None:
    spki = bytes.fromhex("302a300506032b6570032100") + base64.b64decode(artifact["public_key"])
    artifact["public_key"] = base64.b64encode(spki).decode()
    assert "found 44 bytes (a DER SubjectPublicKeyInfo" in _problems(artifact)


# --- redaction and the session token -------------------------------------------------


def test_redact_is_case_insensitive_nested_and_leaves_input_alone() -> None:
    params = {
        "q": "mug",
        "Password": "hunter2",
        "X-Agent-Session": "abc",
        "payment": {"cardNumber": "4242", "CVV": "123", "holder": "Ann"},
        "keys": [{"stripe_api_key": "sk_live"}, "plain"],
        "Authorization": "Bearer x",
    }
    original = copy.deepcopy(params)
    assert redact(params) == {
        "q": "mug",
        "Password": REDACTED,
        "X-Agent-Session": REDACTED,
        "payment": {"cardNumber": REDACTED, "CVV": REDACTED, "holder": "Ann"},
        "keys": [{"stripe_api_key": REDACTED}, "plain"],
        "Authorization": REDACTED,
    }
    assert params == original


def test_artifact_holds_no_secrets_and_the_token_only_hashed(keys: SigningKeys) -> None:
    raw = _raw_events()
    raw.append(make_event("cart.view", "GET", {"return_url": f"https://agent.example/cb?s={TOKEN}"}, "allowed", 200))
    raw.append({**make_event("detail", "GET", {}, "allowed", 200), "params": {"session_token": TOKEN}})
    artifact = build_artifact(
        session_id="s", site="https://shop.example", created_at="t0", ended_at="t1",
        agent={"agent_name": "bot"}, raw_events=raw, signer=keys, session_token=TOKEN,
    )
    text = json.dumps(artifact)
    assert TOKEN not in text
    assert "4242424242424242" not in text and '"123"' not in text
    assert hash_token(TOKEN) == "sha256:" + hashlib.sha256(TOKEN.encode()).hexdigest()
    assert artifact["agent"] == {"agent_name": "bot", "session_token_hash": hash_token(TOKEN)}
    assert artifact["events"][5]["params"]["return_url"] == f"https://agent.example/cb?s={hash_token(TOKEN)}"
    assert artifact["events"][6]["params"]["session_token"] == REDACTED
    assert _independent_verify(artifact)


# --- loading ------------------------------------------------------------------


def test_load_artifact_from_file(artifact: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "artifact.json"
    path.write_text(json.dumps(artifact))
    assert load_artifact(str(path)) == artifact


@pytest.mark.parametrize(
    ("content", "message"),
    [("{not json", "is not valid JSON"), ("[1]", "holds a JSON list, not an artifact object")],
)
def test_load_artifact_rejects_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(ArtifactLoadError, match=message):
        load_artifact(str(path))


def test_load_artifact_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ArtifactLoadError, match="could not read"):
        load_artifact(str(tmp_path / "absent.json"))


@pytest.fixture()
def served(artifact: dict[str, Any]) -> Iterator[str]:
    body = json.dumps(artifact).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            status = 200 if self.path == "/audit/sess-1" else 404
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if status == 200 else b"{}")

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_load_artifact_from_url(served: str, artifact: dict[str, Any]) -> None:
    assert load_artifact(f"{served}/audit/sess-1") == artifact
    with pytest.raises(ArtifactLoadError, match="HTTP 404"):
        load_artifact(f"{served}/audit/unknown")
