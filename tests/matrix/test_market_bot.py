"""The market over Matrix (issue 32; spec 003, Phase 2 "Agents can post JSON listings to
#market:localhost"): a market bot on a real Synapse serving the same market, database and checks
as the HTTP API, with agents that are real Matrix clients.

What is checked here: a listing sent over Matrix is the market's (visible over HTTP) and its
floor never stays in a room; refusals come back in-thread with the API's own codes and reach the
audit log; a message from a Matrix user other than the one its agent is bound to is refused;
two Matrix agents negotiate in a room with the bot and end with a deal both signed, which the bot
posts to that room and the market room; sealed bids go to the bot alone."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from haggler.matrix import wire
from haggler.matrix.homeserver import LocalSynapse
from haggler.protocols.market.client import MarketClient, MarketError
from haggler.protocols.market.offline_check import check_deal
from haggler.storage.schema import market_agents, market_audit, market_deals, matrix_events
from haggler.trust.messages import sign_message
from tests.support.market_matrix import Agents, BotThread

pytestmark = pytest.mark.slow

SWITCH = {"category": "electronics", "subcategory": "gaming_console", "name": "nintendo_switch", "condition": "good"}


@pytest.fixture
def db_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/market.db"


def seller_on(agents: Agents, store, *, floor: int = 15000) -> MarketClient:
    seller = agents.agent(clock=store.clock)
    seller.register()
    seller.file_mandate({"minAcceptablePrice": floor})
    return seller


def buyer_on(agents: Agents, store, *, max_spend: int = 20000) -> MarketClient:
    buyer = agents.agent(clock=store.clock)
    buyer.register()
    buyer.file_mandate({"maxSpend": max_spend})
    return buyer


def room_messages(homeserver: LocalSynapse, bot: BotThread, room_id: str) -> list[dict[str, Any]]:
    """Every message event of a room as the bot can read it (its contents, redacted or not)."""
    response = httpx.get(f"{homeserver.url}/_matrix/client/v3/rooms/{room_id}/messages",
                         params={"dir": "b", "limit": 500}, timeout=10,
                         headers={"Authorization": f"Bearer {bot.account.access_token}"})
    response.raise_for_status()
    return [event for event in response.json()["chunk"] if event["type"] == "m.room.message"]


def eventually(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


def test_a_listing_sent_over_matrix_is_the_markets_and_its_floor_stays_out_of_every_room(
        store, bot: BotThread, agents: Agents, synapse: LocalSynapse) -> None:
    seller = seller_on(agents, store)
    listing = seller.post_listing(SWITCH, ask=18000, floor=15000)
    listing_id = listing["listingId"]

    public = store.http.get(f"/market/listings/{listing_id}").json()
    assert public["seller"]["agentId"] == seller.id and public["pricing"]["askPrice"] == 180
    with bot.database.read() as conn:
        bound = conn.execute(select(market_agents.c.matrix_id).where(market_agents.c.id == seller.id)).scalar()
    assert bound == seller.session.user_id  # bound to the user that registered it

    announced = eventually(lambda: [e for e in room_messages(synapse, bot, bot.market_room)
                                    if (wire.uncarry(e["content"].get(f"{wire.CONTENT_KEY}.listing")) or {})
                                    .get("listingId")
                                    == listing_id])
    assert announced, "the market room never got the listing's public view"
    room_text = json.dumps(room_messages(synapse, bot, bot.market_room))
    assert "minAcceptablePrice" not in room_text and "minPrice" not in room_text


def test_a_refusal_comes_back_in_thread_with_the_apis_code_and_reaches_the_audit_log(
        store, bot: BotThread, agents: Agents) -> None:
    seller = seller_on(agents, store, floor=15000)
    with pytest.raises(MarketError) as refused:
        seller.post_listing(SWITCH, ask=14000, floor=15000)  # the ask is below the owner's floor
    assert refused.value.status == 403
    assert refused.value.body["error"] == "mandate_violation"
    assert refused.value.body["constraint"] == "minAcceptablePrice"
    with bot.database.read() as conn:
        logged = conn.execute(select(market_audit.c.event, market_audit.c.detail)
                              .where(market_audit.c.agent_id == seller.id)).all()
    assert [(event, json.loads(detail)["constraint"]) for event, detail in logged] == \
        [("mandate_violation", "minAcceptablePrice")]

    bad = {"type": "listing", "version": "0.1.0", "listingId": "lst_bad", "timestamp": seller.now(),
           "seller": {"agentId": seller.id}, "item": {**SWITCH, "condition": "mint"},
           "pricing": {"askPrice": 180, "currency": "EUR", "negotiable": True}}
    with pytest.raises(MarketError) as invalid:
        seller.call("POST", "/market/listings", bad, sign=True)
    assert invalid.value.status == 422 and invalid.value.body["path"] == "/item/condition"


def test_a_message_from_another_matrix_user_than_its_agents_is_refused(store, bot: BotThread, agents: Agents) -> None:
    seller = seller_on(agents, store)
    impostor = agents.agent(seller.id, clock=store.clock)  # another Matrix user, holding the seller's keys
    impostor.key, impostor.owner = seller.key, seller.owner
    with pytest.raises(MarketError) as refused:
        impostor.post_listing(SWITCH, ask=18000, floor=15000)
    assert refused.value.status == 403 and refused.value.body["error"] == "matrix_sender_mismatch"
    assert store.http.get("/market/listings").json()["listings"] == []
    # The seller's owner finds the attempt in its audit log, over HTTP, naming who tried.
    entries = store.http.get("/market/audit", headers=seller.auth).json()["entries"]
    assert [(e["event"], e["detail"]["action"], e["detail"]["sender"], e["detail"]["claimed"]) for e in entries] == \
        [("matrix_sender_mismatch", "listing", impostor.session.user_id, seller.session.user_id)]
    assert store.http.get("/market/audit", headers=bystander_auth(store)).json()["entries"] == []


def test_a_message_carrying_another_matrix_id_is_refused_and_audited(store, bot: BotThread, agents: Agents) -> None:
    """The ``matrixId`` a message carries is the event's sender, or the message is refused: the
    impostor is the seller's own agent here (bound to it), claiming to speak as someone else."""
    seller = seller_on(agents, store)
    listing = {"type": "listing", "version": "0.1.0", "listingId": "lst_claimed", "timestamp": seller.now(),
               "seller": {"agentId": seller.id, "matrixId": "@someone_else:localhost"}, "item": SWITCH,
               "pricing": {"askPrice": 180, "currency": "EUR", "negotiable": True}}
    with pytest.raises(MarketError) as refused:
        seller.call("POST", "/market/listings", listing, sign=True)
    assert refused.value.status == 403 and refused.value.body["error"] == "matrix_sender_mismatch"
    with bot.database.read() as conn:
        logged = conn.execute(select(market_audit.c.agent_id, market_audit.c.event, market_audit.c.detail)).all()
    assert [(agent, event, json.loads(detail)["claimed"]) for agent, event, detail in logged] == \
        [(seller.id, "matrix_sender_mismatch", "@someone_else:localhost")]


