"""core: audit trail and policy version state

Revision ID: 0001_core
Revises:
"""
import sqlalchemy as sa
from alembic import op

revision = "0001_core"
down_revision = None
branch_labels = ("core",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_event",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("subject", sa.String(), nullable=False),
        sa.Column("version_before", sa.Integer(), nullable=True),
        sa.Column("version_after", sa.Integer(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index("ix_audit_event_at", "audit_event", ["at"])
    op.create_index("ix_audit_event_actor", "audit_event", ["actor"])
    op.create_index("ix_audit_event_action", "audit_event", ["action"])
    op.create_table(
        "policy_approval",
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("approved_by", sa.String(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("comment", sa.String(), nullable=False),
    )
    op.create_table(
        "policy_activation",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("previous", sa.Integer(), nullable=True),
        sa.Column("by", sa.String(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
    )
    op.create_index("ix_policy_activation_version", "policy_activation", ["version"])
    op.create_index("ix_policy_activation_at", "policy_activation", ["at"])


def downgrade() -> None:
    op.drop_table("policy_activation")
    op.drop_table("policy_approval")
    op.drop_table("audit_event")
