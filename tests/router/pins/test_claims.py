"""Where pin claims run: on SQLite in the event loop on a connection that never waits (a batch that finds the write
lock taken tries again on the loop's clock), on PostgreSQL in the event loop through asyncpg; the loop keeps
serving while they wait."""

from __future__ import annotations

import asyncio
import re
import sqlite3
import threading
import time
from datetime import timedelta

import pytest

from quantroute.clock import utcnow
from quantroute.db.engine import make_engine
from quantroute.router.pins.claims import SqliteClaims, claims_for
from quantroute.router.pins.committer import PinCommitter
from tests.support.pins import pin_row
from tests.support.sqlite_lock import WriteLock


def test_sqlite_claims_run_in_the_loop_on_a_connection_that_neither_waits_nor_checkpoints(sqlite_engine):
    claims = claims_for(sqlite_engine)
    assert isinstance(claims, SqliteClaims)

    async def go() -> tuple[list[dict], list[dict]]:
        first = await claims.claim([pin_row("a"), pin_row("b", "fp16")], 5)
        again = await claims.claim([pin_row("a", "fp16")], 5)  # a live pin: the stored one comes back
        return first, again

    first, again = asyncio.run(go())
    assert {p["session_key"]: p["tier"] for p in first} == {"a": "int4", "b": "fp16"}
    assert again[0]["tier"] == "int4"
    assert (claims.inline, claims.busy) == (2, 0)
    conn = claims._connection()
    assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 0
    assert conn.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0  # the log writer's connection checkpoints
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    asyncio.run(claims.aclose())


def test_a_claim_that_finds_the_write_lock_taken_waits_and_the_loop_keeps_running(sqlite_engine):
    """Another connection (a request-log batch, another worker) holds the write lock for 0.6 s: the claim is
    stored once it is released, and meanwhile the event loop goes on (with the claim run on the loop and a
    busy timeout, every request of the process would have stalled)."""
    path = sqlite_engine.url.database

    async def go() -> tuple[list[dict], int]:
        committer = PinCommitter(sqlite_engine, timeout_s=10)
        runner = asyncio.create_task(committer.run())
        lock = WriteLock(path)
        asyncio.get_running_loop().call_later(0.6, lock.release)
        ticks = 0
        fut = committer.submit(pin_row("held"))
        while not fut.done():
            await asyncio.sleep(0.01)
            ticks += 1
        assert not lock.held  # stored only once the lock was released
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        return [fut.result()], ticks

    pins, ticks = asyncio.run(go())
    assert pins[0]["session_key"] == "held" and pins[0]["tier"] == "int4"
    assert ticks >= 5  # ~60 ticks of 10 ms while the lock was held (fewer on a loaded machine): the loop ran on
    with sqlite3.connect(path) as c:
        assert c.execute("SELECT tier FROM session_pin WHERE session_key = 'held'").fetchone() == ("int4",)


def test_a_claim_that_found_the_lock_taken_is_counted_and_retried_in_the_loop(sqlite_engine):
    """Each try that found the write lock taken is counted; the batch is stored once the lock is free, with no
    worker thread involved (the claim's own task does the retries)."""
    claims = SqliteClaims(sqlite_engine)
    lock = WriteLock(sqlite_engine.url.database)

    threads = threading.active_count()

    async def go() -> tuple[list[dict], int]:
        task = asyncio.create_task(claims.claim([pin_row("x")], 5))
        await asyncio.sleep(0.2)
        waiting_threads = threading.active_count()
        lock.release()
        return await task, waiting_threads

    pins, waiting_threads = asyncio.run(go())
    assert pins[0]["session_key"] == "x"
    assert claims.inline == 0 and claims.busy >= 5  # 0.2 s of tries at most 1 ms apart, fewer on a busy machine
    assert waiting_threads == threads  # no worker thread waited for the lock
    asyncio.run(claims.aclose())


