"""Races on the exchange's HTTP API, on SQLite and PostgreSQL: concurrent accepts of one offer,
an accept racing a withdraw, and two accepts competing for the same wallet. Each race has
exactly one winner and moves money exactly once."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from haggler.protocols.transactions.settings import ExchangeSettings

try:
    from tests.support.servers import FakeClock
except ImportError:  # pragma: no cover - rootdir-less invocation, as in tests/conftest.py
    from support.servers import FakeClock  # type: ignore[no-redef]

ROUNDS = 5
PRICE = 800


class Party:
    def __init__(self, store: Any, name: str) -> None:
        self.base = store.base
        response = store.http.post("/v1/agents", json={"name": name})
        assert response.status_code == 201, response.text
        self.id = response.json()["id"]
        self.headers = {"Authorization": f"Bearer {response.json()['apiKey']}"}
        self.http = store.http

    def post(self, path: str, body: dict[str, Any], client: httpx.Client | None = None) -> httpx.Response:
        return (client or self.http).post(path, json=body, headers=self.headers)

    def get(self, path: str) -> dict[str, Any]:
        response = self.http.get(path, headers=self.headers)
        assert response.status_code == 200, response.text
        return response.json()

    def wallet(self) -> dict[str, int]:
        return self.get("/v1/wallets/me")

    def holds(self, transaction_id: str | None = None) -> list[dict[str, Any]]:
        entries = self.get("/v1/wallets/me/ledger?limit=100")["entries"]
        return [entry for entry in entries if entry["kind"] == "fund_hold"
                and (transaction_id is None or entry["transactionId"] == transaction_id)]


@pytest.fixture
def market(make_store, db_url: str):
    store = make_store(db_url=db_url, clock=FakeClock(), exchange=ExchangeSettings(allow_deposits=True))
    consumer, provider = Party(store, "consumer"), Party(store, "provider")
    response = provider.post("/v1/services", {
        "name": "translate", "description": "one page", "basePriceCents": 1000, "priceModel": "negotiable",
        "sla": {"latencyMs": 100, "timeoutMs": 1000, "retries": 1}})
    assert response.status_code == 201, response.text
    return store, consumer, provider, response.json()["id"]


def _deposit(party: Party, amount: int) -> None:
    response = party.post("/v1/wallets/me/deposit", {"amountCents": amount})
    assert response.status_code == 200, response.text


def _countered(consumer: Party, provider: Party, service_id: str, price: int = PRICE) -> str:
    """A transaction in which the provider has countered at ``price``: the consumer's turn."""
    response = consumer.post("/v1/transactions", {"serviceId": service_id, "maxPriceCents": 1000,
                                                  "initialOfferCents": 500, "input": {"text": "hello"}})
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "negotiating"
    transaction_id = response.json()["id"]
    response = provider.post(f"/v1/transactions/{transaction_id}/negotiate",
                             {"type": "counter_offer", "terms": {"priceCents": price}})
    assert response.status_code == 200, response.text
    assert response.json()["turn"] == "consumer"
    return transaction_id


def _race(party: Party, calls: list[tuple[str, dict[str, Any]]]) -> list[httpx.Response]:
    """POST every (path, body) at once, each from its own client, released together by a barrier."""
    barrier = threading.Barrier(len(calls))
    clients = [httpx.Client(base_url=party.base, timeout=60) for _ in calls]

    def send(index: int) -> Callable[[], httpx.Response]:
        path, body = calls[index]
        barrier.wait()
        return party.post(path, body, clients[index])

    try:
        with ThreadPoolExecutor(max_workers=len(calls)) as pool:
            return list(pool.map(send, range(len(calls))))
    finally:
        for client in clients:
            client.close()


