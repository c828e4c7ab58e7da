"""Exchange agents and their API keys, and the services providers list.

An API key is shown once, at registration, and stored only as its SHA-256: a database leak
does not hand out credentials. Each agent gets an empty wallet when it registers.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, bindparam, insert, select

from haggler.errors import InvalidInput, Unauthorized
from haggler.protocols.transactions import ledger, views
from haggler.protocols.fields import bearer_credential, integer, json_object, one_of, only, text
from haggler.storage.prepared import Prepared
from haggler.storage.rows import row_by_id
from haggler.storage.schema import exchange_agents, services
from haggler.trust.hashing import secret_hash

KEY_PREFIX = "hgx_"
FIXED, NEGOTIABLE = "fixed", "negotiable"
#: The SLA a service promises, all three required: milliseconds, milliseconds, attempts.
SLA_FIELDS = {"latencyMs": (1, 3_600_000), "timeoutMs": (1, 3_600_000), "retries": (0, 10)}


@dataclass(frozen=True, slots=True)
class Agent:
    id: str
    name: str


def register(conn: Connection, name: object, at: datetime) -> tuple[Agent, str]:
    """A new agent with an empty wallet; returns it and its API key (the only time the key is seen)."""
    agent = Agent("agt_" + secrets.token_urlsafe(12), text(name, "name", max_length=200))
    api_key = KEY_PREFIX + secrets.token_urlsafe(32)
    conn.execute(insert(exchange_agents).values(id=agent.id, name=agent.name, key_hash=secret_hash(api_key),
                                                created_at=at))
    ledger.open_wallet(conn, agent.id)
    return agent, api_key


#: Every request looks its key up: compiled once (storage/prepared.py).
_AGENT_BY_KEY = Prepared(select(exchange_agents.c.id, exchange_agents.c.name)
                         .where(exchange_agents.c.key_hash == bindparam("key_hash")))


def authenticate(conn: Connection, authorization: str | None) -> Agent:
    """The agent an ``Authorization: Bearer <key>`` header belongs to; Unauthorized otherwise."""
    api_key = bearer_credential(authorization, "your API key")
    row = _AGENT_BY_KEY.row(conn, {"key_hash": secret_hash(api_key)})
    if row is None:
        raise Unauthorized("unknown API key")
    return Agent(row.id, row.name)


# -- services --------------------------------------------------------------------------------------

def parse_sla(value: object, *, partial: bool) -> dict[str, int]:
    """An SLA object: every field when a service declares it, any subset when an offer modifies it."""
    sla = json_object(value, "sla")
    unknown = sorted(set(sla) - set(SLA_FIELDS))
    if unknown:
        raise InvalidInput(f"sla: unknown field {unknown[0]!r}; known: {', '.join(SLA_FIELDS)}")
    missing = [name for name in SLA_FIELDS if name not in sla]
    if missing and not partial:
        raise InvalidInput(f"sla.{missing[0]} is required")
    if partial and not sla:
        raise InvalidInput("sla must change at least one of " + ", ".join(SLA_FIELDS))
    return {name: integer(sla[name], f"sla.{name}", low=low, high=high)
            for name, (low, high) in SLA_FIELDS.items() if name in sla}


def create_service(conn: Connection, provider: Agent, body: dict[str, Any], at: datetime) -> dict[str, Any]:
    only(body, ("name", "description", "basePriceCents", "priceModel", "sla"))
    row = {
        "id": "svc_" + secrets.token_urlsafe(12),
        "provider_id": provider.id,
        "name": text(body.get("name"), "name", max_length=200),
        "description": text(body.get("description", ""), "description", max_length=5000, allow_empty=True),
        "base_price_cents": integer(body.get("basePriceCents"), "basePriceCents", low=1, high=ledger.MAX_AMOUNT_CENTS),
        "price_model": one_of(body.get("priceModel"), "priceModel", (FIXED, NEGOTIABLE)),
        "sla": json.dumps(parse_sla(body.get("sla"), partial=False)),
        "created_at": at,
    }
    conn.execute(insert(services).values(**row))
    return views.service_view(row)


def get_service(conn: Connection, service_id: str) -> dict[str, Any]:
    return views.service_view(service_row(conn, service_id)._mapping)


def service_row(conn: Connection, service_id: str) -> Any:
    """The service's row; NotFound when there is none."""
    return row_by_id(conn, services, service_id, "service")


def list_services(conn: Connection, *, limit: int, offset: int) -> list[dict[str, Any]]:
    rows = conn.execute(select(services).order_by(services.c.created_at, services.c.id).limit(limit).offset(offset))
    return [views.service_view(row._mapping) for row in rows]
