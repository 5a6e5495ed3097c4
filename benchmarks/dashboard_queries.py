"""The dashboard's queries at 10 k / 100 k / 1 M request_log rows (SQLite, temp file), median of 3 runs each.

    python benchmarks/dashboard_queries.py [--sizes 10000,100000,1000000]

Rows are spread over the last 24 h with realistic tiers, deployments, arms and sessions; the pages' default
window is 15 min, so the time index bounds what each query reads. Prints seconds per query and the ratio to
the 10 k baseline measured in the same run."""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from dashboard import queries  # noqa: E402
from quantroute.db.audit import utcnow  # noqa: E402
from quantroute.db.engine import init_db, make_engine  # noqa: E402
from quantroute.db.request_log import RequestLog  # noqa: E402

TIERS = [("fp16", "llama3-8b-fp16"), ("fp8", "llama3-8b-fp8-dynamic"), ("int8", "llama3-8b-w8a8-int8"),
         ("int4", "llama3-8b-awq-w4a16")]


def fill(engine, n: int, start: int) -> None:
    rnd = random.Random(start)
    now = utcnow()
    table = RequestLog.__table__
    batch = []
    for i in range(start, n):
        tier, dep = rnd.choice(TIERS)
        arm = rnd.choice(["baseline", "candidate"]) if tier == "int4" else None
        batch.append({"ts": now - timedelta(seconds=rnd.uniform(0, 86400)), "request_id": f"r{i}",
                      "session_key": f"s-{rnd.randint(0, 5000)}" if rnd.random() < 0.3 else None,
                      "model": "llama3-8b", "deployment": dep, "node": f"{tier}-a", "tier": tier, "arm": arm,
                      "policy_version": 1, "rules": [], "score": 0.0, "status": 200 if rnd.random() > 0.01 else 503,
                      "stream": False, "latency_ms": rnd.uniform(50, 2000), "ttft_ms": rnd.uniform(10, 300),
                      "prompt_tokens": 100, "completion_tokens": rnd.randint(10, 800), "retries": 0,
                      "escalated": False, "error": None, "replay": None})
        if len(batch) == 20_000:
            with engine.begin() as c:
                c.execute(table.insert(), batch)
            batch = []
    if batch:
        with engine.begin() as c:
            c.execute(table.insert(), batch)


QUERIES = {
    "tier_timeseries 15m": lambda e: queries.tier_timeseries(e, window_s=900, bucket_s=15),
    "tier_timeseries 24h": lambda e: queries.tier_timeseries(e, window_s=86400, bucket_s=900),
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10000,100000,1000000")
    sizes = [int(x) for x in ap.parse_args().sizes.split(",")]
    with tempfile.TemporaryDirectory() as d:
        engine = make_engine(f"sqlite:///{d}/bench.db")
        init_db(engine)
        results: dict[int, dict[str, float]] = {}
        have = 0
        for n in sizes:
            t = time.perf_counter()
            fill(engine, n, have)
            have = n
            print(f"filled {n:,} rows ({time.perf_counter() - t:.1f} s)", flush=True)
            results[n] = {name: timed(fn, engine) for name, fn in QUERIES.items()}
        base = sizes[0]
        print(f"\n{'query':<26}" + "".join(f"{n:>14,}" for n in sizes) + f"   (seconds; x = ratio to {base:,})")
        for name in QUERIES:
            cells = "".join(f"{results[n][name]:>8.4f} x{results[n][name] / max(results[base][name], 1e-9):<4.0f}"
                            for n in sizes)
            print(f"{name:<26}{cells}")


if __name__ == "__main__":
    main()
