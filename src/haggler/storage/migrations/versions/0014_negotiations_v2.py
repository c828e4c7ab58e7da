"""Negotiations v2 beside v1 (issue 30; docs/matching-api.md, "Negotiations v2"): every
negotiation task carries ``protocol_version`` (every negotiation before this one spoke v1), the
outreach screen's decision, the ``ask_user`` consultations and the open one's answer deadline,
and the index the sweep finds lapsed answer windows by.

Revision ID: 0014
Revises: 0013
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("a2a_tasks") as batch:
        batch.add_column(sa.Column("protocol_version", sa.String(4), nullable=False, server_default="v1"))
        batch.add_column(sa.Column("screen", sa.String(16), nullable=True))
        batch.add_column(sa.Column("consultations", sa.Text(), nullable=True))
        batch.add_column(sa.Column("answer_deadline", sa.DateTime(timezone=True), nullable=True))
    op.create_index("ix_a2a_tasks_answer_deadline", "a2a_tasks", ["state", "answer_deadline"])


def downgrade() -> None:
    op.drop_index("ix_a2a_tasks_answer_deadline", table_name="a2a_tasks")
    with op.batch_alter_table("a2a_tasks") as batch:
        batch.drop_column("answer_deadline")
        batch.drop_column("consultations")
        batch.drop_column("screen")
        batch.drop_column("protocol_version")
