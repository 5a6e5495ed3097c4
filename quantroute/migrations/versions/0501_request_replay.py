"""users branch: request_log.replay, what the dashboard's what-if replay re-classifies

The router stores the parsed body and the x- headers of each request (nullable: rows written before this
column, or by a router that does not fill it, are skipped by the replay).

Revision ID: 0501_request_replay
Revises: 0500_users
Depends on: 0100_router (the request_log table)
"""
import sqlalchemy as sa
from alembic import op

revision = "0501_request_replay"
down_revision = "0500_users"
branch_labels = None
depends_on = "0100_router"


def upgrade() -> None:
    with op.batch_alter_table("request_log") as batch:
        batch.add_column(sa.Column("replay", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("request_log") as batch:
        batch.drop_column("replay")
