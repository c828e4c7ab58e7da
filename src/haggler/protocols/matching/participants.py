"""Users, their agents, and who is calling.

A user's API key and an agent's API key are shown once, at creation, and stored only as their
SHA-256. The operator authenticates with the token the server was started with, compared in
constant time; with no token configured nobody is the operator, so operator routes answer 403
rather than falling open.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Connection, Table, bindparam, insert, select

from haggler.agents.match_context import UserContext, UserIntent
from haggler.errors import Forbidden, InvalidInput, Unauthorized
from haggler.protocols.fields import bearer_credential, json_object, one_of, only, text
from haggler.storage.prepared import Prepared
from haggler.storage.rows import row_by_id
from haggler.storage.schema import match_agents, match_users
from haggler.trust.hashing import is_secret, secret_hash

USER_KEY_PREFIX, AGENT_KEY_PREFIX = "hmu_", "hma_"
ENABLED, DISABLED = "enabled", "disabled"
MAX_INTENTS, MAX_TAGS = 50, 20
MAX_PROFILE_BYTES = 16 * 1024


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a request comes from: the operator, a user (by the user's key) or an agent (by its key)."""

    kind: str  # operator | user | agent
    user_id: str | None = None
    agent_id: str | None = None

    @property
    def is_operator(self) -> bool:
        return self.kind == "operator"

    def require_operator(self) -> None:
        if not self.is_operator:
            raise Forbidden("this route is for the operator (Authorization: Bearer <operator token>)")

    def may_see(self, *user_ids: str) -> bool:
        """The operator sees everything; a user, or a user's agent, sees what involves that user."""
        return self.is_operator or self.user_id in user_ids


OPERATOR = Principal("operator")


#: Every agent request looks its key up, and with it what :func:`calling_agent` checks of the
#: agent: compiled once (storage/prepared.py).
_AGENT_BY_KEY = Prepared(select(match_agents.c.id, match_agents.c.user_id, match_agents.c.negotiation_mode)
                         .where(match_agents.c.key_hash == bindparam("key_hash")))


def authenticate(conn: Connection, authorization: str | None, operator_token: str | None) -> Principal:
    """The principal an ``Authorization: Bearer <key>`` header belongs to; Unauthorized otherwise."""
    return authenticate_with_row(conn, authorization, operator_token)[0]


def authenticate_with_row(conn: Connection, authorization: str | None,
                          operator_token: str | None) -> tuple[Principal, Any | None]:
    """:func:`authenticate`, with the agent's row (``id``, ``user_id``, ``negotiation_mode``) when
    the key is an agent's (None otherwise): a polling agent's request checks its agent in
    :func:`calling_agent` without reading the row a second time."""
    credential = bearer_credential(authorization, "your key")
    if is_secret(credential, operator_token):
        return OPERATOR, None
    if credential.startswith(AGENT_KEY_PREFIX):
        row = _AGENT_BY_KEY.row(conn, {"key_hash": secret_hash(credential)})
        if row is not None:
            return Principal("agent", user_id=row.user_id, agent_id=row.id), row
    elif credential.startswith(USER_KEY_PREFIX):
        user_id = conn.execute(select(match_users.c.id).where(match_users.c.key_hash == secret_hash(credential))).scalar()
        if user_id is not None:
            return Principal("user", user_id=user_id), None
    raise Unauthorized("unknown key")


# -- users -----------------------------------------------------------------------------------------

def parse_intents(value: object) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput("intents must be a list of {description, tags?}")
    if len(value) > MAX_INTENTS:
        raise InvalidInput(f"intents: at most {MAX_INTENTS}")
    intents = []
    for i, item in enumerate(value):
        where = f"intents[{i}]"
        intent = json_object(item, where)
        only(intent, ("description", "tags"), where=where)
        tags = intent.get("tags", [])
        if not isinstance(tags, list) or len(tags) > MAX_TAGS:
            raise InvalidInput(f"{where}.tags must be a list of at most {MAX_TAGS} strings")
        intents.append({"description": text(intent.get("description"), f"{where}.description", max_length=2000),
                        "tags": [text(tag, f"{where}.tags[{j}]", max_length=100) for j, tag in enumerate(tags)]})
    return intents


def create_user(conn: Connection, body: dict[str, Any], at: datetime) -> tuple[dict[str, Any], str]:
    """A new user; returns its view and its API key (the only time the key is seen)."""
    only(body, ("name", "profile", "intents"))
    profile = json_object(body.get("profile", {}), "profile")
    encoded = json.dumps(profile)
    if len(encoded.encode()) > MAX_PROFILE_BYTES:
        raise InvalidInput(f"profile: at most {MAX_PROFILE_BYTES} bytes of JSON")
    row = {"id": "usr_" + secrets.token_urlsafe(12), "name": text(body.get("name"), "name", max_length=200),
           "profile": encoded, "intents": json.dumps(parse_intents(body.get("intents"))), "created_at": at}
    return user_view(row), _insert_with_key(conn, match_users, row, USER_KEY_PREFIX)


