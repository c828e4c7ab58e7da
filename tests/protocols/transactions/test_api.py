"""The transactions exchange over real HTTP: each rule of spec 004 ("Negotiation") and of the
exchange around it — authentication, wallets, services, transactions, holds, idempotency."""

from __future__ import annotations

import pytest

from haggler.protocols.transactions.settings import ExchangeSettings
from tests.protocols.transactions.support import SLA, Party, list_service, open_transaction, register


@pytest.fixture
def parties(store) -> tuple[Party, Party]:
    consumer, provider = register(store.http, "consumer"), register(store.http, "provider")
    consumer.deposit(10_000)
    return consumer, provider


@pytest.fixture
def negotiating(parties) -> tuple[Party, Party, str]:
    consumer, provider = parties
    service = list_service(provider, base=500)
    created = open_transaction(consumer, service, 450, initialOfferCents=400)
    assert created.status_code == 201, created.text
    return consumer, provider, created.json()["id"]


def error_of(response, status: int, *words: str) -> str:
    assert response.status_code == status, response.text
    message = response.json()["error"]
    for word in words:
        assert word in message, (word, message)
    return message


# -- agents and authentication ---------------------------------------------------------------------

def test_registration_shows_the_key_once_and_stores_only_its_hash(store):
    party = register(store.http, "alice")
    assert party.api_key.startswith("hgx_") and len(party.api_key) >= 40
    assert party.wallet() == {"availableCents": 0, "heldCents": 0}
    import sqlite3
    path = store.app.state.service.db.url.removeprefix("sqlite:///")
    dump = "\n".join(sqlite3.connect(path).iterdump())
    assert party.api_key not in dump and party.api_key[4:] not in dump


def test_calls_without_a_valid_key_are_401(store):
    for headers in ({}, {"Authorization": "Bearer nope"}, {"Authorization": "Basic abc"}):
        error_of(store.http.get("/v1/wallets/me", headers=headers), 401)
        error_of(store.http.post("/v1/services", json={}, headers=headers), 401)


def test_a_non_party_gets_403_on_every_transaction_route(store, negotiating):
    _, _, transaction_id = negotiating
    stranger = register(store.http, "stranger")
    error_of(stranger.get(f"/v1/transactions/{transaction_id}"), 403, "not a party")
    error_of(stranger.get(f"/v1/transactions/{transaction_id}/negotiations"), 403)
    for action, body in (("negotiate", {"type": "reject"}), ("complete", {}), ("cancel", {})):
        error_of(stranger.post(f"/v1/transactions/{transaction_id}/{action}", body), 403)
    error_of(stranger.get("/v1/transactions/txn_unknown"), 404)


# -- wallets ---------------------------------------------------------------------------------------

def test_deposits_must_be_positive_whole_cents(parties):
    consumer, _ = parties
    for bad in (0, -5, 1.5, "100", None, True):
        error_of(consumer.post("/v1/wallets/me/deposit", {"amountCents": bad}), 400, "amountCents")
    assert consumer.wallet() == {"availableCents": 10_000, "heldCents": 0}


@pytest.mark.parametrize("settings", [ExchangeSettings(), ExchangeSettings(allow_deposits=False)],
                         ids=["default", "explicitly-off"])
def test_deposits_are_off_unless_the_operator_asks_for_the_sandbox(make_store, settings):
    store = make_store(exchange=settings)  # not this folder's sandbox default (conftest.py)
    party = register(store.http, "p")
    error_of(party.post("/v1/wallets/me/deposit", {"amountCents": 100}), 403,
             "deposits are switched off on this exchange: they are a sandbox feature, which haggler serve "
             "--sandbox-deposits turns on")
    assert party.wallet()["availableCents"] == 0


# -- services --------------------------------------------------------------------------------------

def test_services_are_listed_and_read_back(parties):
    _, provider = parties
    service_id = list_service(provider, base=750, model="fixed")
    one = provider.get(f"/v1/services/{service_id}").json()
    assert one["basePriceCents"] == 750 and one["priceModel"] == "fixed" and one["sla"] == SLA
    assert one["providerId"] == provider.id
    assert service_id in [s["id"] for s in provider.get("/v1/services").json()["services"]]
    error_of(provider.get("/v1/services/svc_nope"), 404)


