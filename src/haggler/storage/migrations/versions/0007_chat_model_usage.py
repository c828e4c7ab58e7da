"""What each chat's merchant spent on a language model, and how often the guards stepped in.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "chat_model_usage",
        sa.Column("chat_id", sa.String(64), sa.ForeignKey("chats.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("input_tokens", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens", sa.BigInteger(), nullable=False),
        sa.Column("cost_nanousd", sa.BigInteger(), nullable=False),
        sa.Column("fallbacks", sa.Integer(), nullable=False),
        sa.Column("clamps", sa.Integer(), nullable=False),
        sa.Column("rewrites", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("chat_model_usage")
