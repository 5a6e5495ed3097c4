"""router: session_pin.served_deployment, the deployment a pinned session stays on within its tier

Nullable: pins written before this column (or by an older router) have none and adopt the deployment that
serves their next request.

Revision ID: 0101_pin_deployment
Revises: 0100_router
"""
import sqlalchemy as sa
from alembic import op

revision = "0101_pin_deployment"
down_revision = "0100_router"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("session_pin") as batch:
        batch.add_column(sa.Column("served_deployment", sa.String(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("session_pin") as batch:
        batch.drop_column("served_deployment")
