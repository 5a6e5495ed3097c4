"""router: node.state, so a drained or removed node stays so on every replica and across restarts

active | draining (takes no new request) | removed (a tombstone: a replica that still lists the node, from its
fleet file or its memory, drops it instead of bringing it back). Existing rows are active.

Revision ID: 0110_node_state
Revises: 0102_request_stats_minute
"""
import sqlalchemy as sa
from alembic import op

revision = "0110_node_state"
down_revision = "0102_request_stats_minute"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("node") as batch:
        batch.add_column(sa.Column("state", sa.String(), nullable=False, server_default="active"))


def downgrade() -> None:
    with op.batch_alter_table("node") as batch:
        batch.drop_column("state")
