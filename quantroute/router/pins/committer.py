"""Group commit of new session pins: many first turns, one statement and one transaction per batch.

A request that starts a session hands its pin here and goes on to forward at once; whatever pins arrived while
the previous batch was being written go out together in the next one (`claim_pins`: one statement that reads
and creates). Each claim resolves with the pin in force (ours or one stored first by another replica or worker)
or fails with `PinNotStored` once its deadline passes. The router releases no response byte before its pin
resolved (see `Decider.settle`), so a pin is never lost silently: it is stored, or the request fails.

Failures: a connection-level error (DB down, restarting, locked) keeps the batch and retries it after a short
backoff until the claims' deadline; any other error splits the batch in halves until the row that cannot be
stored is alone (and fails), so one bad key never holds up the others."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
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


class PinCommitter:
    def __init__(self, engine: Engine, *, timeout_s: float = 5.0, max_batch: int = 256,
                 on_batch: Callable[[int, float], None] | None = None, synchronous: bool = True) -> None:
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

    async def run(self) -> None:
        """Background task: write whatever is pending, batch after batch, until cancelled."""
        try:
            while True:
                await self._wake.wait()
                self._wake.clear()
                while self.pending:
                    if self._backoff:
                        await asyncio.sleep(self._backoff)
                    self._busy = True
                    batch = self._take()
                    try:
                        await self._commit(batch)
                    except BaseException:  # cancelled while writing it: its claims get an outcome too
                        self._fail(batch, "the router is shutting down")
                        raise
                    finally:
                        self._busy = False
        finally:
            self._fail(list(self.pending.values()), "the router is shutting down")
            self.pending.clear()
            for db in (*self._retired, self._db):
                await db.aclose()

    async def drain(self, *, timeout_s: float) -> None:
        """Wait (bounded) until every claim made so far is resolved: at shutdown, before the task stops."""
        deadline = time.monotonic() + timeout_s
        while (self.pending or self._busy) and time.monotonic() < deadline:
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
