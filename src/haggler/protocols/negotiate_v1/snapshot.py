"""A chat's negotiation as a snapshot, stored with the chat so that a turn costs the same whatever
the chat's length.

A turn needs the engine's state (how many turns were taken, the last one, the offers on the
table), the merchant's history (its asks, the shopper's offers, its concessions) and the merchant's
last words (so that a reply does not repeat them). Replaying every stored message gives all three
but costs more with each turn; the snapshot holds exactly them, as one JSON text in the chat's row,
written in the same transaction as the messages it sums up. The messages stay the record: a chat
stored before snapshots existed (or one whose snapshot is missing) is replayed once from them,
and the tests replay every chat to check that the snapshot agrees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Sequence

from haggler.agents.merchant import MerchantAgent, MerchantHistory
from haggler.engine import Action, Negotiation, Rules, Terms, Turn
from haggler.storage.chats import MessageRow

#: Bumped when the layout changes; a snapshot of another version is ignored and the chat replayed.
VERSION = 1


@dataclass(frozen=True, slots=True)
class ChatState:
    """What the next turn of a chat starts from."""

    negotiation: Negotiation
    history: MerchantHistory
    #: The sequence number of the chat's last message.
    seq: int
    #: The chat's last message: the merchant's latest words.
    previous: str

    @classmethod
    def replayed(cls, rules: Rules, agent: MerchantAgent, rows: Sequence[MessageRow]) -> ChatState:
        """The state the stored messages leave (closing remarks carry no turn)."""
        negotiation = Negotiation.replay(rules, filter(None, (r.to_turn() for r in rows)))
        return cls(negotiation, agent.history(negotiation), rows[-1].seq, rows[-1].text)

    @classmethod
    def opened(cls, rules: Rules, agent: MerchantAgent, greeting: Turn, text: str) -> ChatState:
        """The state of a chat that the merchant's ``greeting`` (said as ``text``) just opened."""
        negotiation = Negotiation.replay(rules, [greeting])
        return cls(negotiation, agent.history(negotiation), 0, text)

    def dump(self) -> str:
        """The snapshot as stored: the engine's state without the turns' texts (the messages
        hold them), the merchant's history and its last words."""
        negotiation, history = self.negotiation, self.history
        return json.dumps({
            "v": VERSION, "seq": self.seq, "previous": self.previous,
            "turns": negotiation.turn_count, "last": _turn(negotiation.last_turn),
            "standing": {party: _terms(terms) for party, terms in negotiation.standing.items()},
            "ask": _terms(history.ask), "ask_is_final": history.ask_is_final,
            "concessions": history.price_concessions, "last_step": history.last_price_step,
            "offers": history.shopper_offers, "asks": history.asks, "shopper_turns": history.shopper_turns,
        }, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def load(cls, rules: Rules, text: str) -> ChatState | None:
        """The state a stored snapshot holds, or None for a snapshot of another version."""
        data = json.loads(text)
        if data.get("v") != VERSION:
            return None
        negotiation = Negotiation.resume(rules, data["turns"], _read_turn(data["last"]),
                                         {party: _read_terms(t) for party, t in data["standing"].items()})
        history = MerchantHistory(_read_terms(data["ask"]), data["ask_is_final"], data["concessions"],
                                  data["last_step"], tuple(data["offers"]), tuple(data["asks"]),
                                  data["shopper_turns"])
        return cls(negotiation, history, data["seq"], data["previous"])


def _terms(terms: Terms) -> list[Any]:
    return [terms.price_cents, terms.currency, list(terms.extras)]


def _read_terms(data: list[Any]) -> Terms:
    return Terms(data[0], data[1], tuple(data[2]))


def _turn(turn: Turn | None) -> list[Any] | None:
    if turn is None:
        return None
    return [turn.party, turn.action.value, turn.at.isoformat(), None if turn.terms is None else _terms(turn.terms),
            turn.final]


def _read_turn(data: list[Any] | None) -> Turn | None:
    if data is None:
        return None
    party, action, at, terms, final = data
    return Turn(party, Action(action), datetime.fromisoformat(at), None if terms is None else _read_terms(terms),
                None, final)
