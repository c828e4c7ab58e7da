"""Negotiation quality of haggler's strategies against ANAC champions, in NegMAS's SAO mechanism.

A round-robin tournament: every agent of the field meets every other (no self-play) on every
domain, in both roles, ``--reps`` times, each negotiation seeded from ``--seed``.

The field (``--agents`` picks a subset):

* ten ANAC finalists, 2010–2019, as ported to NegMAS by ``negmas-genius-agents``: AgentK,
  HardHeaded, CUHKAgent, TheFawkes, AgentM, Atlas3, Caduceus, PonPokoAgent, AgreeableAgent2018,
  AgentGG;
* NegMAS's textbook negotiators: BoulwareTBNegotiator, ConcederTBNegotiator,
  NaiveTitForTatNegotiator, AspirationNegotiator;
* haggler's entrants (``haggler.agents.strategies.STRATEGIES``, unchanged): store-merchant,
  default-shopper, firm, boulware, linear, conceder, tit-for-tat-relative, tit-for-tat-absolute. They
  enter NegMAS through ``negmas_bridge`` (see there for the mapping of a multi-issue domain onto a
  price axis through the strategy's own utility).

The domains:

* ANAC domains (``--domains DIR``, the ``tests/data/scenarios/anac`` folder of NegMAS's GitHub
  repository — the PyPI wheel ships none; never committed here, they are AGPL): the explicit list
  :data:`DEFAULT_DOMAINS`, ten bilateral domains of 27–1,600 outcomes, loaded with NegMAS's
  ``Scenario.load`` with discounting ignored (the deadline is in steps), utilities normalised to
  [0, 1]. A reserved value the domain leaves undefined, or one below 0 after normalisation, is 0
  (Genius's convention). Roles are the two utility-function sides: the agent listed first in a
  pairing takes the domain's first profile and moves first, so each ordered pairing gives each
  agent one side. haggler's entrants use the seller orientation of the price axis on the first
  side and the buyer orientation on the second (store-merchant only sells, default-shopper only
  buys: they keep their orientation on both sides).
* generated single-issue price domains (``haggler.lab.generate.single_issue``, seeded: per
  repetition ``--price-zopa`` (3) scenarios with a zone of agreement and ``--price-nozopa`` (1)
  without, each repetition its own): outcomes whole dollars from 30% of list up to list price, linear
  utilities, the seller's reserved value its floor, the buyer's its budget
  (``negmas_bridge.PriceDomain``). Roles are the seats: the seller moves first; an agent that
  only sells or only buys takes only its seat.

Each negotiation is NegMAS's ``SAOMechanism`` (stacked alternating offers) with a deadline of
``--steps`` steps (each side offers once per step), a hidden wall-clock limit of
``--negotiation-timeout`` seconds (a negotiation hitting it counts as a disagreement and is
reported as a timeout) and negotiator exceptions caught by the mechanism: a negotiation in which
an agent raised is recorded as that agent's error and left out of every metric (of both sides).
The whole run stops after ``--max-seconds``; what did not run is reported.

Metrics, per agent (all its negotiations) and per role:

* ``adv`` — mean advantage over the reserved value: the agent's utility of the agreement minus
  its own reserved value; 0 on disagreement (ANAC's convention: walking away gets the reserved
  value). Utilities are normalised per domain, so advantages of different domains add up.
* ``agree`` — agreement rate.
* ``nash`` / ``pareto`` — Euclidean distance in utility space (first side, second side) from the
  outcome reached — the reservation point on disagreement — to the nearest Nash point and to the
  nearest point of the Pareto frontier (``negmas_bridge.nash_points``, ``pareto_points``). Price
  domains without a zone of agreement have no Nash point: they are left out of ``nash``. ``pareto``
  on price domains is 0 for every agreement (the frontier is the whole price line), so the
  ``anac pareto`` column (ANAC domains only) is where multi-issue efficiency shows.

The ranked table sorts the field by ``adv`` over all its negotiations, and adds per-role columns:
seller and buyer seat on price domains (with the rank among the agents taking that seat) and
first/second side on ANAC domains. A second table breaks haggler's entrants down by opponent group.
``--out CSV`` writes one row per negotiation. The last line::

    RESULT best_haggler=.. best_haggler_rank=.. best_haggler_adv=.. best_anac=.. best_anac_adv=..
    field_median_adv=.. field_median_agreement=.. haggler_median_agreement=..
    store_merchant_seller_rank=r/n store_merchant_seller_adv=.. default_shopper_buyer_rank=r/n
    default_shopper_buyer_adv=.. agents=.. anac_agents=.. domains=.. price_domains=.. reps=..
    steps=.. negotiations=.. errors=.. timeouts=.. not_run=.. seconds=..

Needs the optional, benchmark-only ``anac`` extra (``pip install -e '.[anac]'``, AGPL-3.0)::

    python benchmarks/anac.py --domains /tmp/anac-src/tests/data/scenarios/anac [--reps 5] [--steps 100]
        [--seed 1] [--workers 2] [--agents A,B,..] [--quick] [--out rows.csv]
"""

