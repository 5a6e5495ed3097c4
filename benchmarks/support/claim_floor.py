"""What a first turn at c=1 cannot go below on this host and database: one-pin claims timed alone.

A first turn answers only once its pin is stored (`Decider.settle`). At concurrency 1 every batch holds one pin,
so the claim's round trip (and on PostgreSQL with durable pins, the commit's WAL flush) is on the first turn's
critical path however the router is written. This times exactly that part, with nothing else running: the
router's own claim path (`claims_for`: asyncpg on PostgreSQL, the in-loop sqlite3 connection on SQLite), one pin
a statement, `n` in a row, each a new session key. On PostgreSQL it also times `SELECT 1` on the same
connection: the round trip with no write. The figures go next to the router's `new`-over-`none` p50 at c=1 in
router_overhead.py's report, so each run shows how much of a first turn's cost is the database's on that host,
instead of a figure measured once on another day."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid
from datetime import timedelta


def _row(key: str) -> dict:
    from quantroute.clock import utcnow

    now = utcnow()
    return {"session_key": key, "model": "llama3-8b", "tier": "int4", "arm": None, "deployment": None,
            "served_deployment": "llama3-8b-awq-w4a16", "last_node": None, "policy_version": 1, "created_at": now,
            "last_used": now, "expires_at": now + timedelta(hours=1)}


def _quantile(ms: list[float], q: float) -> float:
    return statistics.quantiles(ms, n=100, method="inclusive")[round(q * 100) - 1] if len(ms) > 1 else ms[0]


async def _timed(url: str, synchronous: bool, n: int, warmup: int) -> dict:
    from quantroute.db.engine import make_engine
    from quantroute.router.pindb import AsyncpgClaims, claims_for

    engine = make_engine(url)
    claims = claims_for(engine, synchronous=synchronous)
    tag = uuid.uuid4().hex[:8]
    try:
        claim_ms: list[float] = []
        for i in range(warmup + n):
            row = _row(f"floor-{tag}-{i}")
            t0 = time.perf_counter()
            stored = await claims.claim([row], 10.0)
            took = (time.perf_counter() - t0) * 1e3
            if stored[0]["session_key"] != row["session_key"]:
                raise RuntimeError(f"the claim returned {stored[0]['session_key']!r} for {row['session_key']!r}")
            if i >= warmup:
                claim_ms.append(took)
        out = {"n": n, "claim_p50_ms": statistics.median(claim_ms), "claim_p99_ms": _quantile(claim_ms, 0.99)}
        if isinstance(claims, AsyncpgClaims) and claims._conn is not None:
            rtt: list[float] = []
            for _ in range(n):
                t0 = time.perf_counter()
                await claims._conn.fetchval("SELECT 1")
                rtt.append((time.perf_counter() - t0) * 1e3)
            out["select1_p50_ms"] = statistics.median(rtt)
        return out
    finally:
        await claims.aclose()
        engine.dispose()


def claim_floor(url: str, *, synchronous: bool = True, n: int = 400, warmup: int = 20) -> dict:
    """{n, claim_p50_ms, claim_p99_ms[, select1_p50_ms]}: `n` one-pin claims into the database at `url` (at the
    schema already; the rows stay there), timed one after another, after `warmup` untimed ones."""
    if n < 1 or warmup < 0:
        raise ValueError(f"n must be 1 or more and warmup 0 or more, got n={n}, warmup={warmup}")
    try:
        import uvloop  # the loop the router runs on
    except ImportError:
        return asyncio.run(_timed(url, synchronous, n, warmup))
    return uvloop.run(_timed(url, synchronous, n, warmup))
