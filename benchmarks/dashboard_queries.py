"""The dashboard's queries at 10 k / 100 k / 1 M request_log rows, median of 3 runs each, on SQLite (temp file)
or on PostgreSQL (a scratch database created on the server given, dropped afterwards).

    python benchmarks/dashboard_queries.py [--sizes 10000,100000,1000000]
                                           [--db postgresql+psycopg://postgres@127.0.0.1:5432/test]

Rows are spread over the last 24 h with realistic tiers, deployments, arms and sessions and are written the
way the router writes them: its RequestLogWriter's batch insert (500 rows, in time order like live traffic)
which also upserts the per-minute rollup in the same transaction, so the fill reports what the rollup costs
the writer. Window queries run on both paths (raw request_log and the rollup); the table prints seconds, the
ratio to the 10 k baseline, and raw/rollup speed-ups. The pages' default window is 15 min (raw path).
Last, retention: `quantroute db prune`'s batched delete of the older half of the rows, in rows per second,
and the 24 h queries again afterwards."""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import statistics
import tempfile
import time
from datetime import timedelta

from dashboard import queries
from quantroute.clock import utcnow
from quantroute.db import request_log
from quantroute.db.engine import init_db, make_engine
from quantroute.router.requestlog import writer as requestlog

TIERS = [("fp16", "llama3-8b-fp16"), ("fp8", "llama3-8b-fp8-dynamic"), ("int8", "llama3-8b-w8a8-int8"),
         ("int4", "llama3-8b-awq-w4a16")]
BATCH = 500  # the router's default log_batch_size


class Timed:
    """Wraps one of the writer's rollup steps to add up the time spent in it (the writer calls it by name)."""

    def __init__(self, fn) -> None:
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *a, **kw):
        t = time.perf_counter()
        try:
            return self.fn(*a, **kw)
        finally:
            self.seconds += time.perf_counter() - t


def fill(engine, n: int, start: int) -> dict[str, float]:
    rnd = random.Random(start)
    now = utcnow()
    ages = sorted((rnd.uniform(0, 86400) for _ in range(start, n)), reverse=True)  # oldest first, like traffic
    rows = []
    for i, age in zip(range(start, n), ages):
        tier, dep = rnd.choice(TIERS)
        arm = rnd.choice(["baseline", "candidate"]) if tier == "int4" else None
        rows.append({"ts": now - timedelta(seconds=age), "request_id": f"r{i}",
                     "session_key": f"s-{rnd.randint(0, 5000)}" if rnd.random() < 0.3 else None,
                     "model": "llama3-8b", "deployment": dep, "node": f"{tier}-a", "tier": tier, "arm": arm,
                     "policy_version": 1, "rules": [], "score": 0.0, "status": 200 if rnd.random() > 0.01 else 503,
                     "stream": False, "latency_ms": rnd.uniform(50, 2000), "ttft_ms": rnd.uniform(10, 300),
                     "prompt_tokens": 100, "completion_tokens": rnd.randint(10, 800), "retries": 0,
                     "escalated": False, "error": None,
                     # the router logs what the what-if replay needs for every routed request
                     "replay": {"body": {"model": "llama3-8b", "temperature": rnd.choice([0.0, 0.7, 1.0]),
                                         "messages": [{"role": "user", "content": f"request {i}"}]},
                                "headers": {}}})
    agg, ups = Timed(requestlog.minute_stats), Timed(requestlog.upsert_minute_stats)
    requestlog.minute_stats, requestlog.upsert_minute_stats = agg, ups
    try:
        writer = requestlog.RequestLogWriter(engine, batch_size=BATCH)
        t = time.perf_counter()
        for i in range(0, len(rows), BATCH):
            writer._insert(rows[i:i + BATCH])  # exactly what the writer's background task runs per batch
        total = time.perf_counter() - t
    finally:
        requestlog.minute_stats, requestlog.upsert_minute_stats = agg.fn, ups.fn
    return {"rows": len(rows), "total": total, "aggregate": agg.seconds, "upsert": ups.seconds}


# (name, function, kwargs): the window queries run twice, source="raw" and source="rollup"
WINDOWED = [
    ("tier_timeseries 1h/60s", queries.tier_timeseries, {"window_s": 3600, "bucket_s": 60}),
    ("tier_timeseries 6h/300s", queries.tier_timeseries, {"window_s": 21600, "bucket_s": 300}),
    ("tier_timeseries 24h/900s", queries.tier_timeseries, {"window_s": 86400, "bucket_s": 900}),
    ("tier_share 1h", queries.tier_share, {"window_s": 3600}),
    ("tier_share 24h", queries.tier_share, {"window_s": 86400}),
    ("deployment_summary 1h", queries.deployment_summary, {"window_s": 3600}),
    ("deployment_summary 24h", queries.deployment_summary, {"window_s": 86400}),
]
QUERIES = {f"{name} [{src}]": (lambda e, f=f, kw=kw, src=src: f(e, **kw, source=src))
           for name, f, kw in WINDOWED for src in ("raw", "rollup")}
