"""What a first turn at c=1 cannot go below on this host and database: one-pin claims timed alone.

A first turn answers only once its pin is stored (`Decider.settle`). At concurrency 1 every batch holds one pin,
so the claim's round trip (and on PostgreSQL with durable pins, the commit's WAL flush) is on the first turn's
critical path however the router is written. This times exactly that part, with nothing else running: the
router's own claim path (`claims_for`: asyncpg on PostgreSQL, the in-loop sqlite3 connection on SQLite), one pin
a statement, `n` in a row, each a new session key. On PostgreSQL it also times `SELECT 1` on a connection
like the claims': the round trip with no write. The figures go next to the router's `new`-over-`none` p50 at c=1 in
router_overhead.py's report, so each run shows how much of a first turn's cost is the database's on that host,
instead of a figure measured once on another day."""

from __future__ import annotations

import asyncio
import statistics
import time
import uuid


def _p99(ms: list[float]) -> float:
    return statistics.quantiles(ms, n=100, method="inclusive")[98] if len(ms) > 1 else ms[0]


async def _timed(url: str, synchronous: bool, n: int, warmup: int) -> dict:
    from quantroute.clock import utcnow
    from quantroute.db.engine import make_engine
    from quantroute.db.session_pin import claim_row
    from quantroute.router.pins.claims import AsyncpgClaims, claims_for

    engine = make_engine(url)
    claims = claims_for(engine, synchronous=synchronous)
    tag = uuid.uuid4().hex[:8]
    try:
        claim_ms: list[float] = []
        for i in range(warmup + n):
            row = claim_row(f"floor-{tag}-{i}", "llama3-8b", "int4", None, None, "llama3-8b-awq-w4a16", None, 1,
                            utcnow(), 3600)
            t0 = time.perf_counter()
            stored = await claims.claim([row], 10.0)
            took = (time.perf_counter() - t0) * 1e3
            if stored[0]["session_key"] != row["session_key"]:
                raise RuntimeError(f"the claim returned {stored[0]['session_key']!r} for {row['session_key']!r}")
            if i >= warmup:
                claim_ms.append(took)
        out = {"n": n, "claim_p50_ms": statistics.median(claim_ms), "claim_p99_ms": _p99(claim_ms)}
        if isinstance(claims, AsyncpgClaims):
            out["select1_p50_ms"] = await _select1_p50_ms(claims.dsn, n)
        return out
    finally:
        await claims.aclose()
        engine.dispose()


async def _select1_p50_ms(dsn: str, n: int) -> float:
    """`SELECT 1` on an asyncpg connection to the same database as the claims: the round trip with no write."""
    import asyncpg

    conn = await asyncpg.connect(dsn)
    try:
        await conn.fetchval("SELECT 1")
        rtt: list[float] = []
        for _ in range(n):
            t0 = time.perf_counter()
            await conn.fetchval("SELECT 1")
            rtt.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(rtt)
    finally:
        await conn.close()


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
