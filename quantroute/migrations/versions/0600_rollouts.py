"""rollouts: rollout status, rollout events and checklist ticks

Revision ID: 0600_rollouts
Revises: 0001_core
"""
import sqlalchemy as sa
from alembic import op

revision = "0600_rollouts"
down_revision = "0001_core"
branch_labels = ("rollouts",)
depends_on = None


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "rollout",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("candidate", sa.String(), nullable=False),
        sa.Column("baseline", sa.String(), nullable=False),
        sa.Column("phase", sa.String(), nullable=False),
        sa.Column("step_index", sa.Integer(), nullable=False),
        sa.Column("percent", sa.Float(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("started_at", tz, nullable=False),
        sa.Column("updated_at", tz, nullable=False),
        sa.Column("step_at", tz, nullable=False),
        sa.Column("started_by", sa.String(), nullable=False),
        sa.Column("approved_by", sa.String(), nullable=True),
        sa.Column("eval_run_id", sa.Integer(), nullable=True),
        sa.Column("start_version", sa.Integer(), nullable=True),
        sa.Column("policy_version", sa.Integer(), nullable=True),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("aborted_reason", sa.String(), nullable=True),
        sa.Column("breach", sa.JSON(), nullable=True),
        sa.Column("history", sa.JSON(), nullable=False),
    )
    for col in ("model", "candidate", "phase"):
        op.create_index(f"ix_rollout_{col}", "rollout", [col])
    op.create_table(
        "rollout_event",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("rollout_id", sa.Integer(), sa.ForeignKey("rollout.id"), nullable=False),
        sa.Column("at", tz, nullable=False),
        sa.Column("actor", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("phase_before", sa.String(), nullable=True),
        sa.Column("phase_after", sa.String(), nullable=True),
        sa.Column("percent_before", sa.Float(), nullable=True),
        sa.Column("percent_after", sa.Float(), nullable=True),
        sa.Column("version_before", sa.Integer(), nullable=True),
        sa.Column("version_after", sa.Integer(), nullable=True),
        sa.Column("refused", sa.Boolean(), nullable=False),
        sa.Column("message", sa.String(), nullable=False),
        sa.Column("detail", sa.JSON(), nullable=False),
    )
    op.create_index("ix_rollout_event_rollout_id", "rollout_event", ["rollout_id"])
    op.create_index("ix_rollout_event_at", "rollout_event", ["at"])
    op.create_table(
        "rollout_check",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("rollout_id", sa.Integer(), sa.ForeignKey("rollout.id"), nullable=False),
        sa.Column("item", sa.String(), nullable=False),
        sa.Column("ticked_by", sa.String(), nullable=False),
        sa.Column("at", tz, nullable=False),
        sa.Column("note", sa.String(), nullable=False),
        sa.UniqueConstraint("rollout_id", "item", name="uq_rollout_check_item"),
    )
    op.create_index("ix_rollout_check_rollout_id", "rollout_check", ["rollout_id"])


def downgrade() -> None:
    op.drop_table("rollout_check")
    op.drop_table("rollout_event")
    op.drop_table("rollout")
