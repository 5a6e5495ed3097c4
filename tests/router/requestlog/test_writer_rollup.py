"""The per-minute rollup: the request-log writer keeps request_stats_minute equal to a GROUP BY over
request_log across batches (SQLite, and PostgreSQL when configured); a failed batch leaves it untouched;
migration 0102 backfills it from rows logged before it existed."""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest
from alembic import command
from sqlalchemy import text

from quantroute.clock import utcnow
from quantroute.db.engine import init_db, make_engine
from quantroute.db.request_stats import COLUMNS, KEY, minute_stats, rollup_select_sql
from quantroute.db.schema import alembic_config
from quantroute.router.requestlog.writer import RequestLogWriter

TIERS = [("fp16", "llama3-8b-fp16"), ("int8", "llama3-8b-w8a8-int8"), ("int4", "llama3-8b-awq-w4a16"),
         (None, None)]  # no tier / deployment: the router could not route it


def make_rows(n: int, seed: int, *, minutes: int = 4) -> list[dict]:
    rnd = random.Random(seed)
    now = utcnow()
    rows = []
    for i in range(n):
        tier, dep = rnd.choice(TIERS)
        rows.append({"ts": now - timedelta(seconds=rnd.uniform(0, 60 * minutes)), "request_id": f"r{seed}-{i}",
                     "session_key": None, "model": rnd.choice(["llama3-8b", "qwen2-7b"]), "deployment": dep,
                     "node": None, "tier": tier, "arm": rnd.choice(["baseline", "candidate", None]),
                     "policy_version": 1, "rules": [], "score": 0.1, "status": rnd.choice([200] * 8 + [404, 503]),
                     "stream": False, "latency_ms": rnd.uniform(5, 900),
                     "ttft_ms": rnd.uniform(1, 90) if rnd.random() < 0.7 else None,
                     "prompt_tokens": rnd.choice([None, 40, 120]), "completion_tokens": rnd.choice([None, 7, 300]),
                     "retries": 0, "escalated": False, "error": None, "replay": None})
    return rows


def table_rows(conn, sql: str) -> dict[tuple, dict]:
    res = conn.execute(text(sql))
    out = {}
    for r in res.mappings():
        out[tuple(r[k] for k in KEY)] = {c: float(r[c]) for c in COLUMNS if c not in KEY}
    return out


def assert_rollup_matches_log(engine) -> int:
    with engine.connect() as c:
        rollup = table_rows(c, f"SELECT {', '.join(COLUMNS)} FROM request_stats_minute")
        truth = table_rows(c, rollup_select_sql(engine.dialect.name))
    assert rollup.keys() == truth.keys()
    for key, want in truth.items():
        assert rollup[key] == pytest.approx(want, rel=1e-9), key
    return len(truth)


def test_writer_keeps_rollup_equal_to_group_by(engine):
    writer = RequestLogWriter(engine, batch_size=40)
    first, later = make_rows(300, seed=1), make_rows(90, seed=2)
    for r in first:
        writer.add(r)
    asyncio.run(writer.flush())
    for r in later:  # a later flush into the same minutes: the upsert adds, not replaces
        writer.add(r)
    asyncio.run(writer.flush())
    assert writer.written == 390 and writer.write_errors == 0
    keys = assert_rollup_matches_log(engine)
    batches = [first[i:i + 40] for i in range(0, 300, 40)] + [later[i:i + 40] for i in range(0, 90, 40)]
    # the batches' keys add up to more than the rollup holds: the same (minute, key) came in several batches
    assert sum(len(minute_stats(b)) for b in batches) > keys + 100
    with engine.connect() as c:
        assert c.execute(text("SELECT SUM(requests) FROM request_stats_minute")).scalar_one() == 390
        assert c.execute(text("SELECT COUNT(*) FROM request_stats_minute WHERE tier = ''")).scalar_one() > 0


def test_failed_batch_leaves_rollup_untouched(engine):
    """The failed batch is split until the bad row is alone: the rollup counts exactly the rows that committed."""
    writer = RequestLogWriter(engine, batch_size=50)
    for r in make_rows(20, seed=3):
        writer.add(r)
    asyncio.run(writer.flush())
    bad = make_rows(10, seed=4)
    bad[5]["request_id"] = None  # NOT NULL: the batch insert fails after the rows were aggregated
    for r in bad:
        writer.add(r)
    asyncio.run(writer.flush())
    assert writer.dropped_by_reason == {"rejected": 1} and not writer.buffer and writer.written == 29
    with engine.connect() as c:
        assert c.execute(text("SELECT SUM(requests) FROM request_stats_minute")).scalar_one() == 29
    assert_rollup_matches_log(engine)


def test_rows_at_the_end_of_a_minute_stay_in_that_minute(engine):
    """SQLite's date functions round to the millisecond: a row logged at :59.9997 must count in its own minute in
    the rollup and in the GROUP BY alike."""
    writer = RequestLogWriter(engine, batch_size=50)
    start = utcnow().replace(second=0, microsecond=0) - timedelta(minutes=3)
    rows = make_rows(6, seed=6)
    for i, (r, us) in enumerate(zip(rows, [999_500, 999_700, 999_999, 0, 400, 999_499])):
        r.update(ts=start + timedelta(minutes=i % 2, seconds=59, microseconds=us), model="m", tier="int4",
                 deployment="d", arm=None)
        writer.add(r)
    asyncio.run(writer.flush())
    assert writer.written == 6
    assert assert_rollup_matches_log(engine) == 2  # two minutes, one key


def test_minute_stats_aggregates_per_minute_and_key():
    now = utcnow().replace(second=30, microsecond=0)
    base = {"model": "m", "tier": "int4", "deployment": "d", "arm": None, "prompt_tokens": None}
    stats = minute_stats([
        dict(base, ts=now, status=200, latency_ms=10.0, ttft_ms=None, completion_tokens=5),
        dict(base, ts=now + timedelta(seconds=20), status=503, latency_ms=30.0, ttft_ms=4.0, completion_tokens=None),
        dict(base, ts=now + timedelta(seconds=40), status=429, latency_ms=20.0, ttft_ms=2.0, completion_tokens=1),
    ])
    assert [(s["minute"] - stats[0]["minute"], s["requests"]) for s in stats] == [(0, 2), (60, 1)]
    first = stats[0]
    assert first["arm"] == "" and first["errors_5xx"] == 1 and first["errors_4xx"] == 0
    assert (first["latency_ms_sum"], first["latency_ms_max"], first["ttft_ms_sum"], first["ttft_count"]) == \
        (40.0, 30.0, 4.0, 1)
    assert stats[1]["errors_4xx"] == 1 and stats[1]["minute"] % 60 == 0


def test_migration_backfills_rollup_from_existing_rows(db_url):
    eng = make_engine(db_url)
    try:
        cfg = alembic_config(eng)
        command.upgrade(cfg, "0101_pin_deployment")  # request_log exists, the rollup does not yet
        cols = [c for c in make_rows(1, 0)[0] if c != "replay"]  # replay arrives with 0501 (users branch)
        rows = [{c: r[c] for c in cols} | {"rules": "[]"} for r in make_rows(250, seed=5, minutes=90)]
        with eng.begin() as c:
            c.execute(text(f"INSERT INTO request_log ({', '.join(cols)}) VALUES ({', '.join(':' + x for x in cols)})"),
                      rows)
        init_db(eng)  # every head, 0102 included
        keys = assert_rollup_matches_log(eng)
        assert keys > 60  # 90 minutes of rows: many minutes, all backfilled
    finally:
        eng.dispose()
