"""access: tenants and client API keys, tenants' usage per minute, the tenant of each logged request; users'
sponsors and token expiry

Revision ID: 0990_tenants
Revises: 0980_log_route_reason, 0510_user_tokens
"""
import sqlalchemy as sa
from alembic import op

revision = "0990_tenants"
down_revision = ("0980_log_route_reason", "0510_user_tokens")  # joins the users branch: user, user_token
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenant",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("tier_floor", sa.String(), nullable=True),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("rpm", sa.Integer(), nullable=True),
        sa.Column("tpm", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "client_key",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("prefix", sa.String(), nullable=False, unique=True),
        sa.Column("key_hash", sa.String(), nullable=False, unique=True),
        sa.Column("tenant", sa.String(), sa.ForeignKey("tenant.name"), nullable=False),
        sa.Column("label", sa.String(), nullable=False),
        sa.Column("tier_floor", sa.String(), nullable=True),
        sa.Column("rpm", sa.Integer(), nullable=True),
        sa.Column("tpm", sa.Integer(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_by", sa.String(), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_client_key_tenant", "client_key", ["tenant"])
    op.create_table(
        "tenant_usage_minute",
        sa.Column("minute", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("tenant", sa.String(), primary_key=True),
        sa.Column("model", sa.String(), primary_key=True),
        sa.Column("tier", sa.String(), primary_key=True),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("prompt_tokens", sa.BigInteger(), nullable=False),
        sa.Column("completion_tokens", sa.BigInteger(), nullable=False),
    )
    revision_table = op.create_table(
        "access_revision",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("n", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(revision_table, [{"id": 1, "n": 0}])
    op.add_column("request_log", sa.Column("tenant", sa.String(), nullable=True))
    with op.batch_alter_table("user") as b:
        b.add_column(sa.Column("sponsor", sa.String(), nullable=False, server_default=""))
    with op.batch_alter_table("user_token") as b:
        b.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("user_token") as b:
        b.drop_column("expires_at")
    with op.batch_alter_table("user") as b:
        b.drop_column("sponsor")
    with op.batch_alter_table("request_log") as b:
        b.drop_column("tenant")
    op.drop_table("access_revision")
    op.drop_table("tenant_usage_minute")
    op.drop_table("client_key")
    op.drop_table("tenant")
