"""Issue 29 ("Money that holds"), as a hypothesis stateful test on SQLite and PostgreSQL: random
agents, mandates refiled mid-flight (maxSpend, budget, floor, quantityOnHand, approval,
permissions), listings with shipping and revisions that change the item, instant matches, sealed
bids, offers and accepts, double-auction orders with quantities and clearings, deal signatures by
either party, owner approvals, cancels, and the injected clock moved past deals' expiry.

Most actions are refused (403/409/410/422/429): that is normal. After every step the machine
asserts, from what the owners signed (the mandate the test filed, in force at each moment) and
the deals read back over HTTP by a party:

* no confirmed deal's total (price × quantity + shipping) is above the maxSpend of the buyer's
  mandate in force when it was confirmed, and none is below its seller's floor then in force (nor
  below the listing's embedded floor);
* no pending deal is outside the mandates now in force (design 2: a refiled mandate voids the
  pending deals it does not allow);
* for every buyer with a budget, the totals of its pending and confirmed deals are at most
  max(budget, confirmed): the budget, unless a refile lowered it below deals already confirmed
  (confirmed deals stand; every pending one must then be void); the same for a seller's
  quantityOnHand;
* every listing deal's ``item`` is the item block of the listing version the buyer committed to
  (contact request or instant match); an auction deal has none;
* a refused action changes no market state (the audit log aside)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule, run_state_machine_as_test
from sqlalchemy import select

from haggler.storage.schema import market_deals
from tests.support.market import Trader, database, new_id, state
from tests.support.market_issue29 import (
    DEAL_EXPIRY_SECONDS,
    PENDING,
    approve,
    budget,
    cancel,
    cents,
    clear,
    instant,
    item_block,
    listing,
    offer,
    quantity,
    sign,
)

NAMES = ("nintendo_switch", "empty_box")


@pytest.fixture
def store(make_store, db_url):
    return make_store(db_url=db_url)


def _machine(store):
    class MoneyMachine(RuleBasedStateMachine):
        @initialize()
        def agents(self) -> None:
            store.clock.advance(days=3)  # every deal of an earlier example is past its expiry
            self.book = f"electronics.gaming_console.{new_id('console')}"  # a book of this example's own
            self.sellers = [self._register("seller") for _ in range(2)]
            self.buyers = [self._register("buyer") for _ in range(3)]
            self.by_id = {agent.id: agent for agent in self.sellers + self.buyers}
            self.mandates: dict[str, dict[str, Any]] = {}  # agent id -> constraints+permissions in force
            self.listings: dict[str, dict[str, Any]] = {}  # id -> seller, version, item, floor, ask, shipping
            self.requests: dict[str, dict[str, Any]] = {}  # id -> listing, buyer, seller, item, shipping, seq
            self.committed: dict[str, dict[str, Any]] = {}  # request id -> item, shipping, listing, floor
            self.deals: dict[str, dict[str, Any]] = {}  # deal id -> what the test knows of it
            for agent in self.sellers:
                self._file(agent, {"minAcceptablePrice": 100}, {})
            for agent in self.buyers:
                self._file(agent, {"maxSpend": 300}, {})  # budgets come with refiles

        # -- helpers -------------------------------------------------------------------------------

        def _register(self, role: str) -> Trader:
            agent = Trader(store.http, new_id(role), store.clock)
            for _ in range(3):
                response = store.http.post("/market/agents", json={
                    "agentId": agent.id, "publicKey": agent.public_key, "ownerPublicKey": agent.owner_key})
                if response.status_code != 429:
                    break
                store.clock.advance(hours=1)  # a registration limit: let its window pass
            assert response.status_code == 201, response.text
            agent.token = response.json()["token"]
            return agent

        def _file(self, agent: Trader, constraints: dict[str, Any], permissions: dict[str, bool]) -> None:
            store.clock.advance(seconds=1)
            message = agent.mandate(issued=store.clock(), permissions=permissions, **constraints)
            self._act(lambda: store.http.post("/market/mandates", json=message),
                      lambda body: self.mandates.__setitem__(agent.id, {**message["constraints"],
                                                                         **message["permissions"]}))

        def _settled(self) -> bool:
            """Whether every deal of this example past its expiry already shows as expired in the
            database (else a refused action may be what writes the expiry, and is allowed to)."""
            now = store.clock()
            with database(store).read() as conn:
                found = conn.execute(select(market_deals.c.status, market_deals.c.created_at)
                                     .where(market_deals.c.id.in_(list(self.deals)))).all()
            return not any(row.status in PENDING and row.created_at + timedelta(seconds=DEAL_EXPIRY_SECONDS) <= now
                           for row in found)

        def _act(self, call, on_success=None) -> Any:
            """Run one action; a refusal (4xx) must change no market state."""
            compare = self._settled()
            before = state(store) if compare else None
            response = call()
            assert response.status_code < 500, (response.status_code, response.text)
            if response.status_code >= 400:
                if before is not None:
                    after = state(store)
                    for table in before:
                        assert after[table] == before[table], (response.status_code, response.text, table)
                return None
            body = response.json()
            if on_success is not None:
                on_success(body)
            return body

        def _opened(self, body: dict[str, Any], request_id: str, buyer: str, seller: str) -> None:
            """A 201 naming a deal: remember it, with who the parties were."""
            if isinstance(body, dict) and body.get("dealId"):
                self.deals[body["dealId"]] = {"buyer": buyer, "seller": seller, "requestId": request_id,
                                              "confirmed_under": None}

        def _agent_of(self, deal_id: str, party: str) -> Trader:
            return self.by_id[self.deals[deal_id][party]]

        # -- mandates --------------------------------------------------------------------------------

        @rule(who=st.integers(0, 2), max_spend=st.sampled_from([50, 150, 250, 400]),
              cap=st.sampled_from([None, 200, 450, 800]), approval=st.booleans(),
              instant_ok=st.booleans(), sealed_ok=st.booleans(), negotiate_ok=st.booleans())
        def refile_buyer(self, who, max_spend, cap, approval, instant_ok, sealed_ok, negotiate_ok):
            constraints: dict[str, Any] = {"maxSpend": max_spend}
            if cap is not None:
                constraints["budget"] = budget(cap)
            self._file(self.buyers[who], constraints, {
                "requiresOwnerApproval": approval, "canAcceptInstantMatch": instant_ok or not negotiate_ok,
                "canUseSealedBid": sealed_ok, "canNegotiate": negotiate_ok})

        @rule(who=st.integers(0, 1), floor=st.sampled_from([50, 100, 150, 200]),
              on_hand=st.sampled_from([None, 1, 2, 4]), approval=st.booleans(), instant_ok=st.booleans())
        def refile_seller(self, who, floor, on_hand, approval, instant_ok):
            constraints: dict[str, Any] = {"minAcceptablePrice": floor}
            if on_hand is not None:
                constraints["quantityOnHand"] = on_hand
            self._file(self.sellers[who], constraints, {"requiresOwnerApproval": approval,
                                                        "canAcceptInstantMatch": instant_ok})

        # -- listings --------------------------------------------------------------------------------

        @rule(who=st.integers(0, 1), ask=st.sampled_from([60, 120, 180, 240]),
              floor=st.sampled_from([50, 100, 150]), shipping=st.sampled_from([None, 10, 25]),
              name=st.sampled_from(NAMES))
        def post_listing(self, who, ask, floor, shipping, name):
            seller = self.sellers[who]
            body = listing(seller, ask=ask, floor=floor, shipping=shipping, item=item_block(name))
            self._act(lambda: seller.send("/market/listings", body), lambda answer: self.listings.__setitem__(
                body["listingId"], {"seller": seller.id, "version": 1, "item": body["item"], "floor": floor,
                                    "ask": ask, "shipping": shipping}))

        @precondition(lambda self: self.listings)
        @rule(pick=st.integers(0, 99), change=st.sampled_from(["item", "price", "shipping"]),
              ask=st.sampled_from([60, 120, 180, 240]), name=st.sampled_from(NAMES))
        def revise_listing(self, pick, change, ask, name):
            listing_id = sorted(self.listings)[pick % len(self.listings)]
            known = self.listings[listing_id]
            seller = self.by_id[known["seller"]]
            store.clock.advance(seconds=1)
            item = item_block(name) if change == "item" else known["item"]
            shipping = (25 if known["shipping"] != 25 else None) if change == "shipping" else known["shipping"]
            new_ask = ask if change == "price" else known["ask"]
            body = listing(seller, listing_id=listing_id, ask=new_ask, floor=known["floor"], shipping=shipping,
                           item=item, issued=store.clock())

            def revised(answer):
                known.update(version=known["version"] + 1, item=item, ask=new_ask, shipping=shipping)
            self._act(lambda: seller.send("/market/listings", body), revised)

        # -- instant match ---------------------------------------------------------------------------

        @precondition(lambda self: self.listings)
        @rule(who=st.integers(0, 2), pick=st.integers(0, 99), stale=st.booleans())
        def instant_match(self, who, pick, stale):
            listing_id = sorted(self.listings)[pick % len(self.listings)]
            known = self.listings[listing_id]
            buyer = self.buyers[who]
            version = known["version"] - 1 if stale and known["version"] > 1 else known["version"]
            message = instant(buyer, listing_id, known["ask"], version=version)
            committed = {"item": dict(known["item"]), "shipping": known["shipping"], "listing": listing_id,
                         "floor": known["floor"]}
            body = self._act(lambda: buyer.send(f"/market/listings/{listing_id}/instant_match", message))
            if body is not None:
                assert version == known["version"], f"an instant match on stale version {version} closed: {body}"
                self.committed[message["requestId"]] = committed
                self._opened(body, message["requestId"], buyer.id, known["seller"])

        # -- contact, sealed bids, offers ------------------------------------------------------------

        @precondition(lambda self: self.listings)
        @rule(who=st.integers(0, 2), pick=st.integers(0, 99),
              protocol=st.sampled_from(["sealed_bid", "natural_language"]))
        def contact(self, who, pick, protocol):
            listing_id = sorted(self.listings)[pick % len(self.listings)]
            known = self.listings[listing_id]
            buyer, seller = self.buyers[who], self.by_id[known["seller"]]
            message = buyer.contact(listing_id, protocol)
            request_id = message["requestId"]
            committed = {"item": dict(known["item"]), "shipping": known["shipping"], "listing": listing_id,
                         "floor": known["floor"]}
            if self._act(lambda: buyer.send("/market/contact", message)) is None:
                return
            self.committed[request_id] = committed
            self.requests[request_id] = {"buyer": buyer.id, "seller": seller.id, "protocol": protocol,
                                         "seq": {"buyer": 0, "seller": 0}}
            self._act(lambda: seller.send(f"/market/contact/{request_id}/agreement",
                                          seller.agreement(request_id, protocol)))

        def _request(self, pick: int, protocol: str) -> str | None:
            chosen = sorted(rid for rid, r in self.requests.items() if r["protocol"] == protocol)
            return chosen[pick % len(chosen)] if chosen else None

        @precondition(lambda self: self.requests)
        @rule(pick=st.integers(0, 99), party=st.sampled_from(["buyer", "seller"]),
              limit=st.sampled_from([55, 110, 150, 190, 260, 420]))
        def sealed_bid(self, pick, party, limit):
            request_id = self._request(pick, "sealed_bid")
            if request_id is None:
                return
            known = self.requests[request_id]
            agent = self.by_id[known[party]]
            body = self._act(lambda: agent.send(f"/market/contact/{request_id}/bids",
                                                agent.bid(request_id, party, limit)))
            if body is not None:
                self._opened(body, request_id, known["buyer"], known["seller"])

        @precondition(lambda self: self.requests)
        @rule(pick=st.integers(0, 99), party=st.sampled_from(["buyer", "seller"]),
              action=st.sampled_from(["offer", "offer", "accept"]), price=st.sampled_from([60, 130, 170, 230, 350]))
        def offer(self, pick, party, action, price):
            request_id = self._request(pick, "natural_language")
            if request_id is None:
                return
            known = self.requests[request_id]
            agent = self.by_id[known[party]]
            message = offer(agent, request_id, party, price if action == "offer" else None,
                            sequence=known["seq"][party] + 1, action=None if action == "offer" else action)
            body = self._act(lambda: agent.send(f"/market/contact/{request_id}/offers", message))
            if body is not None:
                known["seq"][party] += 1
                self._opened(body, request_id, known["buyer"], known["seller"])

        # -- the double auction ----------------------------------------------------------------------

        @rule(who=st.integers(0, 4), price=st.sampled_from([40, 90, 140, 190, 260]), units=st.integers(1, 6))
        def order(self, who, price, units):
            agent = (self.buyers + self.sellers)[who]
            side = "buy" if agent in self.buyers else "sell"
            self._act(lambda: agent.send(f"/market/books/{self.book}/orders",
                                         agent.order(side, price, units, item=self.book)))

        @rule(buyer=st.integers(0, 2), seller=st.integers(0, 1), price=st.sampled_from([90, 140, 190, 260]),
              spread=st.sampled_from([0, 30]), units=st.integers(1, 4), seller_units=st.integers(1, 4))
        def cross_and_clear(self, buyer, seller, price, spread, units, seller_units):
            """A sell and a buy that cross, then the call auction: the auction's way to a deal."""
            self.order(3 + seller, price - spread, seller_units)
            self.order(buyer, price, units)
            self.clear_book(buyer)

        @rule(who=st.integers(0, 4))
        def clear_book(self, who):
            agent = (self.buyers + self.sellers)[who]
            before = set(self._my_deal_rows())
            answer = self._act(lambda: clear(agent, self.book))
            if answer is None:
                return
            with database(store).read() as conn:
                rows = conn.execute(select(market_deals.c.id, market_deals.c.buyer_id, market_deals.c.seller_id,
                                           market_deals.c.request_id)
                                    .where(market_deals.c.id.in_([d for c in answer["clearings"]
                                                                  for d in c.get("dealIds", [])]))).all()
            for row in rows:
                if row.id not in before:
                    self.deals[row.id] = {"buyer": row.buyer_id, "seller": row.seller_id, "requestId": row.request_id,
                                          "confirmed_under": None}

        # -- deals -------------------------------------------------------------------------------------

        @precondition(lambda self: self.deals)
        @rule(pick=st.integers(0, 99), party=st.sampled_from(["buyer", "seller"]))
        def sign_deal(self, pick, party):
            deal_id = sorted(self.deals)[pick % len(self.deals)]
            self._act(lambda: sign(self._agent_of(deal_id, party), deal_id, party))

        @precondition(lambda self: self.deals)
        @rule(pick=st.integers(0, 99), seller_first=st.booleans())
        def both_sign(self, pick, seller_first):
            deal_id = sorted(self.deals)[pick % len(self.deals)]
            for party in (("seller", "buyer") if seller_first else ("buyer", "seller")):
                self._act(lambda: sign(self._agent_of(deal_id, party), deal_id, party))

        @precondition(lambda self: self.deals)
        @rule(pick=st.integers(0, 99), party=st.sampled_from(["buyer", "seller"]))
        def approve_deal(self, pick, party):
            deal_id = sorted(self.deals)[pick % len(self.deals)]
            self._act(lambda: approve(self._agent_of(deal_id, party), deal_id, party))

        @precondition(lambda self: self.deals)
        @rule(pick=st.integers(0, 99), party=st.sampled_from(["buyer", "seller"]))
        def cancel_deal(self, pick, party):
            deal_id = sorted(self.deals)[pick % len(self.deals)]
            self._act(lambda: cancel(self._agent_of(deal_id, party), deal_id))

        @rule(hours=st.sampled_from([1, 12, 25]))
        def time_passes(self, hours):
            store.clock.advance(hours=hours)

        # -- invariants --------------------------------------------------------------------------------

        def _my_deal_rows(self) -> list[str]:
            mine = list(self.by_id)
            with database(store).read() as conn:
                return [row.id for row in conn.execute(
                    select(market_deals.c.id).where(market_deals.c.buyer_id.in_(mine))).all()]

        @invariant()
        def money_holds(self) -> None:
            if not hasattr(self, "deals"):
                return
            unknown = set(self._my_deal_rows()) - set(self.deals)
            assert not unknown, f"deals the test was never told of: {unknown}"
            spent: dict[str, dict[str, int]] = {}
            sold: dict[str, dict[str, int]] = {}
            for deal_id, known in self.deals.items():
                buyer, seller = self.by_id[known["buyer"]], self.by_id[known["seller"]]
                response = buyer.get(f"/market/deals/{deal_id}")
                assert response.status_code == 200, response.text
                document = response.json()
                deal, status = document["deal"], document["status"]
                committed = self.committed.get(known["requestId"])
                if committed is None:  # a double-auction fill
                    assert "item" not in deal, deal
                    shipping = None
                else:
                    assert deal.get("item") == committed["item"], (deal.get("item"), committed["item"])
                    shipping = committed["shipping"]
                    if deal.get("shippingCost") is not None or shipping is not None:
                        assert deal.get("shippingCost") == shipping, (deal, shipping)
                price = cents(deal["finalPrice"])
                total = price * quantity(deal) + (cents(shipping) if shipping is not None else 0)
                if "total" in deal:
                    assert cents(deal["total"]) == total, deal
                if status == "confirmed" and known["confirmed_under"] is None:
                    # first seen confirmed: the mandates in force now are those it was confirmed under
                    known["confirmed_under"] = (dict(self.mandates[buyer.id]), dict(self.mandates[seller.id]))
                if status == "confirmed" or status in PENDING:
                    buyer_mandate, seller_mandate = (known["confirmed_under"] if status == "confirmed" else
                                                     (self.mandates[buyer.id], self.mandates[seller.id]))
                    assert "maxSpend" in buyer_mandate and total <= cents(buyer_mandate["maxSpend"]), (
                        status, deal, total, buyer_mandate)
                    assert price >= cents(seller_mandate["minAcceptablePrice"]), (status, deal, seller_mandate)
                    if committed is not None:
                        assert price >= cents(committed["floor"]), (status, deal, committed)
                    kind = "confirmed" if status == "confirmed" else "pending"
                    spent.setdefault(buyer.id, {"confirmed": 0, "pending": 0})[kind] += total
                    sold.setdefault(seller.id, {"confirmed": 0, "pending": 0})[kind] += quantity(deal)
            for agent_id, sums in spent.items():
                cap = self.mandates[agent_id].get("budget")
                if cap is not None:
                    allowed = max(cents(cap["max"]), sums["confirmed"])
                    assert sums["confirmed"] + sums["pending"] <= allowed, (agent_id, sums, cap)
            for agent_id, units in sold.items():
                on_hand = self.mandates[agent_id].get("quantityOnHand")
                if on_hand is not None:
                    assert units["confirmed"] + units["pending"] <= max(on_hand, units["confirmed"]), (
                        agent_id, units, on_hand)

    return MoneyMachine


def test_money_holds_whatever_the_agents_do(store):
    """Issue 29's property (design 1–6): on SQLite and PostgreSQL, whatever random agents do,
    no deal escapes its owners' mandates, no buyer its budget, no seller its stock, no buyer an
    item it did not commit to; a refusal changes nothing."""
    run_state_machine_as_test(_machine(store), settings=settings(
        max_examples=20, stateful_step_count=30, deadline=None,
        phases=[Phase.explicit, Phase.generate], database=None,  # no shrinking: a failure reports in seconds
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]))
