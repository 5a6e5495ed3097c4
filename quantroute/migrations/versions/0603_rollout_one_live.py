"""rollouts: at most one live rollout per model (partial unique index on model where the phase is live)

Databases written before the index may hold two live rollouts of one model (two starts that raced). The service
only ever acted on the newest, so the older ones are closed as rolled-back, saying which rollout superseded them.

Revision ID: 0603_rollout_one_live
Revises: 0602_rollout_target_concurrency
"""
import sqlalchemy as sa
from alembic import op

revision = "0603_rollout_one_live"
down_revision = "0602_rollout_target_concurrency"
branch_labels = None
depends_on = None

LIVE = "phase IN ('gated', 'awaiting-approval', 'progressing', 'paused')"


def upgrade() -> None:
    conn = op.get_bind()
    rows = conn.execute(sa.text(f"SELECT id, model FROM rollout WHERE {LIVE} ORDER BY model, id DESC")).all()
    newest: dict[str, int] = {}
    for rid, model in rows:
        if model not in newest:
            newest[model] = rid
            continue
        conn.execute(sa.text("UPDATE rollout SET phase = 'rolled-back', percent = 0, aborted_reason = :r, "
                             "revision = revision + 1 WHERE id = :id"),
                     {"id": rid, "r": f"superseded by rollout {newest[model]} (started at the same time)"})
    op.create_index("uq_rollout_live_model", "rollout", ["model"], unique=True,
                    sqlite_where=sa.text(LIVE), postgresql_where=sa.text(LIVE))


def downgrade() -> None:
    op.drop_index("uq_rollout_live_model", table_name="rollout")