def test_a_claim_gives_up_when_its_deadline_passes_with_the_lock_still_taken(sqlite_engine):
    """The wait for the write lock is bounded by the claims' deadline, not by the engine's 30 s busy timeout:
    with the lock held for 2 s and 0.3 s to go, the claim fails (the committer then retries or fails its
    requests) instead of storing the pin long after its requests gave up. Afterwards the same object claims
    normally."""
    from quantroute.router.pins.claims import TransientError

    claims = SqliteClaims(sqlite_engine)
    lock = WriteLock(sqlite_engine.url.database, seconds=2.0)
    with pytest.raises(TransientError, match="locked"):
        asyncio.run(claims.claim([pin_row("late")], 0.3))
    assert lock.held  # it gave up while the lock was still held
    lock.join()
    assert asyncio.run(claims.claim([pin_row("late")], 5))[0]["tier"] == "int4"
    asyncio.run(claims.aclose())


def test_a_pin_whose_batch_waits_past_its_deadline_fails_and_is_not_stored_later(sqlite_engine):
    """Through the committer: the lock is held longer than the claim's timeout, so the request's pin fails with
    `PinNotStored` (the request fails cleanly); no pin appears afterwards for a session whose first turn failed."""
    from quantroute.router.pins.committer import PinNotStored

    async def go() -> BaseException | None:
        committer = PinCommitter(sqlite_engine, timeout_s=0.3)
        runner = asyncio.create_task(committer.run())
        lock = WriteLock(sqlite_engine.url.database, seconds=2.0)
        fut = committer.submit(pin_row("gave-up"))
        await asyncio.wait([fut], timeout=10)
        err = fut.exception() if fut.done() else None
        alive = lock.held
        await asyncio.to_thread(lock.join)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        assert alive  # decided while the lock was still held
        return err

    assert isinstance(asyncio.run(go()), PinNotStored)
    with sqlite3.connect(sqlite_engine.url.database) as c:
        assert c.execute("SELECT count(*) FROM session_pin WHERE session_key = 'gave-up'").fetchone() == (0,)


@pytest.mark.postgres
@pytest.mark.parametrize("synchronous", [True, False])
def test_postgres_pins_commit_without_the_flush_only_when_asked_and_are_visible_at_once(pg_url, synchronous):
    """`pin_synchronous_commit` off: the pin connection alone commits without waiting for its WAL flush (every
    other connection keeps the server's setting), and a pin is visible to another connection (another replica)
    the moment its claim resolved, as with the flush. Through the router's own committer."""
    from quantroute.db.engine import init_db

    eng = make_engine(pg_url)
    init_db(eng)

    async def go() -> tuple[dict, str, tuple | None]:
        committer = PinCommitter(eng, timeout_s=10, synchronous=synchronous)
        runner = asyncio.create_task(committer.run())
        pin = await committer.submit(pin_row(f"async-{synchronous}"))
        # what another replica reads right now, on a connection of its own
        reader = make_engine(pg_url)
        with reader.connect() as other:
            seen = other.exec_driver_sql("SELECT tier FROM session_pin WHERE session_key = %s",
                                         (pin["session_key"],)).first()
        reader.dispose()
        setting = await committer._db._conn.fetchval("SHOW synchronous_commit")
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        return pin, setting, tuple(seen) if seen else None

    try:
        pin, setting, seen = asyncio.run(go())
        assert setting == ("on" if synchronous else "off")
        assert seen == (pin["tier"],) == ("int4",)
        with eng.connect() as c:  # the request log's and everyone else's connections: the server's default
            assert c.exec_driver_sql("SHOW synchronous_commit").scalar_one() == "on"
    finally:
        eng.dispose()


