"""Mandate enforcement at the API level, by property (spec 003: Owner Mandate Format: "Enforced by
framework (agent violations are rejected)"; Security Model: "Constraint enforcement: framework
rejects offers violating mandate (agent can't override)", "Constrained action space: agent can't
send payment or finalize deal above budget").

Hypothesis draws owners' mandates (floors and budgets, required condition and accessories,
permissions, deadlines) and a listing, then lets a buyer and a seller try random actions over
HTTP — prices around the limits, any protocol, clock jumps past deadlines. Whatever the market
accepted or refused, two things must hold:

* every refused request left the market exactly as it was (the audit log aside), and a 403
  mandate_violation left an audit entry;
* nothing committed — a listing's ask or minPrice, a sealed bid, an offer, an order, a deal's
  price (for both parties), a signature — breaks the mandate of the agent it binds, as
  :func:`haggler.protocols.market.mandates.check` reads the mandate that was in force when it
  was committed (owners replace mandates mid-way, too).

One store serves every example of a test (each example registers its own agents; the auction's
book is shared, so orders of earlier examples rest in it and trade). Run with
``--hypothesis-show-statistics`` to see how far the examples get (refusals by constraint, deals
opened and signed)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings, strategies as st

from haggler.protocols.market.listings import seller_floor
from haggler.protocols.market.mandates import (
    CONDITIONS,
    Mandate,
    check,
    confirm,
    listing as list_action,
    offer as offer_action,
    order as order_action,
    parse_mandate,
    sealed_bid as bid_action,
)
from haggler.storage.schema import (
    market_audit,
    market_bids,
    market_deals,
    market_listings,
    market_mandates,
    market_offers,
    market_orders,
    market_requests,
)
from tests.support.market import BOOK, Trader, new_id, rows, state, z

PROTOCOLS = ("natural_language", "sealed_bid", "instant_match")
ACCESSORIES = ("charger", "case", "dock")


def _examples(count: int) -> settings:
    """Bounded: every example is a dozen HTTP requests or so, and the whole file must stay quick."""
    return settings(max_examples=count, deadline=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
                    phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))


# -- drawing mandates, listings and prices ----------------------------------------------------------------

permissions = st.fixed_dictionaries({
    "canNegotiate": st.booleans(), "canAcceptInstantMatch": st.booleans(), "canUseSealedBid": st.booleans(),
    "requiresOwnerApproval": st.booleans()})
#: dealMustCloseBy, in minutes from the example's start: none, far, soon (a wait may pass it), past.
deadlines = st.one_of(st.none(), st.just(600), st.integers(1, 120), st.integers(-30, -1))


def _amount(cents: int) -> float | int:
    return cents // 100 if cents % 100 == 0 else cents / 100


class Round:
    """One example: a seller and a buyer with drawn mandates, their listing, and what was tried.

    Two regimes, drawn first. *Cooperative*: the owners permit every protocol, no deadline has
    passed yet, the budget reaches the floor and the listing has what the buyer's owner requires —
    so deals happen and only the prices (around the limits), the moves and the clock decide.
    *Adversarial*: every constraint and permission is drawn freely, most actions are refused."""

    def __init__(self, store, draw, *, auction: bool = False) -> None:
        self.store, self.draw = store, draw
        start = store.clock()
        self.cooperative = draw(st.sampled_from([True, True, False]), label="cooperative")
        floor = draw(st.integers(5_000, 15_000), label="floor")
        cap = floor + draw(st.integers(0 if self.cooperative else -2_000, 10_000), label="cap - floor")
        if self.cooperative:
            condition = None if auction else draw(st.sampled_from([None, *CONDITIONS[:3]]))
            accessories = () if auction else draw(st.lists(st.sampled_from(ACCESSORIES), unique=True, max_size=2))
        else:
            condition = draw(st.sampled_from([None, *CONDITIONS]))
            accessories = draw(st.lists(st.sampled_from(ACCESSORIES), unique=True, max_size=2))
        self.seller = self._agent("seller", start, floor=floor)
        self.buyer = self._agent("buyer", start, cap=cap, condition=condition, accessories=accessories)
        self.listing_id = new_id("lst")
        self.request_id: str | None = None
        self.deal_id: str | None = None

    def _agent(self, role, start, *, floor=None, cap=None, condition=None, accessories=()):
        draw = self.draw
        agent = Trader(self.store.http, new_id(role), self.store.clock)
        agent.register()
        constraints = {"minAcceptablePrice": _amount(floor)} if floor else {"maxSpend": _amount(cap)}
        if condition:
            constraints["requiredCondition"] = condition
        if accessories:
            constraints["requiredAccessories"] = list(accessories)
        if self.cooperative:
            deadline = draw(st.one_of(st.none(), st.just(600), st.integers(30, 240)), label=f"{role} deadline")
            allowed = {"canNegotiate": True, "canAcceptInstantMatch": True, "canUseSealedBid": True,
                       "requiresOwnerApproval": draw(st.booleans())}
        else:
            deadline = draw(deadlines, label=f"{role} deadline")
            allowed = draw(permissions, label=f"{role} permissions")
        if deadline is not None:
            constraints["dealMustCloseBy"] = z(start + timedelta(minutes=deadline))
        agent.limit, agent.required = floor or cap, (condition, tuple(accessories))
        agent.constraints, agent.permissions = constraints, allowed
        self._file(agent)
        return agent

    def _file(self, agent: Trader) -> None:
        """File the agent's mandate as it stands, issued now, and remember from when it binds."""
        filed = agent.file_mandate(permissions=agent.permissions, issued=self.store.clock(), **agent.constraints)
        assert filed["status"] == "on_file"
        HISTORY.setdefault(agent.id, []).append((self.store.clock(), _mandate(self.store, agent.id)))

    def refile(self):
        """The owner replaces the mandate (spec 003: a newer issuedAt replaces): another limit,
        sometimes another deadline and, in the adversarial regime, other permissions."""
        party, agent = self._party(self._turn())
        around_commitment = self.draw(st.booleans(), label="around what the agent committed to")
        near, far = self.draw(st.integers(-300, 300)), self.draw(st.integers(-3_000, 3_000), label="limit change")
        self.store.clock.advance(seconds=1)  # what was done before binds under the old mandate
        key = "minAcceptablePrice" if party == "seller" else "maxSpend"
        committed = self._committed(party)
        agent.limit = max(100, committed + near if committed is not None and around_commitment else agent.limit + far)
        agent.constraints = {**agent.constraints, key: _amount(agent.limit)}
        if self.draw(st.booleans(), label="new deadline"):
            agent.constraints.pop("dealMustCloseBy", None)
            minutes = self.draw(st.one_of(st.none(), st.integers(1, 120), st.integers(-30, -1)))
            if minutes is not None:
                agent.constraints["dealMustCloseBy"] = z(self.store.clock() + timedelta(minutes=minutes))
        if not self.cooperative:
            agent.permissions = self.draw(permissions, label="new permissions")
        self._file(agent)

    def price(self, agent: Trader) -> int:
        """A price in cents around the limits: between the floor and the budget, one cent either
        side of the agent's own limit, or anywhere in a wide band."""
        low, high = sorted((self.seller.limit, self.buyer.limit))
        own = agent.limit
        return max(1, self.draw(st.one_of(st.integers(low, high), st.sampled_from([own, own - 1, own + 1]),
                                          st.integers(low - 3_000, high + 3_000))))

    # -- sending, with the refusal invariant checked on every request -----------------------------------

    def send(self, agent: Trader, path: str, message=None, *, response=None):
        before, audit_before = state(self.store), _audit_count(self.store)
        if response is None:
            response = agent.send(path, message)
        else:
            response = response()
        assert response.status_code < 500, response.text
        event(f"{path.split('/')[2]}{'/' + path.rsplit('/', 1)[-1] if path.count('/') > 3 else ''} "
              f"{response.status_code} {response.json().get('constraint', '') if response.status_code == 403 else ''}")
        if response.status_code >= 400:
            after = state(self.store)
            for table in before:
                assert after[table] == before[table], (path, response.status_code, response.text, table)
            body = response.json()
            assert isinstance(body.get("error"), str), body
            if response.status_code == 403 and body["error"] == "mandate_violation":
                new = _audit_since(self.store, audit_before)
                assert (agent.id, "mandate_violation", body["constraint"]) in new, (new, body)
            elif response.status_code == 403 and path.endswith("/instant_match"):
                assert [e for e in _audit_since(self.store, audit_before) if e[0] == self.seller.id], body
        return response

    # -- the actions a round may try ------------------------------------------------------------------

    def post_listing(self):
        draw, seller = self.draw, self.seller
        if self.cooperative or draw(st.booleans(), label="within the mandate"):
            ask = draw(st.integers(seller.limit, seller.limit + 5_000))
            min_price = draw(st.one_of(st.none(), st.integers(seller.limit, ask)))
            embedded = draw(st.integers(seller.limit - 1_000, seller.limit))
        else:  # anywhere around the limits
            ask = self.price(seller)
            min_price = draw(st.one_of(st.none(), st.integers(seller.limit - 300, max(seller.limit, ask) + 100)))
            embedded = draw(st.integers(seller.limit - 1_000, seller.limit + 1_000))
        extras = draw(st.lists(st.sampled_from(ACCESSORIES), unique=True))
        required_condition, required = self.buyer.required
        if self.cooperative:
            accessories = tuple(sorted({*required, *extras}))
            worst = CONDITIONS.index(required_condition) if required_condition else len(CONDITIONS) - 1
            condition = draw(st.sampled_from(CONDITIONS[:worst + 1]))
        else:
            accessories = draw(st.sampled_from([tuple(sorted({*required, *extras})), tuple(extras)]))
            condition = draw(st.sampled_from(CONDITIONS))
        # A revision comes strictly after every earlier move, so that the checker (which orders by
        # time) never reads a bid or offer made at the same instant as made on the revised listing.
        self.store.clock.advance(microseconds=1)
        body = seller.listing(listing_id=self.listing_id, ask=_amount(ask), floor=_amount(max(1, embedded)),
                              min_price=None if min_price is None else _amount(max(1, min_price)),
                              condition=condition, accessories=accessories)
        response = self.send(seller, "/market/listings", body)
        if response.status_code in (200, 201):
            row = rows(self.store, market_listings, market_listings.c.id == self.listing_id)[0]
            LISTINGS.setdefault(row.id, []).append((self.store.clock(), row.floor_cents, *_listing_facts(row)))
        return response

    def instant(self):
        at_the_ask, other = self.draw(st.sampled_from([True, True, False])), self.price(self.buyer)
        ask = self._ask()
        price = ask if ask is not None and at_the_ask else other
        message = self.buyer.instant(self.listing_id, _amount(price))
        response = self.send(self.buyer, f"/market/listings/{self.listing_id}/instant_match", message)
        if response.status_code == 201:
            self.deal_id = response.json()["dealId"]

    def contact(self, proposed: str | None = None):
        draw = self.draw
        proposed = proposed or draw(st.sampled_from(PROTOCOLS))
        agreed = draw(st.sampled_from([proposed, proposed, proposed, *PROTOCOLS]))
        message = self.buyer.contact(self.listing_id, proposed)
        if self.send(self.buyer, "/market/contact", message).status_code == 201:
            self.request_id = message["requestId"]
            rid = self.request_id
            self.send(self.seller, f"/market/contact/{rid}/agreement", self.seller.agreement(rid, agreed))

    def bid(self):
        turn, buyer_limit, seller_limit = self._turn(), self.price(self.buyer), self.price(self.seller)
        if self.request_id is None:
            return
        placed = {row.party for row in rows(self.store, market_bids, market_bids.c.request_id == self.request_id)}
        party, agent = self._party(turn, usually=next((p for p in ("buyer", "seller") if p not in placed), None))
        limit = buyer_limit if party == "buyer" else seller_limit
        rid = self.request_id
        response = self.send(agent, f"/market/contact/{rid}/bids", agent.bid(rid, party, _amount(limit)))
        if response.status_code == 201:
            self.deal_id = response.json()["dealId"]

    def offer(self):
        turn = self._turn()
        action = self.draw(st.sampled_from(["offer", "accept", "offer", "accept", "offer", "reject"]))
        prices = {"buyer": self.price(self.buyer), "seller": self.price(self.seller)}
        if self.request_id is None:
            return
        made = rows(self.store, market_offers, market_offers.c.request_id == self.request_id)
        party, agent = self._party(turn, usually={"buyer": "seller", "seller": "buyer"}.get(made[-1].party)
                                   if made else None)
        rid = self.request_id
        if action == "offer":
            message = agent.offer(rid, party, _amount(prices[party]))
        else:
            message = agent.offer(rid, party, action=action)
        response = self.send(agent, f"/market/contact/{rid}/offers", message)
        if response.status_code == 201:
            self.deal_id = response.json()["dealId"]

    def sign(self):
        turn = self._turn()
        if self.deal_id is None:
            return
        deal = rows(self.store, market_deals, market_deals.c.id == self.deal_id)[0]
        party, agent = self._party(turn, usually="buyer" if deal.buyer_signature is None else "seller")
        if (deal.buyer_id, deal.seller_id)[party == "seller"] != agent.id:  # an auction deal with another round's agent
            return
        deal_id = self.deal_id
        signed_before = getattr(deal, f"{party}_signature") is not None
        response = self.send(agent, f"/market/deals/{deal_id}/signatures",
                             response=lambda: agent.sign_deal(deal_id, party))
        if response.status_code == 200 and not signed_before:  # a new signature confirms the deal now
            row = rows(self.store, market_deals, market_deals.c.id == deal_id)[0]
            assert _deal_violations(self.store, row, now=self.store.clock(), parties=(party,)) == []

    def order(self):
        turn, prices = self._turn(), {"buyer": self.price(self.buyer), "seller": self.price(self.seller)}
        mine = {row.side for row in rows(self.store, market_orders,
                                         market_orders.c.agent_id.in_([self.buyer.id, self.seller.id]))}
        party, agent = self._party(turn, usually="seller" if "buy" in mine and "sell" not in mine else
                                   "buyer" if "buy" not in mine else None)
        side = "buy" if party == "buyer" else "sell"
        self.send(agent, f"/market/books/{BOOK}/orders", agent.order(side, _amount(prices[party])))

    def clear(self):
        self.send(self.buyer, f"/market/books/{BOOK}/clear",
                  response=lambda: self.store.http.post(f"/market/books/{BOOK}/clear", headers=self.buyer.auth))

    def wait(self):
        self.store.clock.advance(minutes=self.draw(st.integers(1, 120)))

    def _committed(self, party: str) -> int | None:
        """The price the party last committed to in the current request (its bid, its offer)."""
        if self.request_id is None:
            return None
        made = [row.price_cents for row in rows(self.store, market_offers, market_offers.c.request_id == self.request_id)
                if row.party == party and row.price_cents is not None]
        made += [row.limit_cents for row in rows(self.store, market_bids, market_bids.c.request_id == self.request_id)
                 if row.party == party]
        return made[-1] if made else None

    def _turn(self) -> int:
        """Who moves, drawn before the market is looked at: each move draws the same values
        whatever the market's state (the auction's book is shared with earlier examples), so that
        Hypothesis replays an example exactly."""
        return self.draw(st.integers(0, 4), label="who moves")

    def _party(self, turn: int, usually: str | None = None):
        """A party: ``usually`` the one whose move it is (turn 0-2), now and then either (3, 4)."""
        party = usually if usually is not None and turn < 3 else ("buyer", "seller")[turn % 2]
        return party, (self.buyer if party == "buyer" else self.seller)

    def _ask(self):
        found = rows(self.store, market_listings, market_listings.c.id == self.listing_id)
        return found[0].ask_cents if found else None


