"""Returning turns' pin refreshes (touches): batched through the group committer's connection, the stored expiry
follows the session, a batch the database fails is kept and retried (no pin lost), a node move on one replica
reaches the other, and a full queue refuses rather than drops. Real SQLite and, when configured, PostgreSQL."""

from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager
from datetime import datetime, timedelta

from sqlalchemy import text

from quantroute.clock import aware, utcnow
from quantroute.db.engine import init_db, make_engine
from quantroute.router.pins.committer import PinCommitter
from quantroute.router.pins.store import REORDER_S, Pin, PinStore
from tests.router.pins.test_committer import until
from tests.support.sqlite_lock import WriteLock

TTL = 3600


def claim(store: PinStore, key: str, tier: str = "int4", node: str | None = None) -> Pin:
    return store.claim(key=key, model="llama3-8b", tier=tier, arm=None, deployment=None, policy_version=1,
                       ttl_s=TTL, served_deployment=f"d-{tier}", node=node)


def url_of(engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def stored(engine, key: str) -> dict | None:
    with engine.connect() as c:
        row = c.execute(text("SELECT tier, last_node, expires_at FROM session_pin WHERE session_key = :k"),
                        {"k": key}).mappings().first()
    if row is None:
        return None
    expires = row["expires_at"]
    return {**row, "expires_at": aware(datetime.fromisoformat(expires) if isinstance(expires, str) else expires)}


@asynccontextmanager
async def replica(url: str, *, touch_interval_s: float = 0.01, timeout_s: float = 5.0, max_touches: int = 100_000):
    """One router's pin store and committer (its task running) over the database at `url`."""
    engine = make_engine(url)
    committer = PinCommitter(engine, timeout_s=timeout_s, max_touches=max_touches)
    runner = asyncio.create_task(committer.run())
    store = PinStore(engine, touch_interval_s=touch_interval_s, committer=committer)
    try:
        yield store, committer, engine
    finally:
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        engine.dispose()


async def returning(store: PinStore, key: str) -> Pin:
    """A returning turn after the touch interval: the cache hit that queues the pin's touch."""
    await asyncio.sleep(0.02)
    pin = store.get(key, TTL)
    assert pin is not None, f"pin {key!r} not cached"
    return pin


async def written(committer: PinCommitter, n: int) -> None:
    await until(lambda: committer.touch_counts["written"] >= n and not committer.touches)


def test_returning_turns_extend_the_stored_expiry_in_batches(engine):
    db_url = url_of(engine)

    async def go() -> None:
        async with replica(db_url) as (store, committer, engine):
            pins = [claim(store, f"s-{i}") for i in range(40)]
            await asyncio.wait([p.stored for p in pins])
            before = {p.session_key: stored(engine, p.session_key)["expires_at"] for p in pins}
            batches = committer.batches
            await asyncio.sleep(1.1)  # stored expiries have a second's resolution to move by
            for p in pins:
                await asyncio.sleep(0)
                assert store.get(p.session_key, TTL) is p
            assert 0 < len(committer.touches) <= 40  # queued, not written by the turn itself
            await written(committer, 40)
            assert committer.batches == batches  # touches are not claims: no pin was claimed again
            for p in pins:
                after = stored(engine, p.session_key)
                assert after["expires_at"] >= before[p.session_key] + timedelta(seconds=1), p.session_key
                assert after["expires_at"] > utcnow() + timedelta(seconds=TTL - 60)
            # a turn within the touch interval writes nothing more
            store.touch_interval_s = 60
            store.get("s-0", TTL)
            assert not committer.touches

    asyncio.run(go())


def test_the_stored_expiry_never_falls_before_the_sessions_own(engine):
    """Between touches the stored expiry stays ahead of the last turn's TTL, so another replica (or this one, after
    its cache let the pin go) never finds a live session's pin expired: it is written one touch interval past the
    TTL, by the claim and by every touch. Turns within the interval write nothing; one past it touches."""
    db_url = url_of(engine)

    async def go() -> None:
        async with replica(db_url, touch_interval_s=60) as (store, committer, engine):
            pin = claim(store, "chat-1")
            await asyncio.wait([pin.stored])
            for due in (False, True, False):
                await asyncio.sleep(0.01)  # the turn comes later than the last write
                if due:  # the interval has passed since the last touch
                    pin.touched -= 61
                    pin.moved -= 61
                turn = utcnow()
                assert store.get("chat-1", TTL) is pin
                assert bool(committer.touches) is due
                await written(committer, int(due))
                assert stored(engine, "chat-1")["expires_at"] >= turn + timedelta(seconds=TTL)

    asyncio.run(go())


def test_the_touch_interval_is_at_most_a_tenth_of_the_ttl():
    store = PinStore(None, touch_interval_s=300)
    assert store.interval(3600) == 300 and store.interval(600) == 60


def test_no_pin_is_lost_when_the_sqlite_database_fails_a_touch_batch(sqlite_url):
    """The write lock is held past the batch's deadline: the batch fails as a whole and is queued again; meanwhile
    a newer touch of one key (a node move) merges with it and another replica's purge deletes one row. Once the
    lock is free every touch is written: expiries extended, the move stored, the purged pin back."""
    path = sqlite_url.removeprefix("sqlite:///")

    async def go() -> None:
        async with replica(sqlite_url, timeout_s=0.3) as (store, committer, engine):
            pins = [claim(store, f"k-{i}", node="n-1") for i in range(5)]
            await asyncio.wait([p.stored for p in pins])
            with engine.begin() as c:  # another replica's purge took k-4 (its stored expiry had passed there)
                c.execute(text("DELETE FROM session_pin WHERE session_key = 'k-4'"))
            started = utcnow()
            lock = WriteLock(path)
            for p in pins:
                await returning(store, p.session_key)
            await until(lambda: committer.touch_counts["retried"] >= 5)  # the batch failed whole, kept
            store.set_node("k-0", "n-2")  # this replica moves k-0 while its touch waits for a retry
            store.get("k-1", TTL)  # not due again: nothing new queued
            lock.release()
            await written(committer, 5)
            for i in range(5):
                row = stored(engine, f"k-{i}")
                assert row is not None, f"k-{i} lost"
                assert row["expires_at"] > started + timedelta(seconds=TTL - 1)
            assert stored(engine, "k-0")["last_node"] == "n-2"
            assert stored(engine, "k-4")["tier"] == "int4"  # the cached pin, written back
            assert committer.touch_counts["failed"] == committer.touch_counts["refused"] == 0

    asyncio.run(go())


def test_no_pin_is_lost_when_postgres_fails_a_touch_batch(pg_url):
    """Another transaction locks the pin table past the batch's deadline: the statement times out, the batch is
    kept whole (its connection is dropped) and written on a new connection once the lock is gone."""
    schema = make_engine(pg_url)
    init_db(schema)
    schema.dispose()

    async def go() -> None:
        async with replica(pg_url, timeout_s=0.3) as (store, committer, engine):
            pins = [claim(store, f"k-{i}") for i in range(5)]
            await asyncio.wait([p.stored for p in pins])
            started = utcnow()
            with engine.connect() as locker:
                locker.execute(text("LOCK TABLE session_pin IN ACCESS EXCLUSIVE MODE"))
                for p in pins:
                    await returning(store, p.session_key)
                await until(lambda: committer.touch_counts["retried"] >= 5)
                locker.rollback()
            await written(committer, 5)
            for i in range(5):
                assert stored(engine, f"k-{i}")["expires_at"] > started + timedelta(seconds=TTL - 1)

    asyncio.run(go())


def test_a_node_move_on_one_replica_reaches_the_other(engine):
    db_url = url_of(engine)

    async def go() -> None:
        async with replica(db_url) as (a, ca, engine), replica(db_url) as (b, cb, _):
            first = claim(a, "moving", node="n-1")
            await first.stored
            there = claim(b, "moving", node="n-3")  # b routed a turn as a first turn; a's pin is in force
            await there.stored
            assert b.get("moving", TTL).node == "n-1"
            await returning(a, "moving")
            a.set_node("moving", "n-2")  # a's turn fell back to another node
            await written(ca, 1)
            await until(lambda: not ca._busy)
            assert stored(engine, "moving")["last_node"] == "n-2"
            await until(lambda: not cb.touches and not cb._busy)
            done = cb.touch_counts["written"]
            pin = await returning(b, "moving")  # b's next due turn refreshes the pin and reads the move
            await written(cb, done + 1)
            assert pin.node == "n-2"
            assert stored(engine, "moving")["last_node"] == "n-2"  # b's touch did not write its own node back

    asyncio.run(go())


def test_a_full_touch_queue_refuses_a_touch_and_the_pin_stays_due(sqlite_url):
    """A queue of two while the database is locked: the touches that find it full are refused, not queued and not
    dropping another; their pins stay due, so their next turns offer them again, and every pin gets written."""
    path = sqlite_url.removeprefix("sqlite:///")

    async def go() -> None:
        async with replica(sqlite_url, timeout_s=5, max_touches=2) as (store, committer, engine):
            pins = [claim(store, f"q-{i}") for i in range(5)]
            await asyncio.wait([p.stored for p in pins])
            before = {p.session_key: p.touched for p in pins}
            started = utcnow()
            with WriteLock(path):  # the queue cannot drain while the lock is held
                for p in pins:
                    await returning(store, p.session_key)
                refused = [p for p in pins if p.touched == before[p.session_key]]
                assert len(committer.touches) == 2 and committer.touch_counts["refused"] == len(refused) >= 1
                assert not any(p.session_key in committer.touches.rows for p in refused)
            await until(lambda: not committer.touches and not committer._busy)
            for p in refused:  # the sessions' next turns: due still, queued now
                await returning(store, p.session_key)
            await written(committer, 5)
            for p in pins:
                assert stored(engine, p.session_key)["expires_at"] > started + timedelta(seconds=TTL - 1)

    asyncio.run(go())


def test_a_touch_that_finds_another_replicas_pin_lets_the_next_turn_follow_it(engine):
    """This replica's cached pin had expired in the database and another replica pinned the session afresh (at
    fp16): the refresh moves that pin's expiry, and the cache forgets its own, so the session's next turn here
    claims and gets the stored pin instead of serving from a pin no other replica holds."""
    async def go() -> None:
        async with replica(url_of(engine)) as (store, committer, _):
            pin = claim(store, "re-pinned")
            await pin.stored
            assert store.get("re-pinned", TTL) is pin
            await until(lambda: not committer.touches and not committer._busy)
            with engine.begin() as c:  # another replica's new pin in place of ours
                c.execute(text("UPDATE session_pin SET tier = 'fp16', created_at = :t WHERE session_key = 're-pinned'"),
                          {"t": utcnow() + timedelta(seconds=1)})
            done = committer.touch_counts["written"]
            await returning(store, "re-pinned")
            await written(committer, done + 1)
            assert "re-pinned" not in store.cache
            again = claim(store, "re-pinned")  # the next turn, routed as a first turn, is told the stored pin
            assert (await again.stored)["tier"] == "fp16"

    asyncio.run(go())


def test_the_cache_bound_evicts_the_oldest_pins_in_bulk_and_expired_pins_are_forgotten():
    async def go() -> None:
        store = PinStore(None, max_cached=200)
        for i in range(1000):
            claim(store, f"c-{i}")
            assert len(store.cache) <= 200
        assert "c-999" in store.cache and "c-0" not in store.cache
        assert len(store.cache) >= 198  # a hundredth of the bound goes at once
        for key in ("c-998", "c-997"):
            store.cache[key].expires = 0.0
        await store.forget_expired(chunk=7)
        assert "c-998" not in store.cache and "c-997" not in store.cache and "c-999" in store.cache

    asyncio.run(go())


def test_the_cache_bound_evicts_the_sessions_idle_longest_not_those_that_started_first(engine):
    """A chat that outlives the cache's turnover keeps its pin cached: a returning turn due for its refresh moves
    the pin to the back, with a database and without one."""
    db_url = url_of(engine)

    def come_back_and_push(store: PinStore) -> None:
        for key in ("c-0", "c-1"):  # returning turns after the touch interval
            store.cache[key].touched -= 60
            store.cache[key].moved -= 60
            assert store.get(key, TTL) is not None
        store.cache["c-2"].touched -= 60  # due, but its session has not come back
        store.cache["c-2"].moved -= 60
        for i in range(100, 150):  # new sessions push the bound
            claim(store, f"n-{i}")
        assert "c-0" in store.cache and "c-1" in store.cache
        assert "c-2" not in store.cache and "c-3" not in store.cache
        assert list(store.cache)[-52:-50] == ["c-0", "c-1"]  # behind every pin not used since

    async def go() -> None:
        store = PinStore(None, touch_interval_s=30, max_cached=100)
        for i in range(100):
            claim(store, f"c-{i}")
        come_back_and_push(store)
        async with replica(db_url, touch_interval_s=30) as (store, committer, _):
            store.max_cached = 100
            await asyncio.wait([claim(store, f"c-{i}").stored for i in range(100)])
            come_back_and_push(store)
            await written(committer, 2)  # the two returning turns' touches went out as well

    asyncio.run(go())


def test_the_cache_order_follows_use_more_closely_than_the_touch_interval(engine):
    """With a touch interval longer than the cache's reorder interval, a returning turn between the two moves its
    pin to the back of the cache and writes nothing: the bound still evicts the sessions idle longest."""
    db_url = url_of(engine)

    async def go() -> None:
        async with replica(db_url, touch_interval_s=300) as (store, committer, _):
            store.max_cached = 100
            await asyncio.wait([claim(store, f"c-{i}").stored for i in range(100)])
            store.cache["c-0"].moved -= REORDER_S + 1
            store.cache["c-0"].touched -= REORDER_S + 1
            assert store.get("c-0", TTL) is not None
            assert not committer.touches  # within the touch interval: nothing to write
            for i in range(100, 150):
                claim(store, f"n-{i}")
            assert "c-0" in store.cache and "c-1" not in store.cache

    asyncio.run(go())
