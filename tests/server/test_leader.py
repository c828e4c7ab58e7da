"""``server/leader.py`` on a real PostgreSQL: one leader at a time, and a leader whose connection
broke stops believing it leads."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text

from haggler.server.leader import LEADER_LOCK_KEY, AdvisoryLock, SoleProcess, leadership_for
from haggler.storage.database import Database

pytestmark = pytest.mark.postgres


def terminate_lock_holder(url: str) -> None:
    """What a restarted server or a dropped network does to the leader's session."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            ended = conn.execute(text("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                                      "AND objid = :key AND granted"), {"key": LEADER_LOCK_KEY}).scalars().all()
    finally:
        engine.dispose()
    assert ended == [True]


def test_one_leader_at_a_time_and_a_broken_leader_steps_down(postgres_url):
    first, second = AdvisoryLock(postgres_url), AdvisoryLock(postgres_url)
    try:
        assert first.leads() and first.leading
        assert not second.leads() and not second.leading
        assert first.leads()  # still there: the lead is kept, not taken again
        terminate_lock_holder(postgres_url)
        assert not first.leads() and not first.leading  # its session is gone, and the lock with it
        assert second.leads()
        assert not first.leads()  # reconnected, but the lead is taken
        second.close()  # a worker shutting down hands the lead on
        assert first.leads()
    finally:
        first.close()
        second.close()


def test_sqlite_has_one_process_which_always_leads(tmp_path):
    database = Database(f"sqlite:///{tmp_path}/one.db")
    try:
        leadership = leadership_for(database)
        assert isinstance(leadership, SoleProcess) and leadership.leads() and leadership.leading
    finally:
        database.dispose()
