"""The store's merchant agent, driven through the engine exactly as the negotiate.v1 service
drives it: apply the shopper's turn, ask the agent to respond, apply the merchant's turn.

Contract (from the issues): anchors at list price; never volunteers a discount unprompted;
trades levers cheapest first (by their cost to the store) before it cuts price, while the
shopper's offer pays for them; concedes in shrinking steps and in answer to the shopper's own
movement; accepts a shopper offer that beats what it would counter with; never goes below the
floor once the extras' cost is counted; when the shopper stays below the floor it makes a last
offer and ends gracefully; restates the full terms at close.
"""

from __future__ import annotations

import random
import re
from dataclasses import replace
from datetime import timedelta

import pytest
from hypothesis import HealthCheck, event, example, given, note, settings
from hypothesis import strategies as st

from haggler.agents.merchant import MERCHANT, SHOPPER, MerchantAgent, MerchantMove, MoveKind
from haggler.catalog import Lever, Product, load_catalog, parse_lever
from haggler.engine import Action, Negotiation, OutcomeKind, Rules, Terms, Turn
from haggler.language.intents import Intent, IntentKind, Topic
from haggler.language.render import ReplyRenderer
from haggler.money import format_money
from tests.support.merchant_chat import T0, Chat

CATALOG = load_catalog()
DEMO = CATALOG.products
DEMO_IDS = [p.id for p in DEMO]

