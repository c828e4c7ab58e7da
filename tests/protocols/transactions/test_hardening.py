"""The exchange against hostile or careless input, and the edges of idempotency, expiry and money
found in review: each case once answered a 500, lost a state change or could replay a secret."""

from __future__ import annotations

import threading

import httpx
import pytest
from sqlalchemy import create_engine, select

from haggler.errors import InvalidInput
from haggler.protocols.transactions import ledger
from haggler.protocols.transactions.idempotency import KEEP_FOR, STALE_AFTER, Overtaken, request_hash
from haggler.storage.schema import exchange_transactions, idempotency_keys
from tests.protocols.transactions.support import list_service, open_transaction, register


def raw_post(party, path: str, content: bytes, **headers: str):
    return party.http.post(path, content=content, headers={**party.auth, "Content-Type": "application/json",
                                                           **headers})


@pytest.fixture
def pair(store):
    consumer, provider = register(store.http, "c"), register(store.http, "p")
    consumer.deposit(10_000)
    return consumer, provider


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"a":' * 5000 + b"1" + b"}" * 5000, b'{"amountCents": NaN}',
                                  b'{"amountCents": Infinity}', b"x" * 70_000, b"[1, 2]", b'"text"'])
def test_hostile_bodies_are_400_never_500(pair, body):
    consumer, _ = pair
    for path in ("/v1/wallets/me/deposit", "/v1/services", "/v1/transactions"):
        response = raw_post(consumer, path, body)
        assert response.status_code == 400, (path, response.text)
    assert consumer.wallet()["availableCents"] == 10_000


@pytest.mark.parametrize("bad", ['"\\ud800"', '"nul\\u0000here"'])
def test_text_that_cannot_be_stored_is_400(store, pair, bad):
    consumer, provider = pair
    response = store.http.post("/v1/agents", content=f'{{"name": {bad}}}'.encode(),
                               headers={"Content-Type": "application/json"})
    assert response.status_code == 400 and "name" in response.json()["error"]
    service = list_service(provider)
    body = f'{{"serviceId": "{service}", "maxPriceCents": 400, "input": {{"x": {bad}}}, "message": {bad}}}'
    assert raw_post(consumer, "/v1/transactions", body.encode()).status_code == 400


@pytest.mark.parametrize("query", ["before=99999999999999999999999", "before=-5", "before=1_0", "before= 7",
                                   "limit=0", "limit=101", "limit=abc"])
def test_query_integers_are_checked(pair, query):
    consumer, _ = pair
    name, _, value = query.partition("=")
    response = consumer.get("/v1/wallets/me/ledger", **{name: value})
    assert response.status_code == 400 and name in response.json()["error"]
    response = consumer.get("/v1/services", offset="99999999999999999999999")
    assert response.status_code == 400 and "offset" in response.json()["error"]


def test_a_message_after_expiry_keeps_the_cancellation(store, pair):
    consumer, provider = pair
    tid = open_transaction(consumer, list_service(provider), 450, expiresInSeconds=10).json()["id"]
    store.clock.advance(seconds=11)
    refused = provider.negotiate(tid, "accept")
    assert refused.status_code == 409 and "expired" in refused.json()["error"]
    engine = create_engine(store.app.state.service.db.url)
    with engine.connect() as conn:  # straight from the table: nobody has read it since
        row = conn.execute(select(exchange_transactions.c.status, exchange_transactions.c.end_reason)
                           .where(exchange_transactions.c.id == tid)).one()
    assert (row.status, row.end_reason) == ("cancelled", "offer_expired")


def test_fields_are_checked_when_matching_at_once_and_input_is_required(pair):
    consumer, provider = pair
    service = list_service(provider, base=500, model="fixed")
    for extra, named in (({"expiresInSeconds": "abc"}, "expiresInSeconds"), ({"message": 7}, "message")):
        response = open_transaction(consumer, service, 500, **extra)
        assert response.status_code == 400 and named in response.json()["error"]
    missing = consumer.post("/v1/transactions", {"serviceId": service, "maxPriceCents": 500})
    assert missing.status_code == 400 and "input" in missing.json()["error"]
    assert consumer.wallet() == {"availableCents": 10_000, "heldCents": 0}


def test_registration_is_replayed_for_ten_minutes_only(store):
    key = {"Idempotency-Key": "f3a1c2d4-5b6e-4f70-8a9b-0c1d2e3f4a5b"}
    first = store.http.post("/v1/agents", json={"name": "a"}, headers=key)
    store.clock.advance(seconds=9 * 60)
    assert store.http.post("/v1/agents", json={"name": "a"}, headers=key).json() == first.json()
    store.clock.advance(seconds=2 * 60)
    late = store.http.post("/v1/agents", json={"name": "a"}, headers=key)
    assert late.status_code == 409 and "new key" in late.json()["error"] and "apiKey" not in late.text


