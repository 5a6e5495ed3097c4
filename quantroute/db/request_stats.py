"""Per-minute rollup of the request log: what the dashboard's long windows read instead of every logged row.

The router's request-log writer aggregates each batch in Python (`minute_stats`, pure) and upserts the result
(`upsert_minute_stats`) in the same transaction as the batch insert, so the rollup always equals a GROUP BY
over request_log. Rows written to request_log by anything else must go through the same two functions, or
be folded in afterwards with `rebuild_minute_stats`.

Key columns hold '' instead of NULL: a primary key cannot contain NULL, and ON CONFLICT never matches NULLs."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection
from sqlmodel import Field, SQLModel

from quantroute.db.engine import table_of

KEY = ("minute", "model", "tier", "deployment", "arm")
SUMS = ("requests", "errors_5xx", "errors_4xx", "completion_tokens", "prompt_tokens", "latency_ms_sum",
        "ttft_ms_sum", "ttft_count")
COLUMNS = KEY + SUMS + ("latency_ms_max",)


class RequestStatsMinute(SQLModel, table=True):
    """Counts and sums of one minute of logged requests for one (model, tier, deployment, arm)."""

    __tablename__ = "request_stats_minute"
    # Epoch seconds (UTC) of the minute's start. An integer, not a datetime: buckets of any multiple of 60 s
    # are then integer arithmetic on SQLite and PostgreSQL alike, with no per-row date parsing.
    minute: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False))
    model: str = Field(primary_key=True)
    tier: str = Field(default="", primary_key=True)
    deployment: str = Field(default="", primary_key=True)
    arm: str = Field(default="", primary_key=True)
    requests: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    errors_5xx: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    errors_4xx: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    completion_tokens: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    prompt_tokens: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    latency_ms_sum: float = 0.0
    latency_ms_max: float = 0.0
    ttft_ms_sum: float = 0.0
    ttft_count: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))  # rows with a TTFT


def epoch_minute(ts: datetime) -> int:
    """Start of ts's minute in epoch seconds; naive datetimes are UTC (that is how SQLite hands them back)."""
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    return int(ts.timestamp()) // 60 * 60


