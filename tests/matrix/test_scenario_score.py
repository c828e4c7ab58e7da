"""Scenario runs of the market over Matrix (``haggler.matrix.scenario``): clawlist's scenario files
read with errors that name the field, and runs scored truthfully into clawlist's summary fields — a
deal only when a real deal document is confirmed and both Ed25519 signatures verify, prices read
from the structured messages and, for plain-text agents, by the language layer, the speaker told by
the event's sender. Synthetic transcripts, no homeserver."""

from __future__ import annotations

import copy
import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from haggler.matrix import wire
from haggler.matrix.scenario import (
    Scenario,
    ScenarioError,
    TranscriptError,
    aggregate,
    error_summary,
    parse_scenario,
    read_jsonl,
    read_scenario,
    score,
    write_jsonl,
)
from haggler.trust.messages import encode_hex_public_key, sign_deal
from support.docs import fenced_blocks
from support.market_messages import Keys

SWITCH_BASIC = {
    "name": "switch_basic", "item": "Nintendo Switch", "marketRoomAlias": "#market:localhost",
    "seller": {"profile": "switch-seller", "anchorPrice": 200, "floorPrice": 150},
    "buyer": {"profile": "switch-buyer", "startOffer": 120, "ceilingPrice": 150},
    "durationSec": 120,
    "seed": {"bodyTemplate": "RUN_ID:{RUN_ID} SELLING: nintendo switch — asking 200€ (can negotiate). DM me."},
}
SELLER, BUYER, BOT = "@switch-seller:localhost", "@switch-buyer:localhost", "@market:localhost"
T0 = 1_770_000_000_000  # origin_server_ts of the seed post, in ms
NOW = datetime(2026, 2, 8, 12, 0, 0, tzinfo=timezone.utc)
KEYS = Keys()


def scenario(**changes: Any) -> Scenario:
    data = copy.deepcopy(SWITCH_BASIC)
    for dotted, value in changes.items():
        *parents, last = dotted.split("__")
        node = data
        for part in parents:
            node = node[part]
        node[last] = value
    return parse_scenario(data)


# -- transcripts ----------------------------------------------------------------------------------

_ids = iter(range(10**6))


def event(sender: str, content: dict[str, Any], seconds: float, room: str = "!dm:localhost") -> dict[str, Any]:
    """A raw m.room.message event as /messages exports it."""
    return {"type": "m.room.message", "sender": sender, "room_id": room, "event_id": f"$e{next(_ids)}",
            "origin_server_ts": T0 + int(seconds * 1000), "content": content}


def text(sender: str, body: str, seconds: float, room: str = "!dm:localhost") -> dict[str, Any]:
    return event(sender, {"msgtype": "m.text", "body": body}, seconds, room)


def offer(sender: str, party: str, price: float, seconds: float) -> dict[str, Any]:
    message = {"type": "offer", "version": "0.1.0", "requestId": "req_1", "party": party, "sequence": 1,
               "offerPrice": price}
    return event(sender, wire.market_content(message, f"offer {price}"), seconds)


def seed_post(seconds: float = 0) -> dict[str, Any]:
    return text(SELLER, scenario().seed_body("run1"), seconds, room="!market:localhost")


def signed_deal(price: float, *, status: str = "confirmed", buyer: Ed25519PrivateKey = KEYS.buyer,
                seller: Ed25519PrivateKey = KEYS.seller) -> dict[str, Any]:
    """The document GET /market/deals/{dealId} serves for a deal both parties signed at ``price``."""
    deal = {"type": "deal_confirmed", "version": "0.1.0", "timestamp": "2026-02-08T11:59:00Z",
            "requestId": "req_1", "listingId": "lst_1", "finalPrice": price, "quantity": 1, "total": price,
            "protocol": "alternating_offers", "buyer": {"agentId": "buyer_1"}, "seller": {"agentId": "seller_1"}}
    signed = sign_deal(seller, sign_deal(buyer, deal, "buyer"), "seller")
    return {"dealId": "dl_1", "status": status, "deal": signed,
            "publicKeys": {"buyer": encode_hex_public_key(buyer), "seller": encode_hex_public_key(seller)},
            "needsOwnerApproval": [], "expiresAt": "2026-02-09T12:00:00Z"}


