"""The request log writer: rows are buffered in memory and inserted in batches by a background task.

The request path only appends a row to a deque bounded in rows and in bytes. When the DB is slow or down the
buffer fills and new rows beyond the bound are dropped and counted; a request never waits for the DB.
Each batch also updates the per-minute rollup (request_stats_minute) in the same transaction, so the
dashboard's long windows read a few thousand rollup rows instead of every logged request.

Rows are made ready on the event loop, as each request ends (after its answer went out): the replay record
(redaction included) built, every value made storable, JSON encoded, bound for the driver (`prepare`). The
writer's thread then holds the GIL only to hand a whole batch to the driver. Whole batches, because the thread
and the loop share one GIL and one SQLite file: a writer that drained the buffer to its last row committed
transactions of a few rows under load, each rewriting the table's and five indexes' tail pages (strace: 4.6 page
writes and 4-12 GIL hand-offs (futex) a request without sessions, against 0.8 and 1 with whole batches), and
preparing rows in that thread cost the loop as much again in hand-offs. A partial batch waits for the flush
interval. A row whose client-sized parts (the body kept for replay) exceed `LOOP_PREPARE_MAX_BYTES` is still
prepared in the writer's thread: encoding and walking a large body would stop the loop for milliseconds.

No row can stop the log. Rows are made storable first (`storable.storable_row`: depth, size, NUL, surrogates).
A batch that still fails for a reason other than the DB being unreachable is split in halves until the rows
it refuses are alone; those are dropped, counted by reason and a sample logged, and the rest commit. Only a
DB that cannot be reached keeps a batch for the next try. Every drop is counted with its reason
(`quantroute_request_log_dropped_total{reason}`): buffer_full, rejected, shutdown."""

from __future__ import annotations

import asyncio
import logging
import os
import sqlite3
import time
from collections import deque
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from quantroute.db.engine import BUSY_TIMEOUT_MS, WAL_SIZE_LIMIT, require_engine, table_of
from quantroute.db.processors import bind_processors
from quantroute.db.request_log import RequestLog
from quantroute.db.request_stats import (
    minute_stats,
    tenant_minute_stats,
    tenant_upsert_statement,
    upsert_minute_stats,
    upsert_statement,
)
from quantroute.router.requestlog.privacy import PendingReplay
from quantroute.router.requestlog.storable import storable_row

log = logging.getLogger(__name__)

COLUMNS = ("ts", "request_id", "session_key", "model", "deployment", "node", "tier", "arm", "policy_version",
           "rules", "score", "status", "stream", "latency_ms", "ttft_ms", "prompt_tokens", "completion_tokens",
           "retries", "escalated", "error", "replay", "affinity", "pin_created_at", "reason", "tenant")
ROW_OVERHEAD = 512  # bytes a row costs in memory besides its client-sized parts (body, error)
# Above this, a row is prepared in the writer's thread (where the loop gets the GIL back every switch interval)
# instead of on the loop in one go: ~0.5 ms of loop time for a 64 KiB body, tens of ms at the 8 MiB body bound.
LOOP_PREPARE_MAX_BYTES = 64 * 1024

# The database could not be reached or was busy: the rows are fine, try them again later.
TRANSIENT = (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.DisconnectionError, sa_exc.TimeoutError,
             OSError)

CHECKPOINT_WAIT_MS = 100  # how long a WAL truncation waits for readers and writers before it is left for later

OnDrop = Callable[[str, int], None]  # (reason, rows)


class Prepared:
    """One row as it will be stored: `row` (storable, JSON columns as text; the rollup reads it) and `values`
    (bound for the driver, in the writer's column order); or, for a large row until the writer's thread
    prepares it, `raw` (the row as the request path gave it; `row` and `values` empty until then)."""

    __slots__ = ("row", "values", "raw")

    def __init__(self, row: dict, values: list, raw: dict | None = None) -> None:
        self.row = row
        self.values = values
        self.raw = raw


class _Unreachable(Exception):
    """The DB could not be reached midway; `pending` are the rows not yet stored (in order)."""

    def __init__(self, cause: BaseException, pending: list[Prepared], written: int, rejected: int) -> None:
        super().__init__(str(cause))
        self.pending = pending
        self.written = written
        self.rejected = rejected


