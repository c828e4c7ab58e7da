"""Bad input over Matrix (issue 32): malformed and oversized messages, wrong types, edits and
redactions of messages the market took, and floods from one sender. Each is answered or ignored
with a clear reply; none stops the bot, and a flood from one sender delays nobody else (the
bot takes one message per sender in turn, and drops past 32 of one sender's waiting)."""

from __future__ import annotations

import json
import time

import pytest
from sqlalchemy import func, select

from haggler.matrix import wire
from haggler.storage.schema import matrix_events, matrix_outbox
from tests.support.market_matrix import Agents, BotThread

pytestmark = pytest.mark.slow

@pytest.fixture
def db_url(tmp_path) -> str:
    return f"sqlite:///{tmp_path}/market.db"


SWITCH = {"category": "electronics", "subcategory": "gaming_console", "name": "nintendo_switch", "condition": "good"}


def answer_to(session, room_id: str, content: dict, txn: str, timeout: float = 20.0) -> dict:
    """Send ``content`` to ``room_id`` and return the bot's answer to it."""
    event_id = session.send(room_id, content, txn)
    answer = session.wait(lambda: session.answers.get(event_id), timeout)
    assert answer is not None, f"the bot did not answer {content!r}"
    return answer


@pytest.mark.parametrize(("content", "status", "words"), [
    ({"msgtype": "m.text", "body": "{\"type\": \"listing\", "}, 400, "not valid JSON"),
    ({"msgtype": "m.text", "body": "[1, 2, 3]"}, None, None),  # not in braces: text, and no ad, so chat
    ({"msgtype": "m.text", "body": "{\"a\": NaN}"}, 400, "NaN"),
    ({"msgtype": wire.MSGTYPE, "body": "x", wire.CONTENT_KEY: [1, 2]}, 400, "must be a JSON object"),
    ({"msgtype": wire.MSGTYPE, "body": "x", wire.CONTENT_KEY: "{\"type\": "}, 400, "not valid JSON"),
    ({"msgtype": wire.MSGTYPE, "body": "x", wire.CONTENT_KEY: "[1]"}, 400, "must be a JSON object"),
    ({"msgtype": wire.MSGTYPE, "body": "x", wire.CONTENT_KEY: {"type": 5}}, 400, "unknown message type"),
    ({"msgtype": wire.MSGTYPE, "body": "x", wire.CONTENT_KEY: {"type": "teleport"}}, 400, "unknown message type"),
    ({"msgtype": wire.MSGTYPE, "body": "x", wire.CONTENT_KEY: {"type": "listing", "x": "y" * 40_000}}, 400,
     "at most 32768"),
    ({"msgtype": wire.MSGTYPE, "body": "x", wire.CONTENT_KEY: {"type": "offer", "n": json.loads("[" * 70 + "]" * 70)}},
     400, "deeper"),
    ({"msgtype": wire.MSGTYPE, "body": "x", wire.CONTENT_KEY: {"type": "offer", "requestId": 7}}, 400,
     "requestId"),
])
def test_unreadable_messages_are_answered_with_the_reason(bot: BotThread, agents: Agents, content, status,
                                                          words) -> None:
    session = agents.session("sender")
    event_id = session.send(bot.market_room, content, f"bad-{time.monotonic_ns()}")
    if status is None:  # chat: the bot stays silent, and has taken the event
        def taken():
            with bot.database.read() as conn:
                return conn.execute(select(matrix_events.c.outcome)
                                    .where(matrix_events.c.event_id == event_id)).scalar()
        deadline = time.monotonic() + 20
        while taken() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert taken() == "chat" and event_id not in session.answers
        return
    answer = session.wait(lambda: session.answers.get(event_id), 20)
    assert answer is not None and answer["status"] == status
    assert words in json.dumps(answer["body"])