from __future__ import annotations

import argparse
import ast
import csv
import math
import multiprocessing
import random
import statistics
import sys
import time
import traceback
import zlib
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from haggler.agents.decider import BUYER, SELLER
from haggler.agents.strategies import STRATEGIES
from haggler.lab.generate import single_issue
from negmas_bridge import (
    PriceDomain,
    UtilityAxis,
    UtilityTable,
    haggler_negotiator,
    import_negmas,
    nash_points,
    nearest_distance,
    pareto_points,
    price_ufuns,
)

ANAC_AGENTS = ("AgentK", "HardHeaded", "CUHKAgent", "TheFawkes", "AgentM", "Atlas3", "Caduceus", "PonPokoAgent",
               "AgreeableAgent2018", "AgentGG")
TEXTBOOK_AGENTS = ("BoulwareTBNegotiator", "ConcederTBNegotiator", "NaiveTitForTatNegotiator", "AspirationNegotiator")
HAGGLER_AGENTS = ("store-merchant", "default-shopper", "firm", "boulware", "linear", "conceder",
                  "tit-for-tat-relative", "tit-for-tat-absolute")
ORIGIN = {**{a: "anac" for a in ANAC_AGENTS}, **{a: "textbook" for a in TEXTBOOK_AGENTS},
          **{a: "haggler" for a in HAGGLER_AGENTS}}
#: The default ANAC domains, relative to ``--domains``: bilateral, 27–1,600 outcomes.
DEFAULT_DOMAINS = (
    "y2010/ItexvsCypress",        # 180 outcomes, strongly opposed
    "y2010/EnglandZimbabwe",      # 576
    "y2011/Laptop",               # 27
    "y2011/Grocery",              # 1,600
    "y2011/IS_BT_Acquisition",    # 384
    "y2012/AirportSiteSelectionA",  # 420, reserved values 0.5
    "y2012/FlightBookingA",       # 36, reserved values 0.5 / none
    "y2013/Coffee",               # 112
    "y2013/DogChoosing",          # 270
    "y2013/DefensiveCharms",      # 36, reserved values 0.7
)
QUICK_AGENTS = ("HardHeaded", "Atlas3", "AgentGG", "BoulwareTBNegotiator", "store-merchant", "default-shopper",
                "boulware", "tit-for-tat-relative")
QUICK_DOMAINS = ("y2010/ItexvsCypress", "y2011/Laptop")
HAGGLER_SELLER, HAGGLER_BUYER = "store-merchant", "default-shopper"
#: Negotiations per task sent to a worker.
CHUNK = 8


def roles_of(agent: str) -> tuple[str, ...]:
    """The seats an agent can take on a price domain: haggler's strategies say, others take both."""
    if ORIGIN[agent] == "haggler":
        return tuple(getattr(STRATEGIES[agent](), "roles", (SELLER, BUYER)))
    return (SELLER, BUYER)


