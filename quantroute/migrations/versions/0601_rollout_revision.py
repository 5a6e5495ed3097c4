"""rollouts: revision counter on the rollout row (optimistic concurrency)

Every write of a rollout's status is a compare-and-swap on this counter, so a guards loop and a person (or two
dashboard users) acting at once cannot both move the same rollout from the same state.

Revision ID: 0601_rollout_revision
Revises: 0600_rollouts
"""
import sqlalchemy as sa
from alembic import op

revision = "0601_rollout_revision"
down_revision = "0600_rollouts"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("rollout") as batch:
        batch.add_column(sa.Column("revision", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("rollout") as batch:
        batch.drop_column("revision")
