"""Deciders, the guard, and the lab's strategies (haggler.agents.decider / strategies)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haggler.agents.decider import (
    ACCEPT,
    REJECT,
    Decider,
    DeciderView,
    Decision,
    acceptable,
    guard,
    net_cents,
)
from haggler.agents.strategies import (
    STRATEGIES,
    AbsoluteTitForTat,
    DefaultShopper,
    Firm,
    Hardliner,
    NaiveAcceptFirst,
    RelativeTitForTat,
    StoreMerchant,
    TimeDependent,
    best_price,
)
from haggler.engine import Action, Terms
from haggler.lab.alternating import run_alternating
from haggler.lab.scenario import BUYER, SELLER, Extra, Scenario


def view(role: str = SELLER, *, reservation: int = 60_000, list_price: int = 100_000, round: int = 0,
         max_rounds: int = 21, mine: tuple[int, ...] = (), theirs: tuple[int, ...] = (),
         extras: dict[str, int] | None = None) -> DeciderView:
    return DeciderView(role, reservation, list_price, round, max_rounds,
                       tuple(Terms(p, "USD") for p in mine), tuple(Terms(p, "USD") for p in theirs),
                       extras or {}, "USD")


def offered(decision: Decision) -> int:
    assert isinstance(decision, Terms)
    return decision.price_cents


class Recorder:
    """Wraps a decider and records every (view, raw decision)."""

    def __init__(self, inner: Decider) -> None:
        self.inner = inner
        self.name = inner.name
        self.calls: list[tuple[DeciderView, Decision]] = []

    def decide(self, v: DeciderView) -> Decision:
        decision = self.inner.decide(v)
        self.calls.append((v, decision))
        return decision


class Malicious:
    """Proposes anything at all: crazy prices, unknown extras, other currencies, accepts at
    random, talks, offers without terms."""

    name = "malicious"

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def decide(self, v: DeciderView) -> Decision:
        rng = self.rng
        kind = rng.randrange(7)
        if kind == 0:
            return ACCEPT
        if kind == 1:
            return (100, "USD", ())  # type: ignore[return-value]  # a plain tuple is not an offer
        if kind == 2:
            return Action.MESSAGE
        if kind == 3:
            return Action.OFFER
        price = rng.choice([-10**9, -1, 0, 1, v.reservation_cents - 1, v.reservation_cents + 1, 10**12,
                            rng.randrange(1, 2 * v.list_price_cents + 2)])
        extras = tuple(rng.sample(list(v.extras) + ["yacht", "yacht"], k=min(2, len(v.extras) + 2)))
        return Terms(price, rng.choice(["USD", "EUR"]), extras)


# -- scenarios ---------------------------------------------------------------------------------------

@st.composite
def scenarios(draw: st.DrawFn, zopa: bool | None = None) -> Scenario:
    list_price = draw(st.integers(100, 500_000))
    floor = draw(st.integers(1, list_price))
    if zopa is True:
        budget = draw(st.integers(floor, max(floor, list_price * 2)))
    elif zopa is False:
        budget = draw(st.integers(max(1, floor // 3), floor)) - 1 or 1
        if budget >= floor:  # floor == 1: no budget below it
            budget, floor = 1, 2
            list_price = max(list_price, 2)
    else:
        budget = draw(st.integers(1, list_price * 2))
    extras = draw(st.lists(st.builds(Extra, st.sampled_from(["shipping", "warranty", "case", "battery"]),
                                     st.integers(0, list_price // 4), st.integers(0, list_price // 4)),
                           max_size=3, unique_by=lambda e: e.name))
    return Scenario(id="s", list_price_cents=list_price, seller_reservation_cents=floor,
                    buyer_reservation_cents=budget, extras=tuple(extras), max_rounds=draw(st.integers(1, 25)))


def make(name: str, seed: int) -> Decider:
    return Malicious(seed) if name == "malicious" else STRATEGIES[name]()


NAMES = sorted(STRATEGIES)
SELLERS = [n for n in NAMES if SELLER in getattr(STRATEGIES[n](), "roles", (SELLER, BUYER))]
BUYERS = [n for n in NAMES if BUYER in getattr(STRATEGIES[n](), "roles", (SELLER, BUYER))]


def assert_raw_decisions_safe(recorder: Recorder) -> None:
    for v, decision in recorder.calls:
        if isinstance(decision, Terms):
            assert acceptable(v, decision), (recorder.name, v, decision)
        elif decision is ACCEPT:
            assert v.their_offers and acceptable(v, v.their_offers[-1]), (recorder.name, v, decision)
        # and the guard leaves every safe decision as it is
        assert guard(decision, v) == decision


# -- the guard ----------------------------------------------------------------------------------------

def test_guard_turns_an_accept_of_nothing_into_a_reject():
    assert guard(ACCEPT, view()) == REJECT


def test_guard_turns_an_unacceptable_accept_into_a_reject():
    assert guard(ACCEPT, view(SELLER, theirs=(59_999,))) == REJECT
    assert guard(ACCEPT, view(SELLER, theirs=(60_000,))) == ACCEPT
    assert guard(ACCEPT, view(BUYER, reservation=70_000, theirs=(70_001,))) == REJECT
    assert guard(ACCEPT, view(BUYER, reservation=70_000, theirs=(70_000,))) == ACCEPT


def test_guard_rejects_a_plain_tuple_that_looks_like_terms():
    assert guard((70_000, "USD", ()), view(SELLER, theirs=(70_000,))) == REJECT  # type: ignore[arg-type]


def test_guard_clamps_offers_to_the_reservation():
    assert offered(guard(Terms(10, "USD"), view(SELLER))) == 60_000
    assert offered(guard(Terms(10**9, "USD"), view(BUYER, reservation=70_000))) == 70_000
    safe = Terms(80_000, "USD")
    assert guard(safe, view(SELLER)) is safe


def test_guard_counts_the_extras_cost_against_the_sellers_floor():
    v = view(SELLER, extras={"shipping": 2_000, "case": 500})
    decision = guard(Terms(61_000, "USD", ("shipping", "case", "shipping", "yacht")), v)
    assert decision == Terms(62_500, "USD", ("shipping", "case"))
    assert isinstance(decision, Terms) and net_cents(v, decision) == 60_000


def test_guard_fixes_the_currency_and_rejects_an_accept_in_another_currency():
    v = view(SELLER)
    assert guard(Terms(90_000, "EUR"), v) == Terms(90_000, "USD")
    other = DeciderView(SELLER, 60_000, 100_000, 1, 20, (), (Terms(90_000, "EUR"),), {}, "USD")
    assert guard(ACCEPT, other) == REJECT


def test_guard_turns_talk_and_empty_offers_into_a_reject():
    assert guard(Action.MESSAGE, view()) == REJECT
    assert guard(Action.OFFER, view()) == REJECT
    assert guard(None, view()) == REJECT  # type: ignore[arg-type]
    assert guard(REJECT, view()) == REJECT


# -- the registry ---------------------------------------------------------------------------------------

def test_registry_names_make_fresh_deciders():
    assert {"boulware", "linear", "conceder", "tit-for-tat-relative", "tit-for-tat-absolute", "hardliner",
            "accept-first", "store-merchant", "default-shopper"} <= set(STRATEGIES)
    for name, factory in STRATEGIES.items():
        a, b = factory(), factory()
        assert a is not b
        assert isinstance(a, Decider)
        assert a.name == name


def test_adapters_play_one_side_only():
    assert SELLERS == [n for n in NAMES if n != "default-shopper"]
    assert BUYERS == [n for n in NAMES if n != "store-merchant"]
    with pytest.raises(ValueError):
        StoreMerchant().decide(view(BUYER))
    with pytest.raises(ValueError):
        DefaultShopper().decide(view(SELLER))


# -- never past the reservation --------------------------------------------------------------------------

@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(SELLERS + ["malicious"]), st.sampled_from(BUYERS + ["malicious"]),
       st.sampled_from([SELLER, BUYER]), st.integers(0, 2**16))
def test_no_strategy_ever_crosses_its_reservation(scenario, seller_name, buyer_name, first, seed):
    seller, buyer = Recorder(make(seller_name, seed)), Recorder(make(buyer_name, seed + 1))
    result = run_alternating(scenario, seller, buyer, first=first)
    for recorder, name in ((seller, seller_name), (buyer, buyer_name)):
        if name != "malicious":
            assert_raw_decisions_safe(recorder)
    if result.agreed:
        assert result.terms is not None
        assert scenario.acceptable_to_seller(result.terms)
        assert scenario.acceptable_to_buyer(result.terms)
        assert result.terms.currency == scenario.currency
    else:
        assert result.terms is None


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([(n, SELLER) for n in SELLERS] + [(n, BUYER) for n in BUYERS]), st.integers(1, 10**6),
       st.integers(1, 10**6), st.lists(st.integers(1, 10**7), max_size=6))
def test_every_strategy_proposes_within_its_reservation_whatever_it_is_shown(name_role, reservation, list_price,
                                                                           theirs):
    name, role = name_role
    if role == SELLER:
        list_price = max(list_price, reservation)
    # Their offers and the decider's own earlier offers (whatever it would have made).
    decider = STRATEGIES[name]()
    mine: list[Terms] = []
    for i in range(len(theirs) + 1):
        v = DeciderView(role, reservation, list_price, min(i, 30), 31, tuple(mine),
                        tuple(Terms(p, "USD") for p in theirs[:i]), {}, "USD")
        decision = decider.decide(v)
        if isinstance(decision, Terms):
            assert acceptable(v, decision), (name, v, decision)
            mine.append(decision)
        elif decision is ACCEPT:
            assert v.their_offers and acceptable(v, v.their_offers[-1])
            break
        else:
            break


# -- time-dependent concession -----------------------------------------------------------------------------

@pytest.mark.parametrize("role", [SELLER, BUYER])
def test_boulware_concedes_later_than_linear_than_conceder(role):
    reservation = 60_000 if role == SELLER else 90_000
    mid = view(role, reservation=reservation, round=10, max_rounds=21)  # t = 0.5
    boulware, linear, conceder = (offered(STRATEGIES[n]().decide(mid)) for n in ("boulware", "linear", "conceder"))
    best = best_price(mid)
    if role == SELLER:
        assert best > boulware > linear > conceder > reservation
    else:
        assert best < boulware < linear < conceder < reservation
    assert linear == (best + reservation) // 2 or abs(linear - (best + reservation) / 2) <= 1


@pytest.mark.parametrize("role", [SELLER, BUYER])
@pytest.mark.parametrize("e", [0.2, 1.0, 5.0])
def test_time_dependent_opens_at_its_best_price_and_ends_at_its_reservation(role, e):
    reservation = 60_000 if role == SELLER else 90_000
    decider = TimeDependent(e)
    first = offered(decider.decide(view(role, reservation=reservation, round=0, max_rounds=20)))
    last = offered(decider.decide(view(role, reservation=reservation, round=19, max_rounds=20)))
    assert first == best_price(view(role, reservation=reservation))
    assert last == reservation
    prices = [offered(decider.decide(view(role, reservation=reservation, round=r, max_rounds=20))) for r in range(20)]
    assert prices == sorted(prices, reverse=(role == SELLER))


def test_time_dependent_accepts_an_offer_as_good_as_its_next():
    decider = TimeDependent(1.0)
    v = view(SELLER, round=10, max_rounds=21, theirs=(80_000,))  # its next offer: 80,000
    assert decider.decide(v) == ACCEPT
    assert decider.decide(view(SELLER, round=10, max_rounds=21, theirs=(79_999,))).__class__ is Terms
    assert decider.decide(view(BUYER, reservation=90_000, round=0, theirs=(50_000,))) == ACCEPT


def test_time_dependent_rejects_a_nonpositive_exponent():
    with pytest.raises(ValueError):
        TimeDependent(0)


def test_buyer_anchor_is_half_of_list_or_below_its_reservation():
    assert best_price(view(BUYER, reservation=90_000, list_price=100_000)) == 50_000
    assert best_price(view(BUYER, reservation=40_000, list_price=100_000)) == 32_000
    assert best_price(view(SELLER, reservation=60_000, list_price=100_000)) == 100_000


# -- firm --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("role", [SELLER, BUYER])
def test_firm_holds_out_longer_than_boulware(role):
    reservation = 60_000 if role == SELLER else 90_000
    for round_ in (5, 10, 15):
        v = view(role, reservation=reservation, round=round_, max_rounds=21)
        firm, boulware = offered(Firm().decide(v)), offered(STRATEGIES["boulware"]().decide(v))
        assert (firm > boulware) if role == SELLER else (firm < boulware)
    last = view(role, reservation=reservation, round=20, max_rounds=21)
    assert offered(Firm().decide(last)) == reservation


def test_firm_never_concedes_past_the_best_offer_it_was_made():
    # The buyer once offered 95,000 and then retreated: late in the game the seller's clock is
    # near its floor, but it asks for the 95,000 it was already offered, not for less.
    late = view(SELLER, reservation=60_000, round=19, max_rounds=21, mine=(100_000,) * 19,
                theirs=(70_000, 95_000, 80_000))
    assert offered(Firm().decide(late)) == 95_000
    assert offered(TimeDependent(0.05).decide(late)) < 95_000
    # The seller once came down to 70,000; in the last round the buyer's clock reaches its
    # budget, but it offers the 70,000 (the seller's 95,000 now is past its budget).
    buyer_last = view(BUYER, reservation=90_000, round=20, max_rounds=21, mine=(50_000,) * 20,
                      theirs=(99_000, 70_000, 95_000))
    assert offered(Firm().decide(buyer_last)) == 70_000
    assert offered(TimeDependent(0.05).decide(buyer_last)) == 90_000
    # ... and takes that best offer when it comes again.
    assert Firm().decide(view(SELLER, reservation=60_000, round=19, max_rounds=21, theirs=(95_000, 80_000, 95_000))) \
        == ACCEPT


@pytest.mark.parametrize("role", [SELLER, BUYER])
def test_firm_takes_any_acceptable_offer_in_the_last_round_only(role):
    reservation = 60_000 if role == SELLER else 90_000
    just_acceptable = reservation + (1 if role == SELLER else -1)
    unacceptable = reservation - 1 if role == SELLER else reservation + 1
    # Its last offer would ask for more (the counterpart once offered more), yet in the last
    # round an agreement at or past the reservation beats walking away.
    better = reservation + 20_000 if role == SELLER else reservation - 20_000
    theirs = (better, just_acceptable)
    assert Firm().decide(view(role, reservation=reservation, round=20, max_rounds=21, theirs=theirs)) == ACCEPT
    assert isinstance(Firm().decide(view(role, reservation=reservation, round=19, max_rounds=21, theirs=theirs)),
                      Terms)
    assert isinstance(Firm().decide(view(role, reservation=reservation, round=20, max_rounds=21,
                                         theirs=(better, unacceptable))), Terms)


# -- tit for tat ---------------------------------------------------------------------------------------

def test_absolute_tit_for_tat_mirrors_the_concession_in_cents():
    seller = AbsoluteTitForTat()
    assert offered(seller.decide(view(SELLER, mine=(100_000,), theirs=(50_000, 55_000), round=1))) == 95_000
    buyer = AbsoluteTitForTat()
    assert offered(buyer.decide(view(BUYER, reservation=90_000, mine=(50_000,), theirs=(100_000, 97_000),
                                     round=1))) == 53_000


def test_relative_tit_for_tat_mirrors_the_concession_as_a_ratio():
    seller = RelativeTitForTat()
    # the buyer moved 50,000 → 55,000 (×1.1): the seller moves 100,000 → 100,000 / 1.1
    assert offered(seller.decide(view(SELLER, mine=(100_000,), theirs=(50_000, 55_000), round=1))) == 90_910
    buyer = RelativeTitForTat()
    assert offered(buyer.decide(view(BUYER, reservation=90_000, mine=(50_000,), theirs=(100_000, 80_000),
                                     round=1))) == 62_500


@pytest.mark.parametrize("cls", [AbsoluteTitForTat, RelativeTitForTat])
def test_tit_for_tat_holds_while_the_counterpart_holds_and_opens_at_its_best(cls):
    assert offered(cls().decide(view(SELLER))) == 100_000
    assert offered(cls().decide(view(SELLER, mine=(100_000,), theirs=(50_000,), round=1))) == 100_000
    assert offered(cls().decide(view(SELLER, mine=(97_000,), theirs=(50_000, 50_000), round=2))) == 97_000


@pytest.mark.parametrize("cls", [AbsoluteTitForTat, RelativeTitForTat])
def test_tit_for_tat_never_passes_its_reservation_however_much_the_counterpart_gives(cls):
    v = view(SELLER, mine=(61_000,), theirs=(10_000, 59_000), round=2)
    assert offered(cls().decide(v)) == 60_000


# -- hardliner and accept-first ---------------------------------------------------------------------------

def test_hardliner_never_moves():
    scenario = Scenario(id="h", list_price_cents=100_000, seller_reservation_cents=60_000,
                        buyer_reservation_cents=80_000, max_rounds=15)
    seller, buyer = Recorder(Hardliner()), Recorder(TimeDependent(1.0))
    result = run_alternating(scenario, seller, buyer)
    assert not result.agreed and result.reason == "timeout"
    assert {offered(d) for _, d in seller.calls} == {100_000}


def test_hardliner_accepts_only_offers_as_good_as_its_opening():
    assert Hardliner().decide(view(SELLER, mine=(100_000,), theirs=(99_999,), round=1)).__class__ is Terms
    assert Hardliner().decide(view(SELLER, mine=(100_000,), theirs=(100_000,), round=1)) == ACCEPT
    assert Hardliner().decide(view(BUYER, reservation=90_000, theirs=(50_000,))) == ACCEPT
    assert Hardliner().decide(view(BUYER, reservation=90_000, theirs=(50_001,))).__class__ is Terms


def test_accept_first_accepts_the_first_acceptable_offer_and_otherwise_offers_its_reservation():
    decider = NaiveAcceptFirst()
    assert offered(decider.decide(view(SELLER))) == 60_000
    assert offered(decider.decide(view(SELLER, mine=(60_000,), theirs=(59_999,), round=1))) == 60_000
    assert decider.decide(view(SELLER, mine=(60_000,), theirs=(59_999, 60_000), round=2)) == ACCEPT
    assert decider.decide(view(BUYER, reservation=90_000, theirs=(90_000,))) == ACCEPT
    assert offered(decider.decide(view(BUYER, reservation=90_000, theirs=(90_001,)))) == 90_000


class Scripted:
    """Offers the given prices in order, never accepting."""

    name = "scripted"

    def __init__(self, prices: list[int]) -> None:
        self.prices = prices

    def decide(self, v: DeciderView) -> Decision:
        return Terms(self.prices[min(v.round, len(self.prices) - 1)], "USD")


def test_accept_first_takes_the_first_acceptable_offer_in_a_negotiation():
    scenario = Scenario(id="a", list_price_cents=100_000, seller_reservation_cents=60_000,
                        buyer_reservation_cents=95_000, max_rounds=10)
    buyer = Recorder(NaiveAcceptFirst())
    result = run_alternating(scenario, Scripted([99_000, 97_000, 94_000, 90_000]), buyer)
    assert result.agreed and result.terms == Terms(94_000, "USD")
    assert result.by == BUYER and result.turns == 6
    assert [offered(d) for _, d in buyer.calls[:-1]] == [95_000, 95_000]


# -- the store's and the shopper's agents -------------------------------------------------------------------

ZOPA_CASES = [
    # list, floor, budget, extras
    (100_000, 60_000, 90_000, ()),
    (64_999, 40_000, 60_000, ()),
    (189_900, 120_000, 170_000, (Extra("Free shipping", 1_500, 3_000), Extra("Extended warranty", 4_000, 9_000))),
    (3_799, 2_500, 3_600, ()),
    (50_000, 30_000, 34_000, ()),
]


@pytest.mark.parametrize("first", [SELLER, BUYER])
@pytest.mark.parametrize("case", ZOPA_CASES)
def test_store_merchant_and_default_shopper_agree_in_a_zopa(case, first):
    list_price, floor, budget, extras = case
    scenario = Scenario(id="z", list_price_cents=list_price, seller_reservation_cents=floor,
                        buyer_reservation_cents=budget, extras=extras, max_rounds=20)
    result = run_alternating(scenario, StoreMerchant(), DefaultShopper(), first=first)
    assert result.agreed, result
    assert result.terms is not None
    assert scenario.acceptable_to_seller(result.terms) and scenario.acceptable_to_buyer(result.terms)


def test_store_merchant_opens_at_list_price_and_trades_levers_as_extras():
    merchant = StoreMerchant()
    v = view(SELLER, extras={"Free shipping": 1_500})
    assert merchant.decide(v) == Terms(100_000, "USD")
    decision = merchant.decide(view(SELLER, extras={"Free shipping": 1_500}, mine=(100_000,), theirs=(80_000,),
                                    round=1))
    assert isinstance(decision, Terms)
    assert decision.extras in ((), ("Free shipping",))


def test_default_shopper_starts_afresh_for_each_negotiation():
    shopper = DefaultShopper()
    scenario = Scenario(id="r", list_price_cents=100_000, seller_reservation_cents=60_000,
                        buyer_reservation_cents=90_000, max_rounds=20)
    first = run_alternating(scenario, StoreMerchant(), shopper)
    again = run_alternating(scenario, StoreMerchant(), shopper)
    assert first.agreed and (first.terms, first.turns) == (again.terms, again.turns)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from([0.1, 0.2, 1.0, 3.0, 5.0]), st.sampled_from([SELLER, BUYER]), st.integers(1, 10**6),
       st.integers(1, 10**6), st.integers(1, 40), st.integers(0, 45))
def test_time_dependent_fast_path_offers_its_planned_price(e, role, reservation, list_price, max_rounds, round_):
    decider = TimeDependent(e)
    v = DeciderView(role, reservation, list_price, round_, max_rounds, (), (), {}, "USD")
    price = offered(decider.decide(v))
    assert price == decider.next_price(v)
    assert acceptable(v, Terms(price, "USD"))


_SHARED_TIME_DEPENDENT = {e: TimeDependent(e) for e in (0.1, 0.2, 1.0, 3.0, 5.0)}


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([0.1, 0.2, 1.0, 3.0, 5.0]), st.sampled_from([SELLER, BUYER]), st.integers(1, 10**6),
       st.integers(1, 10**6), st.integers(0, 25), st.integers(0, 30),
       st.one_of(st.none(), st.integers(1, 10**6)), st.sampled_from(["USD", "EUR"]))
def test_time_dependent_decides_the_same_whatever_views_it_saw_before(e, role, reservation, list_price, max_rounds,
                                                                       round_, their_price, their_currency):
    # decide remembers per-negotiation constants from the view before: one decider shown views
    # of every kind, in any order (hypothesis's), decides as a fresh one does, and as the
    # time curve (next_price) and the AC-next rule say.
    theirs = () if their_price is None else (Terms(their_price, their_currency),)
    v = DeciderView(role, reservation, list_price, round_, max_rounds, (), theirs, {}, "USD")
    shared = _SHARED_TIME_DEPENDENT[e].decide(v)
    assert shared == TimeDependent(e).decide(v)
    planned = TimeDependent(e).next_price(v)
    if theirs and their_currency == "USD" and (their_price >= planned if role == SELLER else their_price <= planned):
        assert shared is ACCEPT
    else:
        assert shared == Terms(planned, "USD")


@pytest.mark.parametrize("max_rounds", [20, 100])
def test_store_merchant_closes_after_its_last_offer_as_the_store_does(max_rounds):
    """The adapter tells the merchant the rounds left, and that its counterpart is bound to the
    deadline (not a chat shopper's patience of 20 messages): against a shopper who never reaches
    the floor it holds out for the deadline and makes its last offer only in its last round — it
    does not walk away early, nor ever deal below the floor."""
    scenario = Scenario(id="f", list_price_cents=100_000, seller_reservation_cents=90_000,
                        buyer_reservation_cents=95_000, max_rounds=max_rounds)
    result = run_alternating(scenario, StoreMerchant(), Hardliner())
    assert not result.agreed
    assert result.reason == "timeout" and result.rounds == scenario.max_rounds

