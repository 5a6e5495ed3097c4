"""router: the request log names a session's pin by its creation time, and loses its index on the session key.

request_log.pin_created_at is the created_at of the pin in force when the request was answered: with
session_key it says which pin (a key pinned again after its pin expired is another pin). The dashboard counts a
pinned session's requests through ix_request_log_pin_created_at instead of ix_request_log_session_key, which
goes: session keys are the clients' random ids, so every first turn's log row landed on a random leaf of that
index (on SQLite ~24 us of the log writer's CPU a first turn, and on SQLite and PostgreSQL a page written per
row of a batch); a pin's creation time is now for a first turn, so its row lands at the index's end.

Rows logged before this revision get the creation time of their session's live pin, if it has one (looked up
while the session-key index is still there); others keep none.

Revision ID: 0960_log_pin_created
Revises: 0950_node_affinity
"""
import sqlalchemy as sa
from alembic import op

revision = "0960_log_pin_created"
down_revision = "0950_node_affinity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("request_log") as batch:
        batch.add_column(sa.Column("pin_created_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("UPDATE request_log SET pin_created_at = (SELECT p.created_at FROM session_pin p "
               "WHERE p.session_key = request_log.session_key) WHERE session_key IS NOT NULL")
    op.create_index("ix_request_log_pin_created_at", "request_log", ["pin_created_at"])
    op.drop_index("ix_request_log_session_key", table_name="request_log")


def downgrade() -> None:
    op.create_index("ix_request_log_session_key", "request_log", ["session_key"])
    op.drop_index("ix_request_log_pin_created_at", table_name="request_log")
    with op.batch_alter_table("request_log") as batch:
        batch.drop_column("pin_created_at")