@pytest.mark.postgres
def test_a_postgres_claim_held_by_a_lock_is_bounded_in_the_caller_s_task_and_the_next_claim_reconnects(pg_url):
    """Another transaction has inserted the same session key and not committed: the claim's upsert waits for its
    row lock. The claim gives up at its timeout (TransientError: the committer retries or fails the batch), drops
    its connection, and the next claim connects afresh. Meanwhile the statement runs in the caller's own task:
    a task of its own (asyncio.wait_for) cost a loop iteration before the statement went out and another after
    its answer came back, on every batch."""
    from quantroute.db.engine import init_db
    from quantroute.router.pins.claims import AsyncpgClaims, TransientError

    eng = make_engine(pg_url)
    init_db(eng)
    claims = claims_for(eng)
    assert isinstance(claims, AsyncpgClaims)
    holder = eng.connect()
    holder.exec_driver_sql(
        "INSERT INTO session_pin (session_key, model, tier, created_at, last_used, expires_at) "
        "VALUES ('locked', 'llama3-8b', 'fp16', now(), now(), now() + interval '1 hour')")  # not committed

    async def go() -> tuple[BaseException | None, int, float]:
        await claims.claim([pin_row("warm")], 5)  # connected
        task = asyncio.create_task(claims.claim([pin_row("locked")], 0.5))
        await asyncio.sleep(0.2)  # the statement is out and waiting for the lock
        tasks = len(asyncio.all_tasks())
        started = time.monotonic()
        err = (await asyncio.gather(task, return_exceptions=True))[0]
        return err, tasks, time.monotonic() - started

    try:
        err, tasks, waited = asyncio.run(go())
        assert isinstance(err, TransientError) and "TimeoutError" in str(err)
        assert tasks == 2  # this test's task and the claim's: no third one running the query
        assert waited < 5  # given up at the claim's timeout, not the other transaction's end
        assert claims._conn is None  # a connection in an unknown state is never reused
        holder.rollback()

        async def again() -> str:
            try:
                return (await claims.claim([pin_row("locked")], 5))[0]["tier"]
            finally:
                await claims.aclose()

        assert asyncio.run(again()) == "int4"  # the lock is gone: ours
    finally:
        holder.close()
        eng.dispose()


@pytest.mark.postgres
def test_asyncpg_claims_round_trip_exactly_and_hand_back_our_own_rows_or_the_stored_ones(pg_url):
    """The router's PostgreSQL claims go through asyncpg while everything else reads the table through psycopg:
    40 pins with NULLs, canary arms and timestamps a microsecond apart come back exactly as claimed (ours: the
    very dicts), and a pin stored first by another replica that differs in one column comes back as stored. The
    URL carries libpq's connect_timeout, which asyncpg does not know (sent to the server as a setting, it would be
    refused), and the schema as `options=-csearch_path=...`, which it must keep."""
    from quantroute.db.engine import init_db
    from quantroute.db.session_pin import PinClaims
    from quantroute.router.pins.claims import AsyncpgClaims

    eng = make_engine(f"{pg_url}&connect_timeout=3")
    init_db(eng)
    claims = claims_for(eng)
    assert isinstance(claims, AsyncpgClaims) and claims.connect_timeout_s == 3
    now = utcnow()
    sent = [{**pin_row(f"k-{i:02d}", "fp16"), "arm": "canary" if i % 3 else None, "last_node": f"n-{i}",
             "created_at": now - timedelta(microseconds=i * 7 + 1)} for i in range(40)]
    theirs = {**pin_row("theirs", "int4"), "arm": "canary"}
    with eng.begin() as conn:  # another replica, through psycopg
        PinClaims(eng.dialect).claim(conn, [theirs], utcnow())

    async def go() -> list[dict]:
        try:
            return await claims.claim([*reversed(sent), {**theirs, "tier": "fp16"}], 5)
        finally:
            await claims.aclose()

    try:
        got = {p["session_key"]: p for p in asyncio.run(go())}
        assert all(got[p["session_key"]] is p for p in sent)
        assert (got["theirs"]["tier"], got["theirs"]["arm"]) == ("int4", "canary")
        assert got["theirs"]["created_at"] == theirs["created_at"]
        assert got["theirs"]["created_at"].utcoffset() == timedelta(0)
        with eng.connect() as c:  # what psycopg reads back is what was claimed, to the microsecond
            stored = {r[0]: r[1:] for r in c.exec_driver_sql(
                "SELECT session_key, tier, arm, last_node, created_at FROM session_pin")}
        assert all(stored[p["session_key"]] == (p["tier"], p["arm"], p["last_node"], p["created_at"])
                   for p in sent)
    finally:
        eng.dispose()


