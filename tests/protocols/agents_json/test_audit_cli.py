"""`haggler keys rotate` and `haggler audit verify`, run as a user would."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from haggler.cli import app as cli
from haggler.protocols.agents_json.audit import build_artifact, make_event
from haggler.trust.keys import SigningKeys


def artifact_file(tmp_path, keys: SigningKeys, name: str = "artifact.json"):
    events = [make_event("search", "GET", {"q": "mug"}, "allowed", 200, event_id=f"e{i}",
                         timestamp=f"2026-11-22T12:00:0{i}.000Z") for i in range(3)]
    artifact = build_artifact(session_id="ses_1", site="https://shop.example", created_at="2026-11-22T12:00:00Z",
                              ended_at="2026-11-22T12:05:00Z", agent={"name": "bot"}, raw_events=events,
                              signer=keys)
    path = tmp_path / name
    path.write_text(json.dumps(artifact), "utf-8")
    return path, artifact


def test_keys_rotate_replaces_the_key_and_keeps_the_old_one_known(tmp_path):
    data = tmp_path / "data"
    old = SigningKeys(data).public_key_b64
    result = CliRunner().invoke(cli, ["keys", "rotate", "--data-dir", str(data)])
    assert result.exit_code == 0, result.output
    keys = SigningKeys(data)
    assert keys.public_key_b64 != old and keys.public_key_b64 in result.output and old in result.output
    assert old in keys.known_public_keys()


def test_audit_verify_accepts_a_good_artifact_and_names_what_fails_in_a_bad_one(tmp_path):
    keys = SigningKeys(tmp_path / "data")
    path, artifact = artifact_file(tmp_path, keys)
    good = CliRunner().invoke(cli, ["audit", "verify", str(path), "--trusted-key", keys.public_key_b64])
    assert good.exit_code == 0 and "VERIFIED" in good.output and "FAIL" not in good.output
    artifact["events"][1]["params"]["q"] = "yacht"
    path.write_text(json.dumps(artifact), "utf-8")
    bad = CliRunner().invoke(cli, ["audit", "verify", str(path)])
    assert bad.exit_code == 1 and "NOT VERIFIED" in bad.output
    assert "FAIL" in bad.output and "e1" in bad.output


def test_audit_verify_refuses_a_key_that_is_not_trusted(tmp_path):
    path, _ = artifact_file(tmp_path, SigningKeys(tmp_path / "one"))
    other = SigningKeys(tmp_path / "two").public_key_b64
    result = CliRunner().invoke(cli, ["audit", "verify", str(path), "--trusted-key", other])
    assert result.exit_code == 1 and "FAIL" in result.output


def test_audit_verify_says_when_the_file_is_missing(tmp_path):
    result = CliRunner().invoke(cli, ["audit", "verify", str(tmp_path / "nope.json")])
    assert result.exit_code != 0 and "nope.json" in result.output
