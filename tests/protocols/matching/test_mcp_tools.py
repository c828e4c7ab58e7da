"""The match negotiation MCP tools at /mcp, driven by the official MCP SDK client over
streamable HTTP against a real store (uvicorn on loopback), with users, agents and opportunities
made through the REST API."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any, AsyncIterator, get_args

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from haggler.agents.match_context import ROLES
from haggler.protocols.matching import mcp_tools, turns
from haggler.protocols.matching.settings import MatchingSettings
from tests.support.matching import Operator

OPERATOR = "operator-token-for-mcp-tests"
SEED = {"score": 80, "reasoning": "A founder building a design tool and a designer who wants to build one.",
        "valencyRole": "peer"}
FOUNDER = {"name": "Ada", "profile": {"role": "founder", "seeks": ["a design co-founder"], "offers": ["equity"]},
           "intents": [{"description": "find a design co-founder", "tags": ["design"]}]}
DESIGNER = {"name": "Grace", "profile": {"role": "designer", "seeks": ["equity"], "offers": ["design"]},
            "intents": [{"description": "join an early startup as a designer"}]}
ROLES_ARG = {"ownUser": "peer", "otherUser": "peer"}


def person(op: Operator, spec: dict[str, Any], *, agent: bool) -> dict[str, Any]:
    """A user (``id``, ``apiKey``) and, with ``agent``, its personal agent (``agentId``, ``agentKey``)."""
    user = op.user(spec)
    made = {"id": user.id, "apiKey": user.key}
    if agent:
        mine = op.agent(user, name=f"{spec['name']}'s agent")
        made.update(agentId=mine.id, agentKey=mine.key)
    return made


@contextlib.asynccontextmanager
async def mcp_session(base: str, key: str | None) -> AsyncIterator[tuple[ClientSession, Any]]:
    """An initialized SDK client session on the store's /mcp; every request carries ``key``."""
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            streamable_http_client(f"{base}/mcp", http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        yield session, await session.initialize()


def call(base: str, key: str | None, tool: str, arguments: dict[str, Any]) -> Any:
    async def go() -> Any:
        async with mcp_session(base, key) as (session, _):
            return await session.call_tool(tool, arguments)
    return asyncio.run(go())


def payload(result: Any) -> Any:
    assert not result.is_error, text(result)
    if result.structured_content is not None:
        return result.structured_content
    return json.loads(result.content[0].text)


def text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def respond(negotiation_id: str, action: str, **extra: Any) -> dict[str, Any]:
    return {"negotiationId": negotiation_id, "action": action, "reasoning": extra.pop("reasoning", "Roles fit."),
            "suggestedRoles": extra.pop("suggestedRoles", ROLES_ARG), **extra}


def start(make_store: Any, **store: Any) -> Operator:
    return Operator(make_store(matching=MatchingSettings(operator_token=OPERATOR), **store), token=OPERATOR)


def test_instructions_carry_the_turn_mode_contract_and_the_schemas_the_spec(make_store):
    """spec 002: Turn mode behavioral contract (in the MCP server's instructions); MCP Tools
    (the three tools, with the spec's actions and roles in their input schema)."""
    mm = start(make_store)
    ada = person(mm, FOUNDER, agent=True)

    async def go() -> tuple[Any, Any]:
        async with mcp_session(mm.store.base, ada["agentKey"]) as (session, init):
            return init, await session.list_tools()

    init, listed = asyncio.run(go())
    instructions = init.instructions
    for words in ("index:negotiation:", "no user-facing output", "no clarifying questions", "most conservative",
                  "counter with specific", "reject with clear reasoning", "list_negotiations", "get_negotiation",
                  "respond_to_negotiation", "pickup"):
        assert words in instructions, words
    tools = {tool.name: tool for tool in listed.tools}
    assert set(tools) >= {"respond_to_negotiation", "list_negotiations", "get_negotiation"}
    schema = tools["respond_to_negotiation"].input_schema
    assert set(schema["required"]) == {"negotiationId", "action", "reasoning", "suggestedRoles"}
    assert set(schema["properties"]["action"]["enum"]) == set(turns.ACTIONS) == set(get_args(mcp_tools.ActionName))
    assert set(get_args(mcp_tools.RoleName)) == set(ROLES)


def test_an_agent_lists_reads_and_takes_its_turn(make_store, db_url):
    """spec 002: MCP Tools — list_negotiations shows the parked turn, get_negotiation returns the
    turns, respond_to_negotiation picks the turn up and takes it (stored as the personal agent's)."""
    mm = start(make_store, db_url=db_url)
    ada = person(mm, FOUNDER, agent=True)
    grace = person(mm, DESIGNER, agent=False)
    negotiation_id = mm.open_negotiation(grace["id"], ada["id"], SEED)  # the system proposes for Grace; Ada's turn parks
    base, key = mm.store.base, ada["agentKey"]

    listed = payload(call(base, key, "list_negotiations", {}))
    assert listed["status"] == "waiting_for_agent"
    assert [n["negotiationId"] for n in listed["negotiations"]] == [negotiation_id]
    assert listed["negotiations"][0]["state"] == "waiting_for_agent"

    state = payload(call(base, key, "get_negotiation", {"negotiationId": negotiation_id}))
    assert state["state"] == "waiting_for_agent" and state["waitingFor"] == ada["id"]
    [first] = state["turns"]
    assert first["action"] == "propose" and first["takenBy"] == "system" and first["speaker"] == grace["id"]
    assert first["assessment"]["reasoning"]
    assert set(first["assessment"]["suggestedRoles"]) == {"ownUser", "otherUser"}
    assert "message" in first
    assert state["turnContext"]["ownUser"]["userId"] == ada["id"]
    assert state["turnContext"]["otherUser"]["userId"] == grace["id"]
    assert "task" not in state

    after = payload(call(base, key, "respond_to_negotiation", respond(
        negotiation_id, "counter", reasoning="Ada needs a design co-founder; is Grace ready to commit?",
        suggestedRoles={"ownUser": "patient", "otherUser": "agent"}, message="Would you join full-time?")))
    assert after["turns"][1]["action"] == "counter"

    stored = mm.negotiation(negotiation_id)
    turn = stored["turns"][1]
    assert turn["takenBy"] == "personal" and turn["speaker"] == ada["id"] and turn["action"] == "counter"
    assert turn["assessment"] == {"reasoning": "Ada needs a design co-founder; is Grace ready to commit?",
                                  "suggestedRoles": {"ownUser": "patient", "otherUser": "agent"}}
    assert turn["message"] == "Would you join full-time?"
    assert len(stored["turns"]) >= 3  # the system answered for Grace in the same request


def test_a_question_by_a_personal_agent_is_accepted(make_store):
    """spec 002: Actions (question belongs to personal agents) through MCP Tools' respond_to_negotiation."""
    mm = start(make_store)
    ada = person(mm, FOUNDER, agent=True)
    grace = person(mm, DESIGNER, agent=False)
    negotiation_id = mm.open_negotiation(grace["id"], ada["id"], SEED)

    payload(call(mm.store.base, ada["agentKey"], "respond_to_negotiation",
                 respond(negotiation_id, "question", message="How many hours a week can Grace give?")))
    turn = mm.negotiation(negotiation_id)["turns"][1]
    assert (turn["action"], turn["takenBy"], turn["message"]) == ("question", "personal",
                                                                 "How many hours a week can Grace give?")


def test_a_wrong_key_is_a_tool_error_and_changes_nothing(make_store):
    """spec 002: MCP Tools, authenticated with the agent's API key; anything else is a tool
    error (not a crash) and the parked turn stays as it was."""
    mm = start(make_store)
    ada = person(mm, FOUNDER, agent=True)
    grace = person(mm, DESIGNER, agent=False)
    eve = person(mm, {"name": "Eve", "profile": {}}, agent=True)
    negotiation_id = mm.open_negotiation(grace["id"], ada["id"], SEED)
    base = mm.store.base
    before = mm.negotiation(negotiation_id)

    for key, status in ((None, "401"), ("hma_not-a-real-key", "401"), (ada["apiKey"], "403"), (OPERATOR, "403"),
                        (eve["agentKey"], "403")):
        for tool, arguments in (("respond_to_negotiation", respond(negotiation_id, "accept")),
                                ("get_negotiation", {"negotiationId": negotiation_id}),
                                ("list_negotiations", {})):
            result = call(base, key, tool, arguments)
            if key == eve["agentKey"] and tool == "list_negotiations":
                assert payload(result)["negotiations"] == []  # Eve's own queue: empty
                continue
            assert result.is_error, (key, tool)
            assert status in text(result), (key, tool, text(result))
    assert "unknown key" in text(call(base, "hma_not-a-real-key", "list_negotiations", {}))
    assert mm.negotiation(negotiation_id) == before


def test_malformed_turns_name_the_field_and_claim_nothing(make_store):
    """spec 002: MCP Tools (respond_to_negotiation's input fields): a malformed action, role or
    reasoning is a tool error naming the field, and the turn is not even picked up."""
    mm = start(make_store)
    ada = person(mm, FOUNDER, agent=True)
    grace = person(mm, DESIGNER, agent=False)
    negotiation_id = mm.open_negotiation(grace["id"], ada["id"], SEED)
    base, key = mm.store.base, ada["agentKey"]

    for arguments, field in ((respond(negotiation_id, "bribe"), "action"),
                             (respond(negotiation_id, "accept", suggestedRoles={"ownUser": "boss", "otherUser": "peer"}),
                              "ownUser"),
                             (respond(negotiation_id, "accept", reasoning="   "), "400 Bad Request: reasoning must"),
                             (respond(negotiation_id, "propose"), "propose")):
        result = call(base, key, "respond_to_negotiation", arguments)
        assert result.is_error and field in text(result), text(result)
    result = call(base, key, "list_negotiations", {"status": "completed"})
    assert result.is_error and "status" in text(result)
    after = mm.negotiation(negotiation_id)
    assert len(after["turns"]) == 1
    # A malformed turn is refused before the pickup; "propose" fails the turn rules after it.
    assert after["state"] in ("waiting_for_agent", "claimed")


def test_respond_holds_the_claim_in_queue_order(make_store):
    """spec 002: Turn Delivery (Polling) through MCP Tools: respond_to_negotiation picks the
    turn up only when it is the one pickup hands out (the oldest, or the one already held);
    otherwise it says which turn to take first. A finished negotiation answers 409."""
    mm = start(make_store)
    ada = person(mm, FOUNDER, agent=True)
    grace = person(mm, DESIGNER, agent=False)
    ben = person(mm, {**DESIGNER, "name": "Ben"}, agent=False)
    older = mm.open_negotiation(grace["id"], ada["id"], SEED)
    mm.store.clock.advance(seconds=1)
    newer = mm.open_negotiation(ben["id"], ada["id"], SEED)
    base, key = mm.store.base, ada["agentKey"]

    refused = call(base, key, "respond_to_negotiation", respond(newer, "reject"))
    assert refused.is_error and "409" in text(refused) and older in text(refused)
    assert mm.negotiation(older)["state"] == "claimed"
    assert mm.negotiation(newer)["state"] == "waiting_for_agent"

    payload(call(base, key, "respond_to_negotiation", respond(older, "reject", reasoning="Not now.")))
    assert mm.negotiation(older)["state"] == "completed"
    payload(call(base, key, "respond_to_negotiation", respond(newer, "reject", reasoning="Not now either.")))
    assert mm.negotiation(newer)["state"] == "completed"

    again = call(base, key, "respond_to_negotiation", respond(newer, "accept"))
    assert again.is_error and "409" in text(again) and "completed" in text(again)
    assert payload(call(base, key, "list_negotiations", {}))["negotiations"] == []


def test_mcp_passes_the_request_edge_and_cors(make_store):
    """The /mcp route is one of the app's: the host check refuses a foreign Host (DNS rebinding),
    responses carry the open CORS header, and a browser preflight is answered."""
    mm = start(make_store)
    http = mm.store.http
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "t", "version": "0"}}}
    accept = {"Accept": "application/json, text/event-stream"}
    foreign = http.post("/mcp", json=init, headers={**accept, "Host": "attacker.example"})
    assert foreign.status_code == 400 and "attacker.example" in foreign.json()["error"]
    ok = http.post("/mcp", json=init, headers={**accept, "Origin": "https://agent.example"})
    assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "*"
    assert ok.json()["result"]["instructions"] == mcp_tools.INSTRUCTIONS
    preflight = http.options("/mcp", headers={"Origin": "https://agent.example",
                                              "Access-Control-Request-Method": "POST",
                                              "Access-Control-Request-Headers": "authorization, content-type"})
    assert preflight.status_code == 204 and "authorization" in preflight.headers["access-control-allow-headers"]
