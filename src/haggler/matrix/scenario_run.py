"""Run a clawlist-shaped scenario on a homeserver and score it (``haggler market scenario``).

One run: a fresh market and its bot on the homeserver, a seller and a buyer that are each a live
agent (:mod:`haggler.agents.market_live`) on a Matrix user of its own, acting on their own for
the scenario's ``durationSec``:

* the seller's owner signs a floor of ``seller.floorPrice``; it lists at ``seller.anchorPrice``
  (to the bot alone: the listing's signed bytes carry the floor) and says the scenario's seed line
  in the market room as a notice, as a person would read it;
* the buyer's owner signs a cap of ``buyer.ceilingPrice``; its wanted ad states
  ``buyer.startOffer`` as its public budget.

The run's rooms are then exported as clawlist exports them (``market.jsonl``: the market room;
``dm.jsonl``: the rooms the two negotiated in), with ``meta.json``, and scored into
``summary.json`` by :func:`haggler.matrix.scenario.score`: a deal counts only when the bot posted
it confirmed with both signatures verifying against the agents' own keys. A sweep runs the
scenario N times (each run its own market and bot, one homeserver) and writes ``aggregate.json``.
"""

from __future__ import annotations

import json
import re
import secrets
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from haggler.agents.market import Interest
from haggler.agents.market_live import LiveBuyer, LiveResult, LiveSeller
from haggler.matrix import wire
from haggler.matrix.local_market import Homeserver, MatrixMarket
from haggler.matrix.scenario import Scenario, aggregate, error_summary, score, write_jsonl
from haggler.server.config import utc_now
from haggler.storage.schema import matrix_rooms
from haggler.timestamps import utc_z

#: The taxonomy a scenario's item is listed under: clawlist's scenarios name an item, not a category.
CATEGORY = SUBCATEGORY = "general"
#: Seconds the bot is given, after both agents stopped, to post what it owes the rooms.
SETTLE_SECONDS = 3.0


def item_name(scenario: Scenario) -> str:
    """The market's item name for the scenario's item (``Nintendo Switch`` → ``nintendo_switch``)."""
    name = re.sub(r"[^a-z0-9]+", "_", scenario.item.lower()).strip("_")[:64]
    if not name:
        raise ValueError(f"the scenario's item {scenario.item!r} has no letters or digits to name it by")
    return name


def run_once(scenario: Scenario, homeserver: Homeserver, out: Path, run_id: str) -> dict[str, Any]:
    """One run into ``out`` (created): its transcripts, ``meta.json`` and ``summary.json``;
    returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    name = item_name(scenario)
    with MatrixMarket(homeserver=homeserver) as market:
        seller_client = market.client(f"seller_{run_id}")
        buyer_client = market.client(f"buyer_{run_id}")
        seller = LiveSeller(seller_client, {"category": CATEGORY, "subcategory": SUBCATEGORY, "name": name,
                                            "condition": "good"},
                            ask_cents=scenario.anchor_cents, floor_cents=scenario.floor_cents,
                            currency=scenario.currency)
        buyer = LiveBuyer(buyer_client, Interest(CATEGORY, SUBCATEGORY, name),
                          budget_cents=scenario.start_offer_cents, limit_cents=scenario.ceiling_cents,
                          currency=scenario.currency, chat=buyer_client.session)
        seller_session = seller_client.session
        seller_session.send(seller_session.market_room, {"msgtype": "m.notice", "body": scenario.seed_body(run_id)},
                            f"seed-{run_id}")
        with ThreadPoolExecutor(2, thread_name_prefix="scenario") as pool:
            running = [pool.submit(agent.run, float(scenario.duration_sec)) for agent in (seller, buyer)]
            results: list[LiveResult] = [future.result() for future in running]
        market.bot.settle(SETTLE_SECONDS)
        market_events = _events(homeserver, market.bot.account.access_token, market.bot.market_room)
        dm_events = [event for room in _negotiation_rooms(market)
                     for event in _events(homeserver, market.bot.account.access_token, room)]
        deal = next((wire.uncarry(event["content"].get(f"{wire.CONTENT_KEY}.deal")) for event in dm_events
                     if event.get("sender") == market.bot.user_id
                     and f"{wire.CONTENT_KEY}.deal" in event.get("content", {})), None)
        write_jsonl(out / "market.jsonl", market_events)
        write_jsonl(out / "dm.jsonl", dm_events)
        now = utc_now()
        meta = {"runId": run_id, "scenario": scenario.name, "startedAt": utc_z(now),
                "seller": {"mxid": seller_session.user_id, "agentId": seller_client.id,
                           "publicKey": seller_client.public_key},
                "buyer": {"mxid": buyer_client.session.user_id, "agentId": buyer_client.id,
                          "publicKey": buyer_client.public_key},
                "bot": {"mxid": market.bot.user_id}, "agents": [result.to_json() for result in results]}
        (out / "meta.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        summary = score(scenario, run_id=run_id, market_events=market_events, dm_events=dm_events,
                        seller_mxid=seller_session.user_id, buyer_mxid=buyer_client.session.user_id, deal=deal,
                        now=now, bot_mxid=market.bot.user_id, seller_key=seller_client.public_key,
                        buyer_key=buyer_client.public_key)
    (out / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return summary


def sweep(scenario: Scenario, homeserver: Homeserver, out: Path, runs: int, *, started: datetime) -> dict[str, Any]:
    """``runs`` runs into ``out/<runId>/``, then ``out/aggregate.json``; a run that fails is
    recorded as an error (clawlist's ``SWEEP_ERROR``), and the sweep goes on."""
    sweep_id = f"sweep_{started.strftime('%Y%m%d_%H%M%S')}_{secrets.token_hex(2)}"
    summaries = []
    for n in range(1, runs + 1):
        run_id = f"{sweep_id}_{n}"
        try:
            summaries.append(run_once(scenario, homeserver, out / run_id, run_id))
        except Exception as exc:  # noqa: BLE001 - one broken run is a row of the sweep, not its end
            summaries.append(error_summary(run_id, f"{type(exc).__name__}: {exc}", now=utc_now()))
    result = aggregate(scenario.name, sweep_id, summaries)
    (out / "aggregate.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return result


def _negotiation_rooms(market: MatrixMarket) -> list[str]:
    """The rooms the bot opened for the run's negotiations."""
    with market.database.read() as conn:
        return list(conn.execute(select(matrix_rooms.c.room_id).where(
            matrix_rooms.c.bot == market.bot.user_id, matrix_rooms.c.key.like("request:%"))
            .order_by(matrix_rooms.c.created_at)).scalars())


def _events(homeserver: Homeserver, token: str, room_id: str) -> list[dict[str, Any]]:
    """A room's whole timeline, oldest first, as the homeserver serves it (a member's view)."""
    events: list[dict[str, Any]] = []
    with httpx.Client(base_url=f"{homeserver.url}/_matrix/client/v3", timeout=30,
                      headers={"Authorization": f"Bearer {token}"}) as http:
        params: dict[str, Any] = {"dir": "f", "limit": 500}
        while True:
            page = http.get(f"/rooms/{room_id}/messages", params=params)
            page.raise_for_status()
            data = page.json()
            events += data.get("chunk", [])
            if not data.get("end") or not data.get("chunk"):
                return events
            params["from"] = data["end"]
