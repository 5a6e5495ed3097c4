"""No row can stop the request log: rows are made storable before they are queued (depth, size, NUL, lone
surrogates), a batch the DB refuses is split until the bad rows are isolated and dropped with a counted reason,
the buffer is bounded in bytes, and shutdown flushes or counts what it drops. On SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

from sqlalchemy import create_engine
from sqlmodel import select

from quantroute.clock import utcnow
from quantroute.db.engine import session as db_session
from quantroute.db.request_log import RequestLog
from quantroute.router.requestlog.writer import RequestLogWriter


def row(request_id: str, **over) -> dict:
    base = {"ts": utcnow(), "request_id": request_id, "session_key": None, "model": "llama3-8b", "deployment": None,
            "node": None, "tier": None, "arm": None, "policy_version": None, "rules": [], "score": None,
            "status": 404, "stream": False, "latency_ms": 1.0, "ttft_ms": None, "prompt_tokens": None,
            "completion_tokens": None, "retries": 0, "escalated": False, "error": None, "replay": None}
    base.update(over)
    return base


def nested(depth: int):
    v: list = []
    for _ in range(depth):
        v = [v]
    return v


class Drops:
    def __init__(self) -> None:
        self.by_reason: dict[str, int] = {}

    def __call__(self, reason: str, n: int) -> None:
        self.by_reason[reason] = self.by_reason.get(reason, 0) + n


def stored(engine) -> dict[str, RequestLog]:
    with db_session(engine) as s:
        return {r.request_id: r for r in s.exec(select(RequestLog))}


def test_deep_json_and_nul_text_are_stored_not_retried_forever(engine):
    """Every hostile row becomes storable, so all of them and the good rows after them commit."""
    writer = RequestLogWriter(engine, batch_size=50)
    writer.add(row("good-1", status=200))
    writer.add(row("deep", replay={"body": {"model": "x", "messages": nested(1000)}, "headers": {}}))
    writer.add(row("nul-model", model="llama\x003-8b", error="no model 'llama\x00'"))
    writer.add(row("nul-json", replay={"body": {"model": "m", "messages": [{"role": "user", "content": "a\x00b"}]},
                                        "headers": {"x-k\x00": "v\x00"}}))
    writer.add(row("surrogate", model="m\ud800", replay={"body": {"s": "\udfff"}, "headers": {}}))
    writer.add(row("good-2", status=200))
    asyncio.run(writer.flush())
    got = stored(engine)
    assert set(got) == {"good-1", "deep", "nul-model", "nul-json", "surrogate", "good-2"}
    assert writer.written == 6 and not writer.buffer
    assert "\x00" not in got["nul-model"].model and got["nul-model"].model.startswith("llama")
    assert "\x00" not in got["nul-json"].replay["body"]["messages"][0]["content"]
    depth, v = 0, got["deep"].replay["body"]["messages"]
    while isinstance(v, list) and v:
        v, depth = v[0], depth + 1
    assert depth < 100  # cut at the writer's bound, and says so
    assert got["deep"].replay.get("truncated") is True


def test_a_row_the_db_refuses_is_isolated_and_counted(engine):
    """A row the DB refuses for a reason the writer cannot fix (here NOT NULL) costs that row only."""
    drops = Drops()
    writer = RequestLogWriter(engine, batch_size=50, on_drop=drops)
    for i in range(9):
        writer.add(row(f"ok-{i}"))
        if i == 4:
            writer.add(row("bad", latency_ms=None))
    asyncio.run(writer.flush())
    assert set(stored(engine)) == {f"ok-{i}" for i in range(9)}
    assert drops.by_reason == {"rejected": 1}
    assert writer.written == 9 and not writer.buffer
    assert writer.last_rejected is not None and "bad" in writer.last_rejected


def test_buffer_is_bounded_in_bytes():
    drops = Drops()
    # a database nobody flushes to (run() is not started): rows only queue
    writer = RequestLogWriter(create_engine("sqlite://"), max_buffered=1000, max_buffered_bytes=10_000,
                              on_drop=drops)
    for i in range(3):
        writer.add(row(f"r{i}"), nbytes=4000)
    assert len(writer.buffer) == 2 and drops.by_reason == {"buffer_full": 1}
    assert writer.buffered_bytes <= 10_000


def test_db_down_keeps_rows_and_shutdown_counts_what_it_could_not_write(tmp_path):
    drops = Drops()
    down = create_engine(f"sqlite:///{tmp_path}/missing-dir/x.db")  # cannot be opened: like a DB that is down
    writer = RequestLogWriter(down, batch_size=10, on_drop=drops)
    for i in range(5):
        writer.add(row(f"r{i}"))
    asyncio.run(writer.flush())
    assert len(writer.buffer) == 5 and drops.by_reason == {}  # kept for the next try, not dropped
    asyncio.run(writer.close(timeout_s=0.5))
    assert drops.by_reason == {"shutdown": 5} and not writer.buffer


def test_a_router_without_a_database_queues_no_rows_and_reports_no_drops(caplog):
    """The fleet experiment's routers run without a database: their writer buffered every row, counted each past
    the bound as dropped (buffer_full) and logged 'N rows could not be written' at every shutdown."""
    drops = Drops()
    writer = RequestLogWriter(None, batch_size=10, flush_interval_s=0.01, max_buffered=5, on_drop=drops)
    for i in range(20):
        writer.add(row(f"r{i}"), nbytes=100)
    assert not writer.buffer and writer.buffered_bytes == 0
    asyncio.run(writer.close(timeout_s=0.1))
    assert drops.by_reason == {} and writer.dropped == 0
    assert "could not be written" not in caplog.text


def test_a_postgres_outage_during_copy_keeps_the_rows_for_the_next_try(pg_url):
    """PostgreSQL batches go in by COPY on psycopg's own cursor, whose errors SQLAlchemy does not wrap: while
    every connection dies as its transaction begins (an outage), a batch is kept whole, not split into rows
    dropped as refused; once the database is back every row is stored."""
    from sqlalchemy import event, text

    from quantroute.db.engine import init_db, make_engine

    engine = make_engine(pg_url)
    init_db(engine)
    outage, killed = [True], [0]

    def kill(conn) -> None:  # the transaction just began: its connection dies under it
        if outage[0]:
            pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()
            killed[0] += 1
            with make_engine(pg_url).connect() as other:
                other.execute(text("SELECT pg_terminate_backend(:p)"), {"p": pid})

    event.listen(engine, "begin", kill)
    drops = Drops()
    writer = RequestLogWriter(engine, batch_size=50, on_drop=drops)
    for i in range(20):
        writer.add(row(f"r{i}", replay={"body": {"messages": [{"role": "user", "content": f"q{i}"}]}}))
    asyncio.run(writer.flush())
    assert killed[0] >= 1 and len(writer.buffer) == 20 and drops.by_reason == {}  # kept, none refused
    outage[0] = False
    asyncio.run(writer.flush())
    assert not writer.buffer and drops.by_reason == {}
    got = stored(engine)
    assert sorted(got) == sorted(f"r{i}" for i in range(20))
    assert got["r3"].replay == {"body": {"messages": [{"role": "user", "content": "q3"}]}}
    engine.dispose()


def test_the_writer_commits_whole_batches_and_leaves_a_partial_one_for_the_interval(engine):
    """Woken by a full batch, the writer writes full batches only: draining to the last row meant, under load,
    transactions of a few rows each rewriting the same tail pages (and a GIL hand-off per transaction)."""
    # an interval long enough that a slow machine still sees the two full batches before it (1 s, not 0.3)
    writer = RequestLogWriter(engine, batch_size=10, flush_interval_s=1.0)
    commits: list[int] = []
    insert = writer._insert
    writer._insert = lambda batch: (commits.append(len(batch)), insert(batch))[1]  # type: ignore[method-assign]  # a spy on the instance

    async def go() -> None:
        task = asyncio.create_task(writer.run())
        for i in range(25):
            writer.add(row(f"w{i}"))
        for _ in range(100):  # the two full batches
            await asyncio.sleep(0.01)
            if writer.written >= 20:
                break
        assert writer.written == 20 and len(writer.buffer) == 5 and commits == [10, 10]
        for _ in range(400):  # the flush interval takes the rest
            await asyncio.sleep(0.01)
            if writer.written == 25:
                break
        task.cancel()

    asyncio.run(go())
    assert writer.written == 25 and not writer.buffer and commits == [10, 10, 5]
    assert len(stored(engine)) == 25


def test_a_row_that_cannot_be_prepared_costs_that_row_only(engine, caplog):
    """Rows are made ready on the event loop as requests end: whatever fails there is counted and logged, and
    never reaches the request (nor the rows around it)."""
    drops = Drops()
    writer = RequestLogWriter(engine, batch_size=100, on_drop=drops)
    ready = writer._ready

    def flaky(r: dict) -> dict:
        if r["request_id"] == "bad":
            raise RuntimeError("cannot build this replay record")
        return ready(r)

    writer._ready = flaky  # type: ignore[method-assign]  # a fault on the instance
    for rid in ("a", "bad", "b"):
        writer.add(row(rid))
    asyncio.run(writer.flush())
    assert drops.by_reason == {"rejected": 1} and writer.written == 2
    assert set(stored(engine)) == {"a", "b"}
    assert "could not be prepared" in caplog.text


def test_a_large_row_is_prepared_in_the_writers_thread_not_on_the_loop(engine):
    """Encoding and walking a large body would stop the event loop for milliseconds: such rows are prepared by
    the writer's thread, where a failure still costs that row only."""
    import threading

    from quantroute.router.requestlog.writer import LOOP_PREPARE_MAX_BYTES

    drops = Drops()
    writer = RequestLogWriter(engine, batch_size=100, on_drop=drops)
    ready, where = writer._ready, {}

    def spy(r: dict) -> dict:
        where[r["request_id"]] = threading.current_thread() is threading.main_thread()
        if r["request_id"] == "big-bad":
            raise RuntimeError("cannot build this replay record")
        return ready(r)

    writer._ready = spy  # type: ignore[method-assign]  # a spy on the instance
    writer.add(row("small"), nbytes=100)
    writer.add(row("big", replay={"body": {"messages": [{"role": "user", "content": "x" * 70_000}]}}),
               nbytes=LOOP_PREPARE_MAX_BYTES + 1)
    writer.add(row("big-bad"), nbytes=LOOP_PREPARE_MAX_BYTES + 1)
    assert where == {"small": True}  # prepared as it was added; the large ones wait for the writer
    asyncio.run(writer.flush())
    assert where == {"small": True, "big": False, "big-bad": False}
    assert writer.written == 2 and drops.by_reason == {"rejected": 1} and not writer.buffer
    got = stored(engine)
    assert set(got) == {"small", "big"} and got["big"].replay["body"]["messages"][0]["content"].startswith("xxx")
