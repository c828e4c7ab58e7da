"""Who is who on the market: agents, their keys, their owners' keys and mandates (spec 003:
Owner Mandate Format, Security Model).

Registration binds three things at once and for good: an ``agentId``, the agent's Ed25519 key
(it signs the agent's messages) and its owner's key (it signs the agent's mandates and the owner's
approvals of deals). From then on every message an agent sends is checked against its own key,
and every mandate against its owner's: a signature that does not verify is 401 and changes
nothing. Registration also hands out an agent token (shown once, stored as its SHA-256) for what
carries no signed message: the inbox, the agent's own views, cancelling an order.

A mandate on file is the owner's latest (a newer ``issuedAt`` replaces it; an older or equal one
is refused, so a captured old mandate cannot be replayed). An agent with none may do nothing that
commits to a price: enforcement fails closed.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Iterable, Mapping

from sqlalchemy import Connection, bindparam, insert, or_, select, update

from haggler.errors import Conflict, InvalidInput, Unauthorized
from haggler.protocols.fields import bearer_credential
from haggler.protocols.market.mandates import Mandate, MandateViolation, Violation, parse_mandate
from haggler.protocols.market.messages import InvalidMessage, validate, validate_definition
from haggler.storage.prepared import Prepared
from haggler.storage.rows import find_by_id
from haggler.storage.schema import market_agents, market_mandates
from haggler.trust.hashing import secret_hash
from haggler.trust.keys import PublicKeyError
from haggler.trust.messages import decode_hex_public_key, verify_message

TOKEN_PREFIX = "mkt_"
_REGISTRATION_FIELDS = ("agentId", "matrixId", "publicKey", "ownerPublicKey")


class BadSignature(Unauthorized):
    """A signature that does not verify against the key it must (HTTP 401). The route writes it
    to the audit log of the agent the message claims to come from: a forged message is exactly
    what that agent's owner wants to hear about."""

    def __init__(self, message: str, agent_id: str, signed: str) -> None:
        super().__init__(message)
        self.agent_id = agent_id
        self.signed = signed


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    matrix_id: str | None
    public_key: str
    owner_public_key: str

    def view(self) -> dict[str, Any]:
        """What anyone may see of an agent: its identity and both public keys."""
        out: dict[str, Any] = {"agentId": self.id, "publicKey": self.public_key, "ownerPublicKey": self.owner_public_key}
        if self.matrix_id:
            out["matrixId"] = self.matrix_id
        return out


def _agent(row: Any) -> Agent:
    return Agent(row.id, row.matrix_id, row.public_key, row.owner_public_key)


def register(conn: Connection, body: object, now: datetime) -> tuple[Agent, str]:
    """``POST /market/agents``: the new agent and its token (422 naming the field at fault, 409
    when the agentId is taken)."""
    if not isinstance(body, dict):
        raise InvalidMessage("", "must be a JSON object")
    unknown = sorted(set(body) - set(_REGISTRATION_FIELDS))
    if unknown:
        raise InvalidMessage(f"/{unknown[0]}", f"unknown field; allowed: {', '.join(_REGISTRATION_FIELDS)}")
    # The ids follow the messages' own definition of an agent reference.
    validate_definition({field: body[field] for field in ("agentId", "matrixId") if field in body}, "agentRef")
    for field in ("publicKey", "ownerPublicKey"):
        try:
            decode_hex_public_key(body.get(field))
        except (PublicKeyError, ValueError) as exc:
            raise InvalidMessage(f"/{field}", str(exc) if field in body else "is required") from None
    if body["publicKey"] == body["ownerPublicKey"]:
        raise InvalidMessage("/ownerPublicKey", "must differ from publicKey: the owner's key is what the agent "
                                                "cannot sign with")
    if conn.execute(select(market_agents.c.id).where(market_agents.c.id == body["agentId"])).first() is not None:
        raise Conflict(f"agentId {body['agentId']} is already registered")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    conn.execute(insert(market_agents).values(
        id=body["agentId"], matrix_id=body.get("matrixId"), public_key=body["publicKey"],
        owner_public_key=body["ownerPublicKey"], token_hash=secret_hash(token), created_at=now))
    return Agent(body["agentId"], body.get("matrixId"), body["publicKey"], body["ownerPublicKey"]), token


def find(conn: Connection, agent_id: str) -> Agent | None:
    row = find_by_id(conn, market_agents, agent_id)
    return None if row is None else _agent(row)


def bound_to(conn: Connection, matrix_id: str) -> Agent | None:
    """An agent registered with this Matrix id (the Matrix door's caller), if any."""
    row = conn.execute(select(market_agents).where(market_agents.c.matrix_id == matrix_id).limit(1)).first()
    return None if row is None else _agent(row)


#: The agent of a token, read by every request that carries no signed message (a deal read
#: back, the inbox): compiled once (``storage/prepared.py``).
_BY_TOKEN = Prepared(select(market_agents).where(market_agents.c.token_hash == bindparam("token_hash")))


def authenticate(conn: Connection, authorization: str | None) -> Agent:
    """The agent whose token is in ``Authorization: Bearer mkt_…``; 401 otherwise."""
    token = bearer_credential(authorization, "your agent token")
    row = _BY_TOKEN.row(conn, {"token_hash": secret_hash(token)})
    if row is None:
        raise Unauthorized("unknown agent token")
    return _agent(row)


