"""The match negotiation MCP server (spec 002, "MCP Tools"), mounted by the app at ``/mcp``.

A personal agent's runtime connects here with the agent's own API key (``Authorization: Bearer
<agent key>`` on every HTTP request) and takes its user's turns with three tools:
``list_negotiations``, ``get_negotiation`` and ``respond_to_negotiation``. The tools are thin: each
is one :class:`~haggler.protocols.matching.routes.Matching` operation, the same one the REST routes
call, so claims, deadlines and turn rules cannot drift between the two surfaces.

The turn-mode contract (spec: "Turn mode behavioral contract") lives in the server's
``instructions``, so every MCP-connected runtime gets it on ``initialize`` without a skill file.
The transport is stateless streamable HTTP: each call is its own request and carries its own key,
so there is no MCP session to hijack or to keep alive across restarts.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any, Callable, Literal, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import HTTPConnection
from starlette.routing import BaseRoute

from haggler import __version__
from haggler.errors import Conflict, Forbidden, HagglerError, InvalidInput
from haggler.protocols.matching import negotiations, opportunities, turns
from haggler.protocols.matching.participants import Principal
from haggler.protocols.matching.routes import Matching
from haggler.server.errors import status_for

#: Where the app serves the MCP endpoint.
MCP_PATH = "/mcp"
#: The session-key prefix of a negotiation turn's subagent (spec: "Personal agent reference implementation").
TURN_SESSION_PREFIX = "index:negotiation:"

# Literal types put the allowed values into the tools' input schema, where a model reads them;
# tests check them against turns.ACTIONS and match_context.ROLES, which the turn parser enforces.
ActionName = Literal["propose", "counter", "accept", "reject", "question",
                     "outreach", "withdraw", "decline", "ask_user"]
RoleName = Literal["agent", "patient", "peer"]

INSTRUCTIONS = f"""Match negotiation for a user's personal agent (Index Network protocol, spec 002).
Authenticate every request with your agent's API key: `Authorization: Bearer <agent key>`.

Polling flow
1. list_negotiations() lists the negotiations whose turn is your user's (status waiting_for_agent,
   or already claimed). A background poller may instead call POST /api/agents/<agentId>/negotiations/pickup
   and start one silent subagent per turn, with a session key prefixed `{TURN_SESSION_PREFIX}`.
2. get_negotiation(negotiationId) returns the negotiation with every turn so far (action,
   assessment.reasoning, assessment.suggestedRoles, message) and, while the turn is your user's,
   turnContext: both users' profiles and intents, the seed assessment and the turn number.
3. respond_to_negotiation(...) takes the turn. It holds the claim for you: when you have not
   picked the turn up, it picks it up first. It refuses when another turn of yours must be taken
   first, when another agent of your user holds this one, or when the turn is not your user's.
