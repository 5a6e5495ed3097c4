"""`quantroute shadow report` on stored pairs, the guard's per-arm facts and retention of pairs."""

from __future__ import annotations

import shutil
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from quantroute.cli.main import cli
from quantroute.clock import utcnow
from quantroute.db import shadow_pair
from quantroute.db.engine import init_db, make_engine
from quantroute.rollout.facts import agreement_window
from tests.shadow.seed import DEPS, seed_pairs

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def db(tmp_path):
    url = f"sqlite:///{tmp_path / 'q.db'}"
    engine = make_engine(url)
    init_db(engine)
    shutil.copytree(REPO / "policies", tmp_path / "policies", ignore=shutil.ignore_patterns("active"))
    yield url, engine, tmp_path / "policies"
    engine.dispose()


def test_report_prints_rates_trend_and_both_kinds_of_suggestion(db):
    url, engine, policies = db
    seed_pairs(engine, rule="casual-chat", served="int4", shadow="fp16", n=40, agree=20)
    seed_pairs(engine, rule="greedy-structured", served="fp16", shadow="fp8", n=200, agree=200)
    out = CliRunner().invoke(cli, ["shadow", "report", "--db", url, "--policies", str(policies)],
                             env={"COLUMNS": "250"})
    assert out.exit_code == 0, out.output
    text = out.output
    assert "240 compared shadow pairs" in text and "By deployment pair" in text and "Trend" in text
    assert "casual-chat" in text and "20/40 shadow pairs agree (50.0%" in text
    raise_part, lower_part = text.split("Candidates to raise")[1].split("Candidates to lower")
    assert "casual-chat" in raise_part and "6 (alone: fp16)" in raise_part
    assert "greedy-structured" in lower_part and "3 (alone: fp8)" in lower_part


def test_report_as_json_and_with_no_pairs(db):
    url, engine, policies = db
    empty = CliRunner().invoke(cli, ["shadow", "report", "--db", url, "--policies", str(policies)])
    assert empty.exit_code == 0 and "no compared shadow pairs" in empty.output
    seed_pairs(engine, rule="casual-chat", served="int4", shadow="fp16", n=5, agree=5)
    out = CliRunner().invoke(cli, ["shadow", "report", "--db", url, "--policies", str(policies), "--json"])
    assert out.exit_code == 0 and '"pairs": 5' in out.output
    bad = CliRunner().invoke(cli, ["shadow", "report", "--db", url, "--since", "soon"])
    assert bad.exit_code == 2 and "--since" in bad.output


def test_agreement_window_counts_the_arm_against_the_reference_tier_only(db):
    _, engine, _ = db
    cand = "llama3-8b-awq-w4a16-v2"
    seed_pairs(engine, rule="r", served="int4", shadow="fp16", n=10, agree=7, arm="candidate", served_deployment=cand)
    seed_pairs(engine, rule="r", served="int4", shadow="fp16", n=4, agree=4, arm="baseline")
    seed_pairs(engine, rule="r", served="int4", shadow="int8", n=6, agree=0, arm="candidate", served_deployment=cand)
    seed_pairs(engine, rule="r", served="int4", shadow="fp16", n=3, agree=0, arm="direct", served_deployment=cand)
    seed_pairs(engine, rule="r", served="int4", shadow="fp16", n=5, agree=0, arm="candidate", served_deployment=cand,
               age_s=3600)
    start, end = utcnow() - timedelta(minutes=5), utcnow()
    a = agreement_window(engine, model="llama3-8b", deployment=cand, arm="candidate", reference_tier="fp16",
                         start=start, end=end)
    b = agreement_window(engine, model="llama3-8b", deployment=DEPS["int4"], arm="baseline", reference_tier="fp16",
                         start=start, end=end)
    assert (a.pairs, a.agree, b.pairs, b.agree) == (10, 7, 4, 4)


def test_pairs_follow_the_request_logs_retention(db):
    url, engine, _ = db
    seed_pairs(engine, rule="r", served="int4", shadow="fp16", n=3, agree=3, age_s=3 * 86400)
    seed_pairs(engine, rule="r", served="int4", shadow="fp16", n=2, agree=2)
    out = CliRunner().invoke(cli, ["db", "prune", "--older-than", "1d", "--db", url])
    assert out.exit_code == 0 and "and 3 shadow pair(s)" in out.output, out.output
    assert shadow_pair.count_before(engine, utcnow()) == 2


def test_report_says_none_when_no_rule_qualifies(db):
    url, engine, policies = db
    seed_pairs(engine, rule="casual-chat", served="int4", shadow="fp16", n=40, agree=40)
    out = CliRunner().invoke(cli, ["shadow", "report", "--db", url, "--policies", str(policies)],
                             env={"COLUMNS": "250"})
    assert out.exit_code == 0
    assert ">= 30 pairs): none" in out.output and out.output.count(": none") == 2
