"""The audit trail in the database: chains, concurrency, finalization, expiry, redaction, retention."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import insert, select

from haggler.errors import Closed, NotFound, TooEarly
from haggler.protocols.agents_json.audit import REDACTED, verify_artifact
from haggler.protocols.agents_json.trail import AuditTrail
from haggler.storage.database import Database
from haggler.storage.schema import agent_sessions, audit_artifacts, audit_events
from haggler.trust.keys import SigningKeys

START = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
SITE = {"name": "Test Shop", "url": "https://shop.example"}
TOKEN = "tok_" + "Zq8x" * 10


class Clock:
    """A clock tests move by hand, so expiry and retention need no sleeping."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> None:
        self.now += timedelta(**kwargs)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def keys(tmp_path: Path) -> SigningKeys:
    return SigningKeys(tmp_path)


@pytest.fixture
def trail(db: Database, keys: SigningKeys, clock: Clock) -> AuditTrail:
    return AuditTrail(db, keys, SITE, clock)


def _add_session(db: Database, session_id: str, *, lifetime: timedelta = timedelta(hours=1),
                 token: str | None = None, start: datetime = START) -> None:
    token = token or f"token-of-{session_id}"
    with db.write() as conn:
        conn.execute(insert(agent_sessions), {
            "id": session_id, "token_hash": hashlib.sha256(token.encode()).hexdigest(), "client": "203.0.113.9",
            "agent_name": "buyer-bot", "agent_version": "2.1", "purpose": "buy a mug",
            "created_at": start, "expires_at": start + lifetime, "ended_at": None, "end_reason": None,
        })


def _record(trail: AuditTrail, session_id: str, n: int, **params: Any) -> dict[str, Any]:
    return trail.record(session_id, capability="search", method="get", params={"q": f"mug {n}", **params},
                        policy_result="allowed", response_status=200)


def _end(trail: AuditTrail, session_id: str, **kwargs: Any) -> dict[str, Any]:
    with trail.db.write() as conn:
        return trail.finalize(conn, session_id, ended_at=trail.clock(), end_reason="deleted", **kwargs)


def _session(db: Database, session_id: str) -> Any:
    with db.read() as conn:
        return conn.execute(select(agent_sessions).where(agent_sessions.c.id == session_id)).one()


def _stored_events(db: Database, session_id: str) -> list[Any]:
    with db.read() as conn:
        return conn.execute(select(audit_events).where(audit_events.c.session_id == session_id)
                            .order_by(audit_events.c.seq)).all()


def _independent_verify(artifact: dict[str, Any]) -> None:
    """What a third party does with only hashlib, base64, rfc8785 and cryptography; raises on failure."""
    prev = ""
    hashes = []
    for event in artifact["events"]:
        assert event["prev_hash"] == prev
        prev = hashlib.sha256(rfc8785.dumps(event)).hexdigest()
        hashes.append(prev)
    root = hashlib.sha256("".join(hashes).encode("ascii")).hexdigest()
    assert root == artifact["root_hash"]
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(artifact["public_key"]))
    key.verify(base64.b64decode(artifact["signature"]), root.encode("ascii"))


# --- chain and signature -------------------------------------------------------------------


def test_chain_of_events_verifies_with_our_code_and_independently(trail: AuditTrail, db: Database,
                                                                    clock: Clock, keys: SigningKeys) -> None:
    _add_session(db, "s1")
    recorded = []
    for n in range(5):
        recorded.append(_record(trail, "s1", n))
        clock.advance(seconds=2)
    artifact = _end(trail, "s1")

    assert verify_artifact(artifact, trusted_keys=[keys.public_key_b64]).ok
    _independent_verify(artifact)
    assert artifact["events"] == recorded
    assert [event["params"]["q"] for event in artifact["events"]] == [f"mug {n}" for n in range(5)]
    assert artifact["events"][0]["method"] == "GET"
    assert artifact["events"][1]["timestamp"] == "2026-11-22T12:00:02.000Z"
    assert artifact["site"] == SITE
    assert artifact["created_at"] == "2026-11-22T12:00:00.000Z"
    assert artifact["ended_at"] == "2026-11-22T12:00:10.000Z"
    assert artifact["agent"] == {
        "name": "buyer-bot", "version": "2.1", "purpose": "buy a mug",
        "session_token_hash": "sha256:" + hashlib.sha256(b"token-of-s1").hexdigest(),
    }
    rows = _stored_events(db, "s1")
    assert [row.seq for row in rows] == [1, 2, 3, 4, 5]
    assert [row.hash for row in rows] == [hashlib.sha256(rfc8785.dumps(e)).hexdigest() for e in artifact["events"]]
    session = _session(db, "s1")
    assert (session.ended_at, session.end_reason) == (START + timedelta(seconds=10), "deleted")


