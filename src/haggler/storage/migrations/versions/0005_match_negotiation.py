"""Match negotiation (spec 002): users, agents, opportunities, and A2A conversations, tasks,
messages and artifacts.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "match_users",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("profile", sa.Text(), nullable=False),  # JSON object, free-form
        sa.Column("intents", sa.Text(), nullable=False),  # JSON list of {description, tags}
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "match_agents",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("user_id", sa.String(40), sa.ForeignKey("match_users.id"), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("negotiation_mode", sa.String(16), nullable=False),  # enabled | disabled
        sa.Column("key_hash", sa.String(64), nullable=False, unique=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "opportunities",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("source_user_id", sa.String(40), sa.ForeignKey("match_users.id"), nullable=False),
        sa.Column("candidate_user_id", sa.String(40), sa.ForeignKey("match_users.id"), nullable=False),
        sa.Column("seed", sa.Text(), nullable=False),  # JSON seed assessment, as given
        sa.Column("score", sa.Integer(), nullable=False),  # the evaluator's; negotiation never re-scores
        sa.Column("discovery_query", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("negotiation_id", sa.String(40), nullable=False),
        sa.Column("agreed_roles", sa.Text(), nullable=True),  # JSON [{userId, role}], once pending
        sa.Column("source_answer", sa.String(16), nullable=True),  # accept | decline
        sa.Column("candidate_answer", sa.String(16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "a2a_conversations",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("participants", sa.Text(), nullable=False),  # JSON ["agent:{userId}", "agent:{userId}"]
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "a2a_tasks",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("conversation_id", sa.String(40), sa.ForeignKey("a2a_conversations.id"), nullable=False),
        sa.Column("type", sa.String(32), nullable=False),  # negotiation
        sa.Column("state", sa.String(24), nullable=False),
        sa.Column("opportunity_id", sa.String(40), nullable=False),
        sa.Column("source_user_id", sa.String(40), nullable=False),
        sa.Column("candidate_user_id", sa.String(40), nullable=False),
        sa.Column("source_personal", sa.Boolean(), nullable=False),
        sa.Column("candidate_personal", sa.Boolean(), nullable=False),
        sa.Column("max_turns", sa.Integer(), nullable=True),  # None: no cap; never 0
        sa.Column("waiting_user_id", sa.String(40), nullable=True),
        sa.Column("claimed_by", sa.String(40), nullable=True),
        sa.Column("claim_deadline", sa.DateTime(timezone=True), nullable=True),
        sa.Column("parked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("park_deadline", sa.DateTime(timezone=True), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),  # personal-vs-personal timeout
        sa.Column("turn_context", sa.Text(), nullable=True),  # JSON, while parked or claimed
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "a2a_messages",
        sa.Column("task_id", sa.String(40), sa.ForeignKey("a2a_tasks.id"), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),  # 1-based turn number
        sa.Column("id", sa.String(40), nullable=False, unique=True),
        sa.Column("sender", sa.String(40), nullable=False),  # the user id whose side took the turn
        sa.Column("taken_by", sa.String(16), nullable=False),  # system | personal
        sa.Column("agent_id", sa.String(40), nullable=True),  # the personal agent, when one took it
        sa.Column("data", sa.Text(), nullable=False),  # JSON {action, assessment, message?}
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "a2a_artifacts",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("task_id", sa.String(40), sa.ForeignKey("a2a_tasks.id"), nullable=False, unique=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),  # JSON outcome
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_match_agents_user", "match_agents", ["user_id"])
    op.create_index("ix_a2a_tasks_pickup", "a2a_tasks", ["waiting_user_id", "state", "parked_at"])
    op.create_index("ix_a2a_tasks_park_deadline", "a2a_tasks", ["state", "park_deadline"])
    op.create_index("ix_a2a_tasks_claim_deadline", "a2a_tasks", ["state", "claim_deadline"])
    op.create_index("ix_a2a_tasks_expiry", "a2a_tasks", ["state", "expires_at"])
    op.create_index("ix_a2a_tasks_opportunity", "a2a_tasks", ["opportunity_id"])


def downgrade() -> None:
    op.drop_table("a2a_artifacts")
    op.drop_table("a2a_messages")
    op.drop_table("a2a_tasks")
    op.drop_table("a2a_conversations")
    op.drop_table("opportunities")
    op.drop_table("match_agents")
    op.drop_table("match_users")