@pytest.mark.parametrize("field,value,named", [
    ("basePriceCents", 0, "basePriceCents"), ("basePriceCents", 9.99, "basePriceCents"),
    ("priceModel", "auction", "priceModel"), ("sla", {"latencyMs": 1}, "sla.timeoutMs"),
    ("sla", {**SLA, "uptime": 99}, "uptime"), ("name", "", "name"), ("colour", "red", "colour"),
])
def test_bad_service_fields_are_400_naming_the_field(parties, field, value, named):
    _, provider = parties
    body = {"name": "x", "description": "", "basePriceCents": 100, "priceModel": "fixed", "sla": SLA, field: value}
    error_of(provider.post("/v1/services", body), 400, named)


# -- creating transactions ("How negotiation works") ------------------------------------------------

def test_negotiable_service_enters_negotiating_with_the_consumers_initial_offer(parties):
    consumer, provider = parties
    service = list_service(provider, base=500, model="negotiable")
    created = open_transaction(consumer, service, 500).json()  # max == base, but the model is negotiable
    assert created["status"] == "negotiating" and created["turn"] == "provider" and created["round"] == 0
    assert created["offer"]["by"] == "consumer" and created["offer"]["terms"] == {"priceCents": 500}
    messages = consumer.get(f"/v1/transactions/{created['id']}/negotiations").json()["messages"]
    assert [(m["round"], m["sender"], m["type"]) for m in messages] == [(0, "consumer", "initial_offer")]


def test_fixed_service_negotiates_when_max_differs_from_base(parties):
    consumer, provider = parties
    service = list_service(provider, base=500, model="fixed")
    assert open_transaction(consumer, service, 400).json()["status"] == "negotiating"
    assert open_transaction(consumer, service, 600).json()["status"] == "negotiating"


def test_fixed_service_at_base_price_is_matched_at_once_with_a_hold(parties):
    consumer, provider = parties
    service = list_service(provider, base=500, model="fixed")
    created = open_transaction(consumer, service, 500).json()
    assert created["status"] == "matched" and created["priceCents"] == 500 and created["heldCents"] == 500
    assert created["sla"] == SLA
    assert consumer.wallet() == {"availableCents": 9_500, "heldCents": 500}


def test_matching_at_once_without_the_money_is_402_and_creates_nothing(store, parties):
    _, provider = parties
    poor = register(store.http, "poor")
    poor.deposit(499)
    service = list_service(provider, base=500, model="fixed")
    error_of(open_transaction(poor, service, 500), 402, "insufficient funds")
    assert poor.wallet() == {"availableCents": 499, "heldCents": 0}
    assert poor.get("/v1/wallets/me/ledger").json()["entries"][0]["kind"] == "deposit"


def test_transaction_input_errors(parties):
    consumer, provider = parties
    service = list_service(provider)
    error_of(open_transaction(consumer, "svc_nope", 100), 404, "svc_nope")
    error_of(open_transaction(consumer, service, 0), 400, "maxPriceCents")
    error_of(open_transaction(consumer, service, 100, initialOfferCents=101), 400, "initialOfferCents")
    error_of(open_transaction(provider, service, 100), 400, "own service")
    error_of(open_transaction(consumer, service, 100, expiresInSeconds=0), 400, "expiresInSeconds")


# -- turn enforcement -------------------------------------------------------------------------------

def test_turn_enforcement_out_of_turn_is_400_and_the_turn_follows_the_last_sender(negotiating):
    """Spec, "Turn enforcement": only the party whose turn it is can send; out of turn is 400."""
    consumer, provider, tid = negotiating
    for kind, price in (("counter_offer", 420), ("accept", None), ("reject", None), ("withdraw", None)):
        error_of(consumer.negotiate(tid, kind, price), 400, "not your turn")
    assert provider.negotiate(tid, "counter_offer", 480).status_code == 200
    assert consumer.get(f"/v1/transactions/{tid}").json()["turn"] == "consumer"
    error_of(provider.negotiate(tid, "counter_offer", 470), 400, "not your turn")
    assert consumer.negotiate(tid, "counter_offer", 430).json()["turn"] == "provider"


