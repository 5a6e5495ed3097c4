"""rollouts: desired vs observed (observed_version), the rolling-back phase counted as live, the controller's
heartbeat, and the notification outbox with its webhook deliveries

Rollouts written before this revision are taken as observed (their activations happened in the same call).

Revision ID: 0610_rollout_controller
Revises: 0604_rollout_breach_streak
"""
import sqlalchemy as sa
from alembic import op

revision = "0610_rollout_controller"
down_revision = "0604_rollout_breach_streak"
branch_labels = None
depends_on = None

OLD_LIVE = "phase IN ('gated', 'awaiting-approval', 'progressing', 'paused')"
LIVE = "phase IN ('gated', 'awaiting-approval', 'progressing', 'paused', 'rolling-back')"


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    with op.batch_alter_table("rollout") as batch:
        batch.add_column(sa.Column("observed_version", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("observed_at", tz, nullable=True))
    op.execute("UPDATE rollout SET observed_version = policy_version")
    op.drop_index("uq_rollout_live_model", table_name="rollout")
    op.create_index("uq_rollout_live_model", "rollout", ["model"], unique=True,
                    sqlite_where=sa.text(LIVE), postgresql_where=sa.text(LIVE))
    op.create_table(
        "controller_heartbeat",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("role", sa.String(), nullable=False),
        sa.Column("started_at", tz, nullable=False),
        sa.Column("last_pass_at", tz, nullable=False),
        sa.Column("interval_s", sa.Float(), nullable=False),
        sa.Column("passes", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(), nullable=True),
    )
    op.create_table(
        "notification",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("at", tz, nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("rollout_id", sa.Integer(), nullable=True),
        sa.Column("payload", sa.JSON(), nullable=False),
    )
    op.create_index("ix_notification_at", "notification", ["at"])
    op.create_table(
        "webhook_delivery",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("notification_id", sa.Integer(), sa.ForeignKey("notification.id"), nullable=False),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_at", tz, nullable=False),
        sa.Column("delivered_at", tz, nullable=True),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.UniqueConstraint("notification_id", "url", name="uq_webhook_delivery"),
    )
    op.create_index("ix_webhook_delivery_url_status", "webhook_delivery", ["url", "status"])


def downgrade() -> None:
    op.drop_table("webhook_delivery")
    op.drop_table("notification")
    op.drop_table("controller_heartbeat")
    op.drop_index("uq_rollout_live_model", table_name="rollout")
    op.create_index("uq_rollout_live_model", "rollout", ["model"], unique=True,
                    sqlite_where=sa.text(OLD_LIVE), postgresql_where=sa.text(OLD_LIVE))
    with op.batch_alter_table("rollout") as batch:
        batch.drop_column("observed_at")
        batch.drop_column("observed_version")
