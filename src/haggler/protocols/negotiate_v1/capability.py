"""How a checkout protocol tells a buyer's agent that this store negotiates: the
``org.haggler.negotiation`` capability, one description for every checkout that advertises it.

UCP names vendor capabilities by the reverse domain of their authority and requires their ``spec``
and ``schema`` URLs on that origin (overview.md, "Namespace Governance"), so both are on
``https://haggler.org``; the store's own discovery files, where an agent starts a negotiation, are in
``config``. ACP's discovery extensions carry only a name, a spec and a schema, so there the spec is the
store's negotiate.v1 discovery file itself. What the capability means is ``docs/checkout.md``.
"""

from __future__ import annotations

from typing import Any

from haggler.commerce.counter_offers import CounterOffer
from haggler.money import decimal_string
from haggler.protocols.negotiate_v1.views import DISCOVERY, PROTOCOL
from haggler.timestamps import utc_z

NAME = "org.haggler.negotiation"
#: The UCP capability this one extends.
UCP_CHECKOUT = "dev.ucp.shopping.checkout"
VERSION = "2026-11-28"
SPEC_URL = "https://haggler.org/specs/negotiation"
SCHEMA_URL = "https://haggler.org/schemas/negotiation.json"


def discovery_urls(base: str) -> dict[str, str]:
    """Each negotiation protocol version the store speaks, and the absolute URL of its discovery file."""
    return {version: base + paths[1] for version, (_, paths) in DISCOVERY.items()}


def config(base: str) -> dict[str, Any]:
    """The capability's ``config``: where negotiation starts (``discovery_url``: negotiate.v1's file),
    every version's file, and how a negotiated deal is paid here (its id as a discount code)."""
    return {"discovery_url": base + DISCOVERY[PROTOCOL][1][1], "protocols": discovery_urls(base),
            "deal_redemption": "discount_code"}


def ucp_capability(base: str) -> dict[str, Any]:
    """The capability as a UCP business profile lists it: a vendor extension of checkout (it adds
    the cancel's ``intent_trace`` and the counter-offer its answer may carry)."""
    return {"name": NAME, "version": VERSION, "spec": SPEC_URL, "schema": SCHEMA_URL, "extends": UCP_CHECKOUT,
            "config": config(base)}


def acp_extension(base: str) -> dict[str, str]:
    """The capability as an ACP discovery document lists it (``DiscoveryExtension``)."""
    return {"name": NAME, "spec": base + DISCOVERY[PROTOCOL][1][1], "schema": SCHEMA_URL}


def counter_offer(offer: CounterOffer) -> dict[str, Any]:
    """A counter-offer as both checkouts carry it under ``org.haggler.negotiation`` (prices in minor
    units, as each checkout's): the code to apply and what it buys."""
    deal = offer.deal
    return {"counter_offer": {"code": deal.id, "product_id": deal.product_id, "title": offer.title,
                              "price": deal.price_cents, "list_price": offer.list_price_cents,
                              "currency": deal.currency, "extras": list(deal.extras),
                              "expires_at": utc_z(offer.expires_at), "checkout_url": offer.checkout_url}}


def counter_offer_text(offer: CounterOffer) -> str:
    """The counter-offer in words, for the buyer (a checkout message)."""
    deal = offer.deal
    extras = f", with {', '.join(deal.extras)}" if deal.extras else ""
    return (f"Before you go: {offer.title} for {decimal_string(deal.price_cents)} {deal.currency} instead of "
            f"{decimal_string(offer.list_price_cents)}{extras}. Apply discount code {deal.id} to a new checkout "
            f"before {utc_z(offer.expires_at)}, or buy it at {offer.checkout_url}.")


__all__ = ["NAME", "SCHEMA_URL", "SPEC_URL", "VERSION", "acp_extension", "config", "counter_offer", "counter_offer_text",
           "discovery_urls", "ucp_capability"]
