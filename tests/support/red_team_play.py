"""Playing the red-team corpus against a real store, one merchant mode at a time.

``play(mode, product_ids, workdir)`` serves the demo store with ``--merchant <mode>`` over real
HTTP — its model, in the ``llm`` modes, the scripted gullible one (tests/support/gullible_model.py)
behind a local fake provider reached by the real ``anthropic`` SDK — and sends every attack of
the corpus, turn by turn, each in a chat of its own. Each chat is scored by the red team's own
scorer (tests/support/red_team.py), and each of the model's raw answers too: what the model
*tried* (a price below the floor, a reply giving hidden state away) against what got out.

The CI test (tests/red_team/test_red_team.py) and ``benchmarks/red_team.py`` share it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from haggler.money import to_cents
from tests.support.fake_llm import FakeLLM, Reply
from tests.support.gullible_model import gullible
from tests.support.llm_store import LLMStore, Shop, llm_store
from tests.support.red_team import Deal, MerchantReply, load_corpus, score, turns_for


@dataclass
class Tally:
    """One family's results in one mode."""

    attacks: int = 0
    turns: int = 0
    deals: int = 0
    #: Replies that gave hidden state away, and deals below the floor: what got out (goal: 0, 0).
    leaks: int = 0
    below_floor: int = 0
    #: What the gullible model tried: answers stating hidden state, proposals below the floor.
    tried_leaks: int = 0
    tried_below_floor: int = 0
    #: What the guards did, from the store's own record (chat_model_usage).
    clamps: int = 0
    rewrites: int = 0
    fallbacks: int = 0
    examples: list[str] = field(default_factory=list)


def total(tallies: Iterable[Tally]) -> Tally:
    """The counts of ``tallies`` added up (a mode's total over its families)."""
    summed = Tally()
    for tally in tallies:
        for counter in fields(Tally):
            if counter.type in ("int", int):
                setattr(summed, counter.name, getattr(summed, counter.name) + getattr(tally, counter.name))
    return summed


class _Recorder:
    """The gullible responder, keeping each structured answer it gave until ``take`` (one attack's)."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def __call__(self, path: str, body: dict[str, Any]) -> Reply:
        reply = gullible(path, body)
        if isinstance(reply.data, dict):
            with self._lock:
                self.answers.append(reply.data)
        return reply

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            taken, self.answers = self.answers, []
        return taken


@contextmanager
def _store(mode: str, workdir: Path) -> Iterator[tuple[LLMStore, FakeLLM | None, _Recorder]]:
    recorder = _Recorder()
    fake_context = FakeLLM() if mode != "deterministic" else nullcontext(None)
    with fake_context as fake:
        if fake is not None:
            fake.respond_with(recorder)
        workdir.mkdir(parents=True, exist_ok=True)
        # The store's default floor margin: what a real store runs with.
        with llm_store(fake, mode, "anthropic", workdir, floor_margin=0.05, timeout=10.0) as store:
            yield store, fake, recorder


def play(mode: str, product_ids: Iterable[str], workdir: Path) -> dict[str, Tally]:
    """Every attack against every product in ``mode``; a tally per family."""
    corpus = load_corpus()
    tallies = {name: Tally() for name in corpus.families}
    with _store(mode, workdir / mode) as (store, fake, recorder):
        for product_id in product_ids:
            product = store.product(product_id)
            for attack in corpus.attacks:
                tally = tallies[attack.family]
                _attack(store, product_id, turns_for(attack, product), tally, recorder, attack.id)
        if fake is not None and fake.responder_errors:
            raise AssertionError(f"the gullible model failed on a request: {fake.responder_errors[0]!r}")
    return tallies


def _attack(store: LLMStore, product_id: str, turns: list[str], tally: Tally, recorder: _Recorder,
            attack_id: str) -> None:
    product = store.product(product_id)
    shop = Shop(store, product_id)
    replies = [MerchantReply(shop.replies[0]["greeting"])]
    deal = None
    recorder.take()
    try:
        for turn in turns:
            if shop.next is None:
                break
            body = shop.say(turn)
            tally.turns += 1
            committed = _committed(body)
            replies.append(MerchantReply(body["message"], allowed=committed))
            if body.get("deal"):
                deal = Deal(to_cents(body["deal"]["price"]), tuple(body["deal"].get("extras", ())))
    finally:
        shop.close()
    result = score(product, replies, deal)
    tally.attacks += 1
    tally.deals += deal is not None
    tally.leaks += result.leaking_replies
    tally.below_floor += result.below_floor
    if result.leaks or result.below_floor:
        tally.examples.append(f"{attack_id} on {product_id}: {result.leaks[:1] or 'below floor'}")
    _tried(product, recorder.take(), tally)
    usage = store.usage(shop.session_id)
    tally.clamps += usage.clamps
    tally.rewrites += usage.rewrites
    tally.fallbacks += usage.fallbacks


def _committed(body: dict[str, Any]) -> tuple[int, ...]:
    """The price a reply offers or agrees to: the one amount it must be able to state."""
    terms = body.get("deal") or body.get("offer")
    return (to_cents(terms["price"]),) if terms else ()


def _tried(product: Any, answers: list[dict[str, Any]], tally: Tally) -> None:
    """Score the model's own answers, before any guard: what it would have sent and sold."""
    for data in answers:
        message = str(data.get("message", ""))
        if score(product, [MerchantReply(message)]).leaks:
            tally.tried_leaks += 1
        price = data.get("price")
        if data.get("action") in ("counter", "last_offer", "accept") and isinstance(price, (int, float)) \
                and to_cents(str(price)) < product.floor_cents:
            tally.tried_below_floor += 1
