"""The deterministic shopper agent (``haggler.agents.shopper``).

* Matches against our real merchant through :class:`ChatService` on a temporary SQLite store,
  in two variants: sending free text and reading the reply's text alone (what works against
  any negotiate.v1 store), and sending the JSON extension and reading the structured offer.
* Unit tests of its behaviour against scripted merchant readings.
* A property test against a randomised merchant simulation.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field, replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from haggler.agents.merchant import MerchantAgent
from haggler.agents.shopper import ShopperAgent, ShopperGoal, ShopperTurn, mentions_amount
from haggler.catalog import Product, load_catalog
from haggler.language.intents import IntentKind
from haggler.language.merchant_reading import MerchantReading, read_merchant_reply
from haggler.language.parse import parse_shopper_turn
from haggler.money import format_money
from haggler.protocols.negotiate_v1 import views
from haggler.protocols.negotiate_v1.service import ChatService
from tests.support.chat_service import chat_service

CATALOG = load_catalog()
DEMO = CATALOG.products
BASE = "http://store.test"
FORBIDDEN_WORDS = re.compile(r"\b(?:budget|max(?:imum)?|limit|ceiling)\b|can'?t\s+go\s+(?:above|over|higher)", re.I)


def budget_leaks(text: str, budget_cents: int) -> bool:
    """Whether ``text`` states the budget: "$1,234.50", "1234.50", "1,234", "$612", "612"..."""
    whole, frac = divmod(budget_cents, 100)
    forms = {format_money(budget_cents)}
    if frac:
        forms |= {f"{whole}.{frac:02d}", f"{whole:,}.{frac:02d}"}
    else:
        forms |= {str(whole), f"{whole:,}", f"{whole}.00"}
    return any(re.search(r"(?<![\d,.])" + re.escape(f) + r"(?![\d]|[.,]\d)", text) for f in forms) \
        or mentions_amount(text, budget_cents)


# -- matches against the real store ------------------------------------------------------------


@dataclass
class Match:
    product: Product
    budget: int
    agent: ShopperAgent
    deal_cents: int | None = None
    deal_extras: tuple[str, ...] = ()
    closed: bool = False
    transcript: list[tuple[str, str]] = field(default_factory=list)

    @property
    def shopper_texts(self) -> list[str]:
        return [t for who, t in self.transcript if who == "shopper"]


@pytest.fixture(scope="module")
def service(tmp_path_factory) -> ChatService:
    return chat_service(CATALOG, tmp_path_factory.mktemp("shopper"), seed=20240601)


def play(service: ChatService, product: Product, goal: ShopperGoal, *, seed: int, structured: bool) -> Match:
    """One chat: the shopper's turns go out as free text (read back from the reply text alone)
    or as JSON (read back with the structured offer/deal)."""
    agent = ShopperAgent(goal, seed=seed)
    match = Match(product, goal.budget_cents, agent)
    start = service.start(product.id, "203.0.113.9")
    match.transcript.append(("merchant", start.greeting))
    greeting = read_merchant_reply(start.greeting, closed=False, list_price_cents=product.list_price_cents,
                                   offer=views.offer_view(start.offer) if structured else None)
    turn: ShopperTurn | None = agent.first_turn(greeting)
    while turn is not None:
        assert len(match.shopper_texts) < 40, "the conversation must terminate"
        match.transcript.append(("shopper", turn.text))
        message = json.dumps(turn.structured) if structured else turn.text
        reply = service.say(start.session_id, message, checkout_url=lambda d: f"{BASE}/checkout/{d}")
        match.transcript.append(("merchant", reply.message))
        if reply.deal is not None:
            match.deal_cents, match.deal_extras = reply.deal.price_cents, tuple(reply.deal.extras)
        match.closed = reply.closed
        if structured:
            reading = read_merchant_reply(
                reply.message, closed=reply.closed, list_price_cents=product.list_price_cents,
                offer=views.offer_view(reply.offer) if reply.offer else None,
                deal=views.deal_view(reply.deal, BASE) if reply.deal else None)
        else:
            reading = read_merchant_reply(reply.message, closed=reply.closed, list_price_cents=product.list_price_cents)
            # the text alone says what the structured extension says
            if reply.offer is not None:
                assert reading.price_cents == reply.offer.price_cents, reply.message
                assert [e.casefold() for e in reading.extras] == [e.casefold() for e in reply.offer.extras]
            if reply.deal is not None:
                assert (reading.deal, reading.price_cents) == (True, reply.deal.price_cents), reply.message
        turn = agent.next_turn(reading)
        if reply.closed:
            assert turn is None
    return match


def budgets(product: Product) -> dict[str, int]:
    floor, lst = product.floor_cents, product.list_price_cents
    return {
        "floor-10%": floor * 9 // 10,
        "floor": floor,
        "floor+25%": floor + (lst - floor) // 4,
        "midway": (floor + lst) // 2,
        "list": lst,
        "list+10%": lst * 11 // 10,
    }


SEEDS = (1, 2)


@pytest.fixture(scope="module")
def matches(service) -> dict[bool, list[tuple[str, Match]]]:
    out: dict[bool, list[tuple[str, Match]]] = {False: [], True: []}
    for structured in (False, True):
        for product in DEMO:
            for name, budget in budgets(product).items():
                for seed in SEEDS:
                    goal = ShopperGoal(product.list_price_cents, budget)
                    out[structured].append((name, play(service, product, goal, seed=seed, structured=structured)))
    return out


VARIANTS = pytest.mark.parametrize("structured", [False, True], ids=["text", "json"])


@VARIANTS
def test_deals_never_above_budget(matches, structured):
    for _name, m in matches[structured]:
        if m.deal_cents is not None:
            assert m.deal_cents <= m.budget, m.transcript
            assert m.agent.outcome is not None and m.agent.outcome.agreed
            assert m.agent.outcome.price_cents == m.deal_cents
            assert [e.casefold() for e in m.agent.outcome.extras] == [e.casefold() for e in m.deal_extras]
        else:
            assert m.agent.outcome is not None and not m.agent.outcome.agreed
        # every offer the shopper made was within its budget, and they never went down
        offers = [t.price_cents for t in m.agent.turns if t.kind == "offer"]
        assert all(o is not None and o < m.budget for o in offers)
        assert offers == sorted(offers)


@VARIANTS
def test_deal_whenever_the_merchant_can_meet_the_budget(matches, structured):
    possible = [(n, m) for n, m in matches[structured] if m.budget >= MerchantAgent(m.product).min_quote]
    deals = [m for _, m in possible if m.deal_cents is not None]
    assert len(possible) >= 3 * len(DEMO) * len(SEEDS)
    assert len(deals) >= 0.95 * len(possible), [(n, m.product.id, m.budget) for n, m in possible if m.deal_cents is None]


@VARIANTS
def test_no_deal_below_the_floor(matches, structured):
    for _name, m in matches[structured]:
        if m.budget < m.product.floor_cents:
            assert m.deal_cents is None
            assert m.closed or m.agent.done


@VARIANTS
def test_pays_less_than_list_on_average_with_a_generous_budget(matches, structured):
    rich = [m for _, m in matches[structured] if m.budget >= m.product.list_price_cents]
    assert all(m.deal_cents is not None for m in rich)
    ratio = statistics.mean(m.deal_cents / m.product.list_price_cents for m in rich)
    assert ratio < 0.97
    # and it captures a fair share of the bargaining zone between floor and budget overall
    shares = [(m.budget - m.deal_cents) / (m.budget - m.product.floor_cents)
              for _, m in matches[structured] if m.deal_cents is not None and m.budget > m.product.floor_cents]
    assert statistics.mean(shares) > 0.4


@VARIANTS
def test_no_shopper_text_reveals_the_budget(matches, structured):
    for _name, m in matches[structured]:
        for text in m.shopper_texts:
            assert not budget_leaks(text, m.budget), (text, m.budget)
            assert not FORBIDDEN_WORDS.search(text), text


def test_text_and_json_variants_agree(matches):
    """Reading text alone leads to the same outcomes as reading the structured extension."""
    text = [(m.product.id, m.budget, m.deal_cents) for _, m in matches[False]]
    structured = [(m.product.id, m.budget, m.deal_cents) for _, m in matches[True]]
    assert text == structured


def test_turns_stay_within_the_limit(matches):
    for structured in (False, True):
        for _name, m in matches[structured]:
            assert len(m.agent.turns) <= m.agent.max_turns


def test_extras_it_values_bring_it_up_faster(service):
    """Valuing the extras the merchant trades first, the shopper reciprocates them — and still
    never pays more than its budget."""
    product = next(p for p in DEMO if p.id == "meridian-studio-ref")  # room enough for extras
    budget = product.list_price_cents
    plain = play(service, product, ShopperGoal(product.list_price_cents, budget), seed=3, structured=False)
    valued = play(service, product, ShopperGoal(product.list_price_cents, budget,
                                                extra_values={"shipping": 4_000, "stand": 6_000, "cable": 8_000}),
                  seed=3, structured=False)
    assert plain.deal_cents is not None and valued.deal_cents is not None
    assert valued.deal_cents <= budget
    # The two play alike until the merchant puts an extra on the table (it does once the
    # shopper's offer pays for one); from there the shopper that values it offers more.
    split = next(i for i, (v, p) in enumerate(zip(valued.agent.offers, plain.agent.offers, strict=False)) if v != p)
    assert valued.agent.offers[split] > plain.agent.offers[split]


# -- behaviour against scripted merchant replies ---------------------------------------------------


def reading(price: int | None, *, extras: tuple[str, ...] = (), final: bool = False, deal: bool = False,
            closed: bool = False) -> MerchantReading:
    return MerchantReading(price_cents=price, extras=extras, final=final, deal=deal, closed=closed,
                           walked_away=closed and not deal)


LIST = 64_900


def test_opening_is_a_credible_anchor():
    for seed in range(30):
        agent = ShopperAgent(ShopperGoal(LIST, LIST), seed=seed)
        turn = agent.first_turn(reading(LIST))
        assert turn.kind == "offer"
        assert 0.55 * LIST <= turn.price_cents <= 0.75 * LIST
        assert turn.structured == {"action": "offer", "price": turn.price_cents // 100}
    # never above a target or budget below that
    agent = ShopperAgent(ShopperGoal(LIST, 40_000, target_cents=35_000), seed=1)
    assert agent.first_turn(reading(LIST)).price_cents <= 35_000
    # with a tiny budget it still opens below it
    agent = ShopperAgent(ShopperGoal(LIST, 20_000), seed=1)
    assert agent.first_turn(reading(LIST)).price_cents < 20_000


def _second_offer(merchant_second_price: int, seed: int = 5) -> int:
    # A short chat: no turn to spare for a probe, so the second offer answers the merchant.
    agent = ShopperAgent(ShopperGoal(LIST, LIST), seed=seed, max_turns=ShopperAgent.PROBE_MIN_TURNS - 1)
    first = agent.first_turn(reading(LIST))
    second = agent.next_turn(reading(merchant_second_price))
    assert second is not None and second.kind == "offer"
    return second.price_cents - first.price_cents


def test_answers_the_merchants_movement():
    stalled = _second_offer(LIST)
    small = _second_offer(LIST - 1_000)
    large = _second_offer(LIST - 8_000)
    assert 0 < stalled < small < large


def _answering_merchant(agent: ShopperAgent, *, step: int = 500) -> ShopperTurn | None:
    """Plays a merchant that gives ``step`` after each raise of the shopper and holds otherwise,
    until the shopper stops offering; returns the shopper's last turn."""
    agent.first_turn(reading(LIST))
    price = LIST
    while True:
        if len(agent.offers) >= 2 and agent.offers[-1] > agent.offers[-2]:
            price -= step
        turn = agent.next_turn(reading(price))
        if turn is None or turn.kind != "offer":
            return turn


