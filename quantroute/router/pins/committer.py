"""Group commit of new session pins: many first turns, one statement and one transaction per batch.

A request that starts a session hands its pin here and goes on to forward at once; whatever pins arrived while
the previous batch was being written go out together in the next one (`claim_pins`: one statement that reads
and creates). Each claim resolves with the pin in force (ours or one stored first by another replica or worker)
or fails with `PinNotStored` once its deadline passes. The router releases no response byte before its pin
resolved (see `Decider.settle`), so a pin is never lost silently: it is stored, or the request fails.

Failures: a connection-level error (DB down, restarting, locked) keeps the batch and retries it after a short
backoff until the claims' deadline; any other error splits the batch in halves until the row that cannot be
stored is alone (and fails), so one bad key never holds up the others.

Returning turns' refreshes (`touch`) and the purge of expired pins (`purge`) go through the same task and the same
kept connection, taken in turn with the claims (a claim waits for at most one touch batch and one step of the
purge's sweep): no thread hop and no ORM object per turn, and on SQLite no second writer in this process for claims
to wait behind. A touch batch is one update moving the live pins' expiry, plus one upsert only for touches that
carry a node move or whose row was gone (see `Touches` for what is kept, retried and refused)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout

from quantroute.router.pins.claims import Claims, TransientError, claims_for

log = logging.getLogger(__name__)


class PinNotStored(Exception):
    """The pin could not be committed before its deadline; the message says why."""


@dataclass(slots=True)
class Claim:
    row: dict
    deadline: float  # monotonic
    future: asyncio.Future  # -> the pin in force (column -> value)


def transient(e: BaseException) -> bool:
    """An error of the connection or the whole database, not of one row: retry the batch as it is."""
    if isinstance(e, (TransientError, OperationalError, PoolTimeout)):
        return True
    return isinstance(e, DBAPIError) and bool(e.connection_invalidated)


def _follow(waiter: asyncio.Future, done: asyncio.Future) -> None:
    """Resolve `waiter` as `done` resolved: the pin in force, or the reason it was not stored."""
    if waiter.done():
        return
    if done.cancelled():
        waiter.set_exception(PinNotStored("the claim was cancelled"))
    elif (e := done.exception()) is not None:
        waiter.set_exception(e)
    else:
        waiter.set_result(done.result())


class Touches:
    """Returning turns' pin refreshes waiting to be written (`touch_row`s), one per session key, in arrival order.

    Nothing waits for a touch: the session's pin is stored already and the turn is answered at once. A touch
    exists so that the stored expiry follows the session's use and another replica finds the pin alive (and so
    that a node move reaches the others), so a queued touch is never dropped while its key has nothing newer:

    - a newer touch of the same key replaces it, keeping the node it moved to unless the newer one moved too:
      the newer row carries a later expiry, so this loses nothing;
    - a batch the database fails as a whole (the connection, a lock, a restart) is queued again, behind any newer
      touch of the same keys, and retried after the committer's backoff, for as long as it takes;
    - a row the database refuses on its own (not the connection) cannot be written by retrying: it is logged and
      counted as failed, and its session's next due turn tries again.

    Bounded at `limit` keys: at the bound a new key's touch is refused (`add` returns False) rather than another
    one dropped. Its pin stays due in the cache, so the session's next turn offers it again, and the stored row is
    as last written: nothing is deleted or replaced, so no pin is lost while that stored expiry is ahead (the
    purge's grace adds `touch_interval_s` after it). Only a queue that stays full for longer than that, which is
    a database down for most of a session TTL, lets a refused session's row expire."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.rows: dict[str, dict] = {}
        self.since: float | None = None  # monotonic time the queue last became non-empty

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, row: dict) -> bool:
        key = row["session_key"]
        old = self.rows.get(key)
        if old is None:
            if len(self.rows) >= self.limit:
                return False
            if not self.rows:
                self.since = time.monotonic()
            self.rows[key] = row
        else:
            if row["last_node"] is None:
                row["last_node"] = old["last_node"]
            del self.rows[key]  # to the back: the newer touch is written in its own turn
            self.rows[key] = row
        return True

    def take(self, n: int) -> list[dict]:
        keys = list(itertools.islice(self.rows, n))
        taken = [self.rows.pop(k) for k in keys]
        if not self.rows:
            self.since = None
        return taken

    def put_back(self, batch: list[dict]) -> None:
        """Rows of a failed batch, queued again unless a newer touch of the key arrived meanwhile (which keeps the
        failed row's node move if it has none of its own). The bound does not apply: they were queued already."""
        if self.since is None and batch:
            self.since = time.monotonic() - 3600  # due at once (after the committer's backoff)
        for row in batch:
            newer = self.rows.get(row["session_key"])
            if newer is None:
                self.rows[row["session_key"]] = row
            elif newer["last_node"] is None:
                newer["last_node"] = row["last_node"]


