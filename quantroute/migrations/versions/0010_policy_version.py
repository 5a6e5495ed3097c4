"""core: policy version content in the database (the source of truth for replicas on any host)

Revision ID: 0010_policy_version
Revises: 0001_core
"""
import sqlalchemy as sa
from alembic import op

revision = "0010_policy_version"
down_revision = "0001_core"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "policy_version",
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("parent", sa.Integer(), nullable=True),
        sa.Column("author", sa.String(), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(), nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stored_by", sa.String(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("policy_version")
