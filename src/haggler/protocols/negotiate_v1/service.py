"""The negotiate.v1 chat, independent of HTTP: start, say, history, idle sweep.

Each turn is one serialized database transaction: lock the chat, resume its negotiation from the
snapshot stored with it (``snapshot.py``: one row read, whatever the chat's length), apply the
shopper's turn, let the merchant decide, render the reply, store both messages, the new snapshot
(and the deal, if one was made), commit. Nothing lives in process memory, so any worker can serve
any chat and a crash loses nothing that was acknowledged.
"""

from __future__ import annotations

import hashlib
import logging
import random
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable, Sequence

from sqlalchemy import Connection

from haggler.agents.llm_merchant import ChatTurn, LLMMerchant, ModelTurn
from haggler.agents.merchant import MERCHANT, SHOPPER, MerchantAgent, MerchantHistory, MerchantMove, hidden_reserve
from haggler.catalog import Catalog, Product
from haggler.engine import Negotiation, Rules, RuleViolation, Terms, Turn
from haggler.errors import Closed, InvalidInput, NotFound, RateLimited, limit_words
from haggler.language.intents import Intent
from haggler.language.parse import StructuredMessageError, parse_shopper_turn
from haggler.language.render import ReplyRenderer, checkout_sentence
from haggler.llm.base import Conversation, Usage
from haggler.protocols.negotiate_v1.settings import MerchantSettings, StoreLimits
from haggler.protocols.negotiate_v1.snapshot import ChatState
from haggler.storage import chats as repo
from haggler.storage.database import Database
from haggler.storage.secrets import store_secret

CLOSED_MESSAGE = "this chat is closed"

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ChatStart:
    session_id: str
    greeting: str
    offer: Terms


@dataclass(frozen=True, slots=True)
class ChatReply:
    message: str
    closed: bool
    #: The merchant's terms on the table while the chat is open.
    offer: Terms | None
    deal: repo.DealRow | None


@dataclass(frozen=True, slots=True)
class ChatHistory:
    session_id: str
    product_id: str
    closed: bool
    messages: list[tuple[str, str]]
    deal: repo.DealRow | None
    #: The merchant's terms on the table while the chat is open (already sent in a reply), so
    #: that a widget resuming the chat can show them again.
    offer: Terms | None


Clock = Callable[[], datetime]


