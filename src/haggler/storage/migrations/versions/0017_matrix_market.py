"""The market over Matrix (issue 32): the market bot's state kept beside the market's (its /sync
position and inbox relay cursor, every event it took, the rooms it made, a durable outbox), and
the plain-text classified ads it reads from a room.

Revision ID: 0017
Revises: 0016
"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "matrix_state",
        sa.Column("bot", sa.String(255), primary_key=True),
        sa.Column("since", sa.Text(), nullable=True),
        sa.Column("inbox_seq", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("updated_at", _UTC, nullable=False),
    )
    op.create_table(
        "matrix_events",
        sa.Column("event_id", sa.String(255), primary_key=True),
        sa.Column("bot", sa.String(255), nullable=False),
        sa.Column("room_id", sa.String(255), nullable=False),
        sa.Column("sender", sa.String(255), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("received_at", _UTC, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("outcome", sa.String(64), nullable=True),
        sa.Column("done_at", _UTC, nullable=True),
    )
    op.create_index("ix_matrix_events_pending", "matrix_events", ["bot", "status", "received_at"])
    op.create_table(
        "matrix_rooms",
        sa.Column("bot", sa.String(255), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("room_id", sa.String(255), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
    )
    op.create_index("ix_matrix_rooms_room", "matrix_rooms", ["room_id"])
    op.create_table(
        "matrix_outbox",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("bot", sa.String(255), nullable=False),
        sa.Column("room", sa.String(255), nullable=False),
        sa.Column("invite", sa.Text(), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("sent_at", _UTC, nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_error", sa.String(300), nullable=True),
    )
    op.create_index("ix_matrix_outbox_due", "matrix_outbox", ["bot", "sent_at", "id"])
    op.create_table(
        "market_text_ads",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("kind", sa.String(8), nullable=False),
        sa.Column("poster", sa.String(255), nullable=False),
        sa.Column("room_id", sa.String(255), nullable=False),
        sa.Column("event_id", sa.String(255), nullable=False, unique=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("item", sa.String(200), nullable=False),
        sa.Column("name", sa.String(64), nullable=True),
        sa.Column("price_cents", sa.BigInteger(), nullable=True),
        sa.Column("currency", sa.String(3), nullable=True),
        sa.Column("negotiable", sa.Boolean(), nullable=True),
        sa.Column("posted_at", _UTC, nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
    )
    op.create_index("ix_market_text_ads_name", "market_text_ads", ["kind", "name"])


def downgrade() -> None:
    op.drop_index("ix_market_text_ads_name", table_name="market_text_ads")
    op.drop_table("market_text_ads")
    op.drop_index("ix_matrix_outbox_due", table_name="matrix_outbox")
    op.drop_table("matrix_outbox")
    op.drop_index("ix_matrix_rooms_room", table_name="matrix_rooms")
    op.drop_table("matrix_rooms")
    op.drop_index("ix_matrix_events_pending", table_name="matrix_events")
    op.drop_table("matrix_events")
    op.drop_table("matrix_state")
