"""The router's request-log writer stores every column as SQLAlchemy would, on SQLite and PostgreSQL: JSON
(rules list, replay body and headers), aware timestamps, booleans and NULLs read back unchanged."""

from __future__ import annotations

import asyncio
from datetime import timedelta

from sqlmodel import select

from quantroute.clock import utcnow
from quantroute.db.engine import session as db_session
from quantroute.db.request_log import RequestLog
from quantroute.db.request_stats import RequestStatsMinute
from quantroute.db.shadow_pair import COLUMNS as SHADOW_COLUMNS
from quantroute.db.shadow_pair import ShadowPair
from quantroute.router.path.shadow import ShadowLogWriter
from quantroute.router.requestlog.writer import RequestLogWriter


def test_every_column_round_trips(engine):
    ts = utcnow() - timedelta(seconds=3)
    replay = {"body": {"model": "llama3-8b", "temperature": 0.2, "stream": True,
                       "messages": [{"role": "user", "content": "Écris une fonction — « json » ✓"}]},
              "headers": {"x-priority": "9", "x-session-id": "s-1"}}
    rows = [{"ts": ts, "request_id": "r-1", "session_key": "s-1", "model": "llama3-8b", "deployment": "llama3-8b-fp16",
             "node": "fp16-a", "tier": "fp16", "arm": "baseline", "policy_version": 7,
             "rules": ["greedy-structured", "high-priority"], "score": 9.5, "status": 200, "stream": True,
             "latency_ms": 812.5, "ttft_ms": 40.25, "prompt_tokens": 31, "completion_tokens": 250, "retries": 1,
             "escalated": True, "error": None, "replay": replay, "affinity": "fallback_busy",
             "pin_created_at": ts - timedelta(minutes=5, microseconds=7), "reason": "spilled up: int4 at its knee",
             "tenant": "acme"},
            {"ts": ts, "request_id": "r-2", "session_key": None, "model": "llama3-8b", "deployment": None,
             "node": None, "tier": None, "arm": None, "policy_version": None, "rules": [], "score": None,
             "status": 503, "stream": False, "latency_ms": 1.0, "ttft_ms": None, "prompt_tokens": None,
             "completion_tokens": None, "retries": 0, "escalated": False, "error": "no capacity", "replay": None,
             "affinity": None, "pin_created_at": None, "reason": None, "tenant": None}]
    got = written_and_read(RequestLogWriter(engine, batch_size=10), rows, engine, RequestLog)
    for want in rows:
        assert got[want["request_id"]] == want


def written_and_read(writer, rows: list[dict], engine, model) -> dict[str, dict]:
    """`rows` through `writer`, read back by request id as the ORM reads them (naive timestamps made aware)."""
    for r in rows:
        writer.add(dict(r))
    asyncio.run(writer.flush())
    assert (writer.written, writer.dropped) == (len(rows), 0)
    with db_session(engine) as s:
        got = {r.request_id: r.model_dump(exclude={"id"}) for r in s.exec(select(model))}
    for row in got.values():
        if row["ts"].tzinfo is None:
            row["ts"] = row["ts"].replace(tzinfo=rows[0]["ts"].tzinfo)
    return got


def test_the_shadow_pair_writer_shares_the_mechanism_and_round_trips(engine):
    """ShadowLogWriter is the request-log writer pointed at shadow_pair (no rollup): its JSON columns (rules,
    bodies, or none kept) and the rest read back unchanged on both databases."""
    ts = utcnow() - timedelta(seconds=3)
    base = {c: None for c in SHADOW_COLUMNS} | {
        "ts": ts, "model": "llama3-8b", "rules": ["greedy-structured"], "kind": "tier", "stream": False,
        "served_tier": "fp16", "served_deployment": "d16", "shadow_tier": "int4", "shadow_deployment": "d4",
        "shadow_status": 200, "compared": True}
    rows = [base | {"request_id": "p-1", "agree": True, "exact": True, "length_ratio": 1.0,
                    "bodies": {"request": {"messages": [{"role": "user", "content": "2 + 3 = ? « ✓ »"}]},
                               "served": "5", "shadow": "5"}},
            base | {"request_id": "p-2", "rules": [], "compared": False, "shadow_status": 0,
                    "shadow_error": "no complete answer within 60s", "bodies": None}]
    got = written_and_read(ShadowLogWriter(engine, batch_size=10), rows, engine, ShadowPair)
    with db_session(engine) as s:
        assert not s.exec(select(RequestStatsMinute)).all()  # shadow load never reaches the request rollup
    for want in rows:
        assert {c: got[want["request_id"]][c] for c in SHADOW_COLUMNS} == {c: want[c] for c in SHADOW_COLUMNS}