# -- round cap --------------------------------------------------------------------------------------

def test_round_cap_ten_rounds_without_agreement_cancel(negotiating):
    """Spec, "Round cap": capped at 10 rounds; no agreement after 10 rounds cancels the transaction."""
    consumer, provider, tid = negotiating
    sides = [provider, consumer]
    for round_number in range(1, 10):
        response = sides[(round_number - 1) % 2].negotiate(tid, "counter_offer", 440 - round_number)
        assert response.json()["status"] == "negotiating" and response.json()["round"] == round_number
    last = sides[1].negotiate(tid, "counter_offer", 420)  # round 10, not an acceptance
    assert last.status_code == 200
    body = last.json()
    assert body["status"] == "cancelled" and body["endReason"] == "round_cap" and body["round"] == 10
    error_of(provider.negotiate(tid, "accept"), 409, "cancelled")


def test_round_ten_may_still_be_an_acceptance(negotiating):
    consumer, provider, tid = negotiating
    sides = [provider, consumer]
    for round_number in range(1, 10):
        sides[(round_number - 1) % 2].negotiate(tid, "counter_offer", 440)
    accepted = consumer.negotiate(tid, "accept")  # round 10
    assert accepted.json()["status"] == "matched" and accepted.json()["round"] == 10


# -- offer expiry -----------------------------------------------------------------------------------

@pytest.mark.parametrize("seconds", [0, 3601, -1, 1.5, "60"])
def test_offer_expiry_outside_1_to_3600_is_400(negotiating, seconds):
    _, provider, tid = negotiating
    error_of(provider.negotiate(tid, "counter_offer", 480, expiresInSeconds=seconds), 400, "expiresInSeconds")


def test_offer_expiry_defaults_to_300_seconds_and_cancels_when_read(store, negotiating):
    """Spec, "Offer expiry": default 300; unanswered past expiry, the transaction is cancelled."""
    consumer, provider, tid = negotiating
    store.clock.advance(seconds=299)
    assert consumer.get(f"/v1/transactions/{tid}").json()["status"] == "negotiating"
    store.clock.advance(seconds=1)
    body = provider.get(f"/v1/transactions/{tid}").json()
    assert body["status"] == "cancelled" and body["endReason"] == "offer_expired" and body["turn"] is None
    error_of(provider.negotiate(tid, "counter_offer", 480), 409)


def test_a_message_after_expiry_is_refused_and_cancels(store, negotiating):
    _, provider, tid = negotiating
    store.clock.advance(seconds=300)
    error_of(provider.negotiate(tid, "counter_offer", 480), 409, "expired")
    assert provider.get(f"/v1/transactions/{tid}").json()["endReason"] == "offer_expired"


def test_each_offer_carries_its_own_expiry_and_the_sweep_enforces_it(store, negotiating):
    consumer, provider, tid = negotiating
    provider.negotiate(tid, "counter_offer", 480, expiresInSeconds=3600)
    store.clock.advance(seconds=3599)
    assert store.app.state.exchange.sweep() == 0
    store.clock.advance(seconds=1)
    assert store.app.state.exchange.sweep() == 1
    assert consumer.get(f"/v1/transactions/{tid}").json()["endReason"] == "offer_expired"
    assert store.app.state.exchange.sweep() == 0


# -- accept ----------------------------------------------------------------------------------------

def test_accept_agrees_to_the_most_recent_offer_and_holds_it(negotiating):
    """Spec, "Accept behavior": the most recent offer's price; matched; a fund hold is created."""
    consumer, provider, tid = negotiating
    provider.negotiate(tid, "counter_offer", 450, message="Can do it for 450 cents", expiresInSeconds=600)
    matched = consumer.negotiate(tid, "accept").json()
    assert matched["status"] == "matched" and matched["priceCents"] == 450 and matched["heldCents"] == 450
    assert consumer.wallet() == {"availableCents": 9_550, "heldCents": 450}
    entry = consumer.get("/v1/wallets/me/ledger").json()["entries"][0]
    assert entry["kind"] == "fund_hold" and entry["heldDeltaCents"] == 450 and entry["transactionId"] == tid


