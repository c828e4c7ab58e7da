"""The agent-native market (spec 003): agents and their owners' keys, mandates, listings, wanted
ads, contact requests, sealed bids, offers, deals, double-auction orders, inboxes and the audit log.

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "market_agents",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("matrix_id", sa.String(255), nullable=True),
        sa.Column("public_key", sa.String(66), nullable=False),
        sa.Column("owner_public_key", sa.String(66), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "market_mandates",
        sa.Column("agent_id", sa.String(128), sa.ForeignKey("market_agents.id"), primary_key=True),
        sa.Column("issued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("mandate", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "market_listings",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("seller_id", sa.String(128), sa.ForeignKey("market_agents.id"), nullable=False),
        sa.Column("category", sa.String(64), nullable=False),
        sa.Column("subcategory", sa.String(64), nullable=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("condition", sa.String(16), nullable=False),
        sa.Column("ask_cents", sa.BigInteger(), nullable=False),
        sa.Column("floor_cents", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("negotiable", sa.Boolean(), nullable=False),
        sa.Column("available_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("listed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_market_listings_item", "market_listings", ["category", "subcategory", "name"])
    op.create_index("ix_market_listings_seller", "market_listings", ["seller_id"])
    op.create_table(
        "market_wanted",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("buyer_id", sa.String(128), sa.ForeignKey("market_agents.id"), nullable=False),
        sa.Column("max_cents", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("active_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_market_wanted_active", "market_wanted", ["active_until"])
    op.create_table(
        "market_requests",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("listing_id", sa.String(128), sa.ForeignKey("market_listings.id"), nullable=False),
        sa.Column("buyer_id", sa.String(128), sa.ForeignKey("market_agents.id"), nullable=False),
        sa.Column("seller_id", sa.String(128), sa.ForeignKey("market_agents.id"), nullable=False),
        sa.Column("proposed_protocol", sa.String(24), nullable=False),
        sa.Column("protocol", sa.String(24), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_market_requests_listing", "market_requests", ["listing_id"])
    op.create_table(
        "market_bids",
        sa.Column("request_id", sa.String(128), sa.ForeignKey("market_requests.id"), primary_key=True),
        sa.Column("party", sa.String(8), primary_key=True),
        sa.Column("limit_cents", sa.BigInteger(), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "market_offers",
        sa.Column("request_id", sa.String(128), sa.ForeignKey("market_requests.id"), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("party", sa.String(8), nullable=False),
        sa.Column("action", sa.String(8), nullable=False),
        sa.Column("price_cents", sa.BigInteger(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "market_deals",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("request_id", sa.String(160), nullable=False, unique=True),
        sa.Column("listing_id", sa.String(200), nullable=False),
        sa.Column("buyer_id", sa.String(128), sa.ForeignKey("market_agents.id"), nullable=False),
        sa.Column("seller_id", sa.String(128), sa.ForeignKey("market_agents.id"), nullable=False),
        sa.Column("protocol", sa.String(24), nullable=False),
        sa.Column("price_cents", sa.BigInteger(), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("deal", sa.Text(), nullable=False),
        sa.Column("buyer_signature", sa.String(130), nullable=True),
        sa.Column("seller_signature", sa.String(130), nullable=True),
        sa.Column("approvals", sa.Text(), nullable=False),
        sa.Column("needs_approval", sa.Text(), nullable=False),
        sa.Column("status", sa.String(24), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_market_deals_buyer", "market_deals", ["buyer_id"])
    op.create_index("ix_market_deals_seller", "market_deals", ["seller_id"])
    op.create_table(
        "market_orders",
        sa.Column("id", sa.String(128), primary_key=True),
        sa.Column("agent_id", sa.String(128), sa.ForeignKey("market_agents.id"), nullable=False),
        sa.Column("item", sa.String(194), nullable=False),
        sa.Column("side", sa.String(4), nullable=False),
        sa.Column("price_cents", sa.BigInteger(), nullable=False),
        sa.Column("quantity", sa.Integer(), nullable=False),
        sa.Column("remaining", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.String(12), nullable=False),
        sa.Column("currency", sa.String(3), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_market_orders_book", "market_orders", ["item", "status"])
    op.create_table(
        "market_inbox",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("agent_id", sa.String(128), sa.ForeignKey("market_agents.id"), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_market_inbox_agent", "market_inbox", ["agent_id", "seq"])
    op.create_table(
        "market_audit",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("agent_id", sa.String(128), nullable=True),
        sa.Column("event", sa.String(32), nullable=False),
        sa.Column("detail", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_market_audit_agent", "market_audit", ["agent_id", "seq"])


def downgrade() -> None:
    op.drop_index("ix_market_audit_agent", table_name="market_audit")
    op.drop_table("market_audit")
    op.drop_index("ix_market_inbox_agent", table_name="market_inbox")
    op.drop_table("market_inbox")
    op.drop_index("ix_market_orders_book", table_name="market_orders")
    op.drop_table("market_orders")
    op.drop_index("ix_market_deals_buyer", table_name="market_deals")
    op.drop_index("ix_market_deals_seller", table_name="market_deals")
    op.drop_table("market_deals")
    op.drop_table("market_offers")
    op.drop_table("market_bids")
    op.drop_index("ix_market_requests_listing", table_name="market_requests")
    op.drop_table("market_requests")
    op.drop_index("ix_market_wanted_active", table_name="market_wanted")
    op.drop_table("market_wanted")
    op.drop_index("ix_market_listings_item", table_name="market_listings")
    op.drop_index("ix_market_listings_seller", table_name="market_listings")
    op.drop_table("market_listings")
    op.drop_table("market_mandates")
    op.drop_table("market_agents")
