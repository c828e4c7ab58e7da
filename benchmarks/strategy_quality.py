"""Negotiation quality of the store's default strategies against a panel of shopper/seller strategies.

Seller seat: ``store-merchant`` (the store's default merchant adapter) against a panel of buyer
strategies: ours, and NegMAS's four negotiators when NegMAS is importable; buyer seat:
``default-shopper`` against the same kind of panel of sellers. The scenario set is seeded
single-issue scenarios (``haggler.lab.generate.single_issue``), ``--n`` with a zone of agreement
(ZOPA) and ``--n-nozopa`` without. Two of our strategies meet through ``run_alternating`` (seller
first); a NegMAS negotiator on either side makes it a run of NegMAS's SAO mechanism.

Per opponent it prints the agreement rate where a ZOPA exists, two shares of the zone for our
side, and violations (deals past the seat's own reservation — below its floor for a seller, above
its budget for a buyer: must be 0):

* ``share`` — the mean share over deals (seller: (price - floor) / (budget - floor); buyer: 1 minus
  that). It says how well a side does *when it closes*, so it flatters a negotiator that closes
  only the easy deals: one that walks away from nine scenarios in ten and wins the tenth scores 1.0.
* ``exp`` (expected share) — the mean over every ZOPA scenario, a no-deal counting as 0: the share
  of the available surplus a side actually takes home. It rewards closing and winning together.

The agreement goal is printed with its ceiling: the agreement of a side that offers its
reservation from its second offer on and takes anything at least as good, against the same panel.
No side that stays within its reservation and list price and never takes back a concession closes
a deal that one misses (a tit-for-tat buyer only mirrors what the seller concedes).

Goals: violations 0; agreement >= 95% on ZOPA scenarios, hardliner opponents excluded; and our
share higher than each NegMAS negotiator (BoulwareTB, ConcederTB, NaiveTitForTat, Aspiration)
achieves in the same seat against the same panel — reported for both share definitions.

NegMAS is optional and benchmark-only (AGPL: ``src/`` never imports it, it is not a project
dependency). When ``import negmas`` works — ``HAGGLER_NEGMAS_PATH`` is prepended to ``sys.path`` if
set, e.g. a ``pip install --target`` directory — each NegMAS negotiator joins both panels and
takes each seat against the panel through NegMAS's ``SAOMechanism``; our strategies in such a run
enter through the adapter shared with ``anac.py`` (``negmas_bridge``): a thin ``SAONegotiator``
subclass that builds a ``DeciderView`` from the offers so far and passes every decision through
``guard``. NegMAS prices are whole dollars from 30% of list
price up to list price (a small discrete outcome space: like ours, a NegMAS seller never asks more
than list, and the space tells neither side the other's reservation); our deciders' offers are
rounded to whole dollars towards their own side. Without NegMAS the comparison is "na".

Last line::

    RESULT seller_violations=.. seller_agreement_zopa=.. seller_share=.. buyer_violations=..
    buyer_agreement_zopa=.. buyer_share=.. negmas=yes|na seller_share_vs_negmas_min=..|na
    buyer_share_vs_negmas_min=..|na

    seller_expected_share=.. buyer_expected_share=.. seller_expected_share_vs_negmas_min=..|na
    buyer_expected_share_vs_negmas_min=..|na seller_agreement_ceiling=.. buyer_agreement_ceiling=..

(one line; ``*_share_vs_negmas_min`` is our mean share minus the best NegMAS negotiator's mean share
in that seat, both over all deals against the panel; ``*_expected_share_vs_negmas_min`` the same
for the expected share, over all ZOPA scenarios against the panel: > 0 means the goal is met;
``*_agreement_ceiling`` the agreement ceilings).

    .venv/bin/python benchmarks/strategy_quality.py [--n 100] [--n-nozopa 40] [--seed 1] [--negmas-n N]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from haggler.agents.decider import ACCEPT, BUYER, SELLER, Decider, DeciderView, Decision
from haggler.agents.strategies import STRATEGIES, best_price
from haggler.engine import Terms
from haggler.lab.alternating import run_alternating
from haggler.lab.generate import single_issue
from haggler.lab.scenario import Scenario
from negmas_bridge import PriceDomain, haggler_negotiator, import_negmas, price_ufuns

OUR_SELLER = "store-merchant"
OUR_BUYER = "default-shopper"
_CLASSIC = ["boulware", "linear", "conceder", "tit-for-tat-relative", "tit-for-tat-absolute", "hardliner",
            "accept-first"]
BUYER_PANEL = _CLASSIC + [OUR_BUYER]
SELLER_PANEL = _CLASSIC + [OUR_SELLER]
#: Opponents excluded from the agreement goal: they never concede.
HARDLINERS = {"hardliner"}
AGREEMENT_GOAL = 0.95
NEGMAS_NEGOTIATORS = ("BoulwareTBNegotiator", "ConcederTBNegotiator", "NaiveTitForTatNegotiator",
                      "AspirationNegotiator")
#: Panel and player names of NegMAS's negotiators: ``negmas-BoulwareTBNegotiator`` and so on.
NEGMAS = "negmas-"
#: Plays one negotiation through NegMAS: (scenario, seller name, buyer name) -> price or None.
NegmasPlay = Callable[[Scenario, str, str], "int | None"]


class _AtReservation:
    """The agreement ceiling: opens at its best price, then offers its reservation and takes
    any offer at least as good. No strategy that stays within its reservation (and never takes
    back a concession) closes a deal this one misses against the same opponent."""

    def decide(self, view: DeciderView) -> Decision:
        reservation, theirs = view.reservation_cents, view.their_offers
        if theirs and (theirs[-1].price_cents >= reservation if view.role == SELLER
                       else theirs[-1].price_cents <= reservation):
            return ACCEPT
        return Terms(reservation if view.my_offers else best_price(view), view.currency)


CEILING = "at-reservation"
#: Every player by name: the lab's strategies and the ceiling.
PLAYERS: dict[str, Callable[[], Decider]] = {**STRATEGIES, CEILING: _AtReservation}


@dataclass
class Tally:
    """One (player, seat, opponent) cell."""

    zopa: int = 0
    zopa_deals: int = 0
    deals: int = 0
    violations: int = 0
    shares: list[float] = field(default_factory=list)
    #: One entry per ZOPA scenario: the share of the zone taken, 0 for no deal.
    expected: list[float] = field(default_factory=list)

    def add(self, scenario: Scenario, price_cents: int | None, seat: str) -> None:
        has_zopa = scenario.has_zopa
        self.zopa += has_zopa
        if price_cents is None:
            if has_zopa:
                self.expected.append(0.0)
            return
        self.deals += 1
        self.zopa_deals += has_zopa
        floor, budget = scenario.seller_reservation_cents, scenario.buyer_reservation_cents
        # The seat's own reservation: a NegMAS opponent that sells below its own floor is not a
        # violation of ours.
        if (price_cents < floor) if seat == SELLER else (price_cents > budget):
            self.violations += 1
        if budget > floor:
            share = (price_cents - floor) / (budget - floor)
            mine = share if seat == SELLER else 1.0 - share
            self.shares.append(mine)
            if has_zopa:
                self.expected.append(mine)

    @property
    def agreement(self) -> float | None:
        return self.zopa_deals / self.zopa if self.zopa else None

    @property
    def share(self) -> float | None:
        return statistics.fmean(self.shares) if self.shares else None

    @property
    def expected_share(self) -> float | None:
        return statistics.fmean(self.expected) if self.expected else None


def _fmt(x: float | None, spec: str = ".4f") -> str:
    return "na" if x is None else format(x, spec)


@dataclass(frozen=True)
class Summary:
    """One player in one seat against the whole panel."""

    violations: int
    #: Agreement on ZOPA scenarios, hardliners excluded.
    agreement: float | None
    #: Mean share over all deals.
    share: float | None
    #: Mean share over all ZOPA scenarios, a no-deal counting as 0.
    expected_share: float | None


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _summary(cells: dict[str, Tally]) -> Summary:
    violations = sum(c.violations for c in cells.values())
    zopa = sum(c.zopa for o, c in cells.items() if o not in HARDLINERS)
    zdeals = sum(c.zopa_deals for o, c in cells.items() if o not in HARDLINERS)
    return Summary(violations, zdeals / zopa if zopa else None, _mean([s for c in cells.values() for s in c.shares]),
                   _mean([s for c in cells.values() for s in c.expected]))


def _margin(ours: float | None, best: float | None) -> float | None:
    """Ours minus the best NegMAS figure (> 0: the goal is met), or None when either is missing."""
    return None if ours is None or best is None else ours - best


def panel(seat: str, nm: "NegmasPlay | None") -> list[str]:
    """The opponents of the player in ``seat``: our strategies, and NegMAS's negotiators when
    NegMAS is importable."""
    ours = BUYER_PANEL if seat == SELLER else SELLER_PANEL
    return ours + ([NEGMAS + name for name in NEGMAS_NEGOTIATORS] if nm is not None else [])


def play(nm: "NegmasPlay | None", scenario: Scenario, seller: str, buyer: str) -> int | None:
    """The price ``seller`` and ``buyer`` (strategy names, ``negmas-…`` for NegMAS's) agree on
    in ``scenario``, None for no deal: through our engine when both are ours, else through
    NegMAS's SAO mechanism."""
    if seller.startswith(NEGMAS) or buyer.startswith(NEGMAS):
        assert nm is not None
        return nm(scenario, seller, buyer)
    result = run_alternating(scenario, PLAYERS[seller](), PLAYERS[buyer]())
    return result.terms.price_cents if result.agreed and result.terms else None


def run_seat(nm: "NegmasPlay | None", scenarios: list[Scenario], seat: str, player: str) -> dict[str, Tally]:
    """``player`` in ``seat`` against the whole panel: one tally per opponent."""
    cells: dict[str, Tally] = {}
    for opponent in panel(seat, nm):
        cell = cells[opponent] = Tally()
        seller, buyer = (player, opponent) if seat == SELLER else (opponent, player)
        for scenario in scenarios:
            cell.add(scenario, play(nm, scenario, seller, buyer), seat)
    return cells


def print_table(title: str, cells: dict[str, Tally]) -> None:
    print(title)
    print(f"  {'opponent':<22} {'zopa':>5} {'agree%':>7} {'deals':>6} {'share':>7} {'exp':>7} {'viol':>5}")
    for opponent, c in cells.items():
        agreement = _fmt(None if c.agreement is None else 100 * c.agreement, ".1f")
        print(f"  {opponent:<22} {c.zopa:>5} {agreement:>7} {c.deals:>6} {_fmt(c.share):>7} "
              f"{_fmt(c.expected_share):>7} {c.violations:>5}")


# -- NegMAS (optional) ---------------------------------------------------------------------------------


def load_negmas() -> "NegmasPlay | None":
    """A function playing one negotiation through NegMAS's SAO mechanism (see :func:`play`), or
    None when NegMAS is not importable. Our strategies enter it through the shared adapter of
    ``negmas_bridge`` (a price axis: outcomes are whole dollars)."""
    negmas = import_negmas()
    if negmas is None:
        return None
    from negmas import SAOMechanism
    import negmas.sao as sao

    classes = {NEGMAS + name: getattr(sao, name) for name in NEGMAS_NEGOTIATORS}

    def sao_play(s: Scenario, seller: str, buyer: str) -> int | None:
        domain = PriceDomain.of(s)
        issues, seller_u, buyer_u = price_ufuns(domain)
        # One SAO step is one offer (or response) of one side: two per haggler round.
        mechanism = SAOMechanism(issues=issues, n_steps=2 * s.max_rounds, one_offer_per_step=True)

        def negotiator(name: str, role: str):
            if name in classes:
                return classes[name](name=role)
            return haggler_negotiator(PLAYERS[name](), domain.axis(role), s.max_rounds, currency=s.currency,
                                      name=role)

        mechanism.add(negotiator(seller, SELLER), ufun=seller_u)   # the seller moves first, as in run_alternating
        mechanism.add(negotiator(buyer, BUYER), ufun=buyer_u)
        agreement = mechanism.run().agreement
        return int(agreement[0]) * 100 if agreement is not None else None

    return sao_play


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100, help="scenarios with a zone of agreement (default 100)")
    parser.add_argument("--n-nozopa", type=int, default=40, help="scenarios without one (default 40)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--negmas-n", type=int, default=None,
                        help="run NegMAS on the first N ZOPA + N*n-nozopa/n no-ZOPA scenarios (default: all)")
    args = parser.parse_args()
    zopa = list(single_issue(args.n, seed=args.seed, zopa=True, prefix="q-zopa"))
    nozopa = list(single_issue(args.n_nozopa, seed=args.seed, zopa=False, prefix="q-nozopa"))
    scenarios = zopa + nozopa
    print(f"scenarios: {len(zopa)} with a zone of agreement, {len(nozopa)} without (seed {args.seed}, "
          f"{scenarios[0].max_rounds if scenarios else 0} rounds)")

    nm = load_negmas()
    started = time.perf_counter()
    seller_cells = run_seat(nm, scenarios, SELLER, OUR_SELLER)
    buyer_cells = run_seat(nm, scenarios, BUYER, OUR_BUYER)
    print_table(f"seller seat: {OUR_SELLER} vs buyer panel", seller_cells)
    print_table(f"buyer seat: {OUR_BUYER} vs seller panel", buyer_cells)
    ours = {SELLER: _summary(seller_cells), BUYER: _summary(buyer_cells)}
    ceiling = {seat: _summary(run_seat(nm, scenarios, seat, CEILING)).agreement for seat in (SELLER, BUYER)}
    print(f"ours: {time.perf_counter() - started:.1f} s")

    def met(ok: bool | None) -> str:
        return "na" if ok is None else ("met" if ok else "NOT met")

    for seat in (SELLER, BUYER):
        print(f"goal {seat} violations == 0: {ours[seat].violations} ({met(ours[seat].violations == 0)})")
    for seat in (SELLER, BUYER):
        agree = ours[seat].agreement
        print(f"goal {seat} agreement on ZOPA (excl. hardliner) >= 95%: {_fmt(agree)} "
              f"({met(None if agree is None else agree >= AGREEMENT_GOAL)}; ceiling, conceding all at once: "
              f"{_fmt(ceiling[seat])})")

    vs: dict[tuple[str, str], float | None] = {(seat, kind): None for seat in (SELLER, BUYER)
                                               for kind in ("share", "expected_share")}
    if nm is None:
        print("negmas: not importable (optional, benchmark-only; set HAGGLER_NEGMAS_PATH): comparison na")
    else:
        if args.negmas_n is not None:
            k = args.negmas_n
            sub = zopa[:k] + nozopa[: (k * len(nozopa)) // max(1, len(zopa))]
            # Compare like with like: our side on the same subset.
            ours_sub = {seat: _summary(run_seat(nm, sub, seat, OUR_SELLER if seat == SELLER else OUR_BUYER))
                        for seat in (SELLER, BUYER)}
        else:
            sub, ours_sub = scenarios, ours
        started = time.perf_counter()
        best: dict[tuple[str, str], float | None] = dict(vs)
        for seat in (SELLER, BUYER):
            print(f"negmas, {seat} seat vs the panel ({len(sub)} scenarios): share over deals / expected share "
                  f"over ZOPA / agreement on ZOPA excl. hardliner / violations")
            for name in NEGMAS_NEGOTIATORS:
                cells = run_seat(nm, sub, seat, NEGMAS + name)
                summary = _summary(cells)
                per = " ".join(f"{o}={_fmt(c.share, '.2f')}/{_fmt(c.expected_share, '.2f')}"
                               for o, c in cells.items())
                print(f"  {name:<26} share={_fmt(summary.share)} exp={_fmt(summary.expected_share)} "
                      f"agree={_fmt(summary.agreement)} viol={summary.violations}  [share/exp: {per}]")
                for kind in ("share", "expected_share"):
                    value = getattr(summary, kind)
                    if value is not None and (best[seat, kind] is None or value > best[seat, kind]):
                        best[seat, kind] = value
        print(f"negmas: {time.perf_counter() - started:.1f} s")
        for seat in (SELLER, BUYER):
            for kind, label in (("share", "share over deals"), ("expected_share", "expected share")):
                mine = getattr(ours_sub[seat], kind)
                vs[seat, kind] = _margin(mine, best[seat, kind])
                print(f"goal {seat} {label} > every NegMAS negotiator's: ours {_fmt(mine)} vs best NegMAS "
                      f"{_fmt(best[seat, kind])} ({met(None if vs[seat, kind] is None else vs[seat, kind] > 0)})")
    s, b = ours[SELLER], ours[BUYER]
    print(f"RESULT seller_violations={s.violations} seller_agreement_zopa={_fmt(s.agreement)} "
          f"seller_share={_fmt(s.share)} buyer_violations={b.violations} buyer_agreement_zopa={_fmt(b.agreement)} "
          f"buyer_share={_fmt(b.share)} negmas={'na' if nm is None else 'yes'} "
          f"seller_share_vs_negmas_min={_fmt(vs[SELLER, 'share'])} buyer_share_vs_negmas_min={_fmt(vs[BUYER, 'share'])} "
          f"seller_expected_share={_fmt(s.expected_share)} buyer_expected_share={_fmt(b.expected_share)} "
          f"seller_expected_share_vs_negmas_min={_fmt(vs[SELLER, 'expected_share'])} "
          f"buyer_expected_share_vs_negmas_min={_fmt(vs[BUYER, 'expected_share'])} "
          f"seller_agreement_ceiling={_fmt(ceiling[SELLER])} buyer_agreement_ceiling={_fmt(ceiling[BUYER])}")

if __name__ == "__main__":
    main()
