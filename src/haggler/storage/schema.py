"""The tables. Alembic migrations in ``migrations/versions`` create exactly these; a test
compares the two so they cannot drift."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Boolean,
    Column,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    TypeDecorator,
)

metadata = MetaData()


class UTCDateTime(TypeDecorator[datetime]):
    """Timestamps are always timezone-aware UTC in Python, whatever the database returns
    (SQLite has no time zones and hands back naive values)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: haggler stores aware UTC timestamps only")
        return value.astimezone(timezone.utc)

    def process_result_value(self, value: datetime | None, dialect: object) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


chats = Table(
    "chats",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("product_id", String(100), nullable=False),
    Column("seed", BigInteger, nullable=False),
    Column("client_ip", String(64), nullable=False),
    # open | closed
    Column("status", String(16), nullable=False),
    # agreed | rejected | turn_cap | expired, once closed
    Column("outcome", String(16), nullable=True),
    Column("shopper_messages", Integer, nullable=False, default=0),
    Column("created_at", UTCDateTime, nullable=False),
    Column("last_activity_at", UTCDateTime, nullable=False),
    Column("closed_at", UTCDateTime, nullable=True),
    # The negotiation as its messages leave it (negotiate_v1/snapshot.py), JSON, rewritten with
    # every turn so that a turn reads one row instead of the whole chat; NULL for a chat stored
    # before snapshots, which is replayed from its messages once.
    Column("state", Text, nullable=True),
)
# The idle sweep's index: open chats by when they started (a chat idle since a time started before
# it). Not by last activity, which every turn changes: an index on it cost each turn two more pages
# written (SQLite) and every chat row update its index entries (PostgreSQL: no HOT update).
Index("ix_chats_open_created", chats.c.status, chats.c.created_at)

# What a chat's merchant spent on a language model (issue 16), one row per chat that used one:
# apart from ``chats`` so that the deterministic merchant's turn path writes nothing more.
chat_model_usage = Table(
    "chat_model_usage",
    metadata,
    Column("chat_id", String(64), ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True),
    Column("calls", Integer, nullable=False),
    Column("input_tokens", BigInteger, nullable=False),
    Column("output_tokens", BigInteger, nullable=False),
    Column("cost_nanousd", BigInteger, nullable=False),
    # turns the deterministic merchant took (the model failed, was out of budget or proposed
    # something unusable), prices the guard raised to the floor, texts the guard replaced
    Column("fallbacks", Integer, nullable=False),
    Column("clamps", Integer, nullable=False),
    Column("rewrites", Integer, nullable=False),
)