def test_concedes_in_shrinking_steps_against_a_steady_merchant():
    agent = ShopperAgent(ShopperGoal(LIST, 60_000), seed=2)
    _answering_merchant(agent)
    steps = [b - a for a, b in zip(agent.offers, agent.offers[1:], strict=False) if b > a]
    assert len(steps) >= 4
    assert steps[-1] <= max(steps[:3])
    assert max(agent.offers) < 60_000


def test_probes_once_in_a_while_early_in_a_long_chat():
    """Early on every other offer repeats the last: a merchant that answers moves holds then."""
    agent = ShopperAgent(ShopperGoal(LIST, 60_000), seed=2)
    _answering_merchant(agent)
    assert agent.offers[1] == agent.offers[0] and agent.offers[2] > agent.offers[1]
    assert agent.offers[3] == agent.offers[2]
    late = agent.offers[len(agent.offers) // 2:]
    assert all(b > a for a, b in zip(late, late[1:], strict=False))


def test_waits_for_the_last_offer_of_a_merchant_on_a_clock():
    """A merchant that comes down while the shopper stands still concedes on a clock: the
    shopper barely moves and takes the merchant's last, best offer on its last turn."""
    agent = ShopperAgent(ShopperGoal(LIST, 60_000), seed=2, max_turns=12)
    agent.first_turn(reading(LIST))
    asks = [LIST - 1_500 * i for i in range(1, 12)]
    for ask in asks:
        turn = agent.next_turn(reading(ask))
        assert turn is not None
        if turn.kind != "offer":
            break
    assert turn.kind == "accept" and len(agent.turns) == agent.max_turns
    assert agent._clock_merchant
    assert max(agent.offers) - agent.offers[0] < 0.05 * LIST
    assert agent.next_turn(reading(asks[-1], deal=True, closed=True)) is None
    assert agent.outcome is not None and agent.outcome.price_cents == asks[-1] <= 60_000


def test_last_offer_is_its_best_when_the_merchant_stays_above():
    """Against a merchant that answers moves but stays above the budget, its last offer is
    the most it will pay: holding back then only loses the deal."""
    agent = ShopperAgent(ShopperGoal(LIST, 50_000), seed=2, max_turns=12)
    turn = _answering_merchant(agent, step=100)
    assert turn is not None and turn.kind == "walk_away"
    assert agent.offers[-1] == agent.cap < 50_000


def test_extras_count_as_money_against_the_target():
    goal = ShopperGoal(60_000, 56_000, target_cents=46_000, extra_values={"battery": 8_000})
    agent = ShopperAgent(goal, seed=1)
    agent.first_turn(reading(60_000))
    turn = agent.next_turn(reading(54_000, extras=("extra battery pack",)))
    assert turn is not None and turn.kind == "accept"  # $540 + battery worth $80: effectively $460


def test_never_accepts_cash_above_budget_whatever_the_extras():
    goal = ShopperGoal(60_000, 50_000, target_cents=45_000, extra_values={"battery": 20_000, "shipping": 5_000})
    agent = ShopperAgent(goal, seed=1)
    agent.first_turn(reading(60_000))
    turn = agent.next_turn(reading(54_000, extras=("extra battery pack", "free shipping")))
    assert turn is not None and turn.kind == "offer" and turn.price_cents < 50_000
    turn = agent.next_turn(reading(54_000, extras=("extra battery pack", "free shipping"), final=True))
    assert turn is not None and turn.kind == "walk_away"
    assert agent.done and agent.outcome is not None and not agent.outcome.agreed
    assert agent.outcome.reason == "walked_away"
    assert agent.next_turn(reading(None, closed=True)) is None


def test_accepts_a_final_offer_within_budget_and_records_the_deal():
    agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
    agent.first_turn(reading(LIST))
    turn = agent.next_turn(reading(61_500, final=True))
    # the acceptance names its price: in JSON an offer of exactly that price, never a bare accept
    assert turn is not None and turn.kind == "accept" and turn.price_cents == 61_500
    assert turn.structured == {"action": "offer", "price": 615} and "$615" in turn.text
    assert not agent.done
    assert agent.next_turn(reading(61_500, deal=True, closed=True)) is None
    assert agent.outcome is not None and agent.outcome.agreed and agent.outcome.price_cents == 61_500


def test_accepts_when_the_gap_is_small():
    agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
    agent.first_turn(reading(LIST))
    last = agent.offers[-1]
    turn = agent.next_turn(reading(last + 500))
    assert turn is not None and turn.kind == "accept"


def test_merchant_taking_our_offer_without_closing_gets_a_confirmation():
    agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
    first = agent.first_turn(reading(LIST))
    turn = agent.next_turn(reading(None, deal=True))
    assert turn is not None and turn.kind == "accept"
    assert agent.next_turn(reading(None)) is None
    assert agent.outcome is not None and agent.outcome.agreed and agent.outcome.price_cents == first.price_cents


def test_a_confirmation_names_the_price_it_confirms():
    agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
    first = agent.first_turn(reading(LIST))
    turn = agent.next_turn(reading(None, deal=True))
    assert turn is not None and turn.price_cents == first.price_cents
    assert turn.structured == {"action": "offer", "price": first.price_cents / 100}
    assert parse_shopper_turn(turn.text).amount_cents == first.price_cents


def test_a_deal_read_from_text_is_held_to_the_price_the_shopper_named():
    """Text may state any number (a quoted list price, an injected one): the deal is the price
    the shopper's acceptance named, all a store can hold it to."""
    agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
    agent.first_turn(reading(LIST))
    turn = agent.next_turn(reading(61_500, final=True))
    assert turn is not None and turn.kind == "accept" and turn.price_cents == 61_500
    assert agent.next_turn(reading(99_000, deal=True, closed=True)) is None
    assert agent.outcome is not None and agent.outcome.agreed and agent.outcome.price_cents == 61_500


def test_a_store_deal_above_the_budget_is_not_the_shoppers():
    """The store's own structured deal above the budget is refused, closed or not."""
    for closed in (True, False):
        agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
        agent.first_turn(reading(LIST))
        agent.next_turn(reading(61_500, final=True))
        over = replace(reading(63_000, deal=True, closed=closed), structured=True)
        turn = agent.next_turn(over)
        assert (turn is None) == closed and (closed or turn.kind == "walk_away")
        assert agent.outcome is not None and not agent.outcome.agreed and agent.outcome.reason == "over_budget"
        assert agent.outcome.price_cents is None


def test_a_store_deal_within_the_budget_is_taken_at_the_stores_price():
    agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
    agent.first_turn(reading(LIST))
    agent.next_turn(reading(61_500, final=True))
    assert agent.next_turn(replace(reading(61_000, deal=True, closed=True), structured=True)) is None
    assert agent.outcome is not None and agent.outcome.agreed and agent.outcome.price_cents == 61_000


def test_it_never_commits_to_a_price_above_its_budget():
    agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
    agent.first_turn(reading(LIST))
    with pytest.raises(RuntimeError):
        agent._accept(62_001)
    with pytest.raises(RuntimeError):
        agent._emit("offer", None, ("Would you take {p}?",))


def test_asks_for_a_price_when_none_is_stated():
    agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
    turn = agent.first_turn(reading(None))
    assert turn.kind == "ask" and turn.structured == {"action": "best_price"}
    assert agent.next_turn(reading(LIST)).kind == "offer"


def test_merchant_closing_ends_it():
    agent = ShopperAgent(ShopperGoal(LIST, 62_000), seed=4)
    agent.first_turn(reading(LIST))
    assert agent.next_turn(reading(None, closed=True)) is None
    assert agent.outcome is not None and agent.outcome.reason == "merchant_closed"


def test_gives_up_politely_after_max_turns():
    agent = ShopperAgent(ShopperGoal(LIST, 40_000), seed=9, max_turns=12)
    turn = agent.first_turn(reading(LIST))
    turns = [turn]
    while turn is not None:
        turn = agent.next_turn(reading(LIST))
        if turn is not None:
            turns.append(turn)
    assert len(turns) <= 12
    assert turns[-1].kind == "walk_away"
    assert agent.outcome is not None and not agent.outcome.agreed


def test_turn_texts_mean_what_the_turn_does():
    """Every text parses, with the store's own parser, to the turn's intent and amount. An
    acceptance is an offer of exactly the price it accepts ("deal at $574"), which the store takes
    as acceptance when it meets its ask, and which binds no more than that price."""
    kinds = {"offer": IntentKind.OFFER, "accept": IntentKind.OFFER, "walk_away": IntentKind.WALK_AWAY,
             "ask": IntentKind.BEST_PRICE}
    seen = set()
    for seed in range(40):
        goal = ShopperGoal(LIST, 55_000 + seed * 300, extra_values={"shipping": 3_000})
        agent = ShopperAgent(goal, seed=seed)
        turns = [agent.first_turn(reading(None))]
        price = LIST
        while turns[-1] is not None and len(turns) < 30:
            price = price - 1_500 if seed % 3 else price
            turns.append(agent.next_turn(reading(price, final=price < 58_000)))
        for turn in filter(None, turns):
            intent = parse_shopper_turn(turn.text, reference_cents=LIST)
            assert intent.kind is kinds[turn.kind], turn
            assert not intent.manipulation, turn
            if turn.kind in ("offer", "accept"):
                assert intent.amount_cents == turn.price_cents, turn
            seen.add(turn.kind)
            # the JSON form parses to the same thing
            structured = parse_shopper_turn(json.dumps(turn.structured))
            assert structured.kind is kinds[turn.kind]
            assert structured.amount_cents == (turn.price_cents if turn.kind in ("offer", "accept") else None)
    assert seen == set(kinds)


def test_same_seed_same_conversation():
    def run(seed):
        agent = ShopperAgent(ShopperGoal(LIST, 60_000), seed=seed)
        out = [agent.first_turn(reading(LIST)).text]
        for price in (63_000, 62_000, 61_500):
            turn = agent.next_turn(reading(price))
            out.append(turn.text if turn else None)
        return out

    assert run(11) == run(11)
    assert any(run(11) != run(s) for s in range(12, 20))


def test_the_budget_is_never_offered_and_never_said():
    for budget in (61_200, 61_137, 100, 1, 150_000):
        agent = ShopperAgent(ShopperGoal(LIST, budget), seed=1)
        assert agent.ceiling < budget or budget == 1
        assert budget_leaks(f"Would you take {format_money(budget)}?", budget)


def test_goal_validation():
    with pytest.raises(ValueError):
        ShopperGoal(0, 100)
    with pytest.raises(ValueError):
        ShopperGoal(100, 0)
    with pytest.raises(ValueError):
        ShopperAgent(ShopperGoal(100, 100), max_turns=1)


# -- property: against a randomised merchant ---------------------------------------------------------

EXTRA_NAMES = ("free 2-day shipping", "an extra battery pack", "a carrying case", "extended warranty")


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_property_against_a_simulated_merchant(data):
    lst = data.draw(st.integers(1_000, 500_000), label="list")
    budget = data.draw(st.one_of(st.integers(1, 2 * lst), st.integers(lst // 2, lst + lst // 10)), label="budget")
    target = data.draw(st.one_of(st.none(), st.integers(1, 2 * lst)), label="target")
    values = data.draw(st.dictionaries(st.sampled_from(["shipping", "battery", "case", "warranty"]),
                                       st.integers(0, lst // 4), max_size=3), label="values")
    seed = data.draw(st.integers(0, 2**32), label="seed")
    max_turns = data.draw(st.sampled_from([None, 2, 5, 30]), label="max_turns")
    agent = ShopperAgent(ShopperGoal(lst, budget, target, values), seed=seed, max_turns=max_turns)
    floor = data.draw(st.integers(lst // 3, lst), label="floor")

    ask, extras = lst, ()
    turn = agent.first_turn(reading(lst))
    offers: list[int] = []
    steps = 0
    while turn is not None:
        steps += 1
        assert steps <= agent.max_turns, "the shopper must stop after max_turns"
        assert not budget_leaks(turn.text, budget) or turn.price_cents == budget
        assert not FORBIDDEN_WORDS.search(turn.text)
        if turn.kind == "offer":
            assert turn.price_cents is not None and turn.price_cents <= budget
            assert not offers or turn.price_cents >= offers[-1]
            offers.append(turn.price_cents)
            if turn.price_cents >= floor and data.draw(st.booleans(), label="merchant takes it"):
                ask = turn.price_cents  # a confirmation that follows accepts these terms
                reply = reading(turn.price_cents, extras=extras, deal=True, closed=data.draw(st.booleans()))
            else:
                behaviour = data.draw(st.sampled_from(["cut", "cut", "extra", "hold", "final", "silent", "close"]))
                if behaviour == "cut":
                    ask = max(floor, ask - data.draw(st.integers(0, max(0, ask - turn.price_cents))))
                elif behaviour == "extra" and len(extras) < len(EXTRA_NAMES):
                    extras = extras + (EXTRA_NAMES[len(extras)],)
                reply = reading(None if behaviour == "silent" else ask, extras=extras, final=behaviour == "final",
                                closed=behaviour == "close")
        elif turn.kind == "accept":
            # it only accepts terms within its budget
            assert ask <= budget
            reply = reading(ask, extras=extras, deal=True, closed=data.draw(st.booleans()))
        elif turn.kind == "walk_away":
            reply = reading(None, closed=True)
        else:  # ask
            reply = reading(ask, extras=extras)
        turn = agent.next_turn(reply)
    assert agent.done
    outcome = agent.outcome
    assert outcome is not None
    if outcome.agreed:
        assert outcome.price_cents is not None and outcome.price_cents <= budget


def test_takes_the_terms_of_a_merchant_on_a_clock_that_stops_coming_down():
    """A merchant on a clock that holds while the shopper still creeps up has reached its best
    terms: the shopper takes them rather than wait for a last offer that may never come."""
    agent = ShopperAgent(ShopperGoal(LIST, 60_000), seed=2)
    agent.first_turn(reading(LIST))
    for ask in (LIST, LIST - 2_000, LIST - 4_000, LIST - 6_000):
        turn = agent.next_turn(reading(ask))
        assert turn is not None and turn.kind == "offer"
    assert agent._clock_merchant
    turn = agent.next_turn(reading(LIST - 6_000))
    assert turn is not None and turn.kind == "accept"


def test_offers_its_best_when_a_merchant_on_a_clock_stops_above_its_budget():
    """A merchant on a clock that stops above the budget will come down no further by itself:
    the shopper's best offer is the only way left to a deal."""
    agent = ShopperAgent(ShopperGoal(LIST, 50_000), seed=2)
    agent.first_turn(reading(LIST))
    for ask in (LIST, LIST - 4_000, LIST - 8_000, LIST - 12_000):
        turn = agent.next_turn(reading(ask))
        assert turn is not None and turn.kind == "offer" and turn.price_cents < 40_000
    turn = agent.next_turn(reading(LIST - 12_000))
    assert turn is not None and turn.kind == "offer" and turn.price_cents == agent.cap < 50_000


class TestBoundToTheCap:
    """A shopper whose merchant is bound to the same deadline (the lab's alternating offers,
    ``to_the_cap``): it haggles to its last turn on a firm curve. A store's shopper gets what
    it always got."""

    BUDGET = 60_000

    def bound(self, max_turns: int = 40) -> ShopperAgent:
        return ShopperAgent(ShopperGoal(LIST, self.BUDGET), seed=3, max_turns=max_turns, to_the_cap=True)

    def test_opens_low_and_concedes_on_a_firm_curve_to_its_cap_at_the_end(self):
        agent = self.bound()
        first = agent.first_turn(reading(LIST))
        assert first.kind == "offer" and first.price_cents <= 0.40 * LIST
        turns = [agent.next_turn(reading(LIST)) for _ in range(agent.max_turns - 1)]
        assert all(t is not None and t.kind == "offer" for t in turns)  # never walks away early
        offers = agent.offers
        assert offers == sorted(offers) and max(offers) <= self.BUDGET
        assert offers[len(offers) // 2] - offers[0] < 0.05 * (offers[-1] - offers[0])  # firm for half the time
        # its cap from the turn before its last (a merchant's last offer can still meet it), not
        # before, and its budget itself in its last turn: the merchant's answer is its last
        assert offers[-2] == agent.cap and offers[-3] < agent.cap
        assert offers[-1] == self.BUDGET
        store = ShopperAgent(ShopperGoal(LIST, self.BUDGET), seed=3, max_turns=40)
        store.first_turn(reading(LIST))
        kinds = [store.next_turn(reading(LIST)) for _ in range(39)]
        assert any(t is None or t.kind == "walk_away" for t in kinds)  # a store's shopper gives up

    def test_does_not_take_a_clock_merchant_that_stopped_coming_down_before_its_last_turn(self):
        agent = self.bound(max_turns=20)
        agent.first_turn(reading(LIST))
        asks = [LIST - 1_500 * i for i in range(1, 5)] + [LIST - 6_000] * 15  # within budget from the 4th
        turns = [agent.next_turn(reading(ask)) for ask in asks]
        kinds = [t.kind for t in turns if t is not None]
        # It takes the terms only when its own curve reaches them, at the end, not when the
        # merchant's clock stops coming down.
        assert kinds[:-2] == ["offer"] * (len(kinds) - 2) and "accept" in kinds[-2:]

    def test_never_above_its_budget(self):
        agent = self.bound(max_turns=10)
        agent.first_turn(reading(LIST))
        turns = [agent.next_turn(reading(self.BUDGET + 5_000)) for _ in range(9)]
        assert all(t is not None and t.kind == "offer" and t.price_cents <= self.BUDGET for t in turns)
        assert turns[-1].price_cents == self.BUDGET and turns[-2].price_cents < self.BUDGET
        assert agent.next_turn(reading(self.BUDGET + 5_000)) is None and agent.outcome is not None
        assert not agent.outcome.agreed