def test_concurrent_accepts_match_once_and_hold_once(market) -> None:
    _, consumer, provider, service_id = market
    _deposit(consumer, ROUNDS * PRICE)
    for round_number in range(1, ROUNDS + 1):
        transaction_id = _countered(consumer, provider, service_id)
        responses = _race(consumer, [(f"/v1/transactions/{transaction_id}/negotiate", {"type": "accept"})] * 8)
        winners = [r for r in responses if r.status_code == 200]
        assert len(winners) == 1, [(r.status_code, r.text) for r in responses]
        assert winners[0].json()["status"] == "matched"
        assert winners[0].json()["heldCents"] == PRICE
        assert all(400 <= r.status_code < 500 for r in responses if r is not winners[0]), \
            [(r.status_code, r.text) for r in responses]
        assert len(consumer.holds(transaction_id)) == 1
        assert consumer.wallet() == {"availableCents": (ROUNDS - round_number) * PRICE,
                                     "heldCents": round_number * PRICE}
        transaction = consumer.get(f"/v1/transactions/{transaction_id}")
        assert (transaction["status"], transaction["heldCents"], transaction["priceCents"]) == ("matched", PRICE, PRICE)


def test_accept_racing_withdraw_has_one_winner(market) -> None:
    _, consumer, provider, service_id = market
    _deposit(consumer, ROUNDS * PRICE)
    held = 0
    for _ in range(ROUNDS):
        transaction_id = _countered(consumer, provider, service_id)
        path = f"/v1/transactions/{transaction_id}/negotiate"
        accepted, withdrawn = _race(consumer, [(path, {"type": "accept"}), (path, {"type": "withdraw"})])
        assert sorted([accepted.status_code, withdrawn.status_code]) in ([200, 400], [200, 409]), \
            (accepted.text, withdrawn.text)
        transaction = consumer.get(f"/v1/transactions/{transaction_id}")
        if accepted.status_code == 200:
            held += PRICE
            assert accepted.json()["status"] == "matched"
            assert (transaction["status"], transaction["heldCents"]) == ("matched", PRICE)
            assert len(consumer.holds(transaction_id)) == 1
        else:
            assert withdrawn.json()["status"] == "cancelled"
            assert (transaction["status"], transaction["endReason"], transaction["heldCents"]) == \
                ("cancelled", "withdrawn", 0)
            assert consumer.holds(transaction_id) == []
        assert consumer.wallet() == {"availableCents": ROUNDS * PRICE - held, "heldCents": held}


def test_accepts_competing_for_one_wallet_match_only_what_it_covers(market) -> None:
    _, consumer, provider, service_id = market
    held = 0
    for _ in range(ROUNDS):
        # Top up to one and a half prices: enough for one of the two, never both.
        _deposit(consumer, PRICE + PRICE // 2 - consumer.wallet()["availableCents"])
        first, second = (_countered(consumer, provider, service_id) for _ in range(2))
        before = consumer.wallet()
        responses = _race(consumer, [(f"/v1/transactions/{first}/negotiate", {"type": "accept"}),
                                     (f"/v1/transactions/{second}/negotiate", {"type": "accept"})])
        assert sorted(r.status_code for r in responses) == [200, 402], [r.text for r in responses]
        won, lost = (first, second) if responses[0].status_code == 200 else (second, first)
        held += PRICE
        assert consumer.get(f"/v1/transactions/{won}")["status"] == "matched"
        loser = consumer.get(f"/v1/transactions/{lost}")
        # Refused and unchanged: still negotiating, still the consumer's turn, no accept recorded.
        assert (loser["status"], loser["heldCents"], loser["turn"]) == ("negotiating", 0, "consumer")
        assert [m["type"] for m in consumer.get(f"/v1/transactions/{lost}/negotiations")["messages"]] == \
            ["initial_offer", "counter_offer"]
        assert consumer.holds(lost) == [] and len(consumer.holds(won)) == 1
        wallet = consumer.wallet()
        assert wallet == {"availableCents": before["availableCents"] - PRICE, "heldCents": held}
        assert wallet["availableCents"] >= 0
        # Withdraw the loser so the next round starts from a clean slate.
        response = consumer.post(f"/v1/transactions/{lost}/negotiate", {"type": "withdraw"})
        assert response.status_code == 200, response.text
