"""What the router's client key check costs alone, in this process: `KeyTable.check` for a valid key among
`keys` others, with a key and a tenant rate limit to take from (the most it does on the request path). The
wrk rows of router_overhead.py (`keys` against `none`) move with the host by more than this on shared cores."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path


def key_check_us(*, keys: int = 1000, batches: int = 30, per_batch: int = 2000) -> dict[str, float]:
    """Microseconds per check: the median and the spread of `batches` batches of `per_batch` checks."""
    from quantroute.db.engine import init_db, make_engine, session
    from quantroute.db.user import User, create_user
    from quantroute.router.access.keys import KeyTable
    from quantroute.tenants import create_key, set_tenant

    with tempfile.TemporaryDirectory(prefix="qr-keys-") as tmp:
        eng = make_engine(f"sqlite:///{Path(tmp) / 'keys.db'}")
        init_db(eng)
        with session(eng) as s:
            create_user(session=s, user=User(name="bench", role="operator"))
        limit = 10**9  # never reached: every check takes from both buckets and passes
        set_tenant(eng, actor="bench", name="bench", rpm=limit, tpm=limit)
        made = [create_key(eng, actor="bench", tenant="bench", rpm=limit).key for _ in range(keys)]
        table = KeyTable(eng, required=True)
        table.refresh()
        eng.dispose()
    headers = {"authorization": f"Bearer {made[len(made) // 2]}", "content-type": "application/json"}

    async def run() -> list[float]:
        out = []
        for _ in range(batches):
            t0 = time.perf_counter()
            for _ in range(per_batch):
                await table.check(headers, 1, 4096)
            out.append((time.perf_counter() - t0) / per_batch * 1e6)
        return out

    per = asyncio.run(run())
    return {"p50_us": statistics.median(per), "min_us": min(per), "max_us": max(per), "keys": keys}
