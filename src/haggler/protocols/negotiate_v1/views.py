"""Public views: the allow-lists of what negotiate.v1 responses may contain.

Every field a response carries is named here, built from :class:`~haggler.catalog.ProductFacts`
and the public store fields. Nothing is copied wholesale from the catalog, so a field added to
a catalog file tomorrow stays private until someone publishes it here on purpose (spec §7).
"""

from __future__ import annotations

from typing import Any

from haggler import __version__
from haggler.catalog import Catalog, ProductFacts, Store
from haggler.engine import Terms
from haggler.money import to_decimal_number
from haggler.protocols.negotiate_v1.settings import StoreLimits
from haggler.storage.chats import DealRow

PROTOCOL = "negotiate.v1"
START_PATH = "/api/store/chat/start"
CATALOG_PATH = "/api/store/catalog"


def chat_path(session_id: str) -> str:
    return f"/api/store/chat/{session_id}"


def next_url(base: str, session_id: str) -> str:
    """The hypermedia ``next``: absolute, with the literal ``{url_encoded_message}`` placeholder."""
    return f"{base}{chat_path(session_id)}/say?message={{url_encoded_message}}"


def checkout_url(base: str, deal_id: str) -> str:
    return f"{base}/checkout/{deal_id}"


def page_url(base: str, product_id: str) -> str:
    return f"{base}/store/p/{product_id}"


def start_chat_url(base: str, product_id: str) -> str:
    return f"{base}{START_PATH}?product_id={product_id}"


def store_view(store: Store) -> dict[str, Any]:
    view: dict[str, Any] = {"name": store.name}
    if store.city:
        view["city"] = store.city
    view.update(rep_name=store.rep_name, tagline=store.tagline, policy=store.policy)
    return view


def product_view(facts: ProductFacts, base: str, *, detailed: bool = False) -> dict[str, Any]:
    view: dict[str, Any] = {
        "id": facts.id,
        "name": facts.name,
        "subtitle": facts.subtitle,
        "list_price": to_decimal_number(facts.list_price_cents),
        "currency": facts.currency,
    }
    if facts.kind:
        view["kind"] = facts.kind
    if detailed:
        view["description"] = facts.description
        if facts.condition:
            view["condition"] = facts.condition
        if facts.year_made is not None:
            view["year_made"] = facts.year_made
    view["page_url"] = page_url(base, facts.id)
    view["start_chat_url"] = start_chat_url(base, facts.id)
    return view


def limits_view(limits: StoreLimits, currency: str) -> dict[str, Any]:
    return {
        "max_chat_starts_per_hour_per_ip": limits.max_chat_starts_per_hour_per_ip,
        "max_messages_per_chat": limits.max_messages_per_chat,
        "session_idle_ttl_seconds": limits.session_idle_ttl_seconds,
        "max_message_length_chars": limits.max_message_length_chars,
        "currency": currency,
    }


def descriptor(catalog: Catalog, limits: StoreLimits, base: str) -> dict[str, Any]:
    """The discovery document served at ``/negotiate.json`` and ``/.well-known/negotiate.json``."""
    return {
        "negotiate_protocol": PROTOCOL,
        "store": store_view(catalog.store),
        "merchant_skill": {
            "name": "haggler-merchant",
            "version": __version__,
            "description": "haggler's deterministic merchant agent: anchors at list price, trades extras "
                           "before price, concedes in answer to your moves, never crosses its floor.",
        },
        "endpoints": {
            "start_chat": {
                "method": "GET",
                "url_template": f"{base}{START_PATH}?product_id={{product_id}}",
                "description": "Start a negotiation for one product. 201 with session_id, greeting, next.",
            },
            "send_message": {
                "method": "GET",
                "url_template": f"{base}/api/store/chat/{{session_id}}/say?message={{url_encoded_message}}",
                "description": "Send one shopper turn. 200 with message, closed, next (null once closed).",
            },
            "read_history": {
                "method": "GET",
                "url_template": f"{base}/api/store/chat/{{session_id}}",
                "description": "The conversation so far: session_id and history of {speaker, message}.",
            },
            "catalog": {
                "method": "GET",
                "url": f"{base}{CATALOG_PATH}",
                "description": "The live product list.",
            },
        },
        "products": [product_view(p.facts, base) for p in catalog.products],
        "limits": limits_view(limits, catalog.store.currency),
        "extensions": {
            "structured_offers": {
                "description": "Additive. While the merchant has terms on the table, say/start responses "
                               "carry offer {price, currency, extras}; a chat closed with agreement carries "
                               "deal {id, price, currency, extras, checkout_url}. A shopper may send a JSON "
                               "object as its message instead of text.",
                "shopper_messages": [
                    {"action": "offer", "price": 520},
                    {"action": "accept"},
                    {"action": "walk_away"},
                    {"action": "question", "topic": "shipping"},
                    {"action": "best_price"},
                ],
            },
            "post_endpoints": {
                "start_chat": {"method": "POST", "url": f"{base}{START_PATH}", "body": {"product_id": "..."}},
                "send_message": {"method": "POST", "url_template": f"{base}/api/store/chat/{{session_id}}/message",
                                 "body": {"message": "..."}},
            },
        },
        "negotiation_guidance": [
            "Follow the next URL you are given; substitute your URL-encoded turn for {url_encoded_message}.",
            "Say 'deal' to accept the terms on the table, or 'no thanks' to leave.",
            "Extras such as shipping or accessories have value; ask about them.",
        ],
    }


def offer_view(terms: Terms) -> dict[str, Any]:
    return {"price": to_decimal_number(terms.price_cents), "currency": terms.currency, "extras": list(terms.extras)}


def deal_view(deal: DealRow, base: str) -> dict[str, Any]:
    return {
        "id": deal.id,
        "price": to_decimal_number(deal.price_cents),
        "currency": deal.currency,
        "extras": list(deal.extras),
        "checkout_url": checkout_url(base, deal.id),
    }