class RequestLogWriter:
    # What a writer writes (the shadow pair writer sets its own): the table, its inserted columns in order, the
    # columns bounded as JSON values (storable_row) and whether each batch also updates the per-minute rollup.
    # JSON columns are bound as the text storable_row encoded (once, with orjson).
    table_model: type[SQLModel] = RequestLog
    columns: tuple[str, ...] = COLUMNS
    json_columns: tuple[str, ...] = ("rules", "replay")
    rollup = True

    def __init__(self, engine: Engine | None, *, batch_size: int = 500, flush_interval_s: float = 0.5,
                 max_buffered: int = 20_000, max_buffered_bytes: int = 64 * 1024 * 1024,
                 on_drop: OnDrop | None = None) -> None:
        self.engine = engine
        self.batch_size = batch_size
        self.flush_interval_s = flush_interval_s
        self.max_buffered = max_buffered
        self.max_buffered_bytes = max_buffered_bytes
        self.buffer: deque[tuple[Prepared, int]] = deque()
        self.buffered_bytes = 0
        self.dropped = 0
        self.dropped_by_reason: dict[str, int] = {}
        self.written = 0
        self.write_errors = 0
        self.last_rejected: str | None = None  # a sample of the last row the DB refused, for the operator
        self.on_drop = on_drop
        self._wake = asyncio.Event()
        self._head = self._row = ""  # the INSERT's parts for the engine in _prepared_for (set by _prepare)
        self._sqls: dict[int, str] = {}  # multi-row INSERTs by row count
        self._chunk = 1  # rows per multi-row INSERT (set by _prepare)
        self._copy = ""  # the COPY statement, when the driver is psycopg (set by _prepare)
        self._procs: list = []
        self._upsert: sa.Insert | None = None
        self._prepared_for: Engine | None = None
        self._wal = ""  # the SQLite WAL file's path, when the database is an SQLite file (set by _prepare)
        self.checkpoints = 0  # WAL truncations this writer ran (what tests read)

    def add(self, row: dict, *, nbytes: int = 0) -> None:
        """Queue one row; `nbytes` is what the client sized in it (the request body kept for replay)."""
        if self.engine is None:
            # A router without a database keeps no request log (only its metrics): queued, the rows would fill
            # the buffer and be counted as dropped.
            return
        size = ROW_OVERHEAD + nbytes
        if len(self.buffer) >= self.max_buffered or self.buffered_bytes + size > self.max_buffered_bytes:
            self._drop("buffer_full", 1)
            return
        try:
            prepared = self.prepare(row) if nbytes <= LOOP_PREPARE_MAX_BYTES else Prepared({}, [], row)
        except Exception:  # storable_row takes any value; whatever still fails costs this one row
            log.exception("request log row could not be prepared; dropped")
            self._drop("rejected", 1)
            return
        self.buffer.append((prepared, size))
        self.buffered_bytes += size
        if len(self.buffer) >= self.batch_size:
            self._wake.set()

    def _drop(self, reason: str, n: int) -> None:
        self.dropped += n
        self.dropped_by_reason[reason] = self.dropped_by_reason.get(reason, 0) + n
        if self.on_drop:
            self.on_drop(reason, n)

    async def run(self) -> None:
        """Background task: write each batch as it fills, and whatever is buffered every flush interval."""
        while True:
            try:
                await asyncio.wait_for(self._wake.wait(), self.flush_interval_s)
                whole = True
            except TimeoutError:
                whole = False
            self._wake.clear()
            await self.flush(whole_batches=whole)

    async def flush(self, *, whole_batches: bool = False) -> None:
        """Write what is buffered (`whole_batches`: only full batches; the rest waits). Returns early, rows
        kept, when the DB cannot be reached."""
        while self.buffer and self.engine is not None and (not whole_batches or len(self.buffer) >= self.batch_size):
            n = min(self.batch_size, len(self.buffer))
            items = [self.buffer.popleft() for _ in range(n)]
            self.buffered_bytes -= sum(s for _, s in items)
            try:
                written, rejected = await asyncio.to_thread(self._write, [p for p, _ in items])
            except _Unreachable as e:
                self.write_errors += 1
                log.warning("request log write failed, %d rows kept for the next try: %s", len(e.pending), e)
                # the rows still pending go back in front, in order, as far as the bound allows
                self.written += e.written
                if e.rejected:
                    self._drop("rejected", e.rejected)
                sizes = {id(r): s for r, s in items}
                for r in reversed(e.pending):
                    s = sizes[id(r)]
                    if len(self.buffer) >= self.max_buffered or self.buffered_bytes + s > self.max_buffered_bytes:
                        self._drop("buffer_full", 1)
                        continue
                    self.buffer.appendleft((r, s))
                    self.buffered_bytes += s
                return
            except Exception:
                log.exception("request log batch of %d rows could not be written; dropped", len(items))
                self._drop("rejected", len(items))
                continue
            self.written += written
            if rejected:
                self._drop("rejected", rejected)

    def prepare(self, row: dict) -> Prepared:
        """The row made ready (`_ready`) and bound for this writer's database."""
        if self._prepared_for is not self.engine:  # the statements and bind processors are per dialect
            self._prepare()
        ready = self._ready(row)
        return Prepared(ready, [p(ready.get(c)) if p else ready.get(c) for c, p in self._procs])

    def _write(self, batch: list[Prepared]) -> tuple[int, int]:
        """In a worker thread: store `batch`, isolating rows the DB refuses. (written, rejected)."""
        written = rejected = 0
        ready = []
        for p in batch:
            if p.raw is not None:  # a large row, left for this thread (LOOP_PREPARE_MAX_BYTES)
                try:
                    done = self.prepare(p.raw)
                except Exception:  # as in add: this row only
                    log.exception("request log row could not be prepared; dropped")
                    rejected += 1
                    continue
                p.row, p.values, p.raw = done.row, done.values, None
            ready.append(p)
        chunks = [ready]
        while chunks:
            chunk = chunks.pop()
            try:
                self._insert(chunk)
            except TRANSIENT as e:
                if not self._reachable():
                    pending = [r for c in [chunk, *reversed(chunks)] for r in c]
                    raise _Unreachable(e, pending, written, rejected) from None
                written, rejected, chunks = self._refused(chunk, chunks, e, written, rejected)
            except Exception as e:  # noqa: BLE001 - any refusal of this chunk's rows is isolated below
                written, rejected, chunks = self._refused(chunk, chunks, e, written, rejected)
            else:
                written += len(chunk)
        return written, rejected

    def _ready(self, row: dict) -> dict:
        """The row as stored: its replay record built (a PendingReplay from the request path), every value made
        storable, JSON columns encoded to text."""
        replay = row.get("replay")
        if isinstance(replay, PendingReplay):
            row = {**row, "replay": replay.record()}
        return storable_row(row, self.json_columns, encode=True)

    def _refused(self, chunk: list[Prepared], chunks: list[list[Prepared]], e: Exception, written: int,
                 rejected: int):
        if len(chunk) == 1:
            sample = {k: chunk[0].row.get(k) for k in ("request_id", "model", "status", "error")}
            self.last_rejected = f"{sample!r}: {type(e).__name__}: {e}"[:1000]
            log.error("request log row dropped, the database refused it: %s", self.last_rejected)
            return written, rejected + 1, chunks
        mid = len(chunk) // 2
        # popped from the end: push the second half first so rows keep their order
        return written, rejected, [*chunks, chunk[mid:], chunk[:mid]]

    def _reachable(self) -> bool:
        """Tells "the DB is down" from "the DB refused these rows" (SQLite reports both as OperationalError)."""
        try:
            with require_engine(self.engine, who="the request log writer").connect() as conn:
                conn.exec_driver_sql("SELECT 1")
            return True
        except Exception:  # noqa: BLE001 - whatever fails "SELECT 1" means the DB is not reachable now
            return False

    async def close(self, timeout_s: float = 5.0) -> None:
        """Shutdown: flush within `timeout_s`; what could not be written is counted as dropped (shutdown)."""
        deadline = time.monotonic() + timeout_s
        while self.buffer and self.engine is not None and time.monotonic() < deadline:
            before = len(self.buffer)
            try:
                await asyncio.wait_for(self.flush(), max(deadline - time.monotonic(), 0.01))
            except (TimeoutError, Exception) as e:  # noqa: BLE001 - counted below
                log.warning("final request log flush failed: %s", e)
                break
            if len(self.buffer) >= before:  # the DB is down: no point waiting for the deadline
                break
        if self.buffer:
            n = len(self.buffer)
            log.error("request log: %d rows could not be written before shutdown", n)
            self.buffer.clear()
            self.buffered_bytes = 0
            self._drop("shutdown", n)

    def _insert(self, batch: list[Prepared]) -> None:
        # Values bound by the columns' own processors in `prepare`: the same values SQLAlchemy would write, at a
        # fraction of its per-row cost. Never one execution per row: sqlite3 releases the GIL around every row's
        # step and the busy event loop keeps it a whole switch interval before this thread gets it back (a
        # 500-row executemany meant hundreds of hand-offs). How the rows travel is chosen per driver in `_prepare`.
        if self._prepared_for is not self.engine:  # the statements are per dialect
            self._prepare()
        # Aggregated before the transaction opens, so the DB write lock is held only for the statements; one
        # transaction, so a failed batch (kept and retried) never leaves the rollup counting it.
        stats = minute_stats([p.row for p in batch]) if self.rollup else []
        usage = tenant_minute_stats([p.row for p in batch]) if self.rollup else []
        rows = [p.values for p in batch]
        with require_engine(self.engine, who="the request log writer").begin() as conn:
            if self._copy:
                # PostgreSQL: COPY, rows formatted by psycopg's C code (a multi-row INSERT of 2,000 parameters
                # cost more to split into placeholders in psycopg's Python than to run; executemany a round of
                # pipeline bookkeeping per row); JSON columns take their text as is
                with conn.connection.driver_connection.cursor().copy(self._copy) as copy:  # type: ignore[union-attr]  # a psycopg connection (_prepare checked)
                    for row in rows:
                        copy.write_row(row)
            else:
                for k in range(0, len(rows), self._chunk):
                    chunk = rows[k:k + self._chunk]
                    conn.exec_driver_sql(self._sql_for(len(chunk)), tuple(v for row in chunk for v in row))
            upsert_minute_stats(conn=conn, stats=stats, statement=self._upsert)
            if usage:
                conn.execute(self._tenant_upsert, usage)
        if self._wal:
            self._bound_wal()

    def _bound_wal(self) -> None:
        """Truncate the SQLite WAL once it outgrows `WAL_SIZE_LIMIT`. SQLite's own checkpoints are passive: while
        another connection (the pin committer's) commits many times a second, one never finds every frame
        copied, so the WAL is never restarted and grew past a gigabyte under chat traffic. A TRUNCATE checkpoint
        holds new writers off while it copies (pin batches retry on the event loop meanwhile), then empties the
        file. One stat per batch decides it."""
        try:
            size = os.stat(self._wal).st_size
        except OSError:  # not created yet, or the database moved: nothing to bound
            return
        if size <= WAL_SIZE_LIMIT:
            return
        # The batch is committed: a checkpoint that cannot run now (a reader holds an old snapshot) is tried again
        # after the next batch, and must never fail this one. Its wait is short, not the connection's 30 s.
        try:
            with require_engine(self.engine, who="the request log writer").connect() as conn:
                conn.exec_driver_sql(f"PRAGMA busy_timeout={CHECKPOINT_WAIT_MS}")
                try:
                    busy = conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)").scalar()
                finally:
                    conn.exec_driver_sql(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        except Exception as e:  # noqa: BLE001 - see above
            log.debug("WAL checkpoint not run: %s", e)
            return
        if not busy:
            self.checkpoints += 1

    def _sql_for(self, n: int) -> str:
        sql = self._sqls.get(n)
        if sql is None:
            sql = self._sqls[n] = f"{self._head} VALUES {', '.join([self._row] * n)}"
        return sql

    def _prepare(self) -> None:
        self._prepared_for = self.engine
        dialect = require_engine(self.engine, who="the request log writer").dialect
        self._upsert = upsert_statement(dialect.name)  # built once: building it per batch cost as much as running it
        self._tenant_upsert = tenant_upsert_statement(dialect.name)
        table = table_of(self.table_model)
        # dialect_impl: the generic JSON type has no bind processor for psycopg (a dict would reach the driver
        # as is and fail); PostgreSQL's own JSON type wraps it
        self._procs = [(c, None if c in self.json_columns else p)
                       for c, p in zip(self.columns, bind_processors(table, self.columns, dialect))]
        mark = "?" if dialect.paramstyle == "qmark" else "%s"
        # PostgreSQL casts the JSON text to the column's type; SQLite stores it as the text it is
        marks = [f"CAST({mark} AS JSON)" if c in self.json_columns and dialect.name == "postgresql" else mark
                 for c in self.columns]
        database = self.engine.url.database if dialect.name == "sqlite" else None  # type: ignore[union-attr]  # require_engine checked
        self._wal = f"{database}-wal" if database and database != ":memory:" else ""
        self._head = f"INSERT INTO {table.name} ({', '.join(self.columns)})"
        self._row = f"({', '.join(marks)})"
        self._sqls = {}
        # PostgreSQL through psycopg: COPY. Otherwise multi-row INSERTs within the bound on parameters (SQLite's
        # 32,766 since 3.32, 999 before; psycopg's and MySQL's 65,535). A COPY that fails on a dead connection
        # reaches _write as SQLAlchemy's error all the same: the transaction's rollback fails, wrapped.
        limit = 999 if dialect.name == "sqlite" and sqlite3.sqlite_version_info < (3, 32) else 32_766
        self._chunk = max(1, min(self.batch_size, limit // len(self.columns)))
        self._copy = ""
        if dialect.name == "postgresql" and dialect.driver == "psycopg":
            self._copy = f"COPY {table.name} ({', '.join(self.columns)}) FROM STDIN"

