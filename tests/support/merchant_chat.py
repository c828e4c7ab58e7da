"""Driving the store's merchant agent exactly as the negotiate.v1 service drives it, in memory:
apply the shopper's turn, ask the agent to respond, apply the merchant's turn."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from haggler.agents.merchant import MERCHANT, SHOPPER, MerchantAgent, MerchantMove
from haggler.catalog import Product
from haggler.engine import Action, Negotiation, Rules, Terms, Turn
from haggler.language.intents import Intent, IntentKind

T0 = datetime(2024, 6, 1, 9, 0, 0, tzinfo=timezone.utc)


@dataclass
class Step:
    intent: Intent
    move: MerchantMove
    ask_before: Terms
    ask_after: Terms


@dataclass
class Chat:
    """One negotiate.v1 chat: the greeting, then one merchant reply per shopper message."""

    product: Product
    max_messages: int = 30
    agent: MerchantAgent = field(init=False)
    negotiation: Negotiation = field(init=False)
    greeting: MerchantMove = field(init=False)
    steps: list[Step] = field(default_factory=list)
    shopper_messages: int = 0
    clock: int = 0
    #: Tell the merchant the messages left, as the store does; False tests the clockless mode.
    timed: bool = True
    #: The least the merchant takes (None: the floor), as a store with a hidden floor margin sets it.
    reserve_cents: int | None = None
    #: Tell the merchant the shopper is bound to the cap, as the lab's alternating offers do.
    to_the_cap: bool = False

    def __post_init__(self) -> None:
        self.agent = MerchantAgent(self.product, reserve_cents=self.reserve_cents)
        # the same rules the service uses
        self.negotiation = Negotiation(Rules(parties=(MERCHANT, SHOPPER), max_turns=2 * self.max_messages + 1,
                                             idle_ttl=timedelta(hours=1)))
        self.greeting = self.agent.greet()
        self.negotiation.apply(Turn(MERCHANT, Action.OFFER, self._now(), terms=self.greeting.terms))

    def _now(self) -> datetime:
        self.clock += 1
        return T0 + timedelta(seconds=self.clock)

    @property
    def closed(self) -> bool:
        return self.negotiation.closed

    @property
    def ask(self) -> Terms:
        return self.negotiation.standing[MERCHANT]

    @property
    def moves(self) -> list[MerchantMove]:
        return [self.greeting] + [s.move for s in self.steps]

    def say(self, intent: Intent) -> MerchantMove:
        assert not self.closed, "the service refuses messages to a closed chat"
        now = self._now()
        ask_before = self.ask
        self.negotiation.apply(self.agent.shopper_turn(self.negotiation, intent, now))
        self.shopper_messages += 1
        move = self.agent.respond(self.negotiation, intent, last_message=self.shopper_messages >= self.max_messages,
                                  messages_left=self.max_messages - self.shopper_messages if self.timed else None,
                                  to_the_cap=self.to_the_cap)
        turn = move.turn(now)
        if turn is not None:
            self.negotiation.apply(turn)
        self.steps.append(Step(intent, move, ask_before, self.ask))
        return move

    def offer(self, cents: int, **kwargs) -> MerchantMove:
        return self.say(Intent(IntentKind.OFFER, amount_cents=cents, **kwargs))
