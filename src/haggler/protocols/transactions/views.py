"""What the exchange's API shows of its rows: explicit allow-lists, in the spec's camelCase.

A column added to a table tomorrow stays out of every response until it is written here.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from haggler.server.openapi import Operation, Param, WireModel
from haggler.server.responses import ErrorBody

if TYPE_CHECKING:
    from haggler.protocols.transactions.service import Offer

#: The most entries or services one page holds.
MAX_PAGE = 100
#: Ledger entry ids are PostgreSQL ``integer``s: a larger ``before`` is a 400, not a failed query.
MAX_ENTRY_ID = 2**31 - 1
MAX_OFFSET = 2**62


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


# -- the wire shapes, for the OpenAPI document (the dicts above are what is sent) -----------------


class SLAModel(WireModel):
    latencyMs: int = Field(ge=1, le=3_600_000)
    timeoutMs: int = Field(ge=1, le=3_600_000)
    retries: int = Field(ge=0, le=10)


class SLAChange(WireModel):
    latencyMs: int | None = Field(None, ge=1, le=3_600_000)
    timeoutMs: int | None = Field(None, ge=1, le=3_600_000)
    retries: int | None = Field(None, ge=0, le=10)


class RegisterBody(WireModel):
    name: str = Field(max_length=200)


class Registered(WireModel):
    id: str
    name: str
    apiKey: str


class DepositBody(WireModel):
    amountCents: int = Field(ge=1)


class BalanceModel(WireModel):
    availableCents: int
    heldCents: int


class LedgerEntryModel(WireModel):
    id: int
    kind: str
    availableDeltaCents: int
    heldDeltaCents: int
    availableAfterCents: int
    heldAfterCents: int
    transactionId: str | None
    createdAt: str


class LedgerModel(WireModel):
    entries: list[LedgerEntryModel]


class ServiceBody(WireModel):
    name: str = Field(max_length=200)
    description: str | None = Field(None, max_length=5000)
    basePriceCents: int = Field(ge=1)
    priceModel: Literal["fixed", "negotiable"]
    sla: SLAModel


class ServiceModel(WireModel):
    id: str
    providerId: str
    name: str
    description: str
    basePriceCents: int
    priceModel: Literal["fixed", "negotiable"]
    sla: SLAModel
    createdAt: str


class ServicesModel(WireModel):
    services: list[ServiceModel]


class TermsModel(WireModel):
    priceCents: int = Field(ge=1)
    sla: SLAChange | None = None
    scopeModifications: Any = None


class OnTheTable(WireModel):
    by: Literal["consumer", "provider"]
    terms: TermsModel
    expiresAt: str | None


class TransactionBody(WireModel):
    serviceId: str = Field(max_length=40)
    maxPriceCents: int = Field(ge=1)
    input: Any
    initialOfferCents: int | None = Field(None, ge=1)
    message: str | None = Field(None, max_length=2000)
    expiresInSeconds: int | None = Field(None, ge=1, le=3600)


class TransactionModel(WireModel):
    id: str
    serviceId: str
    consumerId: str
    providerId: str
    status: Literal["negotiating", "matched", "completed", "cancelled"]
    maxPriceCents: int
    input: Any
    priceCents: int | None
    sla: SLAModel | None
    scopeModifications: Any
    heldCents: int
    output: Any
    endReason: str | None
    round: int
    turn: Literal["consumer", "provider"] | None
    offer: OnTheTable | None
    offerExpiresAt: str | None
    createdAt: str
    updatedAt: str


class NegotiateBody(WireModel):
    type: Literal["counter_offer", "accept", "reject", "withdraw"]
    terms: TermsModel | None = None
    message: str | None = Field(None, max_length=2000)
    expiresInSeconds: int | None = Field(None, ge=1, le=3600)


class CompleteBody(WireModel):
    output: Any = None


class EmptyBody(WireModel):
    pass


class MessageModel(WireModel):
    round: int
    sender: Literal["consumer", "provider"]
    type: Literal["initial_offer", "counter_offer", "accept", "reject", "withdraw"]
    terms: TermsModel | None
    message: str | None
    expiresAt: str | None
    createdAt: str


class MessagesModel(WireModel):
    messages: list[MessageModel]


def openapi_operations(prefix: str) -> dict[tuple[str, str], Operation]:
    """The exchange's operations as the OpenAPI document describes them (reference: docs/exchange-api.md)."""
    tag = ("transactions",)
    errors = {400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody, 422: ErrorBody}
    txn = f"{prefix}/transactions/{{transaction_id}}"
    page = (Param("limit", {"type": "integer", "minimum": 1, "maximum": MAX_PAGE}),)
    changed = {200: TransactionModel, 402: ErrorBody, **errors}
    return {
        ("post", f"{prefix}/agents"): Operation("Register an agent (its API key is shown once)",
                                                {201: Registered, **errors}, body=RegisterBody, tags=tag),
        ("post", f"{prefix}/wallets/me/deposit"): Operation("Fund your wallet (a sandbox feature)",
                                                            {200: BalanceModel, **errors}, body=DepositBody, tags=tag),
        ("get", f"{prefix}/wallets/me"): Operation("Your wallet's balances", {200: BalanceModel, **errors}, tags=tag),
        ("get", f"{prefix}/wallets/me/ledger"): Operation(
            "Your ledger, newest first", {200: LedgerModel, **errors},
            query=page + (Param("before", {"type": "integer", "minimum": 0, "maximum": MAX_ENTRY_ID}),), tags=tag),
        ("post", f"{prefix}/services"): Operation("List a service", {201: ServiceModel, **errors}, body=ServiceBody,
                                                  tags=tag),
        ("get", f"{prefix}/services"): Operation("The listed services", {200: ServicesModel, **errors},
                                                 query=page + (Param("offset", {"type": "integer", "minimum": 0,
                                                                             "maximum": MAX_OFFSET}),),
                                                 tags=tag),
        ("get", f"{prefix}/services/{{service_id}}"): Operation("One service", {200: ServiceModel, **errors}, tags=tag),
        ("post", f"{prefix}/transactions"): Operation("Open a transaction on a service",
                                                      {201: TransactionModel, 402: ErrorBody, **errors},
                                                      body=TransactionBody, tags=tag),
        ("get", txn): Operation("A transaction, as a party sees it", {200: TransactionModel, **errors}, tags=tag),
        ("get", f"{txn}/negotiations"): Operation("Its negotiation messages", {200: MessagesModel, **errors}, tags=tag),
        ("post", f"{txn}/negotiate"): Operation("Send a negotiation message", changed, body=NegotiateBody, tags=tag),
        ("post", f"{txn}/complete"): Operation("The provider delivers: the hold is captured", changed,
                                               body=CompleteBody, body_required=False, tags=tag),
        ("post", f"{txn}/cancel"): Operation("Call off a matched transaction: the hold is released", changed,
                                             body=EmptyBody, body_required=False, tags=tag),
    }
