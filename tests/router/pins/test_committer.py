"""The group committer gives every claim an outcome: also a claim whose key was claimed again while its batch was
failing, and the claims of a batch being written when the committer is stopped. Real SQLite; the failures are
SQLite's own (a write lock held by another connection, a connection that refuses writes)."""

from __future__ import annotations

import asyncio
import sqlite3

from quantroute.router.pins.claims import SqliteClaims
from quantroute.router.pins.committer import PinCommitter, PinNotStored
from tests.support.pins import pin_row
from tests.support.sqlite_lock import WriteLock


async def until(check, timeout_s: float = 10.0) -> None:
    """Let the loop run (the committer is a task in it) until `check()` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"{check} still false after {timeout_s} s")
        await asyncio.sleep(0.001)


def reclaimed_while_its_batch_fails(engine, newer_row: dict) -> tuple[asyncio.Future, asyncio.Future]:
    """A first turn's claim of 'again' is being written (it waits for a write lock); the same key is claimed
    again meanwhile (`newer_row`: its cached pin expired or was evicted); then the batch fails as the
    connection's error, so the old claim cannot be queued again beside the newer one. (old, newer), both done,
    or AssertionError naming the one never resolved."""
    lock = WriteLock(engine.url.database)

    async def go() -> tuple[asyncio.Future, asyncio.Future]:
        committer = PinCommitter(engine, timeout_s=10)
        runner = asyncio.create_task(committer.run())
        claims = committer._db
        assert isinstance(claims, SqliteClaims)
        old = committer.submit(pin_row("again", "int4"))
        await until(lambda: claims.busy > 0)  # the batch with the old claim is out, waiting for the lock
        assert "again" not in committer.pending
        newer = committer.submit(newer_row)
        # the pin connection now refuses writes: the batch's next try fails as the connection's error (not the
        # row's), so the committer drops that connection and keeps its claims for a retry on a new one
        claims._connection().execute("PRAGMA query_only = 1")
        lock.release()
        done, _ = await asyncio.wait([old, newer], timeout=10)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        assert old in done and newer in done, f"never resolved: old {old not in done}, newer {newer not in done}"
        return old, newer

    return asyncio.run(go())


def test_a_claim_whose_key_was_claimed_again_while_its_batch_failed_follows_the_newer_claim(sqlite_engine):
    """The old claim is not dropped (its request would wait for the settle timer and fail although the session's
    pin was stored a moment later): it resolves with the newer claim's outcome, the pin in force."""
    old, newer = reclaimed_while_its_batch_fails(sqlite_engine, pin_row("again", "fp16"))
    assert newer.result()["tier"] == "fp16"
    assert old.result() == newer.result()  # the pin in force, which the old claim's request follows (or is moved by)
    with sqlite3.connect(sqlite_engine.url.database) as c:
        assert c.execute("SELECT tier FROM session_pin WHERE session_key = 'again'").fetchall() == [("fp16",)]


def test_a_claim_that_follows_a_newer_one_fails_as_it_fails(sqlite_engine):
    """The newer claim's row is refused by the database (no model): the old claim fails with the same
    `PinNotStored`, at once, and no pin of the key is stored."""
    old, newer = reclaimed_while_its_batch_fails(sqlite_engine, {**pin_row("again", "fp16"), "model": None})
    assert isinstance(newer.exception(), PinNotStored) and "rejected by the database" in str(newer.exception())
    assert old.exception() is newer.exception()
    with sqlite3.connect(sqlite_engine.url.database) as c:
        assert c.execute("SELECT count(*) FROM session_pin WHERE session_key = 'again'").fetchone() == (0,)


def test_a_committer_stopped_while_writing_a_batch_fails_that_batchs_claims(sqlite_engine):
    """Stopping the committer (the router shutting down) while a batch waits for the write lock fails the
    batch's claims at once with `PinNotStored`, as it fails the claims still queued; before, only the queued
    ones got an outcome and the batch's requests waited out their settle timer."""
    lock = WriteLock(sqlite_engine.url.database)

    async def go() -> tuple[BaseException | None, BaseException | None]:
        committer = PinCommitter(sqlite_engine, timeout_s=10)
        runner = asyncio.create_task(committer.run())
        writing = committer.submit(pin_row("writing"))
        await until(lambda: committer._db.busy > 0)
        queued = committer.submit(pin_row("queued"))
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        states = (writing.done(), queued.done())
        assert states == (True, True), f"resolved (writing, queued): {states}"
        return writing.exception(), queued.exception()

    try:
        writing_err, queued_err = asyncio.run(go())
    finally:
        lock.release()
    for err in (writing_err, queued_err):
        assert isinstance(err, PinNotStored) and "shutting down" in str(err)
