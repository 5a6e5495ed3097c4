"""The policy CLI as a person uses it: exit codes and the messages they read."""

import json
import shutil

import yaml
from click.testing import CliRunner

from quantroute.cli.main import cli
from tests.conftest import REPO, add_users


def run(*args, input=None, token=None):
    env = {"QUANTROUTE_TOKEN": token} if token else None
    return CliRunner().invoke(cli, list(args), input=input, catch_exceptions=False, env=env)


def tokens(db: str, **roles: str) -> dict[str, str]:
    """Users in the CLI's database and a personal access token for each."""
    from quantroute.auth import issue_token
    from quantroute.db.engine import init_db, make_engine

    engine = make_engine(db)
    init_db(engine)
    add_users(engine, **roles)
    out = {name: issue_token(engine, name) for name in roles}
    engine.dispose()
    return out


def test_validate_ok_and_broken(tmp_path):
    ok = run("policy", "validate", str(REPO / "policies/policy-0001.yaml"))
    assert ok.exit_code == 0 and ok.output.startswith("ok:") and "15 rules" in ok.output
    data = yaml.safe_load((REPO / "policies/policy-0001.yaml").read_text())
    data["rules"][2]["when"]["all"][0]["temperature"]["max"] = "warm"
    data["thresholds"].append({"min_score": 9, "tier": "int4"})
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    res = run("policy", "validate", str(bad))
    assert res.exit_code == 1
    assert "rules[2].when.all[0].temperature.max" in res.output
    assert "not monotone" in res.output


def test_explain_json_and_headers(tmp_path):
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"model": "llama3-8b", "temperature": 0,
                               "messages": [{"role": "user", "content": "Solve 3x + 5 = 20 step by step"}]}))
    res = run("policy", "explain", "--request", str(req), "--policy", str(REPO / "policies/policy-0001.yaml"), "--json")
    out = json.loads(res.output)
    assert out["tier"] == "fp16" and out["score"] >= 6 and out["rules"][0]["name"] == "greedy-structured"
    res = run("policy", "explain", "--request", "-", "--policy", str(REPO / "policies/policy-0001.yaml"),
              "--header", "x-priority:2",
              input=json.dumps({"model": "m", "messages": [{"role": "user", "content": "a poem"}]}))
    assert res.exit_code == 0 and "low-priority" in res.output
    bad = run("policy", "explain", "--request", "-", "--policy", str(REPO / "policies/policy-0001.yaml"),
              input=json.dumps({"model": "m", "messages": "hi"}))
    assert bad.exit_code == 1 and "messages" in bad.output


def test_version_workflow(tmp_path):
    pdir = tmp_path / "policies"
    shutil.copytree(REPO / "policies", pdir, ignore=shutil.ignore_patterns("active", "policy-000[2-9].yaml"))
    db = f"sqlite:///{tmp_path / 'q.db'}"
    common = ["--policies", str(pdir), "--db", db]
    assert run("db", "upgrade", "--db", db).exit_code == 0
    data = yaml.safe_load((pdir / "policy-0001.yaml").read_text())
    data["sessions"]["max_wait_ms"] = 750
    draft = tmp_path / "draft.yaml"
    draft.write_text(yaml.safe_dump(data))
    t = tokens(db, olga="operator", rex="reviewer")
    assert run("policy", "new", "--file", str(draft), "-m", "shorter waits", *common, token=t["olga"]).exit_code == 0
    assert "~ sessions.max_wait_ms: 2000 -> 750" in run("policy", "diff", "1", "2", *common).output
    refused = run("policy", "activate", "2", *common, token=t["olga"])
    assert refused.exit_code == 1 and "not approved" in refused.output
    assert run("policy", "approve", "2", *common, token=t["olga"]).exit_code == 1
    assert run("policy", "approve", "2", *common, token=t["rex"]).exit_code == 0
    assert run("policy", "activate", "2", *common, token=t["olga"]).exit_code == 0
    assert (pdir / "active").read_text().strip() == "2"
    hist = run("policy", "history", *common).output
    assert "ACTIVE" in hist and "rex" in hist
    rb = run("policy", "rollback", "--reason", "p95 up", *common, token=t["olga"])
    assert rb.exit_code == 0 and "version 1 active" in rb.output


def test_import_and_verify(tmp_path):
    db = f"sqlite:///{tmp_path / 'q.db'}"
    git = tmp_path / "git"
    git.mkdir()
    (git / "policy-0001.yaml").write_text((REPO / "policies" / "policy-0001.yaml").read_text())
    common = ["--policies", str(tmp_path / "mirror"), "--db", db]
    assert run("db", "upgrade", "--db", db).exit_code == 0
    ci = tokens(db, ci="operator")["ci"]
    first = run("policy", "import", str(git), *common, token=ci)
    assert first.exit_code == 0 and "policy-0001.yaml: imported" in first.output
    again = run("policy", "import", str(git), *common, token=ci)
    assert again.exit_code == 0 and "policy-0001.yaml: unchanged" in again.output
    assert run("policy", "verify", *common).exit_code == 0
    mirrored = tmp_path / "mirror" / "policy-0001.yaml"
    mirrored.write_text(mirrored.read_text().replace("max_wait_ms: 2000", "max_wait_ms: 5"))
    checked = run("policy", "verify", *common)
    assert checked.exit_code == 1 and "edited by hand" in checked.output
    refused = run("policy", "import", str(tmp_path / "mirror"), *common, token=ci)
    assert refused.exit_code == 1 and "refused" in refused.output and "immutable" in refused.output
    assert "max_wait_ms: 2000" in run("policy", "show", "1", *common).output
