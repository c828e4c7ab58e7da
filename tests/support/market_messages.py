"""The spec's example messages (spec 003: Message Types, Owner Mandate Format), made valid: real
Ed25519 keys and signatures where the spec writes "0x...", a real SHA-256 where it writes
"sha256:abc123...", and the full header on the spec's abridged follow-ups (the seller's offer,
the alternative protocol agreement) plus the sending agent's ``signature`` on every message
that enters the market."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from haggler.trust.messages import encode_hex_public_key, sign_deal, sign_message


@dataclass
class Keys:
    """One key per signer in the examples: the two agents and their two owners."""

    seller: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    buyer: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    seller_owner: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)
    buyer_owner: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)


def owner_mandate(owner: Ed25519PrivateKey, constraints: dict[str, Any]) -> dict[str, Any]:
    """A listing's or wanted ad's embedded ``ownerMandate``, signed by the owner, key included."""
    return sign_message(owner, {**constraints, "publicKey": encode_hex_public_key(owner)})


def unsigned_examples(keys: Keys) -> dict[str, list[dict[str, Any]]]:
    """Every example, by schema name, before the sender's signature (mandates already signed)."""
    return {
        "listing": [{
            "type": "listing", "version": "0.1.0", "listingId": "lst_abc123", "timestamp": "2026-02-07T23:00:00Z",
            "seller": {"agentId": "seller_switch_001", "matrixId": "@seller_001:localhost"},
            "item": {
                "category": "electronics", "subcategory": "gaming_console", "name": "nintendo_switch",
                "model": "OLED", "condition": "good", "description": "Used for 6 months, no scratches",
                "accessories": ["charger", "case", "screen_protector"],
                "photos": ["photo_hash_abc123", "photo_hash_def456"],
                "verification": {"type": "photo_hash", "hashes": ["sha256:" + hashlib.sha256(b"photo").hexdigest()]},
            },
            "pricing": {"askPrice": 180, "currency": "EUR", "negotiable": True, "minPrice": 150,
                        "priceJustification": "Market rate for good condition OLED"},
            "logistics": {"location": "Paris, France", "meetingOptions": ["public_place", "shipping"],
                          "shippingCost": 10, "availableFrom": "2026-02-08", "availableUntil": "2026-02-20"},
            "ownerMandate": owner_mandate(keys.seller_owner, {"listingId": "lst_abc123",
                                                              "issuedAt": "2026-02-07T22:00:00Z",
                                                              "minAcceptablePrice": 150}),
        }],
        "wanted": [{
            "type": "wanted", "version": "0.1.0", "wantedId": "wnt_xyz789", "timestamp": "2026-02-07T23:00:00Z",
            "buyer": {"agentId": "buyer_switch_001", "matrixId": "@buyer_001:localhost"},
            "interests": [{"category": "electronics", "subcategory": "gaming_console", "name": "nintendo_switch",
                           "preferredModel": "OLED", "minCondition": "good", "mustHaveAccessories": ["charger"],
                           "preferredAccessories": ["case"]}],
            "budget": {"maxPrice": 200, "currency": "EUR", "flexible": False},
            "logistics": {"location": "Paris, France", "preferredMeetingOptions": ["public_place"], "canShip": True,
                          "needsBy": "2026-02-15"},
            "ownerMandate": owner_mandate(keys.buyer_owner, {"wantedId": "wnt_xyz789", "issuedAt": "2026-02-07T22:00:00Z",
                                                             "maxSpend": 200, "requiredCondition": "good"}),
            "activeUntil": "2026-02-15T00:00:00Z",
        }],
        "contact_request": [{
            "type": "contact_request", "version": "0.1.0", "timestamp": "2026-02-07T23:05:00Z",
            "requestId": "req_123", "listingId": "lst_abc123",
            "buyer": {"agentId": "buyer_switch_001", "matrixId": "@buyer_001:localhost"},
            "protocol": "sealed_bid", "message": "I'm interested in your Nintendo Switch listing.",
            "structuredIntent": {"interestedIn": "nintendo_switch", "matchesRequirements": True,
                                 "proposedProtocol": "sealed_bid", "timeframe": "urgent"},
        }],
        "protocol_agreement": [
            {"type": "protocol_agreement", "version": "0.1.0", "timestamp": "2026-02-07T23:06:00Z",
             "requestId": "req_123", "agreedProtocol": "sealed_bid", "message": "Agreed, let's use sealed-bid negotiation."},
            {"type": "protocol_agreement", "version": "0.1.0", "timestamp": "2026-02-07T23:06:00Z",
             "requestId": "req_123", "agreedProtocol": "natural_language",
             "message": "I'd prefer to negotiate in natural language."},
        ],
        "sealed_bid": [
            {"type": "sealed_bid", "version": "0.1.0", "timestamp": "2026-02-07T23:07:00Z", "requestId": "req_123",
             "party": "buyer", "maxPrice": 185, "commitment": "If seller's minPrice <= 185, I will pay midpoint price."},
            {"type": "sealed_bid", "version": "0.1.0", "timestamp": "2026-02-07T23:07:00Z", "requestId": "req_123",
             "party": "seller", "minPrice": 155, "commitment": "If buyer's maxPrice >= 155, I will accept midpoint price."},
        ],
        "instant_match": [{
            "type": "instant_match", "version": "0.1.0", "timestamp": "2026-02-07T23:08:00Z", "requestId": "req_123",
            "listingId": "lst_abc123", "buyer": {"agentId": "buyer_switch_001"}, "acceptedPrice": 180,
            "message": "Your price of 180€ is within my budget. I accept immediately.",
        }],
        "offer": [
            {"type": "offer", "version": "0.1.0", "timestamp": "2026-02-07T23:10:00Z", "requestId": "req_123",
             "party": "buyer", "sequence": 1, "offerPrice": 165, "message": "Would you consider 165€? I see similar listings at that price."},
            {"type": "offer", "version": "0.1.0", "timestamp": "2026-02-07T23:11:00Z", "requestId": "req_123",
             "party": "seller", "sequence": 1, "offerPrice": 175, "message": "I can do 175€ if you pick it up today."},
        ],
        "deal_confirmed": [{
            "type": "deal_confirmed", "version": "0.1.0", "timestamp": "2026-02-07T23:15:00Z", "requestId": "req_123",
            "listingId": "lst_abc123", "finalPrice": 170, "protocol": "sealed_bid",
            "buyer": {"agentId": "buyer_switch_001"}, "seller": {"agentId": "seller_switch_001"},
            "logistics": {"meetingPlace": "Gare du Nord, Paris", "meetingTime": "2026-02-08T14:00:00Z"},
        }],
        "mandate": [{
            "mandateVersion": "0.1.0", "issuedAt": "2026-02-07T20:00:00Z", "agentId": "buyer_switch_001",
            "constraints": {"maxSpend": 200, "currency": "EUR", "requiredCondition": "good",
                            "requiredAccessories": ["charger"], "dealMustCloseBy": "2026-02-15T00:00:00Z"},
            "permissions": {"canNegotiate": True, "canAcceptInstantMatch": True, "canUseSealedBid": True,
                            "requiresOwnerApproval": False},
            "publicKey": encode_hex_public_key(keys.buyer_owner),
        }],
        "order": [
            {"type": "order", "version": "0.1.0", "timestamp": "2026-02-07T23:20:00Z", "orderId": "ord_1",
             "agentId": "buyer_switch_001", "item": "electronics.gaming_console.nintendo_switch", "side": "buy",
             "price": 170.1, "currency": "EUR", "quantity": 1},
            {"type": "order", "version": "0.1.0", "timestamp": "2026-02-07T23:20:01Z", "orderId": "ord_2",
             "agentId": "seller_switch_001", "item": "electronics.gaming_console.nintendo_switch", "side": "sell",
             "price": 165.55, "currency": "EUR", "quantity": 2},
        ],
    }


