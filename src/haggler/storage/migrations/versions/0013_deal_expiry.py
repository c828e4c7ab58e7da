"""Market deals expire: ``market_deals.expires_at``, the instant a deal still awaiting signatures
or an owner's approval ends as ``expired`` (docs/market-api.md, Expiry), and the index the sweep
finds the due ones by.

A deal opened before this migration gets the default time (one day after it opened), so that
nothing already waiting waits forever either.

Revision ID: 0013
Revises: 0012
"""

from datetime import timedelta, timezone

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

#: MarketSettings.deal_expiry_seconds' default, fixed here as it was when this migration was written.
DEFAULT_EXPIRY = timedelta(seconds=86_400)


def upgrade() -> None:
    op.add_column("market_deals", sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    deals = sa.table("market_deals", sa.column("id", sa.String(40)),
                     sa.column("created_at", sa.DateTime(timezone=True)),
                     sa.column("expires_at", sa.DateTime(timezone=True)))
    bind = op.get_bind()
    for deal_id, created_at in bind.execute(sa.select(deals.c.id, deals.c.created_at)).all():
        opened = created_at if created_at.tzinfo else created_at.replace(tzinfo=timezone.utc)  # SQLite: naive UTC
        bind.execute(sa.update(deals).where(deals.c.id == deal_id).values(expires_at=opened + DEFAULT_EXPIRY))
    with op.batch_alter_table("market_deals") as batch:
        batch.alter_column("expires_at", existing_type=sa.DateTime(timezone=True), nullable=False)
    op.create_index("ix_market_deals_due", "market_deals", ["status", "expires_at"])


def downgrade() -> None:
    op.drop_index("ix_market_deals_due", table_name="market_deals")
    with op.batch_alter_table("market_deals") as batch:
        batch.drop_column("expires_at")
