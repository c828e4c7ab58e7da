"""A user's parked match turns by their fallback deadline (issue 33): every pickup asks which of
the user's turns are past it, and without this index that read every turn parked for the user.

Revision ID: 0018
Revises: 0017
"""

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_a2a_tasks_user_park_deadline", "a2a_tasks", ["waiting_user_id", "state", "park_deadline"])


def downgrade() -> None:
    op.drop_index("ix_a2a_tasks_user_park_deadline", table_name="a2a_tasks")
