"""Migration 0019: the match sweep's indexes of deadlines hold only the rows where their deadline
is set (no ``state`` column, which every turn rewrites), both ways on SQLite and PostgreSQL; and
on SQLite every part of the sweep's, a pickup's and a claim's queries still searches an index
(none reads the whole task table), each deadline through its own, and a pickup's search for the
claim its agent holds reads its user's claims only."""

from __future__ import annotations

from datetime import datetime, timezone

from alembic import command
from sqlalchemy import event, inspect, select

from haggler.protocols.matching import negotiations
from haggler.storage.database import Database, alembic_config, open_database
from haggler.storage.schema import a2a_tasks

try:
    from tests.support.databases import database_at, upgrade_to
except ImportError:  # pragma: no cover - rootdir-less invocation
    from support.databases import database_at, upgrade_to  # type: ignore[no-redef]

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc)
DEADLINES = ("park_deadline", "claim_deadline", "answer_deadline")


def _indexes(db: Database) -> dict[str, list[str]]:
    with db.read() as conn:
        return {ix["name"]: ix["column_names"] for ix in inspect(conn).get_indexes("a2a_tasks")}


def test_0019_reindexes_the_deadlines_both_ways(db_url):
    with database_at(db_url, "0018") as db:
        assert all(_indexes(db)[f"ix_a2a_tasks_{column}"] == ["state", column] for column in DEADLINES)
        upgrade_to(db, "head")
        after = _indexes(db)
        assert all(after[f"ix_a2a_tasks_{column}"] == [column] for column in DEADLINES)
        assert after["ix_a2a_tasks_expiry"] == ["state", "expires_at"]
        with db.write() as conn:
            config = alembic_config()
            config.attributes["connection"] = conn
            command.downgrade(config, "0018")
        assert all(_indexes(db)[f"ix_a2a_tasks_{column}"] == ["state", column] for column in DEADLINES)


def test_every_deadline_query_searches_an_index_on_sqlite(tmp_path):
    db = open_database(f"sqlite:///{tmp_path}/plans.db")
    plans: list[str] = []

    @event.listens_for(db._read_engine, "before_cursor_execute", retval=True)
    def explain(conn, cursor, statement, parameters, context, executemany):  # type: ignore[no-untyped-def]
        return "EXPLAIN QUERY PLAN " + statement, parameters

    tasks = a2a_tasks.c
    queries = [(negotiations._due(None, NOW, 50), {}),
               (negotiations._DUE_FOR_USER.statement, {"user_id": "usr_a", "now": NOW, "limit": 50}),
               (negotiations._waiting("usr_a"), {}),
               (negotiations._HELD.statement, {"user_id": "usr_a", "agent_id": "agt_a", "now": NOW}),
               (select(tasks.id).where(tasks.waiting_user_id == "usr_a",
                                       tasks.state.in_((negotiations.WAITING, negotiations.CLAIMED))), {})]
    try:
        with db.read() as conn:
            # A pickup's claim when nothing is due, an UPDATE … RETURNING: explained on the driver,
            # as SQLAlchemy would convert the plan's rows as the returned columns.
            claim = negotiations._CLAIM_IF_CLEAR._for(conn.dialect)
            runs = [lambda query=query, params=params: conn.execute(query, params) for query, params in queries]
            runs.append(lambda: conn.exec_driver_sql(claim.sql, (None,) * len(claim.order)))
            for run in runs:
                steps = [row[3] for row in run()]
                plans.append("\n".join(steps))
                # Reads of the table (or of the claim's alias of it, "others"), each through an index.
                table_steps = [step for step in steps if step.split()[1:2] in (["a2a_tasks"], ["others"])]
                assert table_steps and all(step.startswith(("SEARCH a2a_tasks USING INDEX", "SEARCH others USING INDEX"))
                                           for step in table_steps), plans[-1]
    finally:
        db.dispose()
    # The sweep finds each deadline through its own index.
    assert all(f"ix_a2a_tasks_{column}" in plans[0] for column in DEADLINES)
    # A pickup looks for the claim its agent holds among its user's turns, not through the claim
    # deadlines' index, which holds every agent's claims (its row read for each one).
    for held in (plans[3], plans[5]):
        assert "claim_deadline>?" not in held, held
