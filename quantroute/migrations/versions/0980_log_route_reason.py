"""router: request_log.reason, why a request did not run on the cheapest tier its policy allows: spilled up to a
higher tier whose nodes had headroom while the cheap tier was at its knee ("spilled up: int4 at its knee"), or
escalated because the cheap tier had no room ("escalated: int4 full"). Nullable: rows served on the cheapest tier,
pinned turns and rows written before this column have none.

Revision ID: 0980_log_route_reason
Revises: 0970_pin_indexes
"""
import sqlalchemy as sa
from alembic import op

revision = "0980_log_route_reason"
down_revision = "0970_pin_indexes"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("request_log") as batch:
        batch.add_column(sa.Column("reason", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("request_log") as batch:
        batch.drop_column("reason")