@pytest.mark.postgres
def test_a_one_pin_asyncpg_claim_reads_and_creates_as_a_batch_does(pg_url):
    """A batch of one pin (every first turn at low concurrency) goes as a VALUES statement with the pin's columns
    as parameters, not as JSON: it must read and create exactly as the JSON form does. A new pin with NULLs and a
    microsecond timestamp comes back as the very dict claimed and reads back the same through psycopg; another
    replica's live pin comes back as stored; an expired one is replaced by ours; a row the database refuses (a
    NUL in a text column) fails alone, not as the connection's error."""
    import asyncpg

    from quantroute.db.engine import init_db
    from quantroute.db.session_pin import PinClaims
    from quantroute.router.pins.claims import AsyncpgClaims, TransientError

    eng = make_engine(pg_url)
    init_db(eng)
    claims = claims_for(eng)
    assert isinstance(claims, AsyncpgClaims)
    now = utcnow()
    live = {**pin_row("live", "int4"), "arm": "canary"}
    expired = {**pin_row("expired", "int4"), "expires_at": now - timedelta(seconds=1)}
    with eng.begin() as conn:  # other replicas, through psycopg
        PinClaims(eng.dialect).claim(conn, [live, expired], now - timedelta(minutes=5))
    assert PinClaims(eng.dialect).numbered([pin_row("one")], now)[0] != PinClaims(eng.dialect).numbered(
        [pin_row("one"), pin_row("two")], now)[0]  # the one-pin form is its own statement
    new = {**pin_row("new", "fp16"), "last_node": None, "created_at": now - timedelta(microseconds=7)}
    mine_live, mine_expired = {**live, "tier": "fp16", "arm": None}, {**pin_row("expired", "fp8"), "arm": "canary"}

    async def go() -> list:
        try:
            out = [await claims.claim([p], 5) for p in (new, mine_live, mine_expired)]
            try:
                await claims.claim([{**pin_row("nul"), "served_deployment": "d\x00"}], 5)
            except Exception as e:  # noqa: BLE001 - what kind it is, is the point
                out.append(e)
            return out
        finally:
            await claims.aclose()

    try:
        [got_new], [got_live], [got_expired], refused = asyncio.run(go())
        assert got_new is new
        assert (got_live["tier"], got_live["arm"], got_live["created_at"]) == ("int4", "canary", live["created_at"])
        assert got_expired is mine_expired
        assert not isinstance(refused, TransientError) and isinstance(refused, asyncpg.PostgresError), refused
        with eng.connect() as c:
            stored = {r[0]: r[1:] for r in c.exec_driver_sql(
                "SELECT session_key, tier, arm, last_node, created_at FROM session_pin")}
        assert stored["new"] == ("fp16", None, None, new["created_at"])
        assert stored["live"] == ("int4", "canary", None, live["created_at"])
        assert stored["expired"] == ("fp8", "canary", None, mine_expired["created_at"])
        assert "nul" not in stored
    finally:
        eng.dispose()