def orientation(agent: str, side: int) -> str:
    """The price-axis orientation of a haggler entrant on side 0 or 1 of an ANAC domain."""
    roles = roles_of(agent)
    preferred = SELLER if side == 0 else BUYER
    return preferred if preferred in roles else roles[0]


@dataclass(frozen=True)
class Task:
    index: int
    kind: str        # "anac" or "price"
    domain: str      # ANAC: path relative to --domains; price: "zopa-0003" / "nozopa-0001"
    rep: int
    first: str       # side 0: the first mover (the seller on a price domain)
    second: str


@dataclass(frozen=True)
class Config:
    root: str
    steps: int
    seed: int
    timeout: float


def task_seed(seed: int, task: Task) -> int:
    return zlib.crc32(f"{seed}:{task.kind}:{task.domain}:{task.rep}:{task.first}:{task.second}".encode())


def build_tasks(agents: list[str], domains: list[str], reps: int, zopa: int, nozopa: int) -> list[Task]:
    tasks: list[Task] = []
    pairs = [(a, b) for a in agents for b in agents if a != b]
    for rep in range(reps):
        for domain in domains:
            for a, b in pairs:
                tasks.append(Task(len(tasks), "anac", domain, rep, a, b))
        prices = [f"zopa-{rep * zopa + i:04d}" for i in range(zopa)]
        prices += [f"nozopa-{rep * nozopa + i:04d}" for i in range(nozopa)]
        for domain in prices:
            for a, b in pairs:
                if SELLER in roles_of(a) and BUYER in roles_of(b):
                    tasks.append(Task(len(tasks), "price", domain, rep, a, b))
    return tasks


# -- the worker: one negotiation --------------------------------------------------------------------


@dataclass
class Domain:
    """One loaded domain: its mechanism arguments, the two sides' utility functions, reserved
    values and utility tables, its Pareto frontier and Nash points."""

    mechanism_kwargs: dict
    ufuns: tuple
    reserved: tuple[float, float]
    tables: tuple[UtilityTable, UtilityTable] | None
    price: PriceDomain | None
    frontier: list[tuple[float, float]]
    nash: list[tuple[float, float]]


_CONFIG: Config | None = None
_DOMAINS: dict[tuple[str, str], Domain] = {}
_CLASSES: dict[str, type] = {}


def _init_worker(config: Config) -> None:
    global _CONFIG
    _CONFIG = config
    negmas = import_negmas()
    if negmas is None:
        raise RuntimeError("NegMAS is not importable")
    import negmas.sao as sao
    import negmas_genius_agents as genius

    for name in ANAC_AGENTS:
        _CLASSES[name] = getattr(genius, name)
    for name in TEXTBOOK_AGENTS:
        _CLASSES[name] = getattr(sao, name)


def _reserved(value: Any) -> float:
    return float(value) if value is not None and math.isfinite(value) and value > 0 else 0.0


def _price_scenario(name: str, seed: int, steps: int):
    kind, index = name.rsplit("-", 1)
    i = int(index)
    return single_issue(i + 1, seed=seed, zopa=kind == "zopa", max_rounds=steps, prefix=f"anac-{kind}")[i]