def bystander_auth(store) -> dict[str, str]:
    """The token of a fresh agent registered over HTTP: one who may read only its own audit log."""
    client = MarketClient(store.http, "bystander_1", clock=store.clock)
    client.register()
    return client.auth


def test_two_matrix_agents_negotiate_in_a_room_with_the_bot_and_both_sign_the_deal(
        store, bot: BotThread, agents: Agents, synapse: LocalSynapse) -> None:
    seller = seller_on(agents, store, floor=15000)
    buyer = buyer_on(agents, store, max_spend=20000)
    listing_id = seller.post_listing(SWITCH, ask=18000, floor=15000)["listingId"]
    request_id = buyer.contact(listing_id, "natural_language")
    room = buyer.session.wait(lambda: buyer.session.negotiations.get(request_id), 20)
    assert room and room == seller.session.wait(lambda: seller.session.negotiations.get(request_id), 20)
    seller.agree(request_id, "natural_language")
    buyer.offer(request_id, "buyer", price=16000)
    answer = seller.offer(request_id, "seller", action="accept")
    deal_id = answer["dealId"]
    buyer.sign_deal(deal_id, "buyer")
    seller.sign_deal(deal_id, "seller")

    with bot.database.read() as conn:
        status = conn.execute(select(market_deals.c.status).where(market_deals.c.id == deal_id)).scalar()
    assert status == "confirmed"
    for where in (room, bot.market_room):
        posted = eventually(lambda: [wire.uncarry(e["content"][f"{wire.CONTENT_KEY}.deal"])
                                     for e in room_messages(synapse, bot, where)
                                     if f"{wire.CONTENT_KEY}.deal" in e["content"]])
        assert len(posted) == 1, where
        assert check_deal(posted[0]).valid and posted[0]["deal"]["finalPrice"] == 160
    offers_in_room = [e for e in room_messages(synapse, bot, room)
                      if (wire.uncarry(e["content"].get(wire.CONTENT_KEY)) or {}).get("type") == "offer"]
    assert {e["sender"] for e in offers_in_room} == {buyer.session.user_id, seller.session.user_id}


