"""The market's wire shapes, for the OpenAPI document (reference: docs/market-api.md).

The modules build the dicts that are sent; these pydantic models only describe them, and the
fuzz test (``tests/test_openapi_fuzz.py``) and ``tests/protocols/market/test_market_openapi.py``
hold every response to them. The signed messages are not re-described here: their JSON Schemas
(``schemas/*.json``, served at ``/market/schemas/{type}.json``) are the contract, so each message
model *is* its schema, inlined (the document cannot follow a schema's own ``#/$defs`` references).
"""

from __future__ import annotations

import copy
from typing import Any, Literal

from pydantic import ConfigDict, Field, RootModel

from haggler.protocols.market import inbox, listings
from haggler.protocols.market.mandates import CONDITIONS
from haggler.protocols.market.messages import definition, schema
from haggler.protocols.market.routes import AUDIT_PAGE, MAX_CURSOR, SCHEMA_TYPE
from haggler.server.openapi import Media, Operation, Param, WireModel
from haggler.server.responses import ErrorBody, RequestId

Protocol = Literal["natural_language", "sealed_bid", "instant_match"]
DealProtocol = Literal["natural_language", "sealed_bid", "instant_match", "double_auction"]
Party = Literal["buyer", "seller"]
RequestState = Literal["proposed", "agreed", "closed", "failed"]
DealStatus = Literal["awaiting_signatures", "awaiting_owner_approval", "confirmed", "expired", "cancelled", "void"]
#: An amount on the wire: major units, at most two decimals (180 is 180.00).
Amount = int | float
#: The shared definitions the bodies that are not messages (registration, signatures) take their
#: fields' forms from: the messages' own, so that the document cannot drift from what is checked.
_ID, _MATRIX_ID = definition("id"), definition("matrixId")
HEX_KEY, HEX_SIGNATURE = definition("publicKey")["pattern"], definition("signature")["pattern"]


# -- the signed messages: their JSON Schemas --------------------------------------------------------