def load_domain(kind: str, name: str, config: Config) -> Domain:
    key = (kind, name)
    if key in _DOMAINS:
        return _DOMAINS[key]
    if kind == "anac":
        from negmas.inout import Scenario as NegmasScenario

        scenario = NegmasScenario.load(Path(config.root) / name, ignore_discount=True, load_stats=False,
                                       load_info=False)
        if scenario is None or len(scenario.ufuns) != 2:
            raise ValueError(f"{name}: not a bilateral domain NegMAS can load")
        scenario = scenario.normalize()
        ufuns = tuple(scenario.ufuns)
        for u in ufuns:
            u.reserved_value = _reserved(u.reserved_value)
        outcomes = [tuple(o) for o in scenario.outcome_space.enumerate_or_sample()]
        kwargs = {"outcome_space": scenario.outcome_space}
        price = None
    else:
        price = PriceDomain.of(_price_scenario(name, config.seed, config.steps))
        issues, seller, buyer = price_ufuns(price)
        ufuns = (seller, buyer)
        outcomes = [(x,) for x in range(price.lo, price.hi + 1)]
        kwargs = {"issues": issues}
    reserved = (float(ufuns[0].reserved_value), float(ufuns[1].reserved_value))
    utilities = [[float(u(o)) for o in outcomes] for u in ufuns]
    points = list(zip(*utilities))
    tables = (UtilityTable(outcomes, utilities[0]), UtilityTable(outcomes, utilities[1])) if kind == "anac" else None
    domain = Domain(kwargs, ufuns, reserved, tables, price, pareto_points(points), nash_points(points, reserved))
    _DOMAINS[key] = domain
    return domain


def _negotiator(agent: str, side: int, task: Task, domain: Domain, config: Config):
    if ORIGIN[agent] != "haggler":
        return _CLASSES[agent](name=agent)
    decider = STRATEGIES[agent]()
    if domain.price is not None:
        axis = domain.price.axis(SELLER if side == 0 else BUYER)
    else:
        assert domain.tables is not None
        axis = UtilityAxis(orientation(agent, side), domain.tables[side], domain.reserved[side],
                           utility=domain.ufuns[side])
    return haggler_negotiator(decider, axis, config.steps, name=agent)


def run_task(task: Task) -> dict:
    """Play one negotiation; a row of the CSV (metrics None when an agent erred)."""
    config = _CONFIG
    assert config is not None
    row: dict[str, Any] = {"index": task.index, "kind": task.kind, "domain": task.domain, "rep": task.rep,
                           "first": task.first, "second": task.second, "agreement": None, "u_first": None,
                           "u_second": None, "rv_first": None, "rv_second": None, "adv_first": None,
                           "adv_second": None, "nash_distance": None, "pareto_distance": None, "steps": None,
                           "seconds": None, "timeout": False, "error": "", "erred": ""}
    started = time.perf_counter()
    try:
        domain = load_domain(task.kind, task.domain, config)
    except Exception as e:  # noqa: BLE001 - a domain that does not load is reported, not fatal
        row["error"], row["erred"] = f"domain: {type(e).__name__}: {e}", "(domain)"
        return row
    from negmas import SAOMechanism
    import numpy

    seed = task_seed(config.seed, task)
    random.seed(seed)
    numpy.random.seed(seed % 2**32)
    negotiators = []
    for side, agent in enumerate((task.first, task.second)):
        try:
            negotiators.append(_negotiator(agent, side, task, domain, config))
        except Exception as e:  # noqa: BLE001
            row["error"], row["erred"] = f"{type(e).__name__}: {e}", agent
            return row
    try:
        mechanism = SAOMechanism(n_steps=config.steps, hidden_time_limit=config.timeout,
                                 ignore_negotiator_exceptions=True, **domain.mechanism_kwargs)
        for negotiator, ufun in zip(negotiators, domain.ufuns):
            mechanism.add(negotiator, ufun=ufun)
        state = mechanism.run()
    except Exception as e:  # noqa: BLE001 - an exception the mechanism let through: blame from the traceback
        row["error"] = f"{type(e).__name__}: {e}"
        row["erred"] = _blame(e, negotiators, (task.first, task.second))
        row["seconds"] = round(time.perf_counter() - started, 4)
        return row
    elapsed = time.perf_counter() - started
    row["seconds"], row["steps"] = round(elapsed, 4), state.step
    if state.has_error:
        ids = [n.id for n in negotiators]
        erred = state.erred_negotiator
        row["erred"] = (task.first, task.second)[ids.index(erred)] if erred in ids else "(mechanism)"
        row["error"] = _last_line(state.error_details)
        return row
    agreement = state.agreement
    rv = domain.reserved
    row["rv_first"], row["rv_second"] = rv
    if agreement is not None:
        u = (float(domain.ufuns[0](agreement)), float(domain.ufuns[1](agreement)))
        adv = (u[0] - rv[0], u[1] - rv[1])
    else:
        u, adv = rv, (0.0, 0.0)
        row["timeout"] = elapsed >= config.timeout
    row["agreement"] = agreement is not None
    row["u_first"], row["u_second"] = u
    row["adv_first"], row["adv_second"] = adv
    row["nash_distance"] = nearest_distance(u, domain.nash)
    row["pareto_distance"] = nearest_distance(u, domain.frontier)
    return row