messages = Table(
    "messages",
    metadata,
    Column("chat_id", String(64), ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    # merchant | shopper
    Column("speaker", String(16), nullable=False),
    Column("text", Text, nullable=False),
    # The engine action of this turn (offer | message | accept | reject); NULL for a closing
    # remark made after the negotiation had already ended.
    Column("action", String(16), nullable=True),
    Column("price_cents", BigInteger, nullable=True),
    Column("currency", String(3), nullable=True),
    Column("extras", Text, nullable=True),  # JSON list of strings
    Column("final", Boolean, nullable=False, default=False),
    Column("created_at", UTCDateTime, nullable=False),
    # SQLite: the rows kept in their primary key's order, one B-tree instead of a table and an
    # index beside it, so a turn's two messages write one page fewer (migration 0011).
    sqlite_with_rowid=False,
)

deals = Table(
    "deals",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("chat_id", String(64), ForeignKey("chats.id"), nullable=False, unique=True),
    Column("product_id", String(100), nullable=False),
    Column("price_cents", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("extras", Text, nullable=False),  # JSON list of strings
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_deals_created_at", deals.c.created_at)

chat_starts = Table(
    "chat_starts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("client_ip", String(64), nullable=False),
    Column("at", UTCDateTime, nullable=False),
)
Index("ix_chat_starts_ip_at", chat_starts.c.client_ip, chat_starts.c.at)

# -- the agents.json surface ---------------------------------------------------------------------

agent_sessions = Table(
    "agent_sessions",
    metadata,
    # The public id (audit artifacts are fetched by it); the token itself is never stored.
    Column("id", String(64), primary_key=True),
    Column("token_hash", String(64), nullable=False, unique=True),  # SHA-256 hex of the token
    Column("client", String(64), nullable=False),
    Column("agent_name", String(200), nullable=True),
    Column("agent_version", String(100), nullable=True),
    Column("purpose", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    # A hard deadline: activity never extends it.
    Column("expires_at", UTCDateTime, nullable=False),
    Column("ended_at", UTCDateTime, nullable=True),
    # deleted | expired | checkout
    Column("end_reason", String(16), nullable=True),
)
Index("ix_agent_sessions_client_open", agent_sessions.c.client, agent_sessions.c.ended_at,
      agent_sessions.c.expires_at)
Index("ix_agent_sessions_open_expiry", agent_sessions.c.ended_at, agent_sessions.c.expires_at)

# Requests per client per minute, kept in the database so that every worker counts the same.
rate_windows = Table(
    "rate_windows",
    metadata,
    Column("client", String(64), primary_key=True),
    Column("window_start", UTCDateTime, primary_key=True),
    Column("count", Integer, nullable=False),
)
Index("ix_rate_windows_start", rate_windows.c.window_start)

cart_items = Table(
    "cart_items",
    metadata,
    Column("session_id", String(64), ForeignKey("agent_sessions.id"), primary_key=True),
    Column("product_id", String(100), primary_key=True),
    Column("quantity", Integer, nullable=False),
    Column("unit_price_cents", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("extras", Text, nullable=False),  # JSON list of strings
    # The negotiate.v1 deal whose price this line carries (one unit), if any.
    Column("deal_id", String(64), ForeignKey("deals.id"), nullable=True, unique=True),
    Column("added_at", UTCDateTime, nullable=False),
)

# A deal is redeemed once — into one agent session's cart, or bought at its own checkout page
# (session_id NULL) — and the primary key makes that atomic on any worker.
deal_redemptions = Table(
    "deal_redemptions",
    metadata,
    Column("deal_id", String(64), ForeignKey("deals.id"), primary_key=True),
    Column("session_id", String(64), ForeignKey("agent_sessions.id"), nullable=True),
    Column("redeemed_at", UTCDateTime, nullable=False),
)

checkouts = Table(
    "checkouts",
    metadata,
    Column("id", String(64), primary_key=True),  # the unguessable part of the checkout URL
    Column("session_id", String(64), ForeignKey("agent_sessions.id"), nullable=False, unique=True),
    Column("lines", Text, nullable=False),  # JSON: the cart as the human will see it
    Column("total_cents", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# -- agentic checkout (issue 31) --------------------------------------------------------------------
# What a merchant sells through the checkout protocols (UCP, later ACP), loaded by `haggler ucp seed`
# from a data set in the UCP conformance suite's CSV layout; money in minor units. Protocol-neutral:
# haggler/commerce reads them, each protocol package only shapes them for its wire.

commerce_products = Table(
    "commerce_products",
    metadata,
    Column("id", String(100), primary_key=True),
    Column("title", String(300), nullable=False),
    Column("price_cents", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("image_url", Text, nullable=True),
)

# Units on hand; a product without a row here is not stock-tracked.
commerce_inventory = Table(
    "commerce_inventory",
    metadata,
    Column("product_id", String(100), ForeignKey("commerce_products.id"), primary_key=True),
    Column("quantity", BigInteger, nullable=False),
)

commerce_discounts = Table(
    "commerce_discounts",
    metadata,
    # Matched case-insensitively: ``code_key`` is the code in lower case.
    Column("code_key", String(100), primary_key=True),
    Column("code", String(100), nullable=False),
    Column("kind", String(16), nullable=False),  # percentage | fixed_amount
    Column("value", BigInteger, nullable=False),  # percent, or minor units
    Column("description", String(300), nullable=False),
)

commerce_promotions = Table(
    "commerce_promotions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("kind", String(32), nullable=False),  # free_shipping
    Column("min_subtotal_cents", BigInteger, nullable=True),
    Column("eligible_item_ids", Text, nullable=True),  # JSON list of product ids
    Column("description", String(300), nullable=False),
)

commerce_shipping_rates = Table(
    "commerce_shipping_rates",
    metadata,
    Column("id", String(64), primary_key=True),
    # An ISO 3166 alpha-2 code, or "default": a country's own rate replaces the default one of the
    # same service level.
    Column("country_code", String(16), nullable=False),
    Column("service_level", String(32), nullable=False),
    Column("price_cents", BigInteger, nullable=False),
    Column("title", String(300), nullable=False),
)

commerce_customers = Table(
    "commerce_customers",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("name", String(200), nullable=True),
    Column("email", String(254), nullable=False, unique=True),
)

commerce_addresses = Table(
    "commerce_addresses",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("customer_id", String(64), ForeignKey("commerce_customers.id"), nullable=False),
    Column("street_address", String(300), nullable=True),
    Column("locality", String(200), nullable=True),
    Column("region", String(200), nullable=True),
    Column("postal_code", String(32), nullable=True),
    Column("country", String(8), nullable=True),
)
Index("ix_commerce_addresses_customer", commerce_addresses.c.customer_id)

# Instruments a buyer has on file: a completion naming one by id without a credential pays with
# its token.
commerce_payment_instruments = Table(
    "commerce_payment_instruments",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("kind", String(32), nullable=False),
    Column("brand", String(64), nullable=True),
    Column("last_digits", String(8), nullable=True),
    Column("token", String(255), nullable=False),
    Column("handler_id", String(100), nullable=False),
)

# A checkout session of an agentic checkout protocol (``protocol``: ucp, later acp). ``state`` is
# the session as haggler/commerce/sessions.py keeps it (JSON); the order placed for it points back
# here (orders.session_id).
checkout_sessions = Table(
    "checkout_sessions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("protocol", String(8), nullable=False),
    Column("status", String(32), nullable=False),
    Column("currency", String(3), nullable=False),
    Column("state", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),
)

orders = Table(
    "orders",
    metadata,
    Column("id", String(64), primary_key=True),
    # An order comes from an agent's cart checkout, a deal closed in chat, or an agentic checkout
    # session; one order per checkout, per deal and per session: placing any twice finds this row.
    Column("checkout_id", String(64), ForeignKey("checkouts.id"), nullable=True, unique=True),
    Column("deal_id", String(64), ForeignKey("deals.id"), nullable=True, unique=True),
    Column("session_id", String(64), ForeignKey("checkout_sessions.id"), nullable=True, unique=True),
    # Which door it came through: chat (the deal's checkout page), cart (agents.json), ucp, acp.
    Column("door", String(8), nullable=False),
    Column("lines", Text, nullable=False),
    Column("total_cents", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    # Who buys and where it goes, from the checkout form (NULL on orders placed before it had one).
    Column("buyer_name", String(200), nullable=True),
    Column("buyer_email", String(254), nullable=True),
    Column("ship_to", Text, nullable=True),
    Column("placed_at", UTCDateTime, nullable=False),
    # How it was paid (NULL: no payment was taken at the door) and the processor's reference.
    Column("payment_handler", String(100), nullable=True),
    Column("payment_reference", String(255), nullable=True),
    # What a checkout protocol records beyond the lines (JSON): fulfillment chosen and events,
    # adjustments, discounts, the AP2 mandate (haggler/commerce/sessions.py).
    Column("details", Text, nullable=True),
)
Index("ix_orders_placed_at", orders.c.placed_at)

audit_events = Table(
    "audit_events",
    metadata,
    Column("session_id", String(64), ForeignKey("agent_sessions.id"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("event", Text, nullable=False),  # the event as published, JSON
    Column("hash", String(64), nullable=False),
)

audit_artifacts = Table(
    "audit_artifacts",
    metadata,
    Column("session_id", String(64), ForeignKey("agent_sessions.id"), primary_key=True),
    Column("artifact", Text, nullable=False),  # the signed artifact, JSON
    Column("created_at", UTCDateTime, nullable=False),
)

# -- the transactions exchange (/v1) ---------------------------------------------------------------

exchange_agents = Table(
    "exchange_agents",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False),
    # SHA-256 hex of the API key; the key itself is shown once and never stored.
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
)

# Integer cents. available + held over all wallets always equals the total deposited.
wallets = Table(
    "wallets",
    metadata,
    Column("agent_id", String(40), ForeignKey("exchange_agents.id"), primary_key=True),
    Column("available_cents", BigInteger, nullable=False),
    Column("held_cents", BigInteger, nullable=False),
    CheckConstraint("available_cents >= 0 AND held_cents >= 0", name="ck_wallets_not_negative"),
)

# Every movement of money, one row per wallet it touches, with the balances it left behind.
ledger_entries = Table(
    "ledger_entries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("agent_id", String(40), ForeignKey("exchange_agents.id"), nullable=False),
    # deposit | fund_hold | release | capture
    Column("kind", String(16), nullable=False),
    Column("available_delta_cents", BigInteger, nullable=False),
    Column("held_delta_cents", BigInteger, nullable=False),
    Column("available_after_cents", BigInteger, nullable=False),
    Column("held_after_cents", BigInteger, nullable=False),
    Column("transaction_id", String(40), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_ledger_entries_agent", ledger_entries.c.agent_id, ledger_entries.c.id)

services = Table(
    "services",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("provider_id", String(40), ForeignKey("exchange_agents.id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("description", Text, nullable=False),
    Column("base_price_cents", BigInteger, nullable=False),
    Column("price_model", String(16), nullable=False),  # fixed | negotiable
    Column("sla", Text, nullable=False),  # JSON: latencyMs, timeoutMs, retries
    Column("created_at", UTCDateTime, nullable=False),
)

exchange_transactions = Table(
    "exchange_transactions",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("service_id", String(40), ForeignKey("services.id"), nullable=False),
    Column("consumer_id", String(40), ForeignKey("exchange_agents.id"), nullable=False),
    Column("provider_id", String(40), ForeignKey("exchange_agents.id"), nullable=False),
    # negotiating | matched | completed | cancelled
    Column("status", String(16), nullable=False),
    Column("max_price_cents", BigInteger, nullable=False),
    Column("input", Text, nullable=False),  # JSON
    # The agreed terms, once matched.
    Column("price_cents", BigInteger, nullable=True),
    Column("sla", Text, nullable=True),
    Column("scope_modifications", Text, nullable=True),
    # What the consumer's wallet holds for this transaction right now.
    Column("held_cents", BigInteger, nullable=False),
    Column("output", Text, nullable=True),  # JSON, from the provider on completion
    # Why it ended: rejected | withdrawn | round_cap | offer_expired | cancelled | completed
    Column("end_reason", String(16), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    # When the offer on the table expires, while negotiating.
    Column("offer_expires_at", UTCDateTime, nullable=True),
)
Index("ix_exchange_transactions_open_expiry", exchange_transactions.c.status,
      exchange_transactions.c.offer_expires_at)

negotiation_messages = Table(
    "negotiation_messages",
    metadata,
    Column("transaction_id", String(40), ForeignKey("exchange_transactions.id"), primary_key=True),
    Column("seq", Integer, primary_key=True),
    Column("round", Integer, nullable=False),  # 0 for the consumer's initial offer
    Column("sender", String(16), nullable=False),  # consumer | provider
    Column("type", String(16), nullable=False),
    Column("price_cents", BigInteger, nullable=True),
    Column("sla", Text, nullable=True),
    Column("scope_modifications", Text, nullable=True),
    Column("message", Text, nullable=True),
    Column("expires_at", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
)

# Order events owed to a checkout protocol's webhook receiver or to the buyer's mailbox
# (commerce/order_events.py): recorded in
# the transaction that places or changes the order, sent after the answer, retried by the store's
# sweep until taken or given up; one per door, order and kind (its id is made from them).
order_events = Table(
    "order_events",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("door", String(8), nullable=False),
    Column("order_id", String(64), ForeignKey("orders.id"), nullable=False),
    Column("kind", String(32), nullable=False),
    # The base URL the order's links are made from (the checkout's own), NULL: the store's default.
    Column("base", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    # When it is next due: a sender holds it by moving this past its attempt, under a token of its
    # own (held_by), so that a sender that read the row before cannot hold it too.
    Column("next_at", UTCDateTime, nullable=False),
    Column("held_by", String(32), nullable=True),
    Column("attempts", Integer, nullable=False),
    Column("sent_at", UTCDateTime, nullable=True),
    Column("gave_up_at", UTCDateTime, nullable=True),
    Column("last_error", String(300), nullable=True),
)
Index("ix_order_events_due", order_events.c.sent_at, order_events.c.gave_up_at, order_events.c.next_at)

# Idempotency-Key records, per agent: the request's fingerprint and, once done, its response.
idempotency_keys = Table(
    "idempotency_keys",
    metadata,
    Column("agent_id", String(40), primary_key=True),
    Column("key", String(255), primary_key=True),
    Column("request_hash", String(64), nullable=False),
    Column("status_code", Integer, nullable=True),  # None while the first request is in flight
    Column("body", Text, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
)

# Secrets the store draws once and keeps (the merchant's hidden floor margins derive from one),
# in the database so that every worker uses the same.
store_secrets = Table(
    "store_secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", String(128), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

# -- match negotiation (spec 002) ------------------------------------------------------------------
# People, their agents, the opportunities proposed between them, and each opportunity's
# negotiation stored as an A2A conversation: a task, one message per turn, an outcome artifact.

match_users = Table(
    "match_users",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("name", String(200), nullable=False),
    Column("profile", Text, nullable=False),  # JSON object, free-form
    Column("intents", Text, nullable=False),  # JSON list of {description, tags}
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
)

match_agents = Table(
    "match_agents",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("user_id", String(40), ForeignKey("match_users.id"), nullable=False),
    Column("name", String(200), nullable=False),
    Column("negotiation_mode", String(16), nullable=False),  # enabled | disabled
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_match_agents_user", match_agents.c.user_id)

opportunities = Table(
    "opportunities",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("source_user_id", String(40), ForeignKey("match_users.id"), nullable=False),
    Column("candidate_user_id", String(40), ForeignKey("match_users.id"), nullable=False),
    Column("seed", Text, nullable=False),  # JSON seed assessment, as given
    Column("score", Integer, nullable=False),  # the evaluator's; negotiation never re-scores
    Column("discovery_query", Text, nullable=True),
    # negotiating | pending | rejected | stalled | accepted | declined
    Column("status", String(16), nullable=False),
    Column("negotiation_id", String(40), nullable=False),
    Column("agreed_roles", Text, nullable=True),  # JSON [{userId, role}], once pending
    Column("source_answer", String(16), nullable=True),  # accept | decline
    Column("candidate_answer", String(16), nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)

a2a_conversations = Table(
    "a2a_conversations",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("participants", Text, nullable=False),  # JSON ["agent:{userId}", "agent:{userId}"]
    Column("created_at", UTCDateTime, nullable=False),
)

a2a_tasks = Table(
    "a2a_tasks",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("conversation_id", String(40), ForeignKey("a2a_conversations.id"), nullable=False),
    Column("type", String(32), nullable=False),  # negotiation
    # submitted | working | waiting_for_agent | claimed | input_required (v2 ask_user) | completed
    Column("state", String(24), nullable=False),
    Column("opportunity_id", String(40), nullable=False),
    Column("source_user_id", String(40), nullable=False),
    Column("candidate_user_id", String(40), nullable=False),
    # Whether each side had a personal agent when the negotiation started (fixes the cap).
    Column("source_personal", Boolean, nullable=False),
    Column("candidate_personal", Boolean, nullable=False),
    Column("max_turns", Integer, nullable=True),  # None: no cap; never 0
    # The parked turn: whose it is, who claimed it, and the deadlines.
    Column("waiting_user_id", String(40), nullable=True),
    Column("claimed_by", String(40), nullable=True),
    Column("claim_deadline", UTCDateTime, nullable=True),
    Column("parked_at", UTCDateTime, nullable=True),
    Column("park_deadline", UTCDateTime, nullable=True),
    Column("expires_at", UTCDateTime, nullable=True),  # personal-vs-personal timeout
    Column("turn_context", Text, nullable=True),  # JSON, while parked or claimed
    # Negotiations v2 (protocols/matching/v2.py): the version, stamped once; the outreach screen's
    # decision (reach_out | pass); the ask_user consultations (JSON list) and the open one's deadline.
    Column("protocol_version", String(4), nullable=False, server_default="v1"),
    Column("screen", String(16), nullable=True),
    Column("consultations", Text, nullable=True),
    Column("answer_deadline", UTCDateTime, nullable=True),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_a2a_tasks_pickup", a2a_tasks.c.waiting_user_id, a2a_tasks.c.state, a2a_tasks.c.parked_at)
Index("ix_a2a_tasks_user_park_deadline", a2a_tasks.c.waiting_user_id, a2a_tasks.c.state,
      a2a_tasks.c.park_deadline)
# The sweep's indexes of deadlines (migration 0019) hold only the tasks they can find: a deadline
# is set only in the states it belongs to (a claim's while claimed, a parked turn's while waiting
# or claimed, an answer window's while input_required), so each is an index of that deadline over
# the rows where it is set, which the sweep's ``deadline <= now`` implies (on SQLite and PostgreSQL
# alike); the timeout's, of the negotiations that have one. A turn changes the state three times,
# and an index of it is written each time: only the pickup's two, which a polling agent needs, and
# the timeout's, over the few negotiations with one, have it now (the starts not yet run, with no
# user waiting, are found through the pickup's). A partial index must not test ``state`` against
# a value: SQLite would prepare every statement comparing ``state`` with a bound parameter again
# on each run, to see whether the index applies.


def _where_set(name: str, *columns: Column[Any]) -> Index:
    """An index of ``columns`` over the rows where the last of them is set."""
    where = columns[-1].is_not(None)
    return Index(name, *columns, sqlite_where=where, postgresql_where=where)


_where_set("ix_a2a_tasks_park_deadline", a2a_tasks.c.park_deadline)
_where_set("ix_a2a_tasks_claim_deadline", a2a_tasks.c.claim_deadline)
_where_set("ix_a2a_tasks_answer_deadline", a2a_tasks.c.answer_deadline)
_where_set("ix_a2a_tasks_expiry", a2a_tasks.c.state, a2a_tasks.c.expires_at)
Index("ix_a2a_tasks_opportunity", a2a_tasks.c.opportunity_id)

a2a_messages = Table(
    "a2a_messages",
    metadata,
    Column("task_id", String(40), ForeignKey("a2a_tasks.id"), primary_key=True),
    Column("seq", Integer, primary_key=True),  # 1-based turn number
    Column("id", String(40), nullable=False, unique=True),
    Column("sender", String(40), nullable=False),  # the user id whose side took the turn
    Column("taken_by", String(16), nullable=False),  # system | personal
    Column("agent_id", String(40), nullable=True),  # the personal agent, when one took it
    Column("data", Text, nullable=False),  # JSON {action, assessment, message?}
    Column("created_at", UTCDateTime, nullable=False),
)

a2a_artifacts = Table(
    "a2a_artifacts",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("task_id", String(40), ForeignKey("a2a_tasks.id"), nullable=False, unique=True),
    Column("name", String(64), nullable=False),
    Column("data", Text, nullable=False),  # JSON outcome
    Column("created_at", UTCDateTime, nullable=False),
)

# -- the agent-native market (/market, spec 003) ------------------------------------------------------
# Amounts are integer cents; every message kept is the signed JSON as it arrived, so that anyone
# can check its signature again. Hidden state (a listing's minPrice, a mandate's constraints)
# lives in these rows and leaves only through the owner-only views.

market_agents = Table(
    "market_agents",
    metadata,
    Column("id", String(128), primary_key=True),  # the agentId the agent chose
    Column("matrix_id", String(255), nullable=True),
    Column("public_key", String(66), nullable=False),  # "0x" + 64 hex: signs the agent's messages
    Column("owner_public_key", String(66), nullable=False),  # signs its mandates and approvals
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("created_at", UTCDateTime, nullable=False),
)

market_mandates = Table(
    "market_mandates",
    metadata,
    Column("agent_id", String(128), ForeignKey("market_agents.id"), primary_key=True),
    Column("issued_at", UTCDateTime, nullable=False),
    Column("mandate", Text, nullable=False),  # the owner-signed mandate, JSON
    Column("updated_at", UTCDateTime, nullable=False),
)

market_listings = Table(
    "market_listings",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("seller_id", String(128), ForeignKey("market_agents.id"), nullable=False),
    Column("category", String(64), nullable=False),
    Column("subcategory", String(64), nullable=False),
    Column("name", String(64), nullable=False),
    Column("condition", String(16), nullable=False),
    Column("ask_cents", BigInteger, nullable=False),
    Column("floor_cents", BigInteger, nullable=False),  # the embedded ownerMandate's minAcceptablePrice
    Column("mandate_issued_at", UTCDateTime, nullable=True),  # its issuedAt: a revision may not carry an older one
    Column("shipping_cents", BigInteger, nullable=False, server_default="0"),  # logistics.shippingCost
    Column("version", Integer, nullable=False, server_default="1"),  # 1, then +1 on every revision
    Column("item_hash", String(64), nullable=False),  # SHA-256 of the item, logistics and currency
    Column("currency", String(3), nullable=False),
    Column("negotiable", Boolean, nullable=False),
    Column("available_until", UTCDateTime, nullable=True),  # the end of logistics.availableUntil
    Column("status", String(16), nullable=False),  # live | sold
    Column("sent_at", UTCDateTime, nullable=False),  # the message's timestamp: a revision must be newer
    Column("listed_at", UTCDateTime, nullable=False),  # when the market took this ask (post or revision)
    Column("message", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_market_listings_item", market_listings.c.category, market_listings.c.subcategory, market_listings.c.name)
Index("ix_market_listings_seller", market_listings.c.seller_id)

market_wanted = Table(
    "market_wanted",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("buyer_id", String(128), ForeignKey("market_agents.id"), nullable=False),
    Column("max_cents", BigInteger, nullable=False),
    Column("currency", String(3), nullable=False),
    Column("active_until", UTCDateTime, nullable=False),
    Column("message", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_market_wanted_active", market_wanted.c.active_until)

market_requests = Table(
    "market_requests",
    metadata,
    Column("id", String(128), primary_key=True),  # the buyer's requestId
    Column("listing_id", String(128), ForeignKey("market_listings.id"), nullable=False),
    Column("buyer_id", String(128), ForeignKey("market_agents.id"), nullable=False),
    Column("seller_id", String(128), ForeignKey("market_agents.id"), nullable=False),
    Column("proposed_protocol", String(24), nullable=False),
    Column("protocol", String(24), nullable=True),  # the agreed one
    Column("state", String(16), nullable=False),  # proposed | agreed | closed | failed
    Column("item_hash", String(64), nullable=True),  # the listing's item_hash when the buyer made contact
    Column("message", Text, nullable=False),  # the contact_request
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
)
Index("ix_market_requests_listing", market_requests.c.listing_id)

market_bids = Table(
    "market_bids",
    metadata,
    Column("request_id", String(128), ForeignKey("market_requests.id"), primary_key=True),
    Column("party", String(8), primary_key=True),  # buyer | seller
    Column("limit_cents", BigInteger, nullable=False),  # hidden from the other party, always
    Column("message", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

market_offers = Table(
    "market_offers",
    metadata,
    Column("request_id", String(128), ForeignKey("market_requests.id"), primary_key=True),
    Column("seq", Integer, primary_key=True),  # 1-based turn number
    Column("party", String(8), nullable=False),
    Column("action", String(8), nullable=False),  # offer | accept | reject
    Column("price_cents", BigInteger, nullable=True),
    Column("message", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)

market_deals = Table(
    "market_deals",
    metadata,
    Column("id", String(40), primary_key=True),
    Column("request_id", String(160), nullable=False, unique=True),
    Column("listing_id", String(200), nullable=False),
    Column("buyer_id", String(128), ForeignKey("market_agents.id"), nullable=False),
    Column("seller_id", String(128), ForeignKey("market_agents.id"), nullable=False),
    Column("protocol", String(24), nullable=False),
    Column("price_cents", BigInteger, nullable=False),  # a unit's
    Column("quantity", Integer, nullable=False, server_default="1"),
    Column("total_cents", BigInteger, nullable=False),  # price × quantity + shipping: what budgets sum
    Column("currency", String(3), nullable=False),
    Column("deal", Text, nullable=False),  # the deal_confirmed both parties sign, without signatures
    Column("buyer_signature", String(130), nullable=True),
    Column("seller_signature", String(130), nullable=True),
    Column("approvals", Text, nullable=False),  # JSON {party: {publicKey, signature}}: owners' approvals
    Column("needs_approval", Text, nullable=False),  # JSON list of the parties whose owner must approve
    # awaiting_signatures | awaiting_owner_approval (pending) → confirmed | expired | cancelled | void
    Column("status", String(24), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
    Column("updated_at", UTCDateTime, nullable=False),
    Column("expires_at", UTCDateTime, nullable=False),  # a pending deal then ends as expired
)
Index("ix_market_deals_buyer", market_deals.c.buyer_id)
Index("ix_market_deals_due", market_deals.c.status, market_deals.c.expires_at)  # the expiry sweep
Index("ix_market_deals_seller", market_deals.c.seller_id)
Index("ix_market_deals_buyer_status", market_deals.c.buyer_id, market_deals.c.status)
Index("ix_market_deals_seller_status", market_deals.c.seller_id, market_deals.c.status)

market_orders = Table(
    "market_orders",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("agent_id", String(128), ForeignKey("market_agents.id"), nullable=False),
    Column("item", String(194), nullable=False),
    Column("side", String(4), nullable=False),  # buy | sell
    Column("price_cents", BigInteger, nullable=False),
    Column("quantity", Integer, nullable=False),
    Column("remaining", Integer, nullable=False),
    Column("seq", BigInteger, nullable=False),  # arrival order in its book: time priority
    Column("status", String(12), nullable=False),  # open | filled | cancelled
    Column("currency", String(3), nullable=False),
    Column("message", Text, nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_market_orders_book", market_orders.c.item, market_orders.c.status)

market_inbox = Table(
    "market_inbox",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),  # the cursor: global, increasing
    Column("agent_id", String(128), ForeignKey("market_agents.id"), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("body", Text, nullable=False),  # JSON
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_market_inbox_agent", market_inbox.c.agent_id, market_inbox.c.seq)

market_audit = Table(
    "market_audit",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("agent_id", String(128), nullable=True),  # whose action it was, when known
    Column("event", String(32), nullable=False),  # mandate_violation | suspicious_text | bad_signature
    Column("detail", Text, nullable=False),  # JSON
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_market_audit_agent", market_audit.c.agent_id, market_audit.c.seq)

# -- the market over Matrix (issue 32: haggler/matrix/) ------------------------------------------------
# The market bot is a Matrix client whose whole state lives here, beside the market's, so that a
# restart loses nothing: where its /sync stands, every event it took (processed once, by event id),
# the rooms it made, and what it still owes a room (a durable outbox, sent in order).

matrix_state = Table(
    "matrix_state",
    metadata,
    Column("bot", String(255), primary_key=True),  # the bot's Matrix user id
    Column("since", Text, nullable=True),  # the next_batch token of the last /sync it stored
    Column("inbox_seq", Integer, nullable=False, server_default="0"),  # market_inbox rows relayed up to here
    Column("updated_at", UTCDateTime, nullable=False),
)

matrix_events = Table(
    "matrix_events",
    metadata,
    Column("event_id", String(255), primary_key=True),
    Column("bot", String(255), nullable=False),
    Column("room_id", String(255), nullable=False),
    Column("sender", String(255), nullable=False),
    Column("content", Text, nullable=False),  # JSON, as the homeserver served it
    Column("received_at", UTCDateTime, nullable=False),
    Column("status", String(16), nullable=False),  # pending | done | dropped
    Column("outcome", String(64), nullable=True),  # what the bot made of it: the market's answer, in a word
    Column("done_at", UTCDateTime, nullable=True),
)
Index("ix_matrix_events_pending", matrix_events.c.bot, matrix_events.c.status, matrix_events.c.received_at)

matrix_rooms = Table(
    "matrix_rooms",
    metadata,
    Column("bot", String(255), primary_key=True),
    Column("key", String(200), primary_key=True),  # inbox:<agentId> | request:<requestId>
    Column("room_id", String(255), nullable=False),
    Column("created_at", UTCDateTime, nullable=False),
)
Index("ix_matrix_rooms_room", matrix_rooms.c.room_id)

matrix_outbox = Table(
    "matrix_outbox",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),  # also the send's transaction id
    Column("bot", String(255), nullable=False),
    Column("room", String(255), nullable=False),  # a room id (!…), or a matrix_rooms key to make first
    Column("invite", Text, nullable=True),  # JSON list of user ids, for a room made from a key
    Column("content", Text, nullable=False),  # JSON event content
    Column("created_at", UTCDateTime, nullable=False),
    Column("sent_at", UTCDateTime, nullable=True),
    Column("attempts", Integer, nullable=False, server_default="0"),
    Column("last_error", String(300), nullable=True),
)
Index("ix_matrix_outbox_due", matrix_outbox.c.bot, matrix_outbox.c.sent_at, matrix_outbox.c.id)

# Plain-text classified ads read from a Matrix room (``SELLING: …`` / ``BUYING: …``): unsigned,
# bound by no mandate, kept apart from the signed listings and wanted ads they are not.
market_text_ads = Table(
    "market_text_ads",
    metadata,
    Column("id", String(40), primary_key=True),  # txt_…
    Column("kind", String(8), nullable=False),  # selling | buying
    Column("poster", String(255), nullable=False),  # the Matrix user who posted it
    Column("room_id", String(255), nullable=False),
    Column("event_id", String(255), nullable=False, unique=True),
    Column("text", Text, nullable=False),
    Column("item", String(200), nullable=False),  # the item words, as the language layer read them
    Column("name", String(64), nullable=True),  # the item, as a slug, when the language layer read one
    Column("price_cents", BigInteger, nullable=True),
    Column("currency", String(3), nullable=True),
    Column("negotiable", Boolean, nullable=True),  # "OBO" True, "firm" False, unsaid None
    Column("posted_at", UTCDateTime, nullable=False),
    Column("status", String(16), nullable=False),  # live | withdrawn
)
Index("ix_market_text_ads_name", market_text_ads.c.kind, market_text_ads.c.name)