def test_a_sealed_bid_sent_where_the_other_side_reads_it_is_redacted_and_refused(
        store, bot: BotThread, agents: Agents, synapse: LocalSynapse) -> None:
    seller = seller_on(agents, store, floor=15000)
    buyer = buyer_on(agents, store, max_spend=20000)
    listing_id = seller.post_listing(SWITCH, ask=18000, floor=15000)["listingId"]
    request_id = buyer.contact(listing_id, "sealed_bid")
    room = buyer.session.wait(lambda: buyer.session.negotiations.get(request_id), 20)
    seller.agree(request_id, "sealed_bid")
    leaked = sign_message(buyer.key, {"type": "sealed_bid", "version": "0.1.0", "timestamp": buyer.now(),
                                      "requestId": request_id, "party": "buyer", "maxPrice": 190})
    event_id = buyer.session.send(room, wire.market_content(leaked, "my bid"), "leak-1")
    answer = buyer.session.wait(lambda: buyer.session.answers.get(event_id), 20)
    assert answer["status"] == 403 and answer["body"]["error"] == "not_private"
    gone = eventually(lambda: [e for e in room_messages(synapse, bot, room)
                               if e["event_id"] == event_id and not e["content"]])
    assert gone, "the leaked sealed bid was not redacted"

    assert buyer.sealed_bid(request_id, "buyer", 19000)["state"] == "waiting_for_other_bid"
    closed = seller.sealed_bid(request_id, "seller", 15000)
    assert closed["state"] == "closed" and closed["finalPrice"] == 170
    room_text = json.dumps(room_messages(synapse, bot, room))
    assert '"maxPrice"' not in room_text.replace(json.dumps(leaked)[1:-1], "")


def test_one_market_two_doors_an_http_buyer_buys_from_a_matrix_seller(store, bot: BotThread, agents: Agents) -> None:
    seller = seller_on(agents, store, floor=15000)
    listing_id = seller.post_listing(SWITCH, ask=18000, floor=15000)["listingId"]
    with httpx.Client(base_url=store.base, timeout=30) as http:
        buyer = MarketClient(http, "http_buyer", clock=store.clock)
        buyer.register()
        buyer.file_mandate({"maxSpend": 20000})
        assert [item["listingId"] for item in buyer.listings()] == [listing_id]
        request_id = buyer.contact(listing_id, "natural_language")
        heard = seller.session.wait(lambda: next((d for d in seller.session.inbox.values()
                                                  if d["body"].get("requestId") == request_id), None), 20)
        assert heard is not None and heard["body"]["type"] == "contact_request"
        seller.agree(request_id, "natural_language")  # over Matrix
        buyer.offer(request_id, "buyer", price=17000)  # over HTTP
        deal = seller.offer(request_id, "seller", action="accept")  # over Matrix
        buyer.sign_deal(deal["dealId"], "buyer")
        seller.sign_deal(deal["dealId"], "seller")
        confirmed = buyer.deal(deal["dealId"])
        assert confirmed["status"] == "confirmed" and confirmed["deal"]["finalPrice"] == 170


