"""Order events kept until their webhook receiver takes them (issue 31): an order placed through
UCP or ACP owes its platform an event, recorded with the order and sent after the answer, so that
neither a crash after the answer nor a receiver down for a while loses it, and an order settled by
hand (``haggler checkout settle``) is announced by the running store.

Revision ID: 0016
Revises: 0015
"""

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "order_events",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("door", sa.String(8), nullable=False),
        sa.Column("order_id", sa.String(64), sa.ForeignKey("orders.id"), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("base", sa.Text(), nullable=True),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("next_at", _UTC, nullable=False),
        sa.Column("held_by", sa.String(32), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("sent_at", _UTC, nullable=True),
        sa.Column("gave_up_at", _UTC, nullable=True),
        sa.Column("last_error", sa.String(300), nullable=True),
    )
    op.create_index("ix_order_events_due", "order_events", ["sent_at", "gave_up_at", "next_at"])


def downgrade() -> None:
    op.drop_index("ix_order_events_due", table_name="order_events")
    op.drop_table("order_events")
