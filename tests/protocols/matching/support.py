"""Helpers for match negotiation tests: an operator, users and agents talking to a real store."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from haggler.protocols.matching.settings import MatchingSettings
from tests.support.match_pairs import PAIRS

TOKEN = "operator-token-for-tests-0123456789"
SETTINGS = MatchingSettings(operator_token=TOKEN)


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def pair(kind: str, index: int = 0) -> dict[str, Any]:
    """The ``index``-th labelled pair of a category: good, superficial or one_sided."""
    return [p for p in PAIRS if p["category"] == kind][index]


def turn(action: str, own: str = "peer", other: str = "peer", reasoning: str = "Because.", **extra: Any) -> dict:
    """A respond body."""
    return {"action": action, "assessment": {"reasoning": reasoning,
                                             "suggestedRoles": {"ownUser": own, "otherUser": other}}, **extra}


@dataclass
class Actor:
    """A user or an agent, with its key."""

    http: httpx.Client
    id: str
    key: str
    user_id: str | None = None

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return self.http.post(path, json=body, headers=bearer(self.key))

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path, params=params, headers=bearer(self.key))

    def pickup(self) -> httpx.Response:
        return self.post(f"/api/agents/{self.id}/negotiations/pickup")

    def respond(self, negotiation_id: str, body: Any) -> httpx.Response:
        return self.post(f"/api/agents/{self.id}/negotiations/{negotiation_id}/respond", body)


class Operator:
    def __init__(self, http: httpx.Client, token: str = TOKEN) -> None:
        self.http = http
        self.token = token

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return self.http.post(path, json=body, headers=bearer(self.token))

    def get(self, path: str, **params: Any) -> httpx.Response:
        return self.http.get(path, params=params, headers=bearer(self.token))

    def user(self, side: dict[str, Any]) -> Actor:
        """A user from one side (``a`` or ``b``) of a labelled pair."""
        response = self.post("/api/users", {"name": side["profile"]["name"], "profile": side["profile"],
                                            "intents": side["intents"]})
        assert response.status_code == 201, response.text
        return Actor(self.http, response.json()["id"], response.json()["apiKey"])

    def agent(self, user: Actor, mode: str = "enabled") -> Actor:
        response = user.post(f"/api/users/{user.id}/agents", {"name": "my agent", "negotiationMode": mode})
        assert response.status_code == 201, response.text
        return Actor(self.http, response.json()["id"], response.json()["apiKey"], user_id=user.id)

    def users(self, labelled: dict[str, Any]) -> tuple[Actor, Actor]:
        return self.user(labelled["a"]), self.user(labelled["b"])

    def open(self, source: Actor, candidate: Actor, seed: dict[str, Any] | None = None, **extra: Any) -> dict:
        seed = seed or {"score": 70, "reasoning": "They might help each other.", "valencyRole": "peer"}
        response = self.post("/api/opportunities", {"sourceUserId": source.id, "candidateUserId": candidate.id,
                                                    "seedAssessment": seed, **extra})
        assert response.status_code == 201, response.text
        return response.json()

    def negotiation(self, negotiation_id: str) -> dict[str, Any]:
        response = self.get(f"/api/negotiations/{negotiation_id}")
        assert response.status_code == 200, response.text
        return response.json()

    def opportunity(self, opportunity_id: str) -> dict[str, Any]:
        response = self.get(f"/api/opportunities/{opportunity_id}")
        assert response.status_code == 200, response.text
        return response.json()