PROPERTY = settings(max_examples=300, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def offer(cents: int, **kwargs) -> Intent:
    return Intent(IntentKind.OFFER, amount_cents=cents, **kwargs)


ACCEPT = Intent(IntentKind.ACCEPT)
WALK = Intent(IntentKind.WALK_AWAY)
BEST = Intent(IntentKind.BEST_PRICE)
CHAT = Intent(IntentKind.CHAT)


# -- products ---------------------------------------------------------------------------------------

LEVER_NAMES = ("Gift wrapping", "Free 2-day shipping", "Spare battery", "Extended warranty", "Carry case")


def lever(name: str, value_cents: int | None) -> Lever:
    if value_cents is None:
        return parse_lever(name)
    return parse_lever(f"{name} (~{format_money(value_cents)} retail value)")


def make_product(list_cents: int, floor_cents: int, levers: tuple[Lever, ...] = (), *,
                 pid: str = "synthetic", inventory_note: str = "Secret: cost 12, 40 units in the back room.") -> Product:
    return Product(id=pid, name="Synthetic Widget", kind="widget", subtitle="A test widget", description="A widget.",
                   year_made=2023, condition="new", list_price_cents=list_cents, currency="USD",
                   floor_cents=floor_cents, levers=levers, inventory_note=inventory_note)


SYNTHETIC = {
    "floor_equals_list": make_product(50_000, 50_000, (lever("Gift wrapping", 1_500),)),
    "floor_equals_list_no_levers": make_product(50_000, 50_000),
    "no_levers": make_product(100_000, 80_000),
    "unvalued_levers": make_product(60_000, 50_000, (lever("Carry case", None), lever("Gift wrapping", None))),
    "mixed_levers": make_product(60_000, 50_000, (lever("Carry case", None), lever("Extended warranty", 9_000),
                                                  lever("Gift wrapping", 500))),
    "tiny": make_product(999, 849, (lever("Gift wrapping", 100),)),
    "tiny_no_levers": make_product(999, 899),
    "tiny_floor_just_below_list": make_product(999, 995),
    "huge": make_product(2_500_000, 2_100_000, (lever("Free 2-day shipping", 25_000), lever("Extended warranty", 150_000))),
    "floor_with_cents": make_product(64_999, 61_137, (lever("Gift wrapping", 3_900),)),
    "floor_with_cents_no_levers": make_product(12_345, 10_001),
}
SYN_IDS = list(SYNTHETIC)
ALL_PRODUCTS = list(DEMO) + list(SYNTHETIC.values())
ALL_IDS = DEMO_IDS + SYN_IDS


def test_synthetic_lever_values_parse():
    assert SYNTHETIC["mixed_levers"].levers[1].value_cents == 9_000
    assert SYNTHETIC["unvalued_levers"].levers[0].value_cents is None
    assert SYNTHETIC["huge"].levers[1].value_cents == 150_000
    assert SYNTHETIC["huge"].levers[1].offer_text == "Extended warranty"


# -- strategies -------------------------------------------------------------------------------------


@st.composite
def products(draw) -> Product:
    list_cents = draw(st.one_of(
        st.integers(1, 5_000_000),
        st.integers(500, 200_000),
        st.integers(1, 5_000).map(lambda dollars: dollars * 100 - 1),  # $x.99 prices, off the rounding grid
        st.sampled_from([1, 10, 99, 999, 1_000, 1_999, 2_000, 19_999, 20_000, 64_999, 99_999, 100_000, 2_500_000]),
    ))
    floor_cents = draw(st.one_of(
        st.integers(1, list_cents),
        st.integers(max(1, list_cents * 8 // 10), list_cents),
        st.just(list_cents),
    ))
    values = draw(st.lists(st.one_of(st.none(), st.integers(1, max(1, list_cents)), st.integers(1, max(1, list_cents // 10))),
                           max_size=4))
    # a stated cost, when drawn, is what the store counts; otherwise the retail value is
    costs = draw(st.lists(st.one_of(st.none(), st.integers(0, max(1, list_cents // 5))),
                          min_size=len(values), max_size=len(values)))
    names = draw(st.permutations(LEVER_NAMES))
    levers = tuple(replace(lever(names[i], v), cost_cents=c) for i, (v, c) in enumerate(zip(values, costs)))
    return make_product(list_cents, floor_cents, levers)


def amounts(product: Product) -> st.SearchStrategy[int]:
    lst, flo = product.list_price_cents, product.floor_cents
    specials = sorted({1, max(1, flo - 1), flo, flo + 1, max(1, lst - 1), lst, lst + 1, 10 * lst, 100 * lst + 7,
                       max(1, lst // 2), max(1, lst // 2 - 1)})
    return st.one_of(
        st.integers(1, 3 * lst + 100),
        st.integers(max(1, lst // 2), lst),
        st.integers(max(1, flo - lst // 10), flo + lst // 10 + 1),
        st.sampled_from(specials),
    )


TOPICS = st.lists(st.sampled_from(list(Topic)), max_size=3, unique=True).map(tuple)
MANIPULATION = st.sampled_from([False, False, False, False, True])


def intents(product: Product) -> st.SearchStrategy[Intent]:
    money = amounts(product)
    offers = st.builds(lambda a, m, t: Intent(IntentKind.OFFER, amount_cents=a, manipulation=m, topics=t),
                       money, MANIPULATION, TOPICS)
    return st.one_of(
        offers, offers, offers, offers, offers, offers,
        st.builds(lambda m: Intent(IntentKind.ACCEPT, manipulation=m), MANIPULATION),
        st.builds(lambda m: Intent(IntentKind.WALK_AWAY, manipulation=m), MANIPULATION),
        st.builds(lambda m: Intent(IntentKind.BEST_PRICE, manipulation=m), MANIPULATION),
        st.builds(lambda t, m: Intent(IntentKind.QUESTION, topics=t, manipulation=m),
                  st.lists(st.sampled_from(list(Topic)), min_size=1, max_size=3, unique=True).map(tuple), MANIPULATION),
        st.builds(lambda t, m: Intent(IntentKind.CHAT, topics=t, manipulation=m), TOPICS, MANIPULATION),
        st.builds(lambda c, m: Intent(IntentKind.AMBIGUOUS, candidates_cents=tuple(c), manipulation=m),
                  st.lists(money, min_size=2, max_size=3), MANIPULATION),
        st.builds(lambda m: Intent(IntentKind.OFFER, amount_cents=None, manipulation=m), MANIPULATION),
    )


@st.composite
def conversations(draw, min_size=0, max_size=40):
    product = draw(products())
    script = draw(st.lists(intents(product), min_size=min_size, max_size=max_size))
    max_messages = draw(st.one_of(st.just(30), st.integers(1, 45)))
    return product, script, max_messages


def run(product: Product, script, max_messages: int = 30) -> Chat:
    chat = Chat(product, max_messages)
    for intent in script:
        if chat.closed:
            break
        chat.say(intent)
    return chat


# -- property tests ---------------------------------------------------------------------------------


def net(product: Product, terms: Terms) -> int:
    """What the store earns on ``terms``: the price less what the extras cost it."""
    return terms.price_cents - product.extras_cost(terms.extras)


def check_offer_bounds(product: Product, move: MerchantMove) -> None:
    """(b) every merchant OFFER is at most list price and earns at least the floor once its
    extras' cost is counted, and is never the price that just covers the package (which would
    state the floor) unless that is the list price."""
    if move.action is not Action.OFFER:
        return
    price = move.terms.price_cents
    bottom = product.floor_cents + product.extras_cost(move.terms.extras)
    assert bottom <= price <= product.list_price_cents, (move, product.floor_cents)
    if bottom != product.list_price_cents:
        assert price != bottom, f"the merchant quoted the floor itself: {move}"


@PROPERTY
@given(conversations())
def test_property_invariants_hold_over_random_conversations(conv):
    product, script, max_messages = conv
    note(f"product list={product.list_price_cents} floor={product.floor_cents} "
         f"levers={[(lv.offer_text, lv.value_cents) for lv in product.levers]} max_messages={max_messages}")
    chat = Chat(product, max_messages)
    assert chat.greeting.terms == Terms(product.list_price_cents, product.currency, ())
    check_offer_bounds(product, chat.greeting)
    for intent in script:
        if chat.closed:
            break
        ask_before = chat.ask
        move = chat.say(intent)
        note(f"{intent} -> {move.kind.value} {move.terms}")
        outcome = chat.negotiation.outcome
        ask_after = chat.ask

        # (b) offers within bounds, never the floor itself
        check_offer_bounds(product, move)
        # (c) the ask never rises and extras are never withdrawn
        assert ask_after.price_cents <= ask_before.price_cents
        assert ask_after.extras[: len(ask_before.extras)] == ask_before.extras
        assert ask_after.currency == product.currency
        # the move's own terms never go above list and never drop granted extras
        assert move.terms.price_cents <= product.list_price_cents
        assert set(ask_before.extras) <= set(move.terms.extras)

        # a move that says it closes the chat does close it, and vice versa
        assert move.closes == chat.closed, (move, outcome)
        assert move.is_deal == bool(outcome is not None and outcome.agreed)
        if outcome is not None and outcome.agreed:
            assert outcome.terms is not None
            # (a) never below the floor, once the extras' cost is counted
            assert net(product, outcome.terms) >= product.floor_cents
            # (d) never above the ask standing when the shopper spoke
            assert outcome.terms.price_cents <= ask_before.price_cents
            assert set(ask_before.extras) <= set(outcome.terms.extras)
            # restates the full terms at close
            assert move.terms == outcome.terms
            if intent.kind is IntentKind.OFFER and intent.amount_cents is not None and move.kind is MoveKind.ACCEPT_OFFER:
                assert outcome.terms.price_cents == min(intent.amount_cents, ask_before.price_cents)
        if move.kind is MoveKind.WRAP_UP:
            assert outcome is not None and outcome.kind is OutcomeKind.TURN_CAP
            assert move.terms == ask_before
    outcome = chat.negotiation.outcome
    event(f"outcome: {outcome.kind.value if outcome else 'open'}")
    event(f"moves: {'+'.join(sorted({m.kind.value for m in chat.moves} & {'counter', 'last_offer', 'hold', 'decline_close'}))}")
    # the whole chat is replayable from its stored turns
    replayed = Negotiation.replay(chat.negotiation.rules, chat.negotiation.turns)
    assert replayed == chat.negotiation


@PROPERTY
@given(conversations(min_size=1))
def test_property_deals_never_below_floor_and_never_above_ask(conv):
    """(a) and (d), checked on the engine's record: every agreed outcome."""
    product, script, max_messages = conv
    chat = run(product, script, max_messages)
    outcome = chat.negotiation.outcome
    if outcome is None or not outcome.agreed:
        return
    last = chat.steps[-1]
    assert net(product, outcome.terms) >= product.floor_cents
    assert outcome.terms.price_cents <= last.ask_before.price_cents
    assert outcome.terms.price_cents <= product.list_price_cents


@PROPERTY
@given(conversations())
def test_property_ask_is_monotone_over_the_whole_conversation(conv):
    """(c) over the whole conversation: prices of the merchant's successive offers never rise,
    and every extra once offered stays in every later offer."""
    product, script, max_messages = conv
    chat = run(product, script, max_messages)
    offers = [t.terms for t in chat.negotiation.turns if t.party == MERCHANT and t.action is Action.OFFER]
    assert offers[0].price_cents == product.list_price_cents
    for earlier, later in zip(offers, offers[1:]):
        assert later.price_cents <= earlier.price_cents
        assert set(earlier.extras) <= set(later.extras)
    for move in chat.moves:
        check_offer_bounds(product, move)


def _below_floor_amounts(product: Product) -> st.SearchStrategy[int]:
    flo, lst = product.floor_cents, product.list_price_cents
    return st.one_of(st.integers(1, flo - 1), st.integers(max(1, min(flo - 1, lst // 2)), flo - 1), st.just(flo - 1))


@st.composite
def repeated_below_floor(draw):
    product = draw(products().filter(lambda p: p.floor_cents >= 2))
    prefix = draw(st.lists(intents(product), max_size=15))
    amount = draw(_below_floor_amounts(product))
    return product, prefix, amount


REPEAT_BOUND = 20  # shopper turns of the same below-floor offer within which the chat must end
AFTER_LAST_OFFER_BOUND = 6


def _ramp(product: Product, steps: int) -> list[Intent]:
    """A shopper inching up from just above a lowball towards (never reaching) the floor."""
    lo, hi = product.list_price_cents // 2 + 1, product.floor_cents - 1
    if hi <= lo:
        return []
    return [offer(lo + (hi - lo) * i // steps) for i in range(steps + 1)]


@PROPERTY
@given(repeated_below_floor(), st.sampled_from([0, 10, 30, 60]))
def test_property_repeated_below_floor_offer_closes_within_six_turns_of_last_offer(case, ramp_steps):
    """(e), measured from the last offer: once the merchant has made its last offer, a shopper
    repeating a below-floor offer is closed out within 6 more turns."""
    product, prefix, amount = case
    script = list(prefix) + (_ramp(product, ramp_steps) if ramp_steps else [])
    chat = run(product, script, max_messages=500)
    if chat.closed:
        return
    last_offer_reached = any(s.move.kind is MoveKind.LAST_OFFER for s in chat.steps)
    repeats_after_last_offer = 0
    for _ in range(40):
        if chat.closed:
            break
        move = chat.offer(amount)
        assert not move.is_deal, "a below-floor offer must never be accepted"
        if last_offer_reached:
            repeats_after_last_offer += 1
            assert repeats_after_last_offer <= AFTER_LAST_OFFER_BOUND, (
                f"still open {repeats_after_last_offer} turns after the last offer: "
                f"{[s.move.kind.value for s in chat.steps]}")
        elif move.kind is MoveKind.LAST_OFFER:
            last_offer_reached = True
    event(f"last offer reached: {last_offer_reached}")
    if last_offer_reached:
        assert chat.closed
        outcome = chat.negotiation.outcome
        assert not outcome.agreed
        if chat.steps[-1].move.kind is MoveKind.DECLINE_CLOSE:
            assert outcome.kind is OutcomeKind.REJECTED and outcome.by == MERCHANT


@PROPERTY
@given(repeated_below_floor())
def test_property_repeated_below_floor_offer_ends_within_bounded_turns(case):
    """(e) as a whole: a shopper who keeps repeating the same below-floor offer is given a last
    offer and the chat ends gracefully within a bounded number of turns — not left on HOLD
    until the message cap."""
    product, prefix, amount = case
    chat = run(product, prefix, max_messages=500)
    if chat.closed:
        return
    repeats = 0
    while not chat.closed and repeats < 40:
        chat.offer(amount)
        repeats += 1
    note(f"list={product.list_price_cents} floor={product.floor_cents} amount={amount} "
         f"moves={[s.move.kind.value for s in chat.steps]}")
    assert chat.closed
    assert repeats <= REPEAT_BOUND
    outcome = chat.negotiation.outcome
    assert not outcome.agreed
    kinds = [s.move.kind for s in chat.steps]
    if chat.steps[-1].move.kind is MoveKind.DECLINE_CLOSE:
        assert MoveKind.LAST_OFFER in kinds


@st.composite
def inching_shoppers(draw):
    product = draw(products().filter(lambda p: p.list_price_cents >= 100 and p.floor_cents < p.list_price_cents))
    lst = product.list_price_cents
    start = draw(st.integers(lst // 2 + 1, lst - 1))
    increment = draw(st.integers(1, max(1, lst // 20)))
    return product, start, increment


@PROPERTY
@given(inching_shoppers())
@example((make_product(64_990, 55_000), 32_496, 1))
@example((make_product(64_999, 61_137, (lever("Gift wrapping", 3_900),)), 38_999, 300))
def test_property_price_steps_shrink_for_a_steadily_inching_shopper(case):
    # Clockless mode: with a clock the merchant concedes on a Boulware curve instead.
    """Each successive price concession is no larger than the one before it."""
    product, start, increment = case
    chat = Chat(product, max_messages=500, timed=False)
    price = start
    cuts: list[int] = []
    for _ in range(300):
        if chat.closed:
            break
        before = chat.ask.price_cents
        chat.offer(price)
        if chat.closed:
            break
        if chat.ask.price_cents < before:
            cuts.append(before - chat.ask.price_cents)
        price += increment
    note(f"list={product.list_price_cents} floor={product.floor_cents} start={start} inc={increment} cuts={cuts}")
    for earlier, later in zip(cuts, cuts[1:]):
        assert later <= earlier, f"price steps grew: {cuts}"


# -- behaviour tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
def test_greeting_anchors_at_list_price_with_no_extras(product):
    chat = Chat(product)
    move = chat.greeting
    assert move.kind is MoveKind.GREET
    assert move.action is Action.OFFER
    assert move.terms == Terms(product.list_price_cents, product.currency, ())
    assert not move.final and not move.added_extras
    assert chat.ask == move.terms


TALK = [
    Intent(IntentKind.CHAT),
    Intent(IntentKind.CHAT, topics=(Topic.DESCRIPTION,)),
    Intent(IntentKind.QUESTION, topics=(Topic.SHIPPING,)),
    Intent(IntentKind.QUESTION, topics=(Topic.WARRANTY, Topic.RETURNS)),
    Intent(IntentKind.QUESTION, topics=(Topic.PRICE,)),
    Intent(IntentKind.QUESTION, topics=(Topic.CONDITION, Topic.AGE)),
    Intent(IntentKind.OFFER, amount_cents=None),
]


@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
def test_talk_never_changes_terms(product):
    """No unprompted discount: questions, chat and pitches leave the terms alone, at the
    opening and after concessions."""
    chat = Chat(product, max_messages=100)
    for intent in TALK * 3:
        before = chat.ask
        move = chat.say(intent)
        assert move.kind in (MoveKind.PITCH, MoveKind.ANSWER)
        assert move.action is Action.MESSAGE
        assert move.terms == before == chat.ask
        assert not move.price_cut and not move.added_extras
    assert chat.ask == Terms(product.list_price_cents, product.currency, ())
    # after a concession, talk still changes nothing
    chat.offer(int(product.list_price_cents * 0.8))
    if chat.closed:
        return
    conceded = chat.ask
    for intent in TALK:
        move = chat.say(intent)
        assert move.terms == conceded == chat.ask


def affordable_cheapest(agent: MerchantAgent, price: int) -> Lever | None:
    """The cheapest lever whose cost a shopper paying ``price`` for it would cover."""
    product = agent.product
    return next((lv for lv in product.levers_cheapest_first()
                 if agent.covers(Terms(price, product.currency, (lv.offer_text,)))), None)


@pytest.mark.parametrize("product", [p for p in ALL_PRODUCTS if p.levers], ids=[i for p, i in zip(ALL_PRODUCTS, ALL_IDS) if p.levers])
@pytest.mark.parametrize("fraction", [0.8, 0.97])
def test_first_concession_is_the_cheapest_lever_the_offer_can_pay_for(product, fraction):
    """Extras come before price cuts, cheapest first, but only while the shopper's money pays for
    them (its offer covers the floor plus their cost): given to a shopper offering less, an extra
    would only put the deal out of its reach. Otherwise the first concession is a price cut."""
    cheapest = product.levers_cheapest_first()[0]
    valued = [lv.value_cents for lv in product.levers if lv.value_cents is not None]
    if valued:
        assert cheapest.value_cents == min(valued)
    amount = int(product.list_price_cents * fraction)
    gap = product.list_price_cents - amount
    chat = Chat(product)
    lever_due = affordable_cheapest(chat.agent, amount)
    move = chat.offer(amount)
    if move.is_deal:
        assert chat.agent.covers(move.terms)
        return
    if lever_due is not None and (lever_due.value_cents is None or lever_due.value_cents <= gap):
        assert move.kind in (MoveKind.COUNTER, MoveKind.LAST_OFFER)
        assert move.terms.price_cents == product.list_price_cents, "price was cut before a lever was traded"
        assert not move.price_cut
        assert move.added_extras == (lever_due.offer_text,)
        assert move.terms.extras == (lever_due.offer_text,)
    else:
        assert not move.added_extras and move.terms.extras == ()
        assert move.kind in (MoveKind.COUNTER, MoveKind.LAST_OFFER, MoveKind.HOLD)


def test_levers_traded_cheapest_first_then_unvalued_then_price():
    # file order: unvalued, $90 retail costing $15, $5 retail costing $2; floor far enough below
    # the offers that they pay for all three
    product = make_product(60_000, 40_000, (lever("Carry case", None), replace(lever("Extended warranty", 9_000),
                                            cost_cents=1_500), replace(lever("Gift wrapping", 500), cost_cents=200)))
    chat = Chat(product, max_messages=100)
    added = []
    price = 50_000
    while not chat.closed and len(added) < 3:
        move = chat.offer(price)
        price += 500
        if move.action is Action.OFFER:
            assert not move.price_cut
            added.extend(move.added_extras)
    assert added == ["Gift wrapping", "Extended warranty", "Carry case"]
    move = chat.offer(price)
    assert move.price_cut and not move.added_extras


@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
def test_price_steps_shrink_for_inching_shopper(product):
    lst = product.list_price_cents
    chat = Chat(product, max_messages=500, timed=False)
    price = int(lst * 0.6)
    cuts = []
    while not chat.closed:
        before = chat.ask.price_cents
        chat.offer(price)
        if not chat.closed and chat.ask.price_cents < before:
            cuts.append(before - chat.ask.price_cents)
        price += max(1, lst // 100)
    for earlier, later in zip(cuts, cuts[1:]):
        assert later <= earlier, f"price steps grew: {cuts}"


def test_price_steps_shrink_off_grid_list_price():
    """A list price off the merchant's rounding grid: the first cut must not be smaller than
    the ones after it."""
    product = make_product(65_200, 60_000, (lever("Gift wrapping", 500),))
    chat = Chat(product, max_messages=100)
    cuts = []
    for amount in range(60_000, 63_000, 300):
        before = chat.ask.price_cents
        chat.offer(amount)
        if chat.closed:
            break
        if chat.ask.price_cents < before:
            cuts.append(before - chat.ask.price_cents)
    assert len(cuts) >= 3
    for earlier, later in zip(cuts, cuts[1:]):
        assert later <= earlier, f"price steps grew: {cuts}"


CONCEDING = [(p, i) for p, i in zip(ALL_PRODUCTS, ALL_IDS) if p.floor_cents < p.list_price_cents]


@pytest.mark.parametrize("product", [p for p, _ in CONCEDING], ids=[i for _, i in CONCEDING])
def test_repeated_offer_gets_hold(product):
    lst = product.list_price_cents
    chat = Chat(product, max_messages=100)
    amount = max(lst // 2 + 1, product.floor_cents - lst // 5)
    amount = min(amount, product.floor_cents - 1) if product.floor_cents > lst // 2 + 1 else amount
    first = chat.offer(amount)
    assert not chat.closed and first.kind is MoveKind.COUNTER
    terms = chat.ask
    for _ in range(3):
        move = chat.offer(amount)
        if move.kind is not MoveKind.HOLD:
            break
        assert move.action is Action.MESSAGE
        assert move.terms == terms == chat.ask
        assert move.shopper_price_cents == amount


@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
@pytest.mark.parametrize("extra", [0, 1, 10_000, 10**9])
def test_offer_at_or_above_ask_is_accepted_at_most_the_ask(product, extra):
    chat = Chat(product)
    ask = chat.ask
    move = chat.offer(ask.price_cents + extra)
    assert move.kind is MoveKind.ACCEPT_OFFER
    assert move.action is Action.ACCEPT
    assert move.terms == Terms(ask.price_cents, ask.currency, ask.extras)
    assert chat.negotiation.outcome.agreed
    assert chat.negotiation.outcome.terms == move.terms


def test_offer_above_a_lowered_ask_is_accepted_at_the_ask():
    product = SYNTHETIC["no_levers"]
    chat = Chat(product)
    chat.offer(85_000)
    ask = chat.ask
    assert ask.price_cents < product.list_price_cents
    move = chat.offer(ask.price_cents + 2_000)
    assert move.kind is MoveKind.ACCEPT_OFFER
    assert move.terms.price_cents == ask.price_cents


def test_offer_at_least_the_next_counter_is_accepted():
    product = SYNTHETIC["no_levers"]  # $1000 list, $800 floor, no levers
    probe = Chat(product)
    counter = probe.offer(85_000)
    assert counter.kind is MoveKind.COUNTER and counter.price_cut
    next_counter = counter.terms.price_cents
    # A shopper whose first offer already meets the counter the merchant would make. (With no
    # levers and no earlier offers to reciprocate, the first counter does not depend on the
    # offer, so the probe's counter is the one these offers are measured against.)
    for amount in (next_counter, next_counter + 1):
        chat = Chat(product)
        move = chat.offer(amount)
        assert move.kind is MoveKind.ACCEPT_OFFER, (amount, move)
        assert move.terms.price_cents == amount
        assert chat.negotiation.outcome.terms.price_cents == amount


@pytest.mark.parametrize("product", [p for p in DEMO], ids=DEMO_IDS)
def test_offer_matching_the_next_counter_mid_conversation_is_accepted(product):
    lst = product.list_price_cents
    chat = Chat(product, max_messages=100)
    amount = int(lst * 0.6)
    # inch up until the merchant makes a price cut
    while not chat.closed:
        move = chat.offer(amount)
        if move.price_cut:
            break
        amount += lst // 100
    if chat.closed:
        pytest.skip("closed before a price cut")
    # what would the merchant counter a small further step with?
    probe = Negotiation.replay(chat.negotiation.rules, chat.negotiation.turns)
    nxt = amount + lst // 100
    probe.apply(chat.agent.shopper_turn(probe, offer(nxt), T0 + timedelta(days=1)))
    move = chat.agent.respond(probe, offer(nxt))
    if move.kind is not MoveKind.COUNTER or not move.price_cut:
        pytest.skip("no further price counter")
    target = move.terms.price_cents
    real = chat.offer(target)
    assert real.kind is MoveKind.ACCEPT_OFFER
    assert chat.negotiation.outcome.terms.price_cents == target
    assert target >= product.floor_cents


@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
@pytest.mark.parametrize("max_messages", [500, 40])
def test_inching_below_floor_gets_last_offer_then_decline_close(product, max_messages):
    """A shopper inching up below the floor never gets a deal. After the one last offer the
    merchant waits (restating it) while the shopper keeps improving, and closes gracefully
    once the shopper stalls — or the chat's message cap wraps it up first."""
    lst, flo = product.list_price_cents, product.floor_cents
    if flo - 1 <= lst // 2 + 1:
        pytest.skip("no room between a serious offer and the floor")
    chat = Chat(product, max_messages=max_messages)
    lo, hi = lst // 2 + 1, flo - 1
    steps = 60
    amounts = [lo + (hi - lo) * i // steps for i in range(steps + 1)] + [hi] * 3  # then it stalls
    kinds = []
    for amount in amounts:
        move = chat.offer(amount)
        kinds.append(move.kind)
        assert not move.is_deal
        if chat.closed:
            break
    assert chat.closed, kinds
    assert kinds[-1] in (MoveKind.DECLINE_CLOSE, MoveKind.WRAP_UP)
    assert kinds.count(MoveKind.LAST_OFFER) == 1
    first_last = kinds.index(MoveKind.LAST_OFFER)
    assert set(kinds[first_last + 1:-1]) <= {MoveKind.HOLD}  # waiting: no new terms after the last offer
    last = chat.steps[first_last].move
    assert last.final and last.action is Action.OFFER
    assert flo < last.terms.price_cents or flo == lst
    for step in chat.steps[first_last + 1:]:
        assert step.move.terms == last.terms  # restates the last terms
        if step.move.kind is MoveKind.HOLD:
            assert step.move.final  # ...as its final offer (the reply says so, not "you haven't moved")
    outcome = chat.negotiation.outcome
    if kinds[-1] is MoveKind.DECLINE_CLOSE:
        assert chat.steps[-1].move.action is Action.REJECT
        # the shopper stalled, or it was the chat's last message
        assert (chat.steps[-2].intent.amount_cents >= chat.steps[-1].intent.amount_cents
                or chat.shopper_messages >= max_messages)
        assert outcome.kind is OutcomeKind.REJECTED and outcome.by == MERCHANT
    else:
        assert outcome.kind is OutcomeKind.TURN_CAP


@pytest.mark.parametrize("product", [CATALOG.product("aerion-v12-cordless"), SYNTHETIC["no_levers"]],
                         ids=["aerion-v12-cordless", "no_levers"])
@pytest.mark.parametrize("fraction", [0.9, 0.7, 0.3])
def test_repeating_a_below_floor_offer_gets_a_last_offer_and_a_close(product, fraction):
    """The shopper stays below the floor by repeating one offer: the merchant must make a last
    offer and end gracefully within a bounded number of turns (not HOLD until the cap)."""
    amount = min(int(product.list_price_cents * fraction), product.floor_cents - 1)
    chat = Chat(product, max_messages=500, timed=False)
    for _ in range(REPEAT_BOUND):
        chat.offer(amount)
        if chat.closed:
            break
    kinds = [s.move.kind.value for s in chat.steps]
    assert chat.closed, f"still open after {REPEAT_BOUND} identical below-floor offers: {kinds}"
    assert MoveKind.LAST_OFFER.value in kinds
    assert kinds[-1] == MoveKind.DECLINE_CLOSE.value


@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
def test_shopper_accept_confirms_the_standing_terms(product):
    chat = Chat(product)
    first = chat.offer(int(product.list_price_cents * 0.8))
    if first.kind is not MoveKind.LAST_OFFER:
        chat.offer(int(product.list_price_cents * 0.82))
    assert not chat.closed
    standing = chat.ask
    move = chat.say(ACCEPT)
    assert move.kind is MoveKind.CONFIRM_DEAL
    assert move.action is None
    assert move.terms == standing
    outcome = chat.negotiation.outcome
    assert outcome.kind is OutcomeKind.AGREED and outcome.by == SHOPPER
    assert outcome.terms == standing
    assert net(product, outcome.terms) >= product.floor_cents


def test_shopper_accept_of_the_opening_is_list_price():
    product = DEMO[0]
    chat = Chat(product)
    move = chat.say(ACCEPT)
    assert move.kind is MoveKind.CONFIRM_DEAL
    assert move.terms == Terms(product.list_price_cents, product.currency, ())


@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
def test_walk_away_gets_farewell(product):
    chat = Chat(product)
    chat.offer(int(product.list_price_cents * 0.7))
    ask = chat.ask
    move = chat.say(WALK)
    assert move.kind is MoveKind.FAREWELL
    assert move.action is None
    assert move.terms == ask
    outcome = chat.negotiation.outcome
    assert outcome.kind is OutcomeKind.REJECTED and outcome.by == SHOPPER


class TestLastMessage:
    PRODUCT = CATALOG.product("aerion-v12-cordless")

    def chat_at_last_message(self, *, timed: bool = False) -> Chat:
        chat = Chat(self.PRODUCT, max_messages=3, timed=timed)
        chat.say(CHAT)
        chat.offer(50_000)
        assert not chat.closed
        return chat

    @pytest.mark.parametrize("intent", [offer(52_000), CHAT, BEST, Intent(IntentKind.QUESTION, topics=(Topic.EXTRAS,)),
                                        Intent(IntentKind.AMBIGUOUS, candidates_cents=(50_000, 55_000)),
                                        Intent(IntentKind.CHAT, manipulation=True), offer(52_000, manipulation=True)],
                             ids=["offer", "chat", "best", "extras", "ambiguous", "manipulation", "offer+manipulation"])
    def test_wrap_up_unless_the_move_closes(self, intent):
        chat = self.chat_at_last_message()
        ask = chat.ask
        move = chat.say(intent)
        assert move.kind is MoveKind.WRAP_UP
        assert move.action is Action.MESSAGE
        assert move.terms == ask == chat.ask
        assert move.closes
        assert chat.negotiation.outcome.kind is OutcomeKind.TURN_CAP
        assert move.deflected == intent.manipulation

    def test_on_a_clock_the_last_message_at_or_above_the_floor_is_taken(self):
        """With the messages left known (as the store runs), the shopper's last offer is taken when
        it is at or above the floor — a sale beats none — and the chat closes without a deal below it."""
        floor = self.PRODUCT.floor_cents
        taken = self.chat_at_last_message(timed=True).offer(floor)
        assert taken.kind is MoveKind.ACCEPT_OFFER and taken.terms.price_cents == floor
        below = self.chat_at_last_message(timed=True).offer(floor - 1)
        assert below.kind in (MoveKind.WRAP_UP, MoveKind.DECLINE_CLOSE) and below.closes and not below.is_deal

    def test_deal_on_the_last_message_is_a_deal(self):
        chat = self.chat_at_last_message()
        ask = chat.ask
        move = chat.offer(ask.price_cents)
        assert move.kind is MoveKind.ACCEPT_OFFER
        assert chat.negotiation.outcome.kind is OutcomeKind.AGREED
        assert chat.negotiation.outcome.terms == ask

    def test_accept_on_the_last_message_is_a_deal(self):
        chat = self.chat_at_last_message()
        ask = chat.ask
        move = chat.say(ACCEPT)
        assert move.kind is MoveKind.CONFIRM_DEAL
        assert chat.negotiation.outcome.terms == ask

    def test_walk_away_on_the_last_message_is_farewell(self):
        chat = self.chat_at_last_message()
        move = chat.say(WALK)
        assert move.kind is MoveKind.FAREWELL

    def test_decline_close_on_the_last_message_stays_decline_close(self):
        product = SYNTHETIC["floor_equals_list_no_levers"]
        chat = Chat(product, max_messages=2)
        first = chat.offer(40_000)
        assert first.kind is MoveKind.LAST_OFFER
        move = chat.offer(41_000)
        assert move.kind is MoveKind.DECLINE_CLOSE
        assert chat.negotiation.outcome.kind is OutcomeKind.REJECTED

    def test_direct_respond_with_last_message(self):
        product = self.PRODUCT
        agent = MerchantAgent(product)
        n = Negotiation(Rules(parties=(MERCHANT, SHOPPER)))
        n.apply(Turn(MERCHANT, Action.OFFER, T0, terms=agent.greet().terms))
        n.apply(Turn(SHOPPER, Action.MESSAGE, T0))
        move = agent.respond(n, CHAT, last_message=True)
        assert move.kind is MoveKind.WRAP_UP
        assert move.terms == agent.opening_terms()



class TestBoundToTheCap:
    """A shopper bound to the cap (the lab's alternating offers, ``to_the_cap``) haggles to its
    last message: the merchant paces itself to the cap, not to a chat shopper's patience, and
    plays as firm as that allows. A chat shopper (the store's) gets what it always got."""

    PRODUCT = SYNTHETIC["no_levers"]  # list 1,000.00, floor 800.00

    def test_a_shopper_standing_still_above_the_floor_is_taken_only_in_a_chat(self):
        price = 85_000
        chat = Chat(self.PRODUCT, max_messages=100)
        moves = [chat.offer(price) for _ in range(3)]
        assert moves[-1].kind is MoveKind.ACCEPT_OFFER  # it stood still twice: a sale beats none
        bound = Chat(self.PRODUCT, max_messages=100, to_the_cap=True)
        moves = [bound.offer(price) for _ in range(60)]
        assert not any(m.is_deal for m in moves)
        assert bound.ask.price_cents > price

    def test_no_token_cuts_and_a_firmer_curve_early_on(self):
        chat = Chat(self.PRODUCT, max_messages=100)
        bound = Chat(self.PRODUCT, max_messages=100, to_the_cap=True)
        for i in range(30):
            chat.offer(60_000 + 100 * i)
            bound.offer(60_000 + 100 * i)
        assert bound.ask.price_cents == self.PRODUCT.list_price_cents
        assert chat.ask.price_cents < self.PRODUCT.list_price_cents

    def test_paced_to_the_cap_not_to_a_chat_shoppers_patience(self):
        bound = Chat(self.PRODUCT, max_messages=100, to_the_cap=True)
        moves = [bound.offer(79_000) for _ in range(40)]
        assert not any(m.final for m in moves)
        assert bound.ask.price_cents > self.PRODUCT.floor_cents
        chat = Chat(self.PRODUCT, max_messages=100)
        moves = [chat.offer(79_000) for _ in range(20)]
        assert any(m.final for m in moves)  # its last offer by a chat shopper's 20th message

    @pytest.mark.parametrize("to_the_cap", [False, True])
    def test_the_last_offer_holds_the_ask_for_a_bound_shopper_who_never_nears_the_floor(self, to_the_cap):
        chat = Chat(self.PRODUCT, max_messages=10, to_the_cap=to_the_cap)
        for _ in range(8):
            chat.offer(70_000)
        ask = chat.ask
        last = chat.offer(70_000)
        assert last.kind is MoveKind.LAST_OFFER and last.final
        if to_the_cap:
            assert last.terms == ask and ask.price_cents > self.PRODUCT.floor_cents
        else:
            assert last.terms.price_cents == chat.agent.lowest_quote(()) < ask.price_cents

    def test_the_last_offer_meets_a_bound_shopper_who_nears_the_floor(self):
        chat = Chat(self.PRODUCT, max_messages=10, to_the_cap=True)
        for i in range(8):
            chat.offer(71_000 + 1_000 * i)
        ask = chat.ask
        last = chat.offer(79_000)  # its pace reaches the floor
        assert last.kind is MoveKind.LAST_OFFER
        assert self.PRODUCT.floor_cents <= last.terms.price_cents < ask.price_cents

    @pytest.mark.parametrize("to_the_cap", [False, True])
    def test_a_bound_shopper_who_gives_nothing_gets_little(self, to_the_cap):
        """Bound to the cap, a shopper standing at its opening, far from the floor, is answered
        with at most a fifth of the room (list 1,000, lowest quote 800) however near the
        deadline. A chat shopper gets the curve."""
        still = Chat(self.PRODUCT, max_messages=40, to_the_cap=to_the_cap)
        for _ in range(39):
            if still.closed:  # a chat shopper's patience ran out first: the last offer was made
                break
            still.offer(40_000)
        room = self.PRODUCT.list_price_cents - self.PRODUCT.floor_cents
        if to_the_cap:
            assert still.ask.price_cents >= self.PRODUCT.list_price_cents - room // 5
        else:
            assert still.ask.price_cents < self.PRODUCT.list_price_cents - room // 2

    def test_a_bound_shopper_who_gave_half_its_span_short_of_the_floor_gets_a_quarter_of_the_room(self):
        moving = Chat(self.PRODUCT, max_messages=40, to_the_cap=True)
        for i in range(39):
            moving.offer(40_000 + min(i, 10) * 3_000)  # 40,000 -> 70,000: half its span to list
        room = self.PRODUCT.list_price_cents - self.PRODUCT.floor_cents
        assert moving.ask.price_cents >= self.PRODUCT.list_price_cents - room // 4 - moving.agent.unit

    @pytest.mark.parametrize("price", [79_999, 80_000])
    def test_never_below_the_floor_when_bound(self, price):
        chat = Chat(self.PRODUCT, max_messages=30, to_the_cap=True)
        moves = []
        while not chat.closed:
            moves.append(chat.offer(price))
        deals = [m for m in moves if m.is_deal]
        assert all(m.terms.price_cents >= self.PRODUCT.floor_cents for m in moves if m.terms is not None)
        assert bool(deals) == (price >= self.PRODUCT.floor_cents)


def test_on_a_clock_never_counters_below_an_accelerating_shoppers_next_offer():
    """A shopper whose steps keep growing concedes on its own clock and will offer at least one
    more step as large as its last: on a clock, the merchant answers it with no more than a token
    cut rather than cutting its price below that, however far its own concession curve has come."""
    product = SYNTHETIC["no_levers"]
    chat = Chat(product, max_messages=20)
    token = max(chat.agent.unit, (product.list_price_cents - product.floor_cents) // 100)
    offers = [60_000] * 12 + [61_000, 64_000, 70_000, 77_000, 85_000]
    checked = 0
    for i, price in enumerate(offers):
        chat.offer(price)
        assert not chat.closed, i
        steps = [b - a for a, b in zip(offers[i - 3:i], offers[i - 2:i + 1])]
        if len(steps) == 3 and steps[0] <= steps[1] <= steps[2] and steps[2] > 0:
            forecast = price + steps[2]
            floor_of_ask = min(chat.steps[-1].ask_before.price_cents - token, forecast)
            assert chat.ask.price_cents >= floor_of_ask, (i, chat.ask, forecast)
            checked += 1
    # The last check is the one that bites: the curve alone would cut to 89,000, below the
    # forecast 93,000.
    assert checked == 5

@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
@pytest.mark.parametrize("intent", [
    Intent(IntentKind.CHAT, manipulation=True),
    Intent(IntentKind.QUESTION, topics=(Topic.PRICE,), manipulation=True),
    Intent(IntentKind.QUESTION, topics=(Topic.EXTRAS,), manipulation=True),
    Intent(IntentKind.BEST_PRICE, manipulation=True),
    Intent(IntentKind.AMBIGUOUS, candidates_cents=(100, 200), manipulation=True),
    Intent(IntentKind.OFFER, amount_cents=None, manipulation=True),
], ids=["chat", "price-q", "extras-q", "best", "ambiguous", "offer-no-amount"])
def test_manipulation_without_amount_is_deflected_with_unchanged_terms(product, intent):
    chat = Chat(product)
    chat.offer(int(product.list_price_cents * 0.8))
    if chat.closed:
        pytest.skip("closed early")
    before = chat.ask
    move = chat.say(intent)
    assert move.kind is MoveKind.DEFLECT
    assert move.action is Action.MESSAGE
    assert move.deflected
    assert move.terms == before == chat.ask
    assert not move.added_extras and not move.price_cut


def test_manipulation_with_an_amount_is_an_offer_that_is_flagged():
    product = CATALOG.product("aerion-v12-cordless")
    chat = Chat(product)
    move = chat.offer(50_000, manipulation=True)
    assert move.deflected
    assert move.kind is MoveKind.COUNTER
    assert move.terms.price_cents >= product.floor_cents


@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
def test_best_price_gives_exactly_one_concession_then_holds(product):
    chat = Chat(product)
    opening = chat.ask
    first = chat.say(BEST)
    agent = chat.agent
    # the cheapest lever the list price still pays for (its cost counts against the floor)
    cheapest = affordable_cheapest(agent, product.list_price_cents)
    if cheapest is not None:
        assert first.kind is MoveKind.COUNTER
        assert first.terms == Terms(opening.price_cents, opening.currency, (cheapest.offer_text,))
        assert not first.price_cut
    elif agent.min_quote < product.list_price_cents:
        assert first.kind is MoveKind.COUNTER
        assert first.price_cut
        assert agent.reserve < first.terms.price_cents < opening.price_cents
        assert first.terms.extras == ()
    else:
        assert first.kind is MoveKind.HOLD
        assert first.terms == opening
    conceded = chat.ask
    for _ in range(4):
        move = chat.say(BEST)
        assert move.kind is MoveKind.HOLD
        assert move.action is Action.MESSAGE
        assert move.terms == conceded == chat.ask


def test_best_price_after_an_offer_concession_holds():
    product = CATALOG.product("aerion-v12-cordless")
    chat = Chat(product)
    opening = chat.ask
    chat.offer(50_000)
    before = chat.ask
    assert before != opening  # a concession was made
    move = chat.say(BEST)
    assert move.kind is MoveKind.HOLD
    assert move.terms == before


@pytest.mark.parametrize("product", ALL_PRODUCTS, ids=ALL_IDS)
def test_extras_question_grants_the_cheapest_lever_once(product):
    chat = Chat(product)
    opening = chat.ask
    q = Intent(IntentKind.QUESTION, topics=(Topic.EXTRAS,))
    first = chat.say(q)
    cheapest = affordable_cheapest(chat.agent, product.list_price_cents)
    if cheapest is not None:
        assert first.kind is MoveKind.COUNTER
        assert first.action is Action.OFFER
        assert first.added_extras == (cheapest.offer_text,)
        assert first.terms == Terms(opening.price_cents, opening.currency, (cheapest.offer_text,))
        assert Topic.EXTRAS in first.topics
    else:
        assert first.kind is MoveKind.ANSWER
        assert first.terms == opening
    granted = chat.ask
    for _ in range(3):
        move = chat.say(q)
        assert move.kind is MoveKind.ANSWER
        assert move.terms == granted == chat.ask


def test_ambiguous_offer_asks_which_amount():
    chat = Chat(DEMO[0])
    before = chat.ask
    move = chat.say(Intent(IntentKind.AMBIGUOUS, candidates_cents=(50_000, 55_000)))
    assert move.kind is MoveKind.CLARIFY
    assert move.candidates_cents == (50_000, 55_000)
    assert move.terms == before == chat.ask


@pytest.mark.parametrize("key", ["floor_equals_list", "floor_equals_list_no_levers"])
def test_no_price_room_never_cuts_price(key):
    product = SYNTHETIC[key]
    chat = Chat(product, max_messages=100)
    amount = product.list_price_cents // 2 + 1
    while not chat.closed:
        move = chat.offer(amount)
        assert not move.price_cut
        assert chat.ask.price_cents == product.list_price_cents
        amount += 1
    assert not chat.negotiation.outcome.agreed or net(product, chat.negotiation.outcome.terms) >= product.floor_cents


@pytest.mark.parametrize("key", ["tiny", "tiny_no_levers", "tiny_floor_just_below_list", "huge", "floor_with_cents",
                                 "floor_with_cents_no_levers"])
def test_edge_products_never_quote_the_floor(key):
    product = SYNTHETIC[key]
    chat = Chat(product, max_messages=200)
    lst = product.list_price_cents
    amount = lst // 2 + 1
    while not chat.closed:
        chat.offer(amount)
        amount += max(1, (product.floor_cents - lst // 2) // 50)
    for move in chat.moves:
        check_offer_bounds(product, move)


# -- rendered replies never leak hidden state -------------------------------------------------------

WORD = re.compile(r"[a-z0-9]+(?:[-'.,][a-z0-9]+)*")


def _tokens(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _public_texts(product: Product) -> list[str]:
    facts, store = product.facts, CATALOG.store
    return [t for t in (facts.name, facts.subtitle, facts.description, facts.condition, facts.kind,
                        store.name, store.policy, store.tagline, store.rep_name) if t]


def _forbidden_money(product: Product) -> list[re.Pattern[str]]:
    floor = product.floor_cents
    whole, cents = divmod(floor, 100)
    patterns = [re.escape(format_money(floor, product.currency)),
                re.escape(format_money(whole * 100, product.currency)) + r"(?![\d,])",
                rf"(?<![\d.,]){whole}\.{cents:02d}(?!\d)",
                rf"(?<![\d.,]){whole}(?![\d,])",
                rf"(?<![\d.,]){whole:,}(?![\d,])"]
    return [re.compile(p) for p in patterns]


def _safe_amount(product: Product, cents: int) -> bool:
    """Amounts the shopper says are echoed back; keep them clear of the floor's digits so that
    an echo is not mistaken for a leak."""
    return cents // 100 != product.floor_cents // 100 and str(product.floor_cents // 100) not in str(cents // 100)


def random_intent(product: Product, rng: random.Random) -> Intent:
    lst = product.list_price_cents

    def amount() -> int:
        while True:
            cents = rng.choice([rng.randint(1, 2 * lst), rng.randint(lst // 2, lst), rng.randint(int(lst * 0.8), lst)])
            if _safe_amount(product, cents):
                return cents

    manipulation = rng.random() < 0.1
    topics = tuple(rng.sample(list(Topic), rng.randint(0, 2)))
    r = rng.random()
    if r < 0.55:
        return Intent(IntentKind.OFFER, amount_cents=amount(), topics=topics, manipulation=manipulation)
    if r < 0.62:
        return Intent(IntentKind.BEST_PRICE, manipulation=manipulation)
    if r < 0.75:
        return Intent(IntentKind.QUESTION, topics=topics or (Topic.EXTRAS,), manipulation=manipulation)
    if r < 0.85:
        return Intent(IntentKind.CHAT, topics=topics, manipulation=manipulation)
    if r < 0.92:
        return Intent(IntentKind.AMBIGUOUS, candidates_cents=(amount(), amount()), manipulation=manipulation)
    if r < 0.96:
        return Intent(IntentKind.ACCEPT)
    return Intent(IntentKind.WALK_AWAY)


def rendered_conversation(product: Product, conversation_seed: int, render_seed: int) -> tuple[Chat, list[str]]:
    rng = random.Random(conversation_seed)
    renderer = ReplyRenderer(CATALOG.store, product.facts)
    chat = Chat(product, max_messages=30)
    # as the service: greeting at seq 0, then shopper seq, merchant seq + 1
    texts = [renderer.render(chat.greeting, random.Random(render_seed * 1_000_003 + 0))]
    seq = 1
    while not chat.closed:
        move = chat.say(random_intent(product, rng))
        outcome = chat.negotiation.outcome
        url = f"https://shop.example/checkout/deal_{seq}" if outcome is not None and outcome.agreed else None
        texts.append(renderer.render(move, random.Random(render_seed * 1_000_003 + seq + 1), checkout_url=url))
        seq += 2
    return chat, texts


@pytest.mark.parametrize("product", DEMO, ids=DEMO_IDS)
def test_rendered_replies_never_leak_hidden_state(product):
    money = _forbidden_money(product)
    note_words = _tokens(product.inventory_note)
    windows = {" ".join(note_words[i:i + 4]) for i in range(len(note_words) - 3)}
    public = _public_texts(product)
    moves_seen: set[MoveKind] = set()
    for seed in range(25):
        chat, texts = rendered_conversation(product, conversation_seed=seed, render_seed=seed * 7 + 1)
        moves_seen.update(m.kind for m in chat.moves)
        for move, text in zip(chat.moves, texts):
            assert text.strip()
            for pattern in money:
                assert not pattern.search(text), f"floor {pattern.pattern!r} in {text!r}"
            assert product.inventory_note not in text
            joined = " ".join(_tokens(text))
            for window in windows:
                assert window not in joined, f"inventory note fragment {window!r} in {text!r}"
            for lv in product.levers:
                assert lv.text not in text, f"lever with its value note in {text!r}"
                if lv.offer_text not in move.terms.extras:
                    assert lv.offer_text.lower() not in text.lower(), f"ungranted lever {lv.offer_text!r} in {text!r}"
            assert "retail value" not in text.lower()
            scrubbed = text
            for public_text in public:
                scrubbed = scrubbed.replace(public_text, " ")
            assert not re.search(r"\bfloor\b", scrubbed, re.IGNORECASE), f"'floor' in {text!r}"
    # the conversations exercised the interesting moves
    assert {MoveKind.COUNTER, MoveKind.HOLD} <= moves_seen


@pytest.mark.parametrize("product", DEMO, ids=DEMO_IDS)
def test_rendered_replies_are_reproducible_per_seed(product):
    chat_a, texts_a = rendered_conversation(product, conversation_seed=3, render_seed=11)
    chat_b, texts_b = rendered_conversation(product, conversation_seed=3, render_seed=11)
    assert texts_a == texts_b
    assert chat_a.negotiation == chat_b.negotiation
    variants = {tuple(rendered_conversation(product, conversation_seed=3, render_seed=s)[1]) for s in range(6)}
    assert len(variants) > 1, "different seeds gave identical wording"
    # the seed changes only the wording, never the negotiation
    chat_c, _ = rendered_conversation(product, conversation_seed=3, render_seed=99)
    assert chat_c.negotiation == chat_a.negotiation


def test_deal_reply_restates_the_full_terms_and_checkout_link():
    product = CATALOG.product("aerion-v12-cordless")
    renderer = ReplyRenderer(CATALOG.store, product.facts)
    chat = Chat(product)
    chat.offer(50_000)
    chat.offer(52_000)
    move = chat.say(ACCEPT)
    assert move.kind is MoveKind.CONFIRM_DEAL
    text = renderer.render(move, random.Random(1), checkout_url="https://shop.example/c/deal_1")
    assert format_money(move.terms.price_cents) in text
    for extra in move.terms.extras:
        assert extra[1:].lower() in text.lower()
    assert "https://shop.example/c/deal_1" in text


@pytest.mark.parametrize("intent", [Intent(IntentKind.QUESTION, topics=(Topic.WARRANTY,)), BEST, CHAT],
                         ids=["question", "best-price", "chat"])
def test_a_fresh_reply_never_repeats_the_previous_one_word_for_word(intent):
    """The hardest case for ``render_fresh``: the previous message is exactly what this seed
    draws first. Drawing again only makes a repeat unlikely (1 in 27 per turn for three
    wordings); the reply must differ every time, and still be reproducible from its seed."""
    product = DEMO[0]
    renderer = ReplyRenderer(CATALOG.store, product.facts)
    chat = Chat(product)
    move = chat.say(intent)
    for seed in range(300):
        previous = renderer.render(move, random.Random(seed))
        fresh = renderer.render_fresh(move, random.Random(seed), previous=previous)
        assert fresh != previous, seed
        assert fresh == renderer.render_fresh(move, random.Random(seed), previous=previous)


def test_repeated_offer_at_or_above_the_floor_is_taken():
    """A shopper who keeps repeating an acceptable offer gets a deal at that offer, not a HOLD
    until the message cap: standing still above the floor must not cost the store the sale."""
    product = SYNTHETIC["no_levers"]  # $1000 list, $800 floor
    amount = product.floor_cents + 1_000
    chat = Chat(product, max_messages=100)
    moves = [chat.offer(amount) for _ in range(MerchantAgent.STALLS_TO_TAKE + 1)]
    assert moves[-1].kind is MoveKind.ACCEPT_OFFER
    assert not any(m.is_deal for m in moves[:-1])
    assert chat.negotiation.outcome.agreed
    assert chat.negotiation.outcome.terms.price_cents == amount