@pytest.mark.postgres
def test_a_postgres_pin_connection_the_server_drops_fails_its_batch_as_transient_and_the_next_reconnects(pg_url):
    """The database terminates the pin connection while a batch is out (a restart, a failover, an operator's
    pg_terminate_backend): the batch fails with TransientError, which the committer retries as it is (not split
    into single rows and rejected), and the next claim connects afresh. A connection dropped while idle is
    noticed before the next batch, which connects afresh without failing."""
    from quantroute.db.engine import init_db
    from quantroute.router.pins.claims import TransientError

    eng = make_engine(pg_url)
    init_db(eng)
    claims = claims_for(eng)
    holder = eng.connect()  # holds the row the batch below waits for, so the batch is out when the server drops it
    holder.exec_driver_sql(
        "INSERT INTO session_pin (session_key, model, tier, created_at, last_used, expires_at) "
        "VALUES ('dropped', 'llama3-8b', 'fp16', now(), now(), now() + interval '1 hour')")  # not committed

    def terminate(pid: int) -> None:
        with eng.connect() as c:
            c.exec_driver_sql(f"SELECT pg_terminate_backend({pid})")

    async def go() -> tuple[BaseException | None, str, str]:
        await claims.claim([pin_row("before")], 5)
        task = asyncio.create_task(claims.claim([pin_row("dropped")], 5))
        await asyncio.sleep(0.2)  # out, waiting for the lock
        await asyncio.to_thread(terminate, claims._conn.get_server_pid())
        err = (await asyncio.gather(task, return_exceptions=True))[0]
        after = (await claims.claim([pin_row("after", "fp16")], 5))[0]["tier"]
        await asyncio.to_thread(terminate, claims._conn.get_server_pid())  # idle this time
        await asyncio.sleep(0.2)
        idle = (await claims.claim([pin_row("idle", "fp8")], 5))[0]["tier"]
        await claims.aclose()
        return err, after, idle

    try:
        err, after, idle = asyncio.run(go())
        assert isinstance(err, TransientError), err
        assert (after, idle) == ("fp16", "fp8")
    finally:
        holder.rollback()
        holder.close()
        eng.dispose()


@pytest.mark.postgres
def test_a_pin_connection_the_server_refuses_fails_the_batch_whole_after_its_deadline_not_row_by_row(pg_url):
    """A login the server refuses (here a role that does not exist) is the connection's failure, as psycopg
    reports it too: the committer keeps the batch and retries it until the claims' deadline, then fails each pin
    as not stored in time; it does not split the batch and reject every row as the database's verdict on it."""
    from sqlalchemy.engine import make_url

    from quantroute.router.pins.claims import TransientError
    from quantroute.router.pins.committer import PinNotStored

    eng = make_engine(make_url(pg_url).set(username="no_such_role_here").render_as_string(hide_password=False))

    async def go() -> tuple[BaseException | None, list, int]:
        err = (await asyncio.gather(claims_for(eng).claim([pin_row("x")], 2), return_exceptions=True))[0]
        committer = PinCommitter(eng, timeout_s=0.5)
        runner = asyncio.create_task(committer.run())
        outcomes = await asyncio.gather(*[committer.submit(pin_row(f"refused-{i}")) for i in range(8)],
                                        return_exceptions=True)
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        return err, outcomes, committer.errors

    try:
        err, outcomes, errors = asyncio.run(go())
        assert isinstance(err, TransientError) and "connecting" in str(err), err
        assert all(isinstance(o, PinNotStored) and "not stored within" in str(o) for o in outcomes), outcomes
        assert errors < 8  # whole-batch retries with a backoff, not a connection attempt per half-batch
    finally:
        eng.dispose()


def test_a_connect_timeout_that_is_not_a_number_is_refused_naming_it():
    """libpq's `connect_timeout` in the URL bounds the pin connection's connect: a value that is not a number is
    refused when the router starts, naming the parameter, not at the first claim."""
    for query, shown in (("connect_timeout=soon", "'soon'"), ("connect_timeout=1&connect_timeout=2", "('1', '2')")):
        eng = make_engine(f"postgresql+psycopg://nobody@127.0.0.1:1/none?{query}")  # never connected
        try:
            with pytest.raises(ValueError, match=rf"connect_timeout in the database URL .* got {re.escape(shown)}"):
                claims_for(eng)
        finally:
            eng.dispose()


