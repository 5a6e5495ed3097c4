"""The request log writer: rows are buffered in memory and inserted in batches by a background task.

The request path only appends a tuple to a bounded deque. When the DB is slow or down the buffer fills and
the oldest-unwritten rows beyond the bound are dropped and counted; a request never waits for the DB.
Each batch also updates the per-minute rollup (request_stats_minute) in the same transaction, so the
dashboard's long windows read a few thousand rollup rows instead of every logged request."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Callable

from sqlalchemy.engine import Engine

from quantroute.db.request_log import RequestLog
from quantroute.db.request_stats import minute_stats, upsert_minute_stats

log = logging.getLogger(__name__)

COLUMNS = ("ts", "request_id", "session_key", "model", "deployment", "node", "tier", "arm", "policy_version",
           "rules", "score", "status", "stream", "latency_ms", "ttft_ms", "prompt_tokens", "completion_tokens",
           "retries", "escalated", "error", "replay")


class RequestLogWriter:
    def __init__(self, engine: Engine | None, *, batch_size: int = 500, flush_interval_s: float = 0.5,
                 max_buffered: int = 20_000, on_drop: Callable[[int], None] | None = None) -> None:
        self.engine = engine
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.max_buffered = max_buffered
        self.buffer: deque[dict] = deque()
        self.dropped = 0
        self.written = 0
        self.write_errors = 0
        self.on_drop = on_drop
        self._wake = asyncio.Event()
        self._sql: str | None = None
        self._procs: list = []

    def add(self, row: dict) -> None:
        if len(self.buffer) >= self.max_buffered:
            self.dropped += 1
            if self.on_drop:
                self.on_drop(1)
            return
        self.buffer.append(row)
        if len(self.buffer) >= self.batch_size:
            self._wake.set()

    async def run(self) -> None:
        """Background task: flush every interval or when a batch is full."""
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.flush_interval_s)
            except TimeoutError:
                pass
            self._wake.clear()
            await self.flush()

    async def flush(self) -> None:
        while self.buffer and self.engine is not None:
            batch = [self.buffer.popleft() for _ in range(min(self.batch_size, len(self.buffer)))]
            try:
                await asyncio.to_thread(self._insert, batch)
            except Exception as e:  # noqa: BLE001 - keep the rows for the next try, within the bound
                self.write_errors += 1
                log.warning("request log write failed (%d rows kept): %s", len(batch), e)
                room = self.max_buffered - len(self.buffer)
                keep = batch[:max(room, 0)]
                lost = len(batch) - len(keep)
                self.buffer.extendleft(reversed(keep))
                if lost:
                    self.dropped += lost
                    if self.on_drop:
                        self.on_drop(lost)
                return
            self.written += len(batch)

    def _insert(self, batch: list[dict]) -> None:
        # One driver-level executemany with the columns' own bind processors: the same values SQLAlchemy
        # would write, at a fraction of the per-row cost (this thread competes with requests for the GIL).
        if self._sql is None:
            self._prepare()
        procs = self._procs
        rows = [tuple(p(r.get(c)) if p else r.get(c) for c, p in procs) for r in batch]
        # Aggregated before the transaction opens, so the DB write lock is held only for the two statements;
        # one transaction, so a failed batch (kept and retried) never leaves the rollup counting it.
        stats = minute_stats(batch)
        with self.engine.begin() as conn:
            conn.exec_driver_sql(self._sql, rows)
            upsert_minute_stats(conn=conn, stats=stats)

    def _prepare(self) -> None:
        dialect = self.engine.dialect
        table = RequestLog.__table__
        # dialect_impl: the generic JSON type has no bind processor for psycopg (a dict would reach the driver
        # as is and fail); PostgreSQL's own JSON type wraps it
        self._procs = [(c, table.c[c].type.dialect_impl(dialect).bind_processor(dialect)) for c in COLUMNS]
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        self._sql = (f"INSERT INTO {table.name} ({', '.join(COLUMNS)}) "
                     f"VALUES ({', '.join([mark] * len(COLUMNS))})")
