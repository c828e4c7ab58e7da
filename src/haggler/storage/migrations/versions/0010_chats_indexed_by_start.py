"""Open chats are indexed by when they started, not by their last activity, which every turn
changes (storage/schema.py says what that cost).

Revision ID: 0010
Revises: 0009
"""

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_chats_open_activity", table_name="chats")
    op.create_index("ix_chats_open_created", "chats", ["status", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_chats_open_created", table_name="chats")
    op.create_index("ix_chats_open_activity", "chats", ["status", "last_activity_at"])