@pytest.mark.postgres
def test_without_asyncpg_postgres_pins_are_claimed_from_a_worker_thread(pg_url, monkeypatch, caplog):
    """asyncpg comes with the postgres extra; a deployment that installed psycopg alone still stores pins (through
    the threaded path, with the pin connection's setting) and says what to install."""
    import sys

    from quantroute.db.engine import init_db
    from quantroute.router.pins.claims import ThreadedClaims

    monkeypatch.setitem(sys.modules, "asyncpg", None)  # import asyncpg -> ImportError
    eng = make_engine(pg_url)
    init_db(eng)
    try:
        with caplog.at_level("WARNING"):
            claims = claims_for(eng, synchronous=False)
        assert isinstance(claims, ThreadedClaims)
        assert "quantroute[postgres]" in caplog.text
        assert asyncio.run(claims.claim([pin_row("fallback", "fp8")], 5))[0]["tier"] == "fp8"
        assert claims._conn.exec_driver_sql("SHOW synchronous_commit").scalar_one() == "off"
        with eng.connect() as c:
            assert c.exec_driver_sql("SELECT tier FROM session_pin WHERE session_key = 'fallback'").scalar_one() \
                == "fp8"
        asyncio.run(claims.aclose())
    finally:
        eng.dispose()


def test_the_setting_reaches_the_pin_connection_of_every_engine_the_committer_moves_to(sqlite_engine):
    """A committer built with `synchronous=False` keeps it when its engine is replaced (a DB URL change)."""
    committer = PinCommitter(sqlite_engine, synchronous=False)
    committer.engine = sqlite_engine
    assert committer.synchronous is False
    assert isinstance(committer._db, SqliteClaims)  # SQLite: no flush per commit to skip


@pytest.mark.postgres
def test_a_committer_moved_to_another_postgres_engine_commits_there_without_the_flush(pg_url):
    """The same on PostgreSQL, where it matters: after the engine is replaced, the next batch goes out on a new
    pin connection to the new engine, and that connection commits without the flush."""
    from quantroute.db.engine import init_db
    from quantroute.router.pins.claims import AsyncpgClaims

    first, second = make_engine(pg_url), make_engine(pg_url)
    init_db(first)

    async def go() -> tuple[dict, dict, str]:
        committer = PinCommitter(first, timeout_s=10, synchronous=False)
        runner = asyncio.create_task(committer.run())
        before = await committer.submit(pin_row("before-move"))
        committer.engine = second
        after = await committer.submit(pin_row("after-move", "fp16"))
        assert isinstance(committer._db, AsyncpgClaims) and committer._db.synchronous is False
        setting = await committer._db._conn.fetchval("SHOW synchronous_commit")
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        return before, after, setting

    try:
        before, after, setting = asyncio.run(go())
        assert (before["tier"], after["tier"], setting) == ("int4", "fp16", "off")
    finally:
        first.dispose()
        second.dispose()


def test_a_batch_with_rows_the_database_refuses_stores_every_other_pin(engine):
    """On both databases (on PostgreSQL the rows travel as one JSON parameter): a row the database refuses (a
    missing model; on PostgreSQL also a NUL, which JSON can carry and a text column cannot) fails alone with
    `PinNotStored`, its batch split around it; every other pin of the batch is stored."""
    from quantroute.router.pins.committer import PinNotStored

    bad = {"no-model": {**pin_row("no-model"), "model": None}}
    if engine.dialect.name == "postgresql":
        bad["nul"] = {**pin_row("nul"), "served_deployment": "d\x00"}
    good = [pin_row(f"ok-{i}", "fp16" if i % 2 else "int4") for i in range(6)]

    async def go() -> dict[str, object]:
        committer = PinCommitter(engine, timeout_s=10)
        futs = {r["session_key"]: committer.submit(r) for r in [*good[:3], *bad.values(), *good[3:]]}
        runner = asyncio.create_task(committer.run())
        out = {}
        for key, fut in futs.items():
            try:
                out[key] = (await fut)["tier"]
            except PinNotStored as e:
                out[key] = e
        runner.cancel()
        await asyncio.gather(runner, return_exceptions=True)
        return out

    out = asyncio.run(go())
    assert {k: v for k, v in out.items() if k.startswith("ok-")} == {r["session_key"]: r["tier"] for r in good}
    for key in bad:
        assert isinstance(out[key], PinNotStored) and "rejected by the database" in str(out[key]), out[key]
    with engine.connect() as c:
        stored = {k for (k,) in c.exec_driver_sql("SELECT session_key FROM session_pin")}
    assert stored == {r["session_key"] for r in good}