def test_an_accept_carrying_a_price_or_terms_is_400(negotiating):
    """Spec, "Accept behavior": the accept message itself cannot include a new price."""
    consumer, provider, tid = negotiating
    provider.negotiate(tid, "counter_offer", 450)
    error_of(consumer.negotiate(tid, "accept", 400), 400, "cannot carry")
    error_of(consumer.post(f"/v1/transactions/{tid}/negotiate", {"type": "accept", "terms": {}}), 400)
    assert consumer.get(f"/v1/transactions/{tid}").json()["status"] == "negotiating"


def test_provider_accepts_the_consumers_offer(negotiating):
    consumer, provider, tid = negotiating
    matched = provider.negotiate(tid, "accept").json()
    assert matched["status"] == "matched" and matched["priceCents"] == 400
    assert consumer.wallet()["heldCents"] == 400


def test_accept_without_the_money_is_402_and_nothing_changes(store, parties):
    _, provider = parties
    poor = register(store.http, "poor")
    poor.deposit(300)
    tid = open_transaction(poor, list_service(provider), 450, initialOfferCents=400).json()["id"]
    provider.negotiate(tid, "counter_offer", 420)
    before = poor.get(f"/v1/transactions/{tid}/negotiations").json()
    error_of(poor.negotiate(tid, "accept"), 402, "insufficient funds", "420", "300")
    after = poor.get(f"/v1/transactions/{tid}").json()
    assert after["status"] == "negotiating" and after["turn"] == "consumer" and after["heldCents"] == 0
    assert poor.get(f"/v1/transactions/{tid}/negotiations").json() == before
    assert poor.wallet() == {"availableCents": 300, "heldCents": 0}
    poor.deposit(200)  # ...and once funded, the same accept goes through
    assert poor.negotiate(tid, "accept").json()["status"] == "matched"


def test_the_consumer_never_offers_or_accepts_above_its_max_price(negotiating):
    consumer, provider, tid = negotiating
    provider.negotiate(tid, "counter_offer", 500)
    error_of(consumer.negotiate(tid, "accept"), 400, "maxPriceCents")
    error_of(consumer.negotiate(tid, "counter_offer", 451), 400, "maxPriceCents")
    assert consumer.wallet()["heldCents"] == 0


def test_accepting_before_any_counter_offer_by_the_consumer_is_refused(negotiating):
    consumer, provider, tid = negotiating
    provider.negotiate(tid, "counter_offer", 450)
    consumer.negotiate(tid, "counter_offer", 420)
    error_of(consumer.negotiate(tid, "accept"), 400, "not your turn")


# -- reject, withdraw, terminal --------------------------------------------------------------------

@pytest.mark.parametrize("kind,reason", [("reject", "rejected"), ("withdraw", "withdrawn")])
def test_reject_and_withdraw_end_the_negotiation(negotiating, kind, reason):
    consumer, provider, tid = negotiating
    ended = provider.negotiate(tid, kind).json()
    assert ended["status"] == "cancelled" and ended["endReason"] == reason and ended["heldCents"] == 0
    for party, body in ((consumer, {"type": "counter_offer", "terms": {"priceCents": 420}}),
                        (consumer, {"type": "accept"}), (provider, {"type": "withdraw"})):
        error_of(party.post(f"/v1/transactions/{tid}/negotiate", body), 409, "cancelled")


def test_unknown_message_type_and_fields_are_400(negotiating):
    _, provider, tid = negotiating
    error_of(provider.post(f"/v1/transactions/{tid}/negotiate", {"type": "initial_offer",
                                                                  "terms": {"priceCents": 1}}), 400, "type")
    error_of(provider.post(f"/v1/transactions/{tid}/negotiate", {"type": "counter_offer"}), 400, "terms")
    error_of(provider.post(f"/v1/transactions/{tid}/negotiate", {"type": "counter_offer",
                                                                  "terms": {"price": 1}}), 400, "price")
    error_of(provider.http.post(f"/v1/transactions/{tid}/negotiate", content=b"not json", headers=provider.auth), 400)


