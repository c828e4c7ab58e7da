"""The negotiation core: a pure state machine, no I/O.

Every protocol haggler speaks (negotiate.v1 chat, transaction offers, match debates, market
bids) is one :class:`Negotiation`: parties take :class:`Turn` s under :class:`Rules` until an
:class:`Outcome`. Time comes in on each turn (``Turn.at``); the engine never reads a clock.
"""

from haggler.engine.negotiation import (
    Action,
    Negotiation,
    Outcome,
    OutcomeKind,
    Rules,
    RuleViolation,
    Terms,
    Turn,
    TurnFields,
)

__all__ = ["Action", "Negotiation", "Outcome", "OutcomeKind", "Rules", "RuleViolation", "Terms", "Turn", "TurnFields"]
