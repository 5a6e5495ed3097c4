"""loadtest: staircase load test runs and their steps

Revision ID: 0800_loadtest
Revises: 0001_core
"""
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0800_loadtest"
down_revision = "0001_core"
branch_labels = ("loadtest",)
depends_on = None


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "loadtest_run",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("created_at", tz, nullable=False),
        sa.Column("finished_at", tz, nullable=True),
        sa.Column("url", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("deployment", sa.String(), nullable=True),
        sa.Column("source", sa.String(), nullable=False),
        sa.Column("mode", sa.String(), nullable=False),
        sa.Column("staircase", sa.JSON(), nullable=False),
        sa.Column("step_seconds", sa.Float(), nullable=False),
        sa.Column("warmup_seconds", sa.Float(), nullable=False),
        sa.Column("slo", sa.JSON(), nullable=False),
        sa.Column("stop_reason", sa.String(), nullable=True),
        sa.Column("stopped_at", sa.Integer(), nullable=True),
        sa.Column("max_ok_concurrency", sa.Integer(), nullable=True),
        sa.Column("max_ok_rate", sa.Float(), nullable=True),
        sa.Column("max_ok_tok_s", sa.Float(), nullable=True),
        sa.Column("out_dir", sa.String(), nullable=False),
    )
    for c in ("created_at", "url", "deployment"):
        op.create_index(f"ix_loadtest_run_{c}", "loadtest_run", [c])
    cols: list[sa.Column[Any]] = [sa.Column("id", sa.Integer(), primary_key=True),
            sa.Column("run_id", sa.Integer(), sa.ForeignKey("loadtest_run.id"), nullable=False),
            sa.Column("index", sa.Integer(), nullable=False),
            sa.Column("concurrency", sa.Integer(), nullable=True),
            sa.Column("rate", sa.Float(), nullable=True),
            sa.Column("window_s", sa.Float(), nullable=False),
            sa.Column("requests", sa.Integer(), nullable=False),
            sa.Column("errors", sa.Integer(), nullable=False),
            sa.Column("error_rate", sa.Float(), nullable=False),
            sa.Column("req_s", sa.Float(), nullable=False),
            sa.Column("output_tok_s", sa.Float(), nullable=False)]
    cols += [sa.Column(f"{m}_{p}_ms", sa.Float(), nullable=True)
             for m, ps in (("ttft", ("p50", "p95")), ("itl", ("p50", "p95")), ("tpot", ("p50", "p95")),
                           ("e2e", ("p50", "p95", "p99"))) for p in ps]
    cols += [sa.Column("tiers", sa.JSON(), nullable=False), sa.Column("nodes", sa.JSON(), nullable=False),
             sa.Column("deployments", sa.JSON(), nullable=False), sa.Column("passed", sa.Boolean(), nullable=False),
             sa.Column("breach", sa.String(), nullable=True)]
    op.create_table("loadtest_step", *cols)
    op.create_index("ix_loadtest_step_run_id", "loadtest_step", ["run_id"])


def downgrade() -> None:
    op.drop_table("loadtest_step")
    op.drop_table("loadtest_run")