class ChatService:
    def __init__(self, catalog: Catalog, database: Database, limits: StoreLimits, clock: Clock,
                 *, seed: int | None = None, merchant: MerchantSettings | None = None,
                 model: LLMMerchant | None = None) -> None:
        self.catalog = catalog
        self.db = database
        self.limits = limits
        self.clock = clock
        self.seed = seed
        merchant = merchant or MerchantSettings()
        self.merchant = merchant
        #: The merchant's model (``llm-voice`` or ``llm``); None: the deterministic merchant alone.
        self.model = model
        self.token_budget = merchant.token_budget
        margin = merchant.floor_margin
        secret = _margin_secret(database, seed) if margin else b""
        self._agents = {p.id: MerchantAgent(p, reserve_cents=hidden_reserve(p, secret, margin))
                        for p in catalog.products}
        self._renderers = {p.id: ReplyRenderer(catalog.store, p.facts) for p in catalog.products}
        # The greeting, then a merchant reply to each shopper message: the merchant's reply to
        # the last allowed message is the last turn.
        self.rules = Rules(parties=(MERCHANT, SHOPPER), max_turns=2 * limits.max_messages_per_chat + 1,
                           idle_ttl=timedelta(seconds=limits.session_idle_ttl_seconds))

    def product(self, product_id: str) -> Product:
        product = self.catalog.product(product_id)
        if product is None:
            raise NotFound(f"unknown product_id: {product_id}")
        return product

    # -- start -------------------------------------------------------------------------------

    def start(self, product_id: str, client_ip: str, *, local: bool = False) -> ChatStart:
        """Open a chat for ``client_ip``. ``local``: the client is this machine
        (``clientip.is_local_client``), exempt from the per-address limit unless
        ``limits.limit_loopback``; its starts are then not counted either."""
        product = self.product(product_id)
        agent = self._agents[product.id]
        now = self.clock()
        session_id = secrets.token_urlsafe(18)
        seed = self.seed if self.seed is not None else secrets.randbits(62)
        move = agent.greet()
        greeting = self._renderers[product.id].render(move, _rng(seed, 0))
        opening = move.turn(now)
        state = ChatState.opened(self.rules, agent, opening, greeting)
        with self.db.write() as conn:
            if self.limits.limit_loopback or not local:
                self._count_start(conn, client_ip, now)
            repo.create_chat(conn, chat_id=session_id, product_id=product.id, seed=seed, client_ip=client_ip, now=now,
                             state=state.dump())
            repo.append_messages(conn, session_id, [repo.NewMessage(0, MERCHANT, greeting, opening)], now)
        return ChatStart(session_id, greeting, move.terms)

    def _count_start(self, conn: Connection, client_ip: str, now: datetime) -> None:
        """Count a start of ``client_ip``; RateLimited (with the seconds until it may start again)
        once it has started ``max_chat_starts_per_hour_per_ip`` chats in the past hour."""
        repo.lock_client(conn, client_ip)
        limit = self.limits.max_chat_starts_per_hour_per_ip
        limited_by = repo.start_limited_by(conn, client_ip, now - timedelta(hours=1), limit)
        if limited_by is not None:
            retry = int((limited_by + timedelta(hours=1) - now).total_seconds()) + 1
            raise RateLimited("too many chats started from your address: " + limit_words(
                f"{limit} chat starts per hour per client address", "--max-chat-starts-per-hour"), retry)
        repo.record_start(conn, client_ip, now)

    # -- say ---------------------------------------------------------------------------------

    def say(self, session_id: str, text: str, *, checkout_url: Callable[[str], str]) -> ChatReply:
        """One shopper turn: the model's part (if the merchant has one), then the locked commit."""
        return self.answer(session_id, text, self.plan(session_id, text), checkout_url=checkout_url)

    def answer(self, session_id: str, text: str, plan: Plan | None, *,
               checkout_url: Callable[[str], str]) -> ChatReply:
        """Commit one shopper turn and the merchant's answer: ``plan``'s, when it was worked out
        on the chat as it stands, else the deterministic merchant's."""
        self._check_message(text)
        with self.db.write() as conn:
            chat = repo.get_chat(conn, session_id, for_update=True)
            if chat is None:
                raise NotFound(f"unknown session_id: {session_id}")
            if chat.closed:
                raise Closed(CLOSED_MESSAGE)
            now = max(self.clock(), chat.last_activity_at)
            state = self._state(conn, chat)
            if state.negotiation.expire_if_idle(now) is not None:
                repo.close_chat(conn, session_id, outcome="expired", now=now)
                expired = True
            else:
                expired = False
                reply = self._turn(conn, chat, state, text, now, checkout_url, plan)
        if expired:  # raised outside the transaction so that the closure is committed
            raise Closed(CLOSED_MESSAGE)
        return reply

    def _check_message(self, text: str) -> None:
        if not text or not text.strip():
            raise InvalidInput("missing parameter: message")
        if len(text) > self.limits.max_message_length_chars:
            raise InvalidInput(f"message is too long: at most {self.limits.max_message_length_chars} characters")

    def _state(self, conn, chat: repo.ChatRow,  # type: ignore[no-untyped-def]
               rows: Sequence[repo.MessageRow] | None = None) -> ChatState:
        """Where the chat's next turn starts: its snapshot, or (for a chat stored without one) its
        messages replayed (``rows``, when the caller has read them already)."""
        stored = ChatState.load(self.rules, chat.state) if chat.state else None
        if stored is not None:
            return stored
        return ChatState.replayed(self.rules, self._agents[chat.product_id],
                                  repo.list_messages(conn, chat.id) if rows is None else rows)

    def _prepare(self, chat: repo.ChatRow, negotiation: Negotiation, text: str, now: datetime,
                 history: MerchantHistory) -> _Prepared:
        """Read the shopper's message, apply its turn to ``negotiation``, and let the
        deterministic merchant decide. ``history`` is the merchant's history before the turn."""
        product = self.product(chat.product_id)
        agent = self._agents[product.id]
        ask = negotiation.standing.get(MERCHANT, agent.opening_terms())
        try:
            intent = parse_shopper_turn(text, reference_cents=ask.price_cents)
        except StructuredMessageError as exc:
            raise InvalidInput(str(exc)) from exc
        shopper_turn = agent.shopper_turn(negotiation, intent, now, text)
        try:
            negotiation.apply(shopper_turn)
        except RuleViolation as exc:  # pragma: no cover - the service only builds valid turns
            raise InvalidInput(exc.message) from exc
        shopper_messages = chat.shopper_messages + 1
        cap = self.limits.max_messages_per_chat
        left = cap - shopper_messages
        history = history.after(shopper_turn)
        decided = agent.respond(negotiation, intent, last_message=left <= 0, messages_left=left, history=history)
        return _Prepared(product, agent, intent, shopper_turn, decided, shopper_messages, left, history)

    def _turn(self, conn, chat: repo.ChatRow, state: ChatState, text: str, now: datetime,  # type: ignore[no-untyped-def]
              checkout_url: Callable[[str], str], plan: Plan | None) -> ChatReply:
        negotiation = state.negotiation
        prepared = self._prepare(chat, negotiation, text, now, state.history)
        product = prepared.product
        current = plan if plan is not None and plan.after_seq == state.seq else None
        move, worded = (current.turn.move, current.turn.text) if current else (prepared.decided, None)
        try:
            merchant_turn = _apply(negotiation, move, now)
        except RuleViolation:  # pragma: no cover - the guards only build moves the engine takes
            if current is None:
                raise
            log.exception("the model's move broke a rule: the deterministic merchant answers")
            move, worded = prepared.decided, None
            merchant_turn = _apply(negotiation, move, now)
        outcome = negotiation.outcome
        deal = None
        if outcome is not None and outcome.agreed:
            assert outcome.terms is not None
            deal = repo.insert_deal(conn, deal_id="deal_" + secrets.token_urlsafe(12), chat_id=chat.id,
                                    product_id=product.id, terms=outcome.terms, at=now)
        seq = state.seq + 1
        rng = _rng(chat.seed, seq + 1)
        url = checkout_url(deal.id) if deal else None
        if worded is not None:
            reply = worded if url is None or url in worded else f"{worded} {checkout_sentence(url, rng)}"
        else:
            reply = self._renderers[product.id].render_fresh(move, rng, previous=state.previous, checkout_url=url)
        repo.append_messages(conn, chat.id, [repo.NewMessage(seq, SHOPPER, text, prepared.shopper_turn),
                                             repo.NewMessage(seq + 1, MERCHANT, reply, merchant_turn)], now)
        history = prepared.history if merchant_turn is None else prepared.history.after(merchant_turn)
        repo.update_chat(conn, chat.id, now=now, shopper_messages=prepared.shopper_messages,
                         outcome=outcome.kind.value if outcome else None,
                         state=ChatState(negotiation, history, seq + 1, reply).dump())
        if plan is not None:
            repo.add_model_usage(conn, chat.id, plan.spent(used=current is not None))
        closed = outcome is not None
        return ChatReply(reply, closed, None if closed else negotiation.standing.get(MERCHANT), deal)

    def plan(self, session_id: str, text: str) -> Plan | None:
        """The model's turn for ``text``, worked out from a snapshot of the chat without holding
        any lock or write slot, so that no other chat's turn waits on a model. None with no
        model, when the chat cannot take the turn (``answer`` says why), or when something
        unexpected went wrong around the model (the deterministic merchant answers)."""
        if self.model is None:
            return None
        self._check_message(text)
        with self.db.read() as conn:
            chat = repo.get_chat(conn, session_id)
            if chat is None or chat.closed:
                return None
            rows = repo.list_messages(conn, session_id)
            spent = repo.model_usage(conn, session_id)
        now = max(self.clock(), chat.last_activity_at)
        # Every turn replayed, not the snapshot: the model's prompt and the guards read the whole chat.
        replayed = ChatState.replayed(self.rules, self._agents[chat.product_id], rows)
        negotiation = replayed.negotiation
        if negotiation.expire_if_idle(now) is not None:
            return None
        try:
            prepared = self._prepare(chat, negotiation, text, now, replayed.history)
        except InvalidInput:
            return None
        conversation = Conversation(self.token_budget, Usage(spent.input_tokens, spent.output_tokens,
                                                             spent.calls, spent.cost_nanousd))
        transcript = [(r.speaker, r.text) for r in rows] + [(SHOPPER, text)]
        chat_turn = ChatTurn(prepared.agent, self.catalog.store, negotiation, prepared.intent, prepared.decided,
                             transcript, prepared.messages_left <= 0, max(0, prepared.messages_left))
        try:
            return Plan(rows[-1].seq, self.model.turn(chat_turn, conversation))
        except Exception:  # the model's edge: a bug there must not cost the shopper the turn
            log.exception("the merchant's model turn failed: the deterministic merchant answers")
            return None

    # -- reading -----------------------------------------------------------------------------

    def history(self, session_id: str) -> ChatHistory:
        with self.db.read() as conn:
            chat = repo.get_chat(conn, session_id)
            if chat is None:
                raise NotFound(f"unknown session_id: {session_id}")
            rows = repo.list_messages(conn, session_id)
            deal = repo.deal_for_chat(conn, session_id) if chat.outcome == "agreed" else None
            closed = chat.closed or chat.last_activity_at + timedelta(seconds=self.limits.session_idle_ttl_seconds) <= self.clock()
            offer = None if closed else self._state(conn, chat, rows).negotiation.standing.get(MERCHANT)
        return ChatHistory(session_id, chat.product_id, closed, [(r.speaker, r.text) for r in rows], deal, offer)

    def sweep(self) -> int:
        """Close idle chats and forget chat starts older than the rate-limit window."""
        now = self.clock()
        with self.db.write() as conn:
            closed = repo.close_idle_chats(conn, idle_before=now - timedelta(seconds=self.limits.session_idle_ttl_seconds), now=now)
            repo.prune_starts(conn, now - timedelta(hours=1))
        return closed