def _audit_count(store) -> int:
    return len(rows(store, market_audit))


def _audit_since(store, count: int) -> list[tuple[str | None, str, str | None]]:
    found = rows(store, market_audit)[count:]
    return [(row.agent_id, row.event, json.loads(row.detail).get("constraint")) for row in found]


# -- what is committed must be within the mandates ------------------------------------------------------


#: Every mandate each agent has had, with the moment from which it bound the agent: committed
#: state is judged by the mandate in force when it was committed.
HISTORY: dict[str, list[tuple[datetime, Mandate]]] = {}


def _mandate(store, agent_id: str):
    return parse_mandate(rows(store, market_mandates, market_mandates.c.agent_id == agent_id)[0].mandate)


#: Every version of each listing (a revision changes its floor, condition, accessories), from when.
LISTINGS: dict[str, list[tuple[datetime, int, str, tuple[str, ...]]]] = {}


def _listing_at(store, listing_id: str, at: datetime) -> tuple[int, str, tuple[str, ...]]:
    """The listing's embedded floor, condition and accessories as they were at ``at``."""
    versions = [version[1:] for version in LISTINGS[listing_id] if version[0] <= at]
    assert versions, (listing_id, at)
    return versions[-1]


def _mandate_at(agent_id: str, at: datetime) -> Mandate:
    in_force = [mandate for since, mandate in HISTORY[agent_id] if since <= at]
    assert in_force, (agent_id, at)
    return in_force[-1]