def _insert_with_key(conn: Connection, table: Table, row: dict[str, Any], prefix: str) -> str:
    """Insert ``row`` with a new API key's hash; returns the key (the only time it is seen)."""
    api_key = prefix + secrets.token_urlsafe(32)
    conn.execute(insert(table).values(**row, key_hash=secret_hash(api_key)))
    return api_key


def user_row(conn: Connection, user_id: str) -> Any:
    return row_by_id(conn, match_users, user_id, "user")


def user_view(row: Any) -> dict[str, Any]:
    data = row if isinstance(row, dict) else row._mapping
    return {"id": data["id"], "name": data["name"], "profile": json.loads(data["profile"]),
            "intents": json.loads(data["intents"])}


def user_context(row: Any) -> UserContext:
    """What a negotiator reads of a user: the profile (with the name, when the profile has none)
    and the intents."""
    return _user_context(row.id, row.name, row.profile, row.intents)


@lru_cache(maxsize=1024)
def _user_context(user_id: str, name: str, profile_json: str, intents_json: str) -> UserContext:
    """:func:`user_context` of the row as stored, one context per stored state: every turn of a
    negotiation reads both users again, and a context parsed once keeps its fingerprint and so
    its negotiator's readings (``match_context.per_user``) at hand. Nothing changes a context
    once made (``match_context``), so sharing it is safe."""
    profile = json.loads(profile_json)
    profile.setdefault("name", name)
    intents = tuple(UserIntent(i["description"], tuple(i.get("tags", ()))) for i in json.loads(intents_json))
    return UserContext(user_id, profile, intents)


def context_json(user: UserContext) -> dict[str, Any]:
    """A user's projected context, shaped as ``parse_context`` reads it."""
    return {"userId": user.user_id, "profile": dict(user.profile),
            "intents": [{"description": i.description, "tags": list(i.tags)} for i in user.intents]}


# -- agents ----------------------------------------------------------------------------------------

def create_agent(conn: Connection, caller: Principal, user_id: str, body: dict[str, Any],
                 at: datetime) -> tuple[dict[str, Any], str]:
    """A new agent for ``user_id`` (by the operator or by that user); returns its view and key."""
    if not (caller.is_operator or (caller.kind == "user" and caller.user_id == user_id)):
        raise Forbidden("only the operator or the user themself can add an agent to a user")
    user_row(conn, user_id)
    only(body, ("name", "negotiationMode"))
    row = {"id": "agt_" + secrets.token_urlsafe(12), "user_id": user_id,
           "name": text(body.get("name"), "name", max_length=200),
           "negotiation_mode": one_of(body.get("negotiationMode", ENABLED), "negotiationMode", (ENABLED, DISABLED)),
           "created_at": at}
    return agent_view(row), _insert_with_key(conn, match_agents, row, AGENT_KEY_PREFIX)


def agent_row(conn: Connection, agent_id: str) -> Any:
    return row_by_id(conn, match_agents, agent_id, "agent")


def agent_view(row: Any) -> dict[str, Any]:
    data = row if isinstance(row, dict) else row._mapping
    return {"id": data["id"], "userId": data["user_id"], "name": data["name"],
            "negotiationMode": data["negotiation_mode"]}


def calling_agent(conn: Connection, caller: Principal, agent_id: str, key_row: Any | None = None) -> Any:
    """The agent of a polling route: the path's agent must be the key's own agent (which
    belongs to its user by construction), and it must be negotiating. ``key_row``: the agent's
    row as read with the key in this transaction (:func:`authenticate_with_row`), else it is read
    here."""
    if caller.kind != "agent" or caller.agent_id != agent_id:
        raise Forbidden("use the API key of the agent named in the path")
    row = agent_row(conn, agent_id) if key_row is None else key_row
    if row.user_id != caller.user_id:  # assertAgentOwnership: cannot fail unless keys were moved
        raise Forbidden("this agent does not belong to the key's user")
    if row.negotiation_mode != ENABLED:
        raise Forbidden("this agent's negotiationMode is disabled: it takes no turns")
    return row


def has_personal_agent(conn: Connection, user_id: str) -> bool:
    """Spec "Roles": a user with an enabled agent is a personal participant."""
    return conn.execute(select(match_agents.c.id).where(match_agents.c.user_id == user_id,
                                                        match_agents.c.negotiation_mode == ENABLED)
                        .limit(1)).first() is not None
