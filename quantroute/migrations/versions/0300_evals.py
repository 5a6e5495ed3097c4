"""evals: paired eval runs and their per-item results

Revision ID: 0300_evals
Revises: 0001_core
"""
import sqlalchemy as sa
from alembic import op

revision = "0300_evals"
down_revision = "0001_core"
branch_labels = ("evals",)
depends_on = None


def upgrade() -> None:
    tz = sa.DateTime(timezone=True)
    op.create_table(
        "eval_run",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("created_at", tz, nullable=False),
        sa.Column("finished_at", tz, nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("suite_name", sa.String(), nullable=False),
        sa.Column("suite_path", sa.String(), nullable=False),
        sa.Column("suite_hash", sa.String(), nullable=False),
        sa.Column("n_items", sa.Integer(), nullable=False),
        sa.Column("baseline_deployment", sa.String(), nullable=False),
        sa.Column("candidate_deployment", sa.String(), nullable=False),
        sa.Column("candidate_tier", sa.String(), nullable=True),
        sa.Column("baseline", sa.JSON(), nullable=False),
        sa.Column("candidate", sa.JSON(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("code_version", sa.String(), nullable=False),
        sa.Column("gate_passed", sa.Boolean(), nullable=True),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("verdict", sa.JSON(), nullable=True),
        sa.Column("results_path", sa.String(), nullable=False),
        sa.Column("error", sa.String(), nullable=False),
    )
    for col in ("created_at", "status", "suite_hash", "baseline_deployment", "candidate_deployment",
                "candidate_tier", "gate_passed"):
        op.create_index(f"ix_eval_run_{col}", "eval_run", [col])
    op.create_table(
        "eval_result",
        sa.Column("id", sa.Integer(), primary_key=True),
        sa.Column("run_id", sa.Integer(), sa.ForeignKey("eval_run.id"), nullable=False),
        sa.Column("item_id", sa.String(), nullable=False),
        sa.Column("category", sa.String(), nullable=False),
        sa.Column("arm", sa.String(), nullable=False),
        sa.Column("grader", sa.String(), nullable=False),
        sa.Column("deployment", sa.String(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("finish_reason", sa.String(), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=False),
        sa.Column("valid", sa.Boolean(), nullable=False),
        sa.Column("needs_retry", sa.Boolean(), nullable=False),
        sa.Column("detail", sa.String(), nullable=False),
        sa.Column("error", sa.String(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=True),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.UniqueConstraint("run_id", "item_id", "arm", name="uq_eval_result_item_arm"),
    )
    op.create_index("ix_eval_result_run_id", "eval_result", ["run_id"])
    op.create_index("ix_eval_result_category", "eval_result", ["category"])


def downgrade() -> None:
    op.drop_table("eval_result")
    op.drop_table("eval_run")
