"""users branch: personal access tokens for the CLI, and failed-login throttling

Revision ID: 0510_user_tokens
Revises: 0501_request_replay
"""
import sqlalchemy as sa
from alembic import op

revision = "0510_user_tokens"
down_revision = "0501_request_replay"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_token",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("user_name", sa.String(), sa.ForeignKey("user.name"), nullable=False),
        sa.Column("token_hash", sa.String(), nullable=False, unique=True),
        sa.Column("label", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked", sa.Boolean(), nullable=False),
    )
    op.create_index("ix_user_token_user_name", "user_token", ["user_name"])
    op.create_table(
        "login_throttle",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("first_failure_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("locked_until", sa.DateTime(timezone=True), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("login_throttle")
    op.drop_table("user_token")