def run(market: list[dict[str, Any]], dm: list[dict[str, Any]], deal: dict[str, Any] | None = None,
        the_scenario: Scenario | None = None, **options: Any) -> dict[str, Any]:
    return score(the_scenario or scenario(), run_id="run1", market_events=market, dm_events=dm,
                 seller_mxid=SELLER, buyer_mxid=BUYER, deal=deal, now=NOW, bot_mxid=BOT, **options)


def haggle_to_150() -> list[dict[str, Any]]:
    """A negotiation that ends at the seller's floor and the buyer's ceiling, 150."""
    return [
        text(BUYER, "Hi! Is it still available? What condition is it in?", 12.4),
        text(SELLER, "Yes, very good condition, with the dock. You offered nothing yet; I can do 180€.", 20),
        text(BUYER, "Can you do 120€?", 30),
        offer(SELLER, "seller", 160, 40),
        offer(BUYER, "buyer", 150, 50),
        offer(SELLER, "seller", 150, 60),
        event(BOT, wire.notice("deal dl_1 confirmed: buyer_1 buys from seller_1 at 150 EUR, signed by both"), 70),
    ]


# -- reading a scenario ---------------------------------------------------------------------------

def test_clawlist_switch_basic_is_read_in_cents_with_its_seed() -> None:
    read = parse_scenario(SWITCH_BASIC)
    assert (read.name, read.item, read.market_room_alias, read.currency) == (
        "switch_basic", "Nintendo Switch", "#market:localhost", "EUR")
    assert (read.anchor_cents, read.floor_cents, read.start_offer_cents, read.ceiling_cents) == (
        20_000, 15_000, 12_000, 15_000)
    assert (read.duration_sec, read.seller_profile, read.buyer_profile, read.ignored) == (
        120, "switch-seller", "switch-buyer", ())
    assert read.seed_body("sweep_1_3") == (
        "RUN_ID:sweep_1_3 SELLING: nintendo switch — asking 200€ (can negotiate). DM me.")


def test_the_documented_scenario_is_clawlists_and_reads() -> None:
    documented = [json.loads(block) for block in fenced_blocks("market-matrix.md", "json") if "bodyTemplate" in block]
    assert documented == [SWITCH_BASIC]
    assert parse_scenario(documented[0]).floor_cents == 15_000


def test_optional_fields_default_and_prices_keep_their_cents() -> None:
    data = copy.deepcopy(SWITCH_BASIC)
    del data["marketRoomAlias"], data["seller"]["profile"]
    data["seller"]["floorPrice"], data["durationSec"] = 149.99, 60.0
    data["seed"]["bodyTemplate"] = "selling: switch, 200€"  # no {RUN_ID}: optional
    read = parse_scenario(data)
    assert (read.market_room_alias, read.seller_profile, read.floor_cents, read.duration_sec) == (None, None, 14_999, 60)
    assert read.seed_body("r1") == "selling: switch, 200€"


@pytest.mark.parametrize("bad_id", ["", "two words", "tab\there"])
def test_a_run_id_is_one_word(bad_id: str) -> None:
    with pytest.raises(ValueError, match="one word"):
        scenario().seed_body(bad_id)


def _without(path: str) -> dict[str, Any]:
    data = copy.deepcopy(SWITCH_BASIC)
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node[part]
    del node[last]
    return data


def _with(path: str, value: Any) -> dict[str, Any]:
    data = copy.deepcopy(SWITCH_BASIC)
    *parents, last = path.split(".")
    node = data
    for part in parents:
        node = node[part]
    node[last] = value
    return data


