"""What a built-in market agent's negotiation decision stands for, as the mandate action the
framework would check (spec 003, Owner Mandate Format): written apart from haggler.agents.market
so that the agents' tests do not take the agents' word for it."""

from __future__ import annotations

from datetime import datetime

from haggler.agents.decider import ACCEPT, REJECT, Decision
from haggler.agents.market import NATURAL_LANGUAGE, ListingFacts
from haggler.engine import Terms
from haggler.protocols.market import mandates


def decision_action(agent_id: str, facts: ListingFacts, decision: Decision, their_last: Terms | None,
                    at: datetime) -> mandates.Action | None:
    """An offer for offered terms, a confirmation at the counterpart's last price for ACCEPT, None
    for REJECT (walking away needs no permission)."""
    if decision is REJECT:
        return None
    listing = {"condition": facts.condition, "accessories": facts.accessories}
    if decision is ACCEPT:
        assert their_last is not None, "ACCEPT with nothing on the table"
        return mandates.confirm(agent_id, their_last.price_cents, their_last.currency, at, protocol=NATURAL_LANGUAGE,
                                **listing)
    assert isinstance(decision, Terms), decision
    return mandates.offer(agent_id, decision.price_cents, decision.currency, at, **listing)