def sender(conn: Connection, agent_id: str, message: Mapping[str, Any]) -> Agent:
    """The registered agent ``agent_id``, once ``message``'s signature verifies against its key.

    An unknown agent and a bad signature are the same 401: either way nobody proved they are the
    agent the message names."""
    agent = find(conn, agent_id)
    if agent is None or not verify_message(agent.public_key, message):
        kind = str(message.get("type", "message"))
        raise BadSignature(f"the {kind} is not signed by a registered agent {agent_id!r}: sign the RFC 8785 "
                           "canonical JSON of the message without its signature field", agent_id, kind)
    return agent


def check_owner_signed(agent: Agent, signed: Mapping[str, Any], what: str) -> None:
    """401 unless ``signed`` (a mandate, or a listing's embedded mandate) names the agent's owner's
    key as its ``publicKey`` and carries that key's signature."""
    if signed.get("publicKey") != agent.owner_public_key or not verify_message(agent.owner_public_key, signed):
        raise BadSignature(f"{what} is not signed by the owner key registered for agent {agent.id!r}", agent.id, what)


# -- mandates --------------------------------------------------------------------------------------


def file_mandate(conn: Connection, body: object, now: datetime) -> tuple[Mandate, bool]:
    """``POST /market/mandates``: verify an owner-signed mandate and make it its agent's mandate.
    Returns the mandate and whether it replaced an older one."""
    validate(body, "mandate")
    assert isinstance(body, dict)  # validate checked it
    agent = find(conn, body["agentId"])
    if agent is None:
        raise Unauthorized(f"no agent {body['agentId']!r} is registered, so no owner key can vouch for this mandate")
    check_owner_signed(agent, body, "the mandate")
    try:
        mandate = parse_mandate(body)
    except InvalidInput as exc:  # what the schema cannot say (an amount of 0, neither floor nor cap)
        raise InvalidMessage(_mandate_pointer(exc.message), exc.message) from None
    current = conn.execute(select(market_mandates.c.issued_at).where(market_mandates.c.agent_id == agent.id)
                           .with_for_update()).scalar()
    if current is not None and mandate.issued_at <= current:
        raise Conflict("a mandate issued at the same time or later is already on file; an owner replaces a "
                       "mandate with a newer issuedAt")
    stored = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    if current is None:
        conn.execute(insert(market_mandates).values(agent_id=agent.id, issued_at=mandate.issued_at, mandate=stored,
                                                    updated_at=now))
    else:
        conn.execute(update(market_mandates).where(market_mandates.c.agent_id == agent.id)
                     .values(issued_at=mandate.issued_at, mandate=stored, updated_at=now))
    return mandate, current is not None


def _mandate_pointer(message: str) -> str:
    """The JSON pointer of the field a :func:`parse_mandate` refusal names first (its messages
    start with the field, dotted: ``constraints.maxSpend must be greater than 0``)."""
    words = message.split()
    name = words[2] if message.startswith("unknown field ") and len(words) > 2 else (words[0] if words else "")
    return "".join(f"/{part}" for part in name.rstrip(";:,").split(".") if part)


#: What an agent with no mandate on file breaks: nothing authorises the action.
NO_MANDATE = Violation("mandate", "no owner mandate is on file for this agent: POST /market/mandates first")
#: The signed mandate on file, read by every offer, contact and signature: compiled once
#: (``storage/prepared.py``).
_MANDATE = Prepared(select(market_mandates.c.mandate).where(market_mandates.c.agent_id == bindparam("agent_id")))


def _stored_mandate(conn: Connection, agent_id: str) -> str | None:
    row = _MANDATE.first(conn, {"agent_id": agent_id})
    return None if row is None else row[0]


def mandate_of(conn: Connection, agent_id: str) -> Mandate:
    """The agent's mandate on file; with none, a violation (403): nothing authorises the action."""
    stored = _stored_mandate(conn, agent_id)
    if stored is None:
        raise MandateViolation(NO_MANDATE)
    return _on_file(stored)


def mandates_of(conn: Connection, agent_ids: Iterable[str]) -> dict[str, Mandate]:
    """The mandates on file of several agents, in one query (an agent with none is left out);
    none asked for, none read (a book cleared with no orders)."""
    wanted = sorted(set(agent_ids))
    if not wanted:
        return {}
    rows = _mandates(len(wanted)).rows(conn, {f"agent_{index}": agent_id for index, agent_id in enumerate(wanted)})
    return {row.agent_id: _on_file(row.mandate) for row in rows}


@lru_cache(maxsize=1024)
def _on_file(stored: str) -> Mandate:
    """A mandate as filed (its JSON text, verified when it was filed), parsed once per text: a
    negotiation reads its parties' mandates a dozen times, and parsing one cost more than
    reading it. A :class:`Mandate` is immutable, so every reader may share one; a new mandate
    is new text, parsed afresh."""
    return parse_mandate(stored)


@lru_cache(maxsize=32)
def _mandates(count: int) -> Prepared:
    """The mandates of ``count`` agents: compiled once per count (``storage/prepared.py``), as
    every signature reads its deal's two parties' mandates."""
    c = market_mandates.c
    # equalities, not IN: SQLAlchemy renders an IN's list at execution, which a Prepared skips
    return Prepared(select(c.agent_id, c.mandate).where(or_(*(c.agent_id == bindparam(f"agent_{index}")
                                                              for index in range(count)))))


def mandate_document(conn: Connection, agent_id: str) -> dict[str, Any] | None:
    """The signed mandate as filed, for its own agent only (its constraints are hidden state)."""
    stored = _stored_mandate(conn, agent_id)
    return None if stored is None else json.loads(stored)
