"""The dashboard's reads, as plain functions of an engine (no Streamlit), so the benchmark times exactly what
the pages run. Aggregation happens in SQL over the indexed columns (ts, tier, deployment, model+ts); only
small result sets come back. Works on SQLite and PostgreSQL.

Windows longer than ROLLUP_MIN_WINDOW_S (with buckets that are whole minutes) read request_stats_minute, the
per-minute rollup the router's writer keeps in the same transaction as each batch, plus the raw rows of the
window's first, partial minute, so both paths give the same figures. A 24 h window is then ~1.4 k minutes x
keys instead of every request. Short windows read request_log. p95s cannot be summed, so the guard
queries stay on request_log, bounded by their window and the time index."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pandas as pd
from sqlalchemy import text
from sqlalchemy.engine import Engine

from quantroute.clock import utcnow
from quantroute.db.request_stats import bucket_sql


def _since(window_s: float, now: datetime | None = None) -> datetime:
    return (now or utcnow()) - timedelta(seconds=window_s)


def _bucket_expr(engine: Engine, bucket_s: int) -> str:
    # the rollup's own expression, so raw and rolled-up buckets split a minute's edge alike
    return bucket_sql(engine.dialect.name, bucket_s)


def _ts_param(engine: Engine, dt: datetime) -> Any:
    # SQLite compares the stored naive-UTC text; give it the same shape.
    if engine.dialect.name == "sqlite":
        return dt.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
    return dt


ROLLUP_MIN_WINDOW_S = 1800


def _use_rollup(source: str, window_s: float, bucket_s: int = 60) -> bool:
    if source not in ("auto", "raw", "rollup"):
        raise ValueError(f"source: {source!r} is not one of 'auto', 'raw', 'rollup'")
    if source == "rollup" and bucket_s % 60:
        raise ValueError(f"bucket_s: {bucket_s} cannot come from the per-minute rollup (valid: multiples of 60)")
    return source == "rollup" or (source == "auto" and window_s > ROLLUP_MIN_WINDOW_S and bucket_s % 60 == 0)


def _rollup_bounds(engine: Engine, window_s: float, now: datetime | None) -> dict[str, Any]:
    """The window [since, now] as whole rollup minutes from `minute0` on, plus raw rows in [since, head_end)
    (the part of since's minute inside the window)."""
    since = _since(window_s, now)
    epoch = since.timestamp()
    minute0 = int(-(-epoch // 60) * 60)  # ceil to the minute
    head_end = datetime.fromtimestamp(minute0, UTC)
    return {"since": _ts_param(engine, since), "head_end": _ts_param(engine, head_end), "minute0": minute0}


def _ints(df: pd.DataFrame, *cols: str) -> pd.DataFrame:
    # PostgreSQL's SUM(bigint) is numeric (Decimal in pandas); give both paths the same dtypes.
    for c in cols:
        df[c] = df[c].astype("int64")
    return df


def _frame(engine: Engine, sql: str, **params: Any) -> pd.DataFrame:
    with engine.connect() as conn:
        res = conn.execute(text(sql), params)
        return pd.DataFrame(res.fetchall(), columns=list(res.keys()))


def tier_timeseries(engine: Engine, *, window_s: float = 900, bucket_s: int = 10,
                    now: datetime | None = None, source: str = "auto") -> pd.DataFrame:
    """Per tier and time bucket: requests/s, tokens/s, error rate, mean latency and mean TTFT.
    source: 'auto' (rollup for long windows), 'raw' (request_log) or 'rollup' (for the benchmark and tests)."""
    b = _bucket_expr(engine, bucket_s)
    if _use_rollup(source, window_s, bucket_s):
        df = _frame(engine, f"""
            SELECT bucket, tier, SUM(requests) AS requests, SUM(tokens) AS tokens, SUM(errors) AS errors,
                   SUM(latency_sum) AS latency_sum, SUM(ttft_sum) AS ttft_sum, SUM(ttft_n) AS ttft_n
            FROM (SELECT (minute / {int(bucket_s)}) * {int(bucket_s)} AS bucket, tier, requests,
                         completion_tokens AS tokens, errors_5xx AS errors, latency_ms_sum AS latency_sum,
                         ttft_ms_sum AS ttft_sum, ttft_count AS ttft_n
                  FROM request_stats_minute WHERE minute >= :minute0 AND tier <> ''
                  UNION ALL
                  SELECT {b} AS bucket, tier, 1, COALESCE(completion_tokens, 0),
                         CASE WHEN status >= 500 THEN 1 ELSE 0 END, latency_ms, COALESCE(ttft_ms, 0),
                         CASE WHEN ttft_ms IS NULL THEN 0 ELSE 1 END
                  FROM request_log WHERE ts >= :since AND ts < :head_end AND tier IS NOT NULL) u
            GROUP BY bucket, tier ORDER BY bucket""", **_rollup_bounds(engine, window_s, now))
        if not df.empty:
            df = _ints(df, "bucket", "requests", "tokens", "errors", "ttft_n")
            df["mean_latency_ms"] = df.pop("latency_sum").astype(float) / df["requests"]
            n = df.pop("ttft_n")
            df["mean_ttft_ms"] = (df.pop("ttft_sum").astype(float) / n.where(n > 0)).astype(float)
        else:
            df = df.drop(columns=["latency_sum", "ttft_sum", "ttft_n"]).assign(mean_latency_ms=[], mean_ttft_ms=[])
    else:
        df = _frame(engine, f"""
            SELECT {b} AS bucket, tier, COUNT(*) AS requests,
                   COALESCE(SUM(completion_tokens), 0) AS tokens,
                   SUM(CASE WHEN status >= 500 THEN 1 ELSE 0 END) AS errors,
                   AVG(latency_ms) AS mean_latency_ms, AVG(ttft_ms) AS mean_ttft_ms
            FROM request_log WHERE ts >= :since AND tier IS NOT NULL
            GROUP BY bucket, tier ORDER BY bucket""", since=_ts_param(engine, _since(window_s, now)))
    if df.empty:
        return df.assign(time=pd.Series(dtype="datetime64[ns, UTC]"), rps=[], tokens_s=[], error_rate=[])
    df["time"] = pd.to_datetime(df["bucket"].astype("int64"), unit="s", utc=True)
    df["rps"] = df["requests"] / bucket_s
    df["tokens_s"] = df["tokens"] / bucket_s
    df["error_rate"] = df["errors"] / df["requests"]
    return df


# `col || ''` in GROUP BY: otherwise SQLite groups by walking the tier (or deployment) index over the whole
# table instead of range-scanning the ts index for the window (far slower on a large log).
def tier_share(engine: Engine, *, window_s: float = 900, now: datetime | None = None,
               source: str = "auto") -> pd.DataFrame:
    if _use_rollup(source, window_s):
        df = _frame(engine, """
            SELECT tier, SUM(requests) AS requests FROM (
                SELECT tier, requests FROM request_stats_minute WHERE minute >= :minute0 AND tier <> ''
                UNION ALL
                SELECT tier, 1 FROM request_log WHERE ts >= :since AND ts < :head_end AND tier IS NOT NULL) u
            GROUP BY tier""", **_rollup_bounds(engine, window_s, now))
        df = _ints(df, "requests")
    else:
        df = _frame(engine, """
            SELECT tier || '' AS tier, COUNT(*) AS requests FROM request_log
            WHERE ts >= :since AND tier IS NOT NULL GROUP BY tier || ''""",
                    since=_ts_param(engine, _since(window_s, now)))
    total = df["requests"].sum() if not df.empty else 0
    df["share"] = df["requests"] / total if total else 0.0
    return df


def deployment_summary(engine: Engine, *, window_s: float = 900, now: datetime | None = None,
                       source: str = "auto") -> pd.DataFrame:
    if _use_rollup(source, window_s):
        df = _frame(engine, """
            SELECT deployment, tier, SUM(requests) AS requests, SUM(errors) AS errors,
                   SUM(latency_sum) AS latency_sum FROM (
                SELECT deployment, tier, requests, errors_5xx AS errors, latency_ms_sum AS latency_sum
                FROM request_stats_minute WHERE minute >= :minute0 AND deployment <> ''
                UNION ALL
                SELECT deployment, COALESCE(tier, ''), 1, CASE WHEN status >= 500 THEN 1 ELSE 0 END, latency_ms
                FROM request_log WHERE ts >= :since AND ts < :head_end AND deployment IS NOT NULL) u
            GROUP BY deployment, tier ORDER BY requests DESC""", **_rollup_bounds(engine, window_s, now))
        df = _ints(df, "requests", "errors")
        df["mean_latency_ms"] = df.pop("latency_sum").astype(float) / df["requests"]
        df["tier"] = df["tier"].where(df["tier"] != "", None)  # the rollup keys a missing tier as ''
        return df
    return _frame(engine, """
        SELECT deployment || '' AS deployment, tier, COUNT(*) AS requests,
               SUM(CASE WHEN status >= 500 THEN 1 ELSE 0 END) AS errors, AVG(latency_ms) AS mean_latency_ms
        FROM request_log WHERE ts >= :since AND deployment IS NOT NULL
        GROUP BY deployment || '', tier ORDER BY requests DESC""", since=_ts_param(engine, _since(window_s, now)))


def replay_rows(engine: Engine, *, limit: int = 500) -> pd.DataFrame:
    """The newest logged requests that carry what classification needs (body + x- headers)."""
    df = _frame(engine, """
        SELECT id, ts, tier, rules, score, policy_version, replay FROM request_log
        WHERE replay IS NOT NULL ORDER BY id DESC LIMIT :n""", n=int(limit))
    import json

    for col in ("rules", "replay"):  # raw SQL hands JSON back as text on SQLite
        df[col] = df[col].map(lambda v: json.loads(v) if isinstance(v, str) else v)
    # a JSON null is not SQL NULL: rows logged with prompt storage `none` (or a body that was not an object)
    return df[df["replay"].map(lambda v: isinstance(v, dict))].reset_index(drop=True) if not df.empty else df


def pinned_sessions(engine: Engine, *, limit: int = 2000, now: datetime | None = None) -> pd.DataFrame:
    """Live pins with the number of requests each session made under that pin (the log names the pin by its
    key and creation time; index on request_log.pin_created_at) and how many of them took their tier from the
    pin: those that arrived after it was written (the first request, whose score chose the tier, arrived
    before; the router marks the others `x-quantroute-pinned: true`). The most recently used first, by expiry
    (see `list_pins`: the expiry is not indexed, so this keeps the newest `limit` of every live pin read)."""
    now = now or utcnow()
    return _frame(engine, """
        SELECT p.session_key, p.model, p.tier, p.arm, p.deployment, p.policy_version,
               p.created_at AS since, p.last_used AS last_seen, p.expires_at,
               (SELECT COUNT(*) FROM request_log r WHERE r.pin_created_at = p.created_at
                  AND r.session_key = p.session_key) AS requests,
               (SELECT COUNT(*) FROM request_log r WHERE r.pin_created_at = p.created_at
                  AND r.session_key = p.session_key AND r.ts > p.created_at) AS routed_by_pin
        FROM session_pin p WHERE p.expires_at > :now
        ORDER BY p.expires_at DESC LIMIT :n""", now=_ts_param(engine, now), n=int(limit))


def pin_failures(engine: Engine, *, window_s: float = 3600, now: datetime | None = None) -> pd.DataFrame:
    """Per tier: 503s of pinned sessions (the router's error names the session as pinned)."""
    return _frame(engine, """
        SELECT tier, COUNT(*) AS pinned_503s FROM request_log
        WHERE ts >= :since AND status = 503 AND session_key IS NOT NULL AND error LIKE '%(pinned)%'
        GROUP BY tier""", since=_ts_param(engine, _since(window_s, now)))


def arm_guard_series(engine: Engine, *, model: str, window_s: float = 900, bucket_s: int = 30,
                     now: datetime | None = None) -> pd.DataFrame:
    """Per canary arm and bucket: requests, error rate, p95 latency and p95 TTFT (nearest-rank, in SQL with
    window functions; uses the (model, ts) index)."""
    b = _bucket_expr(engine, bucket_s)
    df = _frame(engine, f"""
        WITH x AS (
            SELECT arm, {b} AS bucket, status, latency_ms, ttft_ms,
                   ROW_NUMBER() OVER (PARTITION BY arm, {b} ORDER BY latency_ms) AS rl,
                   ROW_NUMBER() OVER (PARTITION BY arm, {b} ORDER BY COALESCE(ttft_ms, 1e12)) AS rt,
                   COUNT(*) OVER (PARTITION BY arm, {b}) AS n,
                   COUNT(ttft_ms) OVER (PARTITION BY arm, {b}) AS nt
            FROM request_log WHERE model = :model AND ts >= :since AND arm IS NOT NULL)
        SELECT arm, bucket, MAX(n) AS requests,
               SUM(CASE WHEN status >= 500 THEN 1 ELSE 0 END) * 1.0 / MAX(n) AS error_rate,
               MIN(CASE WHEN rl >= 0.95 * n THEN latency_ms END) AS p95_latency_ms,
               MIN(CASE WHEN rt >= 0.95 * nt AND ttft_ms IS NOT NULL THEN ttft_ms END) AS p95_ttft_ms
        FROM x GROUP BY arm, bucket ORDER BY bucket""", model=model, since=_ts_param(engine, _since(window_s, now)))
    if not df.empty:
        df["time"] = pd.to_datetime(df["bucket"].astype("int64"), unit="s", utc=True)
    return df


def audit_events(engine: Engine, *, actor: str | None = None, action_prefix: str | None = None,
                 search: str | None = None, since: datetime | None = None, limit: int = 500) -> pd.DataFrame:
    where = ["1=1"]
    params: dict[str, object] = {"n": int(limit)}
    if actor:
        where.append("actor = :actor")
        params["actor"] = actor
    if action_prefix:
        where.append("action LIKE :prefix")
        params["prefix"] = action_prefix + "%"
    if search:
        where.append("(subject LIKE :q OR CAST(detail AS TEXT) LIKE :q)")
        params["q"] = f"%{search}%"
    if since:
        where.append("at >= :since")
        params["since"] = _ts_param(engine, since)
    return _frame(engine, f"""
        SELECT id, at, actor, action, subject, version_before, version_after, detail FROM audit_event
        WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT :n""", **params)


def audit_facets(engine: Engine) -> tuple[list[str], list[str]]:
    actors = _frame(engine, "SELECT DISTINCT actor FROM audit_event ORDER BY actor")["actor"].tolist()
    actions = _frame(engine, "SELECT DISTINCT action FROM audit_event ORDER BY action")["action"].tolist()
    return actors, actions


def request_count(engine: Engine) -> int:
    return int(_frame(engine, "SELECT COUNT(*) AS n FROM request_log")["n"].iloc[0])


def shadow_pairs(engine: Engine, *, window_s: float = 86400, now: datetime | None = None) -> list[dict[str, Any]]:
    """Shadow pairs of the window, without bodies, for the pure analysis."""
    from quantroute.db.shadow_pair import pairs_since

    return pairs_since(engine, since=_since(window_s, now))


def shadow_disagreements(engine: Engine, *, window_s: float = 86400, rule: str | None = None,
                         limit: int = 20, now: datetime | None = None) -> list[dict[str, Any]]:
    """Disagreeing pairs with their bodies (when the router's prompt storage kept them), newest first."""
    from quantroute.db.shadow_pair import disagreeing

    return disagreeing(engine, since=_since(window_s, now), rule=rule, limit=limit)


def shadow_load(engine: Engine, *, window_s: float = 900, bucket_s: int = 15, now: datetime | None = None
                ) -> pd.DataFrame:
    """Shadow requests/s per shadow tier and time bucket: load the fleet carries that no user-traffic figure counts
    (shadow requests are never in request_log)."""
    b = _bucket_expr(engine, bucket_s)
    df = _frame(engine, f"""
        SELECT {b} AS bucket, shadow_tier AS tier, COUNT(*) AS shadows,
               SUM(CASE WHEN compared THEN 1 ELSE 0 END) AS compared
        FROM shadow_pair WHERE ts >= :since GROUP BY {b}, shadow_tier ORDER BY 1""",
                since=_ts_param(engine, _since(window_s, now)))
    if df.empty:
        return pd.DataFrame(columns=["time", "tier", "rps", "shadows", "compared"])
    df = _ints(df, "bucket", "shadows", "compared")
    df["time"] = pd.to_datetime(df["bucket"], unit="s", utc=True)
    df["rps"] = df["shadows"] / bucket_s
    return df[["time", "tier", "rps", "shadows", "compared"]]


def tenant_usage(engine: Engine, *, window_s: float = 86400, bucket_s: int = 3600,
                 now: datetime | None = None) -> pd.DataFrame:
    """Per time bucket, tenant and tier: requests and tokens, from the per-minute tenant rollup (whole minutes:
    `bucket_s` a multiple of 60). Requests without a client key are tenant ''."""
    if bucket_s % 60:
        raise ValueError(f"bucket_s: {bucket_s} cannot come from the per-minute rollup (valid: multiples of 60)")
    minute0 = int(_since(window_s, now).timestamp()) // 60 * 60
    df = _frame(engine, f"""
        SELECT (minute / {int(bucket_s)}) * {int(bucket_s)} AS bucket, tenant, tier,
               SUM(requests) AS requests, SUM(prompt_tokens) AS prompt_tokens,
               SUM(completion_tokens) AS completion_tokens
        FROM tenant_usage_minute WHERE minute >= :minute0
        GROUP BY (minute / {int(bucket_s)}) * {int(bucket_s)}, tenant, tier ORDER BY bucket""", minute0=minute0)
    if df.empty:
        return df.assign(time=pd.Series(dtype="datetime64[ns, UTC]"), tokens=[])
    df = _ints(df, "bucket", "requests", "prompt_tokens", "completion_tokens")
    df["time"] = pd.to_datetime(df["bucket"], unit="s", utc=True)
    df["tokens"] = df["prompt_tokens"] + df["completion_tokens"]
    return df


def tenants_and_keys(engine: Engine) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Tenants (floor, priority, limits) and client keys (prefix, tenant, label, floor, limits, expiry, who
    created and revoked them): never a key itself, only its prefix."""
    tenants = _frame(engine, "SELECT name, tier_floor, priority, rpm, tpm, created_at FROM tenant ORDER BY name")
    keys = _frame(engine, """
        SELECT prefix, tenant, label, tier_floor, rpm, tpm, expires_at, created_at, created_by, revoked_at,
               revoked_by FROM client_key ORDER BY id""")
    return tenants, keys
