"""Agentic checkout (issue 31): the merchant's data for the checkout protocols (products,
inventory, discounts, promotions, shipping rates, customers and their addresses, payment
instruments), checkout sessions, and orders that say which door they came through, are placed
for a checkout session, and record how they were paid.

Orders placed before this revision came from a chat deal's checkout page (``deal_id`` set) or an
agents.json cart (``checkout_id`` set): their ``door`` is filled in from that.

Revision ID: 0015
Revises: 0014
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

_UTC = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "commerce_products",
        sa.Column("id", sa.String(100), primary_key=True),
        sa.Column("title", sa.String(300), nullable=False),
        sa.Column("price_cents", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("image_url", sa.Text(), nullable=True),
    )
    op.create_table(
        "commerce_inventory",
        sa.Column("product_id", sa.String(100), sa.ForeignKey("commerce_products.id"), primary_key=True),
        sa.Column("quantity", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "commerce_discounts",
        sa.Column("code_key", sa.String(100), primary_key=True),
        sa.Column("code", sa.String(100), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("value", sa.BigInteger(), nullable=False),
        sa.Column("description", sa.String(300), nullable=False),
    )
    op.create_table(
        "commerce_promotions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("min_subtotal_cents", sa.BigInteger(), nullable=True),
        sa.Column("eligible_item_ids", sa.Text(), nullable=True),
        sa.Column("description", sa.String(300), nullable=False),
    )
    op.create_table(
        "commerce_shipping_rates",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("country_code", sa.String(16), nullable=False),
        sa.Column("service_level", sa.String(32), nullable=False),
        sa.Column("price_cents", sa.BigInteger(), nullable=False),
        sa.Column("title", sa.String(300), nullable=False),
    )
    op.create_table(
        "commerce_customers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("email", sa.String(254), nullable=False, unique=True),
    )
    op.create_table(
        "commerce_addresses",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("customer_id", sa.String(64), sa.ForeignKey("commerce_customers.id"), nullable=False),
        sa.Column("street_address", sa.String(300), nullable=True),
        sa.Column("locality", sa.String(200), nullable=True),
        sa.Column("region", sa.String(200), nullable=True),
        sa.Column("postal_code", sa.String(32), nullable=True),
        sa.Column("country", sa.String(8), nullable=True),
    )
    op.create_index("ix_commerce_addresses_customer", "commerce_addresses", ["customer_id"])
    op.create_table(
        "commerce_payment_instruments",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("brand", sa.String(64), nullable=True),
        sa.Column("last_digits", sa.String(8), nullable=True),
        sa.Column("token", sa.String(255), nullable=False),
        sa.Column("handler_id", sa.String(100), nullable=False),
    )
    op.create_table(
        "checkout_sessions",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("protocol", sa.String(8), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("state", sa.Text(), nullable=False),
        sa.Column("created_at", _UTC, nullable=False),
        sa.Column("updated_at", _UTC, nullable=False),
        sa.Column("expires_at", _UTC, nullable=False),
    )
    with op.batch_alter_table("orders") as batch:
        batch.add_column(sa.Column("session_id", sa.String(64), nullable=True))
        batch.add_column(sa.Column("door", sa.String(8), nullable=True))
        batch.add_column(sa.Column("payment_handler", sa.String(100), nullable=True))
        batch.add_column(sa.Column("payment_reference", sa.String(255), nullable=True))
        batch.add_column(sa.Column("details", sa.Text(), nullable=True))
        batch.create_unique_constraint("orders_session_id_key", ["session_id"])
        batch.create_foreign_key("orders_session_id_fkey", "checkout_sessions", ["session_id"], ["id"])
    op.execute("UPDATE orders SET door = CASE WHEN deal_id IS NOT NULL THEN 'chat' ELSE 'cart' END")
    with op.batch_alter_table("orders") as batch:
        batch.alter_column("door", existing_type=sa.String(8), nullable=False)


def downgrade() -> None:
    op.execute("DELETE FROM orders WHERE session_id IS NOT NULL")
    with op.batch_alter_table("orders") as batch:
        batch.drop_constraint("orders_session_id_fkey", type_="foreignkey")
        batch.drop_constraint("orders_session_id_key", type_="unique")
        for column in ("details", "payment_reference", "payment_handler", "door", "session_id"):
            batch.drop_column(column)
    op.drop_table("checkout_sessions")
    op.drop_table("commerce_payment_instruments")
    op.drop_index("ix_commerce_addresses_customer", table_name="commerce_addresses")
    for table in ("commerce_addresses", "commerce_customers", "commerce_shipping_rates", "commerce_promotions",
                  "commerce_discounts", "commerce_inventory", "commerce_products"):
        op.drop_table(table)
