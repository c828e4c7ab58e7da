"""Repository for negotiate.v1 chats, their messages, deals and chat starts."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from datetime import datetime
from typing import Any, Sequence

from sqlalchemy import Connection, Row, and_, bindparam, insert, select, update

from haggler.engine import Action, Terms, Turn
from haggler.storage.database import lock_key
from haggler.storage.prepared import Prepared, flattened, multi_row_insert
from haggler.storage.rows import find_by_id
from haggler.storage.schema import chat_model_usage, chat_starts, chats, deals, messages


@dataclass(frozen=True, slots=True)
class ChatRow:
    id: str
    product_id: str
    seed: int
    status: str
    outcome: str | None
    shopper_messages: int
    created_at: datetime
    last_activity_at: datetime
    #: The negotiation's snapshot (``negotiate_v1/snapshot.py``), or None for a chat stored before them.
    state: str | None = None

    @property
    def closed(self) -> bool:
        return self.status == "closed"


@dataclass(frozen=True, slots=True)
class MessageRow:
    seq: int
    speaker: str
    text: str
    action: str | None
    price_cents: int | None
    currency: str | None
    extras: tuple[str, ...]
    final: bool
    created_at: datetime

    def to_turn(self) -> Turn | None:
        """The engine turn this message carried (None for a closing remark)."""
        if self.action is None:
            return None
        terms = None
        if self.price_cents is not None and self.currency is not None:
            terms = Terms(self.price_cents, self.currency, self.extras)
        return Turn(party=self.speaker, action=Action(self.action), at=self.created_at, terms=terms,
                    text=self.text, final=self.final)


@dataclass(frozen=True, slots=True)
class DealRow:
    id: str
    chat_id: str
    product_id: str
    price_cents: int
    currency: str
    extras: tuple[str, ...]
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ModelUsageRow:
    """A chat's spending on its merchant's model and the guards' interventions (all counts)."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_nanousd: int = 0
    fallbacks: int = 0
    clamps: int = 0
    rewrites: int = 0


# Statements on the turn path are compiled once and run on the driver (``storage/prepared.py``):
# through SQLAlchemy's execute, each cost more than running it on SQLite.
_INSERT_CHAT = Prepared(insert(chats))
_INSERT_DEAL = Prepared(insert(deals))
_INSERT_START = Prepared(insert(chat_starts).values(client_ip=bindparam("client_ip"), at=bindparam("at")))
_SELECT = select(chats.c.id, chats.c.product_id, chats.c.seed, chats.c.status, chats.c.outcome,
                 chats.c.shopper_messages, chats.c.created_at, chats.c.last_activity_at, chats.c.state
                 ).where(chats.c.id == bindparam("chat_id"))
_SELECT_CHAT = Prepared(_SELECT)
_SELECT_CHAT_FOR_UPDATE = Prepared(_SELECT.with_for_update())
_SELECT_MESSAGES = (
    select(messages.c.seq, messages.c.speaker, messages.c.text, messages.c.action, messages.c.price_cents,
           messages.c.currency, messages.c.extras, messages.c.final, messages.c.created_at)
    .where(messages.c.chat_id == bindparam("chat_id")).order_by(messages.c.seq)
)
# The index (client_ip, at) read backwards from the newest start: at most ``limit`` rows, however
# many starts the address made in the window.
_NTH_RECENT_START = Prepared(
    select(chat_starts.c.at)
    .where(and_(chat_starts.c.client_ip == bindparam("client_ip"), chat_starts.c.at > bindparam("since")))
    .order_by(chat_starts.c.at.desc()).limit(1).offset(bindparam("skip"))
)
_TOUCH = (update(chats).where(chats.c.id == bindparam("chat_id"))
          .values(last_activity_at=bindparam("now"), shopper_messages=bindparam("shopper_messages"),
                  state=bindparam("state")))
_TOUCH_CHAT = Prepared(_TOUCH)
_TOUCH_AND_CLOSE_CHAT = Prepared(_TOUCH.values(status="closed", outcome=bindparam("outcome"), closed_at=bindparam("now")))


def lock_client(conn: Connection, client_ip: str) -> None:
    """Serialize chat starts of one client across workers."""
    lock_key(conn, f"chat-start:{client_ip}")


def start_limited_by(conn: Connection, client_ip: str, since: datetime, limit: int) -> datetime | None:
    """The start that keeps ``client_ip`` at its ``limit`` of starts after ``since`` — its
    ``limit``-th most recent — or None while it is under the limit. Once that start leaves the
    window the address may start again. Reads at most ``limit`` index entries, not the window."""
    row = _NTH_RECENT_START.first(conn, {"client_ip": client_ip, "since": since, "skip": limit - 1})
    return row[0] if row else None


def record_start(conn: Connection, client_ip: str, at: datetime) -> None:
    _INSERT_START.run(conn, {"client_ip": client_ip, "at": at})


def prune_starts(conn: Connection, before: datetime) -> int:
    return conn.execute(chat_starts.delete().where(chat_starts.c.at <= before)).rowcount


def create_chat(conn: Connection, *, chat_id: str, product_id: str, seed: int, client_ip: str, now: datetime,
                state: str | None = None) -> None:
    """A new chat; ``state`` its negotiation's snapshot (None: replayed from its messages on its
    first turn)."""
    _INSERT_CHAT.run(conn, {
        "id": chat_id, "product_id": product_id, "seed": seed, "client_ip": client_ip, "status": "open",
        "outcome": None, "shopper_messages": 0, "created_at": now, "last_activity_at": now, "closed_at": None,
        "state": state,
    })


