"""router: request_stats_minute, the per-minute rollup of request_log the dashboard's long windows read

Maintained by the router's request-log writer in the same transaction as each batch insert; this revision
creates it and backfills it from the rows already logged (one GROUP BY pass over request_log).

Revision ID: 0102_request_stats_minute
Revises: 0101_pin_deployment
"""
import sqlalchemy as sa
from alembic import op

revision = "0102_request_stats_minute"
down_revision = "0101_pin_deployment"
branch_labels = None
depends_on = None

# Frozen copy of the rollup's GROUP BY (quantroute.db.request_stats may change after this revision ships).
# SQLite's date functions round to the millisecond: the fraction is cut off first so xx:59.9995 stays in its minute.
_MINUTE = {"sqlite": "CAST(strftime('%s', substr(ts, 1, 19)) AS INTEGER) / 60 * 60",
           "postgresql": "(FLOOR(EXTRACT(EPOCH FROM ts) / 60) * 60)::bigint"}
_KEY = "model, COALESCE(tier, ''), COALESCE(deployment, ''), COALESCE(arm, '')"


def upgrade() -> None:
    big = sa.BigInteger()
    op.create_table(
        "request_stats_minute",
        sa.Column("minute", big, nullable=False),  # epoch seconds (UTC) of the minute's start
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("tier", sa.String(), nullable=False),  # '' where request_log has NULL (part of the key)
        sa.Column("deployment", sa.String(), nullable=False),
        sa.Column("arm", sa.String(), nullable=False),
        sa.Column("requests", big, nullable=False),
        sa.Column("errors_5xx", big, nullable=False),
        sa.Column("errors_4xx", big, nullable=False),
        sa.Column("completion_tokens", big, nullable=False),
        sa.Column("prompt_tokens", big, nullable=False),
        sa.Column("latency_ms_sum", sa.Float(), nullable=False),
        sa.Column("latency_ms_max", sa.Float(), nullable=False),
        sa.Column("ttft_ms_sum", sa.Float(), nullable=False),
        sa.Column("ttft_count", big, nullable=False),
        sa.PrimaryKeyConstraint("minute", "model", "tier", "deployment", "arm", name="pk_request_stats_minute"),
    )
    minute = _MINUTE[op.get_bind().dialect.name]
    op.execute(f"""
        INSERT INTO request_stats_minute (minute, model, tier, deployment, arm, requests, errors_5xx, errors_4xx,
                                          completion_tokens, prompt_tokens, latency_ms_sum, latency_ms_max,
                                          ttft_ms_sum, ttft_count)
        SELECT {minute}, {_KEY}, COUNT(*),
               SUM(CASE WHEN status >= 500 THEN 1 ELSE 0 END),
               SUM(CASE WHEN status >= 400 AND status < 500 THEN 1 ELSE 0 END),
               COALESCE(SUM(completion_tokens), 0), COALESCE(SUM(prompt_tokens), 0),
               SUM(latency_ms), MAX(latency_ms), COALESCE(SUM(ttft_ms), 0), COUNT(ttft_ms)
        FROM request_log GROUP BY {minute}, {_KEY}""")


def downgrade() -> None:
    op.drop_table("request_stats_minute")