def minute_stats(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Aggregate request-log rows (the writer's dicts) per minute and key. Pure; sorted by key so concurrent
    writers (router replicas on PostgreSQL) take row locks in the same order and cannot deadlock."""
    acc: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (epoch_minute(r["ts"]), r.get("model") or "", r.get("tier") or "", r.get("deployment") or "",
               r.get("arm") or "")
        s = acc.get(key)
        if s is None:
            s = acc[key] = dict(zip(KEY, key), requests=0, errors_5xx=0, errors_4xx=0, completion_tokens=0,
                                prompt_tokens=0, latency_ms_sum=0.0, latency_ms_max=0.0, ttft_ms_sum=0.0,
                                ttft_count=0)
        status = int(r["status"])
        latency = float(r["latency_ms"])
        s["requests"] += 1
        s["errors_5xx"] += status >= 500
        s["errors_4xx"] += 400 <= status < 500
        s["completion_tokens"] += r.get("completion_tokens") or 0
        s["prompt_tokens"] += r.get("prompt_tokens") or 0
        s["latency_ms_sum"] += latency
        s["latency_ms_max"] = max(s["latency_ms_max"], latency)
        if r.get("ttft_ms") is not None:
            s["ttft_ms_sum"] += float(r["ttft_ms"])
            s["ttft_count"] += 1
    return [acc[k] for k in sorted(acc)]


def upsert_statement(dialect_name: str) -> sa.Insert:
    """The rollup's upsert for one dialect; a caller writing many batches builds it once."""
    table = table_of(RequestStatsMinute)
    if dialect_name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        pg = pg_insert(table)
        return pg.on_conflict_do_update(index_elements=list(KEY), set_=_added(table, pg.excluded, sa.func.greatest))
    if dialect_name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        lite = sqlite_insert(table)
        # two-argument max() is SQLite's scalar maximum
        return lite.on_conflict_do_update(index_elements=list(KEY), set_=_added(table, lite.excluded, sa.func.max))
    raise ValueError(f"request_stats_minute: dialect {dialect_name!r} has no upsert here (valid: sqlite, postgresql)")


def _added(table: sa.Table, excluded: Any, bigger: Callable[..., Any]) -> dict[str, Any]:
    """The SET of the upsert: the sums added, the maximum kept."""
    update: dict[str, Any] = {c: table.c[c] + excluded[c] for c in SUMS}
    update["latency_ms_max"] = bigger(table.c.latency_ms_max, excluded.latency_ms_max)
    return update


def upsert_minute_stats(*, conn: Connection, stats: list[dict[str, Any]], statement: sa.Insert | None = None) -> None:
    """Add `minute_stats` output into the rollup, one upsert per (minute, key), in the caller's transaction
    (`statement`: `upsert_statement(conn.dialect.name)`, when the caller keeps one)."""
    if stats:
        conn.execute(statement if statement is not None else upsert_statement(conn.dialect.name), stats)


def bucket_sql(dialect_name: str, bucket_s: int = 60) -> str:
    """SQL for the start of ts's `bucket_s`-second bucket in epoch seconds, floored like `epoch_minute`."""
    b = int(bucket_s)
    if dialect_name == "sqlite":
        # ts is stored as naive-UTC ISO text. The fraction is cut off before parsing: SQLite's date functions
        # round to the millisecond, which would put xx:59.9995 in the next minute, unlike epoch_minute.
        return f"(CAST(strftime('%s', substr(ts, 1, 19)) AS INTEGER) / {b}) * {b}"
    return f"(FLOOR(EXTRACT(EPOCH FROM ts) / {b}) * {b})::bigint"


def rollup_select_sql(dialect_name: str, where: str = "1=1") -> str:
    """SELECT producing rollup rows from request_log (the migration's backfill uses its own frozen copy)."""
    m = bucket_sql(dialect_name)
    return f"""
        SELECT {m} AS minute, model, COALESCE(tier, '') AS tier, COALESCE(deployment, '') AS deployment,
               COALESCE(arm, '') AS arm, COUNT(*) AS requests,
               SUM(CASE WHEN status >= 500 THEN 1 ELSE 0 END) AS errors_5xx,
               SUM(CASE WHEN status >= 400 AND status < 500 THEN 1 ELSE 0 END) AS errors_4xx,
               COALESCE(SUM(completion_tokens), 0) AS completion_tokens,
               COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens,
               SUM(latency_ms) AS latency_ms_sum, MAX(latency_ms) AS latency_ms_max,
               COALESCE(SUM(ttft_ms), 0) AS ttft_ms_sum, COUNT(ttft_ms) AS ttft_count
        FROM request_log WHERE {where}
        GROUP BY {m}, model, COALESCE(tier, ''), COALESCE(deployment, ''), COALESCE(arm, '')"""


def rebuild_minute_stats(*, conn: Connection) -> int:
    """Recompute the whole rollup from request_log (for rows written outside the router's writer, e.g.
    fixtures or imports). Returns the number of rollup rows."""
    conn.execute(sa.text("DELETE FROM request_stats_minute"))
    cols = ", ".join(COLUMNS)
    conn.execute(sa.text(f"INSERT INTO request_stats_minute ({cols}) "
                         f"SELECT {cols} FROM ({rollup_select_sql(conn.dialect.name)}) r"))
    return int(conn.execute(sa.text("SELECT COUNT(*) FROM request_stats_minute")).scalar_one())


def count_before(*, conn: Connection, before: datetime) -> int:
    """Rollup minutes that start before `before` (what `prune_before` would delete)."""
    return int(conn.execute(sa.text("SELECT COUNT(*) FROM request_stats_minute WHERE minute < :m"),
                            {"m": epoch_minute(before)}).scalar_one())


def prune_before(*, conn: Connection, before: datetime) -> int:
    """Delete rollup minutes (and tenants' usage minutes) that start before `before` (the dashboard's longest
    windows read these)."""
    conn.execute(sa.text("DELETE FROM tenant_usage_minute WHERE minute < :m"), {"m": epoch_minute(before)})
    return int(conn.execute(sa.text("DELETE FROM request_stats_minute WHERE minute < :m"),
                            {"m": epoch_minute(before)}).rowcount)


TENANT_KEY = ("minute", "tenant", "model", "tier")
TENANT_SUMS = ("requests", "prompt_tokens", "completion_tokens")


class TenantUsageMinute(SQLModel, table=True):
    """Requests and tokens of one minute per (tenant, model, tier): what each client key's tenant used, written
    with the request-log batch like the rollup above. Requests without a key count under tenant ''."""

    __tablename__ = "tenant_usage_minute"
    minute: int = Field(sa_column=sa.Column(sa.BigInteger, primary_key=True, autoincrement=False))
    tenant: str = Field(default="", primary_key=True)
    model: str = Field(primary_key=True)
    tier: str = Field(default="", primary_key=True)
    requests: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    prompt_tokens: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))
    completion_tokens: int = Field(default=0, sa_column=sa.Column(sa.BigInteger, nullable=False))


def tenant_minute_stats(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Aggregate request-log rows per minute, tenant, model and tier. Pure; sorted by key (see minute_stats)."""
    acc: dict[tuple, dict[str, Any]] = {}
    for r in rows:
        key = (epoch_minute(r["ts"]), r.get("tenant") or "", r.get("model") or "", r.get("tier") or "")
        s = acc.get(key)
        if s is None:
            s = acc[key] = dict(zip(TENANT_KEY, key), requests=0, prompt_tokens=0, completion_tokens=0)
        s["requests"] += 1
        s["prompt_tokens"] += r.get("prompt_tokens") or 0
        s["completion_tokens"] += r.get("completion_tokens") or 0
    return [acc[k] for k in sorted(acc)]


def tenant_upsert_statement(dialect_name: str) -> sa.Insert:
    table = table_of(TenantUsageMinute)
    if dialect_name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        pg = pg_insert(table)
        return pg.on_conflict_do_update(index_elements=list(TENANT_KEY),
                                        set_={c: table.c[c] + pg.excluded[c] for c in TENANT_SUMS})
    if dialect_name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        lite = sqlite_insert(table)
        return lite.on_conflict_do_update(index_elements=list(TENANT_KEY),
                                          set_={c: table.c[c] + lite.excluded[c] for c in TENANT_SUMS})
    raise ValueError(f"tenant_usage_minute: dialect {dialect_name!r} has no upsert here (valid: sqlite, postgresql)")