def _listing_facts(row):
    item = json.loads(row.message)["item"]
    return item["condition"], tuple(item.get("accessories", ()))


def _deal_violations(store, deal, *, now=None, parties=("buyer", "seller")) -> list:
    """What each party's mandate says of confirming ``deal``: when it was opened (the mandates and
    listing then), or ``now`` (the mandates on file: a signature is a confirmation made now)."""
    at = now or deal.created_at
    condition = accessories = floor = None
    if not deal.listing_id.startswith("book:"):
        floor, condition, accessories = _listing_at(store, deal.listing_id, at)
    found = []
    for party in parties:
        agent_id = deal.buyer_id if party == "buyer" else deal.seller_id
        mandate = _mandate(store, agent_id) if now else _mandate_at(agent_id, at)
        if party == "seller":
            mandate = seller_floor(mandate, floor)
        violation = check(mandate, party, confirm(agent_id, deal.price_cents, deal.currency, at,
                                                  protocol=deal.protocol, condition=condition,
                                                  accessories=accessories))
        if violation is not None:
            found.append(("deal", deal.id, party, deal.protocol, deal.price_cents, violation))
    return found


def committed_violations(store, agents: list[str]) -> list:
    """Every committed row acting for one of ``agents`` that its agent's mandate, in force when the
    row was committed, forbids."""
    found = []
    for row in rows(store, market_listings, market_listings.c.seller_id.in_(agents)):
        mandate = seller_floor(_mandate_at(row.seller_id, row.listed_at), row.floor_cents)
        pricing = json.loads(row.message)["pricing"]
        prices = [row.ask_cents] + ([round(pricing["minPrice"] * 100)] if "minPrice" in pricing else [])
        for cents in prices:
            violation = check(mandate, "seller", list_action(row.seller_id, cents, row.currency, row.listed_at))
            if violation is not None:
                found.append(("listing", row.id, cents, violation))
    requests = {row.id: row for row in rows(store, market_requests, market_requests.c.buyer_id.in_(agents))}

    def acting(request, party, kind, cents, at):
        floor, condition, accessories = _listing_at(store, request.listing_id, at)
        agent_id = request.buyer_id if party == "buyer" else request.seller_id
        mandate = _mandate_at(agent_id, at)
        if party == "seller":
            mandate = seller_floor(mandate, floor)
        return check(mandate, party, kind(agent_id, cents, "EUR", at, condition=condition, accessories=accessories))

    for bid in rows(store, market_bids, market_bids.c.request_id.in_(list(requests))):
        violation = acting(requests[bid.request_id], bid.party, bid_action, bid.limit_cents, bid.created_at)
        if violation is not None:
            found.append(("sealed_bid", bid.request_id, bid.party, bid.limit_cents, violation))
    for offer in rows(store, market_offers, market_offers.c.request_id.in_(list(requests))):
        if offer.action == "offer":
            violation = acting(requests[offer.request_id], offer.party, offer_action, offer.price_cents,
                               offer.created_at)
            if violation is not None:
                found.append(("offer", offer.request_id, offer.party, offer.price_cents, violation))
    for order in rows(store, market_orders, market_orders.c.agent_id.in_(agents)):
        role = "buyer" if order.side == "buy" else "seller"
        violation = check(_mandate_at(order.agent_id, order.created_at), role,
                          order_action(order.agent_id, order.price_cents, order.currency, order.created_at))
        if violation is not None:
            found.append(("order", order.id, order.status, order.price_cents, violation))
    for deal in rows(store, market_deals, market_deals.c.buyer_id.in_(agents) | market_deals.c.seller_id.in_(agents)):
        found += _deal_violations(store, deal)
    return found


