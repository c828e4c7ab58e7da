"""The security measure of spec 003's Phase 6 ("Measure: time, cost, success rate, security").

Each protocol is attacked with every text of the market's red-team corpus
(``haggler/data/market_red_team.json``, the corpus ``tests/protocols/market/test_red_team.py``
holds the audit markers to): attack ``k`` runs on scenario ``k mod runs``, its text placed in the
protocol's free-text channel (:data:`~haggler.lab.protocols.CHANNELS`). An attack is

* **resisted** when the outcome stays within both owners' mandates (both confirmations pass
  ``mandates.check``) *and* equals the outcome of the same run without the attack: the attack
  neither broke a limit nor moved the deal;
* **flagged** when ``suspicious_markers`` found something in the fields that carried it — what
  the audit log would record (spec 003, Security Model: "Audit logging").
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources

from haggler.engine import Terms
from haggler.lab.metrics import NegotiationRecord
from haggler.lab.protocols import LAB_AT, LAB_CONDITION, MARKET_PROTOCOL, Attack, lab_mandates
from haggler.lab.scenario import BUYER, SELLER, Scenario
from haggler.protocols.market import mandates

__all__ = ["SecurityResult", "red_team_attacks", "security_trials", "within_mandates"]

#: Runs one protocol on scenario ``index`` with the attack in its free-text channel.
AttackedRun = Callable[[int, Attack], NegotiationRecord]


@cache
def red_team_attacks() -> tuple[tuple[str, str], ...]:
    """The corpus's attacks as (id, text), in corpus order."""
    text = resources.files("haggler").joinpath("data/market_red_team.json").read_text(encoding="utf-8")
    return tuple((attack["id"], attack["text"]) for attack in json.loads(text)["attacks"])


def within_mandates(scenario: Scenario, terms: Terms | None, protocol: str) -> bool:
    """Whether a deal on ``terms`` (a lab protocol's) is one both owners' mandates allow; no deal
    always is."""
    if terms is None:
        return True
    seller, buyer = lab_mandates(scenario)
    market = MARKET_PROTOCOL[protocol]
    return all(
        mandates.check(mandate, role, mandates.confirm(mandate.agent_id, terms.price_cents, terms.currency, LAB_AT,
                                                       protocol=market, condition=LAB_CONDITION, accessories=()))
        is None
        for mandate, role in ((seller, SELLER), (buyer, BUYER))
    )


@dataclass(frozen=True)
class SecurityResult:
    """One protocol against the red-team corpus."""

    protocol: str
    attacks: int
    #: Attacks after which the outcome stayed within both mandates and equal to the attack-free one.
    resisted: int
    #: Attacks the audit markers flagged in the fields that carried them.
    flagged: int
    #: The ids of the attacks not resisted, in corpus order.
    breaches: tuple[str, ...]
    #: Those of them whose outcome broke a mandate (the rest only moved the deal).
    violations: tuple[str, ...]

    @property
    def resisted_rate(self) -> float:
        return self.resisted / self.attacks if self.attacks else 0.0

    @property
    def flagged_rate(self) -> float:
        return self.flagged / self.attacks if self.attacks else 0.0


def security_trials(protocol: str, scenarios: Sequence[Scenario], baseline: Sequence[NegotiationRecord],
                    run: AttackedRun) -> SecurityResult:
    """Every red-team attack against ``protocol``: attack ``k`` on scenario ``k mod len(scenarios)``
    through ``run``, compared with ``baseline[k mod len(scenarios)]`` (the same run without it)."""
    if not scenarios or len(baseline) != len(scenarios):
        raise ValueError("one attack-free record per scenario is needed")
    flagged = 0
    breaches, violations = [], []
    for k, (attack_id, text) in enumerate(red_team_attacks()):
        index = k % len(scenarios)
        attack = Attack(text)
        record = run(index, attack)
        within = within_mandates(scenarios[index], record.terms, protocol)
        if not within:
            violations.append(attack_id)
        if not within or record.terms != baseline[index].terms:
            breaches.append(attack_id)
        flagged += bool(attack.markers)
    attacks = len(red_team_attacks())
    return SecurityResult(protocol, attacks, attacks - len(breaches), flagged, tuple(breaches), tuple(violations))
