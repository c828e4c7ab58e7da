"""Each chat keeps a snapshot of its negotiation, so that a turn need not replay the whole chat.

Revision ID: 0009
Revises: 0008
"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # Nullable: chats stored before it are replayed from their messages on their next turn.
    op.add_column("chats", sa.Column("state", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("chats") as batch:
        batch.drop_column("state")