def _last_line(details: Any) -> str:
    """The last line of a traceback NegMAS recorded (a list of strings, or its repr)."""
    if isinstance(details, str) and details.startswith("["):
        try:
            details = ast.literal_eval(details)
        except (ValueError, SyntaxError):
            pass
    text = "\n".join(map(str, details)) if isinstance(details, (list, tuple)) else str(details)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "error"


def run_chunk(tasks: list[Task]) -> list[dict]:
    return [run_task(task) for task in tasks]


def _blame(error: BaseException, negotiators: list, names: tuple[str, str]) -> str:
    """The agent whose code raised ``error``: the innermost frame whose ``self`` is a negotiator."""
    tb = error.__traceback__
    blamed = "(mechanism)"
    while tb is not None:
        owner = tb.tb_frame.f_locals.get("self")
        for negotiator, name in zip(negotiators, names):
            if owner is negotiator:
                blamed = name
        tb = tb.tb_next
    return blamed


# -- aggregation ----------------------------------------------------------------------------------------


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _fmt(x: float | None, spec: str = ".3f") -> str:
    return "na" if x is None else format(x, spec)


@dataclass
class Cell:
    """One agent's negotiations in some subset (a role, a domain kind, an opponent group)."""

    adv: list[float]
    agree: list[float]
    nash: list[float]
    pareto: list[float]
    #: Pareto distance of the agreements only.
    pareto_deals: list[float]
    #: The opponent's advantage in the same negotiations.
    opp_adv: list[float]

    @classmethod
    def new(cls) -> Cell:
        return cls([], [], [], [], [], [])

    def add(self, row: dict, side: int) -> None:
        mine, theirs = ("adv_first", "adv_second") if side == 0 else ("adv_second", "adv_first")
        self.adv.append(row[mine])
        self.opp_adv.append(row[theirs])
        self.agree.append(1.0 if row["agreement"] else 0.0)
        if row["nash_distance"] is not None:
            self.nash.append(row["nash_distance"])
        if row["pareto_distance"] is not None:
            self.pareto.append(row["pareto_distance"])
            if row["agreement"]:
                self.pareto_deals.append(row["pareto_distance"])


def aggregate(rows: list[dict], agents: list[str]) -> dict[tuple[str, str], Cell]:
    """Cells by (agent, subset): "all", "price-seller", "price-buyer", "anac", "anac-first",
    "anac-second", "price", and "vs-<origin>"."""
    cells: dict[tuple[str, str], Cell] = defaultdict(Cell.new)
    for row in rows:
        if row["error"] or row["agreement"] is None:
            continue
        for side, (agent, opponent) in enumerate(((row["first"], row["second"]), (row["second"], row["first"]))):
            keys = ["all", row["kind"], f"vs-{ORIGIN[opponent]}"]
            if row["kind"] == "price":
                keys.append("price-seller" if side == 0 else "price-buyer")
            else:
                keys.append("anac-first" if side == 0 else "anac-second")
                keys.append(f"anac-vs-{ORIGIN[opponent]}")
            for key in keys:
                cells[agent, key].add(row, side)
    return cells


