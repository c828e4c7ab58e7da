"""The match sweep's indexes of deadlines hold only the tasks they can find (issue 33): each is an
index of its deadline over the rows where it is set (a deadline is set only in the states it
belongs to), the timeout's of the negotiations that have one. Each of them had ``state`` among its
columns, which a turn changes three times (claim, respond, park or end), so every one of them was
written each time for every negotiation.

Revision ID: 0019
Revises: 0018
"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

#: (index, its columns before this revision, after it); each holds the rows where its last column is set.
_INDEXES = (("ix_a2a_tasks_park_deadline", ["state", "park_deadline"], ["park_deadline"]),
            ("ix_a2a_tasks_claim_deadline", ["state", "claim_deadline"], ["claim_deadline"]),
            ("ix_a2a_tasks_answer_deadline", ["state", "answer_deadline"], ["answer_deadline"]),
            ("ix_a2a_tasks_expiry", ["state", "expires_at"], ["state", "expires_at"]))


def upgrade() -> None:
    for name, _, columns in _INDEXES:
        op.drop_index(name, table_name="a2a_tasks")
        where = sa.text(f"{columns[-1]} IS NOT NULL")
        op.create_index(name, "a2a_tasks", columns, sqlite_where=where, postgresql_where=where)


def downgrade() -> None:
    for name, columns, _ in _INDEXES:
        op.drop_index(name, table_name="a2a_tasks")
        op.create_index(name, "a2a_tasks", columns)