def test_restarting_the_bot_loses_nothing_and_takes_no_event_twice(
        store, bot: BotThread, agents: Agents, synapse: LocalSynapse) -> None:
    seller = seller_on(agents, store)
    bot.stop()
    listing = {"type": "listing", "version": "0.1.0", "listingId": "lst_while_down", "timestamp": seller.now(),
               "seller": {"agentId": seller.id}, "item": SWITCH,
               "pricing": {"askPrice": 180, "currency": "EUR", "negotiable": True},
               "ownerMandate": seller.owner_signed({"minAcceptablePrice": 150}, listingId="lst_while_down")}
    event_id = seller.session.send(seller.session.private_room,
                                   wire.market_content(sign_message(seller.key, listing), "listing"), "down-1")
    bot.start()
    answer = seller.session.wait(lambda: seller.session.answers.get(event_id), 30)
    assert answer is not None and answer["status"] == 201
    bot.stop()
    bot.start()
    time.sleep(2)
    with bot.database.read() as conn:
        rows = conn.execute(select(matrix_events.c.status, matrix_events.c.outcome)
                            .where(matrix_events.c.event_id == event_id)).all()
    assert rows == [("done", "listing")]
    answers = [e for e in room_messages(synapse, bot, seller.session.private_room)
               if (e["content"].get("m.relates_to") or {}).get("m.in_reply_to", {}).get("event_id") == event_id]
    assert len(answers) == 1


def test_a_selling_line_in_the_market_room_is_an_unsigned_ad_no_mandate_binds(
        store, bot: BotThread, agents: Agents) -> None:
    """spec 003, Phase 2 ("natural language listings still work"): a person's plain-text line in
    the market room becomes an unsigned ad, answered in the room, visible over HTTP only when
    asked for, told to the buyer whose wanted ad names the item — and nothing binds a price to it."""
    buyer = buyer_on(agents, store)
    interest = {field: SWITCH[field] for field in ("category", "subcategory", "name")}
    wanted_id = buyer.post_wanted(interest, budget=19000, max_spend=20000)["wantedId"]
    person = agents.session("alice")
    line = "RUN_ID:abc SELLING: nintendo switch — asking 200€ (can negotiate). DM me."
    event_id = person.send(person.market_room, {"msgtype": "m.text", "body": line}, "ad-1")
    answer = person.wait(lambda: person.answers.get(event_id), 20)
    assert answer is not None and answer["status"] == 201, answer
    ad = answer["body"]["ad"]
    assert (ad["unsigned"], ad["mandate"], ad["poster"], ad["eventId"]) == (True, None, person.user_id, event_id)
    assert (ad["item"]["name"], ad["price"], ad["currency"], ad["negotiable"]) == ("nintendo_switch", 200, "EUR", True)

    assert store.http.get(f"/market/ads/{ad['adId']}").json() == ad
    assert store.http.get("/market/listings").json()["listings"] == []
    assert store.http.get("/market/listings", params={"include": "unsigned"}).json()["unsigned"] == [ad]
    told = buyer.session.wait(lambda: next((d["body"] for d in buyer.session.inbox.values()
                                            if d["body"].get("event") == "text_listing_matches_wanted"), None), 20)
    assert told == {"event": "text_listing_matches_wanted", "wantedId": wanted_id, "adId": ad["adId"], "ad": ad}
    with pytest.raises(MarketError) as refused:
        buyer.contact(ad["adId"], "natural_language")
    assert refused.value.status == 409 and "Matrix DM" in refused.value.body["error"]
