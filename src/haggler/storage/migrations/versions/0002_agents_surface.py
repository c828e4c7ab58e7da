"""The agents.json surface: agent sessions, rate windows, carts, deal redemptions, checkouts,
orders, and the audit trail.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "agent_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("client", sa.String(64), nullable=False),
        sa.Column("agent_name", sa.String(200), nullable=True),
        sa.Column("agent_version", sa.String(100), nullable=True),
        sa.Column("purpose", sa.Text, nullable=True),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("expires_at", TS, nullable=False),
        sa.Column("ended_at", TS, nullable=True),
        sa.Column("end_reason", sa.String(16), nullable=True),
    )
    op.create_index("ix_agent_sessions_client_open", "agent_sessions", ["client", "ended_at", "expires_at"])
    op.create_index("ix_agent_sessions_open_expiry", "agent_sessions", ["ended_at", "expires_at"])
    op.create_table(
        "rate_windows",
        sa.Column("client", sa.String(64), primary_key=True),
        sa.Column("window_start", TS, primary_key=True),
        sa.Column("count", sa.Integer, nullable=False),
    )
    op.create_index("ix_rate_windows_start", "rate_windows", ["window_start"])
    op.create_table(
        "cart_items",
        sa.Column("session_id", sa.String(64), sa.ForeignKey("agent_sessions.id"), primary_key=True),
        sa.Column("product_id", sa.String(100), primary_key=True),
        sa.Column("quantity", sa.Integer, nullable=False),
        sa.Column("unit_price_cents", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("extras", sa.Text, nullable=False),
        sa.Column("deal_id", sa.String(64), sa.ForeignKey("deals.id"), nullable=True, unique=True),
        sa.Column("added_at", TS, nullable=False),
    )
    op.create_table(
        "deal_redemptions",
        sa.Column("deal_id", sa.String(64), sa.ForeignKey("deals.id"), primary_key=True),
        sa.Column("session_id", sa.String(64), sa.ForeignKey("agent_sessions.id"), nullable=False),
        sa.Column("redeemed_at", TS, nullable=False),
    )
    op.create_table(
        "checkouts",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("session_id", sa.String(64), sa.ForeignKey("agent_sessions.id"), nullable=False, unique=True),
        sa.Column("lines", sa.Text, nullable=False),
        sa.Column("total_cents", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "orders",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("checkout_id", sa.String(64), sa.ForeignKey("checkouts.id"), nullable=False, unique=True),
        sa.Column("lines", sa.Text, nullable=False),
        sa.Column("total_cents", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("placed_at", TS, nullable=False),
    )
    op.create_table(
        "audit_events",
        sa.Column("session_id", sa.String(64), sa.ForeignKey("agent_sessions.id"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("event", sa.Text, nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
    )
    op.create_table(
        "audit_artifacts",
        sa.Column("session_id", sa.String(64), sa.ForeignKey("agent_sessions.id"), primary_key=True),
        sa.Column("artifact", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )


def downgrade() -> None:
    for table in ("audit_artifacts", "audit_events", "orders", "checkouts", "deal_redemptions", "cart_items",
                  "rate_windows", "agent_sessions"):
        op.drop_table(table)
