"""router: no index on a pin's expiry, so a returning turn's refresh rewrites its row and no index entry.

Every refresh moves a pin's last use and expiry. With the expiry indexed, each one also moved an index entry: on
SQLite a second page written per refresh (about half of its cost), on PostgreSQL a new index tuple and no
heap-only update. The purge now sweeps the table by key range instead (`PinClaims.purge`). On PostgreSQL the
table keeps a fifth of each page free, where a refresh's new row version goes (a heap-only update needs room on
its page).

Revision ID: 1000_pin_expiry_unindexed
Revises: 0990_tenants
"""
from alembic import op

revision = "1000_pin_expiry_unindexed"
down_revision = "0990_tenants"
branch_labels = None
depends_on = None

FILLFACTOR = 80


def upgrade() -> None:
    op.drop_index("ix_session_pin_expires_at", table_name="session_pin")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(f"ALTER TABLE session_pin SET (fillfactor = {FILLFACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE session_pin RESET (fillfactor)")
    op.create_index("ix_session_pin_expires_at", "session_pin", ["expires_at"])
