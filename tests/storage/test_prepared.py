"""storage/prepared.py: statements compiled once and run on the driver store and read values
exactly as SQLAlchemy's own execute does, on SQLite and PostgreSQL, and a driver error comes
out as SQLAlchemy's, so that the error edge and the outage checks see no difference."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from sqlalchemy import bindparam, insert, select, union, update
from sqlalchemy.exc import DBAPIError, IntegrityError

from haggler.storage.database import open_database
from haggler.storage.prepared import Prepared, flattened, multi_row_insert
from haggler.storage.schema import chats, messages

AT = datetime(2026, 11, 26, 16, 5, 7, 123456, tzinfo=timezone.utc)


def _chat(chat_id: str, at: datetime) -> dict[str, object]:
    return {"id": chat_id, "product_id": "p1", "seed": 2**40 + 3, "client_ip": "10.1.2.3", "status": "open",
            "outcome": None, "shopper_messages": 0, "created_at": at, "last_activity_at": at, "closed_at": None,
            "state": '{"é": "ünïcode ✓"}'}


def _message(chat_id: str, seq: int, final: bool) -> dict[str, object]:
    return {"chat_id": chat_id, "seq": seq, "speaker": "shopper", "text": f"offer {seq} — 100% sure",
            "action": "offer", "price_cents": 12_345, "currency": "USD", "extras": '["case"]', "final": final,
            "created_at": AT + timedelta(seconds=seq)}


def test_rows_written_either_way_read_back_the_same_either_way(db_url):
    db = open_database(db_url)
    read_chat = Prepared(select(*chats.c).where(chats.c.id == bindparam("chat_id")))
    try:
        # A timestamp in another zone is stored as the UTC instant it names, by both paths.
        elsewhere = AT.astimezone(timezone(timedelta(hours=-5)))
        with db.write() as conn:
            conn.execute(insert(chats), _chat("by_sqlalchemy", elsewhere))
            Prepared(insert(chats)).run(conn, _chat("by_driver", elsewhere))
            multi_row_insert(messages, 2).run(conn, flattened([_message("by_driver", 1, False),
                                                               _message("by_driver", 2, True)]))
            conn.execute(insert(messages), [_message("by_sqlalchemy", 1, False), _message("by_sqlalchemy", 2, True)])
        with db.read() as conn:
            for chat_id in ("by_sqlalchemy", "by_driver"):
                expected = tuple(conn.execute(select(*chats.c).where(chats.c.id == chat_id)).one())
                driver_row = read_chat.first(conn, {"chat_id": chat_id})
                assert driver_row is not None
                assert driver_row[1:] == expected[1:]
                assert driver_row[7] == AT and driver_row[7].tzinfo == timezone.utc
            sa_rows = [tuple(r)[1:] for r in conn.execute(select(*messages.c).where(messages.c.chat_id == "by_sqlalchemy")
                                                          .order_by(messages.c.seq))]
            driver_rows = [tuple(r)[1:] for r in conn.execute(select(*messages.c).where(messages.c.chat_id == "by_driver")
                                                              .order_by(messages.c.seq))]
            assert driver_rows == sa_rows
            assert [r[-2] for r in driver_rows] == [False, True]
            assert read_chat.first(conn, {"chat_id": "no such chat"}) is None
    finally:
        db.dispose()


def test_a_driver_error_is_sqlalchemys_and_the_transaction_rolls_back(db_url):
    db = open_database(db_url)
    add = Prepared(insert(chats))
    try:
        with db.write() as conn:
            add.run(conn, _chat("twice", AT))
        with pytest.raises(IntegrityError) as raised:
            with db.write() as conn:
                add.run(conn, _chat("once_only", AT))
                add.run(conn, _chat("twice", AT))
        assert isinstance(raised.value, DBAPIError) and raised.value.orig is not None
        assert "INSERT INTO chats" in str(raised.value.statement)
        with db.read() as conn:
            ids = {row.id for row in conn.execute(select(chats.c.id))}
        assert ids == {"twice"}  # the transaction's first insert went with it
    finally:
        db.dispose()


def test_a_row_count_is_the_number_of_rows_changed(db_url):
    db = open_database(db_url)

    close = Prepared(update(chats).where(chats.c.status == "open").values(status=bindparam("status")))
    try:
        with db.write() as conn:
            for n in range(3):
                conn.execute(insert(chats), _chat(f"c{n}", AT))
            assert close.run(conn, {"status": "closed"}) == 3
            assert close.run(conn, {"status": "closed"}) == 0
    finally:
        db.dispose()


def test_named_rows_read_like_sqlalchemy_rows(db_url):
    """``row``/``rows`` give what ``Connection.execute`` gives, by attribute, index and ``_mapping``."""
    db = open_database(db_url)
    by_status = Prepared(select(chats.c.id, chats.c.created_at, chats.c.shopper_messages)
                         .where(chats.c.status == bindparam("status")).order_by(chats.c.id))
    try:
        with db.write() as conn:
            for chat_id in ("a", "b"):
                Prepared(insert(chats)).run(conn, _chat(chat_id, AT))
        with db.read() as conn:
            expected = conn.execute(select(chats.c.id, chats.c.created_at, chats.c.shopper_messages)
                                    .where(chats.c.status == "open").order_by(chats.c.id)).all()
            rows = by_status.rows(conn, {"status": "open"})
            assert [tuple(r) for r in rows] == [tuple(r) for r in expected]
            first = by_status.row(conn, {"status": "open"})
            assert first is not None
            assert (first.id, first.created_at, first[2]) == ("a", AT, 0)
            assert dict(first._mapping) == dict(expected[0]._mapping)
            assert by_status.row(conn, {"status": "closed"}) is None
            assert by_status.rows(conn, {"status": "closed"}) == []
    finally:
        db.dispose()


def test_literal_values_and_a_parameter_used_twice(db_url):
    """A literal in ``values()`` (an anonymous parameter, here None) is sent as SQLAlchemy would
    send it, and one named parameter may appear in several places of the statement."""
    db = open_database(db_url)
    close = Prepared(update(chats).where(chats.c.id == bindparam("chat_id"), chats.c.created_at <= bindparam("now"))
                     .values(status="closed", state=None, closed_at=bindparam("now"), last_activity_at=bindparam("now")))
    later = AT + timedelta(minutes=5)
    try:
        with db.write() as conn:
            Prepared(insert(chats)).run(conn, _chat("c", AT))
            assert close.run(conn, {"chat_id": "c", "now": later}) == 1
            assert close.run(conn, {"chat_id": "c", "now": AT - timedelta(days=1)}) == 0  # created after "now"
        with db.read() as conn:
            row = conn.execute(select(chats).where(chats.c.id == "c")).one()
            assert (row.status, row.state, row.closed_at, row.last_activity_at) == ("closed", None, later, later)
    finally:
        db.dispose()


def test_a_parameter_in_every_part_of_a_union_is_worked_out_once(db_url):
    """A union whose parts each take the same parameter (copies of one bind parameter, as the
    match pickup's deadline query has) is run from its plan, not construct_params, and finds what
    SQLAlchemy's own execute finds."""
    db = open_database(db_url)
    query = union(*(select(chats.c.id).where(chats.c.status == status, chats.c.created_at <= bindparam("now"))
                    for status in ("open", "closed")))
    prepared = Prepared(query)
    try:
        with db.write() as conn:
            for chat_id, status, at in (("c1", "open", AT), ("c2", "closed", AT), ("c3", "open", AT + timedelta(1))):
                Prepared(insert(chats)).run(conn, {**_chat(chat_id, at), "status": status})
        with db.read() as conn:
            expected = sorted(conn.execute(query, {"now": AT}).scalars())
            assert sorted(row.id for row in prepared.rows(conn, {"now": AT})) == expected == ["c1", "c2"]
            assert prepared._for(conn.dialect).plan is not None
    finally:
        db.dispose()
