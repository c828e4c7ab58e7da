"""Public views: the allow-lists of what negotiate.v1 responses may contain.

Every field a response carries is named here, built from :class:`~haggler.catalog.ProductFacts`
and the public store fields. Nothing is copied wholesale from the catalog, so a field added to
a catalog file tomorrow stays private until someone publishes it here on purpose (spec §7).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from haggler import __version__
from haggler.catalog import Catalog, ProductFacts, Store
from haggler.engine import Terms
from haggler.money import to_decimal_number
from haggler.protocols.negotiate_v1.service import ChatHistory, ChatReply
from haggler.protocols.negotiate_v1.settings import MerchantSettings, StoreLimits
from haggler.server.openapi import Operation, Param, WireModel
from haggler.server.responses import ErrorBody
from haggler.storage.chats import DealRow

PROTOCOL = "negotiate.v1"
#: negotiate.v1's successor name (pier39's shopper connector looks it up first). The wire is the
#: same; only the discovery file's name and the version key differ, and deal-closing replies
#: carry a top-level ``checkout_url``.
NASH_PROTOCOL = "nash.v1"
#: Each version the store speaks: the key its discovery document names itself under, and the
#: paths that document is served at.
DISCOVERY: dict[str, tuple[str, tuple[str, str]]] = {
    NASH_PROTOCOL: ("nash_protocol", ("/nash.json", "/.well-known/nash.json")),
    PROTOCOL: ("negotiate_protocol", ("/negotiate.json", "/.well-known/negotiate.json")),
}
CHAT_PREFIX = "/api/store/chat"
START_PATH = f"{CHAT_PREFIX}/start"
CATALOG_PATH = "/api/store/catalog"


def chat_path(session_id: str) -> str:
    return f"{CHAT_PREFIX}/{session_id}"


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


_MERCHANT_DESCRIPTIONS = {
    "deterministic": "haggler's deterministic merchant agent: anchors at list price, trades extras "
                     "before price, concedes in answer to your moves, never crosses its floor.",
    "llm-voice": "haggler's deterministic merchant agent decides every move (it never crosses its floor); "
                 "a language model words its replies from public facts only.",
    "llm": "a language model negotiates within haggler's guards: no price below the floor is ever "
           "committed and no reply that states hidden state is sent.",
}


def merchant_skill_view(merchant: MerchantSettings) -> dict[str, Any]:
    """The descriptor's ``merchant_skill``: the operator's skill file's name and description when
    it gave one (never its instructions), else haggler's own merchant in its mode."""
    if merchant.skill is not None:
        return {"name": merchant.skill.name, "description": merchant.skill.description}
    return {"name": "haggler-merchant", "version": __version__,
            "description": _MERCHANT_DESCRIPTIONS[merchant.mode]}


