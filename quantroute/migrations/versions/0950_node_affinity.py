"""router: session-to-node affinity. session_pin.last_node, the node that served the session's last turn (its
KV prefix is cached there), and request_log.affinity, what the affinity did for the request (kept the session on
its node, or why it fell back to the least-loaded node of the tier).

Both nullable: pins and rows written before this column, or with affinity off, have none.

Revision ID: 0950_node_affinity
Revises: 0110_node_state
"""
import sqlalchemy as sa
from alembic import op

revision = "0950_node_affinity"
down_revision = "0110_node_state"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("session_pin") as batch:
        batch.add_column(sa.Column("last_node", sa.String(), nullable=True))
    with op.batch_alter_table("request_log") as batch:
        batch.add_column(sa.Column("affinity", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("request_log") as batch:
        batch.drop_column("affinity")
    with op.batch_alter_table("session_pin") as batch:
        batch.drop_column("last_node")