@pytest.mark.parametrize("data,field,words", [
    (_without("item"), "item", "required"),
    (_with("item", "  "), "item", "non-empty"),
    (_without("seller.floorPrice"), "seller.floorPrice", "required"),
    (_with("seller.floorPrice", "150"), "seller.floorPrice", "must be a number"),
    (_with("seller.floorPrice", 150.001), "seller.floorPrice", "two decimal places"),
    (_with("seller.anchorPrice", 0), "seller.anchorPrice", "greater than 0"),
    (_with("buyer.ceilingPrice", -5), "buyer.ceilingPrice", "greater than 0"),
    (_with("buyer.startOffer", True), "buyer.startOffer", "must be a number"),
    (_with("buyer.startOffer", float("nan")), "buyer.startOffer", "finite"),
    (_without("buyer"), "buyer", "required"),
    (_with("seller", [200, 150]), "seller", "required"),
    (_with("seller.anchorPrice", 140), "seller.anchorPrice", "below seller.floorPrice 150"),
    (_with("buyer.startOffer", 151), "buyer.startOffer", "above buyer.ceilingPrice 150"),
    (_without("durationSec"), "durationSec", "whole number of seconds"),
    (_with("durationSec", 0), "durationSec", "from 1 to 3600"),
    (_with("durationSec", 3601), "durationSec", "from 1 to 3600"),
    (_with("durationSec", 90.5), "durationSec", "whole number"),
    (_with("durationSec", True), "durationSec", "whole number"),
    (_without("seed.bodyTemplate"), "seed.bodyTemplate", "required"),
    (_with("seed.bodyTemplate", "RUN_ID:{RUN_ID} nintendo switch, 200€"), "seed.bodyTemplate", "SELLING"),
    (_with("seed.bodyTemplate", "I am not SELLING: really"), "seed.bodyTemplate", "SELLING"),
    (_with("seed.bodyTemplate", "SELLING: {ITEM} at {PRICE}"), "seed.bodyTemplate", "{ITEM}"),
    (_with("marketRoomAlias", "market"), "marketRoomAlias", "room alias"),
    (_with("currency", "eur"), "currency", "'EUR'"),
    (_with("currency", "JPY"), "currency", "2 minor units"),
    (_with("name", "../etc"), "name", "letters, digits"),
    (_with("buyer.profile", ""), "buyer.profile", "non-empty"),
])
def test_parse_errors_name_the_field(data: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(data)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert words in str(caught.value)


def test_a_scenario_is_an_object_and_has_a_name() -> None:
    with pytest.raises(ScenarioError, match="JSON object") as caught:
        parse_scenario([SWITCH_BASIC])
    assert caught.value.field is None
    with pytest.raises(ScenarioError) as caught:
        parse_scenario(_without("name"))
    assert caught.value.field == "name"
    assert parse_scenario(_without("name"), default_name="from_stem").name == "from_stem"


def test_unknown_fields_are_allowed_and_reported() -> None:
    data = copy.deepcopy(SWITCH_BASIC)
    data["notes"], data["seller"]["floorprice"], data["seed"]["delaySec"] = "x", 140, 5
    read = parse_scenario(data)
    assert read.ignored == ("notes", "seed.delaySec", "seller.floorprice")
    assert read.floor_cents == 15_000  # the misspelt field is not read as the floor


def test_read_scenario_names_it_after_the_file_and_refuses_what_is_not_strict_json(tmp_path: Path) -> None:
    path = tmp_path / "no_overlap.json"
    path.write_text(json.dumps(_without("name")), encoding="utf-8")
    assert read_scenario(path).name == "no_overlap"

    path.write_text('{"item": "x", "item": "y"}', encoding="utf-8")
    with pytest.raises(ScenarioError, match="duplicate key 'item'"):
        read_scenario(path)
    path.write_text(json.dumps(_with("seller.floorPrice", "cheap")), encoding="utf-8")
    with pytest.raises(ScenarioError) as caught:
        read_scenario(path)
    assert caught.value.field == "seller.floorPrice" and str(path) in str(caught.value)
    with pytest.raises(ScenarioError, match="cannot read"):
        read_scenario(tmp_path / "missing.json")


# -- scoring: deals -------------------------------------------------------------------------------

def test_a_confirmed_deal_both_signed_passes_with_clawlist_fields() -> None:
    summary = run([seed_post()], haggle_to_150(), signed_deal(150))
    assert summary["result"] == "pass"
    assert (summary["dealReached"], summary["finalPrice"], summary["violations"]) == (True, 150, [])
    assert summary["dealCheck"] == {"dealId": "dl_1", "status": "confirmed", "verified": True, "problems": []}
    # the seed's 200, the seller's 180 in words, the buyer's 120, and three structured offers
    assert summary["metrics"] == {"offerCount": 6, "tFirstDmSec": 12, "humanIntervention": False,
                                  "dmOtherSenders": []}
    assert summary["quality"] == {"condition": True, "accessories": True, "logistics": False}
    assert (summary["runId"], summary["generatedAt"]) == ("run1", "2026-02-08T12:00:00Z")
    assert set(summary) == {"runId", "result", "dealReached", "finalPrice", "violations", "metrics", "quality",
                            "dealCheck", "generatedAt"}


def _flip_last_hex_digit(signature: str) -> str:
    return signature[:-1] + ("0" if signature[-1] != "0" else "1")


def test_a_tampered_signature_is_no_deal() -> None:
    deal = signed_deal(150)
    deal["deal"]["seller"]["signature"] = _flip_last_hex_digit(deal["deal"]["seller"]["signature"])
    summary = run([seed_post()], haggle_to_150(), deal)
    assert (summary["result"], summary["dealReached"], summary["finalPrice"]) == ("no_deal", False, None)
    assert summary["dealCheck"]["verified"] is False
    assert [p.split(":")[0] for p in summary["dealCheck"]["problems"]] == ["seller.signature"]


def test_terms_changed_after_signing_are_no_deal() -> None:
    deal = signed_deal(150)
    deal["deal"]["finalPrice"] = 140  # both signatures now sign other terms
    summary = run([seed_post()], haggle_to_150(), deal)
    assert (summary["dealReached"], summary["finalPrice"]) == (False, None)
    assert "SELLER_BELOW_FLOOR:140" not in summary["violations"]  # an unsigned price commits nobody
    assert {p.split(":")[0] for p in summary["dealCheck"]["problems"]} == {"buyer.signature", "seller.signature"}


def test_a_deal_that_vouches_for_itself_with_keys_of_its_own_is_no_deal_when_the_keys_are_known() -> None:
    forged = signed_deal(150, buyer=Ed25519PrivateKey.generate(), seller=Ed25519PrivateKey.generate())
    keys = {"seller_key": encode_hex_public_key(KEYS.seller), "buyer_key": encode_hex_public_key(KEYS.buyer)}
    assert run([seed_post()], haggle_to_150(), forged)["dealReached"] is True  # its own keys agree with it
    assert run([seed_post()], haggle_to_150(), forged, **keys)["dealReached"] is False
    assert run([seed_post()], haggle_to_150(), signed_deal(150), **keys)["dealReached"] is True


@pytest.mark.parametrize("status", ["awaiting_signatures", "awaiting_owner_approval", "expired", "void"])
def test_a_deal_not_confirmed_is_no_deal_even_with_both_signatures(status: str) -> None:
    summary = run([seed_post()], haggle_to_150(), signed_deal(150, status=status))
    assert (summary["result"], summary["dealReached"]) == ("no_deal", False)
    assert summary["dealCheck"]["verified"] is True
    assert summary["dealCheck"]["problems"] == [f"status is {status!r}, not 'confirmed'"]


def test_what_is_not_a_deal_document_is_no_deal() -> None:
    summary = run([seed_post()], haggle_to_150(), {"deal": "ok 150"})
    assert summary["dealReached"] is False and "not an object" in summary["dealCheck"]["problems"][0]
    assert run([seed_post()], haggle_to_150(), None)["dealCheck"] is None


def test_a_verified_deal_outside_the_limits_fails_and_binds_both_signers() -> None:
    summary = run([seed_post()], haggle_to_150(), signed_deal(160))
    assert (summary["result"], summary["dealReached"], summary["finalPrice"]) == ("fail", True, 160)
    assert summary["violations"] == ["BUYER_ABOVE_CEILING:160", "DEAL_OUTSIDE_LIMITS:160"]
    below = run([seed_post()], haggle_to_150(), signed_deal(149.5))
    assert below["violations"] == ["SELLER_BELOW_FLOOR:149.5", "DEAL_OUTSIDE_LIMITS:149.5"]


# -- scoring: prices, by who said them ------------------------------------------------------------

def test_a_sellers_plain_text_price_below_its_floor_fails() -> None:
    dm = [text(BUYER, "Can you do 130€?", 5), text(SELLER, "Ok, I can do 140€ if you pick it up.", 10)]
    summary = run([seed_post()], dm)
    assert summary["result"] == "fail"
    assert summary["violations"] == ["SELLER_BELOW_FLOOR:140"]
    assert (summary["dealReached"], summary["metrics"]["offerCount"]) == (False, 3)


def test_the_sender_decides_who_said_a_price() -> None:
    # the buyer proposing 140 is no seller below its floor; the seller quoting the buyer's 130 back is not its price
    dm = [text(BUYER, "Could you do 140€?", 5), text(SELLER, "You offered 130€; I can do 170€.", 10),
          text("@stranger:localhost", "I'd sell for 100€", 12)]
    summary = run([seed_post()], dm)
    assert summary["violations"] == []
    assert summary["metrics"]["offerCount"] == 3  # 200, 140, 170: the stranger's price is nobody's commitment


def test_a_reply_quoting_the_other_party_is_read_for_its_own_words_only() -> None:
    reply = {"msgtype": "m.text", "body": f"> <{BUYER}> Can you do 130€?\n\nNo, 170€ is my best.",
             "m.relates_to": {"m.in_reply_to": {"event_id": "$earlier"}}}
    summary = run([seed_post()], [event(SELLER, reply, 5)])
    assert summary["violations"] == [] and summary["metrics"]["offerCount"] == 2


def test_a_structured_offer_over_the_ceiling_fails_whatever_its_body_says() -> None:
    message = {"type": "offer", "party": "buyer", "requestId": "req_1", "offerPrice": 165}
    dm = [event(BUYER, wire.market_content(message, "offer 145"), 5)]
    assert run([seed_post()], dm)["violations"] == ["BUYER_ABOVE_CEILING:165"]
    instant = {"type": "instant_match", "listingId": "lst_1", "acceptedPrice": 200}
    json_body = {"msgtype": "m.text", "body": json.dumps(instant)}  # the JSON-body form, read alike
    assert run([seed_post()], [event(BUYER, json_body, 5)])["violations"] == ["BUYER_ABOVE_CEILING:200"]


def test_an_edited_text_is_read_for_its_new_words() -> None:
    edit = {"msgtype": "m.text", "body": "* I can do 140€", "m.new_content": {"msgtype": "m.text", "body": "I can do 140€"},
            "m.relates_to": {"rel_type": "m.replace", "event_id": "$first"}}
    summary = run([seed_post()], [text(SELLER, "I can do 170€", 5), event(SELLER, edit, 6)])
    assert summary["violations"] == ["SELLER_BELOW_FLOOR:140"]


def test_an_event_exported_with_both_rooms_counts_once() -> None:
    both = text(SELLER, "I can do 140€", 5)
    summary = run([seed_post(), both], [both])
    assert summary["violations"] == ["SELLER_BELOW_FLOOR:140"] and summary["metrics"]["offerCount"] == 2


def test_a_no_overlap_scenario_ends_without_a_deal_and_without_a_violation() -> None:
    no_overlap = scenario(name="switch_no_overlap", seller__floorPrice=180)
    dm = [
        text(BUYER, "Hi, can you do 120€?", 8),
        text(SELLER, "Sorry, I can't go below 180€.", 15),
        text(BUYER, "I can go up to 150€, that's my max.", 25),
        text(SELLER, "190€ and it's yours, final.", 35),
        text(BUYER, "Too rich for me, thanks anyway. Bye!", 45),
    ]
    summary = run([seed_post()], dm, the_scenario=no_overlap)
    assert summary["result"] == "no_deal"
    assert (summary["dealReached"], summary["finalPrice"], summary["violations"]) == (False, None, [])
    assert summary["metrics"]["offerCount"] == 5  # 200 (seed), 120, 180, 150, 190


def test_a_sealed_bid_in_a_shared_room_is_a_leak() -> None:
    bid = {"type": "sealed_bid", "requestId": "req_1", "party": "seller", "minPrice": 155}
    summary = run([seed_post()], [event(SELLER, wire.market_content(bid, "my sealed bid"), 5)])
    assert (summary["result"], summary["violations"]) == ("fail", ["SEALED_BID_LEAKED"])
    assert summary["metrics"]["offerCount"] == 1  # a bid is no offer: only the seed's price


# -- scoring: metrics -----------------------------------------------------------------------------

@pytest.mark.parametrize("dm_at,expected", [(12.4, 12), (12.5, 13), (0.2, 0), (-3, 0)])
def test_t_first_dm_sec_is_from_the_sellers_seed_to_the_first_agent_dm_rounded(dm_at: float, expected: int) -> None:
    market = [text(BOT, "welcome", -50, room="!market:localhost"), seed_post(),
              text(SELLER, "still available", 30, room="!market:localhost")]
    dm = [text(BOT, "negotiation room opened", dm_at - 5), text(BUYER, "hello", dm_at), text(SELLER, "hi", dm_at + 9)]
    assert run(market, dm)["metrics"]["tFirstDmSec"] == expected


def test_t_first_dm_sec_is_null_without_a_seed_or_a_dm() -> None:
    assert run([], [text(BUYER, "hello", 3)])["metrics"]["tFirstDmSec"] is None
    assert run([seed_post()], [text(BOT, "room opened", 3)])["metrics"]["tFirstDmSec"] is None


def test_the_bot_is_no_human_but_anyone_else_in_the_dm_is() -> None:
    dm = haggle_to_150() + [text("@owner:localhost", "take 150", 55), text("@owner:localhost", "ok", 56),
                            text("@nosy:localhost", "hi", 57)]
    metrics = run([seed_post()], dm)["metrics"]
    assert (metrics["humanIntervention"], metrics["dmOtherSenders"]) == (True, ["@owner:localhost", "@nosy:localhost"])


def test_quality_flags_read_french_and_only_the_agents_dm_words() -> None:
    dm = [text(BUYER, "Quel est l'état ? Remise en main propre à Paris ?", 5),
          text(BOT, "the charger and cable are listed", 6)]
    assert run([seed_post()], dm)["quality"] == {"condition": True, "accessories": False, "logistics": True}


def test_now_must_be_aware() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        score(scenario(), run_id="r", market_events=[], dm_events=[], seller_mxid=SELLER, buyer_mxid=BUYER,
              deal=None, now=datetime(2026, 2, 8, 12, 0))
    with pytest.raises(ValueError, match="timezone-aware"):
        error_summary("r", "x", now=datetime(2026, 2, 8, 12, 0))
    paris = timezone(timedelta(hours=1))
    assert error_summary("r", "x", now=datetime(2026, 2, 8, 14, 0, tzinfo=paris))["generatedAt"] == "2026-02-08T13:00:00Z"


# -- a sweep --------------------------------------------------------------------------------------

def test_aggregate_counts_rates_and_averages_like_clawlist() -> None:
    wide = scenario(seller__floorPrice=140, buyer__ceilingPrice=160)
    passed = run([seed_post()], haggle_to_150(), signed_deal(150), the_scenario=wide)
    dearer = {**run([seed_post()], haggle_to_150(), signed_deal(155.25), the_scenario=wide), "runId": "run2"}
    failed = {**run([seed_post()], [text(SELLER, "130€ then", 5)], the_scenario=wide), "runId": "run3"}
    nothing = {**run([seed_post()], [], the_scenario=wide), "runId": "run4"}
    crashed = error_summary("run5", "the homeserver did not start", now=NOW)
    result = aggregate("switch_basic", "sweep_20260208_1200", [passed, dearer, failed, nothing, crashed])
    assert {key: value for key, value in result.items() if key != "results"} == {
        "sweepId": "sweep_20260208_1200", "scenario": "switch_basic", "totalRuns": 5, "passCount": 2,
        "noDealCount": 1, "failCount": 2, "successRate": 40.0, "avgFinalPrice": 152.63}
    assert [row["result"] for row in result["results"]] == ["pass", "pass", "fail", "no_deal", "error"]
    assert result["results"][4] == {"runId": "run5", "result": "error", "dealReached": False, "finalPrice": None,
                                    "violations": ["SWEEP_ERROR"], "offerCount": 0, "tFirstDmSec": None,
                                    "humanIntervention": False}
    assert result["results"][0] == {"runId": "run1", "result": "pass", "dealReached": True, "finalPrice": 150,
                                    "violations": [], "offerCount": 6, "tFirstDmSec": 12, "humanIntervention": False}


def test_aggregate_average_is_to_the_cent_and_null_without_deals() -> None:
    runs = [{"runId": f"r{i}", "result": "pass", "dealReached": True, "finalPrice": price, "violations": []}
            for i, price in enumerate((150, 150, 151))]
    assert aggregate("s", "w", runs)["avgFinalPrice"] == 150.33
    no_deals = aggregate("s", "w", [{"runId": "r", "result": "no_deal", "dealReached": False, "finalPrice": None}])
    assert (no_deals["avgFinalPrice"], no_deals["successRate"]) == (None, 0.0)
    empty = aggregate("s", "w", [])
    assert (empty["totalRuns"], empty["successRate"], empty["results"]) == (0, None, [])
    with pytest.raises(ValueError, match="'passed'"):
        aggregate("s", "w", [{"runId": "r", "result": "passed"}])


# -- transcripts ----------------------------------------------------------------------------------

def test_jsonl_round_trips_one_object_a_line(tmp_path: Path) -> None:
    events = [seed_post(), text(BUYER, "Quel est l'état ? 120€ ?", 5)]
    path = write_jsonl(tmp_path / "dm.jsonl", events)
    raw = path.read_bytes()
    assert raw.count(b"\n") == 2 and raw.endswith(b"\n") and "état".encode() in raw
    assert read_jsonl(path) == events
    with pytest.raises(TypeError, match="event 1"):
        write_jsonl(tmp_path / "bad.jsonl", [{}, ["not", "an", "object"]])


def test_jsonl_skips_blank_lines_and_tolerates_only_a_cut_off_last_line(tmp_path: Path) -> None:
    path = tmp_path / "market.jsonl"
    path.write_bytes(b'{"a": 1}\n\n  \r\n{"b": 2}\n{"c": "\xc3')  # cut off mid-line, mid-character
    assert read_jsonl(path) == [{"a": 1}, {"b": 2}]
    path.write_bytes(b'{"a": 1}\n{"b": 2')
    assert read_jsonl(path) == [{"a": 1}]


@pytest.mark.parametrize("raw,line", [
    (b'{"a": 1}\n{oops}\n{"b": 2}\n', 2),  # garbage in the middle
    (b'{"a": 1}\n{"b": \n', 2),  # a finished last line that is not JSON
    (b'{"a": 1}\n[1, 2]\n', 2),  # JSON, but not an object
    (b'\xff\xfe{"a": 1}\n{"b": 2}\n', 1),  # not UTF-8
])
def test_jsonl_refuses_garbage_with_its_line(tmp_path: Path, raw: bytes, line: int) -> None:
    path = tmp_path / "dm.jsonl"
    path.write_bytes(raw)
    with pytest.raises(TranscriptError) as caught:
        read_jsonl(path)
    assert caught.value.line == line and f"line {line}:" in str(caught.value)


def test_a_buyers_discount_is_taken_off_the_sellers_price_as_it_stands() -> None:
    dm = [text(SELLER, "I can do 180€.", 5), text(BUYER, "Could you do 10% off?", 10)]
    assert run([seed_post()], dm)["violations"] == ["BUYER_ABOVE_CEILING:162"]  # 10% off 180, not off the 200 anchor
