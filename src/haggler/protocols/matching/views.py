"""The matching API's wire shapes, for the OpenAPI document (the dicts the modules build are
what is sent; the fuzz test holds every response to these). Reference: docs/matching-api.md."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from haggler.server.openapi import NO_BODY, Operation, Param, WireModel
from haggler.server.responses import ErrorBody

Role = Literal["agent", "patient", "peer"]
ActionName = Literal["propose", "counter", "accept", "reject", "question"]
TaskStateName = Literal["submitted", "working", "waiting_for_agent", "claimed", "completed"]


class MatchIntent(WireModel):
    description: str = Field(max_length=2000)
    tags: list[str] | None = None


class MatchUserBody(WireModel):
    name: str = Field(max_length=200)
    profile: dict[str, Any] | None = None
    intents: list[MatchIntent] | None = None


class MatchUser(WireModel):
    id: str
    name: str
    profile: dict[str, Any]
    intents: list[MatchIntent]


class MatchUserCreated(MatchUser):
    apiKey: str


class MatchAgentBody(WireModel):
    name: str = Field(max_length=200)
    negotiationMode: Literal["enabled", "disabled"] | None = None


class MatchAgent(WireModel):
    id: str
    userId: str
    name: str
    negotiationMode: Literal["enabled", "disabled"]


class MatchAgentCreated(MatchAgent):
    apiKey: str


class SeedActor(WireModel):
    userId: str
    role: Role


class SeedAssessmentModel(WireModel):
    score: int = Field(ge=0, le=100)
    reasoning: str
    valencyRole: Role
    actors: list[SeedActor] | None = None


class OpportunityBody(WireModel):
    sourceUserId: str
    candidateUserId: str
    seedAssessment: SeedAssessmentModel
    discoveryQuery: str | None = None


class OpportunityOpened(WireModel):
    id: str
    status: Literal["negotiating"]
    negotiationId: str


class AgreedRole(WireModel):
    userId: str
    role: Role


class Answers(WireModel):
    source: Literal["accept", "decline"] | None
    candidate: Literal["accept", "decline"] | None


class OpportunityModel(WireModel):
    id: str
    sourceUserId: str
    candidateUserId: str
    seedAssessment: SeedAssessmentModel
    score: int
    status: Literal["negotiating", "pending", "rejected", "stalled", "accepted", "declined"]
    negotiationId: str
    answers: Answers
    createdAt: str
    updatedAt: str
    discoveryQuery: str | None = None
    agreedRoles: list[AgreedRole] | None = None


class DiscoverBody(WireModel):
    threshold: int | None = Field(None, ge=0, le=100)
    limit: int | None = Field(None, ge=1, le=50)
    discoveryQuery: str | None = None


class Discovered(WireModel):
    opportunities: list[OpportunityOpened]
    considered: int
    threshold: int


class SuggestedRoles(WireModel):
    ownUser: Role
    otherUser: Role


class TurnAssessment(WireModel):
    reasoning: str
    suggestedRoles: SuggestedRoles


class RespondBody(WireModel):
    action: ActionName
    assessment: TurnAssessment
    message: str | None = None


class HistoryTurn(WireModel):
    turnNumber: int
    speaker: str
    action: ActionName
    assessment: TurnAssessment
    message: str | None = None


class StoredTurnModel(HistoryTurn):
    participant: str
    takenBy: Literal["system", "personal"]
    at: str


class MatchOutcome(WireModel):
    hasOpportunity: bool
    agreedRoles: list[AgreedRole]
    reasoning: str
    turnCount: int
    reason: Literal["turn_cap", "timeout"] | None = None


class TraceEntry(WireModel):
    turn: int
    participant: str
    summary: ActionName


class Conversation(WireModel):
    id: str
    participants: list[str]


class NegotiationModel(WireModel):
    id: str
    opportunityId: str
    state: TaskStateName
    maxTurns: int | None
    waitingFor: str | None
    claimDeadline: str | None
    parkDeadline: str | None
    expiresAt: str | None
    conversation: Conversation
    turns: list[StoredTurnModel]
    outcome: MatchOutcome | None
    trace: list[TraceEntry]
    #: The A2A Task document (a2a-sdk's shape).
    task: dict[str, Any]


class UserContextModel(WireModel):
    userId: str
    profile: dict[str, Any]
    intents: list[MatchIntent]


class ClaimModel(WireModel):
    negotiationId: str
    opportunityId: str
    turnNumber: int
    maxTurns: int | None
    counterpartyAction: ActionName | None
    ownUser: UserContextModel
    otherUser: UserContextModel
    seedAssessment: SeedAssessmentModel
    history: list[HistoryTurn]
    claimedBy: str
    deadline: str
    parkDeadline: str
    discoveryQuery: str | None = None


class WaitingEntry(WireModel):
    negotiationId: str
    opportunityId: str
    state: Literal["waiting_for_agent", "claimed"]
    parkedAt: str
    parkDeadline: str


class WaitingList(WireModel):
    negotiations: list[WaitingEntry]


class MatchTypeRates(WireModel):
    negotiations: int
    acceptedRate: float
    rejectedRate: float
    stalledRate: float
    accepted: int
    rejected: int
    stalled: int


class ObjectionTheme(WireModel):
    theme: str
    turns: int


class InsightsModel(WireModel):
    negotiations: int
    byMatchType: dict[str, MatchTypeRates]
    objectionThemes: list[ObjectionTheme]
    objectingTurns: int
    turnCounts: dict[str, dict[str, int]]


def openapi_operations(prefix: str) -> dict[tuple[str, str], Operation]:
    """The matching API's operations as the OpenAPI document describes them."""
    tag = ("match negotiation",)
    errors = {400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody}
    agent = f"{prefix}/agents/{{agent_id}}"
    opportunity = f"{prefix}/opportunities/{{opportunity_id}}"
    return {
        ("post", f"{prefix}/users"): Operation("Create a user (operator; the user's key is shown once)",
                                               {201: MatchUserCreated, **errors}, body=MatchUserBody, tags=tag),
        ("get", f"{prefix}/users/{{user_id}}"): Operation("A user (operator or the user)", {200: MatchUser, **errors},
                                                          tags=tag),
        ("post", f"{prefix}/users/{{user_id}}/agents"): Operation(
            "Add an agent to a user (operator or the user; the agent's key is shown once)",
            {201: MatchAgentCreated, **errors}, body=MatchAgentBody, tags=tag),
        ("post", f"{prefix}/users/{{user_id}}/discover"): Operation(
            "Score the other users and open a negotiating opportunity for each above the threshold (operator)",
            {200: Discovered, **errors}, body=DiscoverBody, body_required=False, tags=tag),
        ("get", agent): Operation("An agent (operator, its user, its user's agents)", {200: MatchAgent, **errors},
                                  tags=tag),
        ("post", f"{prefix}/opportunities"): Operation("Open an opportunity; its negotiation starts at once (operator)",
                                                       {201: OpportunityOpened, **errors}, body=OpportunityBody,
                                                       tags=tag),
        ("get", opportunity): Operation("An opportunity (operator or its two users)", {200: OpportunityModel, **errors},
                                        tags=tag),
        ("post", f"{opportunity}/accept"): Operation("The user accepts a pending opportunity (user key)",
                                                     {200: OpportunityModel, **errors}, tags=tag),
        ("post", f"{opportunity}/decline"): Operation("The user declines a pending opportunity (user key)",
                                                      {200: OpportunityModel, **errors}, tags=tag),
        ("get", f"{prefix}/negotiations/insights"): Operation(
            "Accept/reject rates by match type, objection themes, turn counts; no scores (operator)",
            {200: InsightsModel, **errors}, tags=tag),
        ("get", f"{prefix}/negotiations/{{negotiation_id}}"): Operation(
            "A negotiation: conversation, A2A task, turns, outcome and trace", {200: NegotiationModel, **errors},
            tags=tag),
        ("get", f"{agent}/negotiations"): Operation(
            "Negotiations waiting for this agent's user (agent key)", {200: WaitingList, **errors},
            query=(Param("status", {"type": "string", "enum": ["waiting_for_agent"]}),), tags=tag),
        ("post", f"{agent}/negotiations/pickup"): Operation(
            "Claim the oldest turn waiting for this agent's user (agent key); 204 when none waits",
            {200: ClaimModel, 204: NO_BODY, **errors}, tags=tag),
        ("post", f"{agent}/negotiations/{{negotiation_id}}/respond"): Operation(
            "Take the claimed turn (agent key)", {200: NegotiationModel, **errors}, body=RespondBody, tags=tag),
    }
