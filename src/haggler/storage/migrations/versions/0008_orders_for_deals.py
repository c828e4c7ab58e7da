"""Orders for deals closed in chat, with the buyer's details; a deal bought at its own checkout page.

An order now comes from an agent's cart checkout or straight from a negotiate.v1 deal (one order
per deal, by a unique key), and carries the buyer's name, email and shipping address from the
checkout form. A deal bought at its page is redeemed with no agent session.

Revision ID: 0008
Revises: 0007
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("orders") as batch:
        batch.alter_column("checkout_id", existing_type=sa.String(64), nullable=True)
        batch.add_column(sa.Column("deal_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("buyer_name", sa.String(200), nullable=True))
        batch.add_column(sa.Column("buyer_email", sa.String(254), nullable=True))
        batch.add_column(sa.Column("ship_to", sa.Text(), nullable=True))
        batch.create_unique_constraint("orders_deal_id_key", ["deal_id"])
        batch.create_foreign_key("orders_deal_id_fkey", "deals", ["deal_id"], ["id"])
        batch.create_index("ix_orders_placed_at", ["placed_at"])
    with op.batch_alter_table("deal_redemptions") as batch:
        batch.alter_column("session_id", existing_type=sa.String(64), nullable=True)


def downgrade() -> None:
    with op.batch_alter_table("deal_redemptions") as batch:
        batch.alter_column("session_id", existing_type=sa.String(64), nullable=False)
    with op.batch_alter_table("orders") as batch:
        batch.drop_index("ix_orders_placed_at")
        batch.drop_constraint("orders_deal_id_fkey", type_="foreignkey")
        batch.drop_constraint("orders_deal_id_key", type_="unique")
        for column in ("ship_to", "buyer_email", "buyer_name", "deal_id"):
            batch.drop_column(column)
        batch.alter_column("checkout_id", existing_type=sa.String(64), nullable=False)
