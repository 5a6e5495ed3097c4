"""Request-log retention as the router's own background job: every `interval_s` delete the rows older than the
configured age (in batches; the per-minute rollup keeps their counts). Each replica runs it; the deletes are
idempotent, so several replicas only share the work. `quantroute db prune` remains for cron and one-offs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from datetime import timedelta

from sqlalchemy.engine import Engine

from quantroute.clock import utcnow
from quantroute.db import shadow_pair
from quantroute.db.request_log import prune_before

log = logging.getLogger(__name__)


async def retention_loop(engine: Engine, *, max_age: timedelta, interval_s: float, batch: int = 10_000,
                         on_pruned: Callable[[int], None] | None = None) -> None:
    while True:
        try:
            cut = utcnow() - max_age
            n = await asyncio.to_thread(prune_before, engine, cut, batch=batch)
            # shadow pairs keep the request log's retention (they may hold bodies too)
            await asyncio.to_thread(shadow_pair.prune_before, engine, cut, batch=batch)
            if n and on_pruned is not None:
                on_pruned(n)
        except Exception:
            log.exception("request-log retention pass failed")
        await asyncio.sleep(interval_s)
