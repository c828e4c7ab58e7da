"""The database fixtures themselves: a fresh PostgreSQL database and both backends."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text


def _exercise(url: str) -> None:
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            assert conn.execute(text("select 1")).scalar_one() == 1
            conn.execute(text("create table probe (id integer primary key, name varchar(40))"))
            conn.execute(text("insert into probe (id, name) values (1, 'haggle')"))
            assert conn.execute(text("select name from probe where id = 1")).scalar_one() == "haggle"
            conn.execute(text("drop table probe"))
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_url_is_a_fresh_usable_database(postgres_url: str) -> None:
    assert postgres_url.startswith("postgresql+psycopg://")
    _exercise(postgres_url)
    engine = create_engine(postgres_url)
    try:
        with engine.connect() as conn:
            tables = conn.execute(
                text("select count(*) from information_schema.tables where table_schema = 'public'")
            ).scalar_one()
        assert tables == 0
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_each_postgres_url_is_a_different_database(postgres_url: str, postgres_cluster) -> None:
    other = postgres_cluster.create_database("t_other_fresh_db")
    try:
        assert other != postgres_url
        _exercise(other)
    finally:
        postgres_cluster.drop_database("t_other_fresh_db")


def test_db_url_works_on_both_backends(db_url: str) -> None:
    _exercise(db_url)
