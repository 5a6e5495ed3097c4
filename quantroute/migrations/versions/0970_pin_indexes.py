"""router: session_pin keeps the indexes its readers use; a first turn writes two index entries instead of five.

Every first turn inserts a pin and every touch rewrites its last use and expiry, so each index on the table is
written on the router's hot path (on SQLite by the router process itself). The readers need: the key (the claim),
the expiry (purging expired pins; listing live pins, now ordered by expiry, which is the last use plus the TTL)
and the model of candidate-arm pins (releasing them when a canary rolls back). So the model, tier and last-use
indexes go, and a partial index on the model of candidate-arm pins comes: only the canary's share of sessions
writes an entry in it.

Revision ID: 0970_pin_indexes
Revises: 0960_log_pin_created
"""
import sqlalchemy as sa
from alembic import op

revision = "0970_pin_indexes"
down_revision = "0960_log_pin_created"
branch_labels = None
depends_on = None

ON_CANDIDATE = "arm = 'candidate'"


def upgrade() -> None:
    op.drop_index("ix_session_pin_model", table_name="session_pin")
    op.drop_index("ix_session_pin_tier", table_name="session_pin")
    op.drop_index("ix_session_pin_last_used", table_name="session_pin")
    op.create_index("ix_session_pin_candidate_model", "session_pin", ["model"],
                    sqlite_where=sa.text(ON_CANDIDATE), postgresql_where=sa.text(ON_CANDIDATE))


def downgrade() -> None:
    op.drop_index("ix_session_pin_candidate_model", table_name="session_pin")
    op.create_index("ix_session_pin_last_used", "session_pin", ["last_used"])
    op.create_index("ix_session_pin_tier", "session_pin", ["tier"])
    op.create_index("ix_session_pin_model", "session_pin", ["model"])
