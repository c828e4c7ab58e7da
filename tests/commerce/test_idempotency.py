"""Which answers an idempotency key keeps, for both protocols (``commerce/idempotency.py``): a
success or a refusal is the request's answer and is given again; a 5xx, an unexpected failure and a
"retry in a moment" are not kept, so the same request sent again runs again."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from datetime import timedelta

import pytest

from haggler.commerce.idempotency import IdempotencyKeys, Kept
from haggler.errors import (Conflict, HagglerError, InFlight, InvalidInput, NotFound, PaymentDeclined, RateLimited,
                            Unavailable, Unprocessable)
from haggler.server.errors import status_for
from haggler.storage.database import open_database

try:
    from tests.support.servers import FakeClock
except ImportError:  # pragma: no cover
    from support.servers import FakeClock  # type: ignore[no-redef]


@pytest.fixture
def keys(tmp_path) -> Iterator[IdempotencyKeys]:
    db = open_database(f"sqlite:///{tmp_path}/keys.db")
    yield IdempotencyKeys(db, FakeClock(), "test:", timedelta(hours=48))
    db.dispose()


def refusal(exc: HagglerError) -> Kept:
    return Kept(status_for(exc), {"error": exc.message})


def send(keys: IdempotencyKeys, outcome: BaseException | None, runs: list[int]) -> Kept:
    """The same request under the same key, whose run ends in ``outcome`` (None: 200)."""
    def run() -> Kept:
        runs.append(1)
        if outcome is not None:
            raise outcome
        return Kept(200, {"ok": True})
    return keys.run(keys.owner("caller"), "key-1", "POST /things", {"a": 1}, run, refusal)


@pytest.mark.parametrize("outcome,status", [(None, 200), (PaymentDeclined("declined"), 402), (Conflict("done"), 409),
                                            (InvalidInput("bad"), 400), (NotFound("nothing"), 404),
                                            (Unprocessable("no"), 422)])
def test_an_answer_success_or_refusal_is_kept_and_given_again(keys, outcome, status):
    runs: list[int] = []
    first = send(keys, outcome, runs)
    again = send(keys, outcome, runs)
    assert (first.status, first.replayed) == (status, False)
    assert (again.status, again.body, again.replayed) == (status, first.body, True)
    assert len(runs) == 1


@pytest.mark.parametrize("outcome", [Unavailable("no answer"), InFlight("being completed"),
                                     RateLimited("too many", 5), HagglerError("unmapped: 500"), RuntimeError("bug")])
def test_an_unknown_outcome_or_a_retry_later_is_not_kept(keys, outcome):
    """ACP §6.5: a 5xx MUST NOT be cached; a 409 or 429 with Retry-After asks for the same request
    again, which would otherwise be given the same refusal for the key's whole life."""
    runs: list[int] = []
    for _ in range(2):
        with pytest.raises(type(outcome)):
            send(keys, outcome, runs)
    assert send(keys, None, runs).status == 200
    assert len(runs) == 3


def test_a_fingerprint_is_keyed_so_a_stored_one_reveals_no_card(tmp_path):
    """A request body may carry a card; its fingerprint is stored for days. Keyed with the store's
    secret, it is no bare hash that trying every card code could match."""
    db = open_database(f"sqlite:///{tmp_path}/keys.db")
    try:
        keys = IdempotencyKeys(db, lambda: None, "t:", timedelta(hours=1))  # type: ignore[arg-type,return-value]
        body = {"payment_data": {"credential": {"number": "4242424242424242", "cvc": "123"}}}
        bare = hashlib.sha256(("POST /x\n" + json.dumps(body, sort_keys=True, separators=(",", ":"))).encode())
        assert keys.fingerprint("POST /x", body) != bare.hexdigest()
        again = IdempotencyKeys(db, lambda: None, "t:", timedelta(hours=1))  # type: ignore[arg-type,return-value]
        assert again.fingerprint("POST /x", body) == keys.fingerprint("POST /x", body)  # one secret per store
    finally:
        db.dispose()