def test_tampered_artifact_fails_independent_verification(trail: AuditTrail, db: Database) -> None:
    _add_session(db, "s1")
    for n in range(3):
        _record(trail, "s1", n)
    artifact = _end(trail, "s1")
    artifact["events"][2]["params"]["q"] = "a cheaper mug"
    assert not verify_artifact(artifact).ok
    with pytest.raises(AssertionError):
        _independent_verify(artifact)
    artifact["root_hash"] = hashlib.sha256(
        "".join(hashlib.sha256(rfc8785.dumps(e)).hexdigest() for e in artifact["events"]).encode()).hexdigest()
    with pytest.raises(InvalidSignature):
        _independent_verify(artifact)


def test_session_without_events_gets_a_valid_empty_artifact(trail: AuditTrail, db: Database) -> None:
    _add_session(db, "quiet")
    artifact = _end(trail, "quiet")
    assert artifact["events"] == []
    assert artifact["root_hash"] == hashlib.sha256(b"").hexdigest()
    _independent_verify(artifact)


def test_events_of_different_sessions_form_separate_chains(trail: AuditTrail, db: Database) -> None:
    _add_session(db, "a")
    _add_session(db, "b")
    for n in range(3):
        _record(trail, "a", n)
        _record(trail, "b", n)
    first_a, first_b = _stored_events(db, "a")[0], _stored_events(db, "b")[0]
    assert json.loads(first_a.event)["prev_hash"] == json.loads(first_b.event)["prev_hash"] == ""
    _independent_verify(_end(trail, "a"))
    _independent_verify(_end(trail, "b"))


def test_concurrent_calls_in_one_session_make_one_unbroken_chain(trail: AuditTrail, db: Database) -> None:
    _add_session(db, "busy")
    threads_n, per_thread = 8, 5
    barrier = threading.Barrier(threads_n)
    errors: list[BaseException] = []

    def work(worker: int) -> None:
        try:
            barrier.wait()
            for n in range(per_thread):
                _record(trail, "busy", n, worker=worker)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []

    rows = _stored_events(db, "busy")
    assert [row.seq for row in rows] == list(range(1, threads_n * per_thread + 1))
    prev = ""
    for row in rows:
        event = json.loads(row.event)
        assert event["prev_hash"] == prev
        prev = row.hash
    artifact = _end(trail, "busy")
    _independent_verify(artifact)
    assert sorted((e["params"]["worker"], e["params"]["q"]) for e in artifact["events"]) == sorted(
        (w, f"mug {n}") for w in range(threads_n) for n in range(per_thread))


def test_event_commits_or_rolls_back_with_the_callers_transaction(trail: AuditTrail, db: Database) -> None:
    _add_session(db, "s1")
    with pytest.raises(RuntimeError), db.write():
        trail.record("s1", capability="cart.add", method="POST", params={"id": "mug"},
                     policy_result="allowed", response_status=201)
        raise RuntimeError("the call's effect failed")
    assert _stored_events(db, "s1") == []


def test_record_refuses_unknown_ended_and_expired_sessions(trail: AuditTrail, db: Database, clock: Clock) -> None:
    with pytest.raises(NotFound):
        _record(trail, "nobody", 0)
    _add_session(db, "ended")
    _end(trail, "ended")
    with pytest.raises(Closed):
        _record(trail, "ended", 0)
    _add_session(db, "late", lifetime=timedelta(minutes=5))
    clock.advance(minutes=5)
    with pytest.raises(Closed):
        _record(trail, "late", 0)
    assert _stored_events(db, "ended") == _stored_events(db, "late") == []


# --- finalize -------------------------------------------------------------------------------