QUERIES |= {
    "tier_timeseries 15m": lambda e: queries.tier_timeseries(e, window_s=900, bucket_s=15),
    "tier_share 15m": lambda e: queries.tier_share(e, window_s=900),
    "deployment_summary 15m": lambda e: queries.deployment_summary(e, window_s=900),
    "arm_guard_series 30m": lambda e: queries.arm_guard_series(e, model="llama3-8b", window_s=1800, bucket_s=30),
    "pinned_sessions": lambda e: queries.pinned_sessions(e),
    "replay_rows 500": lambda e: queries.replay_rows(e, limit=500),
    "audit_events": lambda e: queries.audit_events(e, limit=500),
}


def timed(fn, engine) -> float:
    runs = []
    for _ in range(3):
        t = time.perf_counter()
        fn(engine)
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


@contextlib.contextmanager
def scratch_db(server_url: str | None):
    """A URL of an empty database: a temp SQLite file, or a new database on the PostgreSQL server given."""
    if not server_url:
        with tempfile.TemporaryDirectory() as d:
            yield f"sqlite:///{d}/bench.db"
        return
    from sqlalchemy.engine import make_url

    admin_url = make_url(server_url)
    name = f"quantroute_bench_{os.getpid()}"
    admin = make_engine(admin_url.render_as_string(hide_password=False)).execution_options(isolation_level="AUTOCOMMIT")
    with admin.connect() as c:
        c.exec_driver_sql(f'CREATE DATABASE "{name}"')
    try:
        yield admin_url.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as c:
            c.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.dispose()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--db", default=None, help="a PostgreSQL server URL (a scratch database is made on it); "
                                                 "default: SQLite in a temp file")
    args = ap.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    with scratch_db(args.db) as url:
        engine = make_engine(url)
        print(f"database: {engine.dialect.name}", flush=True)
        init_db(engine)
        results: dict[int, dict[str, float]] = {}
        have = 0
        for n in sizes:
            f = fill(engine, n, have)
            have = n
            if engine.dialect.name == "postgresql":
                # autovacuum would analyze the table after a bulk insert like this; don't time plans made
                # without statistics
                with engine.begin() as c:
                    c.exec_driver_sql("ANALYZE request_log; ANALYZE request_stats_minute")
            with engine.connect() as c:
                minutes = c.exec_driver_sql("SELECT COUNT(*) FROM request_stats_minute").scalar_one()
            print(f"filled {n:,} rows: +{f['rows']:,} through the writer in {f['total']:.1f} s "
                  f"({f['total'] / f['rows'] * 1e6:.0f} us/row); rollup share: aggregate {f['aggregate']:.2f} s + "
                  f"upsert {f['upsert']:.2f} s = {(f['aggregate'] + f['upsert']) / f['total']:.0%}; "
                  f"{minutes:,} rollup rows", flush=True)
            results[n] = {name: timed(fn, engine) for name, fn in QUERIES.items()}
        base = sizes[0]
        print(f"\n{'query':<34}" + "".join(f"{n:>16,}" for n in sizes) + f"   (seconds; x = ratio to {base:,})")
        for name in QUERIES:
            cells = "".join(f"{results[n][name]:>9.4f} x{results[n][name] / max(results[base][name], 1e-9):<5.1f}"
                            for n in sizes)
            print(f"{name:<34}{cells}")
        print(f"\n{'raw / rollup (speed-up)':<34}" + "".join(f"{n:>16,}" for n in sizes))
        for name, _, _ in WINDOWED:
            cells = "".join(f"{results[n][name + ' [raw]'] / max(results[n][name + ' [rollup]'], 1e-9):>15.1f}x"
                            for n in sizes)
            print(f"{name:<34}{cells}")

        # retention: the older half of the rows (12 h of the 24 h), in the CLI's batches
        cut = utcnow() - timedelta(hours=12)
        t = time.perf_counter()
        deleted = request_log.prune_before(engine, cut, batch=10_000)
        took = time.perf_counter() - t
        print(f"\nretention: pruned {deleted:,} of {sizes[-1]:,} rows in {took:.1f} s "
              f"({deleted / max(took, 1e-9):,.0f} rows/s, batches of 10,000)")
        for name in ("tier_share 24h [rollup]", "tier_timeseries 24h/900s [rollup]", "tier_share 15m"):
            print(f"  after prune {name:<34}{timed(QUERIES[name], engine):>9.4f} s")
        engine.dispose()


if __name__ == "__main__":
    main()