def test_claims_round_trip_exactly_and_postgres_sends_one_statement_text_for_any_batch_size(engine):
    """psycopg splits and caches a statement by its text and the server prepares it by its text: on PostgreSQL,
    with the rows as one JSON parameter, batches of 1, 7 and 40 pins are the same statement. SQLite keeps a VALUES
    row for one pin and sends larger batches as one JSON parameter too (two texts, so sqlite3 caches two prepared
    statements, not one per batch size). On both databases every value comes back exactly as claimed, timestamps
    to the microsecond and with their offset."""
    from quantroute.db.session_pin import PinClaims

    claims = PinClaims(engine.dialect)
    now = utcnow()
    texts = {claims.statement([pin_row(f"b{n}-{i:02d}") for i in range(n)], now)[0] for n in (1, 7, 40)}
    if engine.dialect.name == "postgresql":
        assert len(texts) == 1 and "json_populate_recordset" in texts.pop()
    else:
        assert len(texts) == 2 and sum("json_each" in t for t in texts) == 1
    sent = [{**pin_row(f"k-{i:02d}", "fp16"), "arm": "canary" if i % 3 else None, "last_node": f"n-{i}",
             "created_at": now - timedelta(microseconds=i * 7 + 1)} for i in range(40)]
    for p in sent[::2]:  # a first turn's: last use and creation one object (bound once)
        p["last_used"] = p["created_at"] = now - timedelta(microseconds=len(p["session_key"]) * 11 + 3)
    sql, params, ours = claims.statement(list(reversed(sent)), now)
    with engine.begin() as conn:
        fetched = conn.exec_driver_sql(sql, params).all()
    got = claims.stored(fetched)  # every value converted back from what the database holds
    assert sorted(got, key=lambda p: p["session_key"]) == sent
    assert all(p["created_at"].utcoffset() == timedelta(0) for p in got)
    # ... and with what the batch wrote: every row is ours, so each comes back as the very dict claimed
    mine = sorted(claims.stored(fetched, ours), key=lambda p: p["session_key"])
    assert all(a is b for a, b in zip(mine, sent, strict=True))


def test_a_pin_stored_first_elsewhere_comes_back_as_stored_even_when_it_differs_from_ours_in_one_column(engine):
    """`stored` hands a claim its own dict only when every claimed column the database returned is what the batch
    wrote: another replica's pin that differs in the tier alone (same key, same creation time to the
    microsecond) or in the canary arm alone comes back with the stored values (both databases)."""
    from quantroute.db.session_pin import PinClaims

    claims = PinClaims(engine.dialect)
    theirs = [pin_row("tier-differs", "int4"), {**pin_row("arm-differs", "fp16"), "arm": "canary"}]
    with engine.begin() as conn:
        claims.claim(conn, theirs, utcnow())
    ours = [{**theirs[0], "tier": "fp16", "served_deployment": theirs[0]["served_deployment"]},
            {**theirs[1], "arm": None}, pin_row("fresh", "fp8")]
    with engine.begin() as conn:
        got = {p["session_key"]: p for p in claims.claim(conn, ours, utcnow())}
    assert (got["tier-differs"]["tier"], got["arm-differs"]["arm"]) == ("int4", "canary")
    assert got["tier-differs"] is not ours[0] and got["arm-differs"] is not ours[1]
    assert got["fresh"] is ours[2]
