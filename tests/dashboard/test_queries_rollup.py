"""The Fleet queries give the same figures from request_log and from the per-minute rollup on the same data
(rows written by the router's writer, windows not aligned to minutes), and 'auto' picks the rollup only for
long windows."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pandas as pd
import pytest

from dashboard import queries
from quantroute.clock import utcnow
from quantroute.router.requestlog.writer import RequestLogWriter


@pytest.fixture
def logged(engine):
    """~1500 requests over the last 3 h, through the router's writer; returns (engine, now)."""
    rnd = random.Random(7)
    now = utcnow().replace(second=37, microsecond=250_000)  # not on a minute: the head-minute part is exercised
    writer = RequestLogWriter(engine, batch_size=200)
    for i in range(1500):
        tier = rnd.choice(["fp16", "fp8", "int8", "int4", None])
        writer.add({"ts": now - timedelta(seconds=rnd.uniform(0, 3 * 3600)), "request_id": f"r{i}",
                    "session_key": None, "model": "llama3-8b", "deployment": f"dep-{tier}" if tier else None,
                    "node": None, "tier": tier, "arm": rnd.choice(["baseline",
                                                                   "candidate"]) if tier == "int4" else None,
                    "policy_version": 1, "rules": [], "score": 0.0, "status": rnd.choice([200] * 12 + [429, 503]),
                    "stream": False, "latency_ms": rnd.uniform(20, 1500), "ttft_ms": rnd.uniform(5, 200),
                    "prompt_tokens": 50, "completion_tokens": rnd.choice([None, rnd.randint(1, 600)]), "retries": 0,
                    "escalated": False, "error": None, "replay": None})
    asyncio.run(writer.flush())
    assert writer.written == 1500
    return engine, now


def same(raw: pd.DataFrame, rolled: pd.DataFrame, keys: list[str]) -> None:
    assert len(raw) > 0
    assert list(raw.columns) == list(rolled.columns)
    a = raw.sort_values(keys).reset_index(drop=True)
    b = rolled.sort_values(keys).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-9, check_dtype=False)
    for c in a.columns:  # same kinds of values, so pages and charts see no difference
        assert a[c].dtype.kind == b[c].dtype.kind, c


def test_rows_at_the_end_of_a_minute_are_bucketed_alike(engine):
    """Rows at :59.9995 and later stay in their own minute on both paths (SQLite rounds to the millisecond)."""
    now = utcnow().replace(second=30, microsecond=0)
    writer = RequestLogWriter(engine, batch_size=50)
    for i, us in enumerate([999_500, 999_800, 999_999, 10, 999_999, 500_000]):
        ts = now - timedelta(minutes=40 + i) + timedelta(seconds=29, microseconds=us)  # :59.xxx of that minute
        writer.add({"ts": ts, "request_id": f"edge{i}", "session_key": None, "model": "llama3-8b",
                    "deployment": "dep-int4", "node": None, "tier": "int4", "arm": None, "policy_version": 1,
                    "rules": [], "score": 0.0, "status": 200, "stream": False, "latency_ms": 10.0 + i,
                    "ttft_ms": 1.0, "prompt_tokens": 5, "completion_tokens": 1, "retries": 0, "escalated": False,
                    "error": None, "replay": None})
    asyncio.run(writer.flush())
    raw = queries.tier_timeseries(engine, window_s=3600, bucket_s=60, now=now, source="raw")
    rolled = queries.tier_timeseries(engine, window_s=3600, bucket_s=60, now=now, source="rollup")
    same(raw, rolled, ["bucket", "tier"])
    assert len(raw) == 6  # six minutes, one row each


@pytest.mark.parametrize("window_s,bucket_s", [(3600, 60), (3 * 3600 + 60, 300), (21600, 900), (5400, 120)])
def test_tier_timeseries_same_from_either_path(logged, window_s, bucket_s):
    engine, now = logged
    raw = queries.tier_timeseries(engine, window_s=window_s, bucket_s=bucket_s, now=now, source="raw")
    rolled = queries.tier_timeseries(engine, window_s=window_s, bucket_s=bucket_s, now=now, source="rollup")
    same(raw, rolled, ["bucket", "tier"])


@pytest.mark.parametrize("window_s", [2400, 3600, 86400])
def test_share_and_deployments_same_from_either_path(logged, window_s):
    engine, now = logged
    same(queries.tier_share(engine, window_s=window_s, now=now, source="raw"),
         queries.tier_share(engine, window_s=window_s, now=now, source="rollup"), ["tier"])
    same(queries.deployment_summary(engine, window_s=window_s, now=now, source="raw"),
         queries.deployment_summary(engine, window_s=window_s, now=now, source="rollup"), ["deployment", "tier"])


def test_auto_reads_rollup_only_for_long_windows(logged):
    engine, now = logged
    from sqlalchemy import text

    # Empty the rollup: only windows read from request_log still see the requests.
    with engine.begin() as c:
        c.execute(text("DELETE FROM request_stats_minute"))
    short = queries.tier_share(engine, window_s=900, now=now)
    assert short["requests"].sum() > 0
    assert queries.tier_share(engine, window_s=3600, now=now)["requests"].sum() < \
        queries.tier_share(engine, window_s=3600, now=now, source="raw")["requests"].sum()
    assert queries.tier_timeseries(engine, window_s=3600, bucket_s=90, now=now)["requests"].sum() == \
        queries.tier_timeseries(engine, window_s=3600, bucket_s=90, now=now, source="raw")["requests"].sum()


def test_empty_window_from_rollup(engine):
    assert queries.tier_timeseries(engine, window_s=86400, bucket_s=900).empty
    assert queries.tier_share(engine, window_s=86400).empty
    assert queries.deployment_summary(engine, window_s=86400).empty
    with pytest.raises(ValueError, match="bucket_s"):
        queries.tier_timeseries(engine, window_s=86400, bucket_s=90, source="rollup")