def test_a_batch_is_inserted_with_one_statement_per_chunk_not_one_per_row(tmp_path):
    """sqlite3 releases the GIL around every row of an executemany, and the busy event loop keeps it for a switch
    interval each time: a 500-row batch meant hundreds of hand-offs. Rows go in multi-row INSERTs instead."""
    from sqlalchemy import event, text

    from quantroute.db.engine import init_db, make_engine
    from quantroute.router.requestlog.writer import RequestLogWriter

    eng = make_engine(f"sqlite:///{tmp_path / 'log.db'}")
    init_db(eng)
    seen: list[tuple[str, bool]] = []
    event.listen(eng, "before_cursor_execute",
                 lambda conn, cur, stmt, params, ctx, many: seen.append((" ".join(stmt.split()[:3:2]), many)))
    writer = RequestLogWriter(eng, batch_size=1000)
    rows = [{"ts": utcnow(), "request_id": f"r{i}", "model": "m", "status": 200, "stream": False, "latency_ms": 1.0,
             "retries": 0, "escalated": False, "rules": [], "replay": None} for i in range(2500)]
    assert writer._write([writer.prepare(r) for r in rows]) == (2500, 0)
    inserts = [s for s in seen if s[0] == "INSERT request_log"]
    assert not any(many for _, many in inserts)
    assert len(inserts) == -(-2500 // writer._chunk) and writer._chunk > 100
    with eng.connect() as c:
        assert c.execute(text("SELECT count(*), count(DISTINCT request_id) FROM request_log")).one() == (2500, 2500)
    eng.dispose()


def test_the_wal_is_truncated_once_another_connection_grew_it_past_the_limit(tmp_path, monkeypatch):
    """The pin committer's connection commits without checkpointing; SQLite's passive checkpoints never find the
    WAL fully copied while it writes, so the request log writer bounds the file after its batches."""
    import os
    import sqlite3

    from quantroute.db.engine import init_db, make_engine
    from quantroute.router.requestlog import writer as writer_module

    path = tmp_path / "log.db"
    eng = make_engine(f"sqlite:///{path}")
    init_db(eng)
    limit = 256 * 1024
    monkeypatch.setattr(writer_module, "WAL_SIZE_LIMIT", limit)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("PRAGMA wal_autocheckpoint=0")  # as the pin committer's connection
    other.execute("CREATE TABLE filler (b BLOB)")
    for _ in range(64):
        other.execute("INSERT INTO filler VALUES (?)", (os.urandom(16 * 1024),))
    assert os.path.getsize(f"{path}-wal") > 4 * limit
    writer = writer_module.RequestLogWriter(eng, batch_size=10)
    rows = [{"ts": utcnow(), "request_id": f"r{i}", "model": "m", "status": 200, "stream": False, "latency_ms": 1.0,
             "retries": 0, "escalated": False, "rules": [], "replay": None} for i in range(10)]
    assert writer._write([writer.prepare(r) for r in rows]) == (10, 0)
    assert writer.checkpoints == 1
    assert os.path.getsize(f"{path}-wal") <= limit
    assert other.execute("SELECT count(*) FROM filler").fetchone() == (64,)  # copied into the database, not lost
    other.close()
    eng.dispose()


def test_a_checkpoint_a_reader_holds_off_never_fails_the_batch(tmp_path, monkeypatch):
    """A reader in an old snapshot keeps TRUNCATE from finishing: the batch stays written once, and the
    truncation is tried again after a later batch."""
    import os
    import sqlite3

    from sqlalchemy import text

    from quantroute.db.engine import init_db, make_engine
    from quantroute.router.requestlog import writer as writer_module

    path = tmp_path / "log.db"
    eng = make_engine(f"sqlite:///{path}")
    init_db(eng)
    monkeypatch.setattr(writer_module, "WAL_SIZE_LIMIT", 1024)
    writer = writer_module.RequestLogWriter(eng, batch_size=10)
    rows = [{"ts": utcnow(), "request_id": f"r{i}", "model": "m", "status": 200, "stream": False, "latency_ms": 1.0,
             "retries": 0, "escalated": False, "rules": [], "replay": None} for i in range(10)]
    assert writer._write([writer.prepare(r) for r in rows[:5]]) == (5, 0)
    reader = sqlite3.connect(path, isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM request_log").fetchone()  # holds its snapshot
    before = writer.checkpoints
    assert writer._write([writer.prepare(r) for r in rows[5:]]) == (5, 0)
    assert writer.checkpoints == before
    reader.execute("COMMIT")
    reader.close()
    assert writer._write([writer.prepare(r) for r in rows[:1]]) == (1, 0)
    assert writer.checkpoints == before + 1 and os.path.getsize(f"{path}-wal") <= 1024
    with eng.connect() as c:
        assert c.execute(text("SELECT count(*) FROM request_log")).scalar() == 11
    eng.dispose()