def _ranks(agents: list[str], cells: dict[tuple[str, str], Cell], key: str) -> dict[str, int]:
    scored = [(statistics.fmean(cells[a, key].adv), a) for a in agents if (a, key) in cells and cells[a, key].adv]
    scored.sort(key=lambda x: (-x[0], x[1]))
    return {a: i + 1 for i, (_, a) in enumerate(scored)}


def report(rows: list[dict], agents: list[str], *, domains: list[str], price_domains: int, reps: int, steps: int,
           seconds: float, not_run: int) -> str:
    cells = aggregate(rows, agents)
    errors: dict[str, int] = defaultdict(int)
    error_text: dict[str, str] = {}
    for row in rows:
        if row["error"]:
            errors[row["erred"]] += 1
            error_text.setdefault(row["erred"], row["error"])
    timeouts = sum(1 for r in rows if r["timeout"])
    rank = _ranks(agents, cells, "all")
    seller_rank, buyer_rank = _ranks(agents, cells, "price-seller"), _ranks(agents, cells, "price-buyer")
    n_sellers, n_buyers = len(seller_rank), len(buyer_rank)

    def m(agent: str, key: str, attr: str = "adv") -> float | None:
        cell = cells.get((agent, key))
        return _mean(getattr(cell, attr)) if cell is not None else None

    lines = []
    lines.append(f"field: {len(agents)} agents; {len(domains)} ANAC domains + {price_domains} price domains; "
                 f"{reps} reps; {steps} steps; {len(rows)} negotiations run, {not_run} not run; {seconds:.0f} s")
    lines.append("ranked by mean advantage over the reserved value (0 on disagreement), all negotiations; "
                 "price seats and ANAC sides after the bar (rank among the agents in that seat)")
    head = (f"{'rk':>3} {'agent':<25} {'origin':<8} {'n':>5} {'adv':>6} {'agree':>6} {'nash':>6} {'pareto':>6} | "
            f"{'sell adv':>8} {'rk':>3} {'buy adv':>8} {'rk':>3} | {'anac adv':>8} {'1st':>6} {'2nd':>6} "
            f"{'agree':>6} {'pareto':>6} {'par/deal':>8} | {'err':>4}")
    lines.append(head)
    lines.append("-" * len(head))
    ordered = sorted(agents, key=lambda a: rank.get(a, len(agents) + 1))
    for agent in ordered:
        c = cells.get((agent, "all"))
        n = len(c.adv) if c else 0
        lines.append(
            f"{rank.get(agent, '-'):>3} {agent:<25} {ORIGIN[agent]:<8} {n:>5} {_fmt(m(agent, 'all')):>6} "
            f"{_fmt(m(agent, 'all', 'agree')):>6} {_fmt(m(agent, 'all', 'nash')):>6} "
            f"{_fmt(m(agent, 'all', 'pareto')):>6} | {_fmt(m(agent, 'price-seller')):>8} "
            f"{seller_rank.get(agent, '-'):>3} {_fmt(m(agent, 'price-buyer')):>8} {buyer_rank.get(agent, '-'):>3} | "
            f"{_fmt(m(agent, 'anac')):>8} {_fmt(m(agent, 'anac-first')):>6} {_fmt(m(agent, 'anac-second')):>6} "
            f"{_fmt(m(agent, 'anac', 'agree')):>6} {_fmt(m(agent, 'anac', 'pareto')):>6} "
            f"{_fmt(m(agent, 'anac', 'pareto_deals')):>8} | {errors.get(agent, 0):>4}")
    lines.append("")
    lines.append("haggler's entrants by opponent group (all domains; ANAC domains in brackets): own adv / agreement / "
                 "opponent's adv")
    groups = [g for g in ("anac", "textbook", "haggler") if any(ORIGIN[a] == g for a in agents)]
    lines.append(f"  {'agent':<25} " + " ".join(f"{'vs ' + g:>34}" for g in groups))
    for agent in ordered:
        if ORIGIN[agent] != "haggler":
            continue
        parts = []
        for g in groups:
            parts.append(f"{_fmt(m(agent, 'vs-' + g))}/{_fmt(m(agent, 'vs-' + g, 'agree'), '.2f')}/"
                         f"{_fmt(m(agent, 'vs-' + g, 'opp_adv'))} [{_fmt(m(agent, 'anac-vs-' + g))}/"
                         f"{_fmt(m(agent, 'anac-vs-' + g, 'agree'), '.2f')}]")
        lines.append(f"  {agent:<25} " + " ".join(f"{p:>34}" for p in parts))
    if errors:
        lines.append("")
        lines.append("errors (negotiations left out of every metric):")
        for who, count in sorted(errors.items(), key=lambda x: -x[1]):
            lines.append(f"  {who}: {count}  e.g. {error_text[who][:160]}")
    if timeouts:
        lines.append(f"timeouts (hidden wall-clock limit, counted as disagreements): {timeouts}")

    ours = [a for a in ordered if ORIGIN[a] == "haggler" and a in rank]
    anac = [a for a in ordered if ORIGIN[a] == "anac" and a in rank]
    best = ours[0] if ours else None
    best_anac = anac[0] if anac else None
    advs = [m(a, "all") for a in agents if m(a, "all") is not None]
    agrees = [m(a, "all", "agree") for a in agents if m(a, "all", "agree") is not None]
    our_agrees = [m(a, "all", "agree") for a in ours if m(a, "all", "agree") is not None]

    def seat_rank(agent: str, ranks: dict[str, int], n: int) -> str:
        return f"{ranks[agent]}/{n}" if agent in ranks else "na"

    result = (
        f"RESULT best_haggler={best or 'na'} best_haggler_rank={rank.get(best, 'na') if best else 'na'} "
        f"best_haggler_adv={_fmt(m(best, 'all') if best else None, '.4f')} best_anac={best_anac or 'na'} "
        f"best_anac_adv={_fmt(m(best_anac, 'all') if best_anac else None, '.4f')} "
        f"field_median_adv={_fmt(statistics.median(advs) if advs else None, '.4f')} "
        f"field_median_agreement={_fmt(statistics.median(agrees) if agrees else None, '.4f')} "
        f"haggler_median_agreement={_fmt(statistics.median(our_agrees) if our_agrees else None, '.4f')} "
        f"store_merchant_seller_rank={seat_rank(HAGGLER_SELLER, seller_rank, n_sellers)} "
        f"store_merchant_seller_adv={_fmt(m(HAGGLER_SELLER, 'price-seller'), '.4f')} "
        f"default_shopper_buyer_rank={seat_rank(HAGGLER_BUYER, buyer_rank, n_buyers)} "
        f"default_shopper_buyer_adv={_fmt(m(HAGGLER_BUYER, 'price-buyer'), '.4f')} "
        f"agents={len(agents)} anac_agents={sum(ORIGIN[a] == 'anac' for a in agents)} domains={len(domains)} "
        f"price_domains={price_domains} reps={reps} steps={steps} negotiations={len(rows)} "
        f"errors={sum(errors.values())} timeouts={timeouts} not_run={not_run} seconds={seconds:.0f}"
    )
    lines.append(result)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", required=True,
                        help="the ANAC domain folder (tests/data/scenarios/anac of NegMAS's repository)")
    parser.add_argument("--domain-names", default=None,
                        help=f"comma-separated domains under --domains (default: {','.join(DEFAULT_DOMAINS)})")
    parser.add_argument("--reps", type=int, default=5, help="repetitions (default 5)")
    parser.add_argument("--steps", type=int, default=100, help="deadline in SAO steps (default 100)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--agents", default=None, help="comma-separated subset of the field (default: all)")
    parser.add_argument("--price-zopa", type=int, default=3,
                        help="price domains with a zone of agreement per repetition (default 3)")
    parser.add_argument("--price-nozopa", type=int, default=1,
                        help="price domains without one per repetition (default 1)")
    parser.add_argument("--negotiation-timeout", type=float, default=60.0,
                        help="hidden wall-clock limit of one negotiation, seconds (default 60)")
    parser.add_argument("--max-seconds", type=float, default=3600.0,
                        help="stop the run after this long and report what did not run (default 3600)")
    parser.add_argument("--quick", action="store_true",
                        help="a smoke run: 8 agents, 2 ANAC domains, 1 rep, 40 steps, 1 + 1 price domains")
    parser.add_argument("--out", default=None, help="write the per-negotiation rows to this CSV file")
    args = parser.parse_args(argv)

    if import_negmas() is None:
        print("NegMAS is not importable: install the benchmark-only extra, pip install -e '.[anac]'",
              file=sys.stderr)
        return 2
    field = list(HAGGLER_AGENTS + ANAC_AGENTS + TEXTBOOK_AGENTS)
    domains = list(DEFAULT_DOMAINS)
    if args.quick:
        field, domains = list(QUICK_AGENTS), list(QUICK_DOMAINS)
        args.reps, args.steps, args.price_zopa, args.price_nozopa = 1, 40, 1, 1
    if args.agents:
        field = [a.strip() for a in args.agents.split(",") if a.strip()]
    if args.domain_names:
        domains = [d.strip() for d in args.domain_names.split(",") if d.strip()]
    unknown = [a for a in field if a not in ORIGIN]
    if unknown:
        parser.error(f"unknown agents {unknown}; the field: {', '.join(ORIGIN)}")
    missing = [d for d in domains if not (Path(args.domains) / d).is_dir()]
    if missing:
        parser.error(f"domains not found under {args.domains}: {missing}")

    tasks = build_tasks(field, domains, args.reps, args.price_zopa, args.price_nozopa)
    config = Config(str(Path(args.domains).resolve()), args.steps, args.seed, args.negotiation_timeout)
    print(f"{len(tasks)} negotiations: {len(field)} agents, {len(domains)} ANAC domains, "
          f"{args.reps * (args.price_zopa + args.price_nozopa)} price domains, {args.reps} reps, {args.steps} steps, "
          f"{args.workers} workers", flush=True)
    started = time.perf_counter()
    rows: list[dict] = []
    ctx = multiprocessing.get_context("fork" if sys.platform.startswith("linux") else "spawn")
    pool = ctx.Pool(args.workers, initializer=_init_worker, initargs=(config,), maxtasksperchild=2000)
    try:
        # Chunks of a few negotiations (fewer round trips); imap_unordered's own chunking would
        # give an iterator without a timeout.
        chunks = [tasks[i:i + CHUNK] for i in range(0, len(tasks), CHUNK)]
        results = pool.imap_unordered(run_chunk, chunks)
        last_note = started
        done = 0
        while done < len(chunks):
            remaining = args.max_seconds - (time.perf_counter() - started)
            if remaining <= 0:
                print(f"time is up after {len(rows)} negotiations", flush=True)
                break
            try:
                rows.extend(results.next(timeout=remaining))
                done += 1
            except multiprocessing.TimeoutError:
                print(f"time is up after {len(rows)} negotiations", flush=True)
                break
            now = time.perf_counter()
            if now - last_note > 60:
                last_note = now
                print(f"  {len(rows)}/{len(tasks)} after {now - started:.0f} s", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    except Exception:  # noqa: BLE001 - a failing worker pool ends the run with what it has
        traceback.print_exc()
    finally:
        pool.terminate()
        pool.join()
    seconds = time.perf_counter() - started
    rows.sort(key=lambda r: r["index"])
    if args.out:
        with open(args.out, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]) if rows else ["index"])
            writer.writeheader()
            writer.writerows(rows)
    print(report(rows, field, domains=domains, price_domains=args.reps * (args.price_zopa + args.price_nozopa),
                 reps=args.reps, steps=args.steps, seconds=seconds, not_run=len(tasks) - len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
