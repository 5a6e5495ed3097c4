"""shadow: shadow_pair, one row per live shadow comparison, apart from request_log

Revision ID: 0900_shadow_pairs
Revises: 0001_core
"""
import sqlalchemy as sa
from alembic import op

revision = "0900_shadow_pairs"
down_revision = "0001_core"
branch_labels = ("shadow",)
depends_on = None


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "shadow_pair",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("ts", tz, nullable=False),
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("policy_version", sa.Integer(), nullable=True),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("arm", sa.String(), nullable=True),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("served_tier", sa.String(), nullable=False),
        sa.Column("served_deployment", sa.String(), nullable=False),
        sa.Column("served_node", sa.String(), nullable=True),
        sa.Column("shadow_tier", sa.String(), nullable=False),
        sa.Column("shadow_deployment", sa.String(), nullable=False),
        sa.Column("shadow_node", sa.String(), nullable=True),
        sa.Column("shadow_status", sa.Integer(), nullable=False),
        sa.Column("shadow_latency_ms", sa.Float(), nullable=True),
        sa.Column("shadow_error", sa.String(), nullable=True),
        sa.Column("served_tokens", sa.Integer(), nullable=True),
        sa.Column("shadow_tokens", sa.Integer(), nullable=True),
        sa.Column("compared", sa.Boolean(), nullable=False),
        sa.Column("exact", sa.Boolean(), nullable=True),
        sa.Column("normalized", sa.Boolean(), nullable=True),
        sa.Column("diverge_char", sa.Integer(), nullable=True),
        sa.Column("diverge_token", sa.Integer(), nullable=True),
        sa.Column("token_exact", sa.Boolean(), nullable=True),
        sa.Column("length_ratio", sa.Float(), nullable=True),
        sa.Column("json_like", sa.Boolean(), nullable=True),
        sa.Column("json_valid_served", sa.Boolean(), nullable=True),
        sa.Column("json_valid_shadow", sa.Boolean(), nullable=True),
        sa.Column("json_equal", sa.Boolean(), nullable=True),
        sa.Column("math_like", sa.Boolean(), nullable=True),
        sa.Column("number_served", sa.Float(), nullable=True),
        sa.Column("number_shadow", sa.Float(), nullable=True),
        sa.Column("numeric_agree", sa.Boolean(), nullable=True),
        sa.Column("agree", sa.Boolean(), nullable=True),
        sa.Column("bodies", sa.JSON(), nullable=True),
    )
    op.create_index("ix_shadow_pair_ts", "shadow_pair", ["ts"])
    op.create_index("ix_shadow_pair_agree", "shadow_pair", ["agree"])
    op.create_index("ix_shadow_pair_model_ts", "shadow_pair", ["model", "ts"])


def downgrade() -> None:
    op.drop_table("shadow_pair")
