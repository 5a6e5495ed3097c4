"""rollouts: the target concurrency a rollout's staircase load test must reach (checklist item)

Revision ID: 0602_rollout_target_concurrency
Revises: 0601_rollout_revision
"""
import sqlalchemy as sa
from alembic import op

revision = "0602_rollout_target_concurrency"
down_revision = "0601_rollout_revision"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rollout") as batch:
        batch.add_column(sa.Column("target_concurrency", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("rollout") as batch:
        batch.drop_column("target_concurrency")
