"""`quantroute rollout ...` on a real SQLite file and policies directory (no router): the commands are thin,
so this checks the options reach the service and the status is printed."""

from __future__ import annotations

from click.testing import CliRunner

from quantroute.cli.rollout import rollout

from tests.rollout.conftest import CAND, MODEL, record_eval, record_staircase


def run(policies, db_engine, *args: str):
    return CliRunner().invoke(rollout, [*args, "--policies", str(policies), "--db", str(db_engine.url)])


def test_start_with_a_target_concurrency(policies, db_engine):
    record_eval(db_engine, passed=True)
    record_staircase(db_engine, ok_up_to=8)
    res = run(policies, db_engine, "start", MODEL, "--candidate", CAND, "--target-concurrency", "16",
              "--by", "alice")
    assert res.exit_code == 0, res.output
    assert "target concurrency 16" in res.output
    assert "staircase_load_test" in res.output and "no staircase run of " + CAND + " passed at concurrency 16" \
        in res.output
    res = run(policies, db_engine, "status", MODEL, "--json")
    assert res.exit_code == 0 and '"target_concurrency": 16' in res.output


def test_a_target_concurrency_below_one_is_a_usage_error(policies, db_engine):
    res = run(policies, db_engine, "start", MODEL, "--candidate", CAND, "--target-concurrency", "0", "--by", "alice")
    assert res.exit_code == 2 and "--target-concurrency" in res.output


def test_a_refusal_prints_one_line_and_exits_1(policies, db_engine):
    res = run(policies, db_engine, "step", MODEL, "--by", "alice")
    assert res.exit_code == 1 and "refused: no rollout of 'llama3-8b' in progress" in res.output
