"""The negotiation runner (`haggler shop`, the MCP `negotiate` tool) never ends in a deal above
the budget, whatever the merchant's text says, and reports a store's deal above it as not taken.

The store here is haggler's real one (its negotiate.v1 ChatService), in process behind a client
that hands the runner what a store sends: the message (with an adversary's text in it), and the
structured offer/deal of haggler's extension — or not, as from a store that sends only text.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import replace

import pytest

from haggler.catalog import Product, load_catalog
from haggler.lab.security import red_team_attacks
from haggler.money import format_money
from haggler.protocols.negotiate_v1.service import ChatService
from haggler.shopper.models import ChatStarted, Deal, Endpoints, Limits, Listing, Offer, Reply, StoreInfo
from haggler.shopper.negotiation import goal_for, run_negotiation
from tests.support.chat_service import chat_service

CATALOG = load_catalog()
BASE = "http://store.test"


def _store_info(product: Product, max_messages: int) -> StoreInfo:
    listing = Listing(product.id, product.name, product.list_price_cents, product.currency)
    return StoreInfo(f"{BASE}/negotiate.json", "negotiate.v1", "Test store", None, None,
                     Endpoints(f"{BASE}/start/{{product_id}}", f"{BASE}/say/{{session_id}}/{{url_encoded_message}}",
                               f"{BASE}/history/{{session_id}}", None),
                     (listing,), Limits(None, max_messages, None, None, product.currency), raw={})


def _offer(terms) -> Offer | None:  # type: ignore[no-untyped-def]
    return None if terms is None else Offer(terms.price_cents, terms.currency, tuple(terms.extras))


class InProcessClient:
    """An AsyncNegotiateClient's start/say over a ChatService; ``hear`` is what becomes of each
    merchant message on its way, ``structured`` whether the extension's offer/deal come along."""

    def __init__(self, service: ChatService, hear, *, structured: bool) -> None:  # type: ignore[no-untyped-def]
        self.service, self.hear, self.structured = service, hear, structured
        self.deals: list[Deal] = []

    async def start(self, store: StoreInfo, product_id: str) -> ChatStarted:
        chat = self.service.start(product_id, "203.0.113.7")
        return ChatStarted(chat.session_id, self.hear(chat.greeting), f"{BASE}/say/{chat.session_id}/{{m}}",
                           _offer(chat.offer) if self.structured else None)

    async def say(self, store: StoreInfo, next_url: str, message: str) -> Reply:
        session_id = next_url.split("/")[-2]
        reply = self.service.say(session_id, message, checkout_url=lambda d: f"{BASE}/checkout/{d}")
        deal = None
        if reply.deal is not None:
            row = reply.deal
            deal = Deal(row.id, row.price_cents, row.currency, tuple(row.extras), f"{BASE}/checkout/{row.id}")
            self.deals.append(deal)
        return Reply(self.hear(reply.message), reply.closed, None if reply.closed else next_url,
                     _offer(reply.offer) if self.structured else None, deal if self.structured else None)


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> ChatService:
    return chat_service(CATALOG, tmp_path_factory.mktemp("budget-guard"), seed=7)


@pytest.mark.parametrize("structured", [False, True], ids=["text", "json"])
def test_corpus_attacks_in_every_merchant_message_never_cost_more_than_the_budget(service, structured):
    products = CATALOG.products
    for k, (attack_id, text) in enumerate(red_team_attacks()):
        product = products[k % len(products)]
        # budgets from below the floor to above list, so that deals happen and some cannot
        budget = product.floor_cents + (product.list_price_cents - product.floor_cents) * (k % 5 - 1) // 3
        client = InProcessClient(service, lambda message, text=text: f"{message} {text}", structured=structured)
        info = _store_info(product, service.limits.max_messages_per_chat)
        goal = goal_for(info.products[0], budget / 100, None, None)
        result = asyncio.run(run_negotiation(client, info, product.id, goal, seed=k,  # type: ignore[arg-type]
                                             structured=structured))
        for deal in client.deals:  # what the store bound
            assert deal.price_cents <= budget, (attack_id, deal, budget, result.transcript)
        if result.agreed:
            assert result.price_cents is not None and result.price_cents <= budget, (attack_id, result)


_MONEY = re.compile(r"\$[0-9][0-9,]*(?:\.[0-9]{2})?")


@pytest.mark.parametrize("structured", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("share", [0.5, 0.7, 0.85, 0.95])
def test_a_merchant_whose_text_understates_its_price_never_gets_more_than_the_budget(service, structured, share):
    """Every amount in the merchant's text is ``share`` of what it says, while the store holds its
    real offer: the shopper, agreeing to what it read, may pay no more than it named."""

    def understated(message: str) -> str:
        return _MONEY.sub(lambda m: format_money(int(float(m.group()[1:].replace(",", "")) * 100 * share)), message)

    for seed, product in enumerate(CATALOG.products):
        budget = (product.floor_cents + product.list_price_cents) // 2
        client = InProcessClient(service, understated, structured=structured)
        info = _store_info(product, service.limits.max_messages_per_chat)
        goal = goal_for(info.products[0], budget / 100, None, None)
        result = asyncio.run(run_negotiation(client, info, product.id, goal, seed=seed,  # type: ignore[arg-type]
                                             structured=structured))
        for deal in client.deals:
            assert deal.price_cents <= budget, (deal, budget, result.transcript)
        if result.agreed:
            assert result.price_cents is not None and result.price_cents <= budget, result
        if structured:  # the store's own offer, in structure, is what it read: the lie cost nothing
            assert result.agreed, result.transcript


class OverchargingService:
    """A store whose deal is recorded above the price the shopper named: it binds its list price."""

    def __init__(self, inner: ChatService) -> None:
        self.inner, self.limits = inner, inner.limits

    def start(self, product_id: str, client_ip: str):  # type: ignore[no-untyped-def]
        return self.inner.start(product_id, client_ip)

    def say(self, session_id: str, text: str, *, checkout_url):  # type: ignore[no-untyped-def]
        reply = self.inner.say(session_id, text, checkout_url=checkout_url)
        if reply.deal is None:
            return reply
        listed = CATALOG.product(reply.deal.product_id)
        assert listed is not None
        return replace(reply, deal=replace(reply.deal, price_cents=listed.list_price_cents))


def test_a_store_deal_above_the_budget_is_reported_and_not_taken(service):
    product = next(p for p in CATALOG.products if p.list_price_cents > p.floor_cents + 1000)
    budget = (product.floor_cents + product.list_price_cents) // 2
    client = InProcessClient(OverchargingService(service), lambda message: message, structured=True)  # type: ignore[arg-type]
    info = _store_info(product, service.limits.max_messages_per_chat)
    goal = goal_for(info.products[0], budget / 100, None, None)
    result = asyncio.run(run_negotiation(client, info, product.id, goal, seed=1, structured=True))  # type: ignore[arg-type]
    assert client.deals and client.deals[-1].price_cents > budget  # the store did bind its list price
    assert result.outcome == "over_budget" and not result.agreed
    assert result.price_cents == product.list_price_cents  # what the store claims, for the person to see
    assert result.checkout_url is None and result.to_json()["checkout_url"] is None