def test_finalize_is_idempotent(trail: AuditTrail, db: Database, clock: Clock, keys: SigningKeys) -> None:
    _add_session(db, "s1")
    _record(trail, "s1", 0)
    first = _end(trail, "s1")
    clock.advance(minutes=3)
    keys.rotate()
    with db.write() as conn:
        second = trail.finalize(conn, "s1", ended_at=clock(), end_reason="checkout")
    assert second == first
    assert trail.artifact("s1") == first
    session = _session(db, "s1")
    assert (session.ended_at, session.end_reason) == (START, "deleted")
    with db.read() as conn:
        assert len(conn.execute(select(audit_artifacts)).all()) == 1


def test_finalize_keeps_the_end_already_recorded(trail: AuditTrail, db: Database, clock: Clock) -> None:
    _add_session(db, "s1")
    with db.write() as conn:
        conn.execute(agent_sessions.update().where(agent_sessions.c.id == "s1")
                     .values(ended_at=START + timedelta(seconds=7), end_reason="checkout"))
        clock.advance(minutes=1)
        artifact = trail.finalize(conn, "s1", ended_at=clock(), end_reason="deleted")
    assert artifact["ended_at"] == "2026-11-22T12:00:07.000Z"
    assert _session(db, "s1").end_reason == "checkout"


def test_finalize_with_the_token_hashes_its_occurrences(trail: AuditTrail, db: Database) -> None:
    _add_session(db, "s1", token=TOKEN)
    trail.record("s1", capability="checkout", method="POST", params={"return_url": f"https://a.example/{TOKEN}"},
                 policy_result="allowed", response_status=200)
    artifact = _end(trail, "s1", session_token=TOKEN)
    text = json.dumps(artifact)
    assert TOKEN not in text
    assert "sha256:" + hashlib.sha256(TOKEN.encode()).hexdigest() in artifact["events"][0]["params"]["return_url"]
    _independent_verify(artifact)


def test_finalize_rejects_a_token_of_another_session(trail: AuditTrail, db: Database) -> None:
    _add_session(db, "s1", token=TOKEN)
    with pytest.raises(ValueError):
        _end(trail, "s1", session_token="tok_someone_else")
    assert _session(db, "s1").ended_at is None


# --- reading artifacts ------------------------------------------------------------------------


def test_artifact_of_active_session_is_too_early(trail: AuditTrail, db: Database, clock: Clock) -> None:
    _add_session(db, "s1")
    _record(trail, "s1", 0)
    clock.advance(minutes=59)
    with pytest.raises(TooEarly):
        trail.artifact("s1")
    assert _session(db, "s1").ended_at is None


def test_artifact_of_unknown_session_is_not_found(trail: AuditTrail) -> None:
    with pytest.raises(NotFound):
        trail.artifact("no-such-session")


def test_expired_unfinalized_session_is_finalized_on_read(trail: AuditTrail, db: Database, clock: Clock) -> None:
    _add_session(db, "s1", lifetime=timedelta(minutes=30))
    _record(trail, "s1", 0)
    clock.advance(hours=2)
    artifact = trail.artifact("s1")
    assert artifact["ended_at"] == "2026-11-22T12:30:00.000Z"
    assert len(artifact["events"]) == 1
    _independent_verify(artifact)
    session = _session(db, "s1")
    assert (session.ended_at, session.end_reason) == (START + timedelta(minutes=30), "expired")
    assert trail.artifact("s1") == artifact


# --- the sweep -------------------------------------------------------------------------------


def test_finalize_expired_counts_and_is_idempotent(trail: AuditTrail, db: Database, clock: Clock) -> None:
    for n in range(3):
        _add_session(db, f"old{n}", lifetime=timedelta(minutes=10))
        _record(trail, f"old{n}", n)
    _add_session(db, "fresh", lifetime=timedelta(hours=3))
    _add_session(db, "deleted", lifetime=timedelta(minutes=10))
    _end(trail, "deleted")
    clock.advance(minutes=10)

    assert trail.finalize_expired(clock()) == 3
    assert trail.finalize_expired(clock()) == 0
    for n in range(3):
        assert _session(db, f"old{n}").end_reason == "expired"
        _independent_verify(trail.artifact(f"old{n}"))
    assert _session(db, "fresh").ended_at is None
    assert _session(db, "deleted").end_reason == "deleted"
    with pytest.raises(TooEarly):
        trail.artifact("fresh")


