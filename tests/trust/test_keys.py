"""The audit signing key on disk: permissions, persistence, rotation, concurrent starts."""

from __future__ import annotations

import base64
import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

from haggler.protocols.agents_json.audit import build_artifact, verify_artifact
from haggler.trust.keys import P256, InsecureKeyFileError, SigningKeys, key_id


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _artifact(keys: SigningKeys) -> dict:
    return build_artifact(
        session_id="s", site="https://shop.example", created_at="t0", ended_at="t1", agent=None,
        raw_events=[{"event_id": "e", "timestamp": "t", "capability": "search", "method": "GET",
                     "params": {"q": "x"}, "policy_result": "allowed", "response_status": 200}],
        signer=keys,
    )


def test_first_use_creates_an_owner_only_pkcs8_key(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        keys = SigningKeys(tmp_path)
        assert not keys.key_path.exists()  # nothing happens until the key is needed
        public = keys.public_key_b64
    finally:
        os.umask(old_umask)
    assert _mode(keys.key_path) == 0o600
    assert _mode(tmp_path / "audit") == 0o700
    assert keys.key_path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert len(base64.b64decode(public)) == 32
    assert [p.name for p in keys.directory.iterdir() if p.name.endswith(".tmp")] == []


def test_signature_is_real_ed25519(tmp_path: Path) -> None:
    keys = SigningKeys(tmp_path)
    signature = base64.b64decode(keys.sign(b"root"))
    Ed25519PublicKey.from_public_bytes(base64.b64decode(keys.public_key_b64)).verify(signature, b"root")


def test_key_survives_a_restart(tmp_path: Path) -> None:
    first = SigningKeys(tmp_path).public_key_b64
    restarted = SigningKeys(tmp_path)
    assert restarted.public_key_b64 == first
    assert restarted.known_public_keys() == [first]


def test_rotate_keeps_old_artifacts_verifiable(tmp_path: Path) -> None:
    keys = SigningKeys(tmp_path)
    old_public = keys.public_key_b64
    before = _artifact(keys)

    new_public = keys.rotate()

    assert new_public != old_public
    assert SigningKeys(tmp_path).public_key_b64 == new_public  # the rotation is on disk
    assert keys.known_public_keys() == [old_public, new_public]
    retired = list(keys.retired_dir.iterdir())
    assert len(retired) == 1 and retired[0].name.endswith(f"-{key_id(old_public)}.pem")
    assert _mode(retired[0]) == 0o600 and _mode(keys.key_path) == 0o600
    assert before["public_key"] == old_public
    assert verify_artifact(before, trusted_keys=keys.known_public_keys()).ok
    after = _artifact(keys)
    assert after["public_key"] == new_public
    assert verify_artifact(after, trusted_keys=[new_public]).ok
    assert not verify_artifact(before, trusted_keys=[new_public]).ok


def test_world_readable_key_is_refused(tmp_path: Path) -> None:
    assert SigningKeys(tmp_path).public_key_b64  # creates the key
    key_path = tmp_path / "audit" / "signing_key.pem"
    key_path.chmod(0o644)
    with pytest.raises(InsecureKeyFileError, match="mode 0644"):
        SigningKeys(tmp_path).sign(b"x")


def test_key_appearing_after_the_check_is_loaded_not_overwritten(tmp_path: Path) -> None:
    # Two processes start at once: both saw no key file, the other one created it first.
    winner = SigningKeys(tmp_path)
    loser = SigningKeys(tmp_path)
    winner_public = winner.public_key_b64
    created = loser._create()  # what _private_key() does after finding no file
    raw = created.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    assert base64.b64encode(raw).decode() == winner_public
    assert SigningKeys(tmp_path).public_key_b64 == winner_public
    assert loser.known_public_keys() == [winner_public]


def test_the_p256_key_lives_beside_the_ed25519_key_and_rotates_the_same_way(tmp_path: Path) -> None:
    """UCP's ES256 key: its own files in the same owner-only directory, a real ECDSA P-256 signature
    in JWS form (r and s, 32 bytes each), and rotation that keeps the old public key known."""
    audit = SigningKeys(tmp_path)
    ucp = SigningKeys(tmp_path, P256)
    assert ucp.algorithm == "ES256" and audit.algorithm == "EdDSA"
    public = ucp.public_key_b64
    assert ucp.key_path.name == "signing_key_es256.pem" and _mode(ucp.key_path) == 0o600
    point = base64.b64decode(public)
    assert len(point) == 65 and point[0] == 4  # an uncompressed SEC 1 point
    raw = base64.b64decode(ucp.sign(b"root"))
    assert len(raw) == 64
    key = ec.EllipticCurvePublicKey.from_encoded_point(ec.SECP256R1(), point)
    key.verify(encode_dss_signature(int.from_bytes(raw[:32], "big"), int.from_bytes(raw[32:], "big")), b"root",
               ec.ECDSA(hashes.SHA256()))
    assert audit.public_key_b64 != public and len(base64.b64decode(audit.public_key_b64)) == 32
    new = ucp.rotate()
    assert SigningKeys(tmp_path, P256).public_key_b64 == new
    assert ucp.known_public_keys() == [public, new] and audit.known_public_keys() == [audit.public_key_b64]
    assert [p.name.endswith(f"-{key_id(public)}.pem") for p in ucp.retired_dir.iterdir()] == [True]
    (tmp_path / "audit" / "signing_key_es256.pem").chmod(0o640)
    with pytest.raises(InsecureKeyFileError):
        SigningKeys(tmp_path, P256).sign(b"x")
    # An Ed25519 key where the P-256 key belongs is named, not used.
    other = SigningKeys(tmp_path / "other", P256)
    other.directory.mkdir(mode=0o700, parents=True)
    other.key_path.write_bytes((tmp_path / "audit" / "signing_key.pem").read_bytes())
    other.key_path.chmod(0o600)
    with pytest.raises(ValueError, match="does not hold an ES256 private key"):
        other.sign(b"x")


def test_keys_rotate_rotates_both_keys_or_the_one_named(tmp_path: Path) -> None:
    """``haggler keys rotate``: by default the Ed25519 and the P-256 key, ``--algorithm`` one of them."""
    from typer.testing import CliRunner

    from haggler.cli import app as cli

    data = tmp_path / "data"
    audit, ucp = SigningKeys(data).public_key_b64, SigningKeys(data, P256).public_key_b64
    only = CliRunner().invoke(cli, ["keys", "rotate", "--data-dir", str(data), "--algorithm", "ES256"])
    assert only.exit_code == 0, only.output
    new_ucp = SigningKeys(data, P256).public_key_b64
    assert new_ucp != ucp and f"ES256 retired {ucp}" in only.output and f"ES256 new     {new_ucp}" in only.output
    assert SigningKeys(data).public_key_b64 == audit
    both = CliRunner().invoke(cli, ["keys", "rotate", "--data-dir", str(data)])
    assert both.exit_code == 0, both.output
    assert SigningKeys(data).public_key_b64 != audit and SigningKeys(data, P256).public_key_b64 != new_ucp
    assert audit in SigningKeys(data).known_public_keys() and "Restart the store" in both.output
    bad = CliRunner().invoke(cli, ["keys", "rotate", "--data-dir", str(data), "--algorithm", "RS256"])
    assert bad.exit_code == 2 and "EdDSA or ES256" in bad.output