# -- negotiable terms -------------------------------------------------------------------------------

def test_agreed_sla_and_scope_modifications_are_stored_and_returned(negotiating):
    """Spec, "Negotiable terms": price, sla and scopeModifications."""
    consumer, provider, tid = negotiating
    scope = {"pages": 5, "format": "bullets"}
    provider.post(f"/v1/transactions/{tid}/negotiate", {
        "type": "counter_offer", "terms": {"priceCents": 440, "sla": {"latencyMs": 1000}, "scopeModifications": scope}})
    matched = consumer.negotiate(tid, "accept").json()
    assert matched["priceCents"] == 440 and matched["scopeModifications"] == scope
    assert matched["sla"] == {**SLA, "latencyMs": 1000}
    assert consumer.get(f"/v1/transactions/{tid}").json()["sla"]["latencyMs"] == 1000
    error_of(provider.post(f"/v1/transactions/{tid}/negotiate", {"type": "reject"}), 409)


# -- settling ---------------------------------------------------------------------------------------

def test_completion_captures_the_hold_to_the_provider(negotiating):
    consumer, provider, tid = negotiating
    provider.negotiate(tid, "accept")
    error_of(consumer.post(f"/v1/transactions/{tid}/complete", {}), 403, "provider")
    done = provider.post(f"/v1/transactions/{tid}/complete", {"output": {"summary": "ok"}}).json()
    assert done["status"] == "completed" and done["heldCents"] == 0 and done["output"] == {"summary": "ok"}
    assert consumer.wallet() == {"availableCents": 9_600, "heldCents": 0}
    assert provider.wallet() == {"availableCents": 400, "heldCents": 0}
    error_of(provider.post(f"/v1/transactions/{tid}/complete", {}), 409)
    error_of(consumer.post(f"/v1/transactions/{tid}/cancel", {}), 409)


@pytest.mark.parametrize("who", ["consumer", "provider"])
def test_cancelling_a_matched_transaction_releases_the_hold(negotiating, who):
    consumer, provider, tid = negotiating
    provider.negotiate(tid, "accept")
    party = consumer if who == "consumer" else provider
    cancelled = party.post(f"/v1/transactions/{tid}/cancel", {}).json()
    assert cancelled["status"] == "cancelled" and cancelled["endReason"] == "cancelled"
    assert consumer.wallet() == {"availableCents": 10_000, "heldCents": 0}
    kinds = [e["kind"] for e in consumer.get("/v1/wallets/me/ledger").json()["entries"]]
    assert kinds == ["release", "fund_hold", "deposit"]
    error_of(provider.post(f"/v1/transactions/{tid}/complete", {}), 409)


def test_a_negotiating_transaction_is_ended_by_withdraw_not_cancel(negotiating):
    consumer, _, tid = negotiating
    error_of(consumer.post(f"/v1/transactions/{tid}/cancel", {}), 409, "withdraw")


# -- idempotency ------------------------------------------------------------------------------------