def test_a_schema_failure_names_the_field_as_the_api_does(bot: BotThread, agents: Agents, store) -> None:
    seller = agents.agent(clock=store.clock)
    seller.register()
    listing = {"type": "listing", "version": "0.1.0", "listingId": "lst_1", "timestamp": seller.now(),
               "seller": {"agentId": seller.id}, "item": {**SWITCH, "accessories": "charger"},
               "pricing": {"askPrice": "180", "currency": "EUR", "negotiable": True}}
    answer = answer_to(seller.session, bot.market_room, wire.market_content(listing, "listing"), "schema-1")
    assert answer["status"] == 422 and answer["body"]["path"] in ("/item/accessories", "/pricing/askPrice")
    http = store.http.post("/market/listings", json=listing)
    assert http.status_code == 422 and http.json()["path"] == answer["body"]["path"]


def test_an_edit_is_not_read_and_a_redaction_withdraws_nothing(bot: BotThread, agents: Agents, store) -> None:
    seller = agents.agent(clock=store.clock)
    seller.register()
    seller.file_mandate({"minAcceptablePrice": 15000})
    listing = seller.post_listing(SWITCH, ask=18000, floor=15000)
    taken = next(event for event, answer in seller.session.answers.items() if answer["body"].get("listingId")
                 == listing["listingId"])
    edit = {"msgtype": "m.text", "body": "* {}", "m.new_content": {"msgtype": "m.text", "body": "{}"},
            "m.relates_to": {"rel_type": "m.replace", "event_id": taken}}
    answer = answer_to(seller.session, seller.session.private_room, edit, "edit-1")
    assert answer["status"] == 400 and "edits are not read" in answer["body"]["error"]

    seller.session.run(seller.session.connection.redact(seller.session.private_room, taken, "changed my mind"), 20)
    said = seller.session.wait(lambda: next(
        (True for event in seller.session.notices if event.get("m.relates_to", {}).get("m.in_reply_to", {})
         .get("event_id") == taken and "withdraws nothing" in event.get("body", "")), None), 20)
    assert said
    assert store.http.get(f"/market/listings/{listing['listingId']}").json()["status"] == "live"


def test_a_flood_from_one_sender_is_bounded_and_delays_nobody_else(bot: BotThread, agents: Agents) -> None:
    flooder, other = agents.session("flooder"), agents.session("other")
    junk = {"msgtype": wire.MSGTYPE, "body": "x", wire.CONTENT_KEY: {"type": "offer"}}
    bot.stop()  # so that the flood and the other sender's message reach the bot in one sync
    flood = [flooder.send(bot.market_room, junk, f"flood-{n}") for n in range(80)]
    polite = other.send(bot.market_room, junk, "polite-1")
    bot.start()
    assert other.wait(lambda: other.answers.get(polite), 60) is not None

    def settled() -> bool:
        with bot.database.read() as conn:
            return conn.execute(select(func.count()).select_from(matrix_events)
                                .where(matrix_events.c.status == "pending")).scalar_one() == 0
    deadline = time.monotonic() + 60
    while not settled() and time.monotonic() < deadline:
        time.sleep(0.2)
    with bot.database.read() as conn:
        outcomes = dict(conn.execute(select(matrix_events.c.status, func.count()).select_from(matrix_events)
                                     .where(matrix_events.c.sender == flooder.user_id)
                                     .group_by(matrix_events.c.status)).all())
        answered = [json.loads(content)["m.relates_to"]["m.in_reply_to"]["event_id"] for content in conn.execute(
                        select(matrix_outbox.c.content).where(matrix_outbox.c.room == bot.market_room)
                        .order_by(matrix_outbox.c.id)).scalars() if wire.ANSWER_KEY in json.loads(content)]
    # At most 32 of one sender's wait: the rest is dropped unread (a few more are let in when the
    # bot takes some between two /sync batches).
    assert outcomes["done"] + outcomes["dropped"] == 80 and 32 <= outcomes["done"] <= 40
    # First come, first served would answer it after the 32 of the flood that wait; taken one
    # sender in turn, it waits behind those the bot took before its /sync batch came in at most.
    assert answered.index(polite) <= 5, "the other sender waited behind the flood"
    refusals = flooder.wait(lambda: [a for a in flooder.answers.values() if a["status"] == 429] or None, 20)
    assert refusals and str(outcomes["dropped"]) in " ".join(r["body"]["reason"] for r in refusals)
    again = other.send(bot.market_room, junk, "polite-2")
    assert other.wait(lambda: other.answers.get(again), 20) is not None
