"""Cursors and pages of the market's lists, on every backend."""

from __future__ import annotations

from haggler.protocols.market.routes import MAX_CURSOR
from tests.support.market import trader


def test_a_cursor_past_the_column_range_is_400_on_every_backend(make_store, db_url):
    """Found while documenting the API: ``?after=2147483648`` on the inbox or the audit log was a
    500 on PostgreSQL (whose sequence columns are ``integer``s) and fine on SQLite. Every backend
    now answers 400 naming the parameter, and the largest cursor still reads an empty page."""
    store = make_store(db_url=db_url)
    agent = trader(store, "pager")
    for path in ("/market/inbox", "/market/audit"):
        for after in (MAX_CURSOR + 1, 2**62):
            response = agent.get(path, after=after)
            assert response.status_code == 400, (path, after, response.text)
            assert "after" in response.json()["error"]
        response = agent.get(path, after=MAX_CURSOR)
        assert response.status_code == 200, (path, response.text)
    assert agent.get("/market/inbox", after=MAX_CURSOR).json() == {"messages": [], "cursor": MAX_CURSOR}