def _count_deals(store, game) -> None:
    """Tell Hypothesis's statistics (--hypothesis-show-statistics) how far the example got."""
    agents = [game.buyer.id, game.seller.id]
    deals = rows(store, market_deals, market_deals.c.buyer_id.in_(agents) | market_deals.c.seller_id.in_(agents))
    event(f"deals: {len(deals)}; signed by both: {sum(1 for d in deals if d.buyer_signature and d.seller_signature)}")


# -- the properties ---------------------------------------------------------------------------------------

#: Each protocol's moves, and what else may happen meanwhile (a revision, a clock jump, a rival move).
PLAYS = {
    "sealed_bid": ("bid", "bid", "refile", "wait", "sign", "post_listing", "instant", "contact"),
    "natural_language": ("offer", "offer", "refile", "offer", "wait", "sign", "post_listing", "instant"),
    "instant_match": ("instant", "sign", "wait", "refile", "post_listing", "contact"),
}


@pytest.mark.parametrize("protocol", sorted(PLAYS))
@_examples(60)
@given(data=st.data())
def test_nothing_committed_on_a_listing_breaks_a_mandate(store, data, protocol):
    """spec 003: Owner Mandate Format ("Enforced by framework"), 1. Listing, 3.-8. (sealed bid,
    offers and instant match on a listing, and the signatures): random actions around the
    mandates' limits; every refusal leaves nothing; nothing committed breaks the mandate of the
    agent it binds."""
    game = Round(store, data.draw)
    game.post_listing()
    game.contact(protocol)
    move = {"sealed_bid": "bid", "natural_language": "offer", "instant_match": "instant"}[protocol]
    # the protocol's own move first and last, anything in between, then the signatures
    first = [] if move == "instant" else [move]
    for name in [*first, *data.draw(st.lists(st.sampled_from(PLAYS[protocol]), max_size=10), label="actions"),
                 move, "sign", "sign"]:
        getattr(game, name)()
    _count_deals(store, game)
    assert committed_violations(store, [game.seller.id, game.buyer.id]) == []


AUCTION = ("order", "order", "clear", "sign", "order", "wait", "refile")


@_examples(60)
@given(data=st.data())
def test_nothing_committed_in_the_double_auction_breaks_a_mandate(store, data):
    """spec 003: Protocol 4: Double Auction, Owner Mandate Format: random bids and asks around the
    limits, clearings and clock jumps past deadlines; every refusal leaves nothing; no resting or
    filled order and no deal breaks its agent's mandate."""
    game = Round(store, data.draw, auction=True)
    agents = [game.buyer.id, game.seller.id]
    # a bid and an ask first, then anything; the scheduled clearing comes in the end, and the signatures
    for name in ["order", "order", *data.draw(st.lists(st.sampled_from(AUCTION), max_size=10), label="actions"),
                 "clear", "sign", "sign"]:
        getattr(game, name)()
        if name == "clear":
            made = rows(store, market_deals, market_deals.c.buyer_id.in_(agents) | market_deals.c.seller_id.in_(agents))
            if made:
                game.deal_id = made[-1].id
    _count_deals(store, game)
    assert committed_violations(store, [game.seller.id, game.buyer.id]) == []