#: Who signs each example: the sending agent, or for the mandate the owner.
SIGNER = {
    "listing": "seller", "wanted": "buyer", "contact_request": "buyer", "protocol_agreement": "seller",
    "instant_match": "buyer", "mandate": "buyer_owner",
}


def signer_of(keys: Keys, name: str, message: dict[str, Any]) -> Ed25519PrivateKey:
    if name in SIGNER:
        return getattr(keys, SIGNER[name])
    if name == "order":
        return keys.buyer if message["side"] == "buy" else keys.seller
    return getattr(keys, message["party"])  # sealed_bid, offer


def examples(keys: Keys) -> dict[str, list[dict[str, Any]]]:
    """Every example, by schema name, signed as it would enter the market."""
    signed: dict[str, list[dict[str, Any]]] = {}
    for name, messages in unsigned_examples(keys).items():
        if name == "deal_confirmed":
            signed[name] = [sign_deal(keys.seller, sign_deal(keys.buyer, m, "buyer"), "seller") for m in messages]
        else:
            signed[name] = [sign_message(signer_of(keys, name, m), m) for m in messages]
    return signed


#: A value for :func:`set_at` that removes the field instead.
DELETE = object()


def set_at(message: dict[str, Any], pointer: str, value: Any) -> dict[str, Any]:
    """``message``, changed in place, with the field at the JSON pointer ``pointer`` set to
    ``value`` (:data:`DELETE` removes it)."""
    *parents, last = [part.replace("~1", "/").replace("~0", "~") for part in pointer.split("/")[1:]]
    node: Any = message
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    key = int(last) if isinstance(node, list) else last
    if value is DELETE:
        del node[key]
    else:
        node[key] = value
    return message
