"""What the exchange's API shows of its rows: explicit allow-lists, in the spec's camelCase.

A column added to a table tomorrow stays out of every response until it is written here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from haggler.protocols.transactions.service import Offer


def service_view(row: Any) -> dict[str, Any]:
    """A listed service (``row`` is a services row's mapping, or the dict it was inserted from)."""
    return {
        "id": row["id"],
        "providerId": row["provider_id"],
        "name": row["name"],
        "description": row["description"],
        "basePriceCents": row["base_price_cents"],
        "priceModel": row["price_model"],
        "sla": json.loads(row["sla"]),
        "createdAt": row["created_at"].isoformat(),
    }


def transaction_view(row: Any, round_number: int, turn: str | None, offer: dict[str, Any] | None) -> dict[str, Any]:
    """A transaction as a party sees it, with the negotiation's state: the latest round, whose
    turn it is (None once it is over) and the offer on the table."""
    return {
        "id": row.id,
        "serviceId": row.service_id,
        "consumerId": row.consumer_id,
        "providerId": row.provider_id,
        "status": row.status,
        "maxPriceCents": row.max_price_cents,
        "input": json.loads(row.input),
        "priceCents": row.price_cents,
        "sla": json.loads(row.sla) if row.sla else None,
        "scopeModifications": json.loads(row.scope_modifications) if row.scope_modifications else None,
        "heldCents": row.held_cents,
        "output": json.loads(row.output) if row.output else None,
        "endReason": row.end_reason,
        "round": round_number,
        "turn": turn,
        "offer": offer,
        "offerExpiresAt": row.offer_expires_at.isoformat() if row.offer_expires_at else None,
        "createdAt": row.created_at.isoformat(),
        "updatedAt": row.updated_at.isoformat(),
    }


def message_view(row: Any, offer: Offer | None) -> dict[str, Any]:
    """One negotiation message; ``offer`` is the terms it carried, if any."""
    return {
        "round": row.round,
        "sender": row.sender,
        "type": row.type,
        "terms": offer.to_json() if offer else None,
        "message": row.message,
        "expiresAt": row.expires_at.isoformat() if row.expires_at else None,
        "createdAt": row.created_at.isoformat(),
    }