def descriptor(catalog: Catalog, limits: StoreLimits, base: str,
               merchant: MerchantSettings | None = None, version: str = PROTOCOL) -> dict[str, Any]:
    """The discovery document of ``version`` (a key of :data:`DISCOVERY`), served at its paths.

    Both versions get the same descriptor; only the key naming the version differs
    (``negotiate_protocol: "negotiate.v1"`` or ``nash_protocol: "nash.v1"``). That is what pier39's
    connector reads: it takes ``nash_protocol``, else ``negotiate_protocol``, and parses the rest
    as the one descriptor both names share. One key per document, so no reader meets two
    versions that disagree."""
    key, _ = DISCOVERY[version]
    return {
        key: version,
        "store": store_view(catalog.store),
        "merchant_skill": merchant_skill_view(merchant or MerchantSettings()),
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
                "description": "The conversation so far: session_id and history of {speaker, message}; "
                               "closed, and the offer on the table or the deal.",
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
                "description": "Additive. While the merchant has terms on the table, start, say and history "
                               "responses carry offer {price, currency, extras}; a chat closed with agreement carries "
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


def reply_view(reply: ChatReply, base: str, session_id: str) -> dict[str, Any]:
    """A shopper turn's answer: the merchant's words, whether the chat closed, ``next`` while it
    is open, and the offer on the table or the deal.

    A reply that closes the chat with a deal also names the deal's checkout page at the top
    level (``checkout_url``, nash.v1): pier39's connector reads it there, not inside ``deal``.
    Additive, so negotiate.v1 shoppers, which ignore fields they do not know, are unaffected."""
    view: dict[str, Any] = {
        "message": reply.message,
        "closed": reply.closed,
        "next": None if reply.closed else next_url(base, session_id),
    }
    if reply.closed and reply.deal is not None:
        view["checkout_url"] = checkout_url(base, reply.deal.id)
    return _with_terms(view, reply.offer, reply.deal, base)


def history_view(found: ChatHistory, base: str) -> dict[str, Any]:
    """§3.3's history, plus what a widget resuming the chat needs to show it as it stood: the
    offer on the table (while open) and the deal (once agreed), both already sent in replies."""
    view: dict[str, Any] = {
        "session_id": found.session_id,
        "history": [{"speaker": speaker, "message": text} for speaker, text in found.messages],
        "closed": found.closed,
        "product_id": found.product_id,
    }
    return _with_terms(view, found.offer, found.deal, base)


def _with_terms(view: dict[str, Any], offer: Terms | None, deal: DealRow | None, base: str) -> dict[str, Any]:
    """``view`` with the structured extension's fields: the offer on the table, the deal made."""
    if offer is not None:
        view["offer"] = offer_view(offer)
    if deal is not None:
        view["deal"] = deal_view(deal, base)
    return view


# -- the wire shapes, for the OpenAPI document (the dicts above are what is sent) -----------------


class StoreModel(WireModel):
    name: str
    city: str | None = None
    rep_name: str
    tagline: str
    policy: str


class ProductModel(WireModel):
    id: str
    name: str
    subtitle: str
    list_price: float
    currency: str
    kind: str | None = None
    description: str | None = None
    condition: str | None = None
    year_made: int | None = None
    page_url: str
    start_chat_url: str


class LimitsModel(WireModel):
    max_chat_starts_per_hour_per_ip: int
    max_messages_per_chat: int
    session_idle_ttl_seconds: int
    max_message_length_chars: int
    currency: str


class DescriptorModel(WireModel):
    """The discovery document (§2)."""

    model_config = ConfigDict(extra="allow")
    negotiate_protocol: Literal["negotiate.v1"]
    store: StoreModel
    endpoints: dict[str, dict[str, str]]
    products: list[ProductModel]
    limits: LimitsModel


class NashDescriptorModel(WireModel):
    """The same discovery document under nash.v1's name (``/nash.json``)."""

    model_config = ConfigDict(extra="allow")
    nash_protocol: Literal["nash.v1"]
    store: StoreModel
    endpoints: dict[str, dict[str, str]]
    products: list[ProductModel]
    limits: LimitsModel


class CatalogModel(WireModel):
    store: StoreModel
    products: list[ProductModel]


class OfferModel(WireModel):
    """The merchant's terms on the table (the structured extension)."""

    price: float
    currency: str
    extras: list[str]


class DealModel(WireModel):
    id: str
    price: float
    currency: str
    extras: list[str]
    checkout_url: str


class ChatStartModel(WireModel):
    session_id: str
    greeting: str
    next: str
    offer: OfferModel


class ReplyModel(WireModel):
    message: str
    closed: bool
    next: str | None
    #: The deal's checkout page, on the reply that closes the chat with a deal (nash.v1).
    checkout_url: str | None = None
    offer: OfferModel | None = None
    deal: DealModel | None = None


class LineModel(WireModel):
    speaker: Literal["shopper", "merchant"]
    message: str


class HistoryModel(WireModel):
    session_id: str
    history: list[LineModel]
    closed: bool
    product_id: str
    offer: OfferModel | None = None
    deal: DealModel | None = None


class StartBody(BaseModel):
    product_id: str


class MessageBody(BaseModel):
    message: str


def openapi_operations() -> dict[tuple[str, str], Operation]:
    """negotiate.v1's operations as the OpenAPI document describes them."""
    tag = ("negotiate.v1",)
    product_id = Param("product_id", {"type": "string"}, required=True, description="A product's id")
    message = Param("message", {"type": "string"}, required=True, description="The shopper's turn, URL-encoded")
    chat = f"{CHAT_PREFIX}/{{session_id}}"
    models = {PROTOCOL: DescriptorModel, NASH_PROTOCOL: NashDescriptorModel}
    discovery = {("get", path): Operation(f"The discovery document ({version})", {200: models[version]}, tags=tag)
                 for version, (_, paths) in DISCOVERY.items() for path in paths}
    return {
        **discovery,
        ("get", CATALOG_PATH): Operation("The live product list", {200: CatalogModel}, tags=tag),
        ("get", START_PATH): Operation("Start a chat about one product", {201: ChatStartModel, 400: ErrorBody,
                                       404: ErrorBody, 429: ErrorBody}, query=(product_id,), tags=tag),
        ("post", START_PATH): Operation("Start a chat (a widget's POST)", {201: ChatStartModel, 400: ErrorBody,
                                        404: ErrorBody, 429: ErrorBody}, body=StartBody, tags=tag),
        ("get", f"{chat}/say"): Operation("Send one shopper turn", {200: ReplyModel, 400: ErrorBody,
                                          404: ErrorBody}, query=(message,), tags=tag),
        ("post", f"{chat}/message"): Operation("Send one shopper turn (a widget's POST)", {200: ReplyModel,
                                               400: ErrorBody, 404: ErrorBody}, body=MessageBody, tags=tag),
        ("get", chat): Operation("The conversation so far", {200: HistoryModel, 404: ErrorBody}, tags=tag),
    }
