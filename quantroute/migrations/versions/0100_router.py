"""router: nodes, session pins and the request log

Revision ID: 0100_router
Revises: 0001_core
"""
import sqlalchemy as sa
from alembic import op

revision = "0100_router"
down_revision = "0001_core"
branch_labels = ("router",)
depends_on = None


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "node",
        sa.Column("key", sa.String(), primary_key=True),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("deployment", sa.String(), nullable=False),
        sa.Column("tier", sa.String(), nullable=False),
        sa.Column("format", sa.String(), nullable=False),
        sa.Column("method", sa.String(), nullable=False),
        sa.Column("checksum", sa.String(), nullable=False),
        sa.Column("hardware", sa.String(), nullable=False),
        sa.Column("vram_gb", sa.Float(), nullable=True),
        sa.Column("generation", sa.Integer(), nullable=False),
        sa.Column("generation_started", tz, nullable=False),
        sa.Column("updated_at", tz, nullable=False),
    )
    op.create_index("ix_node_model", "node", ["model"])
    op.create_index("ix_node_deployment", "node", ["deployment"])
    op.create_index("ix_node_updated_at", "node", ["updated_at"])
    op.create_table(
        "session_pin",
        sa.Column("session_key", sa.String(), primary_key=True),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("tier", sa.String(), nullable=False),
        sa.Column("arm", sa.String(), nullable=True),
        sa.Column("deployment", sa.String(), nullable=True),
        sa.Column("policy_version", sa.Integer(), nullable=True),
        sa.Column("created_at", tz, nullable=False),
        sa.Column("last_used", tz, nullable=False),
        sa.Column("expires_at", tz, nullable=False),
    )
    op.create_index("ix_session_pin_model", "session_pin", ["model"])
    op.create_index("ix_session_pin_tier", "session_pin", ["tier"])
    op.create_index("ix_session_pin_last_used", "session_pin", ["last_used"])
    op.create_index("ix_session_pin_expires_at", "session_pin", ["expires_at"])
    op.create_table(
        "request_log",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("ts", tz, nullable=False),
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("session_key", sa.String(), nullable=True),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("deployment", sa.String(), nullable=True),
        sa.Column("node", sa.String(), nullable=True),
        sa.Column("tier", sa.String(), nullable=True),
        sa.Column("arm", sa.String(), nullable=True),
        sa.Column("policy_version", sa.Integer(), nullable=True),
        sa.Column("rules", sa.JSON(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("status", sa.Integer(), nullable=False),
        sa.Column("stream", sa.Boolean(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("ttft_ms", sa.Float(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("retries", sa.Integer(), nullable=False),
        sa.Column("escalated", sa.Boolean(), nullable=False),
        sa.Column("error", sa.String(), nullable=True),
    )
    op.create_index("ix_request_log_ts", "request_log", ["ts"])
    op.create_index("ix_request_log_session_key", "request_log", ["session_key"])
    op.create_index("ix_request_log_deployment", "request_log", ["deployment"])
    op.create_index("ix_request_log_tier", "request_log", ["tier"])
    op.create_index("ix_request_log_model_ts", "request_log", ["model", "ts"])


def downgrade() -> None:
    op.drop_table("request_log")
    op.drop_table("session_pin")
    op.drop_table("node")