Actions: propose (the first turn only), counter (partial agreement, name your objections),
accept, reject, question (ask the other side's agent; personal agents only).
Negotiations v2 (get_negotiation shows protocolVersion, and turnContext your seat, finalTurn and
allowedActions; anything else is refused with 400 naming them): the initiator seat may outreach
(the first turn only), counter, question or withdraw, and never accept; the counterparty seat may
accept, decline, counter or question. On the final turn the initiator must withdraw or counter and
the counterparty must accept or decline. Where allowed, ask_user pauses to consult your own user
(message: the question; once per side): the negotiation is input_required until your user answers
(answer_consultation, or POST /api/negotiations/<id>/answer with the user's key) or the answer
window lapses; the answer comes back in turnContext.consultations.
Roles in suggestedRoles, for ownUser (your user) and otherUser: agent (gives what the other
seeks), patient (receives it), peer (a mutual exchange).
Unanswered claims go back to the queue after the claim timeout; a turn nobody takes within
24 hours is taken by the system negotiator.

Negotiation turn mode
When your session key starts with `{TURN_SESSION_PREFIX}`, or your task is to take a negotiation
turn, you are running in the background on your user's behalf:
- Produce no user-facing output: nobody reads it. Your result is the respond_to_negotiation call.
- Ask no clarifying questions: there is no user in the loop. (The `question` action asks the other
  side's agent; it is a turn of the negotiation, not a question to your user.)
- If the decision is ambiguous, pick the most conservative action: counter with specific
  objections, or reject with clear reasoning. Do not accept on a guess.
Read the turns and the turn context, decide, and respond once."""

T = TypeVar("T")


class SuggestedRoles(BaseModel):
    """The roles this turn suggests: ``ownUser`` is the agent's own user (spec: "Turn structure")."""

    model_config = ConfigDict(extra="forbid")
    ownUser: RoleName = Field(description="your user's role: agent, patient or peer")  # noqa: N815 - wire name
    otherUser: RoleName = Field(description="the other user's role")  # noqa: N815 - wire name


def _agent(matching: Matching, ctx: Context) -> Principal:
    """Authenticate the HTTP request this tool call arrived on; only an agent's key takes turns."""
    request = ctx.request_context.request
    caller = matching.caller(request if isinstance(request, HTTPConnection) else None)
    if caller.kind != "agent" or caller.agent_id is None:
        raise Forbidden("these tools take a personal agent's API key (Authorization: Bearer hma_...), "
                        "not a user key or the operator token")
    return caller


def _guarded(call: Callable[[], T]) -> T:
    """Run a Matching operation; its domain errors become tool errors with their HTTP status,
    so the model sees ``409 Conflict: ...`` instead of the SDK's generic crash message."""
    try:
        return call()
    except HagglerError as exc:
        status = status_for(exc)
        raise ToolError(f"{status} {HTTPStatus(status).phrase}: {exc.message}") from exc


def _take_turn(matching: Matching, caller: Principal, negotiation_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """Hold the claim, then respond. Pickup claims the agent's held turn or its user's oldest
    waiting one, so the respond goes ahead only when that is this negotiation: a blind respond
    would 409 on an unclaimed turn, and claiming by id would jump the queue the spec orders."""
    agent_id = str(caller.agent_id)
    try:  # a malformed turn is refused before anything is claimed, naming the tool's own field
        turns.parse_turn(body, str(caller.user_id))
    except InvalidInput as exc:
        raise InvalidInput(exc.message.replace("assessment.", "")) from exc
    task = matching.task(caller, negotiation_id)  # 404 / 403, and passed deadlines applied
    if task.state == negotiations.INPUT_REQUIRED and task.waiting_user_id == caller.user_id:
        raise Conflict(f"negotiation {negotiation_id} waits for your user's answer to your ask_user "
                       f"(until {task.answer_deadline.isoformat()}); answer_consultation relays it")
    if task.waiting_user_id != caller.user_id:
        raise Conflict(f"negotiation {negotiation_id} is {task.state} and not waiting for your user's turn; "
                       "list_negotiations shows the ones that are")
    claim = matching.pickup(caller, agent_id)
    if claim is None:
        raise Conflict("another agent of your user holds the claim on this turn")
    if claim["negotiationId"] != negotiation_id:
        raise Conflict(f"you now hold the turn of negotiation {claim['negotiationId']} (claimed until "
                       f"{claim['deadline']}): take that turn first; get_negotiation shows it")
    return matching.respond(caller, agent_id, negotiation_id, body)


def _state(matching: Matching, caller: Principal, negotiation_id: str) -> dict[str, Any]:
    """The negotiation as GET /api/negotiations/{id} shows it, less the A2A task document (which
    repeats every turn), plus the parked turn's context while the turn is the caller's user's:
    the profiles and seed an agent needs to decide, which it would otherwise only see on pickup."""
    task = matching.task(caller, negotiation_id)
    with matching.db.read() as conn:
        view = opportunities.negotiation_view(conn, caller, negotiation_id)
    view.pop("task", None)
    if task.waiting_user_id == caller.user_id and task.turn_context is not None:
        view["turnContext"] = json.loads(task.turn_context)
    return view


def build_server(matching: Matching) -> MCPServer:
    """The MCP server whose tools act for the agent whose key each request carries."""
    server = MCPServer("haggler-matching", instructions=INSTRUCTIONS, version=__version__)

    @server.tool()
    def list_negotiations(ctx: Context, status: Literal["waiting_for_agent"] = "waiting_for_agent") -> dict[str, Any]:
        """Negotiations whose turn is your user's: waiting_for_agent (the only filter), oldest
        first, including one you or another of your user's agents has already claimed."""
        caller = _guarded(lambda: _agent(matching, ctx))
        return {"status": status,
                "negotiations": _guarded(lambda: matching.waiting(caller, str(caller.agent_id)))}

    @server.tool()
    def get_negotiation(ctx: Context, negotiationId: str) -> dict[str, Any]:  # noqa: N803 - spec's name
        """The full negotiation: state, every turn (action, assessment.reasoning,
        assessment.suggestedRoles, message), the outcome once it has ended and, while it is
        your user's turn, turnContext (both users' profiles and intents, the seed assessment)."""
        caller = _guarded(lambda: _agent(matching, ctx))
        return _guarded(lambda: _state(matching, caller, negotiationId))

    @server.tool()
    def respond_to_negotiation(ctx: Context, negotiationId: str, action: ActionName,  # noqa: N803 - spec's names
                               reasoning: str, suggestedRoles: SuggestedRoles,
                               message: str | None = None) -> dict[str, Any]:
        """Take your user's turn in a negotiation. action: propose (first turn only), counter
        (with specific objections), accept, reject or question (to the other side's agent).
        reasoning: why. suggestedRoles: {ownUser, otherUser}, each agent, patient or peer.
        message: optional free text. Picks the turn up first when you have not; returns the
        negotiation after your turn (and the system's reply, when the other side has no agent)."""
        caller = _guarded(lambda: _agent(matching, ctx))
        body: dict[str, Any] = {"action": action,
                                "assessment": {"reasoning": reasoning, "suggestedRoles": suggestedRoles.model_dump()}}
        if message is not None:
            body["message"] = message
        view = _guarded(lambda: _take_turn(matching, caller, negotiationId, body))
        view.pop("task", None)
        return view

    @server.tool()
    def answer_consultation(ctx: Context, negotiationId: str, answer: str) -> dict[str, Any]:  # noqa: N803
        """Relay your user's answer to the ask_user your side paused on (Negotiations v2). The
        negotiation leaves input_required and your turn comes back with the answer in its
        turnContext.consultations. Returns the negotiation."""
        caller = _guarded(lambda: _agent(matching, ctx))
        view = _guarded(lambda: matching.answer(caller, negotiationId, {"answer": answer}))
        view.pop("task", None)
        return view

    return server


def mount(server: MCPServer) -> list[BaseRoute]:
    """The streamable-HTTP route to add to the app; run ``server.session_manager.run()`` in its lifespan.

    The SDK's own Host/Origin check (DNS-rebinding protection) is off: the app's request edge
    already refuses any host the operator did not allow, for every path, and would otherwise
    disagree with it behind --public-url. Origins are open like the rest of the API: a key, not a
    cookie, authenticates, so a foreign page gains nothing it does not already hold."""
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, stateless_http=True, json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return list(app.routes)
