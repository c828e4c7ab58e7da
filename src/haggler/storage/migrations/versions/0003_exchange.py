"""The transactions exchange: agents with API keys, wallets and their ledger, services,
transactions with their negotiation messages, and idempotency keys.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)
AGENT = "exchange_agents.id"


def upgrade() -> None:
    op.create_table(
        "exchange_agents",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "wallets",
        sa.Column("agent_id", sa.String(40), sa.ForeignKey(AGENT), primary_key=True),
        sa.Column("available_cents", sa.BigInteger, nullable=False),
        sa.Column("held_cents", sa.BigInteger, nullable=False),
        sa.CheckConstraint("available_cents >= 0 AND held_cents >= 0", name="ck_wallets_not_negative"),
    )
    op.create_table(
        "ledger_entries",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("agent_id", sa.String(40), sa.ForeignKey(AGENT), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("available_delta_cents", sa.BigInteger, nullable=False),
        sa.Column("held_delta_cents", sa.BigInteger, nullable=False),
        sa.Column("available_after_cents", sa.BigInteger, nullable=False),
        sa.Column("held_after_cents", sa.BigInteger, nullable=False),
        sa.Column("transaction_id", sa.String(40), nullable=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_ledger_entries_agent", "ledger_entries", ["agent_id", "id"])
    op.create_table(
        "services",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("provider_id", sa.String(40), sa.ForeignKey(AGENT), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("base_price_cents", sa.BigInteger, nullable=False),
        sa.Column("price_model", sa.String(16), nullable=False),
        sa.Column("sla", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "exchange_transactions",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("service_id", sa.String(40), sa.ForeignKey("services.id"), nullable=False),
        sa.Column("consumer_id", sa.String(40), sa.ForeignKey(AGENT), nullable=False),
        sa.Column("provider_id", sa.String(40), sa.ForeignKey(AGENT), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("max_price_cents", sa.BigInteger, nullable=False),
        sa.Column("input", sa.Text, nullable=False),
        sa.Column("price_cents", sa.BigInteger, nullable=True),
        sa.Column("sla", sa.Text, nullable=True),
        sa.Column("scope_modifications", sa.Text, nullable=True),
        sa.Column("held_cents", sa.BigInteger, nullable=False),
        sa.Column("output", sa.Text, nullable=True),
        sa.Column("end_reason", sa.String(16), nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("updated_at", TS, nullable=False),
        sa.Column("offer_expires_at", TS, nullable=True),
    )
    op.create_index("ix_exchange_transactions_open_expiry", "exchange_transactions", ["status", "offer_expires_at"])
    op.create_table(
        "negotiation_messages",
        sa.Column("transaction_id", sa.String(40), sa.ForeignKey("exchange_transactions.id"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("round", sa.Integer, nullable=False),
        sa.Column("sender", sa.String(16), nullable=False),
        sa.Column("type", sa.String(16), nullable=False),
        sa.Column("price_cents", sa.BigInteger, nullable=True),
        sa.Column("sla", sa.Text, nullable=True),
        sa.Column("scope_modifications", sa.Text, nullable=True),
        sa.Column("message", sa.Text, nullable=True),
        sa.Column("expires_at", TS, nullable=True),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("agent_id", sa.String(40), primary_key=True),
        sa.Column("key", sa.String(255), primary_key=True),
        sa.Column("request_hash", sa.String(64), nullable=False),
        sa.Column("status_code", sa.Integer, nullable=True),
        sa.Column("body", sa.Text, nullable=True),
        sa.Column("created_at", TS, nullable=False),
    )


def downgrade() -> None:
    for table in ("idempotency_keys", "negotiation_messages", "exchange_transactions", "services", "ledger_entries",
                  "wallets", "exchange_agents"):
        op.drop_table(table)
