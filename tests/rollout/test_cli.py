"""`quantroute rollout ...` on a real SQLite file and policies directory (no router): the commands are thin,
so this checks the options reach the service and the status is printed."""

from __future__ import annotations

from click.testing import CliRunner

from quantroute.auth import issue_token
from quantroute.cli.rollout import rollout
from tests.rollout.conftest import CAND, MODEL, record_eval, record_staircase


def run(policies, db_engine, *args: str, as_user: str = "alice"):
    """As `as_user`, through a personal access token (the CLI never takes a name on the command line)."""
    token = issue_token(db_engine, as_user)
    return CliRunner().invoke(rollout, [*args, "--policies", str(policies), "--db", str(db_engine.url)],
                              env={"QUANTROUTE_TOKEN": token})


def test_start_with_a_target_concurrency(policies, db_engine):
    record_eval(db_engine, passed=True)
    record_staircase(db_engine, ok_up_to=8)
    res = run(policies, db_engine, "start", MODEL, "--candidate", CAND, "--target-concurrency", "16")
    assert res.exit_code == 0, res.output
    assert "target concurrency 16" in res.output
    assert "staircase_load_test" in res.output and "no staircase run of " + CAND + " passed at concurrency 16" \
        in res.output
    res = run(policies, db_engine, "status", MODEL, "--json")
    assert res.exit_code == 0 and '"target_concurrency": 16' in res.output


def test_a_target_concurrency_below_one_is_a_usage_error(policies, db_engine):
    res = run(policies, db_engine, "start", MODEL, "--candidate", CAND, "--target-concurrency", "0")
    assert res.exit_code == 2 and "--target-concurrency" in res.output


def test_a_refusal_prints_one_line_and_exits_1(policies, db_engine):
    res = run(policies, db_engine, "step", MODEL)
    assert res.exit_code == 1 and "refused: no rollout of 'llama3-8b' in progress" in res.output


def test_guards_is_a_view_and_says_whether_a_controller_acts(policies, db_engine):
    """`rollout guards` no longer acts: a breaching verdict is shown and the rollout stays where it is; the
    controller (absent here) is what rolls back, and the view says so."""
    from quantroute.clock import utcnow
    from quantroute.db.engine import session as db_session
    from quantroute.db.request_log import RequestLog
    from quantroute.policy.store import PolicyStore
    from tests.rollout.conftest import progressing_rollout

    svc = progressing_rollout(PolicyStore(policies, db_engine), db_engine)
    with db_session(db_engine) as s:
        s.add_all(RequestLog(ts=utcnow(), model=MODEL, deployment=CAND, arm="candidate", status=500, latency_ms=5.0)
                     for _ in range(30))
        s.commit()
    res = run(policies, db_engine, "guards", MODEL)
    assert res.exit_code == 0, res.output
    assert "progressing at 10%: breach: error_rate" in res.output
    assert "controller: none has run against this database - canaries are not watched" in res.output
    assert svc.status(MODEL).phase == "progressing"
