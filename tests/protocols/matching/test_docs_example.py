"""docs/matching-api.md's worked example, run verbatim against a live server.

The example is a sequence of HTTP exchanges (```http blocks); ``tests/support/docs.py`` sends
each request as written and checks the response against the one shown."""

from __future__ import annotations

import pytest

from haggler.protocols.matching.settings import MatchingSettings
from tests.support.docs import fenced_blocks, parse_exchange, run_exchange, run_exchanges

DOC = "matching-api.md"
TOKEN = "operator-token-for-the-docs-0123456789"


@pytest.fixture
def blocks() -> list[str]:
    found = fenced_blocks(DOC, "http")
    assert len(found) == 11, "the worked example is the reference's only ```http blocks"
    return found


def test_the_worked_example_runs_verbatim(make_store, blocks):
    store = make_store(matching=MatchingSettings(operator_token=TOKEN))
    values = run_exchanges(store.http, blocks, {"operatorToken": TOKEN})
    # Every value the example names was given by a response (and reused where it says so).
    assert values["maya.id"].startswith("usr_") and values["negotiation.id"].startswith("neg_")


def test_a_wrong_example_fails(make_store, blocks):
    """The runner is strict: a response that differs from the documented one fails the test."""
    store = make_store(matching=MatchingSettings(operator_token=TOKEN))
    values = {"operatorToken": TOKEN}
    first = parse_exchange(blocks[0])
    wrong_status = parse_exchange(blocks[0].replace("HTTP/1.1 201 Created", "HTTP/1.1 200 OK"))
    with pytest.raises(AssertionError, match="expected 200, got 201"):
        run_exchange(store.http, wrong_status, dict(values))
    request, response = blocks[0].split("HTTP/1.1 201 Created")
    wrong_field = parse_exchange(request + "HTTP/1.1 201 Created" + response.replace('"name": "Maya"', '"name": "Maja"'))
    with pytest.raises(AssertionError, match=r"body.name: expected 'Maja', got 'Maya'"):
        run_exchange(store.http, wrong_field, dict(values))
    run_exchange(store.http, first, values)
    with pytest.raises(AssertionError, match="maya.id"):  # a placeholder holds one value throughout
        run_exchange(store.http, first, values)
