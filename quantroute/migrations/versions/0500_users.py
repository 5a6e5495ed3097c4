"""users: dashboard users and roles

Revision ID: 0500_users
Revises: 0001_core
"""
import sqlalchemy as sa
from alembic import op

revision = "0500_users"
down_revision = "0001_core"
branch_labels = ("users",)
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("password_hash", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("disabled", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_user_role", "user", ["role"])


def downgrade() -> None:
    op.drop_table("user")