def get_chat(conn: Connection, chat_id: str, *, for_update: bool = False) -> ChatRow | None:
    # SQLite renders no FOR UPDATE: its write transactions are exclusive already.
    query = _SELECT_CHAT_FOR_UPDATE if for_update else _SELECT_CHAT
    row = query.first(conn, {"chat_id": chat_id})
    return ChatRow(*row) if row else None


def update_chat(conn: Connection, chat_id: str, *, now: datetime, shopper_messages: int,
                outcome: str | None, state: str) -> None:
    """Record a turn on the chat: its activity, its count, its snapshot, and its outcome when the
    turn ended it."""
    params = {"chat_id": chat_id, "now": now, "shopper_messages": shopper_messages, "state": state}
    if outcome is None:
        _TOUCH_CHAT.run(conn, params)
    else:
        _TOUCH_AND_CLOSE_CHAT.run(conn, {**params, "outcome": outcome})


def close_chat(conn: Connection, chat_id: str, *, outcome: str, now: datetime) -> None:
    conn.execute(update(chats).where(and_(chats.c.id == chat_id, chats.c.status == "open"))
                 .values(status="closed", outcome=outcome, closed_at=now))


def close_idle_chats(conn: Connection, *, idle_before: datetime, now: datetime) -> int:
    """Close every open chat whose last activity is at or before ``idle_before``. Such a chat
    started at or before it too: the condition on ``created_at`` changes nothing but lets the
    open chats' index (status, created_at) find the candidates."""
    result = conn.execute(
        update(chats)
        .where(and_(chats.c.status == "open", chats.c.created_at <= idle_before,
                    chats.c.last_activity_at <= idle_before))
        .values(status="closed", outcome="expired", closed_at=now)
    )
    return result.rowcount


def _extras_json(extras: Sequence[str]) -> str:
    return json.dumps(list(extras), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to store: who said what, and the engine turn it carried (None for a closing remark)."""

    seq: int
    speaker: str
    text: str
    turn: Turn | None


def append_messages(conn: Connection, chat_id: str, new: Sequence[NewMessage], at: datetime) -> None:
    """Store ``new`` in one statement (a turn stores the shopper's message and the reply together)."""
    rows = []
    for message in new:
        turn = message.turn
        terms = turn.terms if turn is not None else None
        rows.append({
            "chat_id": chat_id, "seq": message.seq, "speaker": message.speaker, "text": message.text,
            "action": turn.action.value if turn is not None else None,
            "price_cents": terms.price_cents if terms else None,
            "currency": terms.currency if terms else None,
            "extras": _extras_json(terms.extras) if terms else None,
            "final": bool(turn and turn.final),
            "created_at": at,
        })
    multi_row_insert(messages, len(rows)).run(conn, flattened(rows))


def list_messages(conn: Connection, chat_id: str) -> list[MessageRow]:
    rows = conn.execute(_SELECT_MESSAGES, {"chat_id": chat_id})
    return [MessageRow(r.seq, r.speaker, r.text, r.action, r.price_cents, r.currency,
                       tuple(json.loads(r.extras)) if r.extras else (), bool(r.final), r.created_at)
            for r in rows]


def insert_deal(conn: Connection, *, deal_id: str, chat_id: str, product_id: str, terms: Terms, at: datetime) -> DealRow:
    _INSERT_DEAL.run(conn, {
        "id": deal_id, "chat_id": chat_id, "product_id": product_id, "price_cents": terms.price_cents,
        "currency": terms.currency, "extras": _extras_json(terms.extras), "created_at": at,
    })
    return DealRow(deal_id, chat_id, product_id, terms.price_cents, terms.currency, terms.extras, at)


def _deal(row: Row[Any]) -> DealRow:
    return DealRow(row.id, row.chat_id, row.product_id, row.price_cents, row.currency,
                   tuple(json.loads(row.extras)), row.created_at)


def get_deal(conn: Connection, deal_id: str) -> DealRow | None:
    row = find_by_id(conn, deals, deal_id)
    return _deal(row) if row else None


def deal_for_chat(conn: Connection, chat_id: str) -> DealRow | None:
    row = conn.execute(select(deals).where(deals.c.chat_id == chat_id)).first()
    return _deal(row) if row else None


def list_deals(conn: Connection, *, limit: int | None = None, offset: int = 0) -> list[DealRow]:
    """Deals newest first (ties by id, so pages never overlap): ``offset`` skipped, at most ``limit``."""
    query = select(deals).order_by(deals.c.created_at.desc(), deals.c.id).offset(offset or None)
    if limit is not None:
        query = query.limit(limit)
    return [_deal(r) for r in conn.execute(query)]


_USAGE_COLUMNS = tuple(f.name for f in fields(ModelUsageRow))


def model_usage(conn: Connection, chat_id: str) -> ModelUsageRow:
    """What the chat's merchant spent on its model so far (zeros before its first model call)."""
    row = conn.execute(select(*(chat_model_usage.c[name] for name in _USAGE_COLUMNS))
                       .where(chat_model_usage.c.chat_id == chat_id)).first()
    return ModelUsageRow(*row) if row else ModelUsageRow()


def add_model_usage(conn: Connection, chat_id: str, spent: ModelUsageRow) -> None:
    """Add one turn's spending to the chat's row (made on its first turn); called with the chat
    locked, so the insert of a first row cannot race another."""
    values = asdict(spent)
    columns = chat_model_usage.c
    updated = conn.execute(update(chat_model_usage).where(columns.chat_id == chat_id)
                           .values({columns[name]: columns[name] + value for name, value in values.items()}))
    if updated.rowcount == 0:
        conn.execute(insert(chat_model_usage).values(chat_id=chat_id, **values))