def test_same_key_same_body_replays_the_first_response(parties):
    consumer, _ = parties
    first = consumer.post("/v1/wallets/me/deposit", {"amountCents": 5}, **{"Idempotency-Key": "k1"})
    again = consumer.post("/v1/wallets/me/deposit", {"amountCents": 5}, **{"Idempotency-Key": "k1"})
    assert first.json() == again.json() == {"availableCents": 10_005, "heldCents": 0}
    assert again.headers["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first.headers
    assert consumer.wallet()["availableCents"] == 10_005


def test_same_key_different_body_is_422(parties):
    consumer, _ = parties
    consumer.post("/v1/wallets/me/deposit", {"amountCents": 5}, **{"Idempotency-Key": "k2"})
    error_of(consumer.post("/v1/wallets/me/deposit", {"amountCents": 6}, **{"Idempotency-Key": "k2"}), 422)
    error_of(consumer.post("/v1/services", {"amountCents": 5}, **{"Idempotency-Key": "k2"}), 422)
    assert consumer.wallet()["availableCents"] == 10_005


def test_keys_are_per_agent(parties):
    consumer, provider = parties
    consumer.post("/v1/wallets/me/deposit", {"amountCents": 5}, **{"Idempotency-Key": "shared"})
    provider.post("/v1/wallets/me/deposit", {"amountCents": 5}, **{"Idempotency-Key": "shared"})
    assert provider.wallet()["availableCents"] == 5


def test_a_key_still_in_flight_is_409_with_retry_after(store, parties):
    consumer, _ = parties
    from haggler.protocols.transactions.idempotency import request_hash
    idempotency = store.app.state.exchange.idempotency
    body = b'{"amountCents": 7}'
    idempotency.begin(consumer.id, "slow", request_hash("POST", "/v1/wallets/me/deposit", body))
    busy = consumer.http.post("/v1/wallets/me/deposit", content=body,
                              headers={**consumer.auth, "Idempotency-Key": "slow", "Content-Type": "application/json"})
    error_of(busy, 409, "still being processed")
    assert int(busy.headers["Retry-After"]) >= 1
    assert consumer.wallet()["availableCents"] == 10_000


def test_a_refusal_is_replayed_too(negotiating):
    consumer, provider, tid = negotiating
    provider.negotiate(tid, "counter_offer", 450)
    key = {"Idempotency-Key": "acc"}
    first = consumer.post(f"/v1/transactions/{tid}/negotiate", {"type": "accept", "terms": {"priceCents": 1}}, **key)
    again = consumer.post(f"/v1/transactions/{tid}/negotiate", {"type": "accept", "terms": {"priceCents": 1}}, **key)
    assert first.status_code == again.status_code == 400 and first.json() == again.json()
    assert again.headers["Idempotent-Replayed"] == "true"


def test_an_accept_retried_with_its_key_holds_once(negotiating):
    consumer, provider, tid = negotiating
    provider.negotiate(tid, "counter_offer", 450)
    key = {"Idempotency-Key": "accept-1"}
    first = consumer.post(f"/v1/transactions/{tid}/negotiate", {"type": "accept"}, **key)
    again = consumer.post(f"/v1/transactions/{tid}/negotiate", {"type": "accept"}, **key)
    assert first.json() == again.json() and again.json()["status"] == "matched"
    assert consumer.wallet()["heldCents"] == 450


def test_registration_keys_must_be_long_and_replay_the_same_agent(store):
    error_of(store.http.post("/v1/agents", json={"name": "a"}, headers={"Idempotency-Key": "short"}), 400, "32")
    key = {"Idempotency-Key": "r" * 40}
    first = store.http.post("/v1/agents", json={"name": "a"}, headers=key)
    again = store.http.post("/v1/agents", json={"name": "a"}, headers=key)
    assert first.status_code == again.status_code == 201 and first.json() == again.json()
    import sqlite3
    path = store.app.state.service.db.url.removeprefix("sqlite:///")
    dump = "\n".join(sqlite3.connect(path).iterdump())
    assert first.json()["apiKey"] not in dump and "r" * 40 not in dump  # sealed response, hashed key


def test_the_stores_background_sweep_cancels_expired_offers_unread(make_store):
    """Nobody reads the transaction: the store's own sweep still cancels it once the offer expired."""
    import time

    from sqlalchemy import create_engine, select

    from haggler.storage.schema import exchange_transactions

    store = make_store(sweep_interval_seconds=0.05)
    consumer, provider = register(store.http, "c"), register(store.http, "p")
    tid = open_transaction(consumer, list_service(provider), 450, expiresInSeconds=60).json()["id"]
    engine = create_engine(store.app.state.service.db.url)

    def status() -> tuple[str, str | None]:
        with engine.connect() as conn:
            row = conn.execute(select(exchange_transactions.c.status, exchange_transactions.c.end_reason)
                               .where(exchange_transactions.c.id == tid)).one()
        return row.status, row.end_reason

    time.sleep(0.3)
    assert status() == ("negotiating", None)
    store.clock.advance(seconds=60)
    deadline = time.monotonic() + 60  # generous: a loaded machine is slow, not wrong
    while status()[0] == "negotiating" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert status() == ("cancelled", "offer_expired")