@dataclass(frozen=True, slots=True)
class _Prepared:
    product: Product
    agent: MerchantAgent
    intent: Intent
    shopper_turn: Turn
    #: The deterministic merchant's move.
    decided: MerchantMove
    shopper_messages: int
    #: Messages the shopper may still send after this one.
    messages_left: int
    #: The merchant's history with the shopper's turn.
    history: MerchantHistory


@dataclass(frozen=True, slots=True)
class Plan:
    """A model's turn, worked out on the chat as it stood after message ``after_seq``."""

    after_seq: int
    turn: ModelTurn

    def spent(self, *, used: bool) -> repo.ModelUsageRow:
        """What the turn cost, and the guards' part in it; an unused plan (another turn came in
        first) counts as a fallback, its tokens spent all the same."""
        report = self.turn.report
        usage = report.usage
        return repo.ModelUsageRow(usage.calls, usage.input_tokens, usage.output_tokens, usage.cost_nanousd,
                                  fallbacks=int(report.fallback is not None or not used),
                                  clamps=int(report.clamped), rewrites=int(report.rewritten))


def _apply(negotiation: Negotiation, move: MerchantMove, now: datetime) -> Turn | None:
    """Apply the merchant's turn for ``move`` (None for a closing remark) and return it."""
    turn = move.turn(now)
    if turn is not None:
        negotiation.apply(turn)
    return turn


def _margin_secret(database: Database, seed: int | None) -> bytes:
    """The secret the merchant's hidden floor margins derive from: the store's own, kept in its
    database; with a fixed seed, one derived from it, so that conversations stay reproducible."""
    if seed is not None:
        return hashlib.sha256(f"haggler floor margin, seed {seed}".encode()).digest()
    return store_secret(database, "floor_margin")


def _rng(seed: int, seq: int) -> random.Random:
    return random.Random(seed * 1_000_003 + seq)