@dataclass(slots=True)
class Touched:
    """A touch as written: the session's last node and its pin's creation time as stored; `row`, the whole pin,
    when the touch wrote it back (an upsert), None when it moved a live pin's expiry."""

    session_key: str
    last_node: str | None
    created_at: datetime
    row: dict | None


@dataclass(slots=True)
class Purge:
    before: datetime
    after: str  # the sweep goes on past this key
    window: int
    future: asyncio.Future  # -> (pins deleted, the range's last key or None at the table's end)


class PinCommitter:
    def __init__(self, engine: Engine, *, timeout_s: float = 5.0, max_batch: int = 256,
                 on_batch: Callable[[int, float], None] | None = None, synchronous: bool = True,
                 max_touches: int = 100_000, touch_delay_s: float = 0.05) -> None:
        self._engine = engine
        self.synchronous = synchronous  # PostgreSQL: each commit waits for its WAL flush (see claims_for)
        self._db = claims_for(engine, synchronous=synchronous)  # one kept connection: no checkout, ping, BEGIN
        self._retired: list[Claims] = []
        self.timeout_s = timeout_s
        self.max_batch = max_batch
        self.on_batch = on_batch  # (pins in the batch, seconds its claim took) -> None, for metrics
        self.pending: dict[str, Claim] = {}  # insertion order = arrival order
        self.batches = 0
        self.errors = 0
        self.touches = Touches(max_touches)
        # Touches wait up to this long for others to share their statement: nobody waits for them, and on SQLite a
        # refresh costs a few microseconds a row in a batch of a hundred against ~100 for a statement of its own
        self.touch_delay_s = touch_delay_s
        self._flushing = False  # shutting down: touches go at once
        # (touches as written) -> None: the pin store's cache catches up (node moves, pins replaced elsewhere)
        self.on_touched: Callable[[list[Touched]], None] | None = None
        self.touch_counts = dict.fromkeys(("written", "refused", "failed", "retried"), 0)
        self._purges: deque[Purge] = deque()
        self._next = 0  # which kind of work goes next (claims, touches, purges: in turn)
        self._wake = asyncio.Event()
        self._backoff = 0.0
        self._busy = False  # a batch is being written

    @property
    def engine(self) -> Engine:
        return self._engine

    @engine.setter
    def engine(self, engine: Engine) -> None:  # the next batch connects to this one
        self._retired.append(self._db)
        self._engine, self._db = engine, claims_for(engine, synchronous=self.synchronous)

    def submit(self, row: dict) -> asyncio.Future:
        """Queue a pin row (the `session_pin` columns); the future resolves with the pin in force."""
        claim = self.pending.get(row["session_key"])
        if claim is not None:  # the same key twice before a batch went out: one claim, both wait on it
            return claim.future
        fut = asyncio.get_running_loop().create_future()
        self.pending[row["session_key"]] = Claim(row, time.monotonic() + self.timeout_s, fut)
        self._wake.set()
        return fut

    def touch(self, row: dict) -> bool:
        """Queue a returning turn's refresh (`touch_row`); False when the queue is at its bound (see `Touches`):
        the caller keeps the pin due and offers it again on the session's next turn."""
        first = not self.touches
        if not self.touches.add(row):
            self.touch_counts["refused"] += 1
            return False
        if len(self.touches) >= self.max_batch or self._flushing:
            self._wake.set()
        elif first:
            asyncio.get_running_loop().call_later(self.touch_delay_s, self._wake.set)
        return True

    def _touches_due(self) -> bool:
        since = self.touches.since
        return since is not None and (len(self.touches) >= self.max_batch or self._flushing
                                      or time.monotonic() - since >= self.touch_delay_s)

    def purge(self, before: datetime, after: str, window: int) -> asyncio.Future:
        """One step of the sweep for expired pins (`PinClaims.purge`: those expired before `before` among the
        `window` keys after `after`), in this task's turn; resolves with (pins deleted, where the next step
        starts, None at the end of the table)."""
        fut = asyncio.get_running_loop().create_future()
        self._purges.append(Purge(before, after, window, fut))
        self._wake.set()
        return fut

    async def run(self) -> None:
        """Background task: write whatever is pending, batch after batch, until cancelled. Claims, touches and
        purges take turns, so none of them waits behind a stream of the others."""
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self.pending or self._touches_due() or self._purges:
                    if self._backoff:
                        await asyncio.sleep(self._backoff)
                    self._busy = True
                    try:
                        await self._step()
                    finally:
                        self._busy = False
        finally:
            self._fail(list(self.pending.values()), "the router is shutting down")
            self.pending.clear()
            if self.touches:
                log.warning("%d session pin refreshes not written before shutdown", len(self.touches))
            for job in self._purges:
                if not job.future.done():
                    job.future.set_exception(PinNotStored("the router is shutting down"))
            self._purges.clear()
            for db in (*self._retired, self._db):
                await db.aclose()

    async def _step(self) -> None:
        """One statement: the next kind of work in turn that has any."""
        for i in range(3):
            kind = (self._next + i) % 3
            if kind == 0 and self.pending:
                batch = self._take()
                try:
                    await self._commit(batch)
                except BaseException:  # cancelled while writing it: its claims get an outcome too
                    self._fail(batch, "the router is shutting down")
                    raise
            elif kind == 1 and self._touches_due():
                await self._write_touches(self.touches.take(self.max_batch))
            elif kind == 2 and self._purges:
                await self._purge(self._purges.popleft())
            else:
                continue
            self._next = kind + 1
            return

    async def drain(self, *, timeout_s: float) -> None:
        """Wait (bounded) until every claim and touch made so far is written or resolved: at shutdown, before
        the task stops."""
        deadline = time.monotonic() + timeout_s
        self._flushing = True
        self._wake.set()
        while (self.pending or self.touches or self._busy) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)

    def _take(self) -> list[Claim]:
        keys = list(self.pending)[:self.max_batch]
        return [self.pending.pop(k) for k in keys]

    async def _commit(self, batch: list[Claim]) -> None:
        while self._retired:
            await self._retired.pop().aclose()
        started = time.perf_counter()
        try:
            pins = await self._db.claim([c.row for c in batch], self.timeout_s)
        except Exception as e:  # noqa: BLE001 - every claim gets an outcome, below
            self.errors += 1
            if transient(e):
                self._retry_later(batch, e)
            elif len(batch) == 1:  # this row itself cannot be stored: retrying would not help
                log.warning("session pin %r rejected by the database: %s", batch[0].row["session_key"], e)
                if not batch[0].future.done():
                    batch[0].future.set_exception(PinNotStored(f"session pin rejected by the database: {e}"))
            else:
                mid = len(batch) // 2
                await self._commit(batch[:mid])
                await self._commit(batch[mid:])
            return
        self._backoff = 0.0
        self.batches += 1
        if self.on_batch is not None:
            self.on_batch(len(batch), time.perf_counter() - started)
        by_key = {p["session_key"]: p for p in pins}
        for c in batch:
            pin = by_key.get(c.row["session_key"])
            if c.future.done():
                continue
            if pin is None:  # cannot happen with RETURNING; never leave a waiter hanging
                c.future.set_exception(PinNotStored("the database returned no row for this pin"))
            else:
                c.future.set_result(pin)

    async def _write_touches(self, batch: list[dict]) -> None:
        """Write a batch of touches; on the connection's failure the batch is queued again (after the backoff), on
        a row's it is split until that row is alone."""
        while self._retired:
            await self._retired.pop().aclose()
        try:
            stored = await self._touch_statements(batch)
        except Exception as e:  # noqa: BLE001 - every touch is kept or accounted for, below
            self.errors += 1
            if transient(e):
                self._backoff = min(max(self._backoff * 2, 0.02), 0.5)
                self.touches.put_back(batch)
                self.touch_counts["retried"] += len(batch)
                log.warning("session pin refresh batch of %d failed (kept for a retry): %s", len(batch), e)
                self._wake.set()
            elif len(batch) == 1:
                self.touch_counts["failed"] += 1
                log.warning("session pin refresh %r rejected by the database: %s", batch[0]["session_key"], e)
            else:
                mid = len(batch) // 2
                await self._write_touches(batch[:mid])
                await self._write_touches(batch[mid:])
            return
        self._backoff = 0.0
        self.touch_counts["written"] += len(batch)
        if self.on_touched is not None:
            self.on_touched(stored)

    async def _touch_statements(self, batch: list[dict]) -> list[Touched]:
        """Live pins' expiry moves in one update per TTL (one, unless a policy change is under way); the touches
        that carry a node move, and those whose row the update did not find (purged), go in one upsert that
        writes the cached pin back. A batch that fails part way is retried whole: both statements are
        idempotent."""
        out: list[Touched] = []
        upsert = [r for r in batch if r["last_node"] is not None]
        groups: dict[timedelta, list[dict]] = {}
        for r in batch:
            if r["last_node"] is None:
                groups.setdefault(r["expires_at"] - r["last_used"], []).append(r)
        for rows in groups.values():
            found = await self._db.refresh([r["session_key"] for r in rows], rows[0]["last_used"],
                                           rows[0]["expires_at"], self.timeout_s)
            for r in rows:
                got = found.get(r["session_key"])
                if got is None:
                    upsert.append(r)
                else:
                    out.append(Touched(r["session_key"], got[0], got[1], None))
        if upsert:
            for row in await self._db.claim(upsert, self.timeout_s, touch=True):
                out.append(Touched(row["session_key"], row["last_node"], row["created_at"], row))
        return out

    async def _purge(self, job: Purge) -> None:
        try:
            got = await self._db.purge(job.before, job.after, job.window, self.timeout_s)
        except Exception as e:  # noqa: BLE001 - the caller (the purge loop) tries again later
            self.errors += 1
            if not job.future.done():
                job.future.set_exception(e)
            return
        if not job.future.done():
            job.future.set_result(got)

    def _retry_later(self, batch: list[Claim], e: Exception) -> None:
        now = time.monotonic()
        self._backoff = min(max(self._backoff * 2, 0.02), 0.5)
        kept = 0
        for c in batch:
            if c.future.done():
                continue
            if now >= c.deadline:
                c.future.set_exception(PinNotStored(f"session pin not stored within {self.timeout_s:g}s: {e}"))
            elif (newer := self.pending.get(c.row["session_key"])) is None:
                self.pending[c.row["session_key"]] = c
                kept += 1
            else:  # the key was claimed again meanwhile (its cached pin expired or was evicted): one outcome
                newer.future.add_done_callback(partial(_follow, c.future))
        log.warning("session pin batch of %d failed (%d kept for a retry): %s", len(batch), kept, e)
        if kept:
            self._wake.set()

    @staticmethod
    def _fail(claims: list[Claim], why: str) -> None:
        for c in claims:
            if not c.future.done():
                c.future.set_exception(PinNotStored(why))
