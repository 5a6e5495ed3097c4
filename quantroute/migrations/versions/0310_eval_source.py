"""evals branch: where a run's answers came from (registered deployments or a free URL) and who started it

Revision ID: 0310_eval_source
Revises: 0300_evals
"""
import sqlalchemy as sa
from alembic import op

revision = "0310_eval_source"
down_revision = "0300_evals"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("eval_run") as batch:
        # runs from before this column are of unknown origin: "url", so they never open a rollout gate
        batch.add_column(sa.Column("source", sa.String(), nullable=False, server_default="url"))
        batch.add_column(sa.Column("started_by", sa.String(), nullable=False, server_default=""))
        batch.create_index("ix_eval_run_source", ["source"])


def downgrade() -> None:
    with op.batch_alter_table("eval_run") as batch:
        batch.drop_index("ix_eval_run_source")
        batch.drop_column("started_by")
        batch.drop_column("source")
