"""The negotiate.v1 store: chats, their messages, deals, and chat starts for rate limits.

Revision ID: 0001
Revises:
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "chats",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("product_id", sa.String(100), nullable=False),
        sa.Column("seed", sa.BigInteger, nullable=False),
        sa.Column("client_ip", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(16), nullable=True),
        sa.Column("shopper_messages", sa.Integer, nullable=False),
        sa.Column("created_at", TS, nullable=False),
        sa.Column("last_activity_at", TS, nullable=False),
        sa.Column("closed_at", TS, nullable=True),
    )
    op.create_index("ix_chats_open_activity", "chats", ["status", "last_activity_at"])
    op.create_table(
        "messages",
        sa.Column("chat_id", sa.String(64), sa.ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("seq", sa.Integer, primary_key=True),
        sa.Column("speaker", sa.String(16), nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("action", sa.String(16), nullable=True),
        sa.Column("price_cents", sa.BigInteger, nullable=True),
        sa.Column("currency", sa.String(3), nullable=True),
        sa.Column("extras", sa.Text, nullable=True),
        sa.Column("final", sa.Boolean, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_table(
        "deals",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("chat_id", sa.String(64), sa.ForeignKey("chats.id"), nullable=False, unique=True),
        sa.Column("product_id", sa.String(100), nullable=False),
        sa.Column("price_cents", sa.BigInteger, nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("extras", sa.Text, nullable=False),
        sa.Column("created_at", TS, nullable=False),
    )
    op.create_index("ix_deals_created_at", "deals", ["created_at"])
    op.create_table(
        "chat_starts",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("client_ip", sa.String(64), nullable=False),
        sa.Column("at", TS, nullable=False),
    )
    op.create_index("ix_chat_starts_ip_at", "chat_starts", ["client_ip", "at"])


def downgrade() -> None:
    op.drop_table("chat_starts")
    op.drop_table("deals")
    op.drop_table("messages")
    op.drop_table("chats")
