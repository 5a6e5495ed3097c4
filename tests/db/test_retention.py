"""Request-log retention (`quantroute db prune`): old raw rows go in batches, the per-minute rollup keeps their
counts (so the dashboard's long windows still show the traffic), and bad ages are refused with the option named.
Runs on SQLite and, with QUANTROUTE_TEST_POSTGRES set, on PostgreSQL."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from click.testing import CliRunner
from sqlmodel import select

from dashboard import queries
from quantroute.cli.main import cli
from quantroute.clock import utcnow
from quantroute.db import request_log
from quantroute.db.audit import AuditEvent
from quantroute.db.engine import session as db_session
from quantroute.db.request_stats import RequestStatsMinute
from quantroute.router.requestlog.writer import RequestLogWriter

HOURS_BACK = (0.2, 0.5, 3, 30, 50, 80)  # six rows per age, one age per tier mix


@pytest.fixture
def logged(engine):
    """36 requests written through the router's writer at ages from 12 minutes to 80 hours."""
    now = utcnow()
    writer = RequestLogWriter(engine, batch_size=7)
    for h in HOURS_BACK:
        for i in range(6):
            writer.add({"ts": now - timedelta(hours=h, seconds=i), "request_id": f"{h}-{i}", "session_key": None,
                        "model": "llama3-8b", "deployment": "dep", "node": None, "tier": "int4" if i % 2 else "fp16",
                        "arm": None, "policy_version": 1, "rules": [], "score": 0.0, "status": 200, "stream": False,
                        "latency_ms": 50.0, "ttft_ms": 5.0, "prompt_tokens": 10, "completion_tokens": 20,
                        "retries": 0, "escalated": False, "error": None, "replay": None})
    asyncio.run(writer.flush())
    return engine


def run(engine, *args):
    return CliRunner().invoke(cli, ["db", "prune", *args, "--db", str(engine.url.render_as_string(False))])


def raw_rows(engine) -> int:
    return request_log.count_before(engine, utcnow() + timedelta(days=1))


def test_prune_deletes_old_raw_rows_in_batches_and_keeps_the_rollup(logged):
    engine = logged
    before = queries.tier_share(engine, window_s=100 * 3600)
    assert before["requests"].sum() == 36
    dry = run(engine, "--older-than", "1d", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "would delete 18 request_log row(s)" in dry.output and raw_rows(engine) == 36

    out = run(engine, "--older-than", "1d", "--batch", "5")  # 18 rows in 4 batches
    assert out.exit_code == 0, out.output
    assert "deleted 18 request_log row(s)" in out.output
    assert raw_rows(engine) == 18
    assert request_log.count_before(engine, utcnow() - timedelta(hours=24)) == 0
    after = queries.tier_share(engine, window_s=100 * 3600)  # a long window reads the rollup: nothing lost
    assert after.set_index("tier")["requests"].to_dict() == before.set_index("tier")["requests"].to_dict()
    assert queries.tier_share(engine, window_s=3600, source="raw")["requests"].sum() == 12  # recent detail kept
    with db_session(engine) as s:
        ev = s.exec(select(AuditEvent).where(AuditEvent.action == "db.prune")).one()
    assert ev.actor == "retention" and ev.detail["request_log_rows"] == 18 and ev.detail["rollup_rows"] is None


def test_prune_of_the_rollup_drops_only_minutes_older_than_its_own_age(logged):
    engine = logged
    cut = int((utcnow() - timedelta(days=2)).timestamp()) // 60 * 60
    with db_session(engine) as s:  # the 50 h and 80 h rows: two tiers, each age over one or two minutes
        old = len(s.exec(select(RequestStatsMinute.minute).where(RequestStatsMinute.minute < cut)).all())
    assert 4 <= old <= 8
    out = run(engine, "--older-than", "2h", "--rollup-older-than", "2d", "--by", "ops")
    assert out.exit_code == 0, out.output
    assert "deleted 24 request_log row(s)" in out.output and f"and {old} rollup row(s)" in out.output
    assert raw_rows(engine) == 12
    assert queries.tier_share(engine, window_s=100 * 3600)["requests"].sum() == 24  # 0.2..50 h still counted
    with db_session(engine) as s:
        minutes = s.exec(select(RequestStatsMinute.minute)).all()
    assert min(minutes) >= cut


@pytest.mark.parametrize("args,option,words", [
    (["--older-than", "30"], "--older-than", "give a number and a unit"),
    (["--older-than", "ten days"], "--older-than", "e.g. 30d"),
    (["--older-than", "10m"], "--older-than", "under 1h"),
    (["--older-than", "7d", "--rollup-older-than", "1d"], "--rollup-older-than", "shorter than --older-than"),
    (["--older-than", "7d", "--batch", "0"], "--batch", "0 is not in the range x>=1"),
])
def test_bad_ages_are_refused_naming_the_option_and_nothing_is_deleted(logged, args, option, words):
    out = run(logged, *args)
    assert out.exit_code == 2 and option in out.output and words in out.output, out.output
    assert raw_rows(logged) == 36