def _inline(node: Any, defs: dict[str, Any]) -> Any:
    """``node`` with every ``#/$defs/<name>`` reference replaced by the definition (recursively;
    a reference's sibling keywords, such as its description, are kept)."""
    if isinstance(node, list):
        return [_inline(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _inline(value, defs) for key, value in node.items() if key != "$ref"}
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        out = {**_inline(defs[ref.removeprefix("#/$defs/")], defs), **out}
    return out


def message_schema(name: str) -> dict[str, Any]:
    """The market schema ``name`` as one self-contained JSON Schema (no ``$defs``, no ``$id``),
    its description pointing at the file that is the contract."""
    source = schema(name)
    inlined = _inline({key: value for key, value in source.items() if key not in ("$defs", "$schema", "$id")},
                      source.get("$defs", {}))
    inlined["description"] = (f"{source.get('description', '')} The contract is the JSON Schema served at "
                              f"/market/schemas/{name}.json (draft 2020-12); this is that schema, inlined.").strip()
    return inlined


def _schema_of(name: str) -> ConfigDict:
    inlined = message_schema(name)

    def replace(generated: dict[str, Any]) -> None:
        generated.clear()
        generated.update(copy.deepcopy(inlined))
    return ConfigDict(json_schema_extra=replace)


class _Message(RootModel[dict[str, Any]]):
    """A signed market message (its subclasses carry the real schema)."""


class MarketListingMessage(_Message):
    model_config = _schema_of("listing")


class MarketWantedMessage(_Message):
    model_config = _schema_of("wanted")


class MarketContactRequest(_Message):
    model_config = _schema_of("contact_request")


class MarketProtocolAgreement(_Message):
    model_config = _schema_of("protocol_agreement")


class MarketSealedBid(_Message):
    model_config = _schema_of("sealed_bid")


class MarketInstantMatch(_Message):
    model_config = _schema_of("instant_match")


class MarketOffer(_Message):
    model_config = _schema_of("offer")


class MarketMandate(_Message):
    model_config = _schema_of("mandate")


class MarketOrder(_Message):
    model_config = _schema_of("order")


class MarketJsonSchema(RootModel[dict[str, Any]]):
    """A draft 2020-12 JSON Schema, as shipped in the package (``$schema``, ``$id``, ``$defs``)."""


# -- errors -----------------------------------------------------------------------------------------


class MarketInvalidMessage(WireModel):
    """422: the body is JSON but not a valid message. ``path`` is the JSON pointer (RFC 6901) of
    the one field at fault (``""``: the message itself)."""

    error: str
    path: str
    request_id: RequestId = None


class MarketRefusal(WireModel):
    """403: ``{"error": "mandate_violation", "constraint", "reason"}`` when the agent's owner
    mandate forbids the action (``constraint`` names the mandate field); ``{"error"}`` alone when
    the caller is not the party that may do this."""

    error: str
    constraint: str | None = None
    reason: str | None = None
    request_id: RequestId = None


# -- agents and mandates ----------------------------------------------------------------------------


class MarketRegisterBody(WireModel):
    agentId: str = Field(min_length=_ID["minLength"], max_length=_ID["maxLength"], pattern=_ID["pattern"])
    matrixId: str | None = Field(None, max_length=_MATRIX_ID["maxLength"], pattern=_MATRIX_ID["pattern"])
    publicKey: str = Field(pattern=HEX_KEY, description="The agent's Ed25519 key: it signs the agent's messages.")
    ownerPublicKey: str = Field(pattern=HEX_KEY, description="The owner's Ed25519 key: it signs the agent's "
                                                            "mandates and the owner's deal approvals.")


class MarketAgent(WireModel):
    agentId: str
    publicKey: str
    ownerPublicKey: str
    matrixId: str | None = None


class MarketAgentRegistered(MarketAgent):
    token: str = Field(description="The agent token (mkt_…), shown only here: send it as "
                                   "'Authorization: Bearer mkt_…' where no signed message authenticates.")


class MarketMandateFiled(WireModel):
    agentId: str
    issuedAt: str
    status: Literal["on_file"]
    replaced: bool


class MarketSchemaEntry(WireModel):
    type: str
    title: str
    url: str


class MarketSchemaList(WireModel):
    schemas: list[MarketSchemaEntry]


# -- listings and wanted ads ------------------------------------------------------------------------


class MarketVerifiedMandate(WireModel):
    """The public face of an embedded owner mandate: its key, and that the framework verified it."""

    publicKey: str
    verified: Literal[True]


class MarketListingPosted(WireModel):
    listingId: str
    status: Literal["live"]
    notifiedWanted: int = Field(description="How many live wanted ads this listing fits (their buyers were told).")


class MarketListing(WireModel):
    """A listing as served. Anyone sees the public allow-list (no ``pricing.minPrice``, the
    mandate reduced to ``{publicKey, verified}``, no signature); the seller itself sees its
    message exactly as signed. ``status`` is the market's."""

    type: Literal["listing"]
    version: str
    listingId: str
    timestamp: str
    seller: dict[str, Any]
    item: dict[str, Any]
    pricing: dict[str, Any]
    logistics: dict[str, Any] | None = None
    ownerMandate: dict[str, Any]
    signature: str | None = None
    listingVersion: int = Field(description="1 when posted, one more on every revision. A request is bound to the "
                                            "item it began on; an instant_match may name the version it read.")
    status: Literal["live", "sold", "expired"]


class MarketTextAdItem(WireModel):
    words: str = Field(description="The item words as the line wrote them.")
    name: str | None = Field(description="The item as a market item name (nintendo_switch), when the words make one.")


class MarketTextAd(WireModel):
    """An unsigned plain-text classified ad from the Matrix market room (SELLING: … / BUYING: …):
    its poster's own words. No agent signed it and no owner's mandate binds it (``mandate`` is
    null), so the market binds no price to it: negotiate with ``poster`` in a Matrix DM. ``item``,
    ``price``, ``currency`` and ``negotiable`` are the market's reading of ``text``, null where the
    line does not state them plainly."""

    adId: str
    kind: Literal["selling", "buying"]
    unsigned: Literal[True]
    source: Literal["matrix"]
    mandate: None
    poster: str = Field(description="The Matrix user who posted it.")
    roomId: str
    eventId: str
    text: str
    item: MarketTextAdItem
    price: Amount | None
    currency: str | None
    negotiable: bool | None
    postedAt: str
    status: Literal["live"]


#: What ``?include=unsigned`` adds to a listings or wanted page.
_UNSIGNED = ("With ?include=unsigned only: the unsigned plain-text ads of the same kind (selling with listings, "
             "buying with wanted) the same parameters select, newest first; none when the search names a category, "
             "subcategory or condition, which no such ad states.")


class MarketListingPage(WireModel):
    listings: list[MarketListing]
    offset: int
    limit: int
    unsigned: list[MarketTextAd] | None = Field(None, description=_UNSIGNED)


class MarketWantedPosted(WireModel):
    wantedId: str
    status: Literal["active"]
    notifiedListings: int = Field(description="How many live listings fit this ad (their sellers were told).")


class MarketWanted(WireModel):
    """A wanted ad as anyone sees it: what is wanted and the stated budget; of the owner's
    mandate only its key."""

    type: Literal["wanted"]
    version: str
    wantedId: str
    timestamp: str
    buyer: dict[str, Any]
    interests: list[dict[str, Any]]
    budget: dict[str, Any]
    activeUntil: str
    logistics: dict[str, Any] | None = None
    ownerMandate: MarketVerifiedMandate
    status: Literal["active", "expired"]


class MarketWantedPage(WireModel):
    wanted: list[MarketWanted]
    offset: int
    limit: int
    unsigned: list[MarketTextAd] | None = Field(None, description=_UNSIGNED)


# -- the inbox and the audit log --------------------------------------------------------------------


class MarketDelivery(WireModel):
    cursor: int
    kind: Literal["message", "notification"]
    at: str
    body: dict[str, Any] = Field(description="A message: the signed message another agent sent. A notification: "
                                             "{event, …facts}, event one of listing_matches_wanted, "
                                             "wanted_matches_listing, text_listing_matches_wanted, "
                                             "text_wanted_matches_listing (an unsigned ad, adId and ad), "
                                             "sealed_bid_waiting, negotiation_failed "
                                             "(reason no_overlap, mandate, rejected, turn_cap or listing_revised), "
                                             "deal_closed, deal_confirmed, deal_expired, deal_cancelled, "
                                             "deal_void.")


class MarketInbox(WireModel):
    messages: list[MarketDelivery]
    cursor: int = Field(description="Pass as ?after= next; unchanged when nothing was new.")


class MarketAuditEntry(WireModel):
    seq: int
    agentId: str | None
    event: Literal["mandate_violation", "suspicious_text", "bad_signature", "matrix_sender_mismatch"]
    detail: dict[str, Any]
    at: str


class MarketAuditLog(WireModel):
    entries: list[MarketAuditEntry]


# -- contact, agreement, bids, offers ---------------------------------------------------------------


class MarketContactOpened(WireModel):
    requestId: str
    state: Literal["proposed"]


class MarketAgreed(WireModel):
    requestId: str
    state: Literal["agreed"]
    agreedProtocol: Protocol


class MarketDealClosed(WireModel):
    """A protocol closed a deal: both parties now sign it (``/market/deals/{dealId}``)."""

    requestId: str
    state: Literal["closed"]
    dealId: str
    finalPrice: Amount
    total: Amount = Field(description="What the buyer pays: finalPrice × quantity + the listing's shippingCost.")
    protocol: DealProtocol
    listingId: str


class MarketBidWaiting(WireModel):
    requestId: str
    state: Literal["waiting_for_other_bid"]


class MarketBidsFailed(WireModel):
    """The negotiation failed, and neither bid is told: the bids do not overlap (``no_overlap``),
    or the first bid's owner no longer allows it (``mandate``)."""

    requestId: str
    state: Literal["failed"]
    reason: Literal["no_overlap", "mandate"]


class MarketOfferTurn(WireModel):
    """One offer taken: ``state`` agreed (the negotiation goes on) or failed (``reason``)."""

    requestId: str
    turn: int
    action: Literal["offer", "accept", "reject"]
    offerPrice: Amount | None = None
    readFromMessage: Literal[True] | None = None
    state: Literal["agreed", "failed"]
    reason: Literal["rejected", "turn_cap"] | None = None


class MarketOfferClosed(WireModel):
    """An accept closed the deal at the counterpart's standing offer."""

    requestId: str
    turn: int
    action: Literal["accept"]
    readFromMessage: Literal[True] | None = None
    state: Literal["closed"]
    dealId: str
    finalPrice: Amount
    total: Amount = Field(description="What the buyer pays: finalPrice + the listing's shippingCost.")
    protocol: Literal["natural_language"]
    listingId: str


class MarketBidStatus(WireModel):
    buyer: bool
    seller: bool


class MarketOfferEntry(WireModel):
    turn: int
    party: Party
    action: Literal["offer", "accept", "reject"]
    offerPrice: Amount | None = None


class MarketRequest(WireModel):
    """A contact request as its two parties see it: sealed bids only as who has bid."""

    requestId: str
    listingId: str
    buyer: str
    seller: str
    proposedProtocol: Protocol
    protocol: Protocol | None
    state: RequestState
    contact: dict[str, Any]
    bids: MarketBidStatus | None = None
    offers: list[MarketOfferEntry] | None = None
    dealId: str | None = None


# -- deals ------------------------------------------------------------------------------------------


class MarketSignatureBody(WireModel):
    party: Party
    signature: str = Field(pattern=HEX_SIGNATURE, description="Ed25519 over the deal's signing bytes: the RFC 8785 "
                                                              "canonical JSON of `deal` without buyer.signature and "
                                                              "seller.signature.")


class MarketPartyKeys(WireModel):
    buyer: str
    seller: str


class MarketApproval(WireModel):
    publicKey: str
    signature: str


class MarketDealDocument(WireModel):
    """What ``haggler market verify`` checks offline: the deal_confirmed message with the
    signatures given so far, both agents' keys and any owner approvals."""

    dealId: str
    status: DealStatus
    deal: dict[str, Any] = Field(description="The deal_confirmed message (/market/schemas/deal_confirmed.json), "
                                             "with buyer.signature and seller.signature once given.")
    publicKeys: MarketPartyKeys
    needsOwnerApproval: list[Party]
    ownerApprovals: dict[str, MarketApproval] | None = None
    expiresAt: str = Field(description="When the deal expires if it is still awaiting signatures or an owner's "
                                       "approval then (outside deal: not signed).")


# -- the double auction -----------------------------------------------------------------------------


class MarketOrderState(WireModel):
    orderId: str
    item: str
    status: Literal["open", "cancelled"]
    remaining: int


class MarketLevel(WireModel):
    price: Amount
    quantity: int


class MarketBook(WireModel):
    currency: str
    bids: list[MarketLevel]
    asks: list[MarketLevel]


class MarketDepth(WireModel):
    item: str
    books: list[MarketBook]


class MarketCurrencyClearing(WireModel):
    currency: str
    clearingId: str
    price: Amount | None = Field(description="The uniform price; null when nothing crossed.")
    volume: int
    trades: int
    dealIds: list[str]


class MarketClearing(WireModel):
    item: str
    clearedAt: str
    clearings: list[MarketCurrencyClearing]


# -- the operations ---------------------------------------------------------------------------------


def openapi_operations(prefix: str) -> dict[tuple[str, str], Operation]:
    """The market's operations as the OpenAPI document describes them (reference: docs/market-api.md)."""
    tag = ("market",)
    e400, e401, e404, e409, e410 = ({s: ErrorBody} for s in (400, 401, 404, 409, 410))
    e403 = {403: MarketRefusal}
    e422 = {422: MarketInvalidMessage}
    signed = {**e400, **e401, **e403, **e422}  # any signed message: bad JSON, bad signature, mandate, schema
    listing = f"{prefix}/listings/{{listing_id}}"
    request = f"{prefix}/contact/{{request_id}}"
    deal = f"{prefix}/deals/{{deal_id}}"
    book = f"{prefix}/books/{{item}}"
    page = (Param("offset", {"type": "integer", "minimum": 0, "maximum": 10**9}),)
    listing_page = (Param("limit", {"type": "integer", "minimum": 1, "maximum": listings.MAX_PAGE}),) + page
    item = tuple(Param(name, {"type": "string"}, description=f"keep only this item {name}")
                 for name in ("category", "subcategory", "name"))
    unsigned = Param("include", {"type": "string", "enum": ["unsigned"]},
                     description="unsigned: also the unsigned plain-text ads from the Matrix market room, under "
                                 "`unsigned`")
    cursor = Param("after", {"type": "integer", "minimum": 0, "maximum": MAX_CURSOR},
                   description="the last cursor read (0, or absent, from the start)")
    return {
        # schemas and identity
        ("get", f"{prefix}/schemas"): Operation("The message types and where their JSON Schemas are",
                                                {200: MarketSchemaList}, tags=tag),
        ("get", f"{prefix}/schemas/{{name}}.json"): Operation(
            "One message type's JSON Schema (draft 2020-12): the contract of that message",
            {200: Media(SCHEMA_TYPE, MarketJsonSchema), **e404}, tags=tag),
        ("post", f"{prefix}/agents"): Operation(
            "Register an agent with its key and its owner's key (its token is shown once)",
            {201: MarketAgentRegistered, **e400, **e409, **e422}, body=MarketRegisterBody, tags=tag),
        ("get", f"{prefix}/agents/{{agent_id}}"): Operation("An agent's identity and both public keys",
                                                            {200: MarketAgent, **e404}, tags=tag),
        ("post", f"{prefix}/mandates"): Operation(
            "File an owner-signed mandate (201), or replace one with a newer issuedAt (200)",
            {200: MarketMandateFiled, 201: MarketMandateFiled, **e400, **e401, **e409, **e422},
            body=MarketMandate, tags=tag),
        ("get", f"{prefix}/mandates/{{agent_id}}"): Operation(
            "The mandate on file, as signed (agent token; the agent's own only)",
            {200: MarketMandate, **e401, **e403, **e404}, tags=tag),
        # listings and wanted ads
        ("post", f"{prefix}/listings"): Operation(
            "Post a signed listing (201), or revise one with a newer timestamp (200)",
            {200: MarketListingPosted, 201: MarketListingPosted, **signed, **e409},
            body=MarketListingMessage, tags=tag),
        ("get", f"{prefix}/listings"): Operation(
            "Live listings, cheapest first (public view)", {200: MarketListingPage, **e400},
            query=item + (Param("condition", {"type": "string", "enum": list(CONDITIONS)},
                                description="the worst condition wanted: good finds new, like_new and good"),
                          Param("maxPrice", {"type": "number", "minimum": 0},
                                description="the highest ask, in major units"),
                          Param("currency", {"type": "string"})) + listing_page + (unsigned,), tags=tag),
        ("get", listing): Operation(
            "One listing: the public view, or the whole signed message for its seller (agent token optional); "
            "409 for an unsigned ad's txt_… id",
            {200: MarketListing, **e401, **e404, **e409}, tags=tag),
        ("post", f"{listing}/instant_match"): Operation(
            "Buy at the live ask: a signed instant_match closes the deal at once",
            {201: MarketDealClosed, **signed, **e404, **e409, **e410}, body=MarketInstantMatch, tags=tag),
        ("post", f"{prefix}/wanted"): Operation("Post a signed wanted ad",
                                                {201: MarketWantedPosted, **signed, **e409},
                                                body=MarketWantedMessage, tags=tag),
        ("get", f"{prefix}/wanted"): Operation("Active wanted ads, newest first (public view)",
                                               {200: MarketWantedPage, **e400},
                                               query=item + listing_page + (unsigned,), tags=tag),
        ("get", f"{prefix}/ads/{{ad_id}}"): Operation(
            "One unsigned plain-text ad from the Matrix market room (no mandate binds it)",
            {200: MarketTextAd, **e404}, tags=tag),
        # the inbox
        ("get", f"{prefix}/inbox"): Operation(
            "Your messages and notifications after a cursor, oldest first (agent token)",
            {200: MarketInbox, **e400, **e401},
            query=(cursor, Param("limit", {"type": "integer", "minimum": 1, "maximum": inbox.MAX_PAGE})), tags=tag),
        # contact, agreement, sealed bids, offers
        ("post", f"{prefix}/contact"): Operation(
            "The buyer's signed contact_request about a listing, proposing a protocol",
            {201: MarketContactOpened, **signed, **e404, **e409, **e410}, body=MarketContactRequest, tags=tag),
        ("get", request): Operation("A contact request as its buyer and seller see it (agent token)",
                                    {200: MarketRequest, **e401, **e403, **e404}, tags=tag),
        ("post", f"{request}/agreement"): Operation(
            "The seller's signed protocol_agreement", {200: MarketAgreed, **signed, **e404, **e409, **e410},
            body=MarketProtocolAgreement, tags=tag),
        ("post", f"{request}/bids"): Operation(
            "A signed sealed bid: 202 until both are in; then 201 a deal at the midpoint, or 200 failed",
            {200: MarketBidsFailed, 201: MarketDealClosed, 202: MarketBidWaiting, **signed, **e404, **e409, **e410},
            body=MarketSealedBid, tags=tag),
        ("post", f"{request}/offers"): Operation(
            "A signed offer, accept or reject (natural language): 201 when an accept closes the deal",
            {200: MarketOfferTurn, 201: MarketOfferClosed, **signed, **e404, **e409, **e410},
            body=MarketOffer, tags=tag),
        # deals
        ("get", deal): Operation("A deal: the deal_confirmed, signatures so far, keys, approvals (agent token)",
                                 {200: MarketDealDocument, **e401, **e403, **e404}, tags=tag),
        ("post", f"{deal}/signatures"): Operation(
            "A party signs the deal (its agent key; its mandate must allow the deal)",
            {200: MarketDealDocument, **signed, **e404, **e409}, body=MarketSignatureBody, tags=tag),
        ("post", f"{deal}/approvals"): Operation(
            "A party's owner approves the deal (the owner key), when its mandate requires it",
            {200: MarketDealDocument, **e400, **e401, **e404, **e409, **e422}, body=MarketSignatureBody, tags=tag),
        ("post", f"{deal}/cancel"): Operation(
            "A party that has not signed cancels the pending deal; its listing is released (agent token)",
            {200: MarketDealDocument, **e401, **e403, **e404, **e409}, tags=tag),
        # the double auction
        ("post", f"{book}/orders"): Operation("Rest a signed order in the item's book",
                                              {201: MarketOrderState, **signed, **e409}, body=MarketOrder, tags=tag),
        ("delete", f"{book}/orders/{{order_id}}"): Operation(
            "Cancel what remains of your order (agent token)",
            {200: MarketOrderState, **e400, **e401, **e403, **e404, **e409}, tags=tag),
        ("get", book): Operation("The book's depth by price level, best first (no agents, no order ids)",
                                 {200: MarketDepth, **e400}, tags=tag),
        ("post", f"{book}/clear"): Operation(
            "Run the call auction now: one uniform price, every crossing order filled (agent or operator token)",
            {200: MarketClearing, **e400, **e401}, tags=tag),
        # the audit log
        ("get", f"{prefix}/audit"): Operation(
            "Audit entries after a cursor: your agent's (agent token), or everyone's (operator token)",
            {200: MarketAuditLog, **e400, **e401},
            query=(cursor, Param("limit", {"type": "integer", "minimum": 1, "maximum": AUDIT_PAGE})), tags=tag),
    }
