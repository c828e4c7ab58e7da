"""Negotiation quality of the store's default strategies against a panel of shopper/seller strategies.

Seller seat: ``store-merchant`` (the store's default merchant adapter) against a panel of our buyer
strategies; buyer seat: ``default-shopper`` against a panel of our seller strategies. The scenario
set is seeded single-issue scenarios (``haggler.lab.generate.single_issue``), ``--n`` with a zone of
agreement (ZOPA) and ``--n-nozopa`` without, all run through ``run_alternating`` (seller first).

Per opponent it prints the agreement rate where a ZOPA exists, our side's mean share of the zone
over deals (seller: (price - floor) / (budget - floor); buyer: 1 minus that) and violations (deals
below the floor or above the budget: must be 0). Goals: violations 0; agreement >= 95% on ZOPA
scenarios, hardliner opponents excluded; and our share higher than each NegMAS negotiator
(BoulwareTB, ConcederTB, NaiveTitForTat, Aspiration) achieves in the same seat against the same
panel.

NegMAS is optional and benchmark-only (AGPL: ``src/`` never imports it, it is not a project
dependency). When ``import negmas`` works — ``HAGGLER_NEGMAS_PATH`` is prepended to ``sys.path`` if
set, e.g. a ``pip install --target`` directory — each NegMAS negotiator plays our panel through
NegMAS's ``SAOMechanism``; the panel strategies are wrapped in a thin ``SAONegotiator`` subclass
that builds a ``DeciderView`` from the offers so far and passes every decision through ``guard``.
NegMAS prices are whole dollars (a small discrete outcome space); our deciders' offers are rounded
to whole dollars towards their own side. Without NegMAS the comparison is "na".

Last line::

    RESULT seller_violations=.. seller_agreement_zopa=.. seller_share=.. buyer_violations=..
    buyer_agreement_zopa=.. buyer_share=.. negmas=yes|na seller_share_vs_negmas_min=..|na
    buyer_share_vs_negmas_min=..|na

(one line; ``*_share_vs_negmas_min`` is our mean share minus the best NegMAS negotiator's mean share
in that seat, both over all deals against the panel: > 0 means the goal is met).

    .venv/bin/python benchmarks/strategy_quality.py [--n 100] [--n-nozopa 40] [--seed 1] [--negmas-n N]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field

if os.environ.get("HAGGLER_NEGMAS_PATH"):
    sys.path.insert(0, os.environ["HAGGLER_NEGMAS_PATH"])

from haggler.agents.decider import ACCEPT, BUYER, REJECT, SELLER, DeciderView, guard
from haggler.agents.strategies import STRATEGIES
from haggler.engine import Terms
from haggler.lab.alternating import run_alternating
from haggler.lab.generate import single_issue
from haggler.lab.scenario import Scenario

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


@dataclass
class Tally:
    """One (player, seat, opponent) cell."""

    zopa: int = 0
    zopa_deals: int = 0
    deals: int = 0
    violations: int = 0
    shares: list[float] = field(default_factory=list)

    def add(self, scenario: Scenario, price_cents: int | None, seat: str) -> None:
        has_zopa = scenario.has_zopa
        self.zopa += has_zopa
        if price_cents is None:
            return
        self.deals += 1
        self.zopa_deals += has_zopa
        floor, budget = scenario.seller_reservation_cents, scenario.buyer_reservation_cents
        if price_cents < floor or price_cents > budget:
            self.violations += 1
        if budget > floor:
            share = (price_cents - floor) / (budget - floor)
            self.shares.append(share if seat == SELLER else 1.0 - share)

    @property
    def agreement(self) -> float | None:
        return self.zopa_deals / self.zopa if self.zopa else None

    @property
    def share(self) -> float | None:
        return statistics.fmean(self.shares) if self.shares else None


def _fmt(x: float | None, spec: str = ".4f") -> str:
    return "na" if x is None else format(x, spec)


def _summary(cells: dict[str, Tally]) -> tuple[int, float | None, float | None]:
    """(violations, agreement on ZOPA excluding hardliners, mean share over all deals)."""
    violations = sum(c.violations for c in cells.values())
    zopa = sum(c.zopa for o, c in cells.items() if o not in HARDLINERS)
    zdeals = sum(c.zopa_deals for o, c in cells.items() if o not in HARDLINERS)
    shares = [s for c in cells.values() for s in c.shares]
    return violations, (zdeals / zopa if zopa else None), (statistics.fmean(shares) if shares else None)


def run_ours(scenarios: list[Scenario], seat: str) -> dict[str, Tally]:
    ours, panel = (OUR_SELLER, BUYER_PANEL) if seat == SELLER else (OUR_BUYER, SELLER_PANEL)
    cells: dict[str, Tally] = {}
    for opponent in panel:
        cell = cells[opponent] = Tally()
        for scenario in scenarios:
            me, them = STRATEGIES[ours](), STRATEGIES[opponent]()
            seller, buyer = (me, them) if seat == SELLER else (them, me)
            result = run_alternating(scenario, seller, buyer)
            cell.add(scenario, result.terms.price_cents if result.agreed and result.terms else None, seat)
    return cells


def print_table(title: str, cells: dict[str, Tally]) -> None:
    print(title)
    print(f"  {'opponent':<22} {'zopa':>5} {'agree%':>7} {'deals':>6} {'share':>7} {'viol':>5}")
    for opponent, c in cells.items():
        agreement = _fmt(None if c.agreement is None else 100 * c.agreement, ".1f")
        print(f"  {opponent:<22} {c.zopa:>5} {agreement:>7} {c.deals:>6} {_fmt(c.share):>7} {c.violations:>5}")


# -- NegMAS (optional) ---------------------------------------------------------------------------------


def load_negmas():
    """The NegMAS pieces this benchmark needs, or None when NegMAS is not importable."""
    try:
        import negmas  # noqa: F401
        from negmas import SAOMechanism, make_issue
        from negmas.preferences import LinearAdditiveUtilityFunction
        from negmas.sao import ResponseType, SAONegotiator
        import negmas.sao as sao

        classes = {name: getattr(sao, name) for name in NEGMAS_NEGOTIATORS}
    except Exception:  # noqa: BLE001 - any import problem means "not available"
        return None
    import warnings

    warnings.filterwarnings("ignore")

    class HagglerNegotiator(SAONegotiator):
        """One of our deciders behind NegMAS's SAO interface: outcomes are ``(dollars,)``."""

        def __init__(self, decider, role: str, scenario: Scenario, lo: int, hi: int, **kwargs) -> None:
            super().__init__(**kwargs)
            self._h_decider, self._h_role, self._h_scenario = decider, role, scenario
            self._h_lo, self._h_hi = lo, hi
            self._h_reservation = (scenario.seller_reservation_cents if role == SELLER
                                 else scenario.buyer_reservation_cents)
            self._h_mine: list[Terms] = []
            self._h_theirs: list[Terms] = []
            self._h_pending: Terms | None = None

        def _decide(self):
            s = self._h_scenario
            view = DeciderView(self._h_role, self._h_reservation, s.list_price_cents, len(self._h_mine), s.max_rounds,
                               tuple(self._h_mine), tuple(self._h_theirs), {}, s.currency)
            return guard(self._h_decider.decide(view), view)

        def respond(self, state, source=None):
            offer = state.current_offer
            if offer is None:
                return ResponseType.REJECT_OFFER
            self._h_theirs.append(Terms(int(offer[0]) * 100, self._h_scenario.currency))
            decision = self._decide()
            if decision is ACCEPT:
                return ResponseType.ACCEPT_OFFER
            if decision is REJECT:
                return ResponseType.END_NEGOTIATION
            self._h_pending = decision
            return ResponseType.REJECT_OFFER

        def propose(self, state, dest=None):
            terms, self._h_pending = self._h_pending, None
            if terms is None:
                decision = self._decide()
                if not isinstance(decision, Terms):
                    return None
                terms = decision
            # Whole dollars, rounded towards this side (never past its reservation).
            if self._h_role == SELLER:
                dollars = max(math.ceil(terms.price_cents / 100), math.ceil(self._h_reservation / 100))
            else:
                dollars = min(terms.price_cents // 100, self._h_reservation // 100)
            dollars = min(max(dollars, self._h_lo), self._h_hi)
            self._h_mine.append(Terms(dollars * 100, self._h_scenario.currency))
            return (dollars,)

    return SAOMechanism, make_issue, LinearAdditiveUtilityFunction, HagglerNegotiator, classes


def run_negmas_seat(nm, negotiator: str, scenarios: list[Scenario], seat: str) -> dict[str, Tally]:
    SAOMechanism, make_issue, LUFun, HagglerNegotiator, classes = nm
    panel = BUYER_PANEL if seat == SELLER else SELLER_PANEL
    cells: dict[str, Tally] = {}
    for opponent in panel:
        cell = cells[opponent] = Tally()
        for s in scenarios:
            lo = max(1, int(s.list_price_cents * 0.3) // 100)
            hi = max(s.list_price_cents, s.buyer_reservation_cents, s.seller_reservation_cents) // 100 + 1
            issues = [make_issue(values=(lo, hi), name="price")]
            span = float(hi - lo)
            seller_u = LUFun(values={"price": lambda x, lo=lo, span=span: (x - lo) / span}, weights={"price": 1.0},
                             issues=issues, reserved_value=(s.seller_reservation_cents / 100 - lo) / span)
            buyer_u = LUFun(values={"price": lambda x, hi=hi, span=span: (hi - x) / span}, weights={"price": 1.0},
                            issues=issues, reserved_value=(hi - s.buyer_reservation_cents / 100) / span)
            # One SAO step is one offer (or response) of one side: two per haggler round.
            mechanism = SAOMechanism(issues=issues, n_steps=2 * s.max_rounds, one_offer_per_step=True)
            them_role = BUYER if seat == SELLER else SELLER
            mine = classes[negotiator](name=seat)
            theirs = HagglerNegotiator(STRATEGIES[opponent](), them_role, s, lo, hi, name=them_role)
            seller, buyer = (mine, theirs) if seat == SELLER else (theirs, mine)
            mechanism.add(seller, ufun=seller_u)   # the seller moves first, as in run_alternating
            mechanism.add(buyer, ufun=buyer_u)
            state = mechanism.run()
            agreement = state.agreement
            cell.add(s, int(agreement[0]) * 100 if agreement is not None else None, seat)
    return cells


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

    started = time.perf_counter()
    seller_cells = run_ours(scenarios, SELLER)
    buyer_cells = run_ours(scenarios, BUYER)
    print_table(f"seller seat: {OUR_SELLER} vs buyer panel", seller_cells)
    print_table(f"buyer seat: {OUR_BUYER} vs seller panel", buyer_cells)
    s_viol, s_agree, s_share = _summary(seller_cells)
    b_viol, b_agree, b_share = _summary(buyer_cells)
    print(f"ours: {time.perf_counter() - started:.1f} s")

    def met(ok: bool | None) -> str:
        return "na" if ok is None else ("met" if ok else "NOT met")

    print(f"goal seller violations == 0: {s_viol} ({met(s_viol == 0)})")
    print(f"goal buyer violations == 0: {b_viol} ({met(b_viol == 0)})")
    print(f"goal seller agreement on ZOPA (excl. hardliner) >= 95%: {_fmt(s_agree)} "
          f"({met(None if s_agree is None else s_agree >= AGREEMENT_GOAL)})")
    print(f"goal buyer agreement on ZOPA (excl. hardliner) >= 95%: {_fmt(b_agree)} "
          f"({met(None if b_agree is None else b_agree >= AGREEMENT_GOAL)})")

    nm = load_negmas()
    s_vs = b_vs = None
    if nm is None:
        print("negmas: not importable (optional, benchmark-only; set HAGGLER_NEGMAS_PATH): comparison na")
    else:
        if args.negmas_n is not None:
            k = args.negmas_n
            sub = zopa[:k] + nozopa[: (k * len(nozopa)) // max(1, len(zopa))]
            # Compare like with like: our side on the same subset.
            ours_s = _summary(run_ours(sub, SELLER))[2]
            ours_b = _summary(run_ours(sub, BUYER))[2]
        else:
            sub, ours_s, ours_b = scenarios, s_share, b_share
        started = time.perf_counter()
        best = {SELLER: None, BUYER: None}
        for seat in (SELLER, BUYER):
            print(f"negmas, {seat} seat vs our panel ({len(sub)} scenarios): share / agreement on ZOPA excl. "
                  f"hardliner / violations")
            for name in NEGMAS_NEGOTIATORS:
                cells = run_negmas_seat(nm, name, sub, seat)
                viol, agree, share = _summary(cells)
                per = " ".join(f"{o}={_fmt(c.share, '.2f')}" for o, c in cells.items())
                print(f"  {name:<26} share={_fmt(share)} agree={_fmt(agree)} viol={viol}  [{per}]")
                if share is not None and (best[seat] is None or share > best[seat]):
                    best[seat] = share
        print(f"negmas: {time.perf_counter() - started:.1f} s")
        s_vs = None if ours_s is None or best[SELLER] is None else ours_s - best[SELLER]
        b_vs = None if ours_b is None or best[BUYER] is None else ours_b - best[BUYER]
        print(f"goal seller share > every NegMAS negotiator's: ours {_fmt(ours_s)} vs best NegMAS "
              f"{_fmt(best[SELLER])} ({met(None if s_vs is None else s_vs > 0)})")
        print(f"goal buyer share > every NegMAS negotiator's: ours {_fmt(ours_b)} vs best NegMAS "
              f"{_fmt(best[BUYER])} ({met(None if b_vs is None else b_vs > 0)})")
    print(f"RESULT seller_violations={s_viol} seller_agreement_zopa={_fmt(s_agree)} seller_share={_fmt(s_share)} "
          f"buyer_violations={b_viol} buyer_agreement_zopa={_fmt(b_agree)} buyer_share={_fmt(b_share)} "
          f"negmas={'na' if nm is None else 'yes'} seller_share_vs_negmas_min={_fmt(s_vs)} "
          f"buyer_share_vs_negmas_min={_fmt(b_vs)}")


if __name__ == "__main__":
    main()
