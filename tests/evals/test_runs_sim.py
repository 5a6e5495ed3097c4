"""End to end: the eval runner against the simulated fleet (real HTTP on loopback), a real SQLite DB and the CLI."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from quantroute.auth import issue_token
from quantroute.cli.eval import eval_group
from quantroute.db.engine import init_db, make_engine
from quantroute.evals.gate import GateConfig
from quantroute.evals.runner import RunSettings
from quantroute.evals.runs import compare_runs, list_runs, load_run, start_run
from quantroute.evals.suite import load_suite
from quantroute.sim.runner import running_fleet
from quantroute.tiers import Tier
from tests.conftest import add_users


@pytest.fixture(scope="module")
def fleet():
    with running_fleet("data/fleet.yaml", time_scale=0.005) as rf:
        yield rf


@pytest.fixture(scope="module")
def golden():
    return load_suite("data/evals/golden.jsonl")


def run(fleet, suite, engine, tmp_path, candidate, **gate):
    return start_run(suite=suite, baseline=fleet.urls["fp16-a"], candidate=fleet.urls[candidate], engine=engine,
                     settings=RunSettings(concurrency=16), gate=GateConfig(**gate), runs_dir=tmp_path)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_int4_vs_fp16_fails_on_math_and_is_stored(fleet, golden, engine, tmp_path):
    seen = []
    view = start_run(suite=golden, baseline=fleet.urls["fp16-a"], candidate=fleet.urls["int4-a"], engine=engine,
                     settings=RunSettings(concurrency=16), runs_dir=tmp_path,
                     progress=lambda done, total: seen.append((done, total)))
    assert seen[-1] == (2 * len(golden.items), 2 * len(golden.items))
    run = view.run
    assert (run["baseline_deployment"], run["candidate_deployment"]) == ("llama3-8b-fp16", "llama3-8b-awq-w4a16")
    assert run["candidate_tier"] == "int4" and run["suite_hash"] == golden.hash and run["code_version"]
    assert not view.verdict.passed
    failing = {r.scope for r in view.verdict.reasons}
    assert "math" in failing
    assert view.verdict.next_tier == Tier.int8 and view.verdict.next_tier_passing_run is None
    assert any(d.category == "math" for d in view.failing_only_in_candidate)
    # Stored: every result in the DB and the JSONL file; loading recomputes the same statistics.
    lines = [json.loads(x) for x in Path(run["results_path"]).read_text().splitlines()]
    assert [x["type"] for x in (lines[0], lines[-1])] == ["run", "summary"]
    assert sum(x["type"] == "result" for x in lines) == 2 * len(golden.items)
    again = load_run(engine, run["id"])
    assert again.report == view.report and again.verdict == view.verdict
    # The gate drops into CI: `eval report` exits 1 and names the category.
    out = CliRunner().invoke(eval_group, ["report", str(run["id"]), "--db", str(engine.url)])
    assert out.exit_code == 1 and "math pass rate dropped" in out.output and "try the int8 tier" in out.output


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_passing_run_at_the_next_tier_is_named_and_runs_compare(fleet, golden, engine, tmp_path):
    int8 = run(fleet, golden, engine, tmp_path, "int8-a", threshold=0.2)  # loose gate: a pass at int8
    assert int8.verdict.passed
    int4 = run(fleet, golden, engine, tmp_path, "int4-a")
    assert int4.verdict.next_tier == Tier.int8 and int4.verdict.next_tier_passing_run == int8.run["id"]
    cmp = compare_runs(engine, int8.run["id"], int4.run["id"])
    assert cmp.same_suite and any("candidate deployment" in c for c in cmp.arm_changes)
    assert any(c.arm == "candidate" for c in cmp.item_changes)
    assert [r.id for r in list_runs(engine)] == [int4.run["id"], int8.run["id"]]


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_fp8_vs_fp16_passes(fleet, golden, engine, tmp_path):
    view = run(fleet, golden, engine, tmp_path, "fp8-a")
    assert view.verdict.passed, view.verdict.summary()


def test_cli_run_exit_code_and_table(fleet, tmp_path, sqlite_url):
    args = ["run", "--suite", "data/evals/smoke.jsonl", "--baseline", fleet.urls["fp16-a"] + "#llama3-8b-fp16",
            "--candidate", fleet.urls["int4-a"], "--db", sqlite_url, "--runs-dir", str(tmp_path),
            "--policies-dir", str(tmp_path / "none")]
    engine = make_engine(sqlite_url)
    init_db(engine)
    add_users(engine, olga="operator")
    env = {"QUANTROUTE_TOKEN": issue_token(engine, "olga")}  # free URLs: an operator's run, recorded as such
    loose = CliRunner().invoke(eval_group, args + ["--threshold", "1", "--validity-threshold", "1"], env=env)
    assert loose.exit_code == 0, loose.output
    assert "gate: PASS" in loose.output and "overall" in loose.output and "McNemar p" in loose.output
    bad = CliRunner().invoke(eval_group, ["run", "--suite", "data/evals/smoke.jsonl", "--baseline", "ftp://x",
                                          "--candidate", fleet.urls["int4-a"], "--db", sqlite_url], env=env)
    assert bad.exit_code == 1 and "URL[#deployment]" in bad.output