def test_keys_are_pruned_after_a_day(store, pair):
    consumer, _ = pair
    consumer.post("/v1/wallets/me/deposit", {"amountCents": 5}, **{"Idempotency-Key": "old"})
    store.clock.advance(seconds=int(KEEP_FOR.total_seconds()) + 1)
    store.app.state.exchange.sweep()
    engine = create_engine(store.app.state.service.db.url)
    with engine.connect() as conn:
        assert conn.execute(select(idempotency_keys)).all() == []
    again = consumer.post("/v1/wallets/me/deposit", {"amountCents": 5}, **{"Idempotency-Key": "old"})
    assert "Idempotent-Replayed" not in again.headers and again.json()["availableCents"] == 10_010


def test_a_stalled_request_overtaken_by_a_retry_cannot_commit(store, pair):
    """After STALE_AFTER a retry takes the key over and runs; the stalled first request, should it
    wake, can neither store its answer nor forget the key (its effect rolls back)."""
    consumer, _ = pair
    exchange = store.app.state.exchange
    body = b'{"amountCents": 7}'
    fingerprint = request_hash("POST", "/v1/wallets/me/deposit", body)
    stalled, _ = exchange.idempotency.begin(consumer.id, "slow", fingerprint)
    store.clock.advance(seconds=int(STALE_AFTER.total_seconds()) + 1)
    retry = raw_post(consumer, "/v1/wallets/me/deposit", body, **{"Idempotency-Key": "slow"})
    assert retry.status_code == 200 and retry.json()["availableCents"] == 10_007
    with pytest.raises(Overtaken), exchange.db.write() as conn:
        ledger.deposit(conn, consumer.id, 7, store.clock())  # the stalled request's effect...
        exchange.idempotency.finish(conn, stalled, 200, {"late": True})  # ...rolled back with this
    exchange.idempotency.forget(stalled)  # a no-op: the key is the retry's now
    assert consumer.wallet()["availableCents"] == 10_007
    replay = raw_post(consumer, "/v1/wallets/me/deposit", body, **{"Idempotency-Key": "slow"})
    assert replay.headers["Idempotent-Replayed"] == "true" and replay.json() == retry.json()


def test_a_wallet_cannot_grow_past_its_ceiling(store, pair):
    consumer, _ = pair
    exchange = store.app.state.exchange
    with exchange.db.write() as conn:
        for _ in range(ledger.MAX_BALANCE_CENTS // ledger.MAX_AMOUNT_CENTS - 1):
            ledger.deposit(conn, consumer.id, ledger.MAX_AMOUNT_CENTS, store.clock())
    with pytest.raises(InvalidInput, match="at most"), exchange.db.write() as conn:
        ledger.deposit(conn, consumer.id, ledger.MAX_AMOUNT_CENTS, store.clock())
    response = consumer.post("/v1/wallets/me/deposit", {"amountCents": ledger.MAX_AMOUNT_CENTS})
    assert response.status_code == 400 and "at most" in response.json()["error"]
    total = consumer.wallet()["availableCents"]
    assert total == 10_000 + (ledger.MAX_BALANCE_CENTS // ledger.MAX_AMOUNT_CENTS - 1) * ledger.MAX_AMOUNT_CENTS


def test_opposite_captures_do_not_deadlock(make_store, db_url):
    """Two agents each provide a service to the other; both complete at once (PostgreSQL would
    deadlock on the wallets without a lock order)."""
    store = make_store(db_url=db_url)
    a, b = register(store.http, "a"), register(store.http, "b")
    a.deposit(1000)
    b.deposit(1000)
    def complete(party, tid: str, barrier: threading.Barrier, results: list[int]) -> None:
        with httpx.Client(base_url=store.base) as client:
            barrier.wait()
            results.append(client.post(f"/v1/transactions/{tid}/complete", json={}, headers=party.auth).status_code)

    for _ in range(5):
        ab = open_transaction(a, list_service(b, base=100, model="fixed"), 100).json()["id"]  # a pays b
        ba = open_transaction(b, list_service(a, base=100, model="fixed"), 100).json()["id"]  # b pays a
        barrier, results = threading.Barrier(2), []
        threads = [threading.Thread(target=complete, args=(b, ab, barrier, results)),
                   threading.Thread(target=complete, args=(a, ba, barrier, results))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results == [200, 200]
    assert a.wallet() == b.wallet() == {"availableCents": 1000, "heldCents": 0}



@pytest.mark.parametrize(("path", "name", "value"), [
    ("/v1/wallets/me/ledger", "before", 2**31), ("/v1/wallets/me/ledger", "before", 514_119_989_232),
    ("/v1/services", "offset", 2**62 + 1),
])
def test_paging_past_the_column_range_is_400_on_every_backend(make_store, db_url, path, name, value):
    """Found by the OpenAPI fuzzer: a ledger page "before" an id beyond PostgreSQL's integer was a
    500 there (and fine on SQLite). Every backend now answers 400 naming the parameter."""
    store = make_store(db_url=db_url)
    party = register(store.http, "pager")
    response = party.get(path, **{name: value})
    assert response.status_code == 400, response.text
    assert name in response.json()["error"]
    assert party.get(path, **{name: 5}).status_code == 200