def test_finalize_expired_handles_more_than_one_batch(trail: AuditTrail, db: Database, clock: Clock) -> None:
    with db.write() as conn:
        conn.execute(insert(agent_sessions), [
            {"id": f"s{n:03}", "token_hash": f"{n:064x}", "client": "c", "agent_name": None, "agent_version": None,
             "purpose": None, "created_at": START, "expires_at": START, "ended_at": None, "end_reason": None}
            for n in range(230)
        ])
    assert trail.finalize_expired(clock()) == 230
    with db.read() as conn:
        assert len(conn.execute(select(audit_artifacts)).all()) == 230


def test_concurrent_sweeps_finalize_each_session_once(trail: AuditTrail, db: Database, clock: Clock) -> None:
    for n in range(20):
        _add_session(db, f"s{n:02}", lifetime=timedelta(minutes=1))
    clock.advance(minutes=2)
    counts: list[int] = []
    threads = [threading.Thread(target=lambda: counts.append(trail.finalize_expired(clock()))) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(counts) == 20
    assert len(counts) == 4


# --- redaction and keys ------------------------------------------------------------------------


def test_sensitive_params_never_reach_the_stored_event(trail: AuditTrail, db: Database) -> None:
    _add_session(db, "s1")
    trail.record("s1", capability="login", method="POST",
                 params={"user": "ann", "password": "hunter2-PLAIN", "session_token": "tok_RAW_VALUE",
                         "payment": {"card_number": "4111111111111111"}},
                 policy_result="allowed", response_status=200)
    (row,) = _stored_events(db, "s1")
    for secret in ("hunter2-PLAIN", "tok_RAW_VALUE", "4111111111111111"):
        assert secret not in row.event
    stored = json.loads(row.event)
    assert stored["params"] == {"user": "ann", "password": REDACTED, "session_token": REDACTED,
                                "payment": {"card_number": REDACTED}}
    artifact = _end(trail, "s1")
    with db.read() as conn:
        artifact_text = conn.execute(select(audit_artifacts.c.artifact)).scalar_one()
    assert "hunter2-PLAIN" not in artifact_text and "tok_RAW_VALUE" not in artifact_text
    assert artifact["events"][0]["params"]["password"] == REDACTED


def test_artifact_still_verifies_after_key_rotation(trail: AuditTrail, db: Database, keys: SigningKeys) -> None:
    _add_session(db, "s1")
    _record(trail, "s1", 0)
    old_key = keys.public_key_b64
    _end(trail, "s1")
    new_key = keys.rotate()
    _add_session(db, "s2")
    newer = _end(trail, "s2")

    stored = trail.artifact("s1")
    assert stored["public_key"] == old_key != new_key
    assert newer["public_key"] == new_key
    assert verify_artifact(stored, trusted_keys=keys.known_public_keys()).ok
    assert not verify_artifact(stored, trusted_keys=[new_key]).ok
    _independent_verify(stored)


# --- retention -------------------------------------------------------------------------------


def test_prune_keeps_29_day_old_artifacts_and_removes_31_day_old_ones(trail: AuditTrail, db: Database,
                                                                       clock: Clock) -> None:
    _add_session(db, "old")
    _record(trail, "old", 0)
    _end(trail, "old")
    clock.advance(days=2)
    _add_session(db, "recent", start=clock())
    _record(trail, "recent", 0)
    _end(trail, "recent")
    clock.advance(days=29)  # "old" is now 31 days old, "recent" 29

    assert trail.prune(clock()) == 1
    assert _stored_events(db, "old") == []
    assert len(_stored_events(db, "recent")) == 1
    with pytest.raises(NotFound):
        trail.artifact("old")
    _independent_verify(trail.artifact("recent"))
    assert trail.prune(clock(), keep=timedelta(days=90)) == 0


def test_prune_refuses_retention_below_30_days(trail: AuditTrail, db: Database, clock: Clock) -> None:
    _add_session(db, "s1")
    _end(trail, "s1")
    clock.advance(days=40)
    with pytest.raises(ValueError):
        trail.prune(clock(), keep=timedelta(days=29, hours=23))
    trail.artifact("s1")  # still there
