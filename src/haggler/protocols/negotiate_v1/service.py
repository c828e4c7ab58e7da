"""The negotiate.v1 chat, independent of HTTP: start, say, history, idle sweep.

Each turn is one serialized database transaction: lock the chat, replay its stored turns into
the engine, apply the shopper's turn, let the merchant decide, render the reply, store both
messages (and the deal, if one was made), commit. Nothing lives in process memory, so any
worker can serve any chat and a crash loses nothing that was acknowledged.
"""

from __future__ import annotations

import hashlib
import random
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Callable

from haggler.agents.merchant import MERCHANT, SHOPPER, MerchantAgent, hidden_reserve
from haggler.catalog import Catalog, Product
from haggler.engine import Negotiation, Rules, RuleViolation, Terms
from haggler.errors import Closed, InvalidInput, NotFound, RateLimited
from haggler.language.parse import StructuredMessageError, parse_shopper_turn
from haggler.language.render import ReplyRenderer
from haggler.protocols.negotiate_v1.settings import MerchantSettings, StoreLimits
from haggler.storage import chats as repo
from haggler.storage.database import Database
from haggler.storage.secrets import store_secret

CLOSED_MESSAGE = "this chat is closed"


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


Clock = Callable[[], datetime]


class ChatService:
    def __init__(self, catalog: Catalog, database: Database, limits: StoreLimits, clock: Clock,
                 *, seed: int | None = None, merchant: MerchantSettings | None = None) -> None:
        self.catalog = catalog
        self.db = database
        self.limits = limits
        self.clock = clock
        self.seed = seed
        margin = (merchant or MerchantSettings()).floor_margin
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

    def start(self, product_id: str, client_ip: str) -> ChatStart:
        product = self.product(product_id)
        agent = self._agents[product.id]
        now = self.clock()
        session_id = secrets.token_urlsafe(18)
        seed = self.seed if self.seed is not None else secrets.randbits(62)
        move = agent.greet()
        greeting = self._renderers[product.id].render(move, _rng(seed, 0))
        window_start = now - timedelta(hours=1)
        with self.db.write() as conn:
            repo.lock_client(conn, client_ip)
            count, oldest = repo.recent_starts(conn, client_ip, window_start)
            if count >= self.limits.max_chat_starts_per_hour_per_ip:
                assert oldest is not None
                retry = int((oldest + timedelta(hours=1) - now).total_seconds()) + 1
                raise RateLimited(
                    f"too many chats started from your address: at most "
                    f"{self.limits.max_chat_starts_per_hour_per_ip} per hour", retry)
            repo.record_start(conn, client_ip, now)
            repo.create_chat(conn, chat_id=session_id, product_id=product.id, seed=seed, client_ip=client_ip, now=now)
            repo.append_message(conn, session_id, 0, speaker=MERCHANT, text=greeting, turn=move.turn(now), at=now)
        return ChatStart(session_id, greeting, move.terms)

    # -- say ---------------------------------------------------------------------------------

    def say(self, session_id: str, text: str, *, checkout_url: Callable[[str], str]) -> ChatReply:
        self._check_message(text)
        with self.db.write() as conn:
            chat = repo.get_chat(conn, session_id, for_update=True)
            if chat is None:
                raise NotFound(f"unknown session_id: {session_id}")
            if chat.closed:
                raise Closed(CLOSED_MESSAGE)
            now = max(self.clock(), chat.last_activity_at)
            rows = repo.list_messages(conn, session_id)
            negotiation = Negotiation.replay(self.rules, filter(None, (r.to_turn() for r in rows)))
            if negotiation.expire_if_idle(now) is not None:
                repo.close_chat(conn, session_id, outcome="expired", now=now)
                expired = True
            else:
                expired = False
                reply = self._turn(conn, chat, rows, negotiation, text, now, checkout_url)
        if expired:  # raised outside the transaction so that the closure is committed
            raise Closed(CLOSED_MESSAGE)
        return reply

    def _check_message(self, text: str) -> None:
        if not text or not text.strip():
            raise InvalidInput("missing parameter: message")
        if len(text) > self.limits.max_message_length_chars:
            raise InvalidInput(f"message is too long: at most {self.limits.max_message_length_chars} characters")

    def _turn(self, conn, chat: repo.ChatRow, rows: list[repo.MessageRow], negotiation: Negotiation,
              text: str, now: datetime, checkout_url: Callable[[str], str]) -> ChatReply:  # type: ignore[no-untyped-def]
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
        move = agent.respond(negotiation, intent, last_message=shopper_messages >= cap,
                             messages_left=cap - shopper_messages)
        merchant_turn = move.turn(now)
        if merchant_turn is not None:
            negotiation.apply(merchant_turn)
        outcome = negotiation.outcome
        deal = None
        if outcome is not None and outcome.agreed:
            assert outcome.terms is not None
            deal = repo.insert_deal(conn, deal_id="deal_" + secrets.token_urlsafe(12), chat_id=chat.id,
                                    product_id=product.id, terms=outcome.terms, at=now)
        seq = rows[-1].seq + 1
        reply = self._renderers[product.id].render_fresh(
            move, _rng(chat.seed, seq + 1), previous=rows[-1].text,
            checkout_url=checkout_url(deal.id) if deal else None)
        repo.append_message(conn, chat.id, seq, speaker=SHOPPER, text=text, turn=shopper_turn, at=now)
        repo.append_message(conn, chat.id, seq + 1, speaker=MERCHANT, text=reply, turn=merchant_turn, at=now)
        repo.update_chat(conn, chat.id, now=now, shopper_messages=shopper_messages,
                         outcome=outcome.kind.value if outcome else None)
        closed = outcome is not None
        return ChatReply(reply, closed, None if closed else negotiation.standing.get(MERCHANT), deal)

    # -- reading -----------------------------------------------------------------------------

    def history(self, session_id: str) -> ChatHistory:
        with self.db.read() as conn:
            chat = repo.get_chat(conn, session_id)
            if chat is None:
                raise NotFound(f"unknown session_id: {session_id}")
            rows = repo.list_messages(conn, session_id)
            deal = repo.deal_for_chat(conn, session_id) if chat.outcome == "agreed" else None
        closed = chat.closed or chat.last_activity_at + timedelta(seconds=self.limits.session_idle_ttl_seconds) <= self.clock()
        return ChatHistory(session_id, chat.product_id, closed, [(r.speaker, r.text) for r in rows], deal)

    def deal(self, deal_id: str) -> repo.DealRow:
        with self.db.read() as conn:
            deal = repo.get_deal(conn, deal_id)
        if deal is None:
            raise NotFound(f"unknown deal: {deal_id}")
        return deal

    def sweep(self) -> int:
        """Close idle chats and forget chat starts older than the rate-limit window."""
        now = self.clock()
        with self.db.write() as conn:
            closed = repo.close_idle_chats(conn, idle_before=now - timedelta(seconds=self.limits.session_idle_ttl_seconds), now=now)
            repo.prune_starts(conn, now - timedelta(hours=1))
        return closed


def _margin_secret(database: Database, seed: int | None) -> bytes:
    """The secret the merchant's hidden floor margins derive from: the store's own, kept in its
    database; with a fixed seed, one derived from it, so that conversations stay reproducible."""
    if seed is not None:
        return hashlib.sha256(f"haggler floor margin, seed {seed}".encode()).digest()
    return store_secret(database, "floor_margin")


def _rng(seed: int, seq: int) -> random.Random:
    return random.Random(seed * 1_000_003 + seq)

