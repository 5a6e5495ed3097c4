"""rollouts: consecutive breaching guard evaluations (the canary's guards.failure_limit counts against it)

Revision ID: 0604_rollout_breach_streak
Revises: 0603_rollout_one_live
"""
import sqlalchemy as sa
from alembic import op

revision = "0604_rollout_breach_streak"
down_revision = "0603_rollout_one_live"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rollout") as batch:
        batch.add_column(sa.Column("breach_streak", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("rollout") as batch:
        batch.drop_column("breach_streak")
