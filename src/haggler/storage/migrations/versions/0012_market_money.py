"""The market binds deals to money and goods: a listing's version, the hash of what it sells and
its shipping cost; the hash a request was opened on; each deal's quantity and total.

A deal's ``total`` (price × quantity + shipping) is what a buyer's ``maxSpend`` and ``budget``
bound, summed across its pending and confirmed deals; a listing's ``item_hash`` (its item block,
logistics and currency) is what a request and its deal are bound to. Existing rows are filled
in from the messages they keep.

Revision ID: 0012
Revises: 0011
"""

import hashlib
import json

import sqlalchemy as sa
from alembic import op

from haggler.money import amount_cents
from haggler.trust.canonical import canonical_json

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def _hash(message: dict) -> str:
    terms = {"item": message["item"], "logistics": message.get("logistics", {}),
             "currency": message["pricing"]["currency"]}
    return hashlib.sha256(canonical_json(terms)).hexdigest()


def upgrade() -> None:
    with op.batch_alter_table("market_listings") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("item_hash", sa.String(64), nullable=True))
        batch.add_column(sa.Column("shipping_cents", sa.BigInteger(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("mandate_issued_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("market_requests") as batch:
        batch.add_column(sa.Column("item_hash", sa.String(64), nullable=True))
    with op.batch_alter_table("market_deals") as batch:
        batch.add_column(sa.Column("quantity", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("total_cents", sa.BigInteger(), nullable=True))

    conn = op.get_bind()
    listings = sa.table("market_listings", sa.column("id"), sa.column("message"), sa.column("item_hash"),
                        sa.column("shipping_cents"))
    requests = sa.table("market_requests", sa.column("listing_id"), sa.column("item_hash"))
    deals = sa.table("market_deals", sa.column("id"), sa.column("deal"), sa.column("price_cents"),
                     sa.column("quantity"), sa.column("total_cents"))
    for row in conn.execute(sa.select(listings.c.id, listings.c.message)).all():
        message = json.loads(row.message)
        shipping = message.get("logistics", {}).get("shippingCost")
        digest = _hash(message)
        conn.execute(listings.update().where(listings.c.id == row.id).values(
            item_hash=digest, shipping_cents=0 if shipping is None else amount_cents(shipping)))
        conn.execute(requests.update().where(requests.c.listing_id == row.id).values(item_hash=digest))
    for row in conn.execute(sa.select(deals.c.id, deals.c.deal, deals.c.price_cents)).all():
        quantity = json.loads(row.deal).get("quantity", 1)
        conn.execute(deals.update().where(deals.c.id == row.id).values(
            quantity=quantity, total_cents=row.price_cents * quantity))
    with op.batch_alter_table("market_listings") as batch:
        batch.alter_column("item_hash", existing_type=sa.String(64), nullable=False)
    with op.batch_alter_table("market_deals") as batch:
        batch.alter_column("total_cents", existing_type=sa.BigInteger(), nullable=False)
    op.create_index("ix_market_deals_buyer_status", "market_deals", ["buyer_id", "status"])
    op.create_index("ix_market_deals_seller_status", "market_deals", ["seller_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_market_deals_seller_status", "market_deals")
    op.drop_index("ix_market_deals_buyer_status", "market_deals")
    with op.batch_alter_table("market_deals") as batch:
        batch.drop_column("total_cents")
        batch.drop_column("quantity")
    with op.batch_alter_table("market_requests") as batch:
        batch.drop_column("item_hash")
    with op.batch_alter_table("market_listings") as batch:
        batch.drop_column("mandate_issued_at")
        batch.drop_column("shipping_cents")
        batch.drop_column("item_hash")
        batch.drop_column("version")
